//! The one seal protocol: how a sandbox's changes since its base snapshot
//! become a snapshot, for both backends (native sandboxes in
//! [`crate::snapshot`], WebAssembly sessions in `crate::wasm`), crash-safe at
//! every step:
//!
//! 1. **objects**: write the objects the pending actions refer to (outputs,
//!    written file contents; a session's memory pages and page index), and the
//!    tree of the workspace's delta, whose hash is the layer id. The copy
//!    backends (native copy, session workspace) write the delta as a layer
//!    directory into `tmp/` here ([`Staged`]). Failpoint `*.tree-written`.
//! 2. **quiesce**: a native sandbox unmounts its workspace (it is idle: every
//!    action is a finished process tree). Failpoint `snapshot.unmounted`; a
//!    session has no mount and no such step.
//! 3. **sync**: `syncfs` the filesystem holding the layer directory (the
//!    overlay upper or the staged delta), so its content is durable before it
//!    is named. Failpoint `*.synced`.
//! 4. **install**: rename the layer directory into `layers/<id>` with
//!    `RENAME_NOREPLACE` (layers are named by content: when another sandbox
//!    installed the same layer first, ours is redundant and removed), then
//!    fsync `layers/`. Failpoint `*.layer-renamed`.
//! 5. **manifest**: write the manifest object. Failpoint `*.manifest-written`.
//! 6. **list**: list the snapshot (`snapshots/<id>`): only now does it exist
//!    for `ls`. Failpoint `*.listed`.
//! 7. **continue**: the sandbox continues on the new snapshot (a fresh empty
//!    upper over the new chain; a session remaps its memory from the new image).
//!
//! A crash between any two steps leaves at most unreferenced garbage (an
//! orphan object, layer or staging directory) that `fsck` reports as
//! garbage, not damage, and `gc` removes. With nothing changed in the
//! workspace, steps 3–4 move nothing (their failpoints still fire).
//!
//! The workspace backends meet the protocol in one seam, [`Delta`]: what the
//! layer directory of a seal is, if any.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::store::object::{LayerId, ObjectId, Tree};
use crate::store::{Store, StoreError, failpoint, fsync_dir};

/// The failpoint names of one user of the protocol, one per step.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Protocol {
    /// After step 1.
    pub tree_written: &'static str,
    /// After step 2 (native sandboxes only).
    pub unmounted: Option<&'static str>,
    /// After step 3.
    pub synced: &'static str,
    /// After step 4.
    pub layer_renamed: &'static str,
    /// After step 5.
    pub manifest_written: &'static str,
    /// After step 6.
    pub listed: &'static str,
}

/// Native sandboxes ([`crate::Sandbox::snapshot`]).
pub(crate) const SANDBOX: Protocol = Protocol {
    tree_written: "snapshot.tree-written",
    unmounted: Some("snapshot.unmounted"),
    synced: "snapshot.synced",
    layer_renamed: "snapshot.layer-renamed",
    manifest_written: "snapshot.manifest-written",
    listed: "snapshot.listed",
};

/// WebAssembly sessions (`WasmSandbox::snapshot`, also the boot of an import).
#[cfg_attr(
    not(feature = "wasm"),
    allow(dead_code, reason = "used by the wasm backend")
)]
pub(crate) const SESSION: Protocol = Protocol {
    tree_written: "session.tree-written",
    unmounted: None,
    synced: "session.synced",
    layer_renamed: "session.layer-renamed",
    manifest_written: "session.manifest-written",
    listed: "session.listed",
};

/// The failpoints of a session snapshot, in protocol order.
#[cfg_attr(
    not(feature = "wasm"),
    allow(dead_code, reason = "used by the wasm backend")
)]
pub(crate) const SESSION_FAILPOINTS: &[&str] = &[
    SESSION.tree_written,
    SESSION.synced,
    SESSION.layer_renamed,
    SESSION.manifest_written,
    SESSION.listed,
];

/// The layer directory of a seal (steps 3–4): the workspace-backend seam.
#[derive(Debug)]
pub(crate) enum Delta<'a> {
    /// Nothing changed since the base: no layer joins the chain.
    Empty,
    /// The layer is already in the store (another sandbox sealed the same
    /// changes): it joins the chain, nothing moves.
    Present(LayerId),
    /// Overlay backend: the unmounted upper directory is layer `id` and moves
    /// into the store as it is.
    Upper(LayerId, &'a Path),
    /// Copy backends (native copy, session workspace): the delta staged in
    /// `tmp/` moves into the store.
    Staged(LayerId, Staged),
}

/// A workspace's delta written as a layer directory into `tmp/` (step 1 of
/// the copy backends). Removed on drop unless step 4 installed it.
#[derive(Debug)]
pub(crate) struct Staged {
    /// `None` once installed.
    dir: Option<PathBuf>,
    tree: Tree,
}

impl Staged {
    /// Write a delta into a fresh directory under `tmp/` with `write` (which
    /// returns its tree); nothing is left behind when it fails.
    pub(crate) fn write<E>(
        store: &Store,
        write: impl FnOnce(&Path) -> Result<Tree, E>,
    ) -> Result<Self, E> {
        let dir = store.new_temp_path("seal");
        match write(&dir) {
            Ok(tree) => Ok(Self {
                dir: Some(dir),
                tree,
            }),
            Err(e) => {
                crate::cleanup::remove_dir_forcefully(&dir);
                Err(e)
            }
        }
    }

    /// The delta's tree.
    pub(crate) fn tree(&self) -> &Tree {
        &self.tree
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take()
            && std::fs::symlink_metadata(&dir).is_ok()
        {
            crate::cleanup::remove_dir_forcefully(&dir);
        }
    }
}

impl Protocol {
    /// The end of step 1.
    pub(crate) fn objects_written(&self) {
        failpoint(self.tree_written);
    }

    /// The end of step 2.
    pub(crate) fn quiesced(&self) {
        if let Some(point) = self.unmounted {
            failpoint(point);
        }
    }

    /// Steps 3–4: make the layer directory durable and install it as
    /// `layers/<id>`. Returns the layer that joins the chain, if any.
    pub(crate) fn install(
        &self,
        store: &Store,
        delta: Delta<'_>,
    ) -> Result<Option<LayerId>, StoreError> {
        let (id, dir, mut staged) = match delta {
            Delta::Empty => {
                failpoint(self.synced);
                return Ok(None);
            }
            Delta::Present(id) => (id, None, None),
            Delta::Upper(id, upper) => (id, Some(upper.to_owned()), None),
            Delta::Staged(id, staged) => (id, staged.dir.clone(), Some(staged)),
        };
        let dest = store.layer_dir(&id);
        if let Some(dir) = &dir {
            syncfs(dir)?;
        }
        failpoint(self.synced);
        if let Some(dir) = &dir
            && install_dir(dir, &dest)?
            && let Some(staged) = staged.as_mut()
        {
            // Moved: nothing left to remove.
            staged.dir = None;
        }
        drop(staged);
        if let Some(parent) = dest.parent() {
            fsync_dir(parent)?;
        }
        failpoint(self.layer_renamed);
        Ok(Some(id))
    }

    /// Steps 5–6: write the manifest with `write` (returns its id), then list
    /// the snapshot.
    pub(crate) fn publish<E: From<StoreError>>(
        &self,
        store: &Store,
        write: impl FnOnce() -> Result<ObjectId, E>,
    ) -> Result<ObjectId, E> {
        let id = write()?;
        failpoint(self.manifest_written);
        store.list_snapshot(&id)?;
        failpoint(self.listed);
        Ok(id)
    }
}

/// `syncfs` the filesystem holding `dir`.
pub(crate) fn syncfs(dir: &Path) -> Result<(), StoreError> {
    let f = File::open(dir).map_err(|source| StoreError::Io {
        op: "open for syncfs",
        path: dir.to_owned(),
        source,
    })?;
    rustix::fs::syncfs(&f).map_err(|e| StoreError::Io {
        op: "syncfs",
        path: dir.to_owned(),
        source: e.into(),
    })
}

/// Move a sealed directory into the layer store. Layers are named by the
/// hash of their content, so when another process installed the same layer
/// first, ours is redundant: returns `false` and leaves `from` in place.
pub(crate) fn install_dir(from: &Path, dest: &Path) -> Result<bool, StoreError> {
    match rustix::fs::renameat_with(
        rustix::fs::CWD,
        from,
        rustix::fs::CWD,
        dest,
        rustix::fs::RenameFlags::NOREPLACE,
    ) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::EXIST | rustix::io::Errno::NOTEMPTY) => Ok(false),
        Err(e) => Err(StoreError::Io {
            op: "seal layer into",
            path: dest.to_owned(),
            source: e.into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::OwnerMode;

    fn store(dir: &Path) -> Store {
        Store::open(dir, OwnerMode::Rootless).unwrap()
    }

    #[test]
    fn every_protocol_names_its_points_once_in_the_exported_lists() {
        let native = crate::snapshot::FAILPOINTS;
        for p in [
            SANDBOX.tree_written,
            SANDBOX.synced,
            SANDBOX.layer_renamed,
            SANDBOX.manifest_written,
            SANDBOX.listed,
        ]
        .into_iter()
        .chain(SANDBOX.unmounted)
        {
            assert_eq!(native.iter().filter(|n| **n == p).count(), 1, "{p}");
        }
        assert!(SESSION_FAILPOINTS.iter().all(|p| p.starts_with("session.")));
        assert!(!native.iter().any(|p| SESSION_FAILPOINTS.contains(p)));
    }

    #[test]
    fn a_staged_delta_is_installed_once_and_a_second_copy_is_removed() {
        let d = tempfile::tempdir().unwrap();
        let store = store(d.path());
        let write = |dir: &Path| -> Result<Tree, StoreError> {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("f"), b"x").unwrap();
            Ok(Tree::default())
        };
        let id = ObjectId([7; 32]);
        let first = Staged::write(&store, write).unwrap();
        let first_dir = first.dir.clone().unwrap();
        let got = SESSION.install(&store, Delta::Staged(id, first)).unwrap();
        assert_eq!(got, Some(id));
        assert!(store.layer_dir(&id).join("f").is_file());
        assert!(!first_dir.exists());
        // The same layer again: ours is redundant and leaves nothing behind.
        let second = Staged::write(&store, write).unwrap();
        let second_dir = second.dir.clone().unwrap();
        assert_eq!(
            SESSION.install(&store, Delta::Staged(id, second)).unwrap(),
            Some(id)
        );
        assert!(!second_dir.exists());
        assert!(store.layer_dir(&id).join("f").is_file());
        assert_eq!(SESSION.install(&store, Delta::Empty).unwrap(), None);
    }

    #[test]
    fn a_failed_stage_and_a_failed_sync_leave_no_staging_directory() {
        let d = tempfile::tempdir().unwrap();
        let store = store(d.path());
        let mut made = None;
        let failed = Staged::write(&store, |dir: &Path| -> Result<Tree, String> {
            std::fs::create_dir(dir).unwrap();
            made = Some(dir.to_owned());
            Err("no".into())
        });
        assert_eq!(failed.unwrap_err(), "no");
        assert!(!made.unwrap().exists());
        // syncfs of a directory that is not there fails, naming it.
        let id = ObjectId([9; 32]);
        let missing = d.path().join("missing");
        let err = SANDBOX
            .install(&store, Delta::Upper(id, &missing))
            .unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
        assert!(!store.layer_dir(&id).exists());
    }
}
