//! The merged view of a layer chain (what a sandbox sees at `/workspace`)
//! and the difference between two merged views (`arbor diff`).
//!
//! Merging follows overlayfs semantics, applied bottom layer first:
//!
//! - a whiteout removes the path and everything below it;
//! - an opaque directory removes everything below it that came from lower
//!   layers;
//! - a non-directory over a directory removes the directory's subtree;
//! - a directory over a non-directory replaces it;
//! - an entry whose parent in the merged view is missing or is not a
//!   directory (which a well-formed upper directory never produces, so only a
//!   hostile or hand-made layer does) gets that parent replaced by an
//!   *implicit directory* with mode `0o755` owned by 0:0. This is what keeps
//!   a lower symlink `d -> /etc` plus an upper `d/passwd` from ever meaning
//!   "write `/etc/passwd`": `d` becomes a real directory.
//!
//! Whiteouts never appear in a merged view, and directories in it are never
//! opaque (opacity only describes how a layer relates to the ones below).

use std::collections::BTreeMap;

use serde::Serialize;

use super::fsio::is_clean_relative;
use super::{LayerError, Result};
use crate::store::Store;
use crate::store::object::{EntryKind, LayerId, Tree, TreeEntry};

/// The merged contents of a layer chain, keyed by path.
///
/// Invariant: every entry's parent is a directory entry in the map (or the
/// root), there are no whiteouts, and no directory is marked opaque.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergedView {
    /// Entries keyed by their path (`TreeEntry::path` equals the key).
    pub entries: BTreeMap<String, TreeEntry>,
}

impl MergedView {
    /// The view as a flat [`Tree`] (entries sorted by path).
    pub fn to_tree(&self) -> Tree {
        Tree {
            entries: self.entries.values().cloned().collect(),
        }
    }
}

/// Which layer (index into the chain) provided each entry of a merge;
/// `None` for implicit directories.
pub(super) type Sources = BTreeMap<String, Option<usize>>;

/// Merge `trees`, bottom (oldest) layer first, into the view a sandbox
/// sees. Entries with paths that are not clean relative paths are ignored
/// here; [`merge_layers`] rejects such trees with an error instead.
pub fn merge(trees: &[&Tree]) -> MergedView {
    merge_with_sources(trees).0
}

/// [`merge`], also returning which layer provided each entry.
pub(super) fn merge_with_sources(trees: &[&Tree]) -> (MergedView, Sources) {
    let mut view = BTreeMap::new();
    let mut sources = Sources::new();
    for (layer, tree) in trees.iter().enumerate() {
        for entry in &tree.entries {
            if !is_clean_relative(&entry.path) {
                continue;
            }
            apply(&mut view, &mut sources, entry, layer);
        }
    }
    (MergedView { entries: view }, sources)
}

/// Apply one layer entry to the view.
fn apply(
    view: &mut BTreeMap<String, TreeEntry>,
    sources: &mut Sources,
    entry: &TreeEntry,
    layer: usize,
) {
    let path = entry.path.as_str();
    match &entry.kind {
        EntryKind::Whiteout => {
            remove_subtree(view, sources, path);
            view.remove(path);
            sources.remove(path);
            return;
        }
        EntryKind::Dir { opaque } => {
            if *opaque {
                remove_subtree(view, sources, path);
            }
        }
        EntryKind::File { .. } | EntryKind::Symlink { .. } | EntryKind::Special { .. } => {
            if matches!(view.get(path).map(|e| &e.kind), Some(EntryKind::Dir { .. })) {
                remove_subtree(view, sources, path);
            }
        }
    }
    ensure_parents(view, sources, path);
    let mut merged = entry.clone();
    if let EntryKind::Dir { opaque } = &mut merged.kind {
        *opaque = false;
    }
    view.insert(path.to_owned(), merged);
    sources.insert(path.to_owned(), Some(layer));
}

/// Make every ancestor of `path` a directory, replacing missing or
/// non-directory ancestors with implicit directories.
fn ensure_parents(view: &mut BTreeMap<String, TreeEntry>, sources: &mut Sources, path: &str) {
    for (i, _) in path.match_indices('/') {
        let ancestor = &path[..i];
        let is_dir = matches!(
            view.get(ancestor).map(|e| &e.kind),
            Some(EntryKind::Dir { .. })
        );
        if !is_dir {
            // A non-directory has nothing below it, so nothing else to remove.
            view.insert(
                ancestor.to_owned(),
                TreeEntry {
                    path: ancestor.to_owned(),
                    mode: 0o755,
                    uid: 0,
                    gid: 0,
                    kind: EntryKind::Dir { opaque: false },
                },
            );
            sources.insert(ancestor.to_owned(), None);
        }
    }
}

/// Remove every entry strictly below `path`.
fn remove_subtree(view: &mut BTreeMap<String, TreeEntry>, sources: &mut Sources, path: &str) {
    // Keys below `path` are exactly those in ["path/", "path0"): '0' follows '/'.
    let lo = format!("{path}/");
    let hi = format!("{path}0");
    let doomed: Vec<String> = view.range(lo..hi).map(|(k, _)| k.clone()).collect();
    for k in doomed {
        view.remove(&k);
        sources.remove(&k);
    }
}

/// Load the trees of `layers` (bottom first) from the store, checking that
/// every path in them is a clean relative path.
pub(super) fn load_trees(store: &Store, layers: &[LayerId]) -> Result<Vec<Tree>> {
    layers
        .iter()
        .map(|id| {
            let tree = store.get_tree(id).map_err(|source| LayerError::Store {
                what: format!("tree of layer {id}"),
                source,
            })?;
            if let Some(bad) = tree.entries.iter().find(|e| !is_clean_relative(&e.path)) {
                return Err(LayerError::BadPath {
                    tree: id.to_hex(),
                    path: bad.path.clone(),
                });
            }
            Ok(tree)
        })
        .collect()
}

/// The content of the file at `path` in the merged view of `layers`
/// (bottom first), read from the topmost layer that has it without
/// following a symlink in any component, and verified against the hash and
/// size its tree records. `Ok(None)` when the view has no regular file at
/// `path` (or the file is larger than `max` bytes).
///
/// # Errors
/// Loading the trees failed, the file cannot be read, or its content does
/// not match its tree ([`LayerError::ContentMismatch`]).
pub fn read_layer_file(
    store: &Store,
    layers: &[LayerId],
    path: &str,
    max: u64,
) -> Result<Option<Vec<u8>>> {
    let trees = load_trees(store, layers)?;
    let refs: Vec<&Tree> = trees.iter().collect();
    let (view, sources) = merge_with_sources(&refs);
    let (Some(entry), Some(Some(layer))) = (view.entries.get(path), sources.get(path)) else {
        return Ok(None);
    };
    let crate::store::object::EntryKind::File { size, hash } = &entry.kind else {
        return Ok(None);
    };
    if *size > max {
        return Ok(None);
    }
    let dir = store.layer_dir(&layers[*layer]);
    let file_path = dir.join(path);
    let read_err = |source: std::io::Error| LayerError::ReadSource {
        path: file_path.clone(),
        source,
    };
    let root = super::fsio::open_dir_path(&dir).map_err(read_err)?;
    let fd =
        super::fsio::open_beneath(&root, path, rustix::fs::OFlags::RDONLY).map_err(read_err)?;
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut data).map_err(read_err)?;
    if data.len() as u64 != *size || crate::store::object::ObjectId::hash(&data) != *hash {
        return Err(LayerError::ContentMismatch {
            path: file_path,
            what: "size or blake3 hash".to_owned(),
        });
    }
    Ok(Some(data))
}

/// Merge the layer chain `layers` (bottom first), loading each layer's
/// tree from the store (verified against its id by the store).
pub fn merge_layers(store: &Store, layers: &[LayerId]) -> Result<MergedView> {
    let trees = load_trees(store, layers)?;
    let refs: Vec<&Tree> = trees.iter().collect();
    Ok(merge(&refs))
}

/// Paths that differ between two merged views, each list sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Diff {
    /// Paths present only in the second view.
    pub added: Vec<String>,
    /// Paths present in both whose kind, content hash, size, symlink target,
    /// mode or owner differ.
    pub modified: Vec<String>,
    /// Paths present only in the first view.
    pub deleted: Vec<String>,
}

impl Diff {
    /// Whether the two views were equal.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.deleted.is_empty()
    }
}

/// What changed from `a` to `b`. Timestamps are not part of trees, so they
/// never count as a change.
pub fn diff(a: &MergedView, b: &MergedView) -> Diff {
    let mut out = Diff::default();
    for (path, ea) in &a.entries {
        match b.entries.get(path) {
            None => out.deleted.push(path.clone()),
            Some(eb) if eb != ea => out.modified.push(path.clone()),
            Some(_) => {}
        }
    }
    out.added = b
        .entries
        .keys()
        .filter(|p| !a.entries.contains_key(*p))
        .cloned()
        .collect();
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::object::ObjectId;

    pub(crate) fn file(path: &str, content: &[u8]) -> TreeEntry {
        TreeEntry {
            path: path.into(),
            mode: 0o644,
            uid: 0,
            gid: 0,
            kind: EntryKind::File {
                size: content.len() as u64,
                hash: ObjectId::from(blake3::hash(content)),
            },
        }
    }

    pub(crate) fn dir(path: &str, opaque: bool) -> TreeEntry {
        TreeEntry {
            path: path.into(),
            mode: 0o755,
            uid: 0,
            gid: 0,
            kind: EntryKind::Dir { opaque },
        }
    }

    pub(crate) fn link(path: &str, target: &str) -> TreeEntry {
        TreeEntry {
            path: path.into(),
            mode: 0o777,
            uid: 0,
            gid: 0,
            kind: EntryKind::Symlink {
                target: target.into(),
            },
        }
    }

    pub(crate) fn whiteout(path: &str) -> TreeEntry {
        TreeEntry {
            path: path.into(),
            mode: 0,
            uid: 0,
            gid: 0,
            kind: EntryKind::Whiteout,
        }
    }

    pub(crate) fn tree(mut entries: Vec<TreeEntry>) -> Tree {
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Tree { entries }
    }

    fn paths(v: &MergedView) -> Vec<&str> {
        v.entries.keys().map(String::as_str).collect()
    }

    #[test]
    fn whiteout_deletes_subtree() {
        let low = tree(vec![
            dir("d", false),
            file("d/a", b"1"),
            dir("d/e", false),
            file("d/e/b", b"2"),
            file("d.txt", b"3"),
        ]);
        let up = tree(vec![whiteout("d")]);
        let v = merge(&[&low, &up]);
        assert_eq!(paths(&v), ["d.txt"]);
    }

    #[test]
    fn opaque_dir_hides_lower_children_but_keeps_its_own() {
        let low = tree(vec![dir("d", false), file("d/a", b"1"), file("d/b", b"2")]);
        let up = tree(vec![dir("d", true), file("d/c", b"3")]);
        let v = merge(&[&low, &up]);
        assert_eq!(paths(&v), ["d", "d/c"]);
        assert_eq!(v.entries["d"].kind, EntryKind::Dir { opaque: false });
        // A non-opaque dir merges with the lower one.
        let up2 = tree(vec![dir("d", false), file("d/c", b"3")]);
        assert_eq!(paths(&merge(&[&low, &up2])), ["d", "d/a", "d/b", "d/c"]);
    }

    #[test]
    fn dir_over_file_and_file_over_dir() {
        let low = tree(vec![
            file("x", b"file"),
            dir("y", false),
            file("y/inner", b"i"),
        ]);
        let up = tree(vec![
            dir("x", false),
            file("x/new", b"n"),
            file("y", b"now a file"),
        ]);
        let v = merge(&[&low, &up]);
        assert_eq!(paths(&v), ["x", "x/new", "y"]);
        assert!(matches!(v.entries["x"].kind, EntryKind::Dir { .. }));
        assert!(matches!(v.entries["y"].kind, EntryKind::File { .. }));
    }

    #[test]
    fn hostile_child_under_symlink_gets_implicit_dir() {
        let low = tree(vec![link("d", "/etc")]);
        let up = tree(vec![dir("d/passwd", false)]);
        let v = merge(&[&low, &up]);
        assert_eq!(paths(&v), ["d", "d/passwd"]);
        assert_eq!(v.entries["d"].kind, EntryKind::Dir { opaque: false });
        assert_eq!(v.entries["d"].mode, 0o755);
        // A child under a file likewise, and with no parent at all.
        let low = tree(vec![file("f", b"x")]);
        let up = tree(vec![file("f/g", b"y"), file("p/q/r", b"z")]);
        let v = merge(&[&low, &up]);
        assert_eq!(paths(&v), ["f", "f/g", "p", "p/q", "p/q/r"]);
    }

    #[test]
    fn unclean_paths_are_ignored_by_merge() {
        let t = tree(vec![
            file("../evil", b"x"),
            file("/abs", b"y"),
            file("ok", b"z"),
        ]);
        assert_eq!(paths(&merge(&[&t])), ["ok"]);
    }

    #[test]
    fn diff_reports_added_modified_deleted() {
        let a = merge(&[&tree(vec![
            file("same", b"s"),
            file("changed", b"1"),
            file("gone", b"g"),
            file("mode", b"m"),
        ])]);
        let mut mode = file("mode", b"m");
        mode.mode = 0o755;
        let b = merge(&[&tree(vec![
            file("same", b"s"),
            file("changed", b"2"),
            file("new", b"n"),
            mode,
        ])]);
        let d = diff(&a, &b);
        assert_eq!(d.added, ["new"]);
        assert_eq!(d.modified, ["changed", "mode"]);
        assert_eq!(d.deleted, ["gone"]);
        assert!(diff(&a, &a).is_empty());
        let json = serde_json::to_string(&d).unwrap();
        assert!(json.contains("\"added\":[\"new\"]"), "{json}");
    }
}
