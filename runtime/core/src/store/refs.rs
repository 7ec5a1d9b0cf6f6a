//! The snapshot index (`snapshots/<id>`, an empty file per listed snapshot),
//! tags (`refs/tags/<name>`), and resolving what a user typed (id, unique id
//! prefix or tag) to a snapshot id.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use super::fsio::{WriteFailpoints, atomic_write_with};
use super::{ObjectId, Result, SnapshotId, Store, StoreError, fsync_dir, io_err};

/// After an index entry is created, before its directory is fsynced.
const INDEX_CREATED: &str = "index.created";

const REF_FPS: WriteFailpoints = WriteFailpoints {
    written: "ref.tmp-written",
    fsynced: None,
    renamed: "ref.renamed",
};

/// Check a tag name: 1–100 characters of `[A-Za-z0-9._-]`, not starting with `.`.
pub(crate) fn validate_tag_name(name: &str) -> Result<()> {
    let ok = (1..=100).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidTagName(name.to_owned()))
    }
}

impl Store {
    fn index_path(&self, id: &SnapshotId) -> PathBuf {
        self.root().join("snapshots").join(id.to_hex())
    }

    fn tag_path(&self, name: &str) -> PathBuf {
        self.root().join("refs/tags").join(name)
    }

    /// List a snapshot (create the empty file `snapshots/<id>`, then fsync
    /// `snapshots/`: an empty file is whole the moment it has a name, so no
    /// temp file and rename are needed, and listing costs one journal
    /// commit). Its manifest must already be stored and verify; call this
    /// only once all its layers and objects are durable, so that no partial
    /// snapshot is ever listed. A WebAssembly session snapshot is listed the
    /// same way.
    pub fn list_snapshot(&self, id: &SnapshotId) -> Result<()> {
        self.snapshot_refs(id)?;
        let path = self.index_path(id);
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)
        {
            // Listed before (maybe by a process that died before the fsync).
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            done => {
                done.map_err(io_err("create index entry", &path))?;
            }
        }
        super::failpoint(INDEX_CREATED);
        fsync_dir(&self.root().join("snapshots"))
    }

    /// Unlist a snapshot (its data stays until gc). Not an error if it was not listed.
    pub fn unlist_snapshot(&self, id: &SnapshotId) -> Result<()> {
        let path = self.index_path(id);
        match fs::remove_file(&path) {
            Ok(()) => fsync_dir(&self.root().join("snapshots")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("remove index entry", &path)(e)),
        }
    }

    /// Whether `snapshots/<id>` exists.
    pub fn is_listed(&self, id: &SnapshotId) -> bool {
        fs::symlink_metadata(self.index_path(id)).is_ok()
    }

    /// Every listed snapshot, sorted by id.
    pub fn snapshots(&self) -> Result<Vec<SnapshotId>> {
        let dir = self.root().join("snapshots");
        let mut out = Vec::new();
        for entry in fs::read_dir(&dir).map_err(io_err("list", &dir))? {
            let entry = entry.map_err(io_err("list", &dir))?;
            if let Some(id) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
                out.push(id);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Resolve what a user typed: a full listed id, a tag name, or a unique
    /// hex prefix (at least 4 characters) of a listed snapshot — tried in that order.
    pub fn resolve(&self, what: &str) -> Result<SnapshotId> {
        if let Ok(id) = what.parse::<ObjectId>()
            && self.is_listed(&id)
        {
            return Ok(id);
        }
        if validate_tag_name(what).is_ok()
            && let Some(id) = self.get_tag(what)?
        {
            return if self.is_listed(&id) {
                Ok(id)
            } else {
                Err(StoreError::NotListed(id))
            };
        }
        if (4..=64).contains(&what.len()) && what.bytes().all(|b| b.is_ascii_hexdigit()) {
            let prefix = what.to_ascii_lowercase();
            let candidates: Vec<_> = self
                .snapshots()?
                .into_iter()
                .filter(|id| id.to_hex().starts_with(&prefix))
                .collect();
            match candidates.len() {
                0 => {}
                1 => return Ok(candidates[0]),
                _ => {
                    return Err(StoreError::AmbiguousPrefix {
                        prefix: what.to_owned(),
                        candidates,
                    });
                }
            }
        }
        Err(StoreError::UnknownSnapshot(what.to_owned()))
    }

    /// Point tag `name` at a listed snapshot (creating or moving the tag).
    pub fn set_tag(&self, name: &str, id: &SnapshotId) -> Result<()> {
        validate_tag_name(name)?;
        if !self.is_listed(id) {
            return Err(StoreError::NotListed(*id));
        }
        let bytes = format!("{}\n", id.to_hex());
        atomic_write_with(
            &self.tmp_dir(),
            &self.tag_path(name),
            bytes.as_bytes(),
            Some(REF_FPS),
        )
    }

    /// Delete tag `name`; [`StoreError::UnknownTag`] if there is none.
    pub fn delete_tag(&self, name: &str) -> Result<()> {
        validate_tag_name(name)?;
        let path = self.tag_path(name);
        match fs::remove_file(&path) {
            Ok(()) => fsync_dir(&self.root().join("refs/tags")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(StoreError::UnknownTag(name.to_owned()))
            }
            Err(e) => Err(io_err("remove tag", &path)(e)),
        }
    }

    /// The snapshot tag `name` points at, if the tag exists.
    pub fn get_tag(&self, name: &str) -> Result<Option<SnapshotId>> {
        validate_tag_name(name)?;
        read_ref(self.tag_path(name), "snapshot")
    }

    /// Every tag and its snapshot (files with invalid tag names are ignored;
    /// fsck reports them).
    pub fn tags(&self) -> Result<BTreeMap<String, SnapshotId>> {
        list_refs(&self.root().join("refs/tags"), validate_tag_name, |n| {
            self.get_tag(n)
        })
    }

    /// Remove a snapshot: delete the tags pointing at it, then unlist it. Its
    /// data stays until gc. Returns the names of the tags deleted.
    pub fn remove_snapshot(&self, id: &SnapshotId) -> Result<Vec<String>> {
        let listed = self.is_listed(id);
        let mut removed = Vec::new();
        for (name, target) in self.tags()? {
            if target == *id {
                self.delete_tag(&name)?;
                removed.push(name);
            }
        }
        if !listed && removed.is_empty() {
            return Err(StoreError::NotListed(*id));
        }
        self.unlist_snapshot(id)?;
        Ok(removed)
    }
}

/// Read a ref file (`refs/tags/<name>`, `refs/images/<name>`): the 64-hex id
/// of a `what` (snapshot, image) and a newline; `None` when there is none.
pub(super) fn read_ref(path: PathBuf, what: &str) -> Result<Option<ObjectId>> {
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("read ref", &path)(e)),
    };
    text.strip_suffix('\n')
        .and_then(|t| t.parse().ok())
        .map(Some)
        .ok_or_else(|| StoreError::BadTag {
            path,
            reason: format!("expected a 64-hex {what} id and a newline, found {text:?}"),
        })
}

/// Every ref in `dir` whose name `valid` accepts, read with `get` (files
/// with other names are skipped; fsck reports them).
pub(super) fn list_refs(
    dir: &std::path::Path,
    valid: fn(&str) -> Result<()>,
    get: impl Fn(&str) -> Result<Option<ObjectId>>,
) -> Result<BTreeMap<String, ObjectId>> {
    let mut out = BTreeMap::new();
    for entry in fs::read_dir(dir).map_err(io_err("list", dir))? {
        let entry = entry.map_err(io_err("list", dir))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if valid(&name).is_err() {
            continue;
        }
        if let Some(id) = get(&name)? {
            out.insert(name, id);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{manifest, store};
    use super::*;

    /// Store and list snapshots until two share their first 4 hex digits.
    fn colliding(s: &Store) -> (SnapshotId, SnapshotId) {
        let mut seen = BTreeMap::new();
        for t in 0.. {
            let mut m = manifest(None, vec![]);
            m.created_at = t;
            let id = s.put_manifest(&m).unwrap();
            s.list_snapshot(&id).unwrap();
            if let Some(other) = seen.insert(id.to_hex()[..4].to_owned(), id) {
                return (other, id);
            }
        }
        unreachable!()
    }

    #[test]
    fn resolve_by_id_prefix_tag() {
        let (_d, s) = store();
        let (a, b) = colliding(&s);
        assert_eq!(s.resolve(&a.to_hex()).unwrap(), a);
        assert_eq!(s.resolve(&a.to_hex().to_uppercase()).unwrap(), a);
        let common = a.to_hex()[..4].to_owned();
        match s.resolve(&common) {
            Err(StoreError::AmbiguousPrefix { prefix, candidates }) => {
                assert_eq!(prefix, common);
                assert!(candidates.contains(&a) && candidates.contains(&b));
            }
            other => panic!("{other:?}"),
        }
        let unique = (5..=64)
            .map(|n| a.to_hex()[..n].to_owned())
            .find(|p| !b.to_hex().starts_with(p.as_str()))
            .unwrap();
        assert_eq!(s.resolve(&unique).unwrap(), a);
        s.set_tag("base-1.0", &b).unwrap();
        assert_eq!(s.resolve("base-1.0").unwrap(), b);
        let err = s.resolve("nope").unwrap_err();
        assert!(matches!(err, StoreError::UnknownSnapshot(_)));
        assert_eq!(
            err.to_string(),
            "no snapshot, id prefix or tag named \"nope\""
        );
        assert!(matches!(
            s.resolve("abc"),
            Err(StoreError::UnknownSnapshot(_))
        ));
        assert!(s.snapshots().unwrap().len() >= 2);
    }

    #[test]
    fn tags_validate_and_require_listed() {
        let (_d, s) = store();
        let id = s.put_manifest(&manifest(None, vec![])).unwrap();
        assert!(matches!(s.set_tag("t", &id), Err(StoreError::NotListed(_))));
        s.list_snapshot(&id).unwrap();
        for bad in ["", ".hidden", "a/b", "sp ace", &"x".repeat(101)] {
            assert!(matches!(
                s.set_tag(bad, &id),
                Err(StoreError::InvalidTagName(_))
            ));
        }
        s.set_tag("t", &id).unwrap();
        s.set_tag("u", &id).unwrap();
        assert_eq!(s.get_tag("t").unwrap(), Some(id));
        assert_eq!(s.tags().unwrap().len(), 2);
        s.delete_tag("u").unwrap();
        assert!(matches!(s.delete_tag("u"), Err(StoreError::UnknownTag(_))));
        assert_eq!(s.remove_snapshot(&id).unwrap(), vec!["t".to_owned()]);
        assert!(!s.is_listed(&id));
        assert!(s.tags().unwrap().is_empty());
        assert!(matches!(
            s.remove_snapshot(&id),
            Err(StoreError::NotListed(_))
        ));
    }

    #[test]
    fn listing_requires_a_manifest() {
        let (_d, s) = store();
        assert!(matches!(
            s.list_snapshot(&ObjectId([1; 32])),
            Err(StoreError::NotFound { .. })
        ));
        assert!(s.snapshots().unwrap().is_empty());
    }
}
