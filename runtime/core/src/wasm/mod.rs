//! The WebAssembly backend (feature `wasm`): live interpreter sessions whose
//! *whole* state — linear memory, mutable globals, the guest-visible WASI
//! state and the workspace — is snapshotted, forked and replayed.
//!
//! A guest is a `wasm32-wasip1` reactor that speaks the Arbor guest
//! protocol (see `runtime/core/guests/python`, a RustPython REPL):
//!
//! - `arbor_init() -> u32` (optional), run once at import;
//! - `arbor_input(len: u32) -> ptr`, a buffer for the next step's input;
//! - `arbor_step() -> u32`, run the buffered input; 0 ok, 1 an exception
//!   (reported on stderr), 2 input not UTF-8, other values guest-defined.
//!
//! Between two calls no guest stack is live, so the state is exactly what
//! a [`WasmSnapshot`] records:
//!
//! - **memory**: 64 KiB pages as blob objects deduplicated in the store,
//!   listed by a page index blob; the *memory hash* (blake3 of the page
//!   hashes) names the content. Snapshot cost follows the pages dirtied
//!   since the parent (found in `/proc/self/pagemap`, see [`memory`]);
//! - **globals**: every mutable global, exported by a one-time rewrite of
//!   the module ([`rewrite`]);
//! - **WASI state**: arguments, environment, preopens, working directory,
//!   virtual clocks and the seeded generator's position ([`wasi`]);
//! - **workspace**: a layer chain in the store, as for native snapshots,
//!   materialised into a directory preopened as `/workspace`.
//!
//! A fork maps the snapshot's memory image copy-on-write (`MAP_PRIVATE`)
//! into a fresh instance of the module compiled once per machine
//! ([`engine`]'s cache), so its cost does not depend on the memory's size.
//! Determinism: the clocks and generator are virtual, there is no network,
//! CPU is metered with fuel (deterministic) plus a wall-clock epoch deadline
//! (only as a safety net), so replaying a chain reproduces every memory hash
//! ([`WasmRuntime::replay`]). A trap, running out of fuel, the wall-clock
//! deadline or the memory cap end the session with a [`StepOutcome`] —
//! an agent-caused result, never an error of the runtime.
//!
//! WASM snapshots are [`ObjectKind::WasmManifest`] objects holding a
//! [`WasmManifest`] (JSON), listed in the store's snapshot index beside
//! native snapshots, so tags, `rm`, `gc` and `fsck` treat both alike (the
//! store reads what a session references without this feature, see
//! [`crate::store::wasm_refs`]). The base of every sandbox a live process
//! has open is a gc root (`run/<pid>-wasmroots/base`).
//!
//! [`ObjectKind::WasmManifest`]: crate::store::object::ObjectKind::WasmManifest

pub mod engine;
pub mod inspect;
pub mod memory;
pub mod pages;
pub mod rewrite;
pub mod wasi;

mod manifest;
mod replay;
mod runtime;
mod sandbox;
mod snapshot;
#[cfg(test)]
mod tests;
mod workspace;

pub use manifest::{GlobalValue, StepDigest, StepOutcome, WasmAction, WasmManifest};
pub use runtime::{CompileReport, WasmRuntime};
pub use sandbox::{SessionStep, WasmSandbox};
pub use snapshot::WasmSnapshot;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::layer::LayerError;
use crate::store::StoreError;
use crate::store::object::LayerId;

/// Errors of the WebAssembly backend. Guest misbehaviour is not an error:
/// it is a [`StepOutcome`].
#[derive(Debug, thiserror::Error)]
pub enum WasmError {
    /// The module cannot be used as a guest.
    #[error("unsupported guest module: {0}")]
    UnsupportedModule(String),
    /// wasmtime failed (engine, compilation, instantiation).
    #[error("wasmtime: {0}")]
    Engine(String),
    /// Mapping or creating linear memory failed.
    #[error("cannot {what}")]
    Memory {
        /// What was being done.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The compiled-module cache could not be written.
    #[error("cannot {what}")]
    Cache {
        /// What was being done.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A workspace layer operation failed.
    #[error(transparent)]
    Layer(#[from] LayerError),
    /// A snapshot record is malformed or inconsistent.
    #[error("bad WASM snapshot: {0}")]
    BadSnapshot(String),
    /// The sandbox's workspace directory failed.
    #[error("workspace: {0}")]
    Workspace(String),
    /// The guest does not speak the Arbor guest protocol.
    #[error("guest protocol: {0}")]
    GuestProtocol(String),
    /// Bad input from the caller (too large, bad path).
    #[error("{0}")]
    InvalidInput(String),
}

/// Result of the WebAssembly backend.
pub type Result<T, E = WasmError> = std::result::Result<T, E>;

/// Failpoints of a session snapshot (the seal protocol, see
/// [`crate::store::failpoint`]), in order; the native ones are
/// [`crate::snapshot::FAILPOINTS`].
pub const FAILPOINTS: &[&str] = crate::seal::SESSION_FAILPOINTS;

/// Version of [`WasmManifest`].
pub const MANIFEST_FORMAT: u32 = 1;
/// Largest step input accepted (16 MiB).
pub const MAX_INPUT: usize = 16 << 20;

/// Per-step limits of a sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WasmLimits {
    /// Fuel (about one unit per WebAssembly instruction) for one step.
    pub fuel_per_step: u64,
    /// Wall-clock deadline of one step (a safety net; fuel is the
    /// deterministic limit).
    pub timeout: Duration,
    /// Largest linear memory, bytes.
    pub memory_bytes: usize,
    /// Bytes of stdout and of stderr kept per step.
    pub output_bytes: usize,
}

impl Default for WasmLimits {
    fn default() -> Self {
        Self {
            fuel_per_step: 20_000_000_000,
            timeout: Duration::from_secs(60),
            memory_bytes: 2 << 30,
            output_bytes: 1 << 20,
        }
    }
}

/// Environment variable naming the Python guest's `.wasm` file.
pub const PYTHON_GUEST_ENV: &str = "ARBOR_PYTHON_GUEST";

/// Where the bundled Python guest is: `$ARBOR_PYTHON_GUEST` if set, else
/// `arbor_python_guest.wasm` next to the running executable (an installed
/// copy), else where `.ci/build-guests` puts it in this source tree.
pub fn python_guest_path() -> PathBuf {
    const NAME: &str = "arbor_python_guest.wasm";
    if let Some(p) = std::env::var_os(PYTHON_GUEST_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(beside) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join(NAME)))
        .filter(|p| p.is_file())
    {
        return beside;
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/wasm-guests/wasm32-wasip1/release")
        .join(NAME)
}

/// Read the bundled Python guest ([`python_guest_path`]), with an error
/// that says how to build it.
///
/// # Errors
/// [`WasmError::InvalidInput`] when the file cannot be read.
pub fn python_guest() -> Result<Vec<u8>> {
    let path = python_guest_path();
    std::fs::read(&path).map_err(|e| {
        WasmError::InvalidInput(format!(
            "the Python guest is not built ({}: {e}); run .ci/build-guests \
             or set {PYTHON_GUEST_ENV}",
            path.display()
        ))
    })
}

/// Options of a [`WasmRuntime`].
#[derive(Clone, Debug, Default)]
pub struct WasmOptions {
    /// Where compiled modules are cached; `None`: [`engine::default_cache_dir`].
    pub cache_dir: Option<PathBuf>,
    /// Do not use the compile cache at all.
    pub no_cache: bool,
    /// Per-step limits of every sandbox.
    pub limits: WasmLimits,
}

/// How a guest is booted by [`WasmRuntime::import`]; recorded in the root
/// snapshot so that replay can boot it again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootSpec {
    /// `argv`.
    pub args: Vec<String>,
    /// Environment variables.
    pub env: Vec<(String, String)>,
    /// Seed of the guest's random generator (hex of 32 bytes).
    pub seed: String,
    /// Whether `/workspace` is preopened.
    pub workspace: bool,
    /// Workspace layers to start from (e.g. those of a native import).
    pub workspace_layers: Vec<LayerId>,
    /// The export run once after `_initialize` (skipped if absent).
    pub init: String,
}

impl BootSpec {
    /// The defaults for the Python guest: `argv = ["python"]`, a fixed
    /// environment, seed 0, an empty `/workspace`, `arbor_init`.
    pub fn python() -> Self {
        Self {
            args: vec!["python".into()],
            env: [
                ("HOME", "/workspace"),
                ("LANG", "C.UTF-8"),
                ("PWD", "/workspace"),
                ("PYTHONHASHSEED", "0"),
                ("TZ", "UTC"),
            ]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
            seed: hex::encode([0u8; 32]),
            workspace: true,
            workspace_layers: Vec::new(),
            init: "arbor_init".into(),
        }
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn engine_err(what: &str, e: impl std::fmt::Display) -> WasmError {
    WasmError::Engine(format!("{what}: {e}"))
}
