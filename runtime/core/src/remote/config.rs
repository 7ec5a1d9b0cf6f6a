//! The remotes a store knows: `<store>/remotes.json`, rewritten atomically
//! under its own lock (a read-modify-write of two `arbor remote add` at
//! once keeps both).

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{RemoteError, Result};
use crate::store::Store;
use crate::store::atomic_write;

/// One remote: an S3-compatible bucket and a key prefix in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteSpec {
    /// The name `arbor push` and `arbor pull` use.
    pub name: String,
    /// `s3://bucket[/prefix]`.
    pub url: String,
    /// The S3 endpoint (`http://127.0.0.1:9000`, `https://s3.example.com`);
    /// none: AWS's, from the region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The region [default: `$AWS_REGION`, else us-east-1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

impl RemoteSpec {
    /// A checked spec: the name is a tag-like word, the URL `s3://bucket[/prefix]`,
    /// the endpoint an http(s) URL.
    pub fn new(
        name: &str,
        url: &str,
        endpoint: Option<&str>,
        region: Option<&str>,
    ) -> Result<Self> {
        let spec = Self {
            name: name.to_owned(),
            url: url.trim_end_matches('/').to_owned(),
            endpoint: endpoint.map(|e| e.trim_end_matches('/').to_owned()),
            region: region.map(str::to_owned),
        };
        spec.check()?;
        Ok(spec)
    }

    fn check(&self) -> Result<()> {
        let bad = |what: String| RemoteError::Config(what);
        let name_ok = (1..=64).contains(&self.name.len())
            && !self.name.starts_with(['.', '-'])
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !name_ok {
            return Err(bad(format!(
                "remote name {:?}: use 1 to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-'",
                self.name
            )));
        }
        self.bucket_and_prefix()?;
        if let Some(e) = &self.endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            return Err(bad(format!(
                "endpoint {e:?}: give an http:// or https:// URL"
            )));
        }
        Ok(())
    }

    /// The bucket and the key prefix (without slashes at its ends).
    pub fn bucket_and_prefix(&self) -> Result<(String, String)> {
        let Some(rest) = self.url.strip_prefix("s3://") else {
            return Err(RemoteError::Config(format!(
                "remote URL {:?}: only s3://bucket[/prefix] is supported",
                self.url
            )));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        // S3's bucket naming rules, the part every provider shares.
        let bucket_ok = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-'))
            && !bucket.starts_with(['.', '-'])
            && !bucket.ends_with(['.', '-']);
        if !bucket_ok {
            return Err(RemoteError::Config(format!(
                "remote URL {:?}: {bucket:?} is not a bucket name (3 to 63 lower-case letters, digits, '.' or '-')",
                self.url
            )));
        }
        let prefix = prefix.trim_matches('/');
        if prefix
            .split('/')
            .any(|seg| seg == "." || seg == ".." || (seg.is_empty() && !prefix.is_empty()))
        {
            return Err(RemoteError::Config(format!(
                "remote URL {:?}: the prefix {prefix:?} has an empty, '.' or '..' segment",
                self.url
            )));
        }
        Ok((bucket.to_owned(), prefix.to_owned()))
    }
}

#[derive(Default, Serialize, Deserialize)]
struct File1 {
    format: u32,
    remotes: Vec<RemoteSpec>,
}

const FORMAT: u32 = 1;

fn path(store: &Store) -> PathBuf {
    store.root().join("remotes.json")
}

fn read(path: &Path) -> Result<Vec<RemoteSpec>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(RemoteError::Local(format!("read {}: {e}", path.display()))),
    };
    let f: File1 = serde_json::from_slice(&bytes).map_err(|e| {
        RemoteError::Config(format!("{} is not a remotes file: {e}", path.display()))
    })?;
    if f.format != FORMAT {
        return Err(RemoteError::Config(format!(
            "{} has format {}; this build reads format {FORMAT}",
            path.display(),
            f.format
        )));
    }
    Ok(f.remotes)
}

/// Hold the remotes file's lock while `f` reads and perhaps rewrites it.
fn edit<T>(store: &Store, f: impl FnOnce(&mut Vec<RemoteSpec>) -> Result<T>) -> Result<T> {
    let lock_path = store.root().join("remotes.lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| RemoteError::Local(format!("open {}: {e}", lock_path.display())))?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| RemoteError::Local(format!("lock {}: {e}", lock_path.display())))?;
    let p = path(store);
    let mut list = read(&p)?;
    let before = list.clone();
    let out = f(&mut list)?;
    if list != before {
        let bytes = serde_json::to_vec_pretty(&File1 {
            format: FORMAT,
            remotes: list,
        })
        .unwrap_or_default();
        atomic_write(&store.tmp_dir(), &p, &bytes)
            .map_err(|e| RemoteError::Local(format!("write {}: {e}", p.display())))?;
    }
    Ok(out)
}

/// The remotes of `store`, in the order they were added.
pub fn list(store: &Store) -> Result<Vec<RemoteSpec>> {
    read(&path(store))
}

/// The remote named `name`.
pub fn get(store: &Store, name: &str) -> Result<RemoteSpec> {
    list(store)?
        .into_iter()
        .find(|r| r.name == name)
        .ok_or_else(|| RemoteError::UnknownRemote(name.to_owned()))
}

/// Add a remote; a name already taken is refused (remove it first).
pub fn add(store: &Store, spec: RemoteSpec) -> Result<()> {
    spec.check()?;
    edit(store, |list| {
        if let Some(have) = list.iter().find(|r| r.name == spec.name) {
            return Err(RemoteError::Config(format!(
                "a remote named {:?} exists already ({}): remove it first",
                spec.name, have.url
            )));
        }
        list.push(spec);
        Ok(())
    })
}

/// Remove a remote (what was pushed to it stays there).
pub fn remove(store: &Store, name: &str) -> Result<RemoteSpec> {
    edit(store, |list| {
        let i = list
            .iter()
            .position(|r| r.name == name)
            .ok_or_else(|| RemoteError::UnknownRemote(name.to_owned()))?;
        Ok(list.remove(i))
    })
}
