//! Tenants: who a request is, and which snapshots and tags it may see.
//!
//! Without a tokens file there is one tenant, `local`, that sees the whole
//! store (the CLI's snapshots and tags included). With one, each tenant sees
//! only what it made: the ids it owns are kept in
//! `<home>/server/tenants/<name>/owned` (one hex id per line, appended and
//! synced before the answer that names it), and its tags live in the store
//! as `tenant.<name>.<tag>`. Another tenant's id, prefix or tag resolves
//! exactly like one that does not exist.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arbor_runtime::store::object::SnapshotId;
use arbor_runtime::{AnySnapshot, Runtime};

use crate::error::{ApiError, ApiResult};

/// The tenant of a server without a tokens file.
pub const LOCAL: &str = "local";

/// Longest tag a tenant may use.
pub const MAX_TAG: usize = 64;

/// Longest tenant name.
pub const MAX_TENANT: usize = 24;

/// The tokens of a tokens file: token → tenant name.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    by_token: HashMap<String, String>,
}

impl Tokens {
    /// Parse a tokens file: lines `name token`, `#` comments, blank lines.
    ///
    /// # Errors
    /// A line that is not two words, a bad name, a short or repeated token.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut by_token = HashMap::new();
        let mut names = HashSet::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let [name, token] = words[..] else {
                return Err(format!(
                    "line {}: expected `name token`, got {} words",
                    n + 1,
                    words.len()
                ));
            };
            check_tenant_name(name).map_err(|e| format!("line {}: {e}", n + 1))?;
            if token.len() < 16 {
                return Err(format!(
                    "line {}: the token of {name} is shorter than 16 characters",
                    n + 1
                ));
            }
            if !names.insert(name.to_owned()) {
                return Err(format!("line {}: tenant {name} appears twice", n + 1));
            }
            if by_token.insert(token.to_owned(), name.to_owned()).is_some() {
                return Err(format!("line {}: a token is given twice", n + 1));
            }
        }
        if by_token.is_empty() {
            return Err("no tenants in the tokens file".to_owned());
        }
        Ok(Self { by_token })
    }

    /// Read and parse `path`.
    ///
    /// # Errors
    /// As [`parse`](Self::parse), or when the file cannot be read.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The tenant a token belongs to (compared in constant time per token).
    pub fn tenant(&self, token: &str) -> Option<&str> {
        self.by_token
            .iter()
            .find(|(t, _)| constant_time_eq(t.as_bytes(), token.as_bytes()))
            .map(|(_, name)| name.as_str())
    }

    /// How many tenants.
    pub fn len(&self) -> usize {
        self.by_token.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_token.is_empty()
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn check_tenant_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > MAX_TENANT
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "tenant name {name:?} must be 1-{MAX_TENANT} letters, digits, `_` or `-`"
        ));
    }
    Ok(())
}

/// Check a tag name given by a client.
///
/// # Errors
/// A 400 that names the rule.
pub fn check_tag(tag: &str) -> ApiResult<()> {
    let ok = !tag.is_empty()
        && tag.len() <= MAX_TAG
        && !tag.starts_with('.')
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "invalid tag {tag:?}: use 1-{MAX_TAG} letters, digits, `.`, `_` or `-`, not starting with `.`"
        )))
    }
}

/// One tenant's view of the store.
#[derive(Debug)]
pub struct View {
    /// The tenant's name.
    pub name: String,
    /// Whether it sees the whole store (the `local` tenant).
    pub unrestricted: bool,
    owned: Mutex<HashSet<SnapshotId>>,
    owned_file: PathBuf,
}

impl View {
    /// The store tag that holds this tenant's tag `tag`.
    pub fn store_tag(&self, tag: &str) -> String {
        if self.unrestricted {
            tag.to_owned()
        } else {
            format!("tenant.{}.{tag}", self.name)
        }
    }

    /// The tenant's name of a store tag, if it is one of its tags.
    pub fn own_tag<'a>(&self, store_tag: &'a str) -> Option<&'a str> {
        if self.unrestricted {
            return Some(store_tag);
        }
        store_tag
            .strip_prefix("tenant.")?
            .strip_prefix(self.name.as_str())?
            .strip_prefix('.')
    }

    /// Whether the tenant may see `id`.
    pub fn owns(&self, id: &SnapshotId) -> bool {
        self.unrestricted || self.owned.lock().is_ok_and(|o| o.contains(id))
    }

    /// Record that the tenant made (or may see) `id`; durable on return.
    ///
    /// # Errors
    /// When the ownership file cannot be written.
    pub fn adopt(&self, id: &SnapshotId) -> ApiResult<()> {
        if self.unrestricted {
            return Ok(());
        }
        let mut owned = self
            .owned
            .lock()
            .map_err(|_| ApiError::internal("ownership lock poisoned"))?;
        if owned.contains(id) {
            return Ok(());
        }
        let write = || -> std::io::Result<()> {
            if let Some(dir) = self.owned_file.parent() {
                fs::create_dir_all(dir)?;
            }
            let mut f = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.owned_file)?;
            writeln!(f, "{}", id.to_hex())?;
            f.sync_data()
        };
        write().map_err(|e| {
            ApiError::internal(format!(
                "record ownership in {}: {e}",
                self.owned_file.display()
            ))
        })?;
        owned.insert(*id);
        Ok(())
    }

    /// The ids the tenant may see among the store's listed snapshots.
    ///
    /// # Errors
    /// When the store cannot be listed.
    pub fn visible(&self, runtime: &Runtime) -> ApiResult<Vec<SnapshotId>> {
        let listed = runtime
            .store()
            .snapshots()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(listed.into_iter().filter(|id| self.owns(id)).collect())
    }

    /// The tenant's tags: its tag name → snapshot.
    ///
    /// # Errors
    /// When the store's tags cannot be read.
    pub fn tags(&self, runtime: &Runtime) -> ApiResult<BTreeMap<String, SnapshotId>> {
        let all = runtime
            .store()
            .tags()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(all
            .into_iter()
            .filter_map(|(t, id)| self.own_tag(&t).map(|own| (own.to_owned(), id)))
            .collect())
    }

    /// Resolve a snapshot reference (id, unique hex prefix of at least 4,
    /// or the tenant's tag) to a snapshot it may see.
    ///
    /// # Errors
    /// 404 for anything it may not see or that does not exist (the same
    /// answer); 400 for a reference that cannot be one.
    pub fn resolve(&self, runtime: &Runtime, what: &str) -> ApiResult<AnySnapshot> {
        let not_found = || ApiError::not_found(format!("no snapshot {what:?}"));
        if what.is_empty() || what.len() > 100 {
            return Err(ApiError::bad_request(format!(
                "snapshot reference {what:?} must be 1-100 characters"
            )));
        }
        let is_hex = what.chars().all(|c| c.is_ascii_hexdigit());
        // A tag wins over a prefix only when no id matches (as in the CLI).
        let mut found: Option<SnapshotId> = None;
        if is_hex && what.len() >= 4 {
            let lower = what.to_ascii_lowercase();
            let matches: Vec<SnapshotId> = self
                .visible(runtime)?
                .into_iter()
                .filter(|id| id.to_hex().starts_with(&lower))
                .collect();
            match matches.len() {
                0 => {}
                1 => found = Some(matches[0]),
                n => {
                    return Err(ApiError::bad_request(format!(
                        "snapshot prefix {what:?} is ambiguous ({n} snapshots); give more digits"
                    )));
                }
            }
        }
        if found.is_none() && check_tag(what).is_ok() {
            found = runtime
                .store()
                .get_tag(&self.store_tag(what))
                .map_err(|e| ApiError::internal(e.to_string()))?;
        }
        let id = found.filter(|id| self.owns(id)).ok_or_else(not_found)?;
        runtime.load_any(&id).map_err(|_| not_found())
    }
}

/// Every tenant's view, made on first use.
#[derive(Debug, Default)]
pub struct Views {
    dir: PathBuf,
    views: Mutex<HashMap<String, Arc<View>>>,
}

impl Views {
    /// Views whose ownership files live under `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            views: Mutex::default(),
        }
    }

    /// The view of `name` (`unrestricted` for the `local` tenant of a
    /// server without tokens).
    ///
    /// # Errors
    /// When its ownership file exists and cannot be read.
    pub fn get(&self, name: &str, unrestricted: bool) -> ApiResult<Arc<View>> {
        let mut views = self
            .views
            .lock()
            .map_err(|_| ApiError::internal("views lock poisoned"))?;
        if let Some(v) = views.get(name) {
            return Ok(Arc::clone(v));
        }
        let owned_file = self.dir.join(name).join("owned");
        let mut owned = HashSet::new();
        match fs::read_to_string(&owned_file) {
            Ok(text) => {
                // A torn last line (a crash mid-append) is skipped: its
                // answer was never sent, so nobody holds that id.
                for line in text.lines() {
                    if let Ok(id) = line.trim().parse::<SnapshotId>() {
                        owned.insert(id);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(ApiError::internal(format!(
                    "read {}: {e}",
                    owned_file.display()
                )));
            }
        }
        let view = Arc::new(View {
            name: name.to_owned(),
            unrestricted,
            owned: Mutex::new(owned),
            owned_file,
        });
        views.insert(name.to_owned(), Arc::clone(&view));
        Ok(view)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tokens_file_parses_and_bad_ones_are_named() {
        let t =
            Tokens::parse("# comment\nalice aaaaaaaaaaaaaaaa\n\nbob bbbbbbbbbbbbbbbbbb\n").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.tenant("aaaaaaaaaaaaaaaa"), Some("alice"));
        assert_eq!(t.tenant("bbbbbbbbbbbbbbbbbb"), Some("bob"));
        assert_eq!(t.tenant("aaaaaaaaaaaaaaab"), None);
        for (bad, says) in [
            ("alice", "expected `name token`"),
            ("alice short", "shorter than 16"),
            ("al.ice aaaaaaaaaaaaaaaa", "tenant name"),
            ("a aaaaaaaaaaaaaaaa\na bbbbbbbbbbbbbbbb", "appears twice"),
            ("a aaaaaaaaaaaaaaaa\nb aaaaaaaaaaaaaaaa", "given twice"),
            ("# nothing", "no tenants"),
        ] {
            let e = Tokens::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn tags_are_checked_and_scoped_per_tenant() {
        assert!(check_tag("step-1.a_b").is_ok());
        for bad in ["", ".hidden", "a/b", "a b", &"x".repeat(65)] {
            assert!(check_tag(bad).is_err(), "{bad:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let views = Views::new(dir.path().to_path_buf());
        let alice = views.get("alice", false).unwrap();
        assert_eq!(alice.store_tag("base"), "tenant.alice.base");
        assert_eq!(alice.own_tag("tenant.alice.base"), Some("base"));
        assert_eq!(alice.own_tag("tenant.alicex.base"), None);
        assert_eq!(alice.own_tag("base"), None);
        let local = views.get(LOCAL, true).unwrap();
        assert_eq!(local.own_tag("base"), Some("base"));
    }

    #[test]
    fn ownership_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let id: SnapshotId = "ab".repeat(32).parse().unwrap();
        {
            let views = Views::new(dir.path().to_path_buf());
            let v = views.get("alice", false).unwrap();
            assert!(!v.owns(&id));
            v.adopt(&id).unwrap();
            assert!(v.owns(&id));
        }
        let views = Views::new(dir.path().to_path_buf());
        assert!(views.get("alice", false).unwrap().owns(&id));
        assert!(!views.get("bob", false).unwrap().owns(&id));
    }
}
