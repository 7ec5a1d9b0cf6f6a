//! The one seal protocol: how a sandbox's changes since its base snapshot
//! become a snapshot, for both backends (native sandboxes in
//! [`crate::snapshot`], WebAssembly sessions in `crate::wasm`), crash-safe at
//! every step:
//!
//! 1. **objects**: stage every object of the snapshot (outputs, written
//!    file contents, the delta's tree, a session's memory pages and page
//!    index, and the manifest itself, whose layers are known once the delta
//!    is) as unsynced temp files in `tmp/` ([`crate::store::Batch`]). The
//!    copy backends (native copy, session workspace) also write the delta as
//!    a layer directory into `tmp/` here ([`Staged`]). Failpoint
//!    `*.tree-written`.
//! 2. **quiesce**: a native sandbox unmounts its workspace (it is idle: every
//!    action is a finished process tree). Failpoint `snapshot.unmounted`; a
//!    session has no mount and no such step.
//! 3. **sync**: one `syncfs` of the store's filesystem makes the staged
//!    objects and the layer directory (the overlay upper or the staged
//!    delta) durable before anything is named (a second `syncfs` only when
//!    the layer directory is on another filesystem). Failpoint `*.synced`.
//! 4. **install**: rename the layer directory into `layers/<id>` with
//!    `RENAME_NOREPLACE` (layers are named by content: when another sandbox
//!    installed the same layer first, ours is redundant and removed).
//!    Failpoint `*.layer-renamed`.
//! 5. **name the objects**: rename each staged object into `objects/`
//!    (failpoint `batch.renamed-one` after the first), then `fsync` `layers/`
//!    and each object directory that gained a name: the names are durable.
//!    Failpoint `*.manifest-written`.
//! 6. **list**: list the snapshot (`snapshots/<id>`): only now does it exist
//!    for `ls`. Failpoint `*.listed`.
//! 7. **continue**: the sandbox continues on the new snapshot (a fresh empty
//!    upper over the new chain; a session remaps its memory from the new image).
//!
//! Durability costs one `syncfs` and two journal commits (the names, the
//! listing) per snapshot, whatever the number of objects, where an `fsync`
//! of each object and its directory cost two commits per object. A crash
//! between any two steps leaves at most unreferenced garbage (a temp file,
//! an orphan object, layer or staging directory) that `fsck` reports as
//! garbage, not damage, and `gc` removes; nothing is named before its bytes
//! are durable. With nothing changed in the workspace, step 4 moves nothing
//! (its failpoint still fires).
//!
//! The workspace backends meet the protocol in one seam, [`Delta`]: what the
//! layer directory of a seal is, if any.

use std::path::{Path, PathBuf};

use crate::store::object::{LayerId, ObjectId, Tree};
use crate::store::{StagedObjects, Store, StoreError, failpoint, same_filesystem, syncfs};

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

impl Delta<'_> {
    /// The layer that joins the chain, if any.
    #[cfg_attr(
        not(feature = "wasm"),
        allow(dead_code, reason = "used by the wasm backend")
    )]
    pub(crate) fn layer(&self) -> Option<LayerId> {
        match self {
            Self::Empty => None,
            Self::Present(id) | Self::Upper(id, _) | Self::Staged(id, _) => Some(*id),
        }
    }
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

    /// Steps 3–6 for the objects staged in step 1 (`manifest` among them)
    /// and `delta`: make them durable, name them, list the snapshot.
    /// Returns the layer that joins the chain, if any.
    pub(crate) fn commit(
        &self,
        store: &Store,
        objects: StagedObjects,
        delta: Delta<'_>,
        manifest: &ObjectId,
    ) -> Result<Option<LayerId>, StoreError> {
        let (id, dir, mut staged) = match delta {
            Delta::Empty => (None, None, None),
            Delta::Present(id) => (Some(id), None, None),
            Delta::Upper(id, upper) => (Some(id), Some(upper.to_owned()), None),
            Delta::Staged(id, staged) => (Some(id), staged.dir.clone(), Some(staged)),
        };
        // 3. Always: the manifest is in `objects`, and where the store
        // already held it or any other object, or the layer (`Present`), a
        // concurrent sealer may have named it without having fsynced the
        // name yet; this `syncfs` comes after that rename and commits it.
        syncfs(&store.tmp_dir())?;
        if let Some(dir) = &dir
            && !same_filesystem(dir, &store.tmp_dir())
        {
            syncfs(dir)?;
        }
        failpoint(self.synced);
        // 4.
        let layers = store.root().join("layers");
        if let (Some(id), Some(dir)) = (id, &dir)
            && install_dir(dir, &store.layer_dir(&id))?
            && let Some(staged) = staged.as_mut()
        {
            // Moved: nothing left to remove.
            staged.dir = None;
        }
        drop(staged);
        failpoint(self.layer_renamed);
        // 5.
        let renamed_layer: &[&Path] = if dir.is_some() { &[&layers] } else { &[] };
        objects.publish(renamed_layer)?;
        failpoint(self.manifest_written);
        // 6.
        store.list_snapshot(manifest)?;
        failpoint(self.listed);
        Ok(id)
    }
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

    /// Step 1 for a snapshot over `layers`: its manifest staged alone.
    fn staged_manifest(store: &Store, layers: Vec<LayerId>) -> (StagedObjects, ObjectId) {
        let mut batch = crate::store::Batch::default();
        let id = batch
            .add_manifest(&crate::store::object::Manifest {
                layers,
                session: crate::store::object::SessionState::default(),
                parent: None,
                action: None,
                observations: Vec::new(),
                created_at: 0,
                killed_background: Vec::new(),
                image: None,
                workdir: None,
            })
            .unwrap();
        (batch.stage(store).unwrap(), id)
    }

    /// Steps 3–6 of `delta` with a manifest over its layer.
    fn commit(
        p: &Protocol,
        store: &Store,
        layer: Option<LayerId>,
        delta: Delta<'_>,
    ) -> Result<Option<LayerId>, StoreError> {
        let (objects, manifest) = staged_manifest(store, layer.into_iter().collect());
        let got = p.commit(store, objects, delta, &manifest)?;
        assert!(store.snapshots().unwrap().contains(&manifest));
        Ok(got)
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
        let got = commit(&SESSION, &store, Some(id), Delta::Staged(id, first)).unwrap();
        assert_eq!(got, Some(id));
        assert!(store.layer_dir(&id).join("f").is_file());
        assert!(!first_dir.exists());
        // The same layer again: ours is redundant and leaves nothing behind.
        let second = Staged::write(&store, write).unwrap();
        let second_dir = second.dir.clone().unwrap();
        assert_eq!(
            commit(&SESSION, &store, Some(id), Delta::Staged(id, second)).unwrap(),
            Some(id)
        );
        assert!(!second_dir.exists());
        assert!(store.layer_dir(&id).join("f").is_file());
        assert_eq!(commit(&SESSION, &store, None, Delta::Empty).unwrap(), None);
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
        let (objects, manifest) = staged_manifest(&store, vec![id]);
        let err = SANDBOX
            .commit(&store, objects, Delta::Upper(id, &missing), &manifest)
            .unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
        assert!(!store.layer_dir(&id).exists());
        // Nothing was named or listed, and the staged manifest is gone.
        assert!(!store.object_path(&manifest).exists());
        assert!(store.snapshots().unwrap().is_empty());
        assert_eq!(std::fs::read_dir(store.tmp_dir()).unwrap().count(), 0);
    }
}
