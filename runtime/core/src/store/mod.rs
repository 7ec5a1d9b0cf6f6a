//! The content-addressed store: typed objects named by their blake3 hash,
//! sealed layer directories, the snapshot index, tags, locking, `fsck` and
//! `gc`. Several processes may share one store.
//!
//! (~670 lines: `Store`'s object and layer methods are one impl over the
//! store's directory layout; refs, fsck, gc and fsio are their own files.)
//!
//! ```text
//! root/config.json         {"format":1,"mode":"root"|"rootless","uid_base":N}
//! root/objects/ab/<62 hex> typed objects (see [`object`])
//! root/layers/<64 hex>/    sealed layer directories (written by the layer module)
//! root/squash/<64 hex>/    cached flattened layer chain of a snapshot
//! root/snapshots/<64 hex>  empty index files: a snapshot is listed iff its file exists
//! root/refs/tags/<name>    the 64-hex snapshot id and "\n"
//! root/refs/images/<name>  the 64-hex image id and "\n" (see [`ImageRecord`])
//! root/tmp/                temp files and staging dirs "<pid>.<counter>.<random>"
//! root/run/                live sandbox directories "<pid>-<n>"
//! root/lock                flock file: gc exclusive, snapshot creation shared
//! ```
//!
//! Every write is temp file → fsync → rename → fsync directory, so killing
//! the process at any instant leaves a store that `fsck` reports clean.
//! Every read is verified against the object's hash.

mod batch;
mod fsck;
mod fsio;
mod gc;
mod images;
pub mod object;
mod refs;
#[cfg(feature = "remote")]
pub(crate) use refs::validate_tag_name;
pub mod wasm_refs;

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use batch::{Batch, StagedObjects};
pub(crate) use batch::{same_filesystem, syncfs};
pub use fsck::{FsckProblem, FsckReport};
pub use fsio::{FAILPOINTS, atomic_write, failpoint, fsync_dir, hash_file};
use fsio::{WriteFailpoints, atomic_write_with};
pub use gc::GcReport;
pub use images::{ImageConfig, ImageRecord, ImageSource, validate_image_name};
pub use object::*;

/// Largest object `get` will load (1 GiB).
pub const MAX_OBJECT_SIZE: u64 = 1 << 30;

/// Store format version written to `config.json`.
const STORE_FORMAT: u32 = 1;

/// Errors of store operations; each names the path or id involved.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A filesystem operation failed.
    #[error("cannot {op} {}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The store was created by the other kind of user (root vs rootless).
    #[error(
        "store at {store} was written in {} mode ({}); this process runs {} — use a different --home or run as the same kind of user",
        other_mode(.wanted), mode_detail(other_mode(.wanted)), process_detail(.wanted)
    )]
    ModeMismatch {
        /// The store's root directory.
        store: String,
        /// The mode this process asked for (`"root"` or `"rootless"`); the
        /// store was written in the other one.
        wanted: String,
    },
    /// A root-mode store was created with another host uid base.
    #[error(
        "store at {} maps sandbox uids from host uid {store_base}, but this process asked for {wanted_base} — use the same uid base or a different --home",
        path.display()
    )]
    UidBaseMismatch {
        /// The store's root directory.
        path: PathBuf,
        /// The base recorded in `config.json`.
        store_base: u32,
        /// The base this process asked for.
        wanted_base: u32,
    },
    /// `config.json` is unreadable or of an unknown format.
    #[error("bad store config {}: {reason}", path.display())]
    BadConfig {
        /// Path of `config.json`.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// No object with this id is stored.
    #[error("object {id} not found in the store")]
    NotFound {
        /// The missing object.
        id: ObjectId,
    },
    /// A stored object failed verification; its bytes are never returned.
    #[error("object {id} is corrupt ({}): {reason}", path.display())]
    Corrupt {
        /// The object asked for.
        id: ObjectId,
        /// Its file.
        path: PathBuf,
        /// What failed to verify.
        reason: String,
    },
    /// An object is of another kind than asked for (e.g. a WebAssembly
    /// session snapshot where a native snapshot is needed).
    #[error("{}", wrong_kind(.id, *.actual, *.expected))]
    WrongKind {
        /// The object.
        id: ObjectId,
        /// What it is.
        actual: ObjectKind,
        /// What was asked for.
        expected: ObjectKind,
    },
    /// An object is larger than [`MAX_OBJECT_SIZE`].
    #[error("{what} is {size} bytes, over the store's object limit of {limit} bytes")]
    ObjectTooLarge {
        /// The object or file.
        what: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A tree violates the [`Tree`] invariants.
    #[error("invalid tree entry {entry:?}: {reason}")]
    InvalidTree {
        /// The offending path.
        entry: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// Serializing or parsing an object's JSON failed.
    #[error("cannot encode {what} as JSON")]
    Json {
        /// What was being encoded.
        what: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// A path that had to be a regular file is something else (or a symlink).
    #[error("{} is not a regular file (symlinks are never followed)", path.display())]
    NotRegularFile {
        /// The path.
        path: PathBuf,
    },
    /// A directory to delete has another filesystem mounted inside it.
    #[error("refusing to delete {}: another filesystem is mounted there", path.display())]
    MountInside {
        /// The mount point.
        path: PathBuf,
    },
    /// `resolve` found nothing.
    #[error("no snapshot, id prefix or tag named {0:?}")]
    UnknownSnapshot(String),
    /// `resolve` got a prefix shared by several snapshots.
    #[error("id prefix {prefix:?} is ambiguous: it matches {}", candidates.iter().map(ObjectId::short).collect::<Vec<_>>().join(", "))]
    AmbiguousPrefix {
        /// The prefix given.
        prefix: String,
        /// Every listed snapshot it matches.
        candidates: Vec<SnapshotId>,
    },
    /// A tag name breaks the naming rules.
    #[error(
        "invalid tag name {0:?}: use 1-100 characters of A-Z a-z 0-9 . _ -, not starting with '.'"
    )]
    InvalidTagName(String),
    /// No tag with this name exists.
    #[error("no tag named {0:?}")]
    UnknownTag(String),
    /// An image name that is not valid.
    #[error(
        "invalid image name {0:?}: use 1-128 characters of A-Z a-z 0-9 . _ - :, not starting with '.'"
    )]
    InvalidImageName(String),
    /// No image with this name, id or prefix.
    #[error("no image named {0:?} (see `arbor image ls`)")]
    UnknownImage(String),
    /// A tag file does not hold a snapshot id.
    #[error("tag file {} is corrupt: {reason}", path.display())]
    BadTag {
        /// The tag file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The snapshot is not listed (removed, or never completed).
    #[error("snapshot {0} is not listed (removed, collected, or never completed)")]
    NotListed(SnapshotId),
    /// gc refused to run because it could not tell what is reachable.
    #[error("gc refused to run: {0} (run `arbor fsck`, fix or delete the tag, then retry)")]
    GcRefused(String),
}

/// Result of store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// `map_err` adapter building [`StoreError::Io`].
pub(crate) fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { op, path, source }
}

fn other_mode(wanted: &str) -> &'static str {
    if wanted == "root" { "rootless" } else { "root" }
}

fn mode_detail(mode: &str) -> &'static str {
    if mode == "root" {
        "layers carry host uids from the store's uid base and trusted.* xattrs"
    } else {
        "layers carry the caller's uid and user.* xattrs"
    }
}

fn process_detail(wanted: &str) -> &'static str {
    if wanted == "root" {
        "as real root"
    } else {
        "as an unprivileged user"
    }
}

/// Which kind of user owns the store's layers; fixed when the store is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OwnerMode {
    /// Run as real root: sandbox uid 0 maps to host uid `uid_base`.
    Root {
        /// First host uid of the sandbox's uid range.
        uid_base: u32,
    },
    /// Run by an unprivileged user, who is root inside the sandbox.
    Rootless,
}

impl OwnerMode {
    /// `Root { uid_base }` when the effective uid is 0, else `Rootless`.
    pub fn for_current_user(uid_base: u32) -> Self {
        if rustix::process::geteuid().is_root() {
            Self::Root { uid_base }
        } else {
            Self::Rootless
        }
    }

    /// `"root"` or `"rootless"`, as written in `config.json`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Root { .. } => "root",
            Self::Rootless => "rootless",
        }
    }
}

/// On-disk `config.json`.
#[derive(Serialize, Deserialize)]
struct Config {
    format: u32,
    mode: String,
    uid_base: u32,
}

/// A handle on one store directory. Cheap to clone; `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The store's root directory (absolute if given absolute).
    root: PathBuf,
    /// The mode recorded in `config.json`; equal to the one asked for.
    mode: OwnerMode,
}

/// An flock on `root/lock`, released when dropped.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
}

impl Store {
    /// Open the store at `root`, creating the layout and `config.json` if
    /// missing. Fails with [`StoreError::ModeMismatch`] if the store was
    /// written in the other [`OwnerMode`].
    pub fn open(root: &Path, mode: OwnerMode) -> Result<Store> {
        for sub in [
            "objects",
            "layers",
            "squash",
            "snapshots",
            "refs/tags",
            "refs/images",
            "refs/image-builds",
            "tmp",
            "run",
        ] {
            let p = root.join(sub);
            fs::create_dir_all(&p).map_err(io_err("create store directory", &p))?;
        }
        let store = Store {
            inner: Arc::new(Inner {
                root: root.to_path_buf(),
                mode,
            }),
        };
        let cfg_path = root.join("config.json");
        if !cfg_path.exists() {
            let _lock = store.lock_exclusive()?;
            if !cfg_path.exists() {
                let (name, uid_base) = match mode {
                    OwnerMode::Root { uid_base } => ("root", uid_base),
                    OwnerMode::Rootless => ("rootless", rustix::process::getuid().as_raw()),
                };
                let cfg = Config {
                    format: STORE_FORMAT,
                    mode: name.into(),
                    uid_base,
                };
                let bytes = serde_json::to_vec(&cfg).map_err(|source| StoreError::Json {
                    what: "store config",
                    source,
                })?;
                atomic_write(&store.tmp_dir(), &cfg_path, &bytes)?;
                fsync_dir(root)?;
                return Ok(store);
            }
        }
        let bytes = fs::read(&cfg_path).map_err(io_err("read", &cfg_path))?;
        let bad = |reason: String| StoreError::BadConfig {
            path: cfg_path.clone(),
            reason,
        };
        let cfg: Config = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        if cfg.format != STORE_FORMAT {
            return Err(bad(format!(
                "format {} (this arbor understands {STORE_FORMAT})",
                cfg.format
            )));
        }
        if cfg.mode != "root" && cfg.mode != "rootless" {
            return Err(bad(format!("unknown mode {:?}", cfg.mode)));
        }
        if cfg.mode != mode.name() {
            return Err(StoreError::ModeMismatch {
                store: root.display().to_string(),
                wanted: mode.name().into(),
            });
        }
        if let OwnerMode::Root { uid_base } = mode
            && uid_base != cfg.uid_base
        {
            return Err(StoreError::UidBaseMismatch {
                path: root.to_path_buf(),
                store_base: cfg.uid_base,
                wanted_base: uid_base,
            });
        }
        Ok(store)
    }

    /// The mode the store was written in.
    pub fn mode(&self) -> OwnerMode {
        self.inner.mode
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// `layers/<id>`: the sealed directory of a layer.
    pub fn layer_dir(&self, id: &LayerId) -> PathBuf {
        self.inner.root.join("layers").join(id.to_hex())
    }

    /// `squash/<id>`: the cached flattened layer chain of a snapshot.
    pub fn squash_dir(&self, id: &SnapshotId) -> PathBuf {
        self.inner.root.join("squash").join(id.to_hex())
    }

    /// `run/`: where live sandboxes keep their directories (`<pid>-<n>`).
    pub fn run_dir(&self) -> PathBuf {
        self.inner.root.join("run")
    }

    /// `tmp/`: temp files and staging directories, same filesystem as the store.
    pub fn tmp_dir(&self) -> PathBuf {
        self.inner.root.join("tmp")
    }

    /// A fresh path `tmp/<pid>.<counter>.<random><suffix>` (nothing is created).
    pub fn new_temp_path(&self, suffix: &str) -> PathBuf {
        self.tmp_dir().join(fsio::temp_name(suffix))
    }

    /// Path of an object's file: `objects/ab/<62 hex>`.
    pub fn object_path(&self, id: &ObjectId) -> PathBuf {
        let hex = id.to_hex();
        self.inner
            .root
            .join("objects")
            .join(&hex[..2])
            .join(&hex[2..])
    }

    /// Whether an object file exists (not verified).
    pub fn has_object(&self, id: &ObjectId) -> bool {
        fs::symlink_metadata(self.object_path(id)).is_ok()
    }

    fn lock(&self, op: rustix::fs::FlockOperation) -> Result<StoreLock> {
        let path = self.inner.root.join("lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)
            .map_err(io_err("open lock file", &path))?;
        loop {
            match rustix::fs::flock(&file, op) {
                Ok(()) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(io_err("lock", &path)(e.into())),
            }
        }
        Ok(StoreLock { _file: file })
    }

    /// Block until a shared lock is held: gc cannot run until it is dropped.
    /// Take it while creating a snapshot so its fresh objects survive.
    pub fn lock_shared(&self) -> Result<StoreLock> {
        self.lock(rustix::fs::FlockOperation::LockShared)
    }

    /// Block until the exclusive lock is held (gc).
    pub fn lock_exclusive(&self) -> Result<StoreLock> {
        self.lock(rustix::fs::FlockOperation::LockExclusive)
    }

    /// Store an object (idempotent) and return its id, the blake3 of header ‖ payload.
    pub fn put(&self, kind: ObjectKind, payload: &[u8]) -> Result<ObjectId> {
        let header = object_file_header(kind, payload.len())?;
        let mut bytes = Vec::with_capacity(OBJECT_HEADER_LEN + payload.len());
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(payload);
        let id = ObjectId::hash(&bytes);
        debug_assert_eq!(id, object_id(kind, payload));
        let path = self.object_path(&id);
        // An existing file of the right size was written by an earlier
        // complete put (renames are atomic); one of the wrong size is
        // corrupt and gets replaced.
        if fs::symlink_metadata(&path).is_ok_and(|m| m.len() == bytes.len() as u64) {
            return Ok(id);
        }
        let fan = path.parent().unwrap_or(&self.inner.root);
        if !fan.exists() {
            fs::create_dir_all(fan).map_err(io_err("create object directory", fan))?;
            fsync_dir(&self.inner.root.join("objects"))?;
        }
        let fps = WriteFailpoints {
            written: "object.tmp-written",
            fsynced: Some("object.fsynced"),
            renamed: "object.renamed",
        };
        atomic_write_with(&self.tmp_dir(), &path, &bytes, Some(fps))?;
        Ok(id)
    }

    /// Load and verify an object, returning its payload. Errors with
    /// [`StoreError::NotFound`] if absent and [`StoreError::Corrupt`] if
    /// its header, kind, length or hash is wrong; never returns unverified data.
    pub fn get(&self, id: &ObjectId, expected: ObjectKind) -> Result<Vec<u8>> {
        let path = self.object_path(id);
        let mut bytes = read_capped(&path, id)?;
        check_object(id, &path, &bytes, Some(expected))?;
        bytes.drain(..OBJECT_HEADER_LEN);
        Ok(bytes)
    }

    /// The whole verified file of object `id`, header and payload, and its
    /// kind: what a bundle carries.
    pub fn get_raw(&self, id: &ObjectId) -> Result<(ObjectKind, Vec<u8>)> {
        let path = self.object_path(id);
        let bytes = read_capped(&path, id)?;
        let kind = check_object(id, &path, &bytes, None)?;
        Ok((kind, bytes))
    }

    /// Check that `bytes` is a whole object file (header and payload) whose
    /// id is `id`, and return its kind; `origin` names where the bytes came
    /// from in errors.
    pub fn check_raw(id: &ObjectId, bytes: &[u8], origin: &Path) -> Result<ObjectKind> {
        check_object(id, origin, bytes, None)
    }

    /// Store raw bytes as a blob.
    pub fn put_blob(&self, bytes: &[u8]) -> Result<ObjectId> {
        self.put(ObjectKind::Blob, bytes)
    }

    /// Load a verified blob.
    pub fn get_blob(&self, id: &ObjectId) -> Result<Vec<u8>> {
        self.get(id, ObjectKind::Blob)
    }

    /// Validate and store a tree; its id is the layer id.
    pub fn put_tree(&self, tree: &Tree) -> Result<LayerId> {
        self.put(ObjectKind::Tree, &tree_bytes(tree)?)
    }

    /// Load a verified, valid tree.
    pub fn get_tree(&self, id: &LayerId) -> Result<Tree> {
        let bytes = self.get(id, ObjectKind::Tree)?;
        let tree: Tree = self.decode(id, &bytes)?;
        validate_tree(&tree).map_err(|e| self.corrupt(id, e.to_string()))?;
        Ok(tree)
    }

    /// Store a manifest; its id is the snapshot id (the snapshot is not listed).
    pub fn put_manifest(&self, manifest: &Manifest) -> Result<SnapshotId> {
        let bytes = serde_json::to_vec(manifest).map_err(|source| StoreError::Json {
            what: "manifest",
            source,
        })?;
        self.put(ObjectKind::Manifest, &bytes)
    }

    /// Load a verified manifest.
    pub fn get_manifest(&self, id: &SnapshotId) -> Result<Manifest> {
        let bytes = self.get(id, ObjectKind::Manifest)?;
        self.decode(id, &bytes)
    }

    fn decode<T: serde::de::DeserializeOwned>(&self, id: &ObjectId, bytes: &[u8]) -> Result<T> {
        serde_json::from_slice(bytes).map_err(|e| self.corrupt(id, format!("bad JSON: {e}")))
    }

    fn corrupt(&self, id: &ObjectId, reason: String) -> StoreError {
        StoreError::Corrupt {
            id: *id,
            path: self.object_path(id),
            reason,
        }
    }
}

/// Read an object file, refusing symlinks and files over [`MAX_OBJECT_SIZE`].
fn read_capped(path: &Path, id: &ObjectId) -> Result<Vec<u8>> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => StoreError::NotFound { id: *id },
            _ => io_err("open object", path)(e),
        })?;
    let size = f.metadata().map_err(io_err("stat object", path))?.len();
    let cap = MAX_OBJECT_SIZE + OBJECT_HEADER_LEN as u64;
    if size > cap {
        return Err(StoreError::ObjectTooLarge {
            what: path.display().to_string(),
            size,
            limit: MAX_OBJECT_SIZE,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    f.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err("read object", path))?;
    Ok(bytes)
}

/// Verify header and hash of a whole stored object; returns its kind.
fn check_object(
    id: &ObjectId,
    path: &Path,
    bytes: &[u8],
    expected: Option<ObjectKind>,
) -> Result<ObjectKind> {
    let corrupt = |reason: String| StoreError::Corrupt {
        id: *id,
        path: path.to_path_buf(),
        reason,
    };
    if bytes.len() < OBJECT_HEADER_LEN {
        return Err(corrupt(format!(
            "truncated header ({} bytes, need {OBJECT_HEADER_LEN})",
            bytes.len()
        )));
    }
    if bytes[..4] != OBJECT_MAGIC {
        return Err(corrupt("bad magic".into()));
    }
    if bytes[4] != OBJECT_VERSION {
        return Err(corrupt(format!("unknown format version {}", bytes[4])));
    }
    let Some(kind) = ObjectKind::from_byte(bytes[5]) else {
        return Err(corrupt(format!("unknown kind byte {}", bytes[5])));
    };
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[6..OBJECT_HEADER_LEN]);
    let len = u64::from_le_bytes(len);
    let actual = (bytes.len() - OBJECT_HEADER_LEN) as u64;
    if len != actual {
        return Err(corrupt(format!(
            "header says {len} payload bytes, file has {actual}"
        )));
    }
    let got = ObjectId::hash(bytes);
    if got != *id {
        return Err(corrupt(format!("content hashes to {got}")));
    }
    if let Some(want) = expected
        && want != kind
    {
        return Err(StoreError::WrongKind {
            id: *id,
            actual: kind,
            expected: want,
        });
    }
    Ok(kind)
}

fn wrong_kind(id: &ObjectId, actual: ObjectKind, expected: ObjectKind) -> String {
    match (actual, expected) {
        (ObjectKind::WasmManifest, ObjectKind::Manifest) => format!(
            "snapshot {id} is a WebAssembly session snapshot; this needs a native (filesystem) snapshot"
        ),
        (ObjectKind::Manifest, ObjectKind::WasmManifest) => format!(
            "snapshot {id} is a native (filesystem) snapshot; this needs a WebAssembly session snapshot"
        ),
        _ => format!("object {id} is a {actual:?}, not a {expected:?}"),
    }
}

/// The id [`Store::put_tree`] gives `tree` (its layer id), without storing it.
///
/// # Errors
/// An invalid tree.
pub fn tree_id(tree: &Tree) -> Result<LayerId> {
    Ok(object_id(ObjectKind::Tree, &tree_bytes(tree)?))
}

/// The payload of a validated tree object.
pub(crate) fn tree_bytes(tree: &Tree) -> Result<Vec<u8>> {
    validate_tree(tree)?;
    serde_json::to_vec(tree).map_err(|source| StoreError::Json {
        what: "tree",
        source,
    })
}

/// Check the [`Tree`] invariants: paths relative, `/`-separated, without
/// empty, `.` or `..` components, sorted and unique.
pub fn validate_tree(tree: &Tree) -> Result<()> {
    let bad = |e: &TreeEntry, reason| {
        Err(StoreError::InvalidTree {
            entry: e.path.clone(),
            reason,
        })
    };
    let mut prev: Option<&str> = None;
    for e in &tree.entries {
        if e.path.starts_with('/') {
            return bad(e, "path is absolute");
        }
        if e.path.contains('\0') {
            return bad(e, "path contains a NUL byte");
        }
        if e.path
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return bad(e, "path has an empty, '.' or '..' component");
        }
        if prev.is_some_and(|p| p >= e.path.as_str()) {
            return bad(e, "entries are not sorted by path or a path repeats");
        }
        prev = Some(&e.path);
    }
    Ok(())
}

/// [`object::object_header`] for a new object, refused over the size limit.
///
/// # Errors
/// [`StoreError::ObjectTooLarge`] over [`MAX_OBJECT_SIZE`].
pub(crate) fn object_file_header(kind: ObjectKind, len: usize) -> Result<[u8; OBJECT_HEADER_LEN]> {
    let len = len as u64;
    if len > MAX_OBJECT_SIZE {
        return Err(StoreError::ObjectTooLarge {
            what: format!("new {kind:?} object"),
            size: len,
            limit: MAX_OBJECT_SIZE,
        });
    }
    Ok(object::object_header(kind, len))
}

#[cfg(test)]
pub(crate) mod tests;
