//! `arbor-rollout`: environments, policies, rollout trees and credit.
//!
//! - [`env`]: the [`Environment`] trait (implemented by `arbor-envs`), agent
//!   actions, observations, episodes and the layered [`Verdict`].
#![deny(missing_docs)]

pub mod credit;

pub mod env;

pub use arbor_runtime as runtime;
pub use env::{
    AgentAction, EnvError, EnvLimits, EnvObservation, Environment, Episode, EpisodeStep,
    StepResult, Verdict,
};
