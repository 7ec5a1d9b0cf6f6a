//! `push`: upload the closure's objects and file contents the remote lacks,
//! then the records, then the tags.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use futures::StreamExt as _;
use object_store::{ObjectStoreExt as _, WriteMultipart};
use serde::Serialize;

use super::{FORMAT, IN_FLIGHT, Record, RecordLayer, Remote, RemoteError, Result};
use crate::bundle::{BundleError, BundleRoot, Closure};
use crate::layer::{self, LayerError, LayerFiles};
use crate::store::Store;
use crate::store::object::{EntryKind, LayerId, ObjectId};

/// File contents larger than this go up in parts.
const MULTIPART: u64 = 16 << 20;
/// The size of each part.
const PART: usize = 8 << 20;

/// What [`Remote::push`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PushReport {
    /// The remote.
    pub remote: String,
    /// The snapshots pushed, with their tags.
    pub roots: Vec<BundleRoot>,
    /// Snapshots in their closure.
    pub snapshots: u64,
    /// Objects uploaded.
    pub objects_sent: u64,
    /// Objects the remote had.
    pub objects_present: u64,
    /// File contents uploaded.
    pub contents_sent: u64,
    /// File contents the remote had.
    pub contents_present: u64,
    /// Bytes uploaded (objects and contents).
    pub bytes_sent: u64,
}

/// One key a push may upload.
enum Upload {
    Object(ObjectId),
    Content {
        layer: LayerId,
        path: String,
        hash: ObjectId,
        size: u64,
    },
}

pub(super) fn push(
    remote: &Remote,
    store: &Store,
    roots: &[BundleRoot],
    progress: &mut dyn FnMut(u64),
) -> Result<PushReport> {
    let ids: Vec<_> = roots.iter().map(|r| r.id).collect();
    let closure = Closure::of(store, &ids)?;
    let mut rep = PushReport {
        remote: remote.spec.name.clone(),
        roots: roots.to_vec(),
        snapshots: closure.snapshots.len() as u64,
        ..PushReport::default()
    };

    // What the closure needs on the remote, each key once, with its size.
    let mut wanted: Vec<(String, u64, Upload)> = Vec::new();
    let mut dirs: HashSet<LayerId> = HashSet::new();
    let mut seen_object = HashSet::new();
    for id in closure
        .layers
        .iter()
        .chain(&closure.objects)
        .chain(&closure.snapshots)
        .filter(|id| seen_object.insert(**id))
    {
        let path = store.object_path(id);
        let size = std::fs::symlink_metadata(&path)
            .map_err(|e| RemoteError::Local(format!("stat {}: {e}", path.display())))?
            .len();
        wanted.push((
            format!("objects/{}", id.to_hex()),
            size,
            Upload::Object(*id),
        ));
    }
    let mut seen_content = HashSet::new();
    for l in &closure.layers {
        if !store.layer_dir(l).is_dir() {
            continue;
        }
        dirs.insert(*l);
        let tree = store.get_tree(l)?;
        if let Some(e) = tree.entries.iter().find(|e| !layer::carriable(e)) {
            return Err(BundleError::Unsupported {
                layer: *l,
                path: e.path.clone(),
            }
            .into());
        }
        for e in tree.entries {
            if let EntryKind::File { size, hash } = e.kind
                && seen_content.insert(hash)
            {
                wanted.push((
                    format!("contents/{}", hash.to_hex()),
                    size,
                    Upload::Content {
                        layer: *l,
                        path: e.path,
                        hash,
                        size,
                    },
                ));
            }
        }
    }

    remote.rt.block_on(async {
        remote.check_marker(true).await?;
        let mut have: HashMap<String, u64> = HashMap::new();
        for dir in ["objects", "contents"] {
            for (name, size) in remote.list_dir(dir).await? {
                have.insert(format!("{dir}/{name}"), size);
            }
        }
        let mut todo = Vec::new();
        for (key, size, up) in wanted {
            let present = have.get(&key) == Some(&size);
            match (&up, present) {
                (Upload::Object(_), true) => rep.objects_present += 1,
                (Upload::Content { .. }, true) => rep.contents_present += 1,
                (_, false) => todo.push((key, size, up)),
            }
        }
        let mut uploads = futures::stream::iter(todo)
            .map(|(key, size, up)| async move {
                let is_object = matches!(up, Upload::Object(_));
                upload(remote, store, &key, up).await?;
                Ok::<_, RemoteError>((is_object, size))
            })
            .buffer_unordered(IN_FLIGHT);
        while let Some(done) = uploads.next().await {
            let (is_object, size) = done?;
            if is_object {
                rep.objects_sent += 1;
            } else {
                rep.contents_sent += 1;
            }
            rep.bytes_sent += size;
            progress(size);
        }
        drop(uploads);
        // Everything the roots name is there: their records, then their tags.
        for root in roots {
            let one = Closure::of(store, &[root.id])?;
            let record = Record {
                format: FORMAT,
                snapshot: root.id,
                snapshots: one.snapshots,
                layers: one
                    .layers
                    .iter()
                    .map(|id| RecordLayer {
                        id: *id,
                        dir: dirs.contains(id),
                    })
                    .collect(),
                objects: one.objects,
            };
            let body = serde_json::to_vec(&record).unwrap_or_default();
            remote
                .put(&format!("snapshots/{}.json", root.id.to_hex()), body)
                .await?;
        }
        for root in roots {
            if let Some(name) = &root.tag {
                remote
                    .put(&format!("tags/{name}"), format!("{}\n", root.id.to_hex()))
                    .await?;
            }
        }
        Ok(rep)
    })
}

/// Upload one key, verifying what is read from the store on the way.
async fn upload(remote: &Remote, store: &Store, key: &str, up: Upload) -> Result<()> {
    match up {
        Upload::Object(id) => {
            let (_, bytes) = store.get_raw(&id)?;
            remote.put(key, bytes).await
        }
        Upload::Content {
            layer,
            path,
            hash,
            size,
        } => {
            let mut files = LayerFiles::open(store, &layer).map_err(BundleError::from)?;
            let (mut file, host) = files.file(&path, size).map_err(BundleError::from)?;
            let mut hasher = blake3::Hasher::new();
            let mut read = |buf: &mut [u8]| -> Result<()> {
                file.read_exact(buf).map_err(|source| {
                    BundleError::from(LayerError::ReadSource {
                        path: host.clone(),
                        source,
                    })
                })?;
                hasher.update(buf);
                Ok(())
            };
            let mismatch = |got: ObjectId| {
                RemoteError::from(BundleError::from(LayerError::ContentMismatch {
                    path: host.clone(),
                    what: format!("blake3 is {got}, its tree says {hash}"),
                }))
            };
            if size <= MULTIPART {
                let mut buf = vec![0u8; usize::try_from(size).unwrap_or(0)];
                read(&mut buf)?;
                let got = ObjectId::from(hasher.finalize());
                if got != hash {
                    return Err(mismatch(got));
                }
                return remote.put(key, buf).await;
            }
            let rel = key.to_owned();
            let started = remote
                .s3
                .put_multipart(&remote.key(&rel))
                .await
                .map_err(remote.request("upload", &rel))?;
            let mut w = WriteMultipart::new_with_chunk_size(started, PART);
            let mut left = size;
            let mut buf = vec![0u8; PART];
            while left > 0 {
                let n = usize::try_from(left.min(PART as u64)).unwrap_or(PART);
                if let Err(e) = read(&mut buf[..n]) {
                    let _ = w.abort().await;
                    return Err(e);
                }
                if let Err(e) = w.wait_for_capacity(4).await {
                    return Err(remote.request("upload", &rel)(e));
                }
                w.write(&buf[..n]);
                left -= n as u64;
            }
            let got = ObjectId::from(hasher.finalize());
            if got != hash {
                let _ = w.abort().await;
                return Err(mismatch(got));
            }
            w.finish()
                .await
                .map(|_| ())
                .map_err(remote.request("upload", &rel))
        }
    }
}
