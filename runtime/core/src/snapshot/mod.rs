//! Snapshot and fork.
//!
//! A snapshot is an ordered chain of layers plus session state and metadata,
//! stored as a manifest whose hash is the snapshot id. Taking one *seals* the
//! sandbox's private part (overlay upper or copy workspace) with the seal
//! protocol written out in `crate::seal` (objects and manifest staged →
//! unmount → one `syncfs` → rename into `layers/<id>` and `objects/` → list), at a cost proportional to
//! what changed since the last snapshot, never to the workspace. Forking N
//! sandboxes from a snapshot mounts N overlays over the same lower chain,
//! each with its own empty upper: nothing is copied.

use std::fs::File;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::Runtime;
use crate::layer::OwnerMap;
use crate::runtime::{Result, RuntimeError};
use crate::sandbox::{Sandbox, SandboxError};
use crate::seal::{Delta, Staged};
use crate::store::object::{Action, Manifest, SessionState, SnapshotId};
use crate::store::{Batch, failpoint, fsync_dir};

/// Failpoints of the snapshot protocol, in order (see [`crate::store::failpoint`]).
pub const FAILPOINTS: &[&str] = &[
    "snapshot.tree-written",
    "snapshot.unmounted",
    "snapshot.synced",
    "snapshot.layer-renamed",
    "snapshot.manifest-written",
    "snapshot.listed",
    "import.tree-written",
    "import.layer-renamed",
    "import.manifest-written",
];

/// A stored snapshot: its id and manifest, with the runtime that reads it.
///
/// ```no_run
/// # fn main() -> arbor_runtime::Result<()> {
/// # let rt = arbor_runtime::Runtime::open_at("/tmp/arbor-home")?;
/// let snapshot = rt.resolve("base")?;
/// let mut one = snapshot.open()?; // a sandbox on it
/// let many = snapshot.fork(8)?; // eight, opened concurrently
/// # drop((one, many));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Snapshot {
    runtime: Runtime,
    id: SnapshotId,
    manifest: Manifest,
}

impl Snapshot {
    pub(crate) fn new(runtime: Runtime, id: SnapshotId, manifest: Manifest) -> Self {
        Self {
            runtime,
            id,
            manifest,
        }
    }

    /// The runtime that stored it.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The snapshot id (hash of the manifest).
    pub fn id(&self) -> &SnapshotId {
        &self.id
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Open one sandbox on this snapshot.
    pub fn open(&self) -> Result<Sandbox> {
        self.runtime.open_sandbox(self)
    }

    /// Fork `n` independent sandboxes from this snapshot: `n` overlays over
    /// the same lower chain, each with its own empty upper. Opened
    /// concurrently, one worker per core.
    pub fn fork(&self, n: usize) -> Result<Vec<Sandbox>> {
        let forks = vec![(); n];
        crate::parallel::map(&forks, crate::parallel::default_workers(n), |_, ()| {
            self.open()
        })
        .into_iter()
        .map(|opened| {
            opened.unwrap_or_else(|p| {
                Err(RuntimeError::Sandbox(SandboxError::WorkerFailed(format!(
                    "opening a fork: {p}"
                ))))
            })
        })
        .collect()
    }
}

impl Sandbox {
    /// Seal the changes since the last snapshot into a new snapshot and
    /// continue on it. With nothing done since the base snapshot, returns the
    /// base snapshot itself.
    pub fn snapshot(&mut self) -> Result<Snapshot> {
        let runtime = self.runtime().clone();
        if !self.has_pending()
            && let Some(base) = self.base().copied()
            && self.delta()?.0.entries.is_empty()
        {
            return runtime.snapshot(&base);
        }
        let store = runtime.store();
        let _lock = store.lock_shared()?;
        let protocol = &crate::seal::SANDBOX;
        let (tree, tree_id) = self.delta()?;
        // 1. Outputs, file contents and delta trees of the pending actions,
        // the delta's tree and the manifest, staged together.
        let staged = stage_copy_delta(&runtime, self, &tree, tree_id)?;
        let mut layers = self.layers().to_vec();
        if !tree.entries.is_empty() {
            layers.push(tree_id);
        }
        let (pending, killed_background) = self.pending();
        let actions: Vec<Action> = pending.iter().map(|(a, _)| a.clone()).collect();
        let action = match actions.len() {
            0 => None,
            1 => actions.into_iter().next(),
            _ => Some(Action::Sequence { actions }),
        };
        let manifest = Manifest {
            layers: layers.clone(),
            session: self.session().clone(),
            parent: self.base().copied(),
            action,
            observations: pending.iter().map(|(_, o)| o.clone()).collect(),
            created_at: now(),
            killed_background: killed_background.to_vec(),
            image: self.image().map(|i| i.id),
            workdir: self.workdir().map(str::to_owned),
        };
        let mut batch = Batch::default();
        self.held_objects(&mut batch);
        let written = batch.add_tree(&tree)?;
        debug_assert_eq!(written, tree_id);
        let id = batch.add_manifest(&manifest)?;
        let objects = batch.stage(store)?;
        protocol.objects_written();
        // 2.
        self.unmount_workspace()?;
        protocol.quiesced();
        // 3–6.
        let delta = if tree.entries.is_empty() {
            Delta::Empty
        } else if let Some(staged) = staged {
            Delta::Staged(tree_id, staged)
        } else if self.is_overlay() && !store.layer_dir(&tree_id).exists() {
            Delta::Upper(tree_id, self.private_dir())
        } else {
            Delta::Present(tree_id)
        };
        if let Err(e) = protocol.commit(store, objects, delta, &id) {
            // Keep the sandbox usable: mount its unsealed changes again
            // (it fails, harmlessly, when the upper was already installed).
            let _ = self.remount_after_failed_seal();
            return Err(e.into());
        }
        self.take_pending();
        // 7.
        self.continue_on(id, layers)?;
        Ok(Snapshot::new(runtime, id, manifest))
    }
}

/// Step 1 of the copy backend: stage the workspace's delta as a layer
/// directory, unless nothing changed or the store has the layer already.
fn stage_copy_delta(
    runtime: &Runtime,
    sandbox: &Sandbox,
    tree: &crate::store::object::Tree,
    tree_id: SnapshotId,
) -> Result<Option<Staged>> {
    let store = runtime.store();
    if sandbox.is_overlay() || tree.entries.is_empty() || store.layer_dir(&tree_id).exists() {
        return Ok(None);
    }
    // The copy workspace stays the sandbox's; the layer is the written delta.
    let staged = Staged::write(store, |dir| sandbox.write_copy_delta(dir))?;
    let written = crate::store::tree_id(staged.tree())?;
    if written != tree_id {
        return Err(RuntimeError::Sandbox(SandboxError::SealRace(format!(
            "the workspace changed while it was being sealed (delta {} became {})",
            tree_id.short(),
            written.short()
        ))));
    }
    Ok(Some(staged))
}

fn io(op: &'static str, path: &Path, source: std::io::Error) -> RuntimeError {
    RuntimeError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Runtime {
    /// Snapshot a host directory as a root snapshot (optionally tagged).
    /// Symlinks are copied verbatim, never followed; sockets and devices are
    /// skipped; every entry is owned by the sandbox's root.
    pub fn import(&self, src: &Path, tag: Option<&str>) -> Result<Snapshot> {
        self.import_on(src, tag, None)
    }

    /// [`Self::import`] with the workspace on `image`: sandboxes on the
    /// snapshot (and on every snapshot taken from them) see the image's root
    /// filesystem instead of the host's, with the image's environment.
    pub fn import_on(
        &self,
        src: &Path,
        tag: Option<&str>,
        image: Option<&crate::image::Image>,
    ) -> Result<Snapshot> {
        self.import_with(src, tag, image, false)
    }

    /// [`Self::import_on`], with `at_workdir`: the workspace also appears at
    /// the image's `WorkingDir` (a directory of the image), where every
    /// action starts, as a container on the image would see its project
    /// (the verifier and the file API keep using `/workspace`: the same
    /// files). Fails with [`RuntimeError::Workdir`] when there is no image,
    /// the image names no `WorkingDir`, or the image lacks that directory.
    pub fn import_with(
        &self,
        src: &Path,
        tag: Option<&str>,
        image: Option<&crate::image::Image>,
        at_workdir: bool,
    ) -> Result<Snapshot> {
        let workdir = match (at_workdir, image) {
            (false, _) => None,
            (true, None) => {
                return Err(RuntimeError::Workdir(
                    "a workspace at the image's WorkingDir needs an image".to_owned(),
                ));
            }
            (true, Some(img)) => Some(self.image_workdir(img)?),
        };
        let meta = std::fs::metadata(src).map_err(|e| io("import", src, e))?;
        if !meta.is_dir() {
            return Err(RuntimeError::NotADirectory(src.to_owned()));
        }
        let store = self.store();
        let owners = self.owner_map();
        let _lock = store.lock_shared()?;
        let staging = store.new_temp_path("import");
        let result = (|| -> Result<Snapshot> {
            copy_host_dir(src, &staging, &owners)?;
            let tree = crate::layer::tree_of_dir(&staging, &owners)?;
            let tree_id = store.put_tree(&tree)?;
            failpoint("import.tree-written");
            let dest = store.layer_dir(&tree_id);
            if !dest.exists() {
                crate::seal::install_dir(&staging, &dest)?;
                if let Some(parent) = dest.parent() {
                    fsync_dir(parent)?;
                }
            }
            failpoint("import.layer-renamed");
            let manifest = Manifest {
                layers: vec![tree_id],
                session: SessionState {
                    cwd: workdir.clone().unwrap_or_else(|| "/workspace".to_owned()),
                    ..SessionState::default()
                },
                parent: None,
                action: Some(Action::Import {
                    source: src.display().to_string(),
                }),
                observations: Vec::new(),
                created_at: now(),
                killed_background: Vec::new(),
                image: image.map(|i| i.id),
                workdir: workdir.clone(),
            };
            let id = store.put_manifest(&manifest)?;
            failpoint("import.manifest-written");
            store.list_snapshot(&id)?;
            if let Some(tag) = tag {
                store.set_tag(tag, &id)?;
            }
            Ok(Snapshot::new(self.clone(), id, manifest))
        })();
        if staging.exists() {
            crate::cleanup::remove_dir_forcefully(&staging);
        }
        result
    }
}

impl Runtime {
    /// The image's `WorkingDir`, checked: an absolute, normal path below `/`
    /// that is not one of the sandbox's own mount points, and a directory of
    /// the image (in its topmost layer that has the path).
    fn image_workdir(&self, image: &crate::image::Image) -> Result<String> {
        let Some(dir) = image.record.config.working_dir.clone() else {
            return Err(RuntimeError::Workdir(format!(
                "image {} names no WorkingDir",
                image.id.short()
            )));
        };
        let rel = dir.trim_end_matches('/').trim_start_matches('/');
        let normal = dir.starts_with('/')
            && !rel.is_empty()
            && Path::new(rel)
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        let first = rel.split('/').next().unwrap_or_default();
        if !normal
            || ["proc", "dev", "tmp", "workspace", "sys", "etc"].contains(&first)
            || crate::sandbox::protocol::MOUNT_POINTS.contains(&first)
        {
            return Err(RuntimeError::Workdir(format!(
                "the image's WorkingDir {dir:?} is not a plain absolute path outside /proc, /dev, /tmp, /sys, /etc and /workspace"
            )));
        }
        for layer in image.record.layers.iter().rev() {
            let p = self.store().layer_dir(layer).join(rel);
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => return Ok(format!("/{rel}")),
                Ok(_) => break,
                Err(_) => continue,
            }
        }
        Err(RuntimeError::Workdir(format!(
            "the image's WorkingDir {dir:?} is not a directory of the image"
        )))
    }
}

/// Copy a host directory tree into `dst` (created) without following
/// symlinks, owned by the sandbox's root.
fn copy_host_dir(src: &Path, dst: &Path, owners: &OwnerMap) -> Result<()> {
    let (uid, gid) = owners.to_host(0, 0);
    let chown = |p: &Path| -> Result<()> {
        rustix::fs::chownat(
            rustix::fs::CWD,
            p,
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| io("chown", p, e.into()))
    };
    let meta = std::fs::symlink_metadata(src).map_err(|e| io("stat", src, e))?;
    std::fs::create_dir(dst).map_err(|e| io("create", dst, e))?;
    let mut entries: Vec<_> = std::fs::read_dir(src)
        .map_err(|e| io("read directory", src, e))?
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| io("read directory", src, e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let m = std::fs::symlink_metadata(&from).map_err(|e| io("stat", &from, e))?;
        let ft = m.file_type();
        if ft.is_symlink() {
            let target = std::fs::read_link(&from).map_err(|e| io("readlink", &from, e))?;
            std::os::unix::fs::symlink(&target, &to).map_err(|e| io("symlink", &to, e))?;
            chown(&to)?;
        } else if ft.is_dir() {
            copy_host_dir(&from, &to, owners)?;
        } else if ft.is_file() {
            use std::os::unix::fs::OpenOptionsExt;
            let mut input = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&from)
                .map_err(|e| io("open", &from, e))?;
            let mut output = File::create(&to).map_err(|e| io("create", &to, e))?;
            std::io::copy(&mut input, &mut output).map_err(|e| io("copy", &to, e))?;
            output
                .set_permissions(std::fs::Permissions::from_mode(m.mode() & 0o7777))
                .map_err(|e| io("chmod", &to, e))?;
            chown(&to)?;
        }
        // Sockets, FIFOs and devices are not part of a workspace snapshot.
    }
    std::fs::set_permissions(dst, std::fs::Permissions::from_mode(meta.mode() & 0o7777))
        .map_err(|e| io("chmod", dst, e))?;
    chown(dst)
}
