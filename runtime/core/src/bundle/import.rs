//! Importing a bundle: read and verify every frame into a staging
//! directory, check the end frame, then install what the store lacks.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{
    BundleError, BundleRoot, CONTENT, END, HEADER, Header, LAYER, MAGIC, MAX_JSON_FRAME, OBJECT,
    PREAMBLE, Result, Trailer, VERSION,
};
use crate::layer::{self, LayerFiles, OwnerMap};
use crate::store::object::{EntryKind, LayerId, ObjectId, ObjectKind, SnapshotId, Tree};
use crate::store::{MAX_OBJECT_SIZE, OBJECT_HEADER_LEN, Store, fsync_dir};

/// What [`import`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ImportReport {
    /// The bundle's roots.
    pub roots: Vec<BundleRoot>,
    /// The snapshots it was written `--since` (empty: a full bundle).
    pub since: Vec<SnapshotId>,
    /// Objects stored.
    pub objects_new: u64,
    /// Objects the store already had (verified, not rewritten).
    pub objects_present: u64,
    /// Layer directories rebuilt and installed.
    pub layers_new: u64,
    /// Layers the store already had.
    pub layers_present: u64,
    /// File contents received.
    pub contents: u64,
    /// Snapshots listed by this import (the rest were listed already).
    pub snapshots_listed: u64,
    /// Tags set (names that were free or already pointed at the root).
    pub tags_set: Vec<String>,
    /// Tags left alone because they name another snapshot here.
    pub tags_conflicting: Vec<String>,
    /// Bytes of the bundle read.
    pub bytes: u64,
}

/// Wraps the input: counts and hashes every byte.
struct In<R: Read> {
    inner: R,
    hasher: blake3::Hasher,
    offset: u64,
}

impl<R: Read> In<R> {
    fn read_exact(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        let mut done = 0;
        while done < buf.len() {
            match self.inner.read(&mut buf[done..]) {
                Ok(0) => {
                    return Err(BundleError::Truncated {
                        offset: self.offset,
                        what: what.to_owned(),
                    });
                }
                Ok(n) => {
                    self.hasher.update(&buf[done..done + n]);
                    self.offset += n as u64;
                    done += n;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(BundleError::Read(e)),
            }
        }
        Ok(())
    }

    fn read_vec(&mut self, len: u64, what: &str) -> Result<Vec<u8>> {
        let mut v = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
        self.read_exact(&mut v, what)?;
        Ok(v)
    }

    /// Whether the input has ended (nothing more to read).
    fn at_end(&mut self) -> Result<bool> {
        let mut b = [0u8; 1];
        loop {
            match self.inner.read(&mut b) {
                Ok(0) => return Ok(true),
                Ok(_) => return Ok(false),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(BundleError::Read(e)),
            }
        }
    }
}

/// The import's staging directory under the store's `tmp/`, removed when
/// dropped (what was installed from it was moved out first).
struct Staging {
    root: PathBuf,
}

impl Staging {
    fn new(store: &Store) -> Result<Self> {
        let root = store.new_temp_path("bundle");
        for sub in ["", "objects", "content", "layers"] {
            let p = root.join(sub);
            fs::create_dir_all(&p).map_err(stage_err("create", &p))?;
        }
        Ok(Self { root })
    }

    fn object(&self, id: &ObjectId) -> PathBuf {
        self.root.join("objects").join(id.to_hex())
    }

    fn content(&self, hash: &ObjectId) -> PathBuf {
        self.root.join("content").join(hash.to_hex())
    }

    fn layer(&self, id: &LayerId) -> PathBuf {
        self.root.join("layers").join(id.to_hex())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ignored = layer::remove_tree(&self.root);
    }
}

fn stage_err(op: &'static str, path: &Path) -> impl Fn(std::io::Error) -> BundleError + use<> {
    let path = path.to_path_buf();
    move |source| BundleError::Stage {
        op,
        path: path.clone(),
        source,
    }
}

/// Where a layer's file contents can be found in the receiving store.
#[derive(Default)]
struct LocalContent {
    /// Content hash → (layer, path, size).
    index: HashMap<ObjectId, (LayerId, String, u64)>,
    open: HashMap<LayerId, LayerFiles>,
}

impl LocalContent {
    fn add_layer(&mut self, id: &LayerId, tree: &Tree) {
        for e in &tree.entries {
            if let EntryKind::File { size, hash } = &e.kind {
                self.index
                    .entry(*hash)
                    .or_insert_with(|| (*id, e.path.clone(), *size));
            }
        }
    }

    fn find(&mut self, store: &Store, hash: &ObjectId) -> Option<Result<(File, PathBuf)>> {
        let (layer, path, size) = self.index.get(hash)?.clone();
        let files = match self.open.entry(layer) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => match LayerFiles::open(store, &layer) {
                Ok(f) => v.insert(f),
                Err(e) => return Some(Err(e.into())),
            },
        };
        Some(files.file(&path, size).map_err(Into::into))
    }
}

/// What the reading pass staged.
#[derive(Default)]
struct Staged {
    /// Objects staged (not in the store), in bundle order, with their kinds.
    objects: Vec<(ObjectId, ObjectKind)>,
    /// Layers rebuilt into staging, in bundle order.
    layers: Vec<LayerId>,
    /// Snapshot manifests in the bundle (staged or present).
    snapshots: Vec<SnapshotId>,
}

/// Read the bundle `input` into `store`. Nothing is installed until the
/// whole bundle has been read and checked; objects and layers the store has
/// already are verified in the bundle and skipped. Named tags of the roots
/// are set where the name is free.
pub fn import(store: &Store, input: impl Read) -> Result<ImportReport> {
    let owners = OwnerMap::for_store(store.mode());
    let mut input = In {
        inner: input,
        hasher: blake3::Hasher::new(),
        offset: 0,
    };
    let mut pre = [0u8; PREAMBLE];
    match input.read_exact(&mut pre, "the preamble") {
        Err(BundleError::Truncated { offset, .. }) => {
            return Err(BundleError::NotABundle(format!(
                "it is {offset} bytes long, shorter than a bundle's preamble"
            )));
        }
        other => other?,
    }
    if pre[..8] != MAGIC {
        return Err(BundleError::NotABundle(
            "it does not start with the bundle magic `ARBORBDL`".into(),
        ));
    }
    if pre[8] != VERSION {
        return Err(BundleError::Version { found: pre[8] });
    }
    let staging = Staging::new(store)?;
    let mut rep = ImportReport::default();
    let mut staged = Staged::default();
    // Trees of layers this import saw (staged or present), by id.
    let mut trees: HashMap<LayerId, Tree> = HashMap::new();
    let mut local = LocalContent::default();
    let mut received: HashSet<ObjectId> = HashSet::new();
    let mut seen_objects: HashSet<ObjectId> = HashSet::new();
    let mut counts = (0u64, 0u64, 0u64);
    let mut header_seen = false;

    loop {
        let before = input.hasher.clone();
        let at = input.offset;
        let mut head = [0u8; 9];
        input.read_exact(&mut head, "the next frame (the end frame is missing)")?;
        let kind = head[0];
        let mut len8 = [0u8; 8];
        len8.copy_from_slice(&head[1..]);
        let len = u64::from_le_bytes(len8);
        let tampered = |what: String| BundleError::Tampered { offset: at, what };
        if !header_seen && kind != HEADER {
            return Err(tampered(format!(
                "the first frame is {:?}, not the header",
                kind as char
            )));
        }
        match kind {
            HEADER => {
                if header_seen {
                    return Err(tampered("a second header frame".into()));
                }
                if len > MAX_JSON_FRAME {
                    return Err(tampered(format!("a header of {len} bytes")));
                }
                let bytes = input.read_vec(len, "the header")?;
                let h: Header = serde_json::from_slice(&bytes)
                    .map_err(|e| tampered(format!("the header is not valid: {e}")))?;
                check_base(store, &h, &mut trees, &mut local)?;
                rep.roots = h.roots;
                rep.since = h.since;
                header_seen = true;
            }
            OBJECT => {
                let limit = MAX_OBJECT_SIZE + (OBJECT_HEADER_LEN + 32) as u64;
                if !(32 + OBJECT_HEADER_LEN as u64..=limit).contains(&len) {
                    return Err(tampered(format!("an object frame of {len} bytes")));
                }
                let mut id = [0u8; 32];
                input.read_exact(&mut id, "an object frame")?;
                let id = ObjectId(id);
                let bytes = input.read_vec(len - 32, "an object frame")?;
                let kind = Store::check_raw(&id, &bytes, Path::new("<bundle>"))
                    .map_err(|e| tampered(format!("object {id}: {e}")))?;
                if !seen_objects.insert(id) {
                    continue;
                }
                counts.0 += 1;
                if kind == ObjectKind::Tree {
                    let tree: Tree = serde_json::from_slice(&bytes[OBJECT_HEADER_LEN..])
                        .map_err(|e| tampered(format!("tree {id} is not valid JSON: {e}")))?;
                    crate::store::validate_tree(&tree)
                        .map_err(|e| tampered(format!("tree {id}: {e}")))?;
                    trees.insert(id, tree);
                }
                if matches!(kind, ObjectKind::Manifest | ObjectKind::WasmManifest) {
                    staged.snapshots.push(id);
                }
                if store.has_object(&id) {
                    rep.objects_present += 1;
                } else {
                    let path = staging.object(&id);
                    fs::write(&path, &bytes).map_err(stage_err("write", &path))?;
                    staged.objects.push((id, kind));
                }
            }
            CONTENT => {
                if len < 32 {
                    return Err(tampered(format!("a content frame of {len} bytes")));
                }
                let mut hash = [0u8; 32];
                input.read_exact(&mut hash, "a content frame")?;
                let hash = ObjectId(hash);
                let path = staging.content(&hash);
                let mut file = File::create(&path).map_err(stage_err("create", &path))?;
                let mut hasher = blake3::Hasher::new();
                let mut left = len - 32;
                let mut buf = vec![0u8; 1 << 20];
                while left > 0 {
                    let n = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
                    input.read_exact(&mut buf[..n], "a file's content")?;
                    hasher.update(&buf[..n]);
                    file.write_all(&buf[..n])
                        .map_err(stage_err("write", &path))?;
                    left -= n as u64;
                }
                let got = ObjectId::from(hasher.finalize());
                if got != hash {
                    return Err(tampered(format!(
                        "a file's content hashes to {got}, its frame says {hash}"
                    )));
                }
                received.insert(hash);
                counts.1 += 1;
                rep.contents += 1;
            }
            LAYER => {
                if len != 32 {
                    return Err(tampered(format!("a layer frame of {len} bytes")));
                }
                let mut id = [0u8; 32];
                input.read_exact(&mut id, "a layer frame")?;
                let id = ObjectId(id);
                counts.2 += 1;
                let tree = match trees.get(&id) {
                    Some(t) => t.clone(),
                    None if store.has_object(&id) => {
                        let t = store.get_tree(&id)?;
                        trees.insert(id, t.clone());
                        t
                    }
                    None => {
                        return Err(tampered(format!(
                            "layer {id} comes before its tree, which this store does not have"
                        )));
                    }
                };
                if store.layer_dir(&id).is_dir() {
                    rep.layers_present += 1;
                    local.add_layer(&id, &tree);
                    continue;
                }
                let dest = staging.layer(&id);
                let mut missing: Option<(String, ObjectId)> = None;
                let mut source = |path: &str, hash: &ObjectId, _size: u64| {
                    let staged_path = staging.content(hash);
                    if received.contains(hash) {
                        return File::open(&staged_path)
                            .map(|f| (f, staged_path.clone()))
                            .map_err(|source| layer::LayerError::ReadSource {
                                path: staged_path,
                                source,
                            });
                    }
                    match local.find(store, hash) {
                        Some(Ok(found)) => Ok(found),
                        Some(Err(BundleError::Layer(e))) => Err(e),
                        Some(Err(e)) => Err(layer::LayerError::Corrupt {
                            path: path.to_owned(),
                            what: e.to_string(),
                        }),
                        None => {
                            missing = Some((path.to_owned(), *hash));
                            Err(layer::LayerError::ContentMismatch {
                                path: PathBuf::from(path),
                                what: format!("content {hash} is not at hand"),
                            })
                        }
                    }
                };
                let rebuilt = layer::rebuild_layer(&id, &tree, &dest, &owners, &mut source);
                if let Err(e) = rebuilt {
                    return Err(match missing {
                        Some((path, hash)) => BundleError::MissingContent {
                            layer: id,
                            path,
                            hash,
                        },
                        None => match e {
                            layer::LayerError::ContentMismatch { .. }
                            | layer::LayerError::Corrupt { .. } => {
                                tampered(format!("layer {id}: {e}"))
                            }
                            other => BundleError::Layer(other),
                        },
                    });
                }
                local.add_layer(&id, &tree);
                staged.layers.push(id);
            }
            END => {
                if len > MAX_JSON_FRAME {
                    return Err(tampered(format!("an end frame of {len} bytes")));
                }
                let bytes = input.read_vec(len, "the end frame")?;
                let t: Trailer = serde_json::from_slice(&bytes)
                    .map_err(|e| tampered(format!("the end frame is not valid: {e}")))?;
                let digest = before.finalize().to_hex().to_string();
                if t.digest != digest {
                    return Err(tampered(format!(
                        "the bundle hashes to {digest}, its end frame says {}",
                        t.digest
                    )));
                }
                if (t.objects, t.contents, t.layers) != counts {
                    return Err(tampered(format!(
                        "the end frame counts {} objects, {} contents and {} layers; the bundle holds {}, {} and {}",
                        t.objects, t.contents, t.layers, counts.0, counts.1, counts.2
                    )));
                }
                if !input.at_end()? {
                    return Err(BundleError::Tampered {
                        offset: input.offset,
                        what: "bytes follow the end frame".into(),
                    });
                }
                break;
            }
            other => {
                return Err(tampered(format!("unknown frame kind {other:#04x}")));
            }
        }
    }
    rep.bytes = input.offset;
    for root in &rep.roots {
        if !staged.snapshots.contains(&root.id) && !store.has_object(&root.id) {
            return Err(BundleError::Tampered {
                offset: input.offset,
                what: format!("the bundle lacks the manifest of its root {}", root.id),
            });
        }
    }
    install(store, &staging, &staged, &mut rep)?;
    Ok(rep)
}

/// An incremental bundle's bases must be here, with their layers.
fn check_base(
    store: &Store,
    h: &Header,
    trees: &mut HashMap<LayerId, Tree>,
    local: &mut LocalContent,
) -> Result<()> {
    let since = || {
        h.since
            .iter()
            .map(|s| s.short())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for s in &h.since {
        if !store.has_object(s) {
            return Err(BundleError::MissingBase {
                since: since(),
                missing: format!("snapshot {s}"),
            });
        }
    }
    for l in &h.base_layers {
        let tree = match store.get_tree(l) {
            Ok(t) => t,
            Err(_) => {
                return Err(BundleError::MissingBase {
                    since: since(),
                    missing: format!("layer {l}"),
                });
            }
        };
        if store.layer_dir(l).is_dir() {
            local.add_layer(l, &tree);
        }
        trees.insert(*l, tree);
    }
    Ok(())
}

/// Install what was staged, in the seal protocol's order, under the shared
/// lock (so gc cannot collect it half-installed).
fn install(
    store: &Store,
    staging: &Staging,
    staged: &Staged,
    rep: &mut ImportReport,
) -> Result<()> {
    let _lock = store.lock_shared()?;
    crate::store::syncfs(&staging.root)?;
    let manifest = |k: ObjectKind| matches!(k, ObjectKind::Manifest | ObjectKind::WasmManifest);
    let mut fans = HashSet::new();
    let mut put = |id: &ObjectId| -> Result<()> {
        let dest = store.object_path(id);
        let fan = dest.parent().map(Path::to_path_buf).unwrap_or_default();
        if fans.insert(fan.clone()) && !fan.is_dir() {
            fs::create_dir_all(&fan).map_err(stage_err("create", &fan))?;
            fsync_dir(&store.root().join("objects"))?;
        }
        if crate::seal::install_dir(&staging.object(id), &dest)? {
            rep.objects_new += 1;
        } else {
            rep.objects_present += 1;
        }
        Ok(())
    };
    // 1. objects other than manifests.
    for (id, _) in staged.objects.iter().filter(|(_, k)| !manifest(*k)) {
        put(id)?;
    }
    // 2. layer directories.
    if !staged.layers.is_empty() {
        for id in &staged.layers {
            if crate::seal::install_dir(&staging.layer(id), &store.layer_dir(id))? {
                rep.layers_new += 1;
            } else {
                rep.layers_present += 1;
            }
        }
        fsync_dir(&store.root().join("layers"))?;
    }
    // 3. manifests, made durable with their fan directories.
    for (id, _) in staged.objects.iter().filter(|(_, k)| manifest(*k)) {
        put(id)?;
    }
    for fan in &fans {
        fsync_dir(fan)?;
    }
    // 4. before anything is listed: every snapshot's closure is here. A
    // bundle's digest is not a signature, so one that leaves out what a
    // manifest names (rewritten with matching counts) stops here, its
    // manifests unlisted garbage for gc.
    check_complete(store, &staged.snapshots)?;
    // 5. the index, then the tags.
    for id in &staged.snapshots {
        if !store.is_listed(id) {
            store.list_snapshot(id)?;
            rep.snapshots_listed += 1;
        }
    }
    for root in &rep.roots {
        let Some(name) = &root.tag else { continue };
        match store.get_tag(name)? {
            Some(have) if have == root.id => rep.tags_set.push(name.clone()),
            Some(_) => rep.tags_conflicting.push(name.clone()),
            None => {
                store.set_tag(name, &root.id)?;
                rep.tags_set.push(name.clone());
            }
        }
    }
    Ok(())
}

/// Every snapshot in `snapshots` has its parent listed here (or among
/// `snapshots`), and every object and layer directory it names.
fn check_complete(store: &Store, snapshots: &[SnapshotId]) -> Result<()> {
    let incomplete = |snap: &SnapshotId, what: String| BundleError::Incomplete {
        snapshot: *snap,
        what,
    };
    for id in snapshots {
        let refs = store.snapshot_refs(id)?;
        if let Some(p) = refs.parent
            && !snapshots.contains(&p)
            && !store.is_listed(&p)
        {
            return Err(incomplete(id, format!("its parent snapshot {p}")));
        }
        for o in refs
            .objects
            .iter()
            .chain(&refs.layers)
            .chain(&refs.delta_layers)
        {
            if !store.has_object(o) {
                return Err(incomplete(id, format!("object {o}")));
            }
        }
        for l in &refs.layers {
            if !store.layer_dir(l).is_dir() {
                return Err(incomplete(id, format!("the directory of layer {l}")));
            }
        }
    }
    Ok(())
}
