//! [`WasmSnapshot`]: a stored snapshot, opened or forked into sandboxes.

use std::sync::{Arc, OnceLock};

use wasmtime::Val;

use super::engine::{HostState, MemoryLimiter};
use super::manifest::{GlobalValue, WasmManifest};
use super::memory::{self, MemoryImage, ZERO_PAGE};
use super::runtime::WasmRuntime;
use super::sandbox::WasmSandbox;
use super::workspace::Workspace;
use super::{Result, WasmError, engine_err, pages, rewrite};
use crate::store::object::ObjectId;

/// A stored WASM snapshot (or the boot image during import).
#[derive(Clone)]
pub struct WasmSnapshot {
    pub(super) rt: WasmRuntime,
    pub(super) id: ObjectId,
    pub(super) manifest: Arc<WasmManifest>,
    pub(super) image: Arc<OnceLock<Arc<MemoryImage>>>,
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
                limits: MemoryLimiter {
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
