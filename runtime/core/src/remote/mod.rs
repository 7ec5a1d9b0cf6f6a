//! Remotes: snapshots pushed to and pulled from an S3-compatible object
//! store (AWS S3, MinIO, RustFS, Ceph RGW, R2...) through `object_store`.
//!
//! ```text
//! s3://bucket/prefix/
//!   arbor-remote.json     {"format": 1}
//!   objects/<id>          an object file as stored (header and payload); its id is their blake3
//!   contents/<blake3>     one regular file's content
//!   snapshots/<id>.json   a pushed snapshot's closure (chain, layers, objects), written last
//!   tags/<name>           the id of the snapshot a pushed tag names
//! ```
//!
//! Everything but the records and tags is content addressed, so pushes of
//! related snapshots share every object and file content they share, and a
//! push uploads only the keys the remote lacks (a key of the wrong size, a
//! leftover of a push cut off mid-upload, counts as lacking). A snapshot's
//! record is written after everything it names, and a tag after its record:
//! a push cut off at any point leaves nothing a pull would take for a
//! snapshot. A pull reads the record and streams the closure into the
//! bundle importer (see [`crate::bundle`]), fetching only what the store
//! lacks; the importer verifies every byte, rebuilds each layer against its
//! tree and checks every snapshot's closure before it lists anything, so a
//! damaged or forged remote is refused by name and the store is unchanged.
//!
//! Credentials come from the environment, as every AWS tool reads them
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, or a
//! web-identity or container credentials provider); the remotes file holds
//! none.

pub mod config;
mod pull;
mod push;

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};
use serde::{Deserialize, Serialize};

pub use config::RemoteSpec;
pub use pull::PullReport;
pub use push::PushReport;

use crate::bundle::{BundleError, BundleRoot};
use crate::store::object::{LayerId, ObjectId, SnapshotId};
use crate::store::{Store, StoreError};

/// Requests in flight at once, per push or pull.
const IN_FLIGHT: usize = 16;

/// The layout version this build writes and reads.
const FORMAT: u32 = 1;

/// Errors of remotes; each names the remote and what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// A remote's settings (or the remotes file) are not valid.
    #[error("{0}")]
    Config(String),
    /// No remote of that name.
    #[error("no remote named {0:?}: see `arbor remote list`")]
    UnknownRemote(String),
    /// No credentials in the environment.
    #[error(
        "remote {remote}: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY \
         (or AWS_WEB_IDENTITY_TOKEN_FILE, or AWS_CONTAINER_CREDENTIALS_FULL_URI)"
    )]
    NoCredentials {
        /// The remote.
        remote: String,
    },
    /// A snapshot or tag the remote does not hold (or whose push did not finish).
    #[error("{what} is not on remote {remote} (never pushed there, or its push did not finish)")]
    NotOnRemote {
        /// The remote.
        remote: String,
        /// What was asked for.
        what: String,
    },
    /// The remote's prefix holds something else than an Arbor remote of this format.
    #[error("remote {remote} ({url}): {what}")]
    NotARemote {
        /// The remote.
        remote: String,
        /// Its URL.
        url: String,
        /// What is wrong.
        what: String,
    },
    /// A key on the remote is not what its name says.
    #[error("remote {remote}: {key} is damaged: {what}")]
    Damaged {
        /// The remote.
        remote: String,
        /// The key.
        key: String,
        /// What does not match.
        what: String,
    },
    /// A request to the remote failed (after retries).
    #[error("remote {remote}: cannot {op} {key}: {source}")]
    Request {
        /// The remote.
        remote: String,
        /// What was being done.
        op: &'static str,
        /// The key.
        key: String,
        /// The object store's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// What the remote sent failed the importer's checks.
    #[error("remote {remote}: what it sent fails verification, nothing was stored: {source}")]
    Verify {
        /// The remote.
        remote: String,
        /// The importer's error.
        #[source]
        source: Box<BundleError>,
    },
    /// A local file could not be read or written.
    #[error("{0}")]
    Local(String),
    /// A store operation failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reading the local side of a closure failed.
    #[error(transparent)]
    Bundle(Box<BundleError>),
}

impl From<BundleError> for RemoteError {
    fn from(e: BundleError) -> Self {
        Self::Bundle(Box::new(e))
    }
}

/// Result of remote operations.
pub type Result<T> = std::result::Result<T, RemoteError>;

/// A pushed snapshot's record: its closure, as the pusher saw it. A pull
/// takes it as a plan only; what it fetches is verified against the ids.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Record {
    format: u32,
    snapshot: SnapshotId,
    /// The snapshot's chain, oldest first, itself last.
    snapshots: Vec<SnapshotId>,
    /// Layers, bottom of each chain first.
    layers: Vec<RecordLayer>,
    /// Every other object (blobs, pages, images).
    objects: Vec<ObjectId>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct RecordLayer {
    id: LayerId,
    /// Whether the layer has a directory (its files travel as contents).
    dir: bool,
}

/// A connection to one remote.
pub struct Remote {
    spec: RemoteSpec,
    s3: Arc<dyn ObjectStore>,
    prefix: String,
    rt: tokio::runtime::Runtime,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("spec", &self.spec).finish()
    }
}

/// What a remote holds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Listing {
    /// Snapshots whose push finished.
    pub snapshots: Vec<SnapshotId>,
    /// Tags and the snapshots they name.
    pub tags: Vec<(String, SnapshotId)>,
    /// Objects and file contents stored, and their bytes.
    pub objects: u64,
    /// File contents stored.
    pub contents: u64,
    /// Bytes of objects and contents.
    pub bytes: u64,
}

fn has_credentials() -> bool {
    let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    (set("AWS_ACCESS_KEY_ID") && set("AWS_SECRET_ACCESS_KEY"))
        || set("AWS_WEB_IDENTITY_TOKEN_FILE")
        || set("AWS_CONTAINER_CREDENTIALS_FULL_URI")
        || set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
}

impl Remote {
    /// Connect to `spec` (no request is made until one is needed).
    pub fn open(spec: &RemoteSpec) -> Result<Self> {
        let (bucket, prefix) = spec.bucket_and_prefix()?;
        if !has_credentials() {
            return Err(RemoteError::NoCredentials {
                remote: spec.name.clone(),
            });
        }
        let mut b = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            // A server killed mid-request fails the request within seconds,
            // not after object_store's default of minutes of retries.
            .with_retry(RetryConfig {
                max_retries: 3,
                retry_timeout: Duration::from_secs(20),
                ..RetryConfig::default()
            })
            .with_client_options(
                ClientOptions::new()
                    .with_connect_timeout(Duration::from_secs(5))
                    .with_timeout(Duration::from_secs(300)),
            );
        if let Some(e) = &spec.endpoint {
            b = b
                .with_endpoint(e)
                .with_allow_http(e.starts_with("http://"))
                .with_virtual_hosted_style_request(false);
        }
        if let Some(r) = &spec.region {
            b = b.with_region(r);
        } else if std::env::var_os("AWS_REGION").is_none()
            && std::env::var_os("AWS_DEFAULT_REGION").is_none()
        {
            b = b.with_region("us-east-1");
        }
        let s3 = b
            .build()
            .map_err(|e| RemoteError::Config(format!("remote {}: {e}", spec.name)))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("arbor-remote")
            .enable_all()
            .build()
            .map_err(|e| RemoteError::Local(format!("start the remote's I/O threads: {e}")))?;
        Ok(Self {
            spec: spec.clone(),
            s3: Arc::new(s3),
            prefix,
            rt,
        })
    }

    /// The remote's settings.
    pub fn spec(&self) -> &RemoteSpec {
        &self.spec
    }

    /// Push `roots` (and their parent chains): upload what the remote lacks,
    /// then each root's record, then its tag. `progress` gets bytes uploaded.
    pub fn push(
        &self,
        store: &Store,
        roots: &[BundleRoot],
        progress: &mut dyn FnMut(u64),
    ) -> Result<PushReport> {
        push::push(self, store, roots, progress)
    }

    /// Pull snapshots (full ids) or tags from the remote into `store`.
    /// `progress` gets bytes downloaded.
    pub fn pull(
        &self,
        store: &Store,
        what: &[String],
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<PullReport> {
        pull::pull(self, store, what, progress)
    }

    /// What the remote holds.
    pub fn listing(&self) -> Result<Listing> {
        self.rt.block_on(async {
            let mut l = Listing::default();
            for (dir, is_content) in [("objects", false), ("contents", true)] {
                for (_, size) in self.list_dir(dir).await? {
                    if is_content {
                        l.contents += 1;
                    } else {
                        l.objects += 1;
                    }
                    l.bytes += size;
                }
            }
            for (name, _) in self.list_dir("snapshots").await? {
                if let Some(id) = name.strip_suffix(".json").and_then(|h| h.parse().ok()) {
                    l.snapshots.push(id);
                }
            }
            l.snapshots.sort();
            for (name, _) in self.list_dir("tags").await? {
                let bytes = self.get(&format!("tags/{name}")).await?;
                if let Some(id) = parse_tag(&bytes) {
                    l.tags.push((name, id));
                }
            }
            l.tags.sort();
            Ok(l)
        })
    }

    fn key(&self, rel: &str) -> Key {
        if self.prefix.is_empty() {
            Key::from(rel)
        } else {
            Key::from(format!("{}/{rel}", self.prefix))
        }
    }

    fn request(&self, op: &'static str, rel: &str) -> impl Fn(object_store::Error) -> RemoteError {
        let remote = self.spec.name.clone();
        let key = self.key(rel).to_string();
        move |source| RemoteError::Request {
            remote: remote.clone(),
            op,
            key: key.clone(),
            source: Box::new(source),
        }
    }

    /// Names and sizes of the keys under `dir/`.
    async fn list_dir(&self, dir: &str) -> Result<Vec<(String, u64)>> {
        use futures::TryStreamExt as _;
        let prefix = self.key(dir);
        let metas: Vec<_> = self
            .s3
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(self.request("list", dir))?;
        Ok(metas
            .into_iter()
            .filter_map(|m| {
                let name = m.location.filename()?.to_owned();
                Some((name, m.size))
            })
            .collect())
    }

    /// The bytes of `rel`; `Ok(None)` where the key does not exist.
    async fn get_opt(&self, rel: &str) -> Result<Option<bytes::Bytes>> {
        let key = self.key(rel);
        match self.s3.get(&key).await {
            Ok(r) => Ok(Some(r.bytes().await.map_err(self.request("read", rel))?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.request("read", rel)(e)),
        }
    }

    async fn get(&self, rel: &str) -> Result<bytes::Bytes> {
        let key = self.key(rel);
        let r = self.s3.get(&key).await.map_err(self.request("read", rel))?;
        r.bytes().await.map_err(self.request("read", rel))
    }

    async fn put(&self, rel: &str, bytes: impl Into<PutPayload>) -> Result<()> {
        self.s3
            .put(&self.key(rel), bytes.into())
            .await
            .map(|_| ())
            .map_err(self.request("upload", rel))
    }

    fn not_a_remote(&self, what: String) -> RemoteError {
        RemoteError::NotARemote {
            remote: self.spec.name.clone(),
            url: self.spec.url.clone(),
            what,
        }
    }

    /// Check the format marker; `create` writes it where there is none.
    async fn check_marker(&self, create: bool) -> Result<()> {
        const MARKER: &str = "arbor-remote.json";
        match self.get_opt(MARKER).await? {
            Some(bytes) => {
                #[derive(Deserialize)]
                struct Marker {
                    format: u32,
                }
                let m: Marker = serde_json::from_slice(&bytes).map_err(|e| {
                    self.not_a_remote(format!("{MARKER} is not an Arbor remote's marker: {e}"))
                })?;
                if m.format != FORMAT {
                    return Err(self.not_a_remote(format!(
                        "its layout is format {}; this build reads format {FORMAT}",
                        m.format
                    )));
                }
                Ok(())
            }
            None if create => {
                let body = serde_json::to_vec(&serde_json::json!({ "format": FORMAT }))
                    .unwrap_or_default();
                self.put(MARKER, body).await
            }
            None => Err(self.not_a_remote(format!(
                "there is no {MARKER} under the prefix: nothing was ever pushed there"
            ))),
        }
    }
}

fn parse_tag(bytes: &[u8]) -> Option<SnapshotId> {
    std::str::from_utf8(bytes).ok()?.trim().parse().ok()
}
