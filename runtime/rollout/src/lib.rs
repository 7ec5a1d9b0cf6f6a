//! `arbor-rollout`: environments, policies, rollout trees, branching and credit.
//!
//! - [`env`]: the [`Environment`] trait (implemented by `arbor-envs`), agent
//!   actions, observations, episodes and the layered [`Verdict`].
//!
//! States (tree nodes, episode starts and ends) are the runtime's
//! backend-neutral handles, [`arbor_runtime::AnySnapshot`] and
//! [`arbor_runtime::AnySandbox`], so trees, credit and the attached trainer
//! work the same on native snapshots and WebAssembly sessions.
//! - [`policy`]: the [`policy::Policy`] trait and the built-in policies
//!   (random, gold, mixture, an external command).
//! - [`llm`]: the LLM policy ([`llm::OpenAiPolicy`], `openai:URL#model`): a
//!   model behind an OpenAI-compatible server, with tool calling and token capture.
//! - [`tree`]: rollout trees (nodes are snapshots, edges actions, leaves verdicts).
//! - [`driver`]: the concurrent driver that grows trees by forking real snapshots.
//! - [`credit`]: Q̂, V̂, advantages, intervals, shaping and GRPO (pure arithmetic).
//! - [`export`]: advantage records, preference pairs, the tree plot, the
//!   streaming interface for an attached trainer.
#![deny(missing_docs)]

pub mod credit;
pub mod driver;
pub mod env;
pub mod export;
pub mod llm;
pub mod policy;
pub mod tree;

pub use arbor_runtime as runtime;
pub use env::{
    AgentAction, EnvError, EnvLimits, EnvObservation, Environment, Episode, EpisodeStep,
    Transition, Verdict,
};
