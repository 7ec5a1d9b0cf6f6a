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

pub mod engine;
pub mod inspect;
pub mod memory;
pub mod pages;
pub mod rewrite;
pub mod wasi;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use wasmtime::{Instance, InstancePre, Memory, Module, TypedFunc, Val};

use crate::layer::{LayerError, MaterializeOptions, MergedView, OwnerMap};
use crate::replay::{Divergence, ReplayReport, StepReport};
use crate::store::object::{LayerId, ObjectId, ObjectKind, object_id};
use crate::store::{OwnerMode, Store, StoreError};
use engine::{HostState, Limits, ModuleSource, WasmEngine};
use memory::{MemoryImage, PAGE, SharedRegion, ZERO_PAGE, page_hash};
use wasi::WasiState;

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

/// How one step ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StepOutcome {
    /// The step ran to completion (`arbor_step` returned 0).
    Ok,
    /// The code raised an exception (status 1; traceback on stderr).
    Exception,
    /// `arbor_step` returned another status.
    Status {
        /// The status.
        status: u32,
    },
    /// The guest called `proc_exit`.
    Exited {
        /// Its exit code.
        code: i32,
    },
    /// The guest trapped.
    Trap {
        /// The trap.
        message: String,
    },
    /// The step used up its fuel.
    OutOfFuel,
    /// The step passed its wall-clock deadline.
    Timeout,
    /// The guest tried to grow its memory past the cap.
    MemoryLimit,
    /// The session had already ended; nothing ran.
    Ended,
}

impl StepOutcome {
    /// The step's status in the native vocabulary, the one mapping that
    /// commands, rollout records and exit codes share: 0 ok; 1 an exception
    /// (or a session that had ended); the code of an exit or other status;
    /// signal 6 (abort) for a trap; a timeout for fuel or time; the disk
    /// limit for the memory cap (the resource-limit status).
    pub fn exit_status(&self) -> crate::store::ExitStatus {
        use crate::store::ExitStatus;
        match self {
            Self::Ok => ExitStatus::Code { code: 0 },
            Self::Exception | Self::Ended => ExitStatus::Code { code: 1 },
            Self::Status { status } => ExitStatus::Code {
                code: i32::try_from(*status).unwrap_or(1),
            },
            Self::Exited { code } => ExitStatus::Code { code: *code },
            Self::Trap { .. } => ExitStatus::Signal { signal: 6 },
            Self::OutOfFuel | Self::Timeout => ExitStatus::Timeout,
            Self::MemoryLimit => ExitStatus::DiskLimit,
        }
    }

    /// A short label: `ok`, `exception`, `status N`, `exit N`, `trap`,
    /// `out of fuel`, `timeout`, `memory limit`, `ended`.
    pub fn label(&self) -> String {
        match self {
            Self::Ok => "ok".into(),
            Self::Exception => "exception".into(),
            Self::Status { status } => format!("status {status}"),
            Self::Exited { code } => format!("exit {code}"),
            Self::Trap { .. } => "trap".into(),
            Self::OutOfFuel => "out of fuel".into(),
            Self::Timeout => "timeout".into(),
            Self::MemoryLimit => "memory limit".into(),
            Self::Ended => "ended".into(),
        }
    }

    /// Whether the session can run further steps after this outcome.
    pub fn is_alive(&self) -> bool {
        matches!(
            self,
            StepOutcome::Ok | StepOutcome::Exception | StepOutcome::Status { .. }
        )
    }
}

#[cfg(test)]
mod outcome_tests {
    use super::StepOutcome;

    #[test]
    fn outcomes_map_onto_shell_statuses_once() {
        let cases = [
            (StepOutcome::Ok, 0, "ok"),
            (StepOutcome::Exception, 1, "exception"),
            (StepOutcome::Ended, 1, "ended"),
            (StepOutcome::Status { status: 7 }, 7, "status 7"),
            (StepOutcome::Exited { code: 3 }, 3, "exit 3"),
            (
                StepOutcome::Trap {
                    message: "unreachable".into(),
                },
                134,
                "trap",
            ),
            (StepOutcome::OutOfFuel, 124, "out of fuel"),
            (StepOutcome::Timeout, 124, "timeout"),
            (StepOutcome::MemoryLimit, 125, "memory limit"),
        ];
        for (o, code, label) in cases {
            assert_eq!(o.exit_status().shell_code(), code, "{o:?}");
            assert_eq!(o.label(), label);
        }
        // A status that does not fit an i32 is a plain failure, not a wrap.
        let big = StepOutcome::Status { status: u32::MAX };
        assert_eq!(big.exit_status().shell_code(), 1);
    }
}

/// One recorded action of a WASM session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WasmAction {
    /// Input for `arbor_step` (Python source for the Python guest).
    Step {
        /// The input.
        code: String,
    },
    /// A file written into the workspace by the host.
    WriteFile {
        /// Path relative to `/workspace`.
        path: String,
        /// The blob holding the content.
        content: ObjectId,
    },
    /// A file deleted from the workspace by the host.
    DeleteFile {
        /// Path relative to `/workspace`.
        path: String,
    },
}

impl WasmAction {
    /// One line saying what it did: `>>> x = 1` (a step's input on one
    /// line), `write a.txt`, `delete b` (as [`crate::store::Action::summary`]).
    pub fn summary(&self) -> String {
        match self {
            Self::Step { code } => format!(">>> {}", crate::store::object::one_line(code)),
            Self::WriteFile { path, .. } => format!("write {path}"),
            Self::DeleteFile { path } => format!("delete {path}"),
        }
    }
}

/// Digest of one action's observation (timestamps and durations excluded).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepDigest {
    /// Blob of the kept stdout.
    pub stdout: ObjectId,
    /// Blob of the kept stderr.
    pub stderr: ObjectId,
    /// Bytes of stdout and stderr dropped past the cap.
    pub dropped: [u64; 2],
    /// How it ended.
    pub outcome: StepOutcome,
    /// Fuel used (deterministic).
    pub fuel: u64,
}

/// A global's saved value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "bits", rename_all = "snake_case")]
pub enum GlobalValue {
    /// An `i32`.
    I32(i32),
    /// An `i64`.
    I64(i64),
    /// An `f32`, as bits.
    F32(u32),
    /// An `f64`, as bits.
    F64(u64),
    /// A `v128`, as hex.
    V128(String),
}

/// A WASM snapshot, stored as a blob object holding this as JSON; the
/// snapshot id is that object's id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WasmManifest {
    /// [`MANIFEST_FORMAT`].
    pub format: u32,
    /// The guest module as imported (a blob).
    pub guest: ObjectId,
    /// How the guest was booted (root snapshots only).
    pub boot: Option<BootSpec>,
    /// The page index blob of the linear memory.
    pub memory: ObjectId,
    /// Memory size in 64 KiB pages.
    pub memory_pages: u64,
    /// blake3 of the page hashes: equal content, equal hash.
    pub memory_hash: ObjectId,
    /// Every mutable global, by export name.
    pub globals: Vec<(String, GlobalValue)>,
    /// Guest-visible WASI state.
    pub wasi: WasiState,
    /// Workspace layers, bottom first.
    pub layers: Vec<LayerId>,
    /// The snapshot this one was taken from.
    pub parent: Option<ObjectId>,
    /// Actions since the parent, in order.
    pub actions: Vec<WasmAction>,
    /// One digest per action.
    pub observations: Vec<StepDigest>,
    /// Set once a step ended the session (trap, limit): later steps do not run.
    pub ended: Option<StepOutcome>,
    /// Seconds since the Unix epoch.
    pub created_at: u64,
}

/// A compiled guest, shared by every sandbox of the runtime.
struct Guest {
    pre: InstancePre<HostState>,
    globals: Vec<String>,
    has_start: bool,
}

struct RtInner {
    store: Store,
    owners: OwnerMap,
    options: WasmOptions,
    engine: Arc<WasmEngine>,
    guests: Mutex<HashMap<ObjectId, Arc<Guest>>>,
    images: Mutex<HashMap<ObjectId, Weak<MemoryImage>>>,
    spare_dirs: Arc<SpareDirs>,
    roots: Mutex<LiveRoots>,
    /// Root snapshots by their maker's content key ([`WasmRuntime::memo_root`]).
    root_memo: Mutex<HashMap<String, ObjectId>>,
}

/// The bases of the sandboxes this runtime opened, recorded for `gc` in
/// `run/<pid>-wasmroots<n>/base` (one id a line) the first time each is
/// opened, so a later fork of the same snapshot costs only a set lookup.
/// The directory goes with the runtime (or with the process: gc removes
/// those of dead processes).
#[derive(Debug, Default)]
struct LiveRoots {
    seen: std::collections::HashSet<ObjectId>,
    file: Option<(PathBuf, std::fs::File)>,
}

impl Drop for RtInner {
    fn drop(&mut self) {
        let roots = self.roots.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some((dir, file)) = roots.file.take() {
            drop(file);
            crate::cleanup::remove_dir_forcefully(&dir);
        }
    }
}

/// The WebAssembly backend over one store. Cheap to clone.
#[derive(Clone)]
pub struct WasmRuntime {
    inner: Arc<RtInner>,
}

impl std::fmt::Debug for WasmRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmRuntime")
            .field("store", &self.inner.store.root())
            .finish_non_exhaustive()
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

/// What [`WasmRuntime::guest_module`] did.
#[derive(Clone, Copy, Debug)]
pub struct CompileReport {
    /// Cache hit or compiled.
    pub source: ModuleSource,
    /// Time taken (load or compile).
    pub took: Duration,
}

impl WasmRuntime {
    /// The backend over `store`.
    pub fn open(store: Store, options: WasmOptions) -> Result<Self> {
        let owners = match store.mode() {
            OwnerMode::Root { uid_base } => OwnerMap::Root { uid_base },
            OwnerMode::Rootless => OwnerMap::current_user(),
        };
        Ok(Self {
            inner: Arc::new(RtInner {
                store,
                owners,
                options,
                engine: engine::engine()?,
                guests: Mutex::new(HashMap::new()),
                images: Mutex::new(HashMap::new()),
                spare_dirs: Arc::default(),
                roots: Mutex::default(),
                root_memo: Mutex::default(),
            }),
        })
    }

    /// The root snapshot remembered under `key` (a content key of whatever
    /// made it: a task's files and setup), or `make` it and remember it. Two
    /// callers with the same key get the same snapshot; nothing is held
    /// while `make` runs (a concurrent maker of the same key makes the same
    /// content-addressed snapshot).
    ///
    /// # Errors
    /// `make`'s error, or reading a remembered snapshot back failed.
    pub fn memo_root<E: From<WasmError>>(
        &self,
        key: &str,
        make: impl FnOnce() -> std::result::Result<WasmSnapshot, E>,
    ) -> std::result::Result<WasmSnapshot, E> {
        let known = self
            .inner
            .root_memo
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .copied();
        if let Some(id) = known {
            return Ok(self.snapshot(&id)?);
        }
        let root = make()?;
        self.inner
            .root_memo
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_owned(), *root.id());
        Ok(root)
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The limits every sandbox gets.
    pub fn limits(&self) -> WasmLimits {
        self.inner.options.limits
    }

    fn cache_dir(&self) -> Option<PathBuf> {
        if self.inner.options.no_cache {
            return None;
        }
        self.inner
            .options
            .cache_dir
            .clone()
            .or_else(engine::default_cache_dir)
    }

    /// Compile (or load from the cache) the guest stored as blob `guest`;
    /// `wasm` may be given to skip reading it back. Kept for the runtime's
    /// life.
    pub fn guest_module(&self, guest: &ObjectId, wasm: Option<&[u8]>) -> Result<CompileReport> {
        let t = Instant::now();
        if self.lock_guests().contains_key(guest) {
            return Ok(CompileReport {
                source: ModuleSource::Cache,
                took: t.elapsed(),
            });
        }
        let engine = &self.inner.engine.engine;
        let cache = self.cache_dir();
        // One compilation per guest per process, whatever the number of
        // runtimes; concurrent callers wait and then share it.
        let mut modules = engine::process_modules();
        let (module, source) = if let Some(m) = modules.get(guest) {
            (m.clone(), ModuleSource::Cache)
        } else {
            let found = match cache
                .as_deref()
                .and_then(|c| engine::load_cached(engine, c, guest))
            {
                Some(m) => (m, ModuleSource::Cache),
                None => {
                    let owned;
                    let bytes = match wasm {
                        Some(b) => b,
                        None => {
                            owned = self.store().get_blob(guest)?;
                            &owned
                        }
                    };
                    let rewritten = rewrite::rewrite(bytes)?;
                    let m = engine::compile_and_cache(
                        engine,
                        cache.as_deref(),
                        guest,
                        &rewritten.module,
                    )?;
                    (m, ModuleSource::Compiled)
                }
            };
            modules.insert(*guest, found.0.clone());
            found
        };
        drop(modules);
        let g = self.make_guest(&module)?;
        self.lock_guests().insert(*guest, Arc::new(g));
        Ok(CompileReport {
            source,
            took: t.elapsed(),
        })
    }

    fn lock_guests(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectId, Arc<Guest>>> {
        self.inner.guests.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn make_guest(&self, module: &Module) -> Result<Guest> {
        let mut globals: Vec<(u32, String)> = module
            .exports()
            .filter_map(|e| {
                let idx = e.name().strip_prefix(rewrite::GLOBAL_EXPORT_PREFIX)?;
                Some((idx.parse().ok()?, e.name().to_owned()))
            })
            .collect();
        globals.sort();
        let has_start = module.get_export(rewrite::START_EXPORT).is_some();
        if module.get_export(rewrite::MEMORY_EXPORT).is_none() {
            return Err(WasmError::UnsupportedModule(
                "the compiled module was not rewritten (no memory export)".into(),
            ));
        }
        let pre = self
            .inner
            .engine
            .linker
            .instantiate_pre(module)
            .map_err(|e| WasmError::UnsupportedModule(format!("cannot link the guest: {e:#}")))?;
        Ok(Guest {
            pre,
            globals: globals.into_iter().map(|(_, n)| n).collect(),
            has_start,
        })
    }

    fn guest(&self, id: &ObjectId) -> Result<Arc<Guest>> {
        if let Some(g) = self.lock_guests().get(id) {
            return Ok(g.clone());
        }
        self.guest_module(id, None)?;
        self.lock_guests()
            .get(id)
            .cloned()
            .ok_or_else(|| WasmError::Engine("guest vanished from the runtime".into()))
    }

    /// Import a guest module (`wasm32-wasip1` bytes), boot it as `boot`
    /// says (start function, `_initialize`, then `boot.init` if exported)
    /// and return the root snapshot, whose memory already holds the booted
    /// interpreter. Compiles the module unless the cache has it.
    pub fn import(&self, wasm: &[u8], boot: &BootSpec) -> Result<WasmSnapshot> {
        let guest = self.store().put_blob(wasm)?;
        self.guest_module(&guest, Some(wasm))?;
        self.boot(&guest, boot, Some(wasm))
    }

    fn boot(
        &self,
        guest_id: &ObjectId,
        boot: &BootSpec,
        wasm: Option<&[u8]>,
    ) -> Result<WasmSnapshot> {
        let owned;
        let bytes = match wasm {
            Some(b) => b,
            None => {
                owned = self.store().get_blob(guest_id)?;
                &owned
            }
        };
        let rewritten = rewrite::rewrite(bytes)?;
        let pages = usize::try_from(rewritten.min_pages)
            .map_err(|_| WasmError::UnsupportedModule("memory too large".into()))?;
        let mut live = vec![0u8; pages * PAGE];
        for (offset, data) in &rewritten.data {
            let start = *offset as usize;
            let end = start
                .checked_add(data.len())
                .filter(|e| *e <= live.len())
                .ok_or_else(|| {
                    WasmError::UnsupportedModule("a data segment is out of bounds".into())
                })?;
            live[start..end].copy_from_slice(data);
        }
        let hashes: Vec<ObjectId> = live.chunks(PAGE).map(page_hash).collect();
        let image = Arc::new(memory::flatten(&hashes, &live)?);
        drop(live);
        let mut seed = [0u8; 32];
        hex::decode_to_slice(&boot.seed, &mut seed)
            .map_err(|_| WasmError::InvalidInput(format!("bad seed {:?}", boot.seed)))?;
        let wasi = WasiState::new(boot.args.clone(), boot.env.clone(), seed, boot.workspace);
        // A pseudo-snapshot for the boot image: never stored.
        let boot_manifest = WasmManifest {
            format: MANIFEST_FORMAT,
            guest: *guest_id,
            boot: None,
            memory: ZERO_PAGE,
            memory_pages: pages as u64,
            memory_hash: image.memory_hash(),
            globals: Vec::new(),
            wasi,
            layers: boot.workspace_layers.clone(),
            parent: None,
            actions: Vec::new(),
            observations: Vec::new(),
            ended: None,
            created_at: 0,
        };
        let base = WasmSnapshot {
            rt: self.clone(),
            id: ZERO_PAGE,
            manifest: Arc::new(boot_manifest),
            image: Arc::new(OnceLock::from(image)),
        };
        let mut sb = base.open()?;
        let guest = sb.guest.clone();
        let mut calls: Vec<String> = Vec::new();
        if guest.has_start {
            calls.push(rewrite::START_EXPORT.into());
        }
        calls.push("_initialize".into());
        calls.push(boot.init.clone());
        let mut ended = None;
        for name in calls {
            let Some(func) = sb.instance.get_func(&mut sb.store, &name) else {
                continue;
            };
            let live = sb.install_context()?;
            let outcome = sb.run_guarded(|store| {
                let mut results = vec![Val::I32(0); func.ty(&*store).results().len()];
                func.call(&mut *store, &[], &mut results)?;
                Ok(0)
            })?;
            live.live.store_into(&mut sb.wasi);
            if outcome.0 != StepOutcome::Ok {
                ended = Some(outcome.0);
                break;
            }
        }
        if let Some(outcome) = ended {
            return Err(WasmError::GuestProtocol(format!(
                "booting the guest failed: {outcome:?}"
            )));
        }
        sb.boot = Some(boot.clone());
        sb.snapshot()
    }

    /// Load a stored WASM snapshot.
    pub fn snapshot(&self, id: &ObjectId) -> Result<WasmSnapshot> {
        let bytes = self.store().get_wasm_manifest(id)?;
        let manifest: WasmManifest = serde_json::from_slice(&bytes)
            .map_err(|e| WasmError::BadSnapshot(format!("{id}: {e}")))?;
        if manifest.format != MANIFEST_FORMAT {
            return Err(WasmError::BadSnapshot(format!(
                "{id}: format {} (this arbor understands {MANIFEST_FORMAT})",
                manifest.format
            )));
        }
        let image = self
            .inner
            .images
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .and_then(Weak::upgrade);
        Ok(WasmSnapshot {
            rt: self.clone(),
            id: *id,
            manifest: Arc::new(manifest),
            image: Arc::new(image.map(OnceLock::from).unwrap_or_default()),
        })
    }

    /// Every object a WASM snapshot keeps alive (its record, guest, page
    /// index and pages, action and output blobs, workspace layer trees),
    /// through its parents. What `gc` must treat as reachable.
    pub fn referenced_objects(&self, id: &ObjectId) -> Result<Vec<ObjectId>> {
        let mut out = Vec::new();
        let mut cur = Some(*id);
        while let Some(sid) = cur {
            let refs = self.store().wasm_refs(&sid)?;
            out.push(sid);
            out.extend(refs.objects);
            out.extend(refs.layers);
            cur = refs.parent;
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// The chain from the root to `snapshot`, root first.
    pub fn chain(&self, snapshot: &WasmSnapshot) -> Result<Vec<WasmSnapshot>> {
        let mut out = vec![snapshot.clone()];
        while let Some(p) = out.last().and_then(|s| s.manifest.parent) {
            out.push(self.snapshot(&p)?);
        }
        out.reverse();
        Ok(out)
    }

    /// Re-execute `snapshot`'s chain from the guest module: boot the root
    /// again, then run each snapshot's actions in a fork of the *replayed*
    /// previous snapshot, and compare every action's digest and every
    /// snapshot's memory hash, globals, WASI state and workspace. The report
    /// has one step per snapshot of the chain, the root's boot as step 0.
    pub fn replay(&self, snapshot: &WasmSnapshot) -> Result<ReplayReport> {
        self.replay_with_options(snapshot, crate::replay::ReplayOptions::default())
    }

    /// [`Self::replay`] with options: `strict` stops at the first
    /// divergent snapshot (`stopped_early` says it did).
    pub fn replay_with_options(
        &self,
        snapshot: &WasmSnapshot,
        options: crate::replay::ReplayOptions,
    ) -> Result<ReplayReport> {
        self.replay_edited(snapshot, options, |_, _| None)
    }

    /// [`Self::replay`] with step inputs replaced: `edit(step, code)`
    /// returns the input to run instead (steps are numbered from 1 along
    /// the chain). For negative controls.
    pub fn replay_with(
        &self,
        snapshot: &WasmSnapshot,
        edit: impl Fn(usize, &str) -> Option<String>,
    ) -> Result<ReplayReport> {
        self.replay_edited(snapshot, crate::replay::ReplayOptions::default(), edit)
    }

    fn replay_edited(
        &self,
        snapshot: &WasmSnapshot,
        options: crate::replay::ReplayOptions,
        edit: impl Fn(usize, &str) -> Option<String>,
    ) -> Result<ReplayReport> {
        let started = Instant::now();
        let chain = self.chain(snapshot)?;
        let root = &chain[0];
        let boot = root.manifest.boot.clone().ok_or_else(|| {
            WasmError::BadSnapshot(format!("root {} has no boot record", root.id))
        })?;
        let mut replayed = self.boot(&root.manifest.guest, &boot, None)?;
        let mut made = vec![replayed.id];
        let mut steps = vec![StepReport {
            step: 0,
            recorded: root.id,
            replayed: replayed.id,
            actions: vec!["boot".to_owned()],
            divergences: self.compare_snapshots(root, &replayed)?,
        }];
        let mut actions_run = 0;
        let mut step_no = 0;
        let diverged = |steps: &[StepReport]| steps.iter().any(|s| !s.divergences.is_empty());
        let mut stopped_early = false;
        for recorded in &chain[1..] {
            if options.strict && diverged(&steps) {
                stopped_early = true;
                break;
            }
            let mut sb = replayed.open()?;
            let mut digests = Vec::new();
            for action in &recorded.manifest.actions {
                step_no += 1;
                match action {
                    WasmAction::Step { code } => {
                        let code = edit(step_no, code).unwrap_or_else(|| code.clone());
                        sb.step(&code)?;
                    }
                    WasmAction::WriteFile { path, content } => {
                        let bytes = self.store().get_blob(content)?;
                        sb.write_file(path, &bytes)?;
                    }
                    WasmAction::DeleteFile { path } => sb.delete_file(path)?,
                }
                digests.push(sb.last_digest()?);
            }
            actions_run += digests.len();
            // The snapshot writes the replayed outputs, which the diffs read.
            let next = sb.snapshot()?;
            made.push(next.id);
            let mut divergences =
                self.compare_digests(&recorded.manifest.observations, &digests)?;
            divergences.extend(self.compare_snapshots(recorded, &next)?);
            steps.push(StepReport {
                step: steps.len(),
                recorded: recorded.id,
                replayed: next.id,
                actions: recorded
                    .manifest
                    .actions
                    .iter()
                    .map(WasmAction::summary)
                    .collect(),
                divergences,
            });
            replayed = next;
        }
        // The replayed snapshots served only the comparison: they leave
        // the index (gc frees them) unless they are recorded ones.
        for id in made {
            if !chain.iter().any(|c| c.id == id) {
                self.store().unlist_snapshot(&id)?;
            }
        }
        Ok(ReplayReport {
            target: snapshot.id,
            root: root.id,
            replayed: replayed.id,
            identical: !diverged(&steps),
            stopped_early,
            actions: actions_run,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            steps,
        })
    }

    /// Divergences between the recorded and replayed digests of one step's actions.
    fn compare_digests(
        &self,
        recorded: &[StepDigest],
        replayed: &[StepDigest],
    ) -> Result<Vec<Divergence>> {
        let store = self.store();
        let mut out = Vec::new();
        if recorded.len() != replayed.len() {
            out.push(Divergence::ObservationCount {
                recorded: recorded.len(),
                replayed: replayed.len(),
            });
        }
        for (action, (r, p)) in recorded.iter().zip(replayed).enumerate() {
            let lines = |a: &ObjectId, b: &ObjectId| -> Result<Vec<String>> {
                Ok(crate::replay::line_diff(
                    &store.get_blob(a)?,
                    &store.get_blob(b)?,
                ))
            };
            if r.stdout != p.stdout || r.dropped[0] != p.dropped[0] {
                let diff = lines(&r.stdout, &p.stdout)?;
                out.push(Divergence::Stdout { action, diff });
            }
            if r.stderr != p.stderr || r.dropped[1] != p.dropped[1] {
                let diff = lines(&r.stderr, &p.stderr)?;
                out.push(Divergence::Stderr { action, diff });
            }
            if r.outcome != p.outcome {
                out.push(Divergence::Outcome {
                    action: Some(action),
                    recorded: r.outcome.label(),
                    replayed: p.outcome.label(),
                });
            }
            if r.fuel != p.fuel {
                out.push(Divergence::Fuel {
                    action,
                    recorded: r.fuel,
                    replayed: p.fuel,
                });
            }
        }
        Ok(out)
    }

    /// Divergences between the state of a recorded and a replayed snapshot.
    fn compare_snapshots(
        &self,
        recorded: &WasmSnapshot,
        replayed: &WasmSnapshot,
    ) -> Result<Vec<Divergence>> {
        let (a, b) = (&recorded.manifest, &replayed.manifest);
        let mut out = Vec::new();
        if a.memory_hash != b.memory_hash || a.memory_pages != b.memory_pages {
            out.push(Divergence::Memory {
                recorded: a.memory_hash,
                replayed: b.memory_hash,
            });
        }
        if a.globals != b.globals {
            let mut names: Vec<String> = a
                .globals
                .iter()
                .filter(|g| !b.globals.contains(g))
                .chain(b.globals.iter().filter(|g| !a.globals.contains(g)))
                .map(|(name, _)| name.clone())
                .collect();
            names.sort();
            names.dedup();
            out.push(Divergence::Globals { names });
        }
        if a.wasi != b.wasi {
            out.push(Divergence::Wasi);
        }
        if a.layers != b.layers {
            let va = crate::layer::merge_layers(self.store(), &a.layers)?;
            let vb = crate::layer::merge_layers(self.store(), &b.layers)?;
            out.push(Divergence::Workspace {
                paths: crate::replay::view_diff(&va, &vb),
            });
        }
        if a.ended != b.ended {
            let label =
                |e: &Option<StepOutcome>| e.as_ref().map_or("live".to_owned(), StepOutcome::label);
            out.push(Divergence::Outcome {
                action: None,
                recorded: label(&a.ended),
                replayed: label(&b.ended),
            });
        }
        Ok(out)
    }

    /// Record `id` as the base of a live sandbox (see [`LiveRoots`]).
    fn hold_root(&self, id: &ObjectId) -> Result<()> {
        use std::io::Write;
        let mut roots = self.inner.roots.lock().unwrap_or_else(|p| p.into_inner());
        if roots.seen.contains(id) {
            return Ok(());
        }
        if roots.file.is_none() {
            let dir = self.store().run_dir().join(format!(
                "{}-wasmroots{}",
                std::process::id(),
                next_run_number()
            ));
            let io = |what: &str, e: std::io::Error| {
                WasmError::Workspace(format!("cannot {what} {}: {e}", dir.display()))
            };
            std::fs::create_dir(&dir).map_err(|e| io("create", e))?;
            let file = std::fs::OpenOptions::new()
                .create_new(true)
                .append(true)
                .open(dir.join("base"))
                .map_err(|e| io("create the root list in", e))?;
            roots.file = Some((dir, file));
        }
        if let Some((dir, file)) = roots.file.as_mut() {
            writeln!(file, "{}", id.to_hex()).map_err(|e| {
                WasmError::Workspace(format!("cannot record a gc root in {}: {e}", dir.display()))
            })?;
        }
        roots.seen.insert(*id);
        Ok(())
    }

    fn run_dir(&self) -> PathBuf {
        // Process-wide, so that runtimes on the same store never pick the
        // same name (a runtime keeps empty directories for reuse).
        self.store()
            .run_dir()
            .join(format!("{}-wasm{}", std::process::id(), next_run_number()))
    }
}

/// A process-wide number for `run/` entries, so that runtimes on the same
/// store never pick the same name.
fn next_run_number() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// A stored WASM snapshot (or the boot image during import).
#[derive(Clone)]
pub struct WasmSnapshot {
    rt: WasmRuntime,
    id: ObjectId,
    manifest: Arc<WasmManifest>,
    image: Arc<OnceLock<Arc<MemoryImage>>>,
}

impl std::fmt::Debug for WasmSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmSnapshot")
            .field("id", &self.id)
            .field("memory_hash", &self.manifest.memory_hash)
            .finish_non_exhaustive()
    }
}

impl WasmSnapshot {
    /// The backend that stored it.
    pub fn runtime(&self) -> &WasmRuntime {
        &self.rt
    }

    /// The snapshot id (id of the blob holding the manifest).
    pub fn id(&self) -> &ObjectId {
        &self.id
    }

    /// The manifest.
    pub fn manifest(&self) -> &WasmManifest {
        &self.manifest
    }

    /// The memory hash.
    pub fn memory_hash(&self) -> ObjectId {
        self.manifest.memory_hash
    }

    /// The memory image, restored from the store on first use in this
    /// process (every page read and verified).
    pub fn image(&self) -> Result<Arc<MemoryImage>> {
        if let Some(i) = self.image.get() {
            return Ok(i.clone());
        }
        let loaded = Arc::new(pages::load_image(self.rt.store(), &self.manifest.memory)?);
        let image = self.image.get_or_init(|| loaded).clone();
        self.rt
            .inner
            .images
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(self.id, Arc::downgrade(&image));
        Ok(image)
    }

    /// The hash of every 64 KiB page of its memory ([`ZERO_PAGE`] for
    /// zero pages), read from its page index.
    pub fn page_hashes(&self) -> Result<Vec<ObjectId>> {
        pages::decode_index(&self.rt.store().get_blob(&self.manifest.memory)?)
    }

    /// Open one sandbox on this snapshot: a fresh instance whose memory is
    /// this snapshot's image mapped copy-on-write, with its globals, WASI
    /// state and (if preopened) a workspace materialised from its layers.
    pub fn open(&self) -> Result<WasmSandbox> {
        let rt = &self.rt;
        if self.id != ZERO_PAGE {
            rt.hold_root(&self.id)?;
        }
        let guest = rt.guest(&self.manifest.guest)?;
        let image = self.image()?;
        let limits = rt.limits();
        let workspace = if self.manifest.wasi.preopens.is_empty() {
            None
        } else {
            Some(Workspace::materialize(rt, &self.manifest.layers)?)
        };
        let placeholder = wasmtime_wasi::WasiCtxBuilder::new().build_p1();
        let mut store = wasmtime::Store::new(
            &rt.inner.engine.engine,
            HostState {
                wasi: placeholder,
                limits: Limits {
                    memory_cap: limits.memory_bytes,
                    memory_hit: false,
                },
            },
        );
        store.limiter(|s| &mut s.limits);
        store
            .set_fuel(u64::MAX)
            .map_err(|e| engine_err("set fuel", e))?;
        store.set_epoch_deadline(u64::MAX / 2);
        memory::stage_image(image.for_mapping()?);
        let instance = guest.pre.instantiate(&mut store);
        let region = memory::take_created();
        let instance =
            instance.map_err(|e| engine_err("instantiate the guest", format!("{e:#}")))?;
        let region = region.ok_or_else(|| {
            WasmError::Engine("the guest's memory was not created by Arbor".into())
        })?;
        let mem = instance
            .get_memory(&mut store, rewrite::MEMORY_EXPORT)
            .ok_or_else(|| WasmError::GuestProtocol("no memory export".into()))?;
        let have = mem.size(&store);
        let want = image.pages() as u64;
        if want > have {
            mem.grow(&mut store, want - have)
                .map_err(|e| engine_err("grow memory to the snapshot's size", format!("{e:#}")))?;
        }
        for (name, value) in &self.manifest.globals {
            let g = instance
                .get_global(&mut store, name)
                .ok_or_else(|| WasmError::BadSnapshot(format!("the guest has no global {name}")))?;
            let v = match value {
                GlobalValue::I32(v) => Val::I32(*v),
                GlobalValue::I64(v) => Val::I64(*v),
                GlobalValue::F32(v) => Val::F32(*v),
                GlobalValue::F64(v) => Val::F64(*v),
                GlobalValue::V128(h) => {
                    let mut b = [0u8; 16];
                    hex::decode_to_slice(h, &mut b)
                        .map_err(|_| WasmError::BadSnapshot(format!("bad v128 {h}")))?;
                    Val::V128(u128::from_le_bytes(b).into())
                }
            };
            g.set(&mut store, v)
                .map_err(|e| engine_err("restore a global", format!("{e:#}")))?;
        }
        let input = instance
            .get_typed_func::<u32, u32>(&mut store, "arbor_input")
            .ok();
        let step = instance
            .get_typed_func::<(), u32>(&mut store, "arbor_step")
            .ok();
        Ok(WasmSandbox {
            rt: rt.clone(),
            guest,
            store,
            instance,
            memory: mem,
            input,
            step,
            region,
            base: self.clone(),
            wasi: self.manifest.wasi.clone(),
            workspace,
            actions: Vec::new(),
            pending: Vec::new(),
            ended: self.manifest.ended.clone(),
            limits,
            boot: None,
            inspected: false,
        })
    }

    /// Fork `n` independent sandboxes.
    pub fn fork(&self, n: usize) -> Result<Vec<WasmSandbox>> {
        (0..n).map(|_| self.open()).collect()
    }
}

/// Empty workspace directories of dropped sandboxes, kept by the runtime
/// for reuse: a fork of a snapshot whose workspace is empty (the usual
/// case for interpreter sessions) then pays neither a `mkdir` nor an
/// `rmdir`, which on a busy ext4 cost hundreds of microseconds. A directory
/// is kept only if it is empty when its sandbox is dropped (the guest's
/// instance is gone by then); the rest are removed on drop.
#[derive(Debug, Default)]
struct SpareDirs(Mutex<Vec<PathBuf>>);

/// At most this many spare directories are kept.
const MAX_SPARE_DIRS: usize = 64;

impl SpareDirs {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<PathBuf>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take(&self) -> Option<PathBuf> {
        self.lock().pop()
    }

    /// Keep `dir` if it is an empty directory (not a link) and there is
    /// room, else remove it.
    fn give(&self, dir: PathBuf) {
        let empty = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir())
            && std::fs::read_dir(&dir).is_ok_and(|mut rd| rd.next().is_none());
        if empty {
            let mut spare = self.lock();
            if spare.len() < MAX_SPARE_DIRS {
                spare.push(dir);
                return;
            }
        }
        crate::cleanup::remove_dir_forcefully(&dir);
    }
}

impl Drop for SpareDirs {
    fn drop(&mut self) {
        for dir in self.lock().drain(..) {
            crate::cleanup::remove_dir_forcefully(&dir);
        }
    }
}

/// A sandbox's workspace directory.
#[derive(Debug)]
struct Workspace {
    dir: PathBuf,
    base: MergedView,
    spare: Arc<SpareDirs>,
}

impl Workspace {
    /// Materialise `layers` into a fresh directory `run/<pid>-wasm<n>` (gc
    /// removes those of dead processes); an empty chain reuses an empty
    /// directory a dropped sandbox left, else costs one `mkdir`.
    fn materialize(rt: &WasmRuntime, layers: &[LayerId]) -> Result<Workspace> {
        let spare = rt.inner.spare_dirs.clone();
        if layers.is_empty()
            && let Some(dir) = spare.take()
        {
            return Ok(Workspace {
                dir,
                base: MergedView::default(),
                spare,
            });
        }
        let dir = rt.run_dir();
        let made = (|| -> Result<MergedView> {
            if layers.is_empty() {
                std::fs::create_dir(&dir).map_err(|e| {
                    WasmError::Workspace(format!("cannot create {}: {e}", dir.display()))
                })?;
                Ok(MergedView::default())
            } else {
                crate::layer::materialize(
                    rt.store(),
                    layers,
                    &dir,
                    &MaterializeOptions::default(),
                )?;
                Ok(crate::layer::merge_layers(rt.store(), layers)?)
            }
        })();
        match made {
            Ok(base) => Ok(Workspace { dir, base, spare }),
            Err(e) => {
                crate::cleanup::remove_dir_forcefully(&dir);
                Err(e)
            }
        }
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        self.spare.give(std::mem::take(&mut self.dir));
    }
}

/// What one step printed and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepResult {
    /// Stdout (at most the output cap).
    pub stdout: Vec<u8>,
    /// Stderr (at most the output cap).
    pub stderr: Vec<u8>,
    /// Bytes of stdout and stderr dropped past the cap.
    pub dropped: [u64; 2],
    /// How it ended.
    pub outcome: StepOutcome,
    /// Fuel used.
    pub fuel: u64,
    /// Wall-clock time of the guest call (not part of any digest).
    pub duration: Duration,
}

impl StepResult {
    /// Stdout as text (lossy).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Stderr as text (lossy).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// A live WASM session: a guest instance on a copy-on-write memory.
pub struct WasmSandbox {
    rt: WasmRuntime,
    guest: Arc<Guest>,
    store: wasmtime::Store<HostState>,
    instance: Instance,
    memory: Memory,
    input: Option<TypedFunc<u32, u32>>,
    step: Option<TypedFunc<(), u32>>,
    /// The memory; mapped from `base`'s image when the sandbox opened or
    /// last snapshotted.
    region: SharedRegion,
    /// The snapshot the memory mapping and the workspace derive from.
    base: WasmSnapshot,
    wasi: WasiState,
    /// Declared after `store`, so it is dropped (and its directory perhaps
    /// kept for reuse) only once the guest's instance is gone.
    workspace: Option<Workspace>,
    /// Actions since `base`, and their observations (not yet stored).
    actions: Vec<WasmAction>,
    pending: Vec<PendingObservation>,
    ended: Option<StepOutcome>,
    limits: WasmLimits,
    /// Set while booting: recorded in the root snapshot.
    boot: Option<BootSpec>,
    /// Set by [`WasmSandbox::inspect`]: the memory then holds changes no
    /// recorded action explains, so the sandbox may not be snapshotted.
    inspected: bool,
}

impl std::fmt::Debug for WasmSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmSandbox")
            .field("base", &self.base.id)
            .field("actions", &self.actions.len())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct PendingObservation {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    dropped: [u64; 2],
    outcome: StepOutcome,
    fuel: u64,
    /// A written file's content.
    content: Option<Vec<u8>>,
}

impl PendingObservation {
    fn digest(&self) -> StepDigest {
        StepDigest {
            stdout: object_id(ObjectKind::Blob, &self.stdout),
            stderr: object_id(ObjectKind::Blob, &self.stderr),
            dropped: self.dropped,
            outcome: self.outcome.clone(),
            fuel: self.fuel,
        }
    }
}

impl WasmSandbox {
    /// Set the wall-clock limit of the following steps (fuel stays the
    /// deterministic limit).
    pub fn set_step_timeout(&mut self, timeout: Duration) {
        self.limits.timeout = timeout;
    }

    /// The snapshot this sandbox was opened on or last snapshotted to.
    pub fn base(&self) -> &WasmSnapshot {
        &self.base
    }

    /// Why the session ended, if it did.
    pub fn ended(&self) -> Option<&StepOutcome> {
        self.ended.as_ref()
    }

    /// Current memory size in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.region.lock().size()
    }

    /// The host directory preopened as `/workspace`, if any.
    pub fn workspace(&self) -> Option<&Path> {
        self.workspace.as_ref().map(|w| w.dir.as_path())
    }

    /// Advance the clocks by a step's tick and install a fresh WASI
    /// context built from the session's WASI state; the returned handles
    /// read back the clocks, generator and output afterwards.
    fn install_context(&mut self) -> Result<wasi::StepHandles> {
        self.wasi.wall_ns += wasi::TICK_PER_STEP_NS;
        self.wasi.monotonic_ns += wasi::TICK_PER_STEP_NS;
        let sc = wasi::step_context(
            &self.wasi,
            self.workspace.as_ref().map(|w| w.dir.as_path()),
            self.limits.output_bytes,
        )?;
        self.store.data_mut().wasi = sc.ctx;
        Ok(wasi::StepHandles {
            live: sc.live,
            stdout: sc.stdout,
            stderr: sc.stderr,
        })
    }

    /// Run `f` with this step's limits and classify how it ended.
    fn run_guarded(
        &mut self,
        f: impl FnOnce(&mut wasmtime::Store<HostState>) -> wasmtime::Result<u32>,
    ) -> Result<(StepOutcome, u64)> {
        let fuel = self.limits.fuel_per_step;
        self.store
            .set_fuel(fuel)
            .map_err(|e| engine_err("set fuel", e))?;
        let ticks =
            (self.limits.timeout.as_millis() / engine::EPOCH_TICK.as_millis()).max(1) as u64;
        self.store.set_epoch_deadline(ticks);
        self.store.data_mut().limits.memory_hit = false;
        let result = f(&mut self.store);
        let used = fuel - self.store.get_fuel().unwrap_or(0);
        let outcome = match result {
            Ok(0) => StepOutcome::Ok,
            Ok(1) => StepOutcome::Exception,
            Ok(status) => StepOutcome::Status { status },
            Err(e) => self.classify(&e),
        };
        Ok((outcome, used))
    }

    fn classify(&self, e: &wasmtime::Error) -> StepOutcome {
        if self.store.data().limits.memory_hit {
            return StepOutcome::MemoryLimit;
        }
        if let Some(exit) = e.downcast_ref::<wasmtime_wasi::I32Exit>() {
            return StepOutcome::Exited { code: exit.0 };
        }
        match e.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::OutOfFuel) => StepOutcome::OutOfFuel,
            Some(wasmtime::Trap::Interrupt) => StepOutcome::Timeout,
            Some(t) => StepOutcome::Trap {
                message: t.to_string(),
            },
            None => StepOutcome::Trap {
                message: e.to_string(),
            },
        }
    }

    /// Run one step: write `code` into the guest's input buffer and call
    /// `arbor_step`. A trap or limit ends the session (the outcome says
    /// which); later steps return [`StepOutcome::Ended`] without running.
    pub fn step(&mut self, code: &str) -> Result<StepResult> {
        if code.len() > MAX_INPUT {
            return Err(WasmError::InvalidInput(format!(
                "step input of {} bytes is over the {MAX_INPUT}-byte limit",
                code.len()
            )));
        }
        let (input, step) = match (self.input.clone(), self.step.clone()) {
            (Some(i), Some(s)) => (i, s),
            _ => {
                return Err(WasmError::GuestProtocol(
                    "the guest exports no arbor_input/arbor_step".into(),
                ));
            }
        };
        self.actions.push(WasmAction::Step {
            code: code.to_owned(),
        });
        if self.ended.is_some() {
            return Ok(self.record(
                Vec::new(),
                Vec::new(),
                [0, 0],
                StepOutcome::Ended,
                0,
                Duration::ZERO,
                None,
            ));
        }
        let sc = self.install_context()?;
        let memory = self.memory;
        let t = Instant::now();
        let (outcome, fuel) = self.run_guarded(|store| {
            let len = code.len() as u32;
            let ptr = input.call(&mut *store, len)?;
            memory.write(&mut *store, ptr as usize, code.as_bytes())?;
            step.call(&mut *store, ())
        })?;
        let duration = t.elapsed();
        sc.live.store_into(&mut self.wasi);
        let (stdout, d0) = sc.stdout.take();
        let (stderr, d1) = sc.stderr.take();
        if !outcome.is_alive() {
            self.ended = Some(outcome.clone());
        }
        Ok(self.record(stdout, stderr, [d0, d1], outcome, fuel, duration, None))
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "one call site per action kind; a struct would only rename the fields"
    )]
    fn record(
        &mut self,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
        dropped: [u64; 2],
        outcome: StepOutcome,
        fuel: u64,
        duration: Duration,
        content: Option<Vec<u8>>,
    ) -> StepResult {
        let result = StepResult {
            stdout: stdout.clone(),
            stderr: stderr.clone(),
            dropped,
            outcome: outcome.clone(),
            fuel,
            duration,
        };
        self.pending.push(PendingObservation {
            stdout,
            stderr,
            dropped,
            outcome,
            fuel,
            content,
        });
        result
    }

    fn last_digest(&self) -> Result<StepDigest> {
        self.pending
            .last()
            .map(PendingObservation::digest)
            .ok_or_else(|| WasmError::Engine("no step recorded".into()))
    }

    fn workspace_dir(&self) -> Result<cap_std::fs::Dir> {
        let ws = self
            .workspace
            .as_ref()
            .ok_or_else(|| WasmError::InvalidInput("this session has no /workspace".into()))?;
        cap_std::fs::Dir::open_ambient_dir(&ws.dir, cap_std::ambient_authority())
            .map_err(|e| WasmError::Workspace(format!("cannot open {}: {e}", ws.dir.display())))
    }

    fn check_path(path: &str) -> Result<&str> {
        let p = path
            .trim_start_matches("/workspace/")
            .trim_start_matches('/');
        if p.is_empty() || p.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(WasmError::InvalidInput(format!(
                "bad workspace path {path:?}"
            )));
        }
        Ok(p)
    }

    /// Write a workspace file through a capability handle rooted at the
    /// workspace (a planted symlink or `..` never reaches a host path);
    /// parent directories are created. Recorded as an action.
    pub fn write_file(&mut self, path: &str, content: &[u8]) -> Result<()> {
        let p = Self::check_path(path)?.to_owned();
        let dir = self.workspace_dir()?;
        if let Some(parent) = Path::new(&p).parent().filter(|p| !p.as_os_str().is_empty()) {
            dir.create_dir_all(parent).map_err(|e| {
                WasmError::Workspace(format!("cannot create {}: {e}", parent.display()))
            })?;
        }
        dir.write(&p, content)
            .map_err(|e| WasmError::Workspace(format!("cannot write {p}: {e}")))?;
        self.actions.push(WasmAction::WriteFile {
            path: p,
            content: object_id(ObjectKind::Blob, content),
        });
        self.record(
            Vec::new(),
            Vec::new(),
            [0, 0],
            StepOutcome::Ok,
            0,
            Duration::ZERO,
            Some(content.to_vec()),
        );
        Ok(())
    }

    /// Read a workspace file through the capability handle.
    pub fn read_file(&self, path: &str) -> Result<Vec<u8>> {
        let p = Self::check_path(path)?;
        self.workspace_dir()?
            .read(p)
            .map_err(|e| WasmError::Workspace(format!("cannot read {p}: {e}")))
    }

    /// Delete a workspace file through the capability handle. Recorded.
    pub fn delete_file(&mut self, path: &str) -> Result<()> {
        let p = Self::check_path(path)?.to_owned();
        self.workspace_dir()?
            .remove_file(&p)
            .map_err(|e| WasmError::Workspace(format!("cannot delete {p}: {e}")))?;
        self.actions.push(WasmAction::DeleteFile { path: p });
        self.record(
            Vec::new(),
            Vec::new(),
            [0, 0],
            StepOutcome::Ok,
            0,
            Duration::ZERO,
            None,
        );
        Ok(())
    }

    /// The hash of the current memory (what a snapshot now would record),
    /// computed from the pages dirtied since the base.
    pub fn memory_hash(&self) -> ObjectId {
        let region = self.region.lock();
        // SAFETY: `&self` means no guest call is running on this store.
        let live = unsafe { region.bytes() };
        let (hashes, _, _) = self.current_hashes(&region, live);
        memory::memory_hash(&hashes)
    }

    /// Page hashes of the current memory, the pages that changed, and the
    /// pages written since the last mapping (a superset of those changed).
    #[allow(clippy::type_complexity, reason = "private, one caller per use")]
    fn current_hashes(
        &self,
        region: &memory::Region,
        live: &[u8],
    ) -> (Vec<ObjectId>, Vec<(usize, ObjectId)>, Vec<usize>) {
        let image = self.base.image.get().cloned();
        let base_hashes: &[ObjectId] = image.as_ref().map(|i| i.hashes().as_slice()).unwrap_or(&[]);
        let pages = live.len() / PAGE;
        let candidates = region.dirty_pages().unwrap_or_else(|| (0..pages).collect());
        let mut hashes = base_hashes.to_vec();
        hashes.resize(pages, ZERO_PAGE);
        let mut changed = Vec::new();
        for &i in &candidates {
            let h = page_hash(&live[i * PAGE..(i + 1) * PAGE]);
            if h != hashes[i] {
                hashes[i] = h;
                changed.push((i, h));
            }
        }
        (hashes, changed, candidates)
    }

    /// Seal the session into a snapshot and continue on it: the pages
    /// changed since the base are hashed and written to the store, the
    /// image is the base's plus those pages, the globals and WASI state are
    /// recorded, the workspace's changes become a layer. The memory is
    /// then remapped from the new image, so the next snapshot again costs
    /// only what changes after this one. With nothing done since the base,
    /// returns the base.
    pub fn snapshot(&mut self) -> Result<WasmSnapshot> {
        if self.inspected {
            return Err(WasmError::InvalidInput(
                "this sandbox was inspected: inspection is not a recorded action, so a snapshot \
                 of it would not replay (inspect a fork instead)"
                    .into(),
            ));
        }
        let rt = self.rt.clone();
        let store = rt.store().clone();
        let _lock = store.lock_shared()?;
        let region_handle = self.region.clone();
        let mut region = region_handle.lock();
        // SAFETY: `&mut self` means no guest call is running on this store,
        // and the slice is dropped before the region is remapped.
        let live = unsafe { region.bytes() };
        let pages = live.len() / PAGE;
        let (hashes, changed, candidates) = self.current_hashes(&region, live);
        let mem_hash = memory::memory_hash(&hashes);
        // Nothing ran since the base: nothing can have changed.
        if self.actions.is_empty() && self.boot.is_none() && self.base.id != ZERO_PAGE {
            return Ok(self.base.clone());
        }
        let base_image = self.base.image()?.preferred();
        let (image, flattened) = base_image.overlay(pages, &changed, live)?;
        let image = Arc::new(image);
        let index = pages::encode_index(&hashes);
        let index_id = object_id(ObjectKind::Blob, &index);
        let mut batch = pages::Batch::default();
        if self.base.id == ZERO_PAGE {
            // Booting: the boot image was never stored, so every page is new.
            for (i, h) in hashes.iter().enumerate() {
                if *h != ZERO_PAGE {
                    batch.blob(*h, &live[i * PAGE..(i + 1) * PAGE]);
                }
            }
        } else {
            for (i, h) in &changed {
                if *h != ZERO_PAGE {
                    batch.blob(*h, &live[i * PAGE..(i + 1) * PAGE]);
                }
            }
        }
        batch.blob(index_id, &index);
        for o in &self.pending {
            batch.blob(object_id(ObjectKind::Blob, &o.stdout), &o.stdout);
            batch.blob(object_id(ObjectKind::Blob, &o.stderr), &o.stderr);
            if let Some(c) = &o.content {
                batch.blob(object_id(ObjectKind::Blob, c), c);
            }
        }
        // The seal protocol (`crate::seal`). 1. Objects: pages, index,
        // observations, and the workspace's delta staged with its tree.
        let protocol = &crate::seal::SESSION;
        batch.write(&store)?;
        let globals = self.read_globals()?;
        let delta = self.stage_workspace()?;
        protocol.objects_written();
        // 3–4 (a session has no mount to quiesce).
        let mut layers = self.base.manifest.layers.clone();
        if let Some(layer) = protocol.install(&store, delta)? {
            layers.push(layer);
            if let Some(ws) = &mut self.workspace {
                ws.base = crate::layer::merge_layers(&store, &layers)?;
            }
        }
        let manifest = WasmManifest {
            format: MANIFEST_FORMAT,
            guest: self.base.manifest.guest,
            boot: self.boot.clone(),
            memory: index_id,
            memory_pages: pages as u64,
            memory_hash: mem_hash,
            globals,
            wasi: self.wasi.clone(),
            layers,
            parent: (self.base.id != ZERO_PAGE).then_some(self.base.id),
            actions: std::mem::take(&mut self.actions),
            observations: self.pending.drain(..).map(|p| p.digest()).collect(),
            ended: self.ended.clone(),
            created_at: now(),
        };
        let json = serde_json::to_vec(&manifest)
            .map_err(|e| WasmError::BadSnapshot(format!("cannot encode the manifest: {e}")))?;
        // 5–6.
        let id = protocol.publish(&store, || store.put(ObjectKind::WasmManifest, &json))?;
        // 7. The session continues on it: a gc root while this runtime lives.
        rt.hold_root(&id)?;
        if flattened {
            region.map_image(&image)?;
        } else {
            // Only the pages written since the last mapping differ from it.
            region.remap_pages(&image, &candidates)?;
        }
        drop(region);
        rt.inner
            .images
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Arc::downgrade(&image));
        self.boot = None;
        self.base = WasmSnapshot {
            rt: rt.clone(),
            id,
            manifest: Arc::new(manifest),
            image: Arc::new(OnceLock::from(image)),
        };
        Ok(self.base.clone())
    }

    fn read_globals(&mut self) -> Result<Vec<(String, GlobalValue)>> {
        let mut out = Vec::with_capacity(self.guest.globals.len());
        for name in &self.guest.globals {
            let g = self
                .instance
                .get_global(&mut self.store, name)
                .ok_or_else(|| WasmError::GuestProtocol(format!("global {name} vanished")))?;
            let v = match g.get(&mut self.store) {
                Val::I32(v) => GlobalValue::I32(v),
                Val::I64(v) => GlobalValue::I64(v),
                Val::F32(v) => GlobalValue::F32(v),
                Val::F64(v) => GlobalValue::F64(v),
                Val::V128(v) => GlobalValue::V128(hex::encode(v.as_u128().to_le_bytes())),
                other => {
                    return Err(WasmError::UnsupportedModule(format!(
                        "global {name} holds a reference ({other:?}); only numeric globals can be saved"
                    )));
                }
            };
            out.push((name.clone(), v));
        }
        Ok(out)
    }

    /// Step 1 of the seal protocol for the workspace: stage its changes
    /// since the base as a layer directory and write their tree.
    fn stage_workspace(&self) -> Result<crate::seal::Delta<'static>> {
        use crate::seal::{Delta, Staged};
        let Some(ws) = &self.workspace else {
            return Ok(Delta::Empty);
        };
        let rt = &self.rt;
        let store = rt.store();
        let staged = Staged::write(store, |dir| {
            crate::layer::write_delta_layer(&ws.dir, &ws.base, dir, &rt.inner.owners)
        })?;
        if staged.tree().entries.is_empty() {
            return Ok(Delta::Empty);
        }
        let id = store.put_tree(staged.tree())?;
        if store.layer_dir(&id).exists() {
            return Ok(Delta::Present(id));
        }
        Ok(Delta::Staged(id, staged))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_encoder::{
        BlockType, CodeSection, ConstExpr, ExportKind, ExportSection, Function, FunctionSection,
        GlobalSection, GlobalType, Instruction as I, MemArg, MemorySection, MemoryType,
        TypeSection, ValType,
    };

    /// A tiny guest speaking the protocol without WASI: the input buffer is
    /// at 1024; `arbor_step` looks at its first byte:
    /// `c` bumps a mutable global and stores it at address 0;
    /// `g` grows memory by the second byte's pages, writing 1 into each;
    /// `l` loops forever; `t` traps; anything else returns 7.
    fn tiny_guest() -> Vec<u8> {
        let mut m = wasm_encoder::Module::new();
        let mut types = TypeSection::new();
        types.ty().function([ValType::I32], [ValType::I32]);
        types.ty().function([], [ValType::I32]);
        m.section(&types);
        let mut funcs = FunctionSection::new();
        funcs.function(0);
        funcs.function(1);
        m.section(&funcs);
        let mut mem = MemorySection::new();
        mem.memory(MemoryType {
            minimum: 1,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        m.section(&mem);
        let mut globals = GlobalSection::new();
        globals.global(
            GlobalType {
                val_type: ValType::I32,
                mutable: true,
                shared: false,
            },
            &ConstExpr::i32_const(100),
        );
        m.section(&globals);
        let mut exports = ExportSection::new();
        exports.export("arbor_input", ExportKind::Func, 0);
        exports.export("arbor_step", ExportKind::Func, 1);
        m.section(&exports);
        let mut code = CodeSection::new();
        let mut input = Function::new([]);
        input.instruction(&I::I32Const(1024)).instruction(&I::End);
        code.function(&input);
        let ma = |offset| MemArg {
            offset,
            align: 0,
            memory_index: 0,
        };
        let mut step = Function::new([(2, ValType::I32)]);
        let s = &mut step;
        // local 0: command byte; local 1: loop counter / old size
        s.instruction(&I::I32Const(1024))
            .instruction(&I::I32Load8U(ma(0)))
            .instruction(&I::LocalSet(0));
        // 'c'
        s.instruction(&I::LocalGet(0))
            .instruction(&I::I32Const(b'c' as i32))
            .instruction(&I::I32Eq)
            .instruction(&I::If(BlockType::Empty))
            .instruction(&I::GlobalGet(0))
            .instruction(&I::I32Const(1))
            .instruction(&I::I32Add)
            .instruction(&I::GlobalSet(0))
            .instruction(&I::I32Const(0))
            .instruction(&I::GlobalGet(0))
            .instruction(&I::I32Store(MemArg {
                offset: 0,
                align: 2,
                memory_index: 0,
            }))
            .instruction(&I::I32Const(0))
            .instruction(&I::Return)
            .instruction(&I::End);
        // 'g'
        s.instruction(&I::LocalGet(0))
            .instruction(&I::I32Const(b'g' as i32))
            .instruction(&I::I32Eq)
            .instruction(&I::If(BlockType::Empty))
            .instruction(&I::I32Const(1025))
            .instruction(&I::I32Load8U(ma(0)))
            .instruction(&I::MemoryGrow(0))
            .instruction(&I::LocalTee(1))
            .instruction(&I::I32Const(-1))
            .instruction(&I::I32Eq)
            .instruction(&I::If(BlockType::Empty))
            .instruction(&I::Unreachable)
            .instruction(&I::End)
            .instruction(&I::Block(BlockType::Empty))
            .instruction(&I::Loop(BlockType::Empty))
            .instruction(&I::LocalGet(1))
            .instruction(&I::MemorySize(0))
            .instruction(&I::I32GeU)
            .instruction(&I::BrIf(1))
            .instruction(&I::LocalGet(1))
            .instruction(&I::I32Const(16))
            .instruction(&I::I32Shl)
            .instruction(&I::I32Const(1))
            .instruction(&I::I32Store8(ma(0)))
            .instruction(&I::LocalGet(1))
            .instruction(&I::I32Const(1))
            .instruction(&I::I32Add)
            .instruction(&I::LocalSet(1))
            .instruction(&I::Br(0))
            .instruction(&I::End)
            .instruction(&I::End)
            .instruction(&I::I32Const(0))
            .instruction(&I::Return)
            .instruction(&I::End);
        // 'l'
        s.instruction(&I::LocalGet(0))
            .instruction(&I::I32Const(b'l' as i32))
            .instruction(&I::I32Eq)
            .instruction(&I::If(BlockType::Empty))
            .instruction(&I::Loop(BlockType::Empty))
            .instruction(&I::Br(0))
            .instruction(&I::End)
            .instruction(&I::End);
        // 't'
        s.instruction(&I::LocalGet(0))
            .instruction(&I::I32Const(b't' as i32))
            .instruction(&I::I32Eq)
            .instruction(&I::If(BlockType::Empty))
            .instruction(&I::Unreachable)
            .instruction(&I::End);
        s.instruction(&I::I32Const(7)).instruction(&I::End);
        code.function(&step);
        m.section(&code);
        m.finish()
    }

    fn rt(dir: &Path, limits: WasmLimits) -> WasmRuntime {
        let store = Store::open(dir, OwnerMode::Rootless).unwrap();
        WasmRuntime::open(
            store,
            WasmOptions {
                no_cache: true,
                limits,
                ..WasmOptions::default()
            },
        )
        .unwrap()
    }

    fn boot() -> BootSpec {
        BootSpec {
            workspace: false,
            ..BootSpec::python()
        }
    }

    fn word0(sb: &WasmSandbox) -> u32 {
        let r = sb.region.lock();
        // SAFETY: no guest call runs while the test holds `&sb`.
        let b = unsafe { r.bytes() };
        u32::from_le_bytes(b[..4].try_into().unwrap())
    }

    #[test]
    fn tiny_guest_forks_snapshots_globals_and_memory() {
        let d = tempfile::tempdir().unwrap();
        let rt = rt(d.path(), WasmLimits::default());
        let root = rt.import(&tiny_guest(), &boot()).unwrap();
        assert_eq!(
            root.manifest().globals,
            vec![("__arbor_global_0".into(), GlobalValue::I32(100))]
        );
        let mut sb = root.open().unwrap();
        assert_eq!(sb.step("c").unwrap().outcome, StepOutcome::Ok);
        assert_eq!(word0(&sb), 101);
        assert_eq!(sb.step("g\u{10}").unwrap().outcome, StepOutcome::Ok);
        assert_eq!(sb.memory_bytes(), 17 * PAGE);
        assert_eq!(
            sb.step("x").unwrap().outcome,
            StepOutcome::Status { status: 7 }
        );
        let s1 = sb.snapshot().unwrap();
        assert_eq!(s1.manifest().memory_pages, 17);
        assert_eq!(s1.manifest().globals[0].1, GlobalValue::I32(101));
        assert_eq!(sb.memory_hash(), s1.memory_hash());
        // Forks see the snapshot's memory and globals, independently.
        let mut a = s1.open().unwrap();
        let mut b = s1.open().unwrap();
        assert_eq!(a.memory_bytes(), 17 * PAGE);
        a.step("c").unwrap();
        a.step("c").unwrap();
        b.step("c").unwrap();
        assert_eq!((word0(&a), word0(&b), word0(&sb)), (103, 102, 101));
        assert_ne!(a.memory_hash(), b.memory_hash());
        // Snapshot cost: only the changed page is new.
        let sa = a.snapshot().unwrap();
        let index_a =
            pages::decode_index(&rt.store().get_blob(&sa.manifest().memory).unwrap()).unwrap();
        let index_1 =
            pages::decode_index(&rt.store().get_blob(&s1.manifest().memory).unwrap()).unwrap();
        let differing = index_a.iter().zip(&index_1).filter(|(x, y)| x != y).count();
        assert_eq!(differing, 1);
        // A fresh runtime restores from the store.
        let rt2 = self::rt(d.path(), WasmLimits::default());
        let again = rt2.snapshot(sa.id()).unwrap();
        let mut c = again.open().unwrap();
        assert_eq!(word0(&c), 103);
        c.step("c").unwrap();
        assert_eq!(word0(&c), 104);
        // Replay is exact.
        let rep = rt.replay(&sa).unwrap();
        assert!(rep.identical && rep.steps.len() == 3, "{rep:?}");
        assert!(rt.store().fsck().unwrap().is_clean());
    }

    #[test]
    fn tiny_guest_limits_end_the_session() {
        let d = tempfile::tempdir().unwrap();
        let rt = rt(
            d.path(),
            WasmLimits {
                fuel_per_step: 10_000_000,
                memory_bytes: 8 * PAGE,
                ..WasmLimits::default()
            },
        );
        let root = rt.import(&tiny_guest(), &boot()).unwrap();
        let mut sb = root.open().unwrap();
        let r = sb.step("l").unwrap();
        assert_eq!(r.outcome, StepOutcome::OutOfFuel);
        assert_eq!(r.fuel, 10_000_000);
        assert_eq!(sb.step("c").unwrap().outcome, StepOutcome::Ended);
        let mut sb = root.open().unwrap();
        assert_eq!(
            sb.step("g\u{20}").unwrap().outcome,
            StepOutcome::MemoryLimit
        );
        let mut sb = root.open().unwrap();
        assert!(matches!(
            sb.step("t").unwrap().outcome,
            StepOutcome::Trap { .. }
        ));
        let s = sb.snapshot().unwrap();
        assert!(matches!(s.manifest().ended, Some(StepOutcome::Trap { .. })));
        let mut sb = root.open().unwrap();
        assert_eq!(sb.step("c").unwrap().outcome, StepOutcome::Ok);
        let rt_slow = self::rt(
            d.path(),
            WasmLimits {
                fuel_per_step: u64::MAX / 4,
                timeout: Duration::from_millis(50),
                ..WasmLimits::default()
            },
        );
        let root = rt_slow.snapshot(root.id()).unwrap();
        let mut sb = root.open().unwrap();
        // Fuel would last for ages: only the epoch deadline can stop it.
        assert_eq!(sb.step("l").unwrap().outcome, StepOutcome::Timeout);
        assert_eq!(sb.step("c").unwrap().outcome, StepOutcome::Ended);
    }
}
