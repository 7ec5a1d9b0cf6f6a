//! The process-wide wasmtime engine, the linker with WASI preview 1, the
//! epoch ticker, resource limits, and the on-disk cache of compiled modules.
//!
//! Compiling the Python guest takes seconds, so compiled modules are cached
//! as wasmtime's serialized modules under the cache directory (see
//! [`default_cache_dir`]), keyed by the guest's object id, the rewrite
//! version, wasmtime's version and the engine's compatibility hash. A cached
//! file is loaded only if it belongs to this user, nobody else can write it
//! or its directory, and its blake3 matches the sidecar written with it
//! (deserializing is `unsafe`: the file becomes executable code).

use std::fs;
use std::hash::Hasher;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use wasmtime::{Config, Engine, Linker, Module, OptLevel, ResourceLimiter};
use wasmtime_wasi::p1::WasiP1Ctx;

use super::memory::ImageMemoryCreator;
use super::{Result, WasmError};
use crate::store::object::ObjectId;

/// Bumped whenever [`super::rewrite`] changes what it produces.
pub const REWRITE_VERSION: u32 = 1;
/// How often the epoch ticker advances the engine's epoch.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Store data of one sandbox.
pub struct HostState {
    /// The current step's WASI context.
    pub wasi: WasiP1Ctx,
    /// Memory and table limits.
    pub limits: MemoryLimiter,
}

impl std::fmt::Debug for HostState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostState")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// A resource limiter that remembers whether it refused a memory growth.
#[derive(Debug, Clone)]
pub struct MemoryLimiter {
    /// Largest linear memory allowed, bytes.
    pub memory_cap: usize,
    /// Set when a growth past `memory_cap` was refused.
    pub memory_hit: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_cap {
            self.memory_hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// The engine and the linker shared by every sandbox of the process.
pub struct WasmEngine {
    /// The engine (fuel, epochs, copy-on-write memories).
    pub engine: Engine,
    /// WASI preview 1, nothing else.
    pub linker: Linker<HostState>,
}

impl std::fmt::Debug for WasmEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmEngine").finish_non_exhaustive()
    }
}

fn engine_err(what: &'static str) -> impl FnOnce(wasmtime::Error) -> WasmError {
    move |e| WasmError::Engine(format!("{what}: {e:#}"))
}

/// The process-wide engine (created on first use, with its epoch ticker).
pub fn engine() -> Result<Arc<WasmEngine>> {
    static ENGINE: OnceLock<std::result::Result<Arc<WasmEngine>, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| build_engine().map_err(|e| e.to_string()))
        .clone()
        .map_err(WasmError::Engine)
}

fn build_engine() -> Result<Arc<WasmEngine>> {
    let mut c = Config::new();
    c.consume_fuel(true)
        .epoch_interruption(true)
        .with_host_memory(Arc::new(ImageMemoryCreator))
        .memory_init_cow(false)
        .guard_before_linear_memory(false)
        .memory_may_move(false)
        .memory_reservation(1 << 32)
        .memory_guard_size(32 << 20)
        .memory_reservation_for_growth(0)
        .cranelift_opt_level(OptLevel::Speed)
        .parallel_compilation(true);
    let engine = Engine::new(&c).map_err(engine_err("create the wasmtime engine"))?;
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |s: &mut HostState| &mut s.wasi)
        .map_err(engine_err("link WASI preview 1"))?;
    let ticker = engine.weak();
    std::thread::Builder::new()
        .name("arbor-wasm-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match ticker.upgrade() {
                    Some(e) => e.increment_epoch(),
                    None => break,
                }
            }
        })
        .map_err(|e| WasmError::Engine(format!("start the epoch ticker: {e}")))?;
    Ok(Arc::new(WasmEngine { engine, linker }))
}

/// Compiled guests of this process, by guest object id. Holding the guard
/// serialises compilation, so a guest is compiled at most once per process.
pub fn process_modules()
-> std::sync::MutexGuard<'static, std::collections::HashMap<ObjectId, Module>> {
    static MODULES: OnceLock<std::sync::Mutex<std::collections::HashMap<ObjectId, Module>>> =
        OnceLock::new();
    MODULES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The machine-wide cache of compiled modules: `$ARBOR_WASM_CACHE`, else
/// `$XDG_CACHE_HOME/arbor/wasm`, else `~/.cache/arbor/wasm`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("ARBOR_WASM_CACHE").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("arbor/wasm"));
    }
    std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(|h| PathBuf::from(h).join(".cache/arbor/wasm"))
}

struct Blake3Hasher(blake3::Hasher);

impl Hasher for Blake3Hasher {
    fn finish(&self) -> u64 {
        let h = self.0.finalize();
        u64::from_le_bytes(h.as_bytes()[..8].try_into().unwrap_or([0; 8]))
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// The cache key of a guest for this engine.
pub fn cache_key(engine: &Engine, guest: &ObjectId) -> String {
    let mut h = Blake3Hasher(blake3::Hasher::new());
    h.write(b"arbor-wasm-module\0");
    h.write(&REWRITE_VERSION.to_le_bytes());
    h.write(env!("CARGO_PKG_VERSION").as_bytes());
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut h);
    h.write(&guest.0);
    h.0.finalize().to_hex().to_string()
}

/// How a module was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleSource {
    /// Loaded from the compile cache.
    Cache,
    /// Compiled now (and written to the cache if there is one).
    Compiled,
}

fn safe_to_load(path: &Path) -> bool {
    let me = rustix::process::geteuid().as_raw();
    let ok =
        |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.uid() == me && m.mode() & 0o022 == 0);
    ok(path) && path.parent().is_some_and(ok)
}

/// Load the compiled module for `guest` from the cache.
pub fn load_cached(engine: &Engine, cache: &Path, guest: &ObjectId) -> Option<Module> {
    let key = cache_key(engine, guest);
    let path = cache.join(format!("{key}.cwasm"));
    let sum = fs::read_to_string(cache.join(format!("{key}.b3"))).ok()?;
    if !safe_to_load(&path) {
        return None;
    }
    let bytes = fs::read(&path).ok()?;
    if blake3::hash(&bytes).to_hex().as_str() != sum.trim() {
        return None;
    }
    // SAFETY: the bytes were produced by `Module::serialize` of this
    // engine configuration (the key covers wasmtime's version and the
    // compatibility hash; wasmtime checks both again), they are unchanged
    // since (blake3 matches the sidecar written with them), and only this
    // user can write the file or its directory.
    unsafe { Module::deserialize(engine, &bytes) }.ok()
}

/// Compile `rewritten` and store it in the cache (best effort).
pub fn compile_and_cache(
    engine: &Engine,
    cache: Option<&Path>,
    guest: &ObjectId,
    rewritten: &[u8],
) -> Result<Module> {
    let module = Module::new(engine, rewritten).map_err(engine_err("compile the guest"))?;
    if let Some(dir) = cache {
        let _ = write_cache(engine, dir, guest, &module);
    }
    Ok(module)
}

fn write_cache(engine: &Engine, dir: &Path, guest: &ObjectId, module: &Module) -> Result<()> {
    let io = |what: &'static str| move |source: std::io::Error| WasmError::Cache { what, source };
    fs::create_dir_all(dir).map_err(io("create the compile cache"))?;
    let bytes = module
        .serialize()
        .map_err(engine_err("serialize the module"))?;
    let key = cache_key(engine, guest);
    let tmp = dir.join(format!(".{key}.{}.tmp", std::process::id()));
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(&tmp)
        .map_err(io("write the compile cache"))?;
    f.write_all(&bytes).map_err(io("write the compile cache"))?;
    f.sync_all().map_err(io("write the compile cache"))?;
    let sum = blake3::hash(&bytes).to_hex().to_string();
    fs::write(dir.join(format!("{key}.b3")), sum).map_err(io("write the compile cache"))?;
    fs::rename(&tmp, dir.join(format!("{key}.cwasm"))).map_err(io("write the compile cache"))?;
    Ok(())
}
