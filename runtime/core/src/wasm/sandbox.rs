//! [`WasmSandbox`]: a live session — steps, workspace files and snapshots.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use wasmtime::{Instance, Memory, TypedFunc, Val};

use super::engine::{self, HostState};
use super::manifest::{GlobalValue, StepDigest, StepOutcome, WasmAction, WasmManifest};
use super::memory::{self, PAGE, SharedRegion, ZERO_PAGE, page_hash};
use super::runtime::{Guest, WasmRuntime};
use super::snapshot::WasmSnapshot;
use super::wasi::{self, WasiState};
use super::workspace::Workspace;
use super::{
    BootSpec, MANIFEST_FORMAT, MAX_INPUT, Result, WasmError, WasmLimits, engine_err, now, pages,
};
use crate::store::object::{ObjectId, ObjectKind, object_id};

/// What one session step printed and how it ended, in the backend's own
/// terms (fuel, dropped bytes, [`StepOutcome`]); the result both backends
/// share is [`crate::StepResult`], which [`crate::AnySandbox::run`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionStep {
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

impl SessionStep {
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
    pub(super) rt: WasmRuntime,
    pub(super) guest: Arc<Guest>,
    pub(super) store: wasmtime::Store<HostState>,
    pub(super) instance: Instance,
    pub(super) memory: Memory,
    pub(super) input: Option<TypedFunc<u32, u32>>,
    pub(super) step: Option<TypedFunc<(), u32>>,
    /// The memory; mapped from `base`'s image when the sandbox opened or
    /// last snapshotted.
    pub(super) region: SharedRegion,
    /// The snapshot the memory mapping and the workspace derive from.
    pub(super) base: WasmSnapshot,
    pub(super) wasi: WasiState,
    /// Declared after `store`, so it is dropped (and its directory perhaps
    /// kept for reuse) only once the guest's instance is gone.
    pub(super) workspace: Option<Workspace>,
    /// Actions since `base`, and their observations (not yet stored).
    pub(super) actions: Vec<WasmAction>,
    pub(super) pending: Vec<PendingObservation>,
    pub(super) ended: Option<StepOutcome>,
    pub(super) limits: WasmLimits,
    /// Set while booting: recorded in the root snapshot.
    pub(super) boot: Option<BootSpec>,
    /// Set by [`WasmSandbox::inspect`]: the memory then holds changes no
    /// recorded action explains, so the sandbox may not be snapshotted.
    pub(super) inspected: bool,
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
pub(super) struct PendingObservation {
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
    pub(super) fn install_context(&mut self) -> Result<wasi::StepHandles> {
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
    pub(super) fn run_guarded(
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
    pub fn step(&mut self, code: &str) -> Result<SessionStep> {
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
    ) -> SessionStep {
        let result = SessionStep {
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

    pub(super) fn last_digest(&self) -> Result<StepDigest> {
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
        let globals = self.read_globals()?;
        // The seal protocol (`crate::seal`). 1. Objects: pages, index,
        // observations, the workspace's delta staged with its tree, and the
        // manifest, staged together.
        let protocol = &crate::seal::SESSION;
        let mut batch = crate::store::Batch::default();
        let page = |i: usize| &live[i * PAGE..(i + 1) * PAGE];
        if self.base.id == ZERO_PAGE {
            // Booting: the boot image was never stored, so every page is new.
            for (i, h) in hashes.iter().enumerate() {
                if *h != ZERO_PAGE {
                    batch.add_known(*h, ObjectKind::Blob, page(i));
                }
            }
        } else {
            for (i, h) in &changed {
                if *h != ZERO_PAGE {
                    batch.add_known(*h, ObjectKind::Blob, page(*i));
                }
            }
        }
        batch.add_known(index_id, ObjectKind::Blob, index.as_slice());
        for o in &self.pending {
            batch.add(ObjectKind::Blob, o.stdout.as_slice());
            batch.add(ObjectKind::Blob, o.stderr.as_slice());
            if let Some(c) = &o.content {
                batch.add(ObjectKind::Blob, c.as_slice());
            }
        }
        let delta = self.stage_workspace(&mut batch)?;
        let mut layers = self.base.manifest.layers.clone();
        layers.extend(delta.layer());
        let manifest = WasmManifest {
            format: MANIFEST_FORMAT,
            guest: self.base.manifest.guest,
            boot: self.boot.clone(),
            memory: index_id,
            memory_pages: pages as u64,
            memory_hash: mem_hash,
            globals,
            wasi: self.wasi.clone(),
            layers: layers.clone(),
            parent: (self.base.id != ZERO_PAGE).then_some(self.base.id),
            actions: self.actions.clone(),
            observations: self.pending.iter().map(|p| p.digest()).collect(),
            ended: self.ended.clone(),
            created_at: now(),
        };
        let json = serde_json::to_vec(&manifest)
            .map_err(|e| WasmError::BadSnapshot(format!("cannot encode the manifest: {e}")))?;
        let id = batch.add(ObjectKind::WasmManifest, json);
        let objects = batch.stage(&store)?;
        protocol.objects_written();
        // 3–6 (a session has no mount to quiesce).
        let new_layer = protocol.commit(&store, objects, delta, &id)?;
        self.actions.clear();
        self.pending.clear();
        if new_layer.is_some()
            && let Some(ws) = &mut self.workspace
        {
            ws.base = crate::layer::merge_layers(&store, &layers)?;
        }
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
    /// since the base as a layer directory and add their tree to `batch`.
    fn stage_workspace(
        &self,
        batch: &mut crate::store::Batch<'_>,
    ) -> Result<crate::seal::Delta<'static>> {
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
        let id = batch.add_tree(staged.tree())?;
        if store.layer_dir(&id).exists() {
            return Ok(Delta::Present(id));
        }
        Ok(Delta::Staged(id, staged))
    }
}
