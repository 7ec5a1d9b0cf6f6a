//! `arbor-trainer`: the attached learner (libtorch through `tch`).
//!
//! Empty until the trainer issue lands.
#![deny(missing_docs)]

pub use arbor_rollout as rollout;
