//! `arbor-envs`: the tasks agents solve inside Arbor sandboxes and the
//! verifiers that grade them.
//!
//! - [`task`]: the task format (`task.toml`, a workspace, hidden checks);
//!   `envs/TASKS.md` documents it.
//! - [`suite`]: a folder of tasks and its split manifest (the bundled suite is
//!   `envs/tasks`).
//! - [`verifier`]: [`TaskEnv`], a prepared task implementing
//!   [`arbor_rollout::Environment`], with the layered verifier.
//! - `session` (feature `wasm`): `SessionEnv`, a prepared `backend =
//!   "wasm"` task (a Python session in the WebAssembly guest) and its verifier.
//! - [`skeleton`]: what both kinds of task environment share (root
//!   preparation and caching flow, the episode's flow and its fault
//!   verdict, preparation key, diagnostics, hard constraints, quality).
//! - [`prepared`]: [`PreparedTask`], a task of either backend.
//! - [`canonical`]: the one format (and comparator) of graded Python values.
//! - [`failure`]: why a hidden check failed (a verdict, kept typed).
//! - [`canary`]: the generic attacks every task must score 0 on.
//! - [`validate`]: `arbor task validate`.
//! - [`swe`]: `arbor task import-swe` (SWE-bench instances as tasks).
#![deny(missing_docs)]

pub mod canary;
pub mod canonical;
pub mod failure;
pub mod prepared;
#[cfg(feature = "wasm")]
pub mod session;
pub mod skeleton;
pub mod suite;
pub mod swe;
pub mod task;
pub mod validate;
pub mod verifier;

pub use arbor_rollout as rollout;
pub use prepared::{PreparedTask, environment, prepare};
pub use suite::Suite;
pub use task::{TaskError, TaskImage, TaskSpec, read_image_recipe};
pub use verifier::TaskEnv;
