//! `arbor-runtime`: environment state for agent sandboxes.
//!
//! - [`store`]: the content-addressed, crash-safe, verified object store.
//! - [`layer`]: filesystem layers: trees, merge, diff, materialise, squash.
//! - [`sandbox`]: isolated sandboxes driven by a single-threaded helper process.
//! - [`snapshot`]: sealing a sandbox's changes into a snapshot; forking N sandboxes.
//! - [`replay`]: re-executing a chain and reporting where it diverges.
//! - [`Runtime`]: ties them together (the CLI's operations).
//! - `wasm` (feature `wasm`): the WebAssembly backend — live interpreter
//!   sessions snapshotted and forked with their whole memory.
//!
//! No knowledge of tasks, policies or neural networks lives here.
#![deny(missing_docs)]

pub mod asynchronous;
mod cleanup;
pub mod layer;
pub mod replay;
mod runtime;
pub mod sandbox;
pub mod snapshot;
pub mod store;
mod sys;
#[cfg(feature = "wasm")]
pub mod wasm;

pub use runtime::{
    Backend, BackendChoice, DEFAULT_SQUASH_AFTER, DEFAULT_UID_BASE, DEFAULT_WARM_HELPERS, Result,
    Runtime, RuntimeError, RuntimeOptions,
};
pub use sandbox::{ExecOptions, Observation, PeerCommand, PeerResult, Sandbox, SandboxError};
pub use snapshot::Snapshot;
