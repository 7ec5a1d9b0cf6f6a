//! Garbage collection: keep what tags reach (tagged snapshots, their parent
//! chains and everything their manifests reference), delete the rest, in an
//! order that never leaves a listed snapshot whose data is going.

use std::fs::{self, File, Permissions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::fsck::sorted_entries;
use super::fsio::{owner_dead, remove_tree, temp_name};
use super::{
    OBJECT_MAGIC, ObjectId, ObjectKind, Result, Store, StoreError, failpoint, fsync_dir, io_err,
};

/// What [`Store::gc`] removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Index entries removed (untagged snapshots not in a tagged chain).
    pub snapshots_unlisted: usize,
    /// Object files removed (manifests, trees, blobs).
    pub objects_removed: usize,
    /// Sealed layer directories removed.
    pub layers_removed: usize,
    /// Squash cache directories removed.
    pub squash_removed: usize,
    /// Image build cache entries removed (their image was collected).
    pub build_cache_removed: usize,
    /// Stale `tmp/` entries of dead processes removed.
    pub tmp_removed: usize,
    /// `run/` directories of dead processes removed.
    pub run_dirs_removed: usize,
    /// Apparent size of the regular files removed.
    pub bytes_freed: u64,
    /// Entries left in place, with the reason (e.g. something mounted inside).
    pub skipped: Vec<String>,
}

/// Kind byte of an object file, if its header is readable.
pub(super) fn header_kind(path: &Path) -> Option<ObjectKind> {
    let mut head = [0u8; 6];
    File::open(path).ok()?.read_exact(&mut head).ok()?;
    (head[..4] == OBJECT_MAGIC)
        .then(|| ObjectKind::from_byte(head[5]))
        .flatten()
}

impl Store {
    /// Collect garbage under the exclusive lock. Roots are the tags; kept
    /// are tagged snapshots, their parent chains (while manifests exist),
    /// their manifests, layer trees and directories, action and observation
    /// blobs, fs_delta trees, and squash dirs. Everything else goes: index
    /// entries first (fsynced), then manifests, trees, blobs, layer and
    /// squash dirs (each renamed into `tmp/` before it is deleted), then
    /// stale `tmp/` entries and `run/` dirs of dead processes.
    ///
    /// Refuses to run ([`StoreError::GcRefused`]) if a tag's snapshot or a
    /// manifest in a tagged chain is unusable, since what it references
    /// cannot be known.
    pub fn gc(&self) -> Result<GcReport> {
        let _lock = self.lock_exclusive()?;
        let tags = self.tags()?;
        // Live sandboxes are roots too: their lower chains are mounted.
        let live = self.live_sandbox_bases()?;
        let mut reach = self.reach(tags.values().copied().chain(live), true)?;
        self.reach_images(&mut reach, true)?;
        let mut rep = GcReport::default();
        let dev = fs::metadata(self.root())
            .map_err(io_err("stat", self.root()))?
            .dev();

        let index = self.root().join("snapshots");
        for id in self.snapshots()? {
            if !reach.snapshots.contains(&id) {
                failpoint("gc.deleting");
                self.unlist_snapshot(&id)?;
                rep.snapshots_unlisted += 1;
            }
        }
        fsync_dir(&index)?;

        // Unreachable objects, deleted manifests first, then trees, blobs,
        // and files whose header is unreadable.
        let mut doomed: [Vec<_>; 4] = Default::default();
        for (fan, fan_path) in sorted_entries(&self.root().join("objects"))? {
            if !fan_path.is_dir() {
                continue;
            }
            for (name, path) in sorted_entries(&fan_path)? {
                let Ok(id) = format!("{fan}{name}").parse::<ObjectId>() else {
                    continue;
                };
                if !reach.objects.contains(&id) {
                    let rank = match header_kind(&path) {
                        Some(
                            ObjectKind::Manifest | ObjectKind::WasmManifest | ObjectKind::Image,
                        ) => 0,
                        Some(ObjectKind::Tree) => 1,
                        Some(ObjectKind::Blob) => 2,
                        None => 3,
                    };
                    doomed[rank].push(path);
                }
            }
        }
        for path in doomed.iter().flatten() {
            failpoint("gc.deleting");
            rep.bytes_freed += remove_tree(path, dev)?;
            rep.objects_removed += 1;
        }
        // Image build cache entries are not roots: drop those whose image went.
        let builds = self.root().join("refs/image-builds");
        for (name, _) in sorted_entries(&builds)? {
            if let Ok(Some(id)) = self.build_cache_get(&name)
                && !reach.objects.contains(&id)
            {
                self.build_cache_remove(&name)?;
                rep.build_cache_removed += 1;
            }
        }

        for (sub, keep) in [("layers", &reach.layers), ("squash", &reach.snapshots)] {
            for (name, path) in sorted_entries(&self.root().join(sub))? {
                match name.parse::<ObjectId>() {
                    Ok(id) if !keep.contains(&id) => {}
                    _ => continue,
                }
                failpoint("gc.deleting");
                if self.discard(&path, dev, &mut rep)? {
                    if sub == "layers" {
                        rep.layers_removed += 1;
                    } else {
                        rep.squash_removed += 1;
                    }
                }
            }
        }

        for (name, path) in sorted_entries(&self.tmp_dir())? {
            if owner_dead(&name, '.', true) {
                failpoint("gc.deleting");
                match remove_tree(&path, dev) {
                    Ok(n) => {
                        rep.bytes_freed += n;
                        rep.tmp_removed += 1;
                    }
                    Err(e @ StoreError::MountInside { .. }) => rep.skipped.push(e.to_string()),
                    Err(e) => return Err(e),
                }
            }
        }
        for (name, path) in sorted_entries(&self.run_dir())? {
            if owner_dead(&name, '-', false) {
                failpoint("gc.deleting");
                if self.discard(&path, dev, &mut rep)? {
                    rep.run_dirs_removed += 1;
                }
            }
        }
        Ok(rep)
    }

    /// Base snapshots of sandboxes whose process is alive (each sandbox keeps
    /// the id of the snapshot its lower chain belongs to in `run/<pid>-<n>/base`;
    /// a WebAssembly runtime lists its sandboxes' bases in one such file).
    fn live_sandbox_bases(&self) -> Result<Vec<super::SnapshotId>> {
        let mut out = Vec::new();
        for (name, path) in sorted_entries(&self.run_dir())? {
            if owner_dead(&name, '-', true) {
                continue;
            }
            // One id (a native sandbox), or one a line (the bases a
            // process's WebAssembly sandboxes were opened on).
            let Ok(text) = fs::read_to_string(path.join("base")) else {
                continue;
            };
            for line in text.lines() {
                if let Ok(id) = line.trim().parse::<super::SnapshotId>()
                    && self.has_object(&id)
                {
                    out.push(id);
                }
            }
        }
        Ok(out)
    }

    /// Crash-safely delete a directory of the store: make it writable, rename
    /// it into `tmp/` (fsynced, so it can never reappear half-deleted), then
    /// delete it. Returns false (and notes why) if it had to be left in place.
    fn discard(&self, path: &Path, dev: u64, rep: &mut GcReport) -> Result<bool> {
        // A sandbox that just ended may remove its own run directory while
        // gc looks at it: something already gone is not an error.
        let md = match fs::symlink_metadata(path) {
            Ok(md) => md,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_err("stat", path)(e)),
        };
        if md.is_dir() && md.dev() != dev {
            rep.skipped
                .push(StoreError::MountInside { path: path.into() }.to_string());
            return Ok(false);
        }
        if md.is_dir() && md.mode() & 0o200 == 0 {
            fs::set_permissions(path, Permissions::from_mode((md.mode() & 0o7777) | 0o700))
                .map_err(io_err("make directory writable", path))?;
        }
        let graveyard = self.tmp_dir().join(temp_name(".gc"));
        match fs::rename(path, &graveyard) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_err("move into tmp for deletion", path)(e)),
        }
        fsync_dir(path.parent().unwrap_or(self.root()))?;
        fsync_dir(&self.tmp_dir())?;
        match remove_tree(&graveyard, dev) {
            Ok(n) => {
                rep.bytes_freed += n;
                Ok(true)
            }
            Err(e @ StoreError::MountInside { .. }) => {
                rep.skipped.push(e.to_string());
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fsck::tests::make_layer;
    use super::super::tests::{manifest, store};
    use super::super::{Action, ExitStatus, ObservationDigest};
    use super::*;

    #[test]
    fn gc_keeps_tagged_chains_and_removes_the_rest() {
        let (_d, s) = store();
        let la = make_layer(&s, &[("a", b"1"), ("ro/x", b"2")]);
        let blob_a = s.put_blob(b"written content").unwrap();
        let mut ma = manifest(None, vec![la]);
        ma.action = Some(Action::Sequence {
            actions: vec![Action::WriteFile {
                path: "a".into(),
                content: blob_a,
                mode: 0o644,
            }],
        });
        let a = s.put_manifest(&ma).unwrap();
        s.list_snapshot(&a).unwrap();

        let lb = make_layer(&s, &[("b", b"3")]);
        let out = s.put_blob(b"stdout").unwrap();
        let err = s.put_blob(b"stderr").unwrap();
        let mut mb = manifest(Some(a), vec![la, lb]);
        mb.observations = vec![ObservationDigest {
            stdout: out,
            stderr: err,
            exit: ExitStatus::Code { code: 0 },
            fs_delta: lb,
        }];
        let b = s.put_manifest(&mb).unwrap();
        s.list_snapshot(&b).unwrap();
        s.set_tag("keep", &b).unwrap();
        fs::create_dir(s.squash_dir(&b)).unwrap();

        let lc = make_layer(&s, &[("c", b"4"), ("sub/d", b"5")]);
        fs::set_permissions(s.layer_dir(&lc).join("sub"), Permissions::from_mode(0o555)).unwrap();
        fs::set_permissions(s.layer_dir(&lc), Permissions::from_mode(0o555)).unwrap();
        let c = s.put_manifest(&manifest(None, vec![lc])).unwrap();
        s.list_snapshot(&c).unwrap();
        fs::create_dir(s.squash_dir(&c)).unwrap();
        fs::create_dir(s.run_dir().join("999999999-1")).unwrap();
        fs::create_dir(s.run_dir().join(format!("{}-1", std::process::id()))).unwrap();
        fs::write(s.tmp_dir().join("999999999.1.x"), b"").unwrap();

        let rep = s.gc().unwrap();
        assert_eq!(rep.snapshots_unlisted, 1);
        assert_eq!(rep.objects_removed, 2, "{rep:?}");
        assert_eq!(rep.layers_removed, 1);
        assert_eq!(rep.squash_removed, 1);
        assert_eq!(rep.run_dirs_removed, 1);
        assert_eq!(rep.tmp_removed, 1);
        assert!(rep.bytes_freed >= 2);
        assert!(rep.skipped.is_empty());
        assert_eq!(s.snapshots().unwrap(), {
            let mut v = vec![a, b];
            v.sort();
            v
        });
        assert!(!s.has_object(&c) && !s.has_object(&lc) && !s.layer_dir(&lc).exists());
        for id in [a, b, la, lb, blob_a, out, err] {
            assert!(s.has_object(&id), "{id} was collected");
        }
        assert!(s.layer_dir(&la).exists() && s.squash_dir(&b).exists());
        assert!(
            s.run_dir()
                .join(format!("{}-1", std::process::id()))
                .exists()
        );
        assert_eq!(fs::read_dir(s.tmp_dir()).unwrap().count(), 0);
        let report = s.fsck().unwrap();
        assert!(report.is_clean() && report.garbage.is_empty(), "{report:?}");
        assert_eq!(s.gc().unwrap(), GcReport::default());

        // Removing the tag makes the whole chain collectable.
        s.remove_snapshot(&b).unwrap();
        let rep = s.gc().unwrap();
        assert_eq!(rep.snapshots_unlisted, 1);
        assert_eq!(rep.layers_removed, 2);
        assert!(s.snapshots().unwrap().is_empty());
    }

    #[test]
    fn gc_refuses_when_a_tagged_manifest_is_corrupt() {
        let (_d, s) = store();
        let a = s.put_manifest(&manifest(None, vec![])).unwrap();
        s.list_snapshot(&a).unwrap();
        s.set_tag("t", &a).unwrap();
        fs::write(s.object_path(&a), b"garbage").unwrap();
        let err = s.gc().unwrap_err();
        assert!(matches!(err, StoreError::GcRefused(_)), "{err}");
        assert!(s.is_listed(&a));
    }
}
