//! Snapshot bundles: the closure of one or more snapshots (manifests, layer
//! trees and directories, action and output blobs, session pages, the
//! images they sit on) as one stream that another store imports.
//!
//! ```text
//! bundle  = MAGIC(8) VERSION(1) 0(7) header frame* end
//! frame   = kind(1) length(8, little endian) payload(length)
//! header  = 'H' JSON Header          roots, tags, the --since bases and their layers
//! object  = 'O' id(32) object file   header and payload, exactly as stored
//! content = 'C' blake3(32) bytes     one regular file's content, sent once per bundle
//! layer   = 'L' id(32)               rebuild layer `id` from its tree (an earlier
//!                                    object) and the contents sent so far
//! end     = 'E' JSON Trailer         counts and the blake3 of every byte before it
//! ```
//!
//! Everything is content addressed and verified on import: an object's id
//! is the hash of its bytes, a content's name the hash of its bytes, and a
//! rebuilt layer directory is compared with its tree. With `--since BASE`
//! the writer leaves out everything in BASE's closure (objects, layers and
//! file contents); the importing store must have BASE. Import stages into
//! the store's `tmp/` and installs only after the end frame checked out, in
//! the order the seal protocol uses (objects, layer directories, manifests,
//! then the index), so a truncated or tampered bundle leaves the receiving
//! store as it was and a crash mid-install leaves only garbage for `gc`.

mod import;

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use import::{ImportReport, import};

use crate::layer::{self, LayerError, LayerFiles};
use crate::store::object::{EntryKind, LayerId, ObjectId, SnapshotId};
use crate::store::{Store, StoreError};

/// The first 8 bytes of every bundle.
pub const MAGIC: [u8; 8] = *b"ARBORBDL";
/// The bundle format this build writes and reads.
pub const VERSION: u8 = 1;
/// Length of the fixed preamble (magic, version, reserved zeros).
pub(crate) const PREAMBLE: usize = 16;
/// Largest header or trailer frame.
const MAX_JSON_FRAME: u64 = 64 << 20;

/// Frame kinds.
pub(crate) const HEADER: u8 = b'H';
pub(crate) const OBJECT: u8 = b'O';
pub(crate) const CONTENT: u8 = b'C';
pub(crate) const LAYER: u8 = b'L';
pub(crate) const END: u8 = b'E';

/// Errors of bundle export and import; each names what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The input does not start like a bundle.
    #[error("not an Arbor bundle: {0}")]
    NotABundle(String),
    /// A bundle of another format version.
    #[error("bundle format version {found} is not supported (this build reads version {VERSION})")]
    Version {
        /// The version byte found.
        found: u8,
    },
    /// The stream ended before the end frame.
    #[error("the bundle is truncated: it ends at byte {offset}, inside or before {what}")]
    Truncated {
        /// Bytes read when it ended.
        offset: u64,
        /// What was being read.
        what: String,
    },
    /// A frame's bytes do not match what names them.
    #[error("the bundle is damaged or tampered with at byte {offset}: {what}")]
    Tampered {
        /// Offset of the frame.
        offset: u64,
        /// What does not match.
        what: String,
    },
    /// The bundle was written `--since` snapshots this store does not have.
    #[error(
        "the bundle is incremental (written --since {since}) and this store lacks {missing}: import a bundle of the base first"
    )]
    MissingBase {
        /// The base snapshots the bundle was written against.
        since: String,
        /// The first thing of theirs this store lacks.
        missing: String,
    },
    /// A snapshot arrived without something its manifest names.
    #[error("snapshot {snapshot} arrived without {what}, which it names: nothing was listed")]
    Incomplete {
        /// The snapshot.
        snapshot: SnapshotId,
        /// What it lacks.
        what: String,
    },
    /// A layer's file content is neither in the bundle nor in this store.
    #[error(
        "layer {layer}: the content of {path:?} ({hash}) is neither in the bundle nor in this store"
    )]
    MissingContent {
        /// The layer being rebuilt.
        layer: LayerId,
        /// The file.
        path: String,
        /// Its content hash.
        hash: ObjectId,
    },
    /// An entry no bundle carries (device nodes and sockets).
    #[error("layer {layer} holds {path:?}, a device node or socket, which a bundle does not carry")]
    Unsupported {
        /// The layer.
        layer: LayerId,
        /// The entry.
        path: String,
    },
    /// Writing the bundle failed.
    #[error("cannot write the bundle: {0}")]
    Write(#[source] std::io::Error),
    /// Reading the bundle failed (other than by ending early).
    #[error("cannot read the bundle: {0}")]
    Read(#[source] std::io::Error),
    /// A staging file of the import could not be written.
    #[error("cannot {op} {}: {source}", path.display())]
    Stage {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A store operation failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reading or rebuilding a layer failed.
    #[error(transparent)]
    Layer(#[from] LayerError),
}

/// Result of bundle operations.
pub type Result<T> = std::result::Result<T, BundleError>;

/// A snapshot a bundle is of, and the tag it was named by.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleRoot {
    /// The snapshot.
    pub id: SnapshotId,
    /// The tag it was exported by, set on import where the name is free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// The header frame.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Header {
    pub(crate) roots: Vec<BundleRoot>,
    /// The `--since` snapshots: the importer must have them.
    pub(crate) since: Vec<SnapshotId>,
    /// Their layers, whose files the bundle leaves out.
    pub(crate) base_layers: Vec<LayerId>,
}

/// The end frame.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Trailer {
    pub(crate) objects: u64,
    pub(crate) contents: u64,
    pub(crate) layers: u64,
    /// Hex blake3 of every byte of the bundle before the end frame.
    pub(crate) digest: String,
}

/// What [`export`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExportReport {
    /// The roots, as written in the header.
    pub roots: Vec<BundleRoot>,
    /// Snapshots in the closure (bases left out).
    pub snapshots: u64,
    /// Objects written.
    pub objects: u64,
    /// Layer directories written.
    pub layers: u64,
    /// File contents written (each once).
    pub contents: u64,
    /// Bytes of file content written.
    pub content_bytes: u64,
    /// Total bytes of the bundle.
    pub bytes: u64,
}

/// The closure of some snapshots, in the order a bundle sends it.
#[derive(Default)]
pub(crate) struct Closure {
    pub(crate) snapshots: Vec<SnapshotId>,
    /// Layers, bottom of each chain first, each once.
    pub(crate) layers: Vec<LayerId>,
    /// Every other object, each once.
    pub(crate) objects: Vec<ObjectId>,
}

impl Closure {
    /// Walk `roots` and their parent chains.
    pub(crate) fn of(store: &Store, roots: &[SnapshotId]) -> Result<Self> {
        let mut c = Closure::default();
        let mut seen_snap = HashSet::new();
        let mut seen_layer = HashSet::new();
        let mut seen_obj = HashSet::new();
        for root in roots {
            let mut chain = Vec::new();
            let mut cur = Some(*root);
            while let Some(id) = cur.take() {
                if !seen_snap.insert(id) {
                    break;
                }
                let refs = store.snapshot_refs(&id)?;
                chain.push((id, refs.layers, refs.delta_layers, refs.objects));
                cur = refs.parent;
            }
            // Oldest first, so an importer meets bases before what sits on them.
            for (id, layers, deltas, objects) in chain.into_iter().rev() {
                c.snapshots.push(id);
                for l in layers.into_iter().chain(deltas) {
                    if seen_layer.insert(l) {
                        c.layers.push(l);
                    }
                }
                for o in objects {
                    if seen_obj.insert(o) {
                        c.objects.push(o);
                    }
                }
            }
        }
        Ok(c)
    }
}

/// Wraps the output: counts and hashes every byte.
pub(crate) struct Out<W: Write> {
    pub(crate) inner: W,
    pub(crate) hasher: blake3::Hasher,
    pub(crate) bytes: u64,
}

impl<W: Write> Out<W> {
    pub(crate) fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: blake3::Hasher::new(),
            bytes: 0,
        }
    }

    /// The preamble and the header frame.
    pub(crate) fn start(&mut self, header: &Header) -> Result<()> {
        let mut preamble = [0u8; PREAMBLE];
        preamble[..8].copy_from_slice(&MAGIC);
        preamble[8] = VERSION;
        self.put(&preamble)?;
        self.frame(HEADER, &[&json(header)])
    }

    /// The end frame over everything written so far, then a flush.
    pub(crate) fn finish(&mut self, objects: u64, contents: u64, layers: u64) -> Result<()> {
        let trailer = Trailer {
            objects,
            contents,
            layers,
            digest: self.hasher.finalize().to_hex().to_string(),
        };
        self.frame(END, &[&json(&trailer)])?;
        self.inner.flush().map_err(BundleError::Write)
    }

    pub(crate) fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.inner.write_all(bytes).map_err(BundleError::Write)?;
        self.hasher.update(bytes);
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    pub(crate) fn frame_head(&mut self, kind: u8, len: u64) -> Result<()> {
        let mut head = [0u8; 9];
        head[0] = kind;
        head[1..].copy_from_slice(&len.to_le_bytes());
        self.put(&head)
    }

    pub(crate) fn frame(&mut self, kind: u8, parts: &[&[u8]]) -> Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.frame_head(kind, len as u64)?;
        for p in parts {
            self.put(p)?;
        }
        Ok(())
    }
}

/// Write a bundle of `roots` (and their parent chains) to `out`, leaving
/// out everything the closure of `since` holds. Every object and file is
/// verified as it is read; a damaged store fails the export (and the bundle
/// then lacks its end frame, so no importer takes it).
pub fn export(
    store: &Store,
    roots: &[BundleRoot],
    since: &[SnapshotId],
    out: impl Write,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportReport> {
    let ids: Vec<SnapshotId> = roots.iter().map(|r| r.id).collect();
    let all = Closure::of(store, &ids)?;
    let base = Closure::of(store, since)?;
    let base_snaps: HashSet<SnapshotId> = base.snapshots.iter().copied().collect();
    let base_layers: HashSet<LayerId> = base.layers.iter().copied().collect();
    let base_objects: HashSet<ObjectId> = base
        .objects
        .iter()
        .chain(&base.layers)
        .chain(&base.snapshots)
        .copied()
        .collect();
    // File contents the importer will find in the bases' layers.
    let mut sent_content: HashSet<ObjectId> = HashSet::new();
    for l in &base.layers {
        for e in store.get_tree(l)?.entries {
            if let EntryKind::File { hash, .. } = e.kind {
                sent_content.insert(hash);
            }
        }
    }

    let mut out = Out::new(out);
    out.start(&Header {
        roots: roots.to_vec(),
        since: since.to_vec(),
        base_layers: base.layers.clone(),
    })?;

    let mut rep = ExportReport {
        roots: roots.to_vec(),
        snapshots: all
            .snapshots
            .iter()
            .filter(|s| !base_snaps.contains(s))
            .count() as u64,
        ..ExportReport::default()
    };
    let mut sent_objects: HashSet<ObjectId> = HashSet::new();
    let mut send_object = |out: &mut Out<_>, id: &ObjectId, rep: &mut ExportReport| -> Result<()> {
        if base_objects.contains(id) || !sent_objects.insert(*id) {
            return Ok(());
        }
        let (_, bytes) = store.get_raw(id)?;
        out.frame(OBJECT, &[&id.0, &bytes])?;
        rep.objects += 1;
        Ok(())
    };

    let mut buf = vec![0u8; 1 << 20];
    for l in all.layers.iter().filter(|l| !base_layers.contains(l)) {
        send_object(&mut out, l, &mut rep)?;
        if !store.layer_dir(l).is_dir() {
            // A tree without a directory (never written as one): the
            // object is all there is.
            continue;
        }
        let tree = store.get_tree(l)?;
        if let Some(e) = tree.entries.iter().find(|e| !layer::carriable(e)) {
            return Err(BundleError::Unsupported {
                layer: *l,
                path: e.path.clone(),
            });
        }
        let mut files = LayerFiles::open(store, l)?;
        for e in &tree.entries {
            let EntryKind::File { size, hash } = &e.kind else {
                continue;
            };
            if !sent_content.insert(*hash) {
                continue;
            }
            let (mut file, path) = files.file(&e.path, *size)?;
            out.frame_head(CONTENT, 32 + size)?;
            out.put(&hash.0)?;
            let mut hasher = blake3::Hasher::new();
            let mut left = *size;
            while left > 0 {
                let want = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
                let n = std::io::Read::read(&mut file, &mut buf[..want]).map_err(|source| {
                    LayerError::ReadSource {
                        path: path.clone(),
                        source,
                    }
                })?;
                if n == 0 {
                    return Err(LayerError::ContentMismatch {
                        path,
                        what: format!("ends {left} bytes early"),
                    }
                    .into());
                }
                hasher.update(&buf[..n]);
                out.put(&buf[..n])?;
                left -= n as u64;
                progress(n as u64);
            }
            let got = ObjectId::from(hasher.finalize());
            if got != *hash {
                return Err(LayerError::ContentMismatch {
                    path,
                    what: format!("blake3 is {got}, tree says {hash}"),
                }
                .into());
            }
            rep.contents += 1;
            rep.content_bytes += size;
        }
        out.frame(LAYER, &[&l.0])?;
        rep.layers += 1;
    }
    // Blobs, pages, images (what snapshots reference is never a manifest),
    // then the manifests, oldest first, each after what it names.
    for o in all.objects.iter().chain(&all.snapshots) {
        send_object(&mut out, o, &mut rep)?;
    }
    out.finish(rep.objects, rep.contents, rep.layers)?;
    rep.bytes = out.bytes;
    Ok(rep)
}

pub(crate) fn json<T: Serialize>(v: &T) -> Vec<u8> {
    // Plain data types: serialisation cannot fail.
    serde_json::to_vec(v).unwrap_or_default()
}

#[cfg(test)]
mod tests;
