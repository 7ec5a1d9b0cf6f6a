//! `arbor-runtime`: environment state for agent sandboxes.
//!
//! - [`store`]: the content-addressed, crash-safe, verified object store.
//! - [`layer`]: filesystem layers: trees, merge, diff, materialise, squash.
//! - [`sandbox`]: isolated sandboxes driven by a single-threaded helper process.
//! - [`snapshot`]: sealing a sandbox's changes into a snapshot; forking N sandboxes.
//! - [`digest`]: what the observation digests of actions cover.
//! - [`replay`]: re-executing a chain and reporting where it diverges.
//! - [`parallel`]: the one parallel map (forks, page loads, fanout, validation).
//! - [`state`]: one handle for a state and one for a live fork on either
//!   backend ([`AnySnapshot`], [`AnySandbox`]), with the shared step,
//!   outcome and record vocabulary.
//! - [`Runtime`]: ties them together (the CLI's operations).
//! - `wasm` (feature `wasm`): the WebAssembly backend — live interpreter
//!   sessions snapshotted and forked with their whole memory.
//!
//! No knowledge of tasks, policies or neural networks lives here.
//!
//! # Example: import, fork, run, snapshot, diff
//!
//! ```no_run
//! use std::path::Path;
//!
//! use arbor_runtime::{ExecOptions, Runtime};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let rt = Runtime::open_at("/tmp/arbor-home")?;
//! let base = rt.import(Path::new("./my-repo"), Some("base"))?;
//! // Three sandboxes over the same state, each with its own private changes.
//! for (i, mut sandbox) in base.fork(3)?.into_iter().enumerate() {
//!     let obs = sandbox.exec(
//!         &format!("echo {i} > n.txt && python3 -m pytest -q"),
//!         &ExecOptions::with_timeout_ms(60_000),
//!     )?;
//!     let child = sandbox.snapshot()?; // content-addressed: same state, same id
//!     let diff = rt.diff(&base, &child)?;
//!     println!("fork {i}: exit {:?}, {} added, snapshot {}", obs.code(), diff.added.len(), child.id().short());
//! }
//! // Any id, unique prefix or tag resolves back to the snapshot.
//! assert_eq!(rt.resolve("base")?.id(), base.id());
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod asynchronous;
pub mod bundle;
mod cleanup;
pub mod digest;
#[doc(hidden)]
pub mod fuzzing;
pub mod image;
pub mod layer;
pub mod parallel;
#[cfg(feature = "remote")]
pub mod remote;
pub mod replay;
mod runtime;
pub mod sandbox;
mod seal;
pub mod snapshot;
pub mod state;
pub mod store;
#[cfg(feature = "wasm")]
pub mod wasm;

pub use runtime::{
    DEFAULT_SQUASH_AFTER, DEFAULT_UID_BASE, DEFAULT_WARM_HELPERS, Result, Runtime, RuntimeError,
    RuntimeOptions, WorkspaceBackend, WorkspaceChoice,
};
pub use sandbox::{
    ActionRoot, ExecOptions, Observation, PeerCommand, PeerResult, Sandbox, SandboxError,
};
pub use snapshot::Snapshot;
pub use state::{AnySandbox, AnySnapshot, Backend, Outcome, OutputStream, StepResult};
