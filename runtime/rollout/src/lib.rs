//! `arbor-rollout`: environments, policies, rollout trees and credit.
//!
//! Empty until the branched-rollouts issue lands; it exists so the workspace
//! has its final shape and the dependency direction
//! `runtime/core ← runtime/rollout ← {envs, trainer} ← cli` is fixed from the start.
#![deny(missing_docs)]

pub use arbor_runtime as runtime;
