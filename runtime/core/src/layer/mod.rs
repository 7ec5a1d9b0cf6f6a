//! Filesystem layers: reading a layer directory into a [`Tree`], merging a
//! chain of layers with overlayfs semantics, diffing two merged views,
//! materialising a chain into a plain directory (fork for the copy backend,
//! `arbor checkout`, the squash cache) and writing the delta between a
//! modified workspace and the view it started from as a new layer.
//!
//! A layer is an overlayfs upper directory: a deleted path is a whiteout
//! (a character device with device number 0:0) and a directory that hides
//! everything below it in lower layers carries the `user.overlay.opaque=y`
//! extended attribute (overlay is always mounted with `userxattr`, inside a
//! user namespace).
//!
//! Every path taken from a tree or a layer is treated as hostile: layer files
//! are opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, and every
//! write into a destination goes through a directory handle opened on that
//! destination, one path component at a time, never following a symlink.
//!
//! [`Tree`]: crate::store::object::Tree

mod delta;
mod fsio;
mod materialize;
mod merge;
mod rebuild;
mod scan;
mod untar;
mod writer;

use std::path::PathBuf;

pub use delta::write_delta_layer;
pub(crate) use fsio::remove_tree;
pub use materialize::{MaterializeOptions, materialize, squash};
pub use merge::{Diff, MergedView, diff, merge, merge_layers, read_layer_file};
pub use rebuild::{ContentSource, LayerFiles, carriable, rebuild_layer};
pub(crate) use scan::is_opaque;
pub use scan::{dir_size, tree_of_dir};
pub use untar::{ArchiveProblem, UntarLimits, UntarReport, clean_archive_path, untar_layer};
pub use writer::MaterializeReport;

/// A file entry with this content, for tests across the crate.
#[cfg(test)]
pub(crate) use merge::tests::file as test_file;

use crate::store::StoreError;

/// The uid/gid that unmapped ids appear as (the kernel's overflow id).
pub const NOBODY: u32 = 65534;

/// How host ids of files in layer directories relate to ids inside a sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerMap {
    /// Arbor runs as real root: inside-sandbox id `n` is host id `uid_base + n`
    /// (for users and groups alike). Host ids below `uid_base` appear as
    /// [`NOBODY`] inside.
    Root {
        /// The host uid (and gid) that is root inside the sandbox.
        uid_base: u32,
    },
    /// Arbor runs unprivileged: the caller's uid/gid are 0 inside, every
    /// other host id appears as [`NOBODY`], and inside ids other than 0 are
    /// stored as host [`NOBODY`].
    Rootless {
        /// The caller's host uid.
        uid: u32,
        /// The caller's host gid.
        gid: u32,
    },
}

impl OwnerMap {
    /// The rootless map for the current process's effective uid and gid.
    pub fn current_user() -> Self {
        Self::Rootless {
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
        }
    }

    /// The map for a store written in `mode` by this process's user.
    pub fn for_store(mode: crate::store::OwnerMode) -> Self {
        match mode {
            crate::store::OwnerMode::Root { uid_base } => Self::Root { uid_base },
            crate::store::OwnerMode::Rootless => Self::current_user(),
        }
    }

    /// Translate a host owner into the owner seen inside the sandbox.
    pub fn to_sandbox(&self, host_uid: u32, host_gid: u32) -> (u32, u32) {
        match *self {
            Self::Root { uid_base } => {
                let map = |h: u32| h.checked_sub(uid_base).unwrap_or(NOBODY);
                (map(host_uid), map(host_gid))
            }
            Self::Rootless { uid, gid } => (
                if host_uid == uid { 0 } else { NOBODY },
                if host_gid == gid { 0 } else { NOBODY },
            ),
        }
    }

    /// Translate an owner seen inside the sandbox into the host owner that
    /// files in layer directories carry.
    pub fn to_host(&self, uid: u32, gid: u32) -> (u32, u32) {
        match *self {
            Self::Root { uid_base } => (uid_base.saturating_add(uid), uid_base.saturating_add(gid)),
            Self::Rootless {
                uid: host_uid,
                gid: host_gid,
            } => (
                if uid == 0 { host_uid } else { NOBODY },
                if gid == 0 { host_gid } else { NOBODY },
            ),
        }
    }
}

/// Errors of the layer module. Every variant names the path it concerns.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// Listing a directory or reading an entry's metadata failed.
    #[error("cannot read directory entry {path}: {source}")]
    Walk {
        /// The path being read.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file name or symlink target is not valid UTF-8 (trees hold strings).
    #[error("path or symlink target is not valid UTF-8: {path}")]
    NotUtf8 {
        /// The offending path.
        path: PathBuf,
    },
    /// Reading an extended attribute failed.
    #[error("cannot read or write extended attribute {name} of {path}: {source}")]
    Xattr {
        /// The file.
        path: PathBuf,
        /// The attribute name.
        name: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Hashing a file through the store failed.
    #[error("cannot hash {path}: {source}")]
    Hash {
        /// The file.
        path: PathBuf,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// Loading or storing a tree, or verifying a layer, failed in the store.
    #[error("store operation failed for {what}: {source}")]
    Store {
        /// What was being loaded or verified (a layer or tree id).
        what: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// A tree contains a path that is empty, absolute, or has `.`/`..` or
    /// empty components.
    #[error("tree {tree} contains an invalid path {path:?}")]
    BadPath {
        /// The tree (layer) id.
        tree: String,
        /// The offending path.
        path: String,
    },
    /// Opening or reading a file of a layer (or of a workspace) failed.
    #[error("cannot read {path}: {source}")]
    ReadSource {
        /// The source file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Copying a file's content from a layer or workspace failed.
    #[error("cannot copy {from} to {to}: {source}")]
    Copy {
        /// The source file.
        from: PathBuf,
        /// The destination file.
        to: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Creating or writing something in a destination directory failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The destination path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Changing the owner of a written entry failed.
    #[error("cannot change the owner of {path} to {uid}:{gid}: {source}")]
    SetOwner {
        /// The destination path.
        path: PathBuf,
        /// Host uid requested.
        uid: u32,
        /// Host gid requested.
        gid: u32,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Changing the permission bits of a written entry failed.
    #[error("cannot set the mode of {path} to {mode:o}: {source}")]
    SetMode {
        /// The destination path.
        path: PathBuf,
        /// The requested mode.
        mode: u32,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The destination exists and is not an empty directory.
    #[error("destination {path} exists and is not an empty directory")]
    DestinationNotEmpty {
        /// The destination.
        path: PathBuf,
    },
    /// A layer file's content does not match the hash (or size) recorded in
    /// its tree: the layer is corrupt and nothing derived from it is used.
    #[error("content of {path} does not match its tree: {what}")]
    ContentMismatch {
        /// The layer file.
        path: PathBuf,
        /// What differs.
        what: String,
    },
    /// `verify_layer` found a problem in a layer before materialising.
    #[error("layer is corrupt at {path}: {what}")]
    Corrupt {
        /// The first bad file or object.
        path: String,
        /// What is wrong with it.
        what: String,
    },
    /// Flushing a written directory to disk failed.
    #[error("cannot sync {path}: {source}")]
    Sync {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Moving a finished directory into place failed.
    #[error("cannot rename {from} to {to}: {source}")]
    Rename {
        /// The temporary directory.
        from: PathBuf,
        /// The final location.
        to: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An archive member (an image layer's tar entry) was refused.
    #[error("{archive}: entry {entry:?}: {problem}")]
    Archive {
        /// The archive (an image layer, by digest or file name).
        archive: String,
        /// The entry's path as the archive spells it.
        entry: String,
        /// What is wrong with it.
        problem: ArchiveProblem,
    },
    /// Removing a temporary directory failed.
    #[error("cannot remove {path}: {source}")]
    Remove {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Result type of the layer module.
pub type Result<T> = std::result::Result<T, LayerError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_map_round_trips_and_clamps() {
        let m = OwnerMap::Root { uid_base: 100_000 };
        assert_eq!(m.to_host(0, 0), (100_000, 100_000));
        assert_eq!(m.to_host(1000, 5), (101_000, 100_005));
        assert_eq!(m.to_sandbox(101_000, 100_005), (1000, 5));
        assert_eq!(m.to_sandbox(0, 7), (NOBODY, NOBODY));
    }

    #[test]
    fn rootless_map_has_one_mapped_id() {
        let m = OwnerMap::Rootless {
            uid: 1000,
            gid: 100,
        };
        assert_eq!(m.to_host(0, 0), (1000, 100));
        assert_eq!(m.to_host(5, 0), (NOBODY, 100));
        assert_eq!(m.to_sandbox(1000, 100), (0, 0));
        assert_eq!(m.to_sandbox(0, 100), (NOBODY, 0));
    }
}
