//! Descriptor-relative file operations shared by the layer functions.
//!
//! Paths from trees and layers are hostile, so nothing here resolves a
//! multi-component path in one go: directories are opened one component at
//! a time with `O_NOFOLLOW | O_DIRECTORY`, and the final component is
//! created or opened relative to its parent's descriptor, again without
//! following a symlink. A path that would need a symlink (or `..`) to
//! resolve fails with an error instead.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;
use rustix::fs::{AtFlags, Mode, OFlags, SeekFrom};
use rustix::io::Errno;

/// Read/copy buffer size.
const BUF_LEN: usize = 256 * 1024;

/// A buffer of zeros fed to the hasher for the holes of sparse files.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// Whether `path` is a clean relative path: non-empty, `/`-separated, with
/// no empty, `.` or `..` components and no leading or trailing `/`.
pub(super) fn is_clean_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\0')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// The parent part and the final component of a clean relative path
/// (`""` is the root).
pub(super) fn split_parent(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

/// Invalid-input error for a path that is not clean.
fn unclean(path: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a clean relative path: {path:?}"),
    )
}

/// Open the directory `name` (one component) below `parent` without
/// following a symlink.
fn open_child_dir(parent: impl AsFd, name: &str) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Open `rel` below the directory `root` with `flags`, never following a
/// symlink in any component (`rel` must be clean).
pub(super) fn open_beneath(root: impl AsFd, rel: &str, flags: OFlags) -> io::Result<OwnedFd> {
    if !is_clean_relative(rel) {
        return Err(unclean(rel));
    }
    let (parent, name) = split_parent(rel);
    let parent_fd = if parent.is_empty() {
        None
    } else {
        let mut comps = parent.split('/');
        let mut cur = open_child_dir(root.as_fd(), comps.next().unwrap_or(""))?;
        for c in comps {
            cur = open_child_dir(&cur, c)?;
        }
        Some(cur)
    };
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match &parent_fd {
        Some(p) => rustix::fs::openat(p, name, flags, Mode::empty())?,
        None => rustix::fs::openat(root, name, flags, Mode::empty())?,
    };
    Ok(fd)
}

/// Open a host directory (ambient authority, used once per operation).
pub(super) fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// A destination directory tree written through descriptors only.
///
/// Keeps the chain of directory handles leading to the most recently used
/// directory, so writing entries in sorted order reopens few directories.
/// Invariant: `stack[i]` is the handle of the directory named by the first
/// `i + 1` components of the last directory requested, each opened from the
/// one before it with `O_NOFOLLOW`.
#[derive(Debug)]
pub(super) struct DestTree {
    /// Host path of the destination (for error messages only).
    root_path: PathBuf,
    /// Handle of the destination root; the only ambient-authority open.
    root: Dir,
    /// Open handles of the current directory chain, with component names.
    stack: Vec<(String, Dir)>,
}

impl DestTree {
    /// Open the destination directory `path`.
    pub(super) fn open(path: &Path) -> io::Result<Self> {
        let root = Dir::open_ambient_dir(path, cap_std::ambient_authority())?;
        Ok(Self {
            root_path: path.to_path_buf(),
            root,
            stack: Vec::new(),
        })
    }

    /// The host path of `rel` (for messages).
    pub(super) fn host_path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.root_path.clone()
        } else {
            self.root_path.join(rel)
        }
    }

    /// The handle of directory `rel` (`""` = root), opened component by
    /// component without following symlinks.
    pub(super) fn dir(&mut self, rel: &str) -> io::Result<&Dir> {
        if rel.is_empty() {
            return Ok(&self.root);
        }
        if !is_clean_relative(rel) {
            return Err(unclean(rel));
        }
        let comps: Vec<&str> = rel.split('/').collect();
        let keep = self
            .stack
            .iter()
            .zip(&comps)
            .take_while(|((name, _), c)| name == *c)
            .count();
        self.stack.truncate(keep);
        for c in &comps[keep..] {
            let fd = match self.stack.last() {
                Some((_, d)) => open_child_dir(d, c)?,
                None => open_child_dir(&self.root, c)?,
            };
            self.stack.push(((*c).to_owned(), Dir::from(fd)));
        }
        Ok(self.stack.last().map_or(&self.root, |(_, d)| d))
    }
}

/// Copy the first `len` bytes of `src` to `dst` (a new empty file), keeping
/// holes as holes where the source filesystem reports them (SEEK_DATA /
/// SEEK_HOLE), and return the blake3 hash of the logical content. Fails
/// with `InvalidData` unless `src` is exactly `len` bytes long (and with
/// `UnexpectedEof` if it shrinks while being read).
pub(super) fn copy_hashing(src: impl AsFd, dst: impl AsFd, len: u64) -> io::Result<blake3::Hash> {
    let (src, dst) = (src.as_fd(), dst.as_fd());
    let actual = u64::try_from(rustix::fs::fstat(src)?.st_size).unwrap_or(0);
    if actual != len {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("file holds {actual} bytes, expected {len}"),
        ));
    }
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; BUF_LEN];
    let mut sparse = true;
    let mut pos = 0u64;
    while pos < len {
        let data = if sparse {
            match rustix::fs::seek(src, SeekFrom::Data(pos)) {
                Ok(d) => d.min(len),
                Err(Errno::NXIO) => len,
                Err(Errno::INVAL | Errno::OPNOTSUPP) => {
                    sparse = false;
                    pos
                }
                Err(e) => return Err(e.into()),
            }
        } else {
            pos
        };
        hash_zeros(&mut hasher, data - pos);
        if data >= len {
            break;
        }
        let hole = if sparse {
            match rustix::fs::seek(src, SeekFrom::Hole(data)) {
                Ok(h) => h.min(len),
                Err(Errno::NXIO) => len,
                Err(e) => return Err(e.into()),
            }
        } else {
            len
        };
        copy_range(src, dst, data, hole, &mut buf, &mut hasher)?;
        pos = hole;
    }
    rustix::fs::ftruncate(dst, len)?;
    Ok(hasher.finalize())
}

/// Feed `n` zero bytes to `hasher`.
fn hash_zeros(hasher: &mut blake3::Hasher, mut n: u64) {
    while n > 0 {
        let k = n.min(ZEROS.len() as u64);
        // `k` is at most ZEROS.len(), so the cast cannot truncate.
        hasher.update(&ZEROS[..k as usize]);
        n -= k;
    }
}

/// Copy bytes `[from, to)` of `src` to the same offsets of `dst`, hashing them.
fn copy_range(
    src: impl AsFd,
    dst: impl AsFd,
    from: u64,
    to: u64,
    buf: &mut [u8],
    hasher: &mut blake3::Hasher,
) -> io::Result<()> {
    let (src, dst) = (src.as_fd(), dst.as_fd());
    let mut off = from;
    while off < to {
        let want = usize::try_from(to - off)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = rustix::io::pread(src, &mut buf[..want], off)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("file ended at byte {off}, expected {to}"),
            ));
        }
        hasher.update(&buf[..n]);
        let mut done = 0;
        while done < n {
            let w = rustix::io::pwrite(dst, &buf[done..n], off + done as u64)?;
            if w == 0 {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0"));
            }
            done += w;
        }
        off += n as u64;
    }
    Ok(())
}

/// Whether a failed chown should be tolerated: an unprivileged caller (or
/// one inside a user namespace) cannot give files to ids it does not own or
/// that are not mapped. Such entries keep the caller's ownership.
pub(super) fn chown_not_permitted(e: Errno) -> bool {
    matches!(e, Errno::PERM | Errno::INVAL)
}

/// Change the owner of the open file `fd` to `uid:gid` unless it already
/// has it. Returns `Ok(false)` when the change is not permitted (see
/// [`chown_not_permitted`]).
pub(super) fn set_owner_fd(fd: impl AsFd, uid: u32, gid: u32) -> Result<bool, Errno> {
    let st = rustix::fs::fstat(fd.as_fd())?;
    if st.st_uid == uid && st.st_gid == gid {
        return Ok(true);
    }
    match rustix::fs::fchown(
        fd,
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
    ) {
        Ok(()) => Ok(true),
        Err(e) if chown_not_permitted(e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Change the owner of `name` in `dir` without following a symlink (for
/// symlinks themselves). Same tolerance as [`set_owner_fd`].
pub(super) fn set_owner_at(dir: impl AsFd, name: &str, uid: u32, gid: u32) -> Result<bool, Errno> {
    let dir = dir.as_fd();
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if st.st_uid == uid && st.st_gid == gid {
        return Ok(true);
    }
    match rustix::fs::chownat(
        dir,
        name,
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
        AtFlags::SYMLINK_NOFOLLOW,
    ) {
        Ok(()) => Ok(true),
        Err(e) if chown_not_permitted(e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Remove a directory tree that this module wrote, even where it holds
/// directories without write permission (their modes are restored from the
/// tree last). Symlinks are removed, never followed.
pub(crate) fn remove_tree(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            make_dirs_writable(path)?;
            std::fs::remove_dir_all(path)
        }
    }
}

/// Give the owner full access to every real directory below `path`.
fn make_dirs_writable(path: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_dir() {
        return Ok(());
    }
    let fd = open_dir_path(path)?;
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))?;
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            make_dirs_writable(&entry.path())?;
        }
    }
    Ok(())
}

/// Owner permission bits added for the runtime's own reading of files the
/// caller owns but has made unreadable to itself (an agent's `chmod 000`:
/// in rootless mode every file of a sandbox is the caller's, and the caller
/// has no DAC override), restored, last first, by [`Relaxed::restore`] (or
/// on drop). Nothing is changed when running as root, for a file that has
/// the bits already, or for one the caller does not own. Modes are changed
/// through an `O_PATH` descriptor of the very inode that was `lstat`ed (via
/// `/proc/self/fd`), never through a path a symlink could redirect.
pub(crate) struct Relaxed {
    active: bool,
    uid: u32,
    changed: Vec<(OwnedFd, u32)>,
}

impl Relaxed {
    pub(crate) fn new() -> Self {
        let uid = rustix::process::geteuid();
        Self {
            active: !uid.is_root(),
            uid: uid.as_raw(),
            changed: Vec::new(),
        }
    }

    /// Give `path` (whose `lstat` is `meta`) the owner bits `need` until
    /// [`Self::restore`]. A directory needs `0o500` to be listed and
    /// searched, a file `0o400` to be read.
    pub(crate) fn allow(
        &mut self,
        path: &Path,
        meta: &std::fs::Metadata,
        need: u32,
    ) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let mode = meta.mode() & 0o7777;
        if !self.active || mode & need == need || meta.uid() != self.uid {
            return Ok(());
        }
        if !(meta.is_dir() || meta.is_file()) {
            return Ok(());
        }
        let fd = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let st = rustix::fs::fstat(&fd)?;
        if st.st_ino != meta.ino() || st.st_dev != meta.dev() {
            return Err(io::Error::other(format!(
                "{} changed while it was being read",
                path.display()
            )));
        }
        chmod_fd(&fd, mode | need)?;
        self.changed.push((fd, mode));
        Ok(())
    }

    /// [`Self::allow`] for every component of `rel` below `root` (the
    /// directories to search, the last one `need`).
    pub(crate) fn allow_path(&mut self, root: &Path, rel: &str, need: u32) -> io::Result<()> {
        let mut p = root.to_path_buf();
        let parts: Vec<&str> = rel.split('/').collect();
        for (i, part) in parts.iter().enumerate() {
            p.push(part);
            let meta = std::fs::symlink_metadata(&p)?;
            let last = i + 1 == parts.len();
            self.allow(&p, &meta, if last { need } else { 0o500 })?;
        }
        Ok(())
    }

    /// Put every mode back, last changed first.
    pub(crate) fn restore(mut self) -> io::Result<()> {
        self.restore_all()
    }

    fn restore_all(&mut self) -> io::Result<()> {
        let mut first_err = None;
        while let Some((fd, mode)) = self.changed.pop() {
            if let Err(e) = chmod_fd(&fd, mode) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for Relaxed {
    fn drop(&mut self) {
        let _ = self.restore_all();
    }
}

/// `chmod` the inode behind an `O_PATH` descriptor.
fn chmod_fd(fd: &OwnedFd, mode: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    Ok(rustix::fs::chmod(path.as_str(), Mode::from_raw_mode(mode))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, Write};

    #[test]
    fn clean_paths() {
        assert!(is_clean_relative("a/b.txt"));
        for bad in ["", "/a", "a/", "a//b", "./a", "a/../b", "..", "a\0b"] {
            assert!(!is_clean_relative(bad), "{bad:?}");
        }
        assert_eq!(split_parent("a/b/c"), ("a/b", "c"));
        assert_eq!(split_parent("c"), ("", "c"));
    }

    #[test]
    fn open_beneath_refuses_symlinked_components() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("real")).unwrap();
        std::fs::write(tmp.path().join("real/f"), b"x").unwrap();
        std::os::unix::fs::symlink("real", tmp.path().join("link")).unwrap();
        let root = open_dir_path(tmp.path()).unwrap();
        assert!(open_beneath(&root, "real/f", OFlags::RDONLY).is_ok());
        assert!(open_beneath(&root, "link/f", OFlags::RDONLY).is_err());
        assert!(open_beneath(&root, "link", OFlags::RDONLY).is_err());
        assert!(open_beneath(&root, "../x", OFlags::RDONLY).is_err());
    }

    #[test]
    fn sparse_copy_keeps_content_and_hash() {
        let tmp = tempfile::tempdir().unwrap();
        let src_path = tmp.path().join("src");
        let mut f = std::fs::File::create(&src_path).unwrap();
        f.write_all(b"head").unwrap();
        f.seek(io::SeekFrom::Start(3 << 20)).unwrap();
        f.write_all(b"tail").unwrap();
        f.set_len(5 << 20).unwrap();
        drop(f);
        let want = std::fs::read(&src_path).unwrap();
        let src = std::fs::File::open(&src_path).unwrap();
        let dst = std::fs::File::create(tmp.path().join("dst")).unwrap();
        let h = copy_hashing(&src, &dst, want.len() as u64).unwrap();
        assert_eq!(h, blake3::hash(&want));
        assert_eq!(std::fs::read(tmp.path().join("dst")).unwrap(), want);
        // Asking for more than the file holds is an error, not silent zeros.
        let dst2 = std::fs::File::create(tmp.path().join("dst2")).unwrap();
        assert!(copy_hashing(&src, &dst2, want.len() as u64 + 1).is_err());
    }
}
