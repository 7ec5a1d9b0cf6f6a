//! `fsck`: re-verify everything the store holds — every object's hash, every
//! listed snapshot's manifest and layers, every file of every sealed layer
//! against its tree — and list garbage that gc would collect. Also the
//! reachability walk that gc shares.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fmt;
use std::fs::{self, Metadata, Permissions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

use super::fsio::owner_dead;
use super::refs::validate_tag_name;
use super::{
    Action, EntryKind, LayerId, Manifest, ObjectId, ObjectKind, Result, SnapshotId, Store,
    StoreError, TreeEntry, check_object, hash_file, io_err, read_capped,
};

/// One thing found wrong by [`Store::fsck`] or [`Store::verify_layer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsckProblem {
    /// The object, file or store path concerned, relative to the store root
    /// (e.g. `layers/<id>/src/main.py`).
    pub object_or_path: String,
    /// What is wrong with it.
    pub what: String,
}

impl fmt::Display for FsckProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.object_or_path, self.what)
    }
}

fn problem(at: impl Into<String>, what: impl Into<String>) -> FsckProblem {
    FsckProblem {
        object_or_path: at.into(),
        what: what.into(),
    }
}

/// The result of [`Store::fsck`].
#[derive(Clone, Debug, Default)]
pub struct FsckReport {
    /// Integrity problems; empty for a healthy store.
    pub problems: Vec<FsckProblem>,
    /// Object files re-hashed.
    pub objects_checked: usize,
    /// Sealed layers verified against their trees.
    pub layers_checked: usize,
    /// Layer entries (files, dirs, links, whiteouts) compared.
    pub files_checked: usize,
    /// Informational: what gc would remove (unreferenced objects and
    /// layers, stale temp entries and run dirs of dead processes).
    pub garbage: Vec<String>,
}

impl FsckReport {
    /// No problems were found (garbage does not count).
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// What a set of root snapshots keeps alive.
#[derive(Debug, Default)]
pub(crate) struct Reach {
    /// The roots and their parent chains (manifests that exist).
    pub snapshots: BTreeSet<SnapshotId>,
    /// Manifests, trees and blobs they reference.
    pub objects: BTreeSet<ObjectId>,
    /// Layer directories they reference.
    pub layers: BTreeSet<LayerId>,
}

fn action_blobs(a: &Action, out: &mut Vec<ObjectId>) {
    match a {
        Action::WriteFile { content, .. } => out.push(*content),
        Action::Sequence { actions } => actions.iter().for_each(|a| action_blobs(a, out)),
        Action::Exec { .. } | Action::DeleteFile { .. } | Action::Import { .. } => {}
    }
}

/// Objects other than layer trees that a manifest references (blobs of its
/// action, stdout/stderr blobs, fs_delta trees).
fn manifest_objects(m: &Manifest) -> Vec<ObjectId> {
    let mut out = Vec::new();
    if let Some(a) = &m.action {
        action_blobs(a, &mut out);
    }
    for o in &m.observations {
        out.extend([o.stdout, o.stderr, o.fs_delta]);
    }
    out
}

/// What one snapshot of either kind references directly.
#[derive(Debug)]
pub(crate) struct SnapshotRefs {
    /// Its parent.
    pub parent: Option<SnapshotId>,
    /// Its layer chain (tree objects and sealed directories).
    pub layers: Vec<LayerId>,
    /// Per-step delta layers of a native snapshot (kept, not verified by fsck).
    pub delta_layers: Vec<LayerId>,
    /// Other objects (blobs, fs_delta trees, pages, the guest module).
    pub objects: Vec<ObjectId>,
}

impl Store {
    /// What the snapshot `id` references: a native manifest's layers,
    /// action and output blobs and fs_delta layers, or a WebAssembly
    /// session's guest, pages, blobs and workspace layers.
    pub(crate) fn snapshot_refs(&self, id: &SnapshotId) -> Result<SnapshotRefs> {
        match self.object_kind(id)? {
            ObjectKind::WasmManifest => {
                let w = self.wasm_refs(id)?;
                Ok(SnapshotRefs {
                    parent: w.parent,
                    layers: w.layers,
                    delta_layers: Vec::new(),
                    objects: w.objects,
                })
            }
            _ => {
                let m = self.get_manifest(id)?;
                let mut objects = manifest_objects(&m);
                let mut layers = m.layers.clone();
                if let Some(image) = m.image {
                    layers.extend(self.get_image(&image)?.layers);
                    objects.push(image);
                }
                Ok(SnapshotRefs {
                    parent: m.parent,
                    layers,
                    delta_layers: m.observations.iter().map(|o| o.fs_delta).collect(),
                    objects,
                })
            }
        }
    }

    /// Walk `roots` and their parent chains. Strict (gc): a root whose
    /// manifest is missing or any corrupt manifest is an error, since what it
    /// references cannot be known. Lenient (fsck): such chains just stop.
    pub(crate) fn reach(
        &self,
        roots: impl IntoIterator<Item = SnapshotId>,
        strict: bool,
    ) -> Result<Reach> {
        let mut r = Reach::default();
        for root in roots {
            let mut cur = Some(root);
            while let Some(id) = cur.take() {
                if !r.snapshots.insert(id) {
                    break;
                }
                let refs = match self.snapshot_refs(&id) {
                    Ok(refs) => refs,
                    Err(StoreError::NotFound { .. }) if !strict || id != root => {
                        r.snapshots.remove(&id);
                        break;
                    }
                    Err(StoreError::Corrupt { .. }) if !strict => break,
                    Err(e) if strict => {
                        return Err(StoreError::GcRefused(format!(
                            "record of snapshot {id} (reachable from {root}) is unusable: {e}"
                        )));
                    }
                    Err(e) => return Err(e),
                };
                r.objects.insert(id);
                r.objects.extend(refs.layers.iter().copied());
                r.objects.extend(refs.objects);
                r.layers.extend(refs.layers);
                r.layers.extend(refs.delta_layers);
                cur = refs.parent;
            }
        }
        Ok(r)
    }

    /// Add what the named images keep alive (their records and layers) to
    /// `r`. Strict (gc): an unusable record is an error; lenient (fsck):
    /// it is skipped (fsck reports it).
    pub(crate) fn reach_images(&self, r: &mut Reach, strict: bool) -> Result<()> {
        for (name, id) in self.image_names()? {
            match self.get_image(&id) {
                Ok(img) => {
                    r.objects.insert(id);
                    r.objects.extend(img.layers.iter().copied());
                    r.layers.extend(img.layers);
                }
                Err(e) if strict => {
                    return Err(StoreError::GcRefused(format!(
                        "record of image {name} ({id}) is unusable: {e}"
                    )));
                }
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// Verify one sealed layer: its tree object, and every entry of
    /// `layers/<id>` (kind, mode bits, size, content hash, symlink target,
    /// opaque marker) against the tree, without following symlinks.
    /// Ownership is not compared. Returns the problems found (empty: intact).
    pub fn verify_layer(&self, id: &LayerId) -> Result<Vec<FsckProblem>> {
        Ok(self.verify_layer_counted(id)?.0)
    }

    fn verify_layer_counted(&self, id: &LayerId) -> Result<(Vec<FsckProblem>, usize)> {
        let base = format!("layers/{}", id.to_hex());
        let tree = match self.get_tree(id) {
            Ok(t) => t,
            Err(e @ (StoreError::NotFound { .. } | StoreError::Corrupt { .. })) => {
                return Ok((vec![problem(&base, format!("layer tree unusable: {e}"))], 0));
            }
            Err(e) => return Err(e),
        };
        let dir = self.layer_dir(id);
        match fs::symlink_metadata(&dir) {
            Ok(md) if md.is_dir() => {}
            Ok(_) => return Ok((vec![problem(&base, "not a directory")], 0)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((vec![problem(&base, "layer directory missing")], 0));
            }
            Err(e) => return Err(io_err("stat", &dir)(e)),
        }
        let mut w = LayerWalk {
            entries: &tree.entries,
            seen: vec![false; tree.entries.len()],
            base: &base,
            problems: Vec::new(),
            checked: 0,
            root: rustix::process::geteuid().is_root(),
        };
        w.walk(&dir, "")?;
        for (e, seen) in tree.entries.iter().zip(&w.seen) {
            if !seen {
                w.problems.push(problem(
                    format!("{base}/{}", e.path),
                    "listed in the layer's tree but missing from its directory",
                ));
            }
        }
        Ok((w.problems, w.checked))
    }

    /// Verify the whole store. Holds a shared lock so gc cannot run meanwhile.
    pub fn fsck(&self) -> Result<FsckReport> {
        let _lock = self.lock_shared()?;
        let mut r = FsckReport::default();
        let mut present = BTreeSet::new();
        let objects = self.root().join("objects");
        for (fan, fan_path) in sorted_entries(&objects)? {
            if !fan_path.is_dir() || fan.len() != 2 {
                r.problems
                    .push(problem(format!("objects/{fan}"), "unexpected entry"));
                continue;
            }
            for (name, path) in sorted_entries(&fan_path)? {
                let rel = format!("objects/{fan}/{name}");
                let Ok(id) = format!("{fan}{name}").parse::<ObjectId>() else {
                    r.problems.push(problem(rel, "not an object file name"));
                    continue;
                };
                r.objects_checked += 1;
                match read_capped(&path, &id).and_then(|b| check_object(&id, &path, &b, None)) {
                    Ok(_) => {
                        present.insert(id);
                    }
                    Err(StoreError::Corrupt { reason, .. }) => {
                        r.problems.push(problem(rel, reason))
                    }
                    Err(e) => r.problems.push(problem(rel, e.to_string())),
                }
            }
        }

        let listed = self.snapshots()?;
        let mut layers_done = BTreeSet::new();
        for id in &listed {
            let at = format!("snapshots/{}", id.to_hex());
            let refs = match self.snapshot_refs(id) {
                Ok(refs) => refs,
                Err(e) => {
                    r.problems.push(problem(
                        at,
                        format!("listed, but its record is unusable: {e}"),
                    ));
                    continue;
                }
            };
            for layer in &refs.layers {
                if layers_done.insert(*layer) {
                    let (problems, files) = self.verify_layer_counted(layer)?;
                    r.problems.extend(problems);
                    r.files_checked += files;
                    r.layers_checked += 1;
                }
            }
            for obj in refs.objects {
                if !self.has_object(&obj) {
                    r.problems
                        .push(problem(&at, format!("references missing object {obj}")));
                }
            }
        }

        let mut roots = listed.clone();
        let tags = self.root().join("refs/tags");
        for (name, _) in sorted_entries(&tags)? {
            let at = format!("refs/tags/{name}");
            if validate_tag_name(&name).is_err() {
                r.garbage.push(format!("{at}: not a valid tag name"));
                continue;
            }
            match self.get_tag(&name) {
                Ok(Some(id)) if self.is_listed(&id) => roots.push(id),
                Ok(Some(id)) => {
                    roots.push(id);
                    r.problems.push(problem(
                        at,
                        format!("points at snapshot {id}, which is not listed"),
                    ));
                }
                Ok(None) => {}
                Err(e) => r.problems.push(problem(at, e.to_string())),
            }
        }

        let mut layers_of_images = Vec::new();
        for (name, id) in self.image_names()? {
            let at = format!("refs/images/{name}");
            match self.get_image(&id) {
                Ok(img) => layers_of_images.extend(img.layers),
                Err(e) => r.problems.push(problem(
                    at,
                    format!("names image {id}, whose record is unusable: {e}"),
                )),
            }
        }
        for layer in layers_of_images {
            if layers_done.insert(layer) {
                let (problems, files) = self.verify_layer_counted(&layer)?;
                r.problems.extend(problems);
                r.files_checked += files;
                r.layers_checked += 1;
            }
        }
        let mut reach = self.reach(roots, false)?;
        self.reach_images(&mut reach, false)?;
        for id in present.difference(&reach.objects) {
            let hex = id.to_hex();
            r.garbage
                .push(format!("objects/{}/{}: unreferenced", &hex[..2], &hex[2..]));
        }
        for (sub, keep) in [("layers", &reach.layers), ("squash", &reach.snapshots)] {
            for (name, _) in sorted_entries(&self.root().join(sub))? {
                if !name.parse().is_ok_and(|id: ObjectId| keep.contains(&id)) {
                    r.garbage.push(format!("{sub}/{name}: unreferenced"));
                }
            }
        }
        for (name, _) in sorted_entries(&self.tmp_dir())? {
            if owner_dead(&name, '.', true) {
                r.garbage.push(format!(
                    "tmp/{name}: stale temp entry (its process is gone)"
                ));
            }
        }
        for (name, _) in sorted_entries(&self.run_dir())? {
            if owner_dead(&name, '-', false) {
                r.garbage.push(format!(
                    "run/{name}: stale sandbox directory (its process is gone)"
                ));
            }
        }
        Ok(r)
    }
}

/// Entries of `dir` as (lossy UTF-8 name, path), sorted by name.
pub(crate) fn sorted_entries(dir: &Path) -> Result<Vec<(String, std::path::PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err("list", dir))? {
        let entry = entry.map_err(io_err("list", dir))?;
        out.push((
            entry.file_name().to_string_lossy().into_owned(),
            entry.path(),
        ));
    }
    out.sort();
    Ok(out)
}

/// What a layer entry actually is on disk.
#[derive(Debug, PartialEq)]
enum Actual {
    File { size: u64 },
    Dir { opaque: bool },
    Symlink { target: Vec<u8> },
    Whiteout,
    Special { format: u32, rdev: u64 },
}

fn kind_name(k: &EntryKind) -> &'static str {
    match k {
        EntryKind::File { .. } => "regular file",
        EntryKind::Dir { .. } => "directory",
        EntryKind::Symlink { .. } => "symlink",
        EntryKind::Whiteout => "whiteout",
        EntryKind::Special { .. } => "special file",
    }
}

fn actual_name(a: &Actual) -> &'static str {
    match a {
        Actual::File { .. } => "regular file",
        Actual::Dir { .. } => "directory",
        Actual::Symlink { .. } => "symlink",
        Actual::Whiteout => "whiteout",
        Actual::Special { .. } => "special file",
    }
}

/// Opaque marker in either namespace (`user.` when rootless, `trusted.` as root).
fn is_opaque(path: &Path) -> bool {
    ["user.overlay.opaque", "trusted.overlay.opaque"]
        .iter()
        .any(|name| {
            let mut buf = [0u8; 8];
            matches!(rustix::fs::lgetxattr(path, *name, &mut buf[..]), Ok(n) if &buf[..n] == b"y")
        })
}

/// Run `f` with the owner permission bits `need` temporarily added to
/// `path` (unless running as root), restoring the original mode afterwards.
fn with_access<T>(
    path: &Path,
    md: &Metadata,
    need: u32,
    root: bool,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let mode = md.mode() & 0o7777;
    if root || mode & need == need {
        return f();
    }
    fs::set_permissions(path, Permissions::from_mode(mode | need))
        .map_err(io_err("temporarily allow reading", path))?;
    let out = f();
    fs::set_permissions(path, Permissions::from_mode(mode))
        .map_err(io_err("restore mode of", path))?;
    out
}

struct LayerWalk<'a> {
    entries: &'a [TreeEntry],
    seen: Vec<bool>,
    base: &'a str,
    problems: Vec<FsckProblem>,
    checked: usize,
    root: bool,
}

impl LayerWalk<'_> {
    fn walk(&mut self, dir: &Path, prefix: &str) -> Result<()> {
        for (_, path) in sorted_entries(dir)? {
            let name = path.file_name().unwrap_or_default();
            let Some(name) = name.to_str() else {
                let rel = format!("{}/{prefix}{}", self.base, name.to_string_lossy());
                self.problems.push(problem(rel, "file name is not UTF-8"));
                continue;
            };
            let rel = format!("{prefix}{name}");
            self.check(&path, &rel)?;
        }
        Ok(())
    }

    fn check(&mut self, path: &Path, rel: &str) -> Result<()> {
        let at = format!("{}/{rel}", self.base);
        let Ok(idx) = self.entries.binary_search_by(|e| e.path.as_str().cmp(rel)) else {
            self.problems.push(problem(
                at,
                "present in the layer directory but not in its tree",
            ));
            return Ok(());
        };
        self.seen[idx] = true;
        self.checked += 1;
        let entry = &self.entries[idx];
        let md = fs::symlink_metadata(path).map_err(io_err("stat", path))?;
        let ft = md.file_type();
        let actual = if ft.is_file() {
            Actual::File { size: md.len() }
        } else if ft.is_dir() {
            Actual::Dir {
                opaque: is_opaque(path),
            }
        } else if ft.is_symlink() {
            let t = fs::read_link(path).map_err(io_err("read symlink", path))?;
            Actual::Symlink {
                target: t.as_os_str().as_bytes().to_vec(),
            }
        } else if ft.is_char_device() && md.rdev() == 0 {
            Actual::Whiteout
        } else {
            Actual::Special {
                format: md.mode() & libc::S_IFMT,
                rdev: md.rdev(),
            }
        };
        let mode = md.mode() & 0o7777;
        if !ft.is_symlink() && mode != entry.mode {
            self.problems.push(problem(
                &at,
                format!(
                    "mode mismatch (tree says {:o}, file has {mode:o})",
                    entry.mode
                ),
            ));
        }
        match (&entry.kind, &actual) {
            (EntryKind::File { size, hash }, Actual::File { size: got }) => {
                if size != got {
                    self.problems.push(problem(
                        at,
                        format!("size mismatch (tree says {size} bytes, file has {got})"),
                    ));
                } else {
                    let got = with_access(path, &md, 0o400, self.root, || hash_file(path))?;
                    if got != *hash {
                        self.problems.push(problem(
                            at,
                            format!(
                                "content hash mismatch (tree says {hash}, file hashes to {got})"
                            ),
                        ));
                    }
                }
            }
            (EntryKind::Dir { opaque }, Actual::Dir { opaque: got }) => {
                if opaque != got {
                    self.problems.push(problem(
                        &at,
                        format!("opaque marker differs (tree says {opaque}, directory has {got})"),
                    ));
                }
                let prefix = format!("{rel}/");
                with_access(path, &md, 0o500, self.root, || self.walk(path, &prefix))?;
            }
            (EntryKind::Symlink { target }, Actual::Symlink { target: got }) => {
                if target.as_bytes() != got.as_slice() {
                    self.problems.push(problem(
                        at,
                        format!(
                            "symlink target mismatch (tree says {target:?}, link points to {:?})",
                            OsStr::from_bytes(got)
                        ),
                    ));
                }
            }
            (EntryKind::Whiteout, Actual::Whiteout) => {}
            (EntryKind::Special { format, rdev }, Actual::Special { format: f, rdev: r }) => {
                if (format, rdev) != (f, r) {
                    self.problems.push(problem(
                        at,
                        format!("device mismatch (tree says {format:o}/{rdev}, file is {f:o}/{r})"),
                    ));
                }
            }
            (want, got) => self.problems.push(problem(
                at,
                format!(
                    "kind mismatch (tree says {}, layer has a {})",
                    kind_name(want),
                    actual_name(got)
                ),
            )),
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests;
