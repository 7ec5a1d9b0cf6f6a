//! `arbor-envs`: tasks, verifiers and bundled task suites.
//!
//! Empty until the environments issue lands.
#![deny(missing_docs)]

pub use arbor_rollout as rollout;
