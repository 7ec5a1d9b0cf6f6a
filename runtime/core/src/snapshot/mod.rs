//! Snapshot and fork.
//!
//! A snapshot is an ordered chain of layers plus session state and metadata,
//! stored as a manifest whose hash is the snapshot id. Taking one *seals* the
//! sandbox's private upper directory, at a cost proportional to what changed
//! since the last snapshot, never to the workspace:
//!
//! 1. write the objects the pending actions refer to (their outputs, written
//!    file contents) and the tree of the upper directory, whose hash is the
//!    layer id (the tree was computed after the last action);
//! 2. unmount the workspace (the sandbox is idle: every action is a finished process tree);
//! 3. `syncfs` the upper directory's filesystem;
//! 4. rename the upper directory into `layers/<id>` and fsync `layers/`;
//! 5. write the manifest object;
//! 6. list the snapshot (`snapshots/<id>`): only now does it exist for `ls`;
//! 7. mount a fresh empty upper over the new chain and continue.
//!
//! A crash between any two steps leaves at most unreferenced garbage (an
//! orphan layer or manifest) that `fsck` reports as garbage, not damage, and
//! `gc` removes. Forking N sandboxes from a snapshot mounts N overlays over
//! the same lower chain, each with its own empty upper: nothing is copied.

use std::fs::File;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::Runtime;
use crate::layer::OwnerMap;
use crate::runtime::{Result, RuntimeError};
use crate::sandbox::{Sandbox, SandboxError};
use crate::store::object::{Action, Manifest, SessionState, SnapshotId};
use crate::store::{failpoint, fsync_dir};

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
        let (tree, tree_id) = self.delta()?;
        // Outputs, file contents and delta trees of the pending actions.
        self.write_held_objects()?;
        let written = store.put_tree(&tree)?;
        debug_assert_eq!(written, tree_id);
        failpoint("snapshot.tree-written");
        self.unmount_workspace()?;
        failpoint("snapshot.unmounted");
        let new_layer = match seal_private(&runtime, self, tree.entries.is_empty(), tree_id) {
            Ok(n) => n,
            Err(e) => {
                // Keep the sandbox usable: mount its unsealed changes again.
                let _ = self.remount_after_failed_seal();
                return Err(e);
            }
        };
        let mut layers = self.layers().to_vec();
        if new_layer {
            layers.push(tree_id);
        }
        let (pending, killed_background) = self.take_pending();
        let (actions, observations): (Vec<Action>, Vec<_>) = pending.into_iter().unzip();
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
            observations,
            created_at: now(),
            killed_background,
        };
        let id = store.put_manifest(&manifest)?;
        failpoint("snapshot.manifest-written");
        store.list_snapshot(&id)?;
        failpoint("snapshot.listed");
        self.continue_on(id, layers)?;
        Ok(Snapshot::new(runtime, id, manifest))
    }
}

/// Steps 2–4 of the protocol for the sandbox's private part. Returns
/// whether a new (non-empty) layer joined the chain.
fn seal_private(
    runtime: &Runtime,
    sandbox: &Sandbox,
    empty: bool,
    tree_id: SnapshotId,
) -> Result<bool> {
    let store = runtime.store();
    let private = sandbox.private_dir();
    let dir = File::open(private).map_err(|e| io("open", private, e))?;
    rustix::fs::syncfs(&dir).map_err(|e| io("syncfs", private, e.into()))?;
    failpoint("snapshot.synced");
    if empty {
        return Ok(false);
    }
    let dest = store.layer_dir(&tree_id);
    if !dest.exists() {
        if sandbox.is_overlay() {
            install_dir(private, &dest)?;
        } else {
            // The copy workspace stays the sandbox's; the layer is the written delta.
            let staging = store.new_temp_path("seal");
            let written = sandbox
                .write_copy_delta(&staging)
                .and_then(|tree| Ok(store.put_tree(&tree)?));
            let written = match written {
                Ok(id) => id,
                Err(e) => {
                    crate::cleanup::remove_dir_forcefully(&staging);
                    return Err(e.into());
                }
            };
            if written != tree_id {
                crate::cleanup::remove_dir_forcefully(&staging);
                return Err(RuntimeError::Sandbox(SandboxError::SealRace(format!(
                    "the workspace changed while it was being sealed (delta {} became {})",
                    tree_id.short(),
                    written.short()
                ))));
            }
            if !install_dir(&staging, &dest)? {
                crate::cleanup::remove_dir_forcefully(&staging);
            }
        }
    }
    if let Some(parent) = dest.parent() {
        fsync_dir(parent)?;
    }
    failpoint("snapshot.layer-renamed");
    Ok(true)
}

/// Move a sealed directory into the layer store. Layers are named by the
/// hash of their content, so when another process installed the same layer
/// first, ours is redundant: returns `false` and leaves `from` in place.
fn install_dir(from: &Path, dest: &Path) -> Result<bool> {
    match rustix::fs::renameat_with(
        rustix::fs::CWD,
        from,
        rustix::fs::CWD,
        dest,
        rustix::fs::RenameFlags::NOREPLACE,
    ) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::EXIST | rustix::io::Errno::NOTEMPTY) => Ok(false),
        Err(e) => Err(io("seal layer into", dest, e.into())),
    }
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
                install_dir(&staging, &dest)?;
                if let Some(parent) = dest.parent() {
                    fsync_dir(parent)?;
                }
            }
            failpoint("import.layer-renamed");
            let manifest = Manifest {
                layers: vec![tree_id],
                session: SessionState {
                    cwd: "/workspace".to_owned(),
                    ..SessionState::default()
                },
                parent: None,
                action: Some(Action::Import {
                    source: src.display().to_string(),
                }),
                observations: Vec::new(),
                created_at: now(),
                killed_background: Vec::new(),
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
