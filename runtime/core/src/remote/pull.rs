//! `pull`: read the records, then stream what the store lacks, as a
//! bundle, into the bundle importer, which verifies and installs it.

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt as _, TryStreamExt as _};
use object_store::ObjectStoreExt as _;
use serde::Serialize;

use super::{FORMAT, IN_FLIGHT, Record, Remote, RemoteError, Result, parse_tag};
use crate::bundle::{
    self, BundleError, BundleRoot, CONTENT, Header, ImportReport, LAYER, OBJECT, Out,
};
use crate::store::object::{EntryKind, LayerId, ObjectId, ObjectKind, SnapshotId, Tree};
use crate::store::{OBJECT_HEADER_LEN, Store, validate_tree};

/// File contents up to this size are fetched whole; larger ones streamed.
const WHOLE: u64 = 8 << 20;

/// What [`Remote::pull`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PullReport {
    /// The remote.
    pub remote: String,
    /// Bytes fetched from the remote (objects and contents).
    pub bytes_fetched: u64,
    /// The import of what was fetched.
    #[serde(flatten)]
    pub import: ImportReport,
}

/// One step of the synthesised bundle.
enum Step {
    /// An object frame with bytes at hand (read here, or fetched early).
    Have(ObjectId, Bytes),
    /// An object frame, fetched from the remote.
    Object(ObjectId),
    /// A content frame of `size` bytes, fetched from the remote.
    Content(ObjectId, u64),
    /// A layer frame.
    Layer(LayerId),
}

/// A step, its remote bytes fetched (or their stream opened).
enum Ready {
    Object(ObjectId, Bytes),
    Content(
        ObjectId,
        u64,
        BoxStream<'static, object_store::Result<Bytes>>,
    ),
    Layer(LayerId),
}

pub(super) fn pull(
    remote: &Remote,
    store: &Store,
    what: &[String],
    progress: &mut (dyn FnMut(u64) + Send),
) -> Result<PullReport> {
    let fetched = Arc::new(AtomicU64::new(0));
    let (roots, steps) = remote.rt.block_on(plan(remote, store, what, &fetched))?;
    let header = Header {
        roots: roots.clone(),
        since: Vec::new(),
        base_layers: Vec::new(),
    };

    // The producer runs the fetches on the remote's runtime and writes the
    // bundle into a bounded channel; the importer reads it on this thread.
    let (tx, rx) = sync_channel::<io::Result<Vec<u8>>>(8);
    let failure: Arc<Mutex<Option<RemoteError>>> = Arc::default();
    let handle = remote.rt.handle().clone();
    let progress = Mutex::new(progress);
    let report = std::thread::scope(|scope| {
        let failure2 = Arc::clone(&failure);
        let fetched2 = Arc::clone(&fetched);
        let progress = &progress;
        scope.spawn(move || {
            let mut out = Out::new(ChanWriter {
                tx: tx.clone(),
                buf: Vec::with_capacity(1 << 20),
            });
            let r = handle.block_on(produce(
                remote, &mut out, &header, steps, &fetched2, progress,
            ));
            if let Err(e) = r {
                // The importer sees the stream fail; the cause is kept for
                // the error this pull returns.
                let msg = e.to_string();
                if !matches!(&e, RemoteError::Bundle(b) if matches!(**b, BundleError::Write(_))) {
                    *failure2.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                }
                let _ = tx.send(Err(io::Error::other(msg)));
            }
        });
        bundle::import(
            store,
            ChanReader {
                rx,
                cur: Vec::new(),
                at: 0,
            },
        )
    });
    if let Some(e) = failure.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    let import = report.map_err(|source| RemoteError::Verify {
        remote: remote.spec.name.clone(),
        source: Box::new(source),
    })?;
    Ok(PullReport {
        remote: remote.spec.name.clone(),
        bytes_fetched: fetched.load(Ordering::Relaxed),
        import,
    })
}

/// Resolve what was asked for, read the records, fetch the trees of layers
/// this store lacks, and order the bundle's steps as an export would.
async fn plan(
    remote: &Remote,
    store: &Store,
    what: &[String],
    fetched: &AtomicU64,
) -> Result<(Vec<BundleRoot>, Vec<Step>)> {
    remote.check_marker(false).await?;
    let not_on = |w: String| RemoteError::NotOnRemote {
        remote: remote.spec.name.clone(),
        what: w,
    };
    let mut roots = Vec::new();
    let mut records = Vec::new();
    for w in what {
        let (id, tag) = if let Ok(id) = w.parse::<SnapshotId>() {
            (id, None)
        } else {
            crate::store::validate_tag_name(w).map_err(|_| {
                RemoteError::Config(format!(
                    "{w:?} is neither a full snapshot id (64 hex digits) nor a tag name"
                ))
            })?;
            let bytes = remote
                .get_opt(&format!("tags/{w}"))
                .await?
                .ok_or_else(|| not_on(format!("tag {w}")))?;
            let id = parse_tag(&bytes).ok_or_else(|| {
                remote.damaged(&format!("tags/{w}"), "it holds no snapshot id".into())
            })?;
            (id, Some(w.clone()))
        };
        let key = format!("snapshots/{}.json", id.to_hex());
        let bytes = remote
            .get_opt(&key)
            .await?
            .ok_or_else(|| not_on(format!("snapshot {id}")))?;
        let rec: Record = serde_json::from_slice(&bytes)
            .map_err(|e| remote.damaged(&key, format!("not a snapshot record: {e}")))?;
        if rec.format != FORMAT || rec.snapshot != id || rec.snapshots.last() != Some(&id) {
            return Err(remote.damaged(&key, format!("it is not the record of snapshot {id}")));
        }
        roots.push(BundleRoot { id, tag });
        records.push(rec);
    }

    // The union of the closures, each thing once, in record order.
    let mut snapshots = Vec::new();
    let mut layers: Vec<(LayerId, bool)> = Vec::new();
    let mut objects = Vec::new();
    let (mut s_seen, mut l_seen, mut o_seen) = (HashSet::new(), HashSet::new(), HashSet::new());
    for rec in records {
        snapshots.extend(rec.snapshots.into_iter().filter(|s| s_seen.insert(*s)));
        layers.extend(
            rec.layers
                .into_iter()
                .filter(|l| l_seen.insert(l.id))
                .map(|l| (l.id, l.dir)),
        );
        objects.extend(rec.objects.into_iter().filter(|o| o_seen.insert(*o)));
    }

    // Layers this store has, directory and all, go first as layer frames
    // alone: the importer then finds their files here, and so do we.
    let mut steps = Vec::new();
    let mut local: HashSet<ObjectId> = HashSet::new();
    let present = |l: &LayerId| store.has_object(l) && store.layer_dir(l).is_dir();
    for (l, dir) in &layers {
        if *dir && present(l) {
            for e in store.get_tree(l)?.entries {
                if let EntryKind::File { hash, .. } = e.kind {
                    local.insert(hash);
                }
            }
            steps.push(Step::Layer(*l));
        }
    }
    // The trees of the other layers, fetched now: they say which contents
    // to fetch.
    let missing_trees: Vec<LayerId> = layers
        .iter()
        .filter(|(l, _)| !store.has_object(l))
        .map(|(l, _)| *l)
        .collect();
    let mut trees: std::collections::HashMap<LayerId, (Bytes, Tree)> =
        futures::stream::iter(missing_trees)
            .map(|l| async move {
                let key = format!("objects/{}", l.to_hex());
                let bytes = remote.get_opt(&key).await?.ok_or_else(|| {
                    remote.damaged(&key, "it is missing, and a pushed snapshot names it".into())
                })?;
                fetched.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                let tree = decode_tree(&l, &bytes).map_err(|what| remote.damaged(&key, what))?;
                Ok::<_, RemoteError>((l, (bytes, tree)))
            })
            .buffer_unordered(IN_FLIGHT)
            .try_collect()
            .await?;
    let mut sent: HashSet<ObjectId> = HashSet::new();
    for (l, dir) in &layers {
        if *dir && present(l) {
            continue;
        }
        let tree = match trees.remove(l) {
            Some((bytes, tree)) => {
                steps.push(Step::Have(*l, bytes));
                tree
            }
            None => store.get_tree(l)?,
        };
        if !*dir {
            continue;
        }
        for e in tree.entries {
            if let EntryKind::File { size, hash } = e.kind
                && !local.contains(&hash)
                && sent.insert(hash)
            {
                steps.push(Step::Content(hash, size));
            }
        }
        steps.push(Step::Layer(*l));
    }
    for o in &objects {
        // A layer's tree may be named as an object too (an image's layer).
        if !store.has_object(o) && !l_seen.contains(o) {
            steps.push(Step::Object(*o));
        }
    }
    // Manifests of snapshots not listed here, oldest first.
    for s in &snapshots {
        if store.is_listed(s) {
            continue;
        }
        if store.has_object(s) {
            let (_, bytes) = store.get_raw(s)?;
            steps.push(Step::Have(*s, Bytes::from(bytes)));
        } else {
            steps.push(Step::Object(*s));
        }
    }
    Ok((roots, steps))
}

fn decode_tree(id: &LayerId, bytes: &[u8]) -> std::result::Result<Tree, String> {
    let kind =
        Store::check_raw(id, bytes, std::path::Path::new("<remote>")).map_err(|e| e.to_string())?;
    if kind != ObjectKind::Tree {
        return Err(format!("it is a {kind:?} object, not a layer tree"));
    }
    let tree: Tree = serde_json::from_slice(&bytes[OBJECT_HEADER_LEN..])
        .map_err(|e| format!("the tree is not valid JSON: {e}"))?;
    validate_tree(&tree).map_err(|e| e.to_string())?;
    Ok(tree)
}

/// Fetch the steps, [`IN_FLIGHT`] at a time in order, and write the bundle.
async fn produce<W: Write>(
    remote: &Remote,
    out: &mut Out<W>,
    header: &Header,
    steps: Vec<Step>,
    fetched: &AtomicU64,
    progress: &Mutex<&mut (dyn FnMut(u64) + Send)>,
) -> Result<()> {
    let tick = |n: u64| {
        fetched.fetch_add(n, Ordering::Relaxed);
        (progress.lock().unwrap_or_else(|p| p.into_inner()))(n);
    };
    out.start(header)?;
    let (mut objects, mut contents, mut layers) = (0u64, 0u64, 0u64);
    let mut ready = futures::stream::iter(steps)
        .map(|step| async move {
            Ok::<_, RemoteError>(match step {
                Step::Have(id, b) => Ready::Object(id, b),
                Step::Layer(l) => Ready::Layer(l),
                Step::Object(id) => {
                    let key = format!("objects/{}", id.to_hex());
                    let b = remote.get_opt(&key).await?.ok_or_else(|| {
                        remote.damaged(&key, "it is missing, and a pushed snapshot names it".into())
                    })?;
                    Ready::Object(id, b)
                }
                Step::Content(hash, size) => {
                    let rel = format!("contents/{}", hash.to_hex());
                    let key = remote.key(&rel);
                    let got = remote.s3.get(&key).await.map_err(|e| match e {
                        object_store::Error::NotFound { .. } => remote
                            .damaged(&rel, "it is missing, and a pushed layer names it".into()),
                        e => remote.request("read", &rel)(e),
                    })?;
                    let stream = if size <= WHOLE {
                        let b = got.bytes().await.map_err(remote.request("read", &rel))?;
                        futures::stream::once(async move { Ok(b) }).boxed()
                    } else {
                        got.into_stream()
                    };
                    Ready::Content(hash, size, stream)
                }
            })
        })
        .buffered(IN_FLIGHT);
    while let Some(r) = ready.next().await {
        match r? {
            Ready::Object(id, b) => {
                tick(b.len() as u64);
                out.frame(OBJECT, &[&id.0, &b])?;
                objects += 1;
            }
            Ready::Layer(l) => {
                out.frame(LAYER, &[&l.0])?;
                layers += 1;
            }
            Ready::Content(hash, size, mut stream) => {
                let rel = format!("contents/{}", hash.to_hex());
                out.frame_head(CONTENT, 32 + size)?;
                out.put(&hash.0)?;
                let mut got = 0u64;
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk.map_err(remote.request("read", &rel))?;
                    got += chunk.len() as u64;
                    if got > size {
                        break;
                    }
                    out.put(&chunk)?;
                    tick(chunk.len() as u64);
                }
                if got != size {
                    return Err(remote.damaged(
                        &rel,
                        format!("it holds {got} bytes or more, its tree says {size}"),
                    ));
                }
                contents += 1;
            }
        }
    }
    out.finish(objects, contents, layers)?;
    Ok(())
}

impl Remote {
    fn damaged(&self, rel: &str, what: String) -> RemoteError {
        RemoteError::Damaged {
            remote: self.spec.name.clone(),
            key: self.key(rel).to_string(),
            what,
        }
    }
}

/// The writing end of the bundle: 1 MiB chunks into the channel.
struct ChanWriter {
    tx: SyncSender<io::Result<Vec<u8>>>,
    buf: Vec<u8>,
}

impl Write for ChanWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= 1 << 20 {
            self.flush()?;
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(1 << 20));
        self.tx
            .send(Ok(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the importer stopped"))
    }
}

/// The reading end: the importer's input. The stream ends when the producer
/// is done (and drops its sender).
struct ChanReader {
    rx: Receiver<io::Result<Vec<u8>>>,
    cur: Vec<u8>,
    at: usize,
}

impl Read for ChanReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.cur.len() {
            match self.rx.recv() {
                Ok(Ok(chunk)) => {
                    self.cur = chunk;
                    self.at = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len() - self.at);
        buf[..n].copy_from_slice(&self.cur[..n + self.at][self.at..]);
        self.at += n;
        Ok(n)
    }
}
