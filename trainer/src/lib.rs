//! `arbor-trainer`: the attached learner (libtorch through `tch`).
//!
//! - [`features`]: hashed n-gram features of observations and actions.
//! - [`model`]: the DRRN-style policy network (scores observation/candidate pairs).
//! - [`learner`]: PPO, GRPO and BC losses, Adam with checkpointed state.
//! - [`policy`]: the network as a rollout policy; rollout data as samples.
//! - [`attached`]: rollout workers and the learner running concurrently.
//! - [`experiment`]: `arbor train --compare` (three arms, equal budget).
//! - [`ground_truth`]: exact credit by dynamic programming over a task's
//!   states, and estimators scored against it (`arbor credit eval`).
#![deny(missing_docs)]

pub mod attached;
pub mod experiment;
pub mod features;
pub mod ground_truth;
pub mod learner;
pub mod model;
pub mod plot;
pub mod policy;

pub use arbor_rollout as rollout;

/// The device training runs on: CUDA when available, else the CPU.
pub fn device() -> tch::Device {
    tch::Device::cuda_if_available()
}
