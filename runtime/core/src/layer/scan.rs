//! Reading a layer directory: its [`Tree`] (what sealing a layer records)
//! and its size (what polices a sandbox's private upper layer).
//!
//! Both walk the directory without following symlinks, so their cost is
//! proportional to the directory's own contents.

use std::fs::Metadata;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::fsio::Relaxed;
use super::{LayerError, OwnerMap, Result};
use crate::store::hash_file;
use crate::store::object::{EntryKind, ObjectId, Tree, TreeEntry};

/// The xattr that marks an overlayfs directory opaque (with `userxattr`).
pub(super) const OPAQUE_XATTR: &str = "user.overlay.opaque";

/// Bytes charged per directory by [`dir_size`].
const DIR_CHARGE: u64 = 4096;

/// Read `dir` (an overlay upper directory or any plain directory) into a
/// [`Tree`]: every entry below it, sorted by path, with permission bits,
/// owner translated through `owners`, and kind — regular files hashed by
/// content, symlinks with their target verbatim, character devices 0:0 as
/// whiteouts, directories opaque when `user.overlay.opaque` is `y`. Other
/// extended attributes, timestamps and hard-link identity are not recorded.
/// Symlinks are never followed; files are opened with `O_NOFOLLOW`.
pub fn tree_of_dir(dir: &Path, owners: &OwnerMap) -> Result<Tree> {
    let mut entries = Vec::new();
    walk(dir, |path, rel, meta| {
        let mut entry = entry_without_hash(path, rel, meta, owners)?;
        if let EntryKind::File { hash, .. } = &mut entry.kind {
            let hash_err = |source| LayerError::Hash {
                path: path.to_path_buf(),
                source,
            };
            let access_err = |e: std::io::Error| LayerError::Walk {
                path: path.to_path_buf(),
                source: e,
            };
            let mut relaxed = Relaxed::new();
            relaxed.allow(path, meta, 0o400).map_err(access_err)?;
            *hash = hash_file(path).map_err(hash_err)?;
            relaxed.restore().map_err(access_err)?;
        }
        entries.push(entry);
        Ok(())
    })?;
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Tree { entries })
}

/// The total size of `dir`: the byte length of every regular file plus
/// 4096 bytes for every directory (itself included). Symlinks are not
/// followed; symlinks, whiteouts and other special files count nothing.
pub fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = DIR_CHARGE;
    walk(dir, |_, _, meta| {
        if meta.is_dir() {
            total = total.saturating_add(DIR_CHARGE);
        } else if meta.is_file() {
            total = total.saturating_add(meta.len());
        }
        Ok(())
    })?;
    Ok(total)
}

/// Visit every entry below `root` (not `root` itself) with its host path,
/// its `/`-separated relative path and its `lstat` metadata, descending into
/// real directories only. Iterative, so deep trees cannot exhaust the stack.
pub(super) fn walk(
    root: &Path,
    visit: impl FnMut(&Path, &str, &Metadata) -> Result<()>,
) -> Result<()> {
    // Directories the caller made unlistable to itself (rootless mode) are
    // opened up for the walk and put back as they were at its end.
    let mut relaxed = Relaxed::new();
    walk_relaxed(root, &mut relaxed, visit)?;
    relaxed.restore().map_err(|source| LayerError::Walk {
        path: root.to_path_buf(),
        source,
    })
}

/// [`walk`], leaving the directories it opened up in `relaxed` (the caller
/// restores them once it no longer reads below them).
pub(super) fn walk_relaxed(
    root: &Path,
    relaxed: &mut Relaxed,
    mut visit: impl FnMut(&Path, &str, &Metadata) -> Result<()>,
) -> Result<()> {
    let walk_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LayerError::Walk { path, source }
    };
    let top = std::fs::symlink_metadata(root).map_err(walk_err(root))?;
    relaxed.allow(root, &top, 0o500).map_err(walk_err(root))?;
    let mut pending: Vec<String> = vec![String::new()];
    while let Some(rel_dir) = pending.pop() {
        let dir_path = if rel_dir.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&rel_dir)
        };
        let read = std::fs::read_dir(&dir_path).map_err(walk_err(&dir_path))?;
        for dirent in read {
            let dirent = dirent.map_err(walk_err(&dir_path))?;
            let path = dirent.path();
            let name = dirent
                .file_name()
                .into_string()
                .map_err(|_| LayerError::NotUtf8 { path: path.clone() })?;
            let rel = if rel_dir.is_empty() {
                name
            } else {
                format!("{rel_dir}/{name}")
            };
            // `DirEntry::metadata` is an lstat: it does not follow symlinks.
            let meta = dirent.metadata().map_err(walk_err(&path))?;
            if meta.is_dir() {
                relaxed
                    .allow(&path, &meta, 0o500)
                    .map_err(walk_err(&path))?;
            }
            visit(&path, &rel, &meta)?;
            if meta.is_dir() {
                pending.push(rel);
            }
        }
    }
    Ok(())
}

/// The tree entry for `path` from its `lstat` metadata, with a zero hash
/// for regular files (the caller hashes when it needs to).
pub(super) fn entry_without_hash(
    path: &Path,
    rel: &str,
    meta: &Metadata,
    owners: &OwnerMap,
) -> Result<TreeEntry> {
    let ft = meta.file_type();
    let kind = if ft.is_file() {
        EntryKind::File {
            size: meta.len(),
            hash: ObjectId([0; 32]),
        }
    } else if ft.is_dir() {
        EntryKind::Dir {
            opaque: is_opaque(path)?,
        }
    } else if ft.is_symlink() {
        let target = std::fs::read_link(path).map_err(|source| LayerError::Walk {
            path: path.to_path_buf(),
            source,
        })?;
        let target = target
            .into_os_string()
            .into_string()
            .map_err(|_| LayerError::NotUtf8 {
                path: path.to_path_buf(),
            })?;
        EntryKind::Symlink { target }
    } else if ft.is_char_device() && meta.rdev() == 0 {
        EntryKind::Whiteout
    } else {
        EntryKind::Special {
            format: meta.mode() & libc::S_IFMT,
            rdev: meta.rdev(),
        }
    };
    let (uid, gid) = owners.to_sandbox(meta.uid(), meta.gid());
    Ok(TreeEntry {
        path: rel.to_owned(),
        mode: meta.mode() & 0o7777,
        uid,
        gid,
        kind,
    })
}

/// Whether the directory at `path` carries `user.overlay.opaque=y`.
/// Filesystems without user xattrs have no opaque directories.
pub(crate) fn is_opaque(path: &Path) -> Result<bool> {
    let mut buf = [0u8; 8];
    match rustix::fs::lgetxattr(path, OPAQUE_XATTR, &mut buf[..]) {
        Ok(n) => Ok(&buf[..n] == b"y"),
        Err(rustix::io::Errno::NODATA | rustix::io::Errno::NOTSUP | rustix::io::Errno::RANGE) => {
            Ok(false)
        }
        Err(e) => Err(LayerError::Xattr {
            path: PathBuf::from(path),
            name: OPAQUE_XATTR,
            source: e.into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::{FileType, Mode};
    use std::os::unix::fs::PermissionsExt;

    /// Whether user xattrs can be set in `dir` (prints a note when not).
    pub(crate) fn user_xattrs_supported(dir: &Path) -> bool {
        let probe = dir.join(".xattr-probe");
        std::fs::create_dir(&probe).unwrap();
        let ok = rustix::fs::lsetxattr(&probe, "user.probe", b"1", rustix::fs::XattrFlags::empty())
            .is_ok();
        std::fs::remove_dir(&probe).unwrap();
        if !ok {
            println!("skipping opaque-directory checks: user xattrs unsupported here");
        }
        ok
    }

    #[test]
    fn tree_of_dir_records_every_kind() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("layer");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("f.txt"), b"hello").unwrap();
        std::fs::set_permissions(d.join("f.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::set_permissions(d.join("sub"), std::fs::Permissions::from_mode(0o751)).unwrap();
        std::fs::write(d.join("sub/inner"), b"").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.join("link")).unwrap();
        let dfd = super::super::fsio::open_dir_path(&d).unwrap();
        rustix::fs::mknodat(&dfd, "gone", FileType::CharacterDevice, Mode::empty(), 0).unwrap();
        rustix::fs::mknodat(&dfd, "pipe", FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
        std::fs::create_dir(d.join("opq")).unwrap();
        let xattrs = user_xattrs_supported(tmp.path());
        if xattrs {
            rustix::fs::lsetxattr(
                d.join("opq"),
                OPAQUE_XATTR,
                b"y",
                rustix::fs::XattrFlags::empty(),
            )
            .unwrap();
        }

        let owners = OwnerMap::current_user();
        let tree = tree_of_dir(&d, &owners).unwrap();
        let paths: Vec<&str> = tree.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            ["f.txt", "gone", "link", "opq", "pipe", "sub", "sub/inner"]
        );
        let by = |p: &str| tree.entries.iter().find(|e| e.path == p).unwrap();
        assert_eq!(
            by("f.txt").kind,
            EntryKind::File {
                size: 5,
                hash: ObjectId::from(blake3::hash(b"hello"))
            }
        );
        assert_eq!(by("f.txt").mode, 0o640);
        assert_eq!((by("f.txt").uid, by("f.txt").gid), (0, 0));
        assert_eq!(by("gone").kind, EntryKind::Whiteout);
        assert_eq!(
            by("link").kind,
            EntryKind::Symlink {
                target: "/etc/passwd".into()
            }
        );
        assert_eq!(by("opq").kind, EntryKind::Dir { opaque: xattrs });
        assert_eq!(by("sub").kind, EntryKind::Dir { opaque: false });
        assert_eq!(by("sub").mode, 0o751);
        assert_eq!(
            by("pipe").kind,
            EntryKind::Special {
                format: libc::S_IFIFO,
                rdev: 0
            }
        );
    }

    #[test]
    fn dir_size_counts_files_and_dirs_without_following_links() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("a"), vec![1u8; 1000]).unwrap();
        std::fs::create_dir(d.join("s")).unwrap();
        std::fs::write(d.join("s/b"), vec![1u8; 24]).unwrap();
        std::os::unix::fs::symlink("/usr", d.join("usr")).unwrap();
        assert_eq!(dir_size(d).unwrap(), 4096 * 2 + 1024);
    }

    #[test]
    fn missing_dir_is_an_error_naming_it() {
        let err = tree_of_dir(Path::new("/nonexistent/arbor"), &OwnerMap::current_user())
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/arbor"), "{err}");
    }
}
