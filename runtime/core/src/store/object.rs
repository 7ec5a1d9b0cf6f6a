//! Object identities and the typed objects kept in the store.
//!
//! Every object is stored as `header ‖ payload`:
//!
//! ```text
//! offset  size  field
//! 0       4     magic  b"ARBO"
//! 4       1     format version (1)
//! 5       1     kind (1 = blob, 2 = tree, 3 = manifest)
//! 6       8     payload length, little endian
//! 14      n     payload (blobs: raw bytes; trees and manifests: canonical JSON)
//! ```
//!
//! An object's id is the blake3 hash of the whole stored byte string, header
//! included, so a blob and a tree with equal payloads never share an id.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Magic bytes at the start of every stored object.
pub const OBJECT_MAGIC: [u8; 4] = *b"ARBO";
/// Current object format version.
pub const OBJECT_VERSION: u8 = 1;
/// Length of the fixed object header in bytes.
pub const OBJECT_HEADER_LEN: usize = 14;

/// A 32-byte blake3 hash naming an object, a layer (the id of its tree) or a
/// snapshot (the id of its manifest).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub [u8; 32]);

/// A layer is named by the id of the tree object describing its contents.
pub type LayerId = ObjectId;
/// A snapshot is named by the id of its manifest object.
pub type SnapshotId = ObjectId;

impl ObjectId {
    /// The blake3 hash of `bytes`.
    pub fn hash(bytes: &[u8]) -> Self {
        Self(*blake3::hash(bytes).as_bytes())
    }

    /// Lower-case hexadecimal form (64 characters).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The first 12 hex characters, for display.
    pub fn short(&self) -> String {
        let mut s = self.to_hex();
        s.truncate(12);
        s
    }
}

/// The id an object of `kind` with `payload` has (and will have once
/// stored), computed without writing anything.
pub fn object_id(kind: ObjectKind, payload: &[u8]) -> ObjectId {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&object_header(kind, payload.len() as u64));
    hasher.update(payload);
    hasher.finalize().into()
}

/// The header of an object file holding a `len`-byte payload of `kind`:
/// magic, version, kind, little-endian length.
pub(crate) fn object_header(kind: ObjectKind, len: u64) -> [u8; OBJECT_HEADER_LEN] {
    let mut header = [0u8; OBJECT_HEADER_LEN];
    header[..4].copy_from_slice(&OBJECT_MAGIC);
    header[4] = OBJECT_VERSION;
    header[5] = kind as u8;
    header[6..].copy_from_slice(&len.to_le_bytes());
    header
}

impl From<blake3::Hash> for ObjectId {
    fn from(h: blake3::Hash) -> Self {
        Self(*h.as_bytes())
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", self.short())
    }
}

/// Error parsing an [`ObjectId`] from text.
#[derive(Debug, thiserror::Error)]
#[error("not an object id (expected 64 hex characters): {0:?}")]
pub struct ParseObjectIdError(pub String);

impl FromStr for ObjectId {
    type Err = ParseObjectIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 32];
        if s.len() != 64 {
            return Err(ParseObjectIdError(s.to_owned()));
        }
        hex::decode_to_slice(s, &mut out).map_err(|_| ParseObjectIdError(s.to_owned()))?;
        Ok(Self(out))
    }
}

impl Serialize for ObjectId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for ObjectId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The kind byte of a stored object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[repr(u8)]
pub enum ObjectKind {
    /// Raw bytes (file contents for write actions, captured stdout/stderr).
    Blob = 1,
    /// A [`Tree`]: the listing of one layer.
    Tree = 2,
    /// A [`Manifest`]: one snapshot.
    Manifest = 3,
    /// The record of a WebAssembly session snapshot (JSON; written by the
    /// `wasm` backend, read for references by [`super::wasm_refs`]).
    WasmManifest = 4,
    /// An image: its layer chain and configuration (JSON, see
    /// [`super::ImageRecord`]).
    Image = 5,
}

impl ObjectKind {
    /// Decode the kind byte.
    pub fn from_byte(b: u8) -> Option<Self> {
        match b {
            1 => Some(Self::Blob),
            2 => Some(Self::Tree),
            3 => Some(Self::Manifest),
            4 => Some(Self::WasmManifest),
            5 => Some(Self::Image),
            _ => None,
        }
    }
}

/// The listing of one layer directory: every entry with its type, mode and,
/// for regular files, the blake3 hash of the content. Timestamps and inode
/// numbers are deliberately absent, so equal changes give equal ids.
///
/// Invariant: `entries` is sorted by `path` and paths are unique, relative,
/// `/`-separated, and contain no `.`/`..` components.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tree {
    /// The entries, sorted by path.
    pub entries: Vec<TreeEntry>,
}

/// One entry of a [`Tree`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeEntry {
    /// Path relative to the layer root, `/`-separated.
    pub path: String,
    /// Permission bits (including setuid/setgid/sticky), `st_mode & 0o7777`.
    pub mode: u32,
    /// Owner as seen inside the sandbox (host uid minus the store's uid base).
    pub uid: u32,
    /// Group as seen inside the sandbox.
    pub gid: u32,
    /// What the entry is.
    pub kind: EntryKind,
}

/// The type-specific part of a [`TreeEntry`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EntryKind {
    /// A regular file.
    File {
        /// Length in bytes.
        size: u64,
        /// blake3 of the content.
        hash: ObjectId,
    },
    /// A directory; `opaque` directories hide everything below them in lower layers.
    Dir {
        /// Overlayfs opaque marker (`user.overlay.opaque=y`).
        opaque: bool,
    },
    /// A symbolic link (never followed by the runtime).
    Symlink {
        /// The link target, verbatim.
        target: String,
    },
    /// An overlayfs whiteout: the path is deleted relative to lower layers.
    Whiteout,
    /// A FIFO, socket or device other than a whiteout (recorded, never opened).
    Special {
        /// `st_mode & S_IFMT`.
        format: u32,
        /// `st_rdev`.
        rdev: u64,
    },
}

/// Session state carried from one action to the next: exactly what a shell
/// would otherwise lose between fresh process trees.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionState {
    /// Working directory inside the sandbox (absolute, under `/workspace` or `/tmp`).
    pub cwd: String,
    /// Exported environment variables set by actions (on top of the fixed environment).
    pub env: BTreeMap<String, String>,
    /// Variables of the fixed environment that an action unset.
    pub unset: Vec<String>,
}

/// An action that produced a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Action {
    /// A shell command (run by `bash -c` inside the sandbox).
    Exec {
        /// The command text.
        command: String,
        /// Wall-clock limit in milliseconds.
        timeout_ms: u64,
    },
    /// Write a file through the host-side file API.
    WriteFile {
        /// Path relative to `/workspace`.
        path: String,
        /// The blob holding the content.
        content: ObjectId,
        /// Permission bits.
        mode: u32,
    },
    /// Delete a file through the host-side file API.
    DeleteFile {
        /// Path relative to `/workspace`.
        path: String,
    },
    /// A directory imported from the host (root snapshots only).
    Import {
        /// Where it came from (informational; never re-read by replay).
        source: String,
    },
    /// Several actions recorded since the previous snapshot, in order.
    Sequence {
        /// The actions.
        actions: Vec<Action>,
    },
}

/// How an action ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExitStatus {
    /// Exited normally with this code.
    Code {
        /// The exit code.
        code: i32,
    },
    /// Killed by this signal.
    Signal {
        /// The signal number.
        signal: i32,
    },
    /// Killed by the runtime because the wall-clock limit passed.
    Timeout,
    /// Stopped by the runtime because the private upper layer grew past its limit.
    DiskLimit,
}

/// Shell status of an action stopped at its wall-clock limit (as GNU `timeout`).
pub const EXIT_TIMEOUT: i32 = 124;
/// Shell status of an action stopped at the disk (or, in a session, memory) limit.
pub const EXIT_DISK_LIMIT: i32 = 125;

impl Action {
    /// One line saying what it did: `$ make test`, `write a.txt`,
    /// `delete b`, `import ./src`, `sequence of 3 actions: $ make, ...`.
    /// The one summary of a native action (log, replay, ls, rollout).
    pub fn summary(&self) -> String {
        match self {
            Self::Exec { command, .. } => format!("$ {}", one_line(command)),
            Self::WriteFile { path, .. } => format!("write {path}"),
            Self::DeleteFile { path } => format!("delete {path}"),
            Self::Import { source } => format!("import {source}"),
            Self::Sequence { actions } => {
                let n = actions.len();
                let first = actions.first().map_or_else(String::new, Action::summary);
                format!(
                    "sequence of {n} action{}: {first}{}",
                    if n == 1 { "" } else { "s" },
                    if n > 1 { ", ..." } else { "" }
                )
            }
        }
    }
}

/// Text on one line: line breaks become a visible `\\n`, tabs spaces.
pub fn one_line(text: &str) -> String {
    text.trim_end_matches('\n')
        .replace('\n', "\\n")
        .replace('\t', " ")
}

impl ExitStatus {
    /// The shell-style status, the one mapping every command and record
    /// uses: the code, 128+N for signal N, [`EXIT_TIMEOUT`], [`EXIT_DISK_LIMIT`].
    pub fn shell_code(&self) -> i32 {
        match self {
            Self::Code { code } => *code,
            Self::Signal { signal } => 128 + signal,
            Self::Timeout => EXIT_TIMEOUT,
            Self::DiskLimit => EXIT_DISK_LIMIT,
        }
    }

    /// A short label: `3`, `signal 15`, `timeout`, `disk limit`.
    pub fn label(&self) -> String {
        match self {
            Self::Code { code } => code.to_string(),
            Self::Signal { signal } => format!("signal {signal}"),
            Self::Timeout => "timeout".to_owned(),
            Self::DiskLimit => "disk limit".to_owned(),
        }
    }
}

/// Digest of one observation, recorded in the snapshot the action produced so
/// that replay can check it. Timestamps and durations are not part of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservationDigest {
    /// Blob of the captured stdout (after truncation).
    pub stdout: ObjectId,
    /// Blob of the captured stderr (after truncation).
    pub stderr: ObjectId,
    /// How the action ended.
    pub exit: ExitStatus,
    /// The id of the tree of the filesystem delta (the layer sealed for this step).
    pub fs_delta: ObjectId,
}

/// A snapshot: an ordered layer chain plus session state and metadata.
/// Stored as a [`ObjectKind::Manifest`] object; the snapshot id is that object's id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Layers, bottom (oldest) first. Each is the id of its tree object and
    /// names a sealed directory `layers/<id>` in the store.
    pub layers: Vec<LayerId>,
    /// Session state to restore in a sandbox opened from this snapshot.
    pub session: SessionState,
    /// The snapshot this one was taken from, if any.
    pub parent: Option<SnapshotId>,
    /// The action(s) that led from `parent` to this snapshot.
    pub action: Option<Action>,
    /// Digests of the observations of those actions, in order.
    pub observations: Vec<ObservationDigest>,
    /// Seconds since the Unix epoch when the snapshot was taken.
    pub created_at: u64,
    /// Background processes that were still running when the last action
    /// ended and were killed (command lines).
    pub killed_background: Vec<String>,
    /// The image whose root filesystem is the system view of sandboxes on
    /// this snapshot (`None`: the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ObjectId>,
    /// Where the workspace also appears in sandboxes on this snapshot (an
    /// absolute path: the image's `WorkingDir`, when the snapshot was imported
    /// to use it), and so the actions' starting directory; `None`: only at
    /// `/workspace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
}
