//! Group commit: the objects of one snapshot are made durable together, by
//! one `syncfs`, instead of by an `fsync` of each object and of its
//! directory (two journal commits per object, each waiting behind whatever
//! else the disk is doing).
//!
//! 1. [`Batch::add`]: collect the objects (deduplicated by id).
//! 2. [`Batch::stage`]: write each object the store lacks to a temp file in
//!    `tmp/`, without `fsync`. The temp files are removed if the [`StagedObjects`]
//!    set is dropped unpublished.
//! 3. [`StagedObjects::sync`]: one `syncfs` of the store's filesystem makes every
//!    staged byte durable (and a layer directory on the same filesystem).
//! 4. [`StagedObjects::publish`]: rename each object into `objects/`, then `fsync`
//!    each directory that gained a name (on a journalling filesystem the
//!    first commits the journal and the rest find nothing left to do).
//!
//! Only after step 4 may a caller list a snapshot that refers to them. An
//! object is never named before its bytes are durable, so the store's rule
//! that a named object of the right size is complete keeps holding, and a
//! crash at any step leaves temp files or unreferenced objects (garbage for
//! `gc`), never a listed snapshot with a missing or torn object.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::object::{
    LayerId, Manifest, OBJECT_HEADER_LEN, ObjectId, ObjectKind, SnapshotId, Tree, object_id,
};
use super::{Result, Store, StoreError, failpoint, fsync_dir, io_err, object_file_header};

/// The failpoint between the first rename of a publish and the rest.
pub(crate) const RENAMED_ONE: &str = "batch.renamed-one";

/// Objects to write together.
#[derive(Default)]
pub struct Batch<'a> {
    items: Vec<(ObjectId, ObjectKind, Cow<'a, [u8]>)>,
    seen: BTreeSet<ObjectId>,
}

impl std::fmt::Debug for Batch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("objects", &self.items.len())
            .finish()
    }
}

impl<'a> Batch<'a> {
    /// Add an object; returns its id.
    pub fn add(&mut self, kind: ObjectKind, payload: impl Into<Cow<'a, [u8]>>) -> ObjectId {
        let payload = payload.into();
        let id = object_id(kind, &payload);
        self.add_known(id, kind, payload);
        id
    }

    /// Add an object whose id (`object_id(kind, payload)`) the caller
    /// already computed.
    pub fn add_known(&mut self, id: ObjectId, kind: ObjectKind, payload: impl Into<Cow<'a, [u8]>>) {
        if self.seen.insert(id) {
            let payload = payload.into();
            debug_assert_eq!(id, object_id(kind, &payload));
            self.items.push((id, kind, payload));
        }
    }

    /// Add a validated tree; returns its id (the layer id).
    ///
    /// # Errors
    /// An invalid tree.
    pub fn add_tree(&mut self, tree: &Tree) -> Result<LayerId> {
        Ok(self.add(ObjectKind::Tree, super::tree_bytes(tree)?))
    }

    /// Add a manifest; returns the snapshot id.
    ///
    /// # Errors
    /// When it cannot be encoded.
    pub fn add_manifest(&mut self, manifest: &Manifest) -> Result<SnapshotId> {
        let bytes = serde_json::to_vec(manifest).map_err(|source| StoreError::Json {
            what: "manifest",
            source,
        })?;
        Ok(self.add(ObjectKind::Manifest, bytes))
    }

    /// Steps 2–4 for objects that nothing else waits on: stage, sync,
    /// publish. Returns how many objects the store gained.
    ///
    /// # Errors
    /// As [`Self::stage`], [`StagedObjects::sync`], [`StagedObjects::publish`].
    pub fn commit(self, store: &Store) -> Result<usize> {
        let staged = self.stage(store)?;
        let n = staged.len();
        staged.sync()?;
        staged.publish(&[])?;
        Ok(n)
    }

    /// Step 2: write every object `store` does not hold yet to a temp file,
    /// unsynced. Nothing is left behind when it fails.
    ///
    /// # Errors
    /// An object over [`super::MAX_OBJECT_SIZE`]; I/O errors.
    pub fn stage(self, store: &Store) -> Result<StagedObjects> {
        let mut staged = StagedObjects {
            tmp: store.tmp_dir(),
            objects: store.root().join("objects"),
            moves: Vec::new(),
            held: 0,
        };
        for (id, kind, payload) in &self.items {
            let header = object_file_header(*kind, payload.len())?;
            let dest = store.object_path(id);
            let total = (OBJECT_HEADER_LEN + payload.len()) as u64;
            if fs::symlink_metadata(&dest).is_ok_and(|m| m.len() == total) {
                // Named by an earlier or a concurrent writer: its name may not
                // be durable yet, so `sync` must still run (see there).
                staged.held += 1;
                continue;
            }
            let tmp = store.new_temp_path(".obj");
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(&tmp)
                .map_err(io_err("create temp file", &tmp))?;
            staged.moves.push((tmp.clone(), dest));
            f.write_all(&header)
                .and_then(|()| f.write_all(payload))
                .map_err(io_err("write temp file", &tmp))?;
        }
        Ok(staged)
    }
}

/// Objects written to temp files, not yet durable or named. Dropped
/// unpublished, the temp files are removed.
#[derive(Debug)]
pub struct StagedObjects {
    tmp: PathBuf,
    objects: PathBuf,
    /// Temp file → object path, for each object the store lacked.
    moves: Vec<(PathBuf, PathBuf)>,
    /// Objects the store already named when staged.
    held: usize,
}

impl StagedObjects {
    /// How many objects the store lacked (and so will gain).
    pub fn len(&self) -> usize {
        self.moves.len()
    }

    /// Whether the store already held every object.
    pub fn is_empty(&self) -> bool {
        self.moves.is_empty()
    }

    /// Step 3: make every staged byte durable (one `syncfs` of the store's
    /// filesystem; nothing to do for an empty batch).
    ///
    /// It runs even when the store held every object: a concurrent writer
    /// may have renamed one of them without having fsynced its directory
    /// yet. Its rename came before this `syncfs`, which commits it, so a
    /// snapshot listed after this never refers to a name that a power loss
    /// could take back.
    ///
    /// # Errors
    /// When `syncfs` fails.
    pub fn sync(&self) -> Result<()> {
        if self.moves.is_empty() && self.held == 0 {
            return Ok(());
        }
        syncfs(&self.tmp)
    }

    /// Step 4: name every object, then make the names durable, with the
    /// directories in `also` (such as `layers/` after a layer was renamed
    /// into it). Call after [`Self::sync`].
    ///
    /// # Errors
    /// I/O errors (the objects not yet renamed are removed).
    pub fn publish(mut self, also: &[&Path]) -> Result<()> {
        let mut dirs: BTreeSet<PathBuf> = also.iter().map(|d| d.to_path_buf()).collect();
        let moves = std::mem::take(&mut self.moves);
        for (i, (tmp, dest)) in moves.iter().enumerate() {
            let renamed = (|| {
                let fan = dest.parent().unwrap_or(&self.objects);
                if !fan.exists() {
                    fs::create_dir_all(fan).map_err(io_err("create object directory", fan))?;
                    dirs.insert(self.objects.clone());
                }
                dirs.insert(fan.to_path_buf());
                fs::rename(tmp, dest).map_err(io_err("rename temp file into place", dest))
            })();
            if let Err(e) = renamed {
                for (tmp, _) in &moves[i..] {
                    let _ = fs::remove_file(tmp);
                }
                return Err(e);
            }
            if i == 0 {
                failpoint(RENAMED_ONE);
            }
        }
        if moves.is_empty() {
            failpoint(RENAMED_ONE);
        }
        dirs.iter().try_for_each(|d| fsync_dir(d))
    }
}

impl Drop for StagedObjects {
    fn drop(&mut self) {
        for (tmp, _) in &self.moves {
            let _ = fs::remove_file(tmp);
        }
    }
}

/// `syncfs` the filesystem holding `dir`.
///
/// # Errors
/// When `dir` cannot be opened or the sync fails.
pub(crate) fn syncfs(dir: &Path) -> Result<()> {
    let f = fs::File::open(dir).map_err(io_err("open for syncfs", dir))?;
    rustix::fs::syncfs(&f).map_err(|e| io_err("syncfs", dir)(e.into()))
}

/// Whether `a` and `b` are on the same filesystem (so one `syncfs` covers both).
pub(crate) fn same_filesystem(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::OwnerMode;

    #[test]
    fn a_batch_writes_verifiable_objects_once_and_names_nothing_before_publish() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path(), OwnerMode::Rootless).unwrap();
        let page = vec![3u8; 4096];
        let mut b = Batch::default();
        let id = b.add(ObjectKind::Blob, page.as_slice());
        b.add(ObjectKind::Blob, page.as_slice());
        let other = b.add(ObjectKind::Blob, &b"other"[..]);
        let staged = b.stage(&store).unwrap();
        assert_eq!(staged.len(), 2);
        // Staged is not named: a reader cannot see it yet.
        assert!(!store.object_path(&id).exists());
        staged.sync().unwrap();
        staged.publish(&[]).unwrap();
        assert_eq!(store.get_blob(&id).unwrap(), page);
        assert_eq!(store.get_blob(&other).unwrap(), b"other");
        // Everything is held already: nothing is written again.
        let mut again = Batch::default();
        again.add(ObjectKind::Blob, page.as_slice());
        assert_eq!(again.commit(&store).unwrap(), 0);
        assert!(store.fsck().unwrap().is_clean());
        assert_eq!(fs::read_dir(store.tmp_dir()).unwrap().count(), 0);
    }

    #[test]
    fn a_dropped_stage_leaves_nothing_and_an_oversized_object_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path(), OwnerMode::Rootless).unwrap();
        let mut b = Batch::default();
        let id = b.add(ObjectKind::Blob, &b"never named"[..]);
        let staged = b.stage(&store).unwrap();
        // Positive control: the temp file exists while staged.
        assert_eq!(fs::read_dir(store.tmp_dir()).unwrap().count(), 1);
        drop(staged);
        assert_eq!(fs::read_dir(store.tmp_dir()).unwrap().count(), 0);
        assert!(!store.object_path(&id).exists());
        assert!(store.fsck().unwrap().is_clean());
    }

    #[test]
    fn a_batch_the_store_already_holds_still_syncs() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path(), OwnerMode::Rootless).unwrap();
        let mut first = Batch::default();
        first.add(ObjectKind::Blob, &b"named by another writer"[..]);
        assert_eq!(first.commit(&store).unwrap(), 1);
        let mut again = Batch::default();
        again.add(ObjectKind::Blob, &b"named by another writer"[..]);
        let held = again.stage(&store).unwrap();
        assert!(held.is_empty());
        // With tmp/ gone, a sync that runs fails naming it: the held object
        // is synced, not skipped.
        fs::remove_dir(store.tmp_dir()).unwrap();
        let err = held.sync().unwrap_err();
        assert!(err.to_string().contains("tmp"), "{err}");
        // Positive control: an empty batch has nothing to sync and does not.
        Batch::default().stage(&store).unwrap().sync().unwrap();
    }
}
