//! Unpacking one image layer (a tar stream, OCI or Docker) into a layer
//! directory in Arbor's format: OCI whiteouts (`.wh.NAME`) become overlayfs
//! whiteouts, opaque markers (`.wh..wh..opq`) the `user.overlay.opaque`
//! attribute of their directory, hard links copies of their target, and
//! device nodes and sockets are dropped (counted). Every entry is hostile
//! until checked: a path that is absolute or climbs out (`..`), a relative
//! symlink whose target climbs above the layer root, a hard link to
//! something not in this layer, a second entry for the same path, a
//! whiteout of a path that no lower layer has, an entry below a
//! non-directory, a member that ends before its declared size, and more
//! bytes or entries than the limits are each refused with an
//! [`ArchiveProblem`]. Set-uid and set-gid bits are dropped (sandboxes mount
//! everything `nosuid`; on the host they would only be a hazard).
//!
//! Writes go through [`EntryWriter`], one descriptor per directory, never
//! following a symlink, into a destination the caller discards on error.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use rustix::fs::OFlags;

use super::fsio::{is_clean_relative, open_beneath, open_dir_path, split_parent};
use super::writer::{EntryWriter, HostOwner};
use super::{LayerError, OwnerMap, Result};

/// What an archive entry did wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveProblem {
    /// The path is absolute.
    #[error("absolute path")]
    Absolute,
    /// The path (or a hard link's target) has a `..` component or is not clean.
    #[error("path escapes the layer (`..`, empty or `.` components)")]
    Escape,
    /// A relative symlink's target climbs above the layer root.
    #[error("symlink target {0:?} points outside the layer")]
    SymlinkEscape(String),
    /// The path or link target is not UTF-8.
    #[error("name is not valid UTF-8")]
    NotUtf8,
    /// A second entry for the same path.
    #[error("duplicate entry (the path was already written by this layer)")]
    Duplicate,
    /// A whiteout of a path that no lower layer has.
    #[error("whiteout of {0:?}, which no lower layer has")]
    WhiteoutOfMissing(String),
    /// An opaque marker at the root of the layer.
    #[error("opaque marker at the layer root")]
    OpaqueRoot,
    /// A hard link whose target is not a regular file earlier in this layer.
    #[error("hard link to {0:?}, which is not a regular file earlier in this layer")]
    HardLinkTarget(String),
    /// An entry below a path this layer wrote as something else than a directory.
    #[error("parent {0:?} is not a directory in this layer")]
    ParentNotDir(String),
    /// The layer holds more bytes than the limit.
    #[error("the layer holds more than {0} bytes of files (the image import limit)")]
    TooLarge(u64),
    /// The layer has more entries than the limit.
    #[error("the layer has more than {0} entries (the image import limit)")]
    TooManyEntries(u64),
    /// The member or archive ends early, or the tar headers are unreadable.
    #[error("truncated or malformed tar: {0}")]
    Malformed(String),
    /// A tar entry type Arbor does not read.
    #[error("unsupported tar entry type {0}")]
    UnsupportedType(u8),
}

/// Bounds on one layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UntarLimits {
    /// Most bytes of regular-file content.
    pub max_bytes: u64,
    /// Most entries.
    pub max_entries: u64,
}

impl Default for UntarLimits {
    fn default() -> Self {
        Self {
            max_bytes: 16 << 30,
            max_entries: 2_000_000,
        }
    }
}

/// What [`untar_layer`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UntarReport {
    /// Regular files (hard links included, as copies).
    pub files: u64,
    /// Directories.
    pub dirs: u64,
    /// Symlinks.
    pub symlinks: u64,
    /// Hard links written as copies of their target.
    pub hard_links: u64,
    /// Whiteouts.
    pub whiteouts: u64,
    /// Opaque directories.
    pub opaque_dirs: u64,
    /// Device nodes and sockets dropped.
    pub specials_skipped: u64,
    /// Files whose set-uid or set-gid bit was dropped.
    pub setid_dropped: u64,
    /// Bytes of file content.
    pub bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Made {
    /// A directory created because an entry below it came first.
    ImplicitDir,
    Dir,
    File {
        mode: u32,
    },
    Other,
}

/// Normalise an archive path: strip a leading `./` and a trailing `/`;
/// `None` for the root itself.
pub fn clean_archive_path(raw: &[u8]) -> std::result::Result<Option<String>, ArchiveProblem> {
    let s = std::str::from_utf8(raw).map_err(|_| ArchiveProblem::NotUtf8)?;
    if s.starts_with('/') {
        return Err(ArchiveProblem::Absolute);
    }
    let mut s = s;
    while let Some(rest) = s.strip_prefix("./") {
        s = rest;
    }
    let s = s.trim_end_matches('/');
    if s.is_empty() || s == "." {
        return Ok(None);
    }
    if !is_clean_relative(s) {
        return Err(ArchiveProblem::Escape);
    }
    Ok(Some(s.to_owned()))
}

/// Whether a relative symlink at `link` with `target` stays inside the root.
fn symlink_stays_inside(link: &str, target: &str) -> bool {
    if target.starts_with('/') {
        // Absolute targets resolve against the sandbox's root, where `/..` is `/`.
        return true;
    }
    let (parent, _) = split_parent(link);
    let mut depth: i64 = if parent.is_empty() {
        0
    } else {
        parent.split('/').count() as i64
    };
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => depth += 1,
        }
    }
    true
}

/// Unpack the layer tar `reader` into the existing empty directory `dest`.
/// `below(path)` says whether a lower layer of the image has `path` (for
/// whiteouts). Owners are taken from the archive and mapped to host owners
/// through `owners`. `name` names the layer in errors. On error the caller
/// removes `dest`.
pub fn untar_layer(
    reader: impl Read,
    dest: &Path,
    below: &dyn Fn(&str) -> bool,
    owners: &OwnerMap,
    limits: &UntarLimits,
    name: &str,
) -> Result<UntarReport> {
    let mut u = Untar {
        writer: EntryWriter::open(dest)?,
        root: open_dir_path(dest).map_err(|source| LayerError::Write {
            path: dest.to_path_buf(),
            source,
        })?,
        made: HashMap::new(),
        report: UntarReport::default(),
        owners: *owners,
        name: name.to_owned(),
    };
    let mut archive = tar::Archive::new(reader);
    let entries = archive
        .entries()
        .map_err(|e| u.refuse("", ArchiveProblem::Malformed(e.to_string())))?;
    let mut count = 0u64;
    for entry in entries {
        let mut entry =
            entry.map_err(|e| u.refuse("", ArchiveProblem::Malformed(e.to_string())))?;
        count += 1;
        if count > limits.max_entries {
            return Err(u.refuse("", ArchiveProblem::TooManyEntries(limits.max_entries)));
        }
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let path = clean_archive_path(&raw).map_err(|p| u.refuse(&shown, p))?;
        let header = entry.header();
        let kind = header.entry_type();
        let mode = header.mode().unwrap_or(0o644) & 0o7777;
        let uid = header.uid().unwrap_or(0).min(u64::from(u32::MAX)) as u32;
        let gid = header.gid().unwrap_or(0).min(u64::from(u32::MAX)) as u32;
        let owner: HostOwner = Some(owners.to_host(uid, gid));
        let Some(path) = path else {
            // The root itself: its mode is the layer directory's business.
            continue;
        };
        let (parent, base) = split_parent(&path);
        if base == ".wh..wh..opq" {
            if parent.is_empty() {
                return Err(u.refuse(&shown, ArchiveProblem::OpaqueRoot));
            }
            u.parents(&path, &shown)?;
            u.writer.mark_opaque(parent)?;
            u.report.opaque_dirs += 1;
            continue;
        }
        if let Some(hidden) = base.strip_prefix(".wh.") {
            let target = if parent.is_empty() {
                hidden.to_owned()
            } else {
                format!("{parent}/{hidden}")
            };
            if !is_clean_relative(&target) {
                return Err(u.refuse(&shown, ArchiveProblem::Escape));
            }
            if !below(&target) {
                return Err(u.refuse(&shown, ArchiveProblem::WhiteoutOfMissing(target)));
            }
            u.parents(&target, &shown)?;
            u.claim(&target, &shown, Made::Other)?;
            u.writer.whiteout(&target)?;
            u.report.whiteouts += 1;
            continue;
        }
        use tar::EntryType as T;
        match kind {
            T::Directory => {
                u.parents(&path, &shown)?;
                match u.made.get(&path) {
                    Some(Made::ImplicitDir) => {
                        u.writer.redo_dir(&path, mode & 0o1777, owner)?;
                        u.made.insert(path, Made::Dir);
                    }
                    Some(_) => return Err(u.refuse(&shown, ArchiveProblem::Duplicate)),
                    None => {
                        u.writer.dir(&path, mode & 0o1777, owner, false)?;
                        u.made.insert(path, Made::Dir);
                        u.report.dirs += 1;
                    }
                }
            }
            T::Regular | T::Continuous | T::GNUSparse => {
                let size = entry.size();
                if u.report.bytes.saturating_add(size) > limits.max_bytes {
                    return Err(u.refuse(&shown, ArchiveProblem::TooLarge(limits.max_bytes)));
                }
                u.parents(&path, &shown)?;
                let kept = u.kept_mode(mode);
                u.claim(&path, &shown, Made::File { mode: kept })?;
                u.writer
                    .file_from_reader(&path, &mut entry, size, kept, owner)
                    .map_err(|e| match e {
                        LayerError::Write { source, .. }
                            if source.kind() == std::io::ErrorKind::UnexpectedEof =>
                        {
                            u.refuse(&shown, ArchiveProblem::Malformed(source.to_string()))
                        }
                        other => other,
                    })?;
                u.report.files += 1;
                u.report.bytes += size;
            }
            T::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| t.into_owned())
                    .unwrap_or_default();
                let target = String::from_utf8(target)
                    .map_err(|_| u.refuse(&shown, ArchiveProblem::NotUtf8))?;
                if target.is_empty()
                    || target.contains('\0')
                    || !symlink_stays_inside(&path, &target)
                {
                    return Err(u.refuse(&shown, ArchiveProblem::SymlinkEscape(target)));
                }
                u.parents(&path, &shown)?;
                u.claim(&path, &shown, Made::Other)?;
                u.writer.symlink(&path, &target, owner)?;
                u.report.symlinks += 1;
            }
            T::Link => {
                let raw_target = entry
                    .link_name_bytes()
                    .map(|t| t.into_owned())
                    .unwrap_or_default();
                let target = clean_archive_path(&raw_target)
                    .map_err(|p| u.refuse(&shown, p))?
                    .ok_or_else(|| u.refuse(&shown, ArchiveProblem::Escape))?;
                let Some(Made::File { mode: tmode }) = u.made.get(&target).copied() else {
                    return Err(u.refuse(&shown, ArchiveProblem::HardLinkTarget(target)));
                };
                u.parents(&path, &shown)?;
                u.claim(&path, &shown, Made::File { mode: tmode })?;
                let src = open_beneath(&u.root, &target, OFlags::RDONLY).map_err(|source| {
                    LayerError::ReadSource {
                        path: dest.join(&target),
                        source,
                    }
                })?;
                let len = rustix::fs::fstat(&src)
                    .map(|st| st.st_size as u64)
                    .unwrap_or(0);
                u.writer
                    .file(&path, &src, &dest.join(&target), len, tmode, owner)?;
                u.report.files += 1;
                u.report.hard_links += 1;
                u.report.bytes += len;
            }
            T::Fifo => {
                u.parents(&path, &shown)?;
                u.claim(&path, &shown, Made::Other)?;
                u.writer.fifo(&path, mode & 0o777, owner)?;
            }
            T::Char | T::Block => {
                u.report.specials_skipped += 1;
            }
            T::XGlobalHeader | T::XHeader | T::GNULongName | T::GNULongLink => {}
            other => {
                return Err(u.refuse(&shown, ArchiveProblem::UnsupportedType(other.as_byte())));
            }
        }
    }
    // Read what follows the end-of-archive marker so that the caller's
    // digest covers the whole stream.
    let mut rest = archive.into_inner();
    std::io::copy(&mut rest, &mut std::io::sink())
        .map_err(|e| u.refuse("", ArchiveProblem::Malformed(e.to_string())))?;
    u.writer.finish()?;
    Ok(u.report)
}

struct Untar {
    writer: EntryWriter,
    root: std::os::fd::OwnedFd,
    made: HashMap<String, Made>,
    report: UntarReport,
    owners: OwnerMap,
    name: String,
}

impl Untar {
    fn refuse(&self, entry: &str, problem: ArchiveProblem) -> LayerError {
        LayerError::Archive {
            archive: self.name.clone(),
            entry: entry.to_owned(),
            problem,
        }
    }

    fn kept_mode(&mut self, mode: u32) -> u32 {
        if mode & 0o6000 != 0 {
            self.report.setid_dropped += 1;
        }
        mode & 0o1777
    }

    /// Record that this layer writes `path`; a second write is refused.
    fn claim(&mut self, path: &str, shown: &str, what: Made) -> Result<()> {
        if self.made.contains_key(path) {
            return Err(self.refuse(shown, ArchiveProblem::Duplicate));
        }
        self.made.insert(path.to_owned(), what);
        Ok(())
    }

    /// Create the missing parents of `path` (root-owned, 0755); a parent
    /// this layer wrote as a non-directory is refused.
    fn parents(&mut self, path: &str, shown: &str) -> Result<()> {
        let mut end = 0;
        while let Some(off) = path[end..].find('/') {
            let prefix = &path[..end + off];
            match self.made.get(prefix) {
                Some(Made::Dir | Made::ImplicitDir) => {}
                Some(_) => {
                    return Err(self.refuse(shown, ArchiveProblem::ParentNotDir(prefix.to_owned())));
                }
                None => {
                    let owner = Some(self.owners.to_host(0, 0));
                    self.writer.dir(prefix, 0o755, owner, false)?;
                    self.made.insert(prefix.to_owned(), Made::ImplicitDir);
                    self.report.dirs += 1;
                }
            }
            end += off + 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned_and_escapes_refused() {
        assert_eq!(clean_archive_path(b"./a/b/"), Ok(Some("a/b".into())));
        assert_eq!(clean_archive_path(b"./"), Ok(None));
        assert_eq!(
            clean_archive_path(b"/etc/passwd"),
            Err(ArchiveProblem::Absolute)
        );
        assert_eq!(
            clean_archive_path(b"a/../../x"),
            Err(ArchiveProblem::Escape)
        );
        assert_eq!(clean_archive_path(b"a//b"), Err(ArchiveProblem::Escape));
        assert_eq!(clean_archive_path(b"a/\xff"), Err(ArchiveProblem::NotUtf8));
        assert!(symlink_stays_inside("a/b", "../c"));
        assert!(symlink_stays_inside("a/b", "/etc/passwd"));
        assert!(!symlink_stays_inside("a/b", "../../c"));
        assert!(!symlink_stays_inside("x", "../etc"));
        assert!(symlink_stays_inside("usr/lib/x", "../../bin/sh"));
    }
}
