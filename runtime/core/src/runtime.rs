//! The entry point of the library: a [`Runtime`] ties a store to a backend,
//! the sandbox helper and the limits, and offers the operations of the CLI:
//! import, open and fork sandboxes, diff, log, checkout.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::layer::{self, Diff, MaterializeReport, OwnerMap};
use crate::sandbox::{
    CgroupLimits, Confinement, HelperCommand, Sandbox, SandboxError, SandboxLimits, SystemView,
};
use crate::snapshot::Snapshot;
use crate::store::object::{LayerId, SnapshotId};
use crate::store::{OwnerMode, Store};

/// Host uid (and gid) that is root inside sandboxes when Arbor runs as real
/// root. Sandboxes see ids `0..65536`, stored as `BASE..BASE+65536`.
pub const DEFAULT_UID_BASE: u32 = 0x6000_0000;

/// Chains longer than this are mounted through a squashed layer cached under
/// the snapshot id (overlayfs stacks at most 500 lower layers).
pub const DEFAULT_SQUASH_AFTER: usize = 400;

/// A layer's entries by path.
pub(crate) type LayerIndex = std::collections::HashMap<String, crate::store::object::TreeEntry>;

/// Prepared helpers a runtime keeps ready by default.
pub const DEFAULT_WARM_HELPERS: usize = 2;

/// Which filesystem backend provides `/workspace`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkspaceBackend {
    /// Overlayfs over the layer chain with a private upper: nothing is copied.
    Overlay,
    /// A private materialised copy per sandbox: portable, cost O(workspace).
    Copy,
}

/// What to use, before probing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkspaceChoice {
    /// Overlay where it works, else copy (with a message on stderr).
    Auto,
    /// Exactly this backend.
    Force(WorkspaceBackend),
}

impl WorkspaceChoice {
    /// `ARBOR_BACKEND=overlay|copy` or `Auto`.
    pub fn from_env() -> Result<Self, RuntimeError> {
        match std::env::var("ARBOR_BACKEND").ok().as_deref() {
            None | Some("" | "auto") => Ok(Self::Auto),
            Some("overlay") => Ok(Self::Force(WorkspaceBackend::Overlay)),
            Some("copy") => Ok(Self::Force(WorkspaceBackend::Copy)),
            Some(other) => Err(RuntimeError::BadWorkspaceBackend(other.to_owned())),
        }
    }
}

/// Errors of the runtime module.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// `ARBOR_BACKEND` names no backend.
    #[error("ARBOR_BACKEND={0:?} is not a backend (use overlay, copy or auto)")]
    BadWorkspaceBackend(String),
    /// No home directory could be determined.
    #[error("no store location: pass --home or set ARBOR_HOME")]
    NoHome,
    /// The import source is not a directory.
    #[error("cannot import {0}: not a directory")]
    NotADirectory(PathBuf),
    /// The checkout destination exists and is not empty.
    #[error("cannot check out into {0}: it exists and is not empty")]
    DestinationNotEmpty(PathBuf),
    /// A host filesystem operation failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A store operation failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A layer operation failed.
    #[error(transparent)]
    Layer(#[from] layer::LayerError),
    /// A sandbox operation failed.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// An image was refused.
    #[error(transparent)]
    Image(Box<crate::image::ImageError>),
    /// A workspace at the image's `WorkingDir` cannot be had.
    #[error("workdir: {0}")]
    Workdir(String),
    /// The WebAssembly backend failed.
    #[cfg(feature = "wasm")]
    #[error(transparent)]
    Wasm(#[from] crate::wasm::WasmError),
    /// The snapshot is a WebAssembly session and this build has no `wasm` feature.
    #[error(
        "snapshot {} is a WebAssembly session; this build has no WebAssembly backend (rebuild with --features wasm)",
        .0.short()
    )]
    NoWasmBackend(SnapshotId),
    /// `import --wasm` (or another session operation) in a build without the `wasm` feature.
    #[error("this build has no WebAssembly backend (rebuild with --features wasm)")]
    WasmUnavailable,
    /// A session seed that is not 64 hex digits.
    #[error("a session seed must be 64 hex digits, not {0:?}")]
    BadSeed(String),
    /// An option only the native backend has was given for a session.
    #[error("a WebAssembly session has no {0} (they are native-only)")]
    NativeOnly(&'static str),
}

/// Result type of the runtime.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// How to open a [`Runtime`].
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// The store directory.
    pub home: PathBuf,
    /// Backend selection.
    pub workspace: WorkspaceChoice,
    /// The read-only system view.
    pub system: SystemView,
    /// Per-action limits.
    pub limits: SandboxLimits,
    /// The syscall filter and Landlock of every action (both on by default).
    pub confinement: Confinement,
    /// Cgroup limits (used when running as real root).
    pub cgroup: CgroupLimits,
    /// Host uid that is root inside (real-root mode only).
    pub uid_base: u32,
    /// Squash chains longer than this.
    pub squash_after: usize,
    /// The helper to spawn; located automatically when `None`.
    pub helper: Option<HelperCommand>,
    /// How many prepared helpers to keep ready (namespaces, cgroups and
    /// system view set up in the background) so that opening a sandbox only
    /// mounts its workspace. 0 prepares each one when it is opened.
    pub warm_helpers: usize,
}

impl RuntimeOptions {
    /// Defaults for a store at `home`, with `ARBOR_BACKEND` honoured.
    pub fn new(home: impl Into<PathBuf>) -> Result<Self> {
        Ok(Self {
            home: home.into(),
            workspace: WorkspaceChoice::from_env()?,
            system: SystemView::Host,
            limits: SandboxLimits::default(),
            confinement: Confinement::default(),
            cgroup: CgroupLimits::default(),
            uid_base: DEFAULT_UID_BASE,
            squash_after: DEFAULT_SQUASH_AFTER,
            helper: None,
            warm_helpers: DEFAULT_WARM_HELPERS,
        })
    }

    /// `$ARBOR_HOME`, else `$XDG_DATA_HOME/arbor`, else `~/.local/share/arbor`.
    pub fn default_home() -> Result<PathBuf> {
        if let Some(h) = std::env::var_os("ARBOR_HOME").filter(|h| !h.is_empty()) {
            return Ok(PathBuf::from(h));
        }
        if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|h| !h.is_empty()) {
            return Ok(PathBuf::from(d).join("arbor"));
        }
        match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            Some(h) => Ok(PathBuf::from(h).join(".local/share/arbor")),
            None => Err(RuntimeError::NoHome),
        }
    }
}

/// In real-root mode the sandbox's root is an unprivileged host uid that the
/// helper becomes before mounting: it must be able to pass through the store
/// root and the directories that hold layers and sandboxes (search only; it
/// can list none of them). A store created under a umask of 077 or in a
/// `mktemp -d` directory would otherwise make every sandbox fail.
fn make_traversable(store: &Store) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let root = store.root().to_path_buf();
    for dir in [
        root.clone(),
        store.run_dir(),
        root.join("layers"),
        root.join("squash"),
    ] {
        let meta = std::fs::metadata(&dir).map_err(|e| RuntimeError::Io {
            op: "stat",
            path: dir.clone(),
            source: e,
        })?;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o001 == 0 {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode | 0o711)).map_err(
                |e| RuntimeError::Io {
                    op: "make searchable",
                    path: dir.clone(),
                    source: e,
                },
            )?;
        }
    }
    Ok(())
}

/// A store plus everything needed to run sandboxes on it. Cheap to clone.
///
/// ```no_run
/// use arbor_runtime::{Runtime, RuntimeOptions};
///
/// # fn main() -> arbor_runtime::Result<()> {
/// let mut options = RuntimeOptions::new(RuntimeOptions::default_home()?)?;
/// options.warm_helpers = 4; // keep helpers prepared for a rollout's forks
/// let rt = Runtime::open(options)?;
/// let snapshot = rt.resolve("base")?; // id, unique prefix or tag
/// for ancestor in rt.log(&snapshot)? {
///     println!("{}", ancestor.id().short());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Runtime {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    options: RuntimeOptions,
    owners: OwnerMap,
    /// The backend once decided (probing happens on the first sandbox).
    backend: Mutex<Option<WorkspaceBackend>>,
    helper: Mutex<Option<HelperCommand>>,
    /// Layer trees indexed by path, shared by the sandboxes of this runtime
    /// (digests compare each change with the layers below it).
    layer_index: Mutex<std::collections::HashMap<LayerId, Arc<LayerIndex>>>,
    /// Prepared helpers, one pool per system view (the host's, or an
    /// image's), each started on the first sandbox that needs it.
    pools: Mutex<Vec<(SystemView, Arc<crate::sandbox::pool::WarmPool>)>>,
    /// The WebAssembly runtimes on this store, one per set of sandbox
    /// limits (each shares the compiled guest and memory images of its
    /// sandboxes); see [`Runtime::wasm`].
    #[cfg(feature = "wasm")]
    wasm: Mutex<Vec<(crate::wasm::WasmLimits, crate::wasm::WasmRuntime)>>,
}

impl Runtime {
    /// Open (creating if needed) the store at `options.home`.
    pub fn open(options: RuntimeOptions) -> Result<Self> {
        let mode = OwnerMode::for_current_user(options.uid_base);
        let mut options = options;
        options.home = std::path::absolute(&options.home).map_err(|e| RuntimeError::Io {
            op: "resolve",
            path: options.home.clone(),
            source: e,
        })?;
        let store = Store::open(&options.home, mode)?;
        if let OwnerMode::Root { .. } = store.mode() {
            make_traversable(&store)?;
        }
        let owners = OwnerMap::for_store(store.mode());
        let backend = match options.workspace {
            WorkspaceChoice::Force(b) => Some(b),
            WorkspaceChoice::Auto => {
                let fs = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
                if fs.lines().any(|l| l.trim_end().ends_with("overlay")) {
                    None
                } else {
                    eprintln!(
                        "arbor: overlayfs is not available on this kernel; using the copy backend"
                    );
                    Some(WorkspaceBackend::Copy)
                }
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                helper: Mutex::new(options.helper.clone()),
                options,
                owners,
                backend: Mutex::new(backend),
                pools: Mutex::new(Vec::new()),
                layer_index: Mutex::new(std::collections::HashMap::new()),
                #[cfg(feature = "wasm")]
                wasm: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The WebAssembly backend on this store for sandboxes with `limits`:
    /// opened on first use and kept by this runtime, so every caller with
    /// the same limits (the CLI's commands, every session task) shares one
    /// compiled guest, one set of memory images and one root memo
    /// ([`crate::wasm::WasmRuntime::memo_root`]). Nothing about it is
    /// process-global but the wasmtime engine.
    ///
    /// # Errors
    /// The engine could not be created.
    #[cfg(feature = "wasm")]
    pub fn wasm(
        &self,
        limits: crate::wasm::WasmLimits,
    ) -> std::result::Result<crate::wasm::WasmRuntime, crate::wasm::WasmError> {
        let mut all = self.inner.wasm.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, rt)) = all.iter().find(|(l, _)| *l == limits) {
            return Ok(rt.clone());
        }
        let rt = crate::wasm::WasmRuntime::open(
            self.inner.store.clone(),
            crate::wasm::WasmOptions {
                limits,
                ..crate::wasm::WasmOptions::default()
            },
        )?;
        all.push((limits, rt.clone()));
        Ok(rt)
    }

    /// Open the store at `home` with default options.
    pub fn open_at(home: impl Into<PathBuf>) -> Result<Self> {
        Self::open(RuntimeOptions::new(home)?)
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The options this runtime was opened with.
    pub fn options(&self) -> &RuntimeOptions {
        &self.inner.options
    }

    /// How host owners of layer files map to owners inside sandboxes.
    pub fn owner_map(&self) -> OwnerMap {
        self.inner.owners
    }

    /// The backend in use (overlay until a sandbox finds it unusable).
    pub fn workspace_backend(&self) -> WorkspaceBackend {
        self.inner
            .backend
            .lock()
            .ok()
            .and_then(|b| *b)
            .unwrap_or(WorkspaceBackend::Overlay)
    }

    pub(crate) fn helper_command(&self) -> Result<HelperCommand, SandboxError> {
        let mut guard = self
            .inner
            .helper
            .lock()
            .map_err(|_| SandboxError::Poisoned("helper"))?;
        if let Some(cmd) = guard.as_ref() {
            return Ok(cmd.clone());
        }
        let cmd = HelperCommand::locate()?;
        *guard = Some(cmd.clone());
        Ok(cmd)
    }

    /// Start the warm pool (if it is not running) and wait up to `timeout`
    /// until it holds `warm_helpers` prepared helpers; returns how many are
    /// ready. Useful before a latency-sensitive burst of forks.
    pub fn warm_up(&self, timeout: std::time::Duration) -> Result<usize, SandboxError> {
        Ok(self.pool(&self.options().system)?.wait_ready(timeout))
    }

    /// [`Self::warm_up`] for sandboxes on `image` (whose system view is the
    /// image's root filesystem, so they have helpers of their own).
    pub fn warm_up_image(
        &self,
        image: &crate::image::Image,
        timeout: std::time::Duration,
    ) -> Result<usize, SandboxError> {
        Ok(self
            .pool(&self.system_view(Some(image)))?
            .wait_ready(timeout))
    }

    /// The system view of sandboxes on `image` (the runtime's own without one).
    pub(crate) fn system_view(&self, image: Option<&crate::image::Image>) -> SystemView {
        match image {
            None => self.options().system.clone(),
            Some(img) => SystemView::Image {
                lowers: img
                    .record
                    .layers
                    .iter()
                    .rev()
                    .map(|l| self.store().layer_dir(l))
                    .collect(),
                at: PathBuf::new(),
            },
        }
    }

    fn pool(
        &self,
        system: &SystemView,
    ) -> Result<Arc<crate::sandbox::pool::WarmPool>, SandboxError> {
        let mut pools = self
            .inner
            .pools
            .lock()
            .map_err(|_| SandboxError::Poisoned("warm pools"))?;
        if let Some((_, pool)) = pools.iter().find(|(v, _)| v == system) {
            return Ok(Arc::clone(pool));
        }
        let config = crate::sandbox::pool::PrepareConfig {
            store: self.store().clone(),
            helper: self.helper_command()?,
            system: system.clone(),
            limits: self.options().limits.clone(),
            confinement: self.options().confinement,
            cgroup: self.options().cgroup.clone(),
        };
        let pool = Arc::new(crate::sandbox::pool::WarmPool::new(
            config,
            self.options().warm_helpers,
        ));
        pools.push((system.clone(), Arc::clone(&pool)));
        Ok(pool)
    }

    /// A prepared helper (namespaces and system view ready) from the warm
    /// pool of `system`, which is started on first use.
    pub(crate) fn claim_helper(
        &self,
        system: &SystemView,
    ) -> Result<crate::sandbox::pool::Prepared, SandboxError> {
        self.pool(system)?.claim()
    }

    /// A layer's tree indexed by path (cached for the runtime's lifetime,
    /// up to a bound).
    pub(crate) fn layer_index(
        &self,
        id: &LayerId,
    ) -> Result<Arc<LayerIndex>, crate::store::StoreError> {
        if let Ok(cache) = self.inner.layer_index.lock()
            && let Some(found) = cache.get(id)
        {
            return Ok(Arc::clone(found));
        }
        let tree = self.store().get_tree(id)?;
        let index: Arc<LayerIndex> = Arc::new(
            tree.entries
                .into_iter()
                .map(|e| (e.path.clone(), e))
                .collect(),
        );
        if let Ok(mut cache) = self.inner.layer_index.lock() {
            if cache.len() >= 4096 {
                cache.clear();
            }
            cache.insert(*id, Arc::clone(&index));
        }
        Ok(index)
    }

    /// The lower directories for a chain, topmost first: the layer
    /// directories, or one squashed layer for chains longer than `squash_after`.
    pub(crate) fn lower_dirs(
        &self,
        base: Option<&SnapshotId>,
        layers: &[LayerId],
    ) -> Result<Vec<PathBuf>, SandboxError> {
        if layers.is_empty() {
            let empty = self.store().run_dir().join("empty-lower");
            std::fs::create_dir_all(&empty).map_err(|e| SandboxError::io("create", &empty, e))?;
            return Ok(vec![empty]);
        }
        // overlayfs refuses a lower chain that holds the same directory twice
        // (ELOOP, "overlapping layers"), which happens when a step's changes
        // equal an earlier layer's exactly (writing back the same file
        // content): such chains are mounted from their squashed copy.
        let repeated = {
            let mut seen = std::collections::HashSet::with_capacity(layers.len());
            !layers.iter().all(|l| seen.insert(*l))
        };
        if let (Some(base), true) = (base, repeated || layers.len() > self.options().squash_after) {
            return Ok(vec![layer::squash(
                self.store(),
                base,
                layers,
                &self.owner_map(),
            )?]);
        }
        Ok(layers
            .iter()
            .rev()
            .map(|l| self.store().layer_dir(l))
            .collect())
    }

    /// Open a sandbox on `snapshot`, probing the backend on first use.
    pub fn open_sandbox(&self, snapshot: &Snapshot) -> Result<Sandbox> {
        let manifest = snapshot.manifest();
        let image = match &manifest.image {
            Some(id) => Some(Arc::new(self.image_by_id(id)?)),
            None => None,
        };
        let open = || {
            Sandbox::open(
                self,
                Some(*snapshot.id()),
                manifest.layers.clone(),
                manifest.session.clone(),
                image.clone(),
                manifest.workdir.clone(),
            )
        };
        let decided = self.inner.backend.lock().ok().and_then(|b| *b).is_some();
        match open() {
            Ok(sb) => {
                if !decided && let Ok(mut b) = self.inner.backend.lock() {
                    b.get_or_insert(WorkspaceBackend::Overlay);
                }
                Ok(sb)
            }
            Err(SandboxError::Helper { error: msg, .. }) if !decided && msg.is_overlay_mount() => {
                eprintln!(
                    "arbor: overlayfs cannot be mounted here ({msg}); using the copy backend"
                );
                if let Ok(mut b) = self.inner.backend.lock() {
                    *b = Some(WorkspaceBackend::Copy);
                }
                Ok(open()?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Load a snapshot by id.
    pub fn snapshot(&self, id: &SnapshotId) -> Result<Snapshot> {
        let manifest = self.store().get_manifest(id)?;
        Ok(Snapshot::new(self.clone(), *id, manifest))
    }

    /// Resolve an id, unique id prefix or tag, and load the snapshot.
    pub fn resolve(&self, what: &str) -> Result<Snapshot> {
        let id = self.store().resolve(what)?;
        self.snapshot(&id)
    }

    /// Added, modified and deleted paths from `a` to `b` (computed from the
    /// layers' trees; no file is read).
    pub fn diff(&self, a: &Snapshot, b: &Snapshot) -> Result<Diff> {
        self.diff_layers(&a.manifest().layers, &b.manifest().layers)
    }

    /// [`Self::diff`] of two layer chains (e.g. the workspaces of two
    /// WebAssembly session snapshots).
    pub fn diff_layers(&self, a: &[LayerId], b: &[LayerId]) -> Result<Diff> {
        diff_layers(self.store(), a, b)
    }

    /// The chain of snapshots from the root to `snapshot`, root first.
    pub fn log(&self, snapshot: &Snapshot) -> Result<Vec<Snapshot>> {
        let mut chain = vec![snapshot.clone()];
        while let Some(parent) = chain.last().and_then(|s| s.manifest().parent) {
            chain.push(self.snapshot(&parent)?);
        }
        chain.reverse();
        Ok(chain)
    }

    /// Materialise `snapshot` into `dest` (absent or empty), verifying every
    /// layer file against its tree first: a corrupt file fails the checkout
    /// and names the file.
    pub fn checkout(&self, snapshot: &Snapshot, dest: &Path) -> Result<MaterializeReport> {
        self.checkout_layers(&snapshot.manifest().layers, dest)
    }

    /// [`Self::checkout`] of a layer chain (e.g. the workspace of a
    /// WebAssembly session snapshot).
    pub fn checkout_layers(&self, layers: &[LayerId], dest: &Path) -> Result<MaterializeReport> {
        checkout_layers(self.store(), layers, dest)
    }
}

/// Added, modified and deleted paths from chain `a` to chain `b`.
pub(crate) fn diff_layers(store: &Store, a: &[LayerId], b: &[LayerId]) -> Result<Diff> {
    let va = layer::merge_layers(store, a)?;
    let vb = layer::merge_layers(store, b)?;
    Ok(layer::diff(&va, &vb))
}

/// Materialise a layer chain into `dest` (absent or empty), verified.
pub(crate) fn checkout_layers(
    store: &Store,
    layers: &[LayerId],
    dest: &Path,
) -> Result<MaterializeReport> {
    if dest.exists() {
        let mut entries = std::fs::read_dir(dest).map_err(|e| RuntimeError::Io {
            op: "read",
            path: dest.to_owned(),
            source: e,
        })?;
        if entries.next().is_some() {
            return Err(RuntimeError::DestinationNotEmpty(dest.to_owned()));
        }
    }
    Ok(layer::materialize(
        store,
        layers,
        dest,
        &layer::MaterializeOptions {
            verify: true,
            owners: None,
        },
    )?)
}
