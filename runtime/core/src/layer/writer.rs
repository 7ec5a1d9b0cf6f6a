//! Writing entries into a destination directory through descriptors only:
//! the shared back end of [`materialize`](fn@super::materialize) and
//! [`write_delta_layer`](super::write_delta_layer).
//!
//! Entries must be written parents first (sorted path order does that).
//! Directories are created `0o700` and get their real modes in
//! [`EntryWriter::finish`], deepest first, so a read-only directory can
//! still be filled by an unprivileged caller.

use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, XattrFlags};
use rustix::io::Errno;
use serde::Serialize;

use super::fsio::{DestTree, copy_hashing, set_owner_at, set_owner_fd, split_parent};
use super::scan::OPAQUE_XATTR;
use super::{LayerError, Result};

/// What a materialisation wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MaterializeReport {
    /// Regular files written.
    pub files: u64,
    /// Directories created.
    pub dirs: u64,
    /// Symlinks created (verbatim, never followed).
    pub symlinks: u64,
    /// FIFOs recreated.
    pub fifos: u64,
    /// Bytes of regular-file content written (logical size, holes included).
    pub bytes: u64,
    /// Device nodes and sockets in the view that were not recreated.
    pub specials_skipped: u64,
    /// Entries whose owner could not be set because the caller may not
    /// give files away (unprivileged, or the id is unmapped in its user
    /// namespace); they keep the caller's ownership.
    pub owners_not_kept: u64,
}

/// Writes entries below one destination directory.
#[derive(Debug)]
pub(super) struct EntryWriter {
    /// The destination, opened once.
    dest: DestTree,
    /// Directories created so far with the modes they must end with.
    dir_modes: Vec<(String, u32)>,
    /// Counts so far.
    report: MaterializeReport,
}

/// A host owner (`uid`, `gid`) to give an entry, or `None` to leave it
/// owned by the caller.
pub(super) type HostOwner = Option<(u32, u32)>;

impl EntryWriter {
    /// Start writing into the existing directory `dest`.
    pub(super) fn open(dest: &Path) -> Result<Self> {
        let dest_tree = DestTree::open(dest).map_err(|source| LayerError::Write {
            path: dest.to_path_buf(),
            source,
        })?;
        Ok(Self {
            dest: dest_tree,
            dir_modes: Vec::new(),
            report: MaterializeReport::default(),
        })
    }

    /// Host path of `rel` (for messages).
    pub(super) fn host_path(&self, rel: &str) -> PathBuf {
        self.dest.host_path(rel)
    }

    /// Map an error on `rel` to [`LayerError::Write`].
    fn write_err(&self, rel: &str) -> impl Fn(std::io::Error) -> LayerError + use<> {
        let path = self.host_path(rel);
        move |source| LayerError::Write {
            path: path.clone(),
            source,
        }
    }

    /// Apply `owner` to an open entry, counting refusals.
    fn own_fd(&mut self, rel: &str, fd: impl AsFd, owner: HostOwner) -> Result<()> {
        let Some((uid, gid)) = owner else {
            return Ok(());
        };
        match set_owner_fd(fd, uid, gid) {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.report.owners_not_kept += 1;
                Ok(())
            }
            Err(e) => Err(self.owner_err(rel, uid, gid, e)),
        }
    }

    /// [`LayerError::SetOwner`] for `rel`.
    fn owner_err(&self, rel: &str, uid: u32, gid: u32, e: Errno) -> LayerError {
        LayerError::SetOwner {
            path: self.host_path(rel),
            uid,
            gid,
            source: e.into(),
        }
    }

    /// Set the permission bits of an open entry.
    fn chmod_fd(&self, rel: &str, fd: impl AsFd, mode: u32) -> Result<()> {
        rustix::fs::fchmod(fd, Mode::from_raw_mode(mode & 0o7777)).map_err(|e| {
            LayerError::SetMode {
                path: self.host_path(rel),
                mode,
                source: e.into(),
            }
        })
    }

    /// Create directory `rel` (its mode is applied by [`Self::finish`]),
    /// marking it opaque if asked and the filesystem has user xattrs.
    pub(super) fn dir(
        &mut self,
        rel: &str,
        mode: u32,
        owner: HostOwner,
        opaque: bool,
    ) -> Result<()> {
        let err = self.write_err(rel);
        let (parent, name) = split_parent(rel);
        let parent_dir = self.dest.dir(parent).map_err(&err)?;
        rustix::fs::mkdirat(parent_dir, name, Mode::from_raw_mode(0o700))
            .map_err(|e| err(e.into()))?;
        let fd = rustix::fs::openat(
            parent_dir,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| err(e.into()))?;
        if opaque {
            // Without user xattrs the marker cannot be kept; merging a
            // directory over a non-directory replaces it all the same.
            match rustix::fs::fsetxattr(&fd, OPAQUE_XATTR, b"y", XattrFlags::empty()) {
                Ok(()) | Err(Errno::NOTSUP) => {}
                Err(e) => {
                    return Err(LayerError::Xattr {
                        path: self.host_path(rel),
                        name: OPAQUE_XATTR,
                        source: e.into(),
                    });
                }
            }
        }
        self.own_fd(rel, &fd, owner)?;
        // Owner-accessible until `finish`, whatever the final mode.
        self.chmod_fd(rel, &fd, 0o700)?;
        self.dir_modes.push((rel.to_owned(), mode));
        self.report.dirs += 1;
        Ok(())
    }

    /// Create regular file `rel` with the `len` bytes of `src`, and return
    /// the blake3 hash of what was copied. `src_path` names the source in
    /// errors.
    pub(super) fn file(
        &mut self,
        rel: &str,
        src: impl AsFd,
        src_path: &Path,
        len: u64,
        mode: u32,
        owner: HostOwner,
    ) -> Result<blake3::Hash> {
        let fd = self.new_file(rel)?;
        let hash = copy_hashing(&src, &fd, len).map_err(|source| LayerError::Copy {
            from: src_path.to_path_buf(),
            to: self.host_path(rel),
            source,
        })?;
        self.finish_file(rel, &fd, len, mode, owner)?;
        Ok(hash)
    }

    /// Create the empty regular file `rel` (`0o600`, never through a symlink).
    fn new_file(&mut self, rel: &str) -> Result<std::os::fd::OwnedFd> {
        let err = self.write_err(rel);
        let (parent, name) = split_parent(rel);
        let parent_dir = self.dest.dir(parent).map_err(&err)?;
        rustix::fs::openat(
            parent_dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| err(e.into()))
    }

    /// Owner and mode of a written file (chown clears setuid/setgid, so the
    /// mode comes after it), and the counts.
    fn finish_file(
        &mut self,
        rel: &str,
        fd: impl AsFd,
        len: u64,
        mode: u32,
        owner: HostOwner,
    ) -> Result<()> {
        self.own_fd(rel, &fd, owner)?;
        self.chmod_fd(rel, &fd, mode)?;
        self.report.files += 1;
        self.report.bytes += len;
        Ok(())
    }

    /// Create regular file `rel` with exactly `len` bytes read from `src`
    /// (an archive member); fails with `UnexpectedEof` if `src` ends early.
    pub(super) fn file_from_reader(
        &mut self,
        rel: &str,
        src: &mut dyn std::io::Read,
        len: u64,
        mode: u32,
        owner: HostOwner,
    ) -> Result<()> {
        let err = self.write_err(rel);
        let mut out = std::fs::File::from(self.new_file(rel)?);
        let copied = std::io::copy(&mut Read::take(&mut *src, len), &mut out).map_err(&err)?;
        if copied != len {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the archive ends after {copied} of this file's {len} bytes"),
            )));
        }
        self.finish_file(rel, &out, len, mode, owner)?;
        Ok(())
    }

    /// Give directory `rel`, created earlier by [`Self::dir`], the final
    /// mode `mode` and the owner `owner` instead (an archive that lists a
    /// directory after entries below it).
    pub(super) fn redo_dir(&mut self, rel: &str, mode: u32, owner: HostOwner) -> Result<()> {
        let err = self.write_err(rel);
        let fd = self
            .dest
            .dir(rel)
            .and_then(|d| d.as_fd().try_clone_to_owned())
            .map_err(err)?;
        self.own_fd(rel, &fd, owner)?;
        if let Some(slot) = self.dir_modes.iter_mut().find(|(r, _)| r == rel) {
            slot.1 = mode;
        }
        Ok(())
    }

    /// Mark directory `rel` (already created) opaque.
    pub(super) fn mark_opaque(&mut self, rel: &str) -> Result<()> {
        let err = self.write_err(rel);
        let fd = self
            .dest
            .dir(rel)
            .and_then(|d| d.as_fd().try_clone_to_owned())
            .map_err(err)?;
        rustix::fs::fsetxattr(&fd, OPAQUE_XATTR, b"y", XattrFlags::empty()).map_err(|e| {
            LayerError::Xattr {
                path: self.host_path(rel),
                name: OPAQUE_XATTR,
                source: e.into(),
            }
        })
    }

    /// Create symlink `rel` pointing at `target`, verbatim.
    pub(super) fn symlink(&mut self, rel: &str, target: &str, owner: HostOwner) -> Result<()> {
        let err = self.write_err(rel);
        let (parent, name) = split_parent(rel);
        let parent_dir = self.dest.dir(parent).map_err(&err)?;
        rustix::fs::symlinkat(target, parent_dir, name).map_err(|e| err(e.into()))?;
        if let Some((uid, gid)) = owner {
            match set_owner_at(parent_dir, name, uid, gid) {
                Ok(true) => {}
                Ok(false) => self.report.owners_not_kept += 1,
                Err(e) => return Err(self.owner_err(rel, uid, gid, e)),
            }
        }
        self.report.symlinks += 1;
        Ok(())
    }

    /// Create FIFO `rel`.
    pub(super) fn fifo(&mut self, rel: &str, mode: u32, owner: HostOwner) -> Result<()> {
        let err = self.write_err(rel);
        let (parent, name) = split_parent(rel);
        let parent_dir = self.dest.dir(parent).map_err(&err)?;
        rustix::fs::mknodat(
            parent_dir,
            name,
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .map_err(|e| err(e.into()))?;
        // A non-blocking read open of a FIFO succeeds without a writer.
        let fd = rustix::fs::openat(
            parent_dir,
            name,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| err(e.into()))?;
        self.own_fd(rel, &fd, owner)?;
        self.chmod_fd(rel, &fd, mode)?;
        self.report.fifos += 1;
        Ok(())
    }

    /// Create an overlayfs whiteout (character device 0:0) at `rel`.
    pub(super) fn whiteout(&mut self, rel: &str) -> Result<()> {
        let err = self.write_err(rel);
        let (parent, name) = split_parent(rel);
        let parent_dir = self.dest.dir(parent).map_err(&err)?;
        rustix::fs::mknodat(
            parent_dir,
            name,
            FileType::CharacterDevice,
            Mode::empty(),
            0,
        )
        .map_err(|e| err(e.into()))
    }

    /// Count an entry that was deliberately not recreated.
    pub(super) fn skip_special(&mut self) {
        self.report.specials_skipped += 1;
    }

    /// Give every created directory its final mode (deepest first) and
    /// return the counts.
    pub(super) fn finish(mut self) -> Result<MaterializeReport> {
        let mut dirs = std::mem::take(&mut self.dir_modes);
        dirs.sort_by(|a, b| b.0.cmp(&a.0));
        for (rel, mode) in dirs {
            let err = self.write_err(&rel);
            let fd = self
                .dest
                .dir(&rel)
                .and_then(|d| d.as_fd().try_clone_to_owned())
                .map_err(err)?;
            self.chmod_fd(&rel, &fd, mode)?;
        }
        Ok(self.report)
    }
}

/// Make sure `dest` is an empty directory, creating it (and its parents)
/// when absent. Returns whether it was created.
pub(super) fn prepare_dest(dest: &Path) -> Result<bool> {
    match std::fs::symlink_metadata(dest) {
        Ok(meta) if meta.is_dir() => {
            let mut listing = std::fs::read_dir(dest).map_err(|source| LayerError::Walk {
                path: dest.to_path_buf(),
                source,
            })?;
            if listing.next().is_some() {
                return Err(LayerError::DestinationNotEmpty {
                    path: dest.to_path_buf(),
                });
            }
            Ok(false)
        }
        Ok(_) => Err(LayerError::DestinationNotEmpty {
            path: dest.to_path_buf(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let create_err = |source| LayerError::Write {
                path: dest.to_path_buf(),
                source,
            };
            if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(create_err)?;
            }
            std::fs::create_dir(dest).map_err(create_err)?;
            Ok(true)
        }
        Err(source) => Err(LayerError::Walk {
            path: dest.to_path_buf(),
            source,
        }),
    }
}

/// Undo a failed write into `dest`: remove it if this module created it,
/// else empty it again. Errors are ignored (the original error matters).
pub(super) fn discard_dest(dest: &Path, created: bool) {
    if created {
        let _ignored = super::fsio::remove_tree(dest);
        return;
    }
    if let Ok(listing) = std::fs::read_dir(dest) {
        for entry in listing.flatten() {
            let path = entry.path();
            let _ignored = match entry.file_type() {
                Ok(ft) if ft.is_dir() => super::fsio::remove_tree(&path),
                _ => std::fs::remove_file(&path),
            };
        }
    }
}
