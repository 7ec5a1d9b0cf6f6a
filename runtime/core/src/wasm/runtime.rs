//! [`WasmRuntime`]: the backend over one store; compiles guests, boots and
//! loads snapshots and holds the live sandboxes' bases as gc roots.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use wasmtime::{InstancePre, Module, Val};

use super::engine::{self, HostState, ModuleSource, WasmEngine};
use super::manifest::{StepOutcome, WasmManifest};
use super::memory::{self, MemoryImage, PAGE, ZERO_PAGE, page_hash};
use super::snapshot::WasmSnapshot;
use super::wasi::WasiState;
use super::workspace::SpareDirs;
use super::{BootSpec, MANIFEST_FORMAT, Result, WasmError, WasmLimits, WasmOptions, rewrite};
use crate::layer::OwnerMap;
use crate::store::object::ObjectId;
use crate::store::{OwnerMode, Store};

/// A compiled guest, shared by every sandbox of the runtime.
pub(super) struct Guest {
    pub(super) pre: InstancePre<HostState>,
    pub(super) globals: Vec<String>,
    pub(super) has_start: bool,
}

pub(super) struct RtInner {
    pub(super) store: Store,
    pub(super) owners: OwnerMap,
    pub(super) options: WasmOptions,
    pub(super) engine: Arc<WasmEngine>,
    pub(super) guests: Mutex<HashMap<ObjectId, Arc<Guest>>>,
    pub(super) images: Mutex<HashMap<ObjectId, Weak<MemoryImage>>>,
    pub(super) spare_dirs: Arc<SpareDirs>,
    roots: Mutex<LiveRoots>,
    /// Root snapshots by their maker's content key ([`WasmRuntime::memo_root`]).
    pub(super) root_memo: Mutex<HashMap<String, ObjectId>>,
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
    pub(super) inner: Arc<RtInner>,
}

impl std::fmt::Debug for WasmRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmRuntime")
            .field("store", &self.inner.store.root())
            .finish_non_exhaustive()
    }
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

    pub(super) fn guest(&self, id: &ObjectId) -> Result<Arc<Guest>> {
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

    pub(super) fn boot(
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

    /// Record `id` as the base of a live sandbox (see [`LiveRoots`]).
    pub(super) fn hold_root(&self, id: &ObjectId) -> Result<()> {
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

    pub(super) fn run_dir(&self) -> PathBuf {
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
