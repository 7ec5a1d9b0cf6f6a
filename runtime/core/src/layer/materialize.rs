//! Writing the merged view of a layer chain into a plain directory (fork for
//! the copy backend, `arbor checkout`) and the squash cache (one flat copy
//! of a deep chain, keyed by snapshot id).
//!
//! Every file's content is re-hashed while it is copied and compared with
//! its tree, so a flipped byte in a layer is an error, never data. Sources
//! are opened below their layer directory without following any symlink;
//! destinations are written through descriptors opened on the destination
//! (see [`fsio`](super::fsio)). Hard links are not preserved: each path
//! becomes its own file. Sparse files keep their holes where the filesystem
//! reports them.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;
use rustix::io::Errno;

use super::fsio::{Relaxed, open_beneath, open_dir_path, remove_tree};
use super::merge::{load_trees, merge_with_sources};
use super::writer::{EntryWriter, discard_dest, prepare_dest};
use super::{LayerError, MaterializeReport, OwnerMap, Result};
use crate::store::Store;
use crate::store::object::{EntryKind, LayerId, ObjectId, Tree};

/// Options of [`materialize`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MaterializeOptions {
    /// Run the store's full layer verification on every layer first and
    /// fail on the first problem. (Each copied file is checked against its
    /// hash regardless.)
    pub verify: bool,
    /// Give entries the host owners that their sandbox owners map to;
    /// `None` leaves everything owned by the caller, and then regular files
    /// lose their setuid and setgid bits (a checkout run as root must not
    /// turn a sandbox's file into a setuid-root program on the host).
    pub owners: Option<OwnerMap>,
}

/// Write the merged view of `layers` (bottom first) into `dest`, which
/// must be absent (it is created) or an empty directory.
///
/// Directories, regular files (with mode, content copied from the topmost
/// layer providing them and checked against the tree's size and hash),
/// symlinks (verbatim) and FIFOs are recreated; device nodes and sockets
/// are skipped and counted. On any error, what was written is removed again
/// (and `dest` too if this call created it).
pub fn materialize(
    store: &Store,
    layers: &[LayerId],
    dest: &Path,
    opts: &MaterializeOptions,
) -> Result<MaterializeReport> {
    if opts.verify {
        for id in layers {
            let problems = store.verify_layer(id).map_err(|source| LayerError::Store {
                what: format!("verification of layer {id}"),
                source,
            })?;
            if let Some(p) = problems.into_iter().next() {
                return Err(LayerError::Corrupt {
                    path: p.object_or_path,
                    what: p.what,
                });
            }
        }
    }
    let trees = load_trees(store, layers)?;
    let created = prepare_dest(dest)?;
    let result = write_chain(store, layers, &trees, dest, opts.owners);
    if result.is_err() {
        discard_dest(dest, created);
    }
    result
}

/// The body of [`materialize`] after `dest` has been prepared.
fn write_chain(
    store: &Store,
    layers: &[LayerId],
    trees: &[Tree],
    dest: &Path,
    owners: Option<OwnerMap>,
) -> Result<MaterializeReport> {
    let refs: Vec<&Tree> = trees.iter().collect();
    let (view, sources) = merge_with_sources(&refs);
    let mut layer_fds: Vec<Option<OwnedFd>> = layers.iter().map(|_| None).collect();
    let mut writer = EntryWriter::open(dest)?;
    let mut relaxed = Relaxed::new();
    for (path, entry) in &view.entries {
        let owner = owners.map(|m| m.to_host(entry.uid, entry.gid));
        match &entry.kind {
            EntryKind::Dir { .. } => writer.dir(path, entry.mode, owner, false)?,
            EntryKind::Symlink { target } => writer.symlink(path, target, owner)?,
            EntryKind::File { size, hash } => {
                let layer = sources.get(path).copied().flatten().ok_or_else(|| {
                    LayerError::ContentMismatch {
                        path: PathBuf::from(path),
                        what: "no layer provides this file".into(),
                    }
                })?;
                let id = layers[layer];
                let layer_dir = store.layer_dir(&id);
                let src_path = layer_dir.join(path);
                let layer_fd = match &mut layer_fds[layer] {
                    Some(fd) => &*fd,
                    slot @ None => &*slot.insert(open_dir_path(&layer_dir).map_err(|source| {
                        LayerError::ReadSource {
                            path: layer_dir.clone(),
                            source,
                        }
                    })?),
                };
                let src = match open_source_file(layer_fd, path, &src_path, *size) {
                    Err(LayerError::ReadSource { source, .. })
                        if source.kind() == std::io::ErrorKind::PermissionDenied =>
                    {
                        // A file (or a directory above it) the caller made
                        // unreadable to itself (rootless mode).
                        relaxed
                            .allow_path(&layer_dir, path, 0o400)
                            .map_err(|source| LayerError::ReadSource {
                                path: src_path.clone(),
                                source,
                            })?;
                        open_source_file(layer_fd, path, &src_path, *size)?
                    }
                    other => other?,
                };
                let mode = if owner.is_none() {
                    entry.mode & !0o6000
                } else {
                    entry.mode
                };
                let got = writer.file(path, &src, &src_path, *size, mode, owner)?;
                if ObjectId::from(got) != *hash {
                    return Err(LayerError::ContentMismatch {
                        path: src_path,
                        what: format!("blake3 is {}, tree says {hash}", ObjectId::from(got)),
                    });
                }
            }
            EntryKind::Special { format, .. } if *format == libc::S_IFIFO => {
                writer.fifo(path, entry.mode, owner)?;
            }
            EntryKind::Special { .. } => writer.skip_special(),
            // Never in a merged view; nothing to write.
            EntryKind::Whiteout => {}
        }
    }
    relaxed.restore().map_err(|source| LayerError::ReadSource {
        path: dest.to_path_buf(),
        source,
    })?;
    writer.finish()
}

/// Open `rel` below a layer (or workspace) directory for reading, checking
/// that it is a regular file of `size` bytes. Never follows a symlink and
/// never blocks on a FIFO planted where a file should be.
pub(super) fn open_source_file(
    root: &OwnedFd,
    rel: &str,
    host_path: &Path,
    size: u64,
) -> Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
    let fd = open_beneath(root, rel, flags).map_err(|source| LayerError::ReadSource {
        path: host_path.to_path_buf(),
        source,
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| LayerError::ReadSource {
        path: host_path.to_path_buf(),
        source: e.into(),
    })?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(LayerError::ContentMismatch {
            path: host_path.to_path_buf(),
            what: "not a regular file".into(),
        });
    }
    let actual = u64::try_from(st.st_size).unwrap_or(0);
    if actual != size {
        return Err(LayerError::ContentMismatch {
            path: host_path.to_path_buf(),
            what: format!("{actual} bytes, tree says {size}"),
        });
    }
    Ok(fd)
}

/// The squashed (flat) copy of the chain `layers` of snapshot
/// `snapshot_id`, creating it in the store's squash cache if needed.
///
/// The chain is materialised with host owners from `owners` (each file
/// checked against its hash) into a temporary directory, flushed with
/// `syncfs`, and renamed into place without replacing anything; if another
/// process finished first, ours is deleted and theirs returned.
pub fn squash(
    store: &Store,
    snapshot_id: &ObjectId,
    layers: &[LayerId],
    owners: &OwnerMap,
) -> Result<PathBuf> {
    let target = store.squash_dir(snapshot_id);
    if is_real_dir(&target) {
        return Ok(target);
    }
    let tmp = store.new_temp_path("squash");
    let opts = MaterializeOptions {
        verify: false,
        owners: Some(*owners),
    };
    materialize(store, layers, &tmp, &opts)?;
    let sync = || -> std::io::Result<()> {
        let fd = open_dir_path(&tmp)?;
        rustix::fs::syncfs(&fd)?;
        Ok(())
    };
    if let Err(source) = sync() {
        let _ignored = remove_tree(&tmp);
        return Err(LayerError::Sync { path: tmp, source });
    }
    let parent = target.parent().map(Path::to_path_buf).unwrap_or_default();
    let renamed = std::fs::create_dir_all(&parent).and_then(|()| rename_noreplace(&tmp, &target));
    match renamed {
        Ok(()) => {
            // Make the rename itself durable.
            if let Ok(fd) = open_dir_path(&parent) {
                let _ignored = rustix::fs::fsync(&fd);
            }
            Ok(target)
        }
        Err(_) if is_real_dir(&target) => {
            // Lost the race: someone else installed the same content.
            remove_tree(&tmp).map_err(|source| LayerError::Remove { path: tmp, source })?;
            Ok(target)
        }
        Err(source) => {
            let _ignored = remove_tree(&tmp);
            Err(LayerError::Rename {
                from: tmp,
                to: target,
                source,
            })
        }
    }
}

/// Whether `path` is a directory (not a symlink to one).
fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// Rename `from` to `to`, failing if `to` exists.
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    let cwd = rustix::fs::CWD;
    match rustix::fs::renameat_with(cwd, from, cwd, to, rustix::fs::RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        // Filesystems without RENAME_NOREPLACE: a plain rename still refuses
        // to replace a non-empty directory, and squash dirs are never empty
        // once installed except for an empty chain (identical content).
        Err(Errno::INVAL | Errno::NOSYS) => std::fs::rename(from, to),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::layer::tree_of_dir;
    use crate::store::OwnerMode;
    use rustix::fs::{FileType, Mode};

    /// Open a store in `dir`.
    pub(crate) fn test_store(dir: &Path) -> Store {
        Store::open(dir, OwnerMode::Rootless).unwrap()
    }

    /// Seal `dir` into the store as a layer (tree put, dir renamed into place).
    pub(crate) fn install_layer(store: &Store, dir: &Path, owners: &OwnerMap) -> LayerId {
        let tree = tree_of_dir(dir, owners).unwrap();
        let id = store.put_tree(&tree).unwrap();
        let target = store.layer_dir(&id);
        if target.exists() {
            remove_tree(dir).unwrap();
        } else {
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::rename(dir, &target).unwrap();
        }
        id
    }

    fn hash_of(path: &str) -> Option<blake3::Hash> {
        std::fs::read(path).ok().map(|b| blake3::hash(&b))
    }

    /// Every path below `root` (not following symlinks).
    fn listing(root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        super::super::scan::walk(root, |_, rel, _| {
            out.push(rel.to_owned());
            Ok(())
        })
        .unwrap();
        out.sort();
        out
    }

    #[test]
    fn materialize_writes_merged_view_with_modes_and_links() {
        let tmp = tempfile::tempdir().unwrap();
        let store = test_store(&tmp.path().join("store"));
        let owners = OwnerMap::current_user();
        let l1 = tmp.path().join("l1");
        std::fs::create_dir_all(l1.join("d/e")).unwrap();
        std::fs::write(l1.join("d/e/f"), b"one").unwrap();
        std::fs::write(l1.join("old"), b"old").unwrap();
        std::fs::write(l1.join("keep"), b"keep").unwrap();
        let l1_id = install_layer(&store, &l1, &owners);
        let l2 = tmp.path().join("l2");
        std::fs::create_dir_all(l2.join("d")).unwrap();
        std::fs::write(l2.join("d/new"), b"new").unwrap();
        std::os::unix::fs::symlink("../keep", l2.join("d/ln")).unwrap();
        let l2fd = open_dir_path(&l2).unwrap();
        rustix::fs::mknodat(&l2fd, "old", FileType::CharacterDevice, Mode::empty(), 0).unwrap();
        rustix::fs::mknodat(&l2fd, "fifo", FileType::Fifo, Mode::from_raw_mode(0o640), 0).unwrap();
        std::fs::write(l2.join("ro"), b"ro").unwrap();
        std::fs::create_dir(l2.join("rodir")).unwrap();
        std::fs::write(l2.join("rodir/x"), b"x").unwrap();
        rustix::fs::chmod(l2.join("rodir"), Mode::from_raw_mode(0o555)).unwrap();
        let l2_id = install_layer(&store, &l2, &owners);

        let dest = tmp.path().join("out/dest");
        let opts = MaterializeOptions {
            verify: true,
            owners: Some(owners),
        };
        let report = materialize(&store, &[l1_id, l2_id], &dest, &opts).unwrap();
        assert_eq!(
            listing(&dest),
            [
                "d", "d/e", "d/e/f", "d/ln", "d/new", "fifo", "keep", "ro", "rodir", "rodir/x"
            ]
        );
        assert_eq!(
            std::fs::read_link(dest.join("d/ln")).unwrap(),
            Path::new("../keep")
        );
        assert_eq!(std::fs::read(dest.join("d/new")).unwrap(), b"new");
        assert_eq!(
            (report.files, report.dirs, report.symlinks, report.fifos),
            (5, 3, 1, 1)
        );
        assert_eq!(report.bytes, 3 + 3 + 4 + 2 + 1);
        // The result's tree equals the merged view.
        let merged = super::super::merge_layers(&store, &[l1_id, l2_id]).unwrap();
        let got = super::super::merge(&[&tree_of_dir(&dest, &owners).unwrap()]);
        assert_eq!(got, merged);
        // Not empty any more: a second materialisation is refused.
        let err = materialize(&store, &[l1_id], &dest, &opts).unwrap_err();
        assert!(
            matches!(err, LayerError::DestinationNotEmpty { .. }),
            "{err}"
        );
    }

    #[test]
    fn setuid_bits_kept_only_with_owners() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let store = test_store(&tmp.path().join("store"));
        let owners = OwnerMap::current_user();
        let l = tmp.path().join("l");
        std::fs::create_dir(&l).unwrap();
        std::fs::write(l.join("tool"), b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(l.join("tool"), std::fs::Permissions::from_mode(0o4755)).unwrap();
        let id = install_layer(&store, &l, &owners);
        let mode_of =
            |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
        let kept = tmp.path().join("kept");
        let opts = MaterializeOptions {
            verify: false,
            owners: Some(owners),
        };
        materialize(&store, &[id], &kept, &opts).unwrap();
        assert_eq!(mode_of(&kept.join("tool")), 0o4755);
        let plain = tmp.path().join("plain");
        materialize(&store, &[id], &plain, &MaterializeOptions::default()).unwrap();
        assert_eq!(mode_of(&plain.join("tool")), 0o755);
    }

    #[test]
    fn symlinks_in_layers_never_redirect_writes() {
        let tmp = tempfile::tempdir().unwrap();
        let store = test_store(&tmp.path().join("store"));
        let owners = OwnerMap::current_user();
        let before = hash_of("/etc/passwd");

        let lower = tmp.path().join("lower");
        std::fs::create_dir(&lower).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", lower.join("x")).unwrap();
        std::os::unix::fs::symlink("/etc", lower.join("d")).unwrap();
        let lower_id = install_layer(&store, &lower, &owners);
        // A hostile upper layer: `d/passwd` as a directory with a file, but
        // no `d` directory entry of its own (so `d` in the merged view is
        // the lower symlink until merge replaces it).
        let upper_tree = Tree {
            entries: vec![
                crate::layer::merge::tests::dir("d/passwd", false),
                crate::layer::merge::tests::file("d/passwd/owned", b"pwn"),
            ],
        };
        let upper_id = store.put_tree(&upper_tree).unwrap();
        let upper_dir = store.layer_dir(&upper_id);
        std::fs::create_dir_all(upper_dir.join("d/passwd")).unwrap();
        std::fs::write(upper_dir.join("d/passwd/owned"), b"pwn").unwrap();

        let dest = tmp.path().join("dest");
        materialize(
            &store,
            &[lower_id, upper_id],
            &dest,
            &MaterializeOptions::default(),
        )
        .unwrap();
        assert_eq!(
            std::fs::read_link(dest.join("x")).unwrap(),
            Path::new("/etc/passwd")
        );
        let d_meta = std::fs::symlink_metadata(dest.join("d")).unwrap();
        assert!(d_meta.is_dir(), "d must be a real directory");
        assert!(
            std::fs::symlink_metadata(dest.join("d/passwd"))
                .unwrap()
                .is_dir()
        );
        assert_eq!(std::fs::read(dest.join("d/passwd/owned")).unwrap(), b"pwn");
        assert_eq!(listing(&dest), ["d", "d/passwd", "d/passwd/owned", "x"]);
        assert_eq!(hash_of("/etc/passwd"), before);
        assert!(!Path::new("/etc/passwd/owned").exists());
    }

    #[test]
    fn symlinked_component_inside_a_layer_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let store = test_store(&tmp.path().join("store"));
        // Tree says `d/f` is a file in a directory `d`, but on disk the
        // layer's `d` is a symlink to a directory outside the layer.
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("f"), b"secret").unwrap();
        let tree = Tree {
            entries: vec![
                crate::layer::merge::tests::dir("d", false),
                crate::layer::merge::tests::file("d/f", b"secret"),
            ],
        };
        let id = store.put_tree(&tree).unwrap();
        let ldir = store.layer_dir(&id);
        std::fs::create_dir_all(&ldir).unwrap();
        std::os::unix::fs::symlink(&outside, ldir.join("d")).unwrap();
        let dest = tmp.path().join("dest");
        let err = materialize(&store, &[id], &dest, &MaterializeOptions::default()).unwrap_err();
        assert!(err.to_string().contains("d/f"), "{err}");
        assert!(
            !dest.exists(),
            "a failed materialisation leaves nothing behind"
        );
    }

    #[test]
    fn flipped_byte_is_an_error_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let store = test_store(&tmp.path().join("store"));
        let owners = OwnerMap::current_user();
        let l = tmp.path().join("l");
        std::fs::create_dir_all(l.join("src")).unwrap();
        std::fs::write(l.join("src/main.rs"), b"fn main() {}\n").unwrap();
        let id = install_layer(&store, &l, &owners);
        let victim = store.layer_dir(&id).join("src/main.rs");
        let mut bytes = std::fs::read(&victim).unwrap();
        bytes[3] ^= 0x01;
        std::fs::write(&victim, &bytes).unwrap();

        for verify in [false, true] {
            let dest = tmp.path().join(format!("dest-{verify}"));
            let opts = MaterializeOptions {
                verify,
                owners: None,
            };
            let err = materialize(&store, &[id], &dest, &opts).unwrap_err();
            assert!(err.to_string().contains("src/main.rs"), "{err}");
            if verify {
                assert!(matches!(err, LayerError::Corrupt { .. }), "{err}");
            } else {
                assert!(matches!(err, LayerError::ContentMismatch { .. }), "{err}");
            }
            assert!(!dest.exists());
        }
    }

    #[test]
    fn squash_is_cached_and_stable() {
        let tmp = tempfile::tempdir().unwrap();
        let store = test_store(&tmp.path().join("store"));
        let owners = OwnerMap::current_user();
        let l = tmp.path().join("l");
        std::fs::create_dir_all(l.join("a")).unwrap();
        std::fs::write(l.join("a/b"), b"bee").unwrap();
        let id = install_layer(&store, &l, &owners);
        let snap = ObjectId::hash(b"snapshot");
        let first = squash(&store, &snap, &[id], &owners).unwrap();
        assert_eq!(first, store.squash_dir(&snap));
        assert_eq!(std::fs::read(first.join("a/b")).unwrap(), b"bee");
        let second = squash(&store, &snap, &[id], &owners).unwrap();
        assert_eq!(first, second);
    }

    #[test]
    fn squash_returns_an_installed_entry_and_never_replaces_one() {
        let tmp = tempfile::tempdir().unwrap();
        let store = test_store(&tmp.path().join("store"));
        let owners = OwnerMap::current_user();
        let l = tmp.path().join("l");
        std::fs::create_dir_all(&l).unwrap();
        std::fs::write(l.join("f"), b"f").unwrap();
        let id = install_layer(&store, &l, &owners);
        let snap = ObjectId::hash(b"raced");
        let target = store.squash_dir(&snap);
        let winner_tmp = tmp.path().join("winner");
        materialize(&store, &[id], &winner_tmp, &MaterializeOptions::default()).unwrap();
        std::fs::write(winner_tmp.join("marker"), b"w").unwrap();
        // Another process installed its squash first.
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::rename(&winner_tmp, &target).unwrap();
        let got = squash(&store, &snap, &[id], &owners).unwrap();
        assert_eq!(got, target);
        assert!(target.join("marker").exists());
        // Had we lost the race after the existence check, our rename would
        // be refused rather than replace theirs:
        let loser = tmp.path().join("loser");
        std::fs::create_dir(&loser).unwrap();
        std::fs::write(loser.join("f"), b"f").unwrap();
        assert!(rename_noreplace(&loser, &target).is_err());
    }
}
