//! Container images as layer chains: `arbor image import` of an OCI image
//! layout directory, an `oci-archive` tarball or a `docker-archive` tarball
//! (what `podman save`, `docker save` and `skopeo copy` write).
//!
//! Every layer becomes an ordinary Arbor layer (content addressed, so images
//! that share base layers store them once); see [`crate::layer::untar_layer`]
//! for how a layer's entries are translated and which are refused. Every
//! digest the image names is checked: the manifest's and the config's
//! (sha256 and size), each compressed layer blob's, and each layer's
//! uncompressed `diff_id` from the config. Nothing is stored until every
//! layer has been unpacked and verified, so a refused image leaves the store
//! as it was (a `fsck` finds no garbage from it).

pub mod build;
mod format;
pub mod user;
pub mod write;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use sha2::Digest as _;

use crate::layer::{self, UntarLimits, UntarReport};
use crate::runtime::{Result, Runtime, RuntimeError};
use crate::store::{EntryKind, ImageRecord, ImageSource, LayerId, ObjectId, validate_image_name};

pub use build::{BuildEvent, BuildStep, BuiltImage, ImageRecipe, StepReport};
pub use format::{Compression, Digest};

/// Errors of image import, each naming what it concerns.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The path is neither an OCI layout, an oci-archive nor a docker-archive.
    #[error("{path}: not an image ({why})")]
    NotAnImage {
        /// The path given.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// A JSON document of the image is malformed or lacks a field.
    #[error("{what}: {why}")]
    Malformed {
        /// The document (`index.json`, `manifest sha256:…`, `config …`).
        what: String,
        /// What is wrong.
        why: String,
    },
    /// A blob named by the image is missing.
    #[error("{what}: blob {path} is missing from the image")]
    MissingBlob {
        /// What referenced it.
        what: String,
        /// The blob's path inside the image.
        path: String,
    },
    /// A digest does not match the content.
    #[error("{what}: digest mismatch: the image says {expected}, the content is {actual}")]
    DigestMismatch {
        /// The blob or layer.
        what: String,
        /// The digest named by the image.
        expected: String,
        /// The digest of what is there.
        actual: String,
    },
    /// A size does not match the content.
    #[error("{what}: size mismatch: the image says {expected} bytes, the blob has {actual}")]
    SizeMismatch {
        /// The blob.
        what: String,
        /// The size named by the image.
        expected: u64,
        /// The blob's size.
        actual: u64,
    },
    /// A digest algorithm other than sha256, or a malformed digest.
    #[error("{what}: unsupported or malformed digest {digest:?} (sha256 only)")]
    BadDigest {
        /// Where it was found.
        what: String,
        /// The digest text.
        digest: String,
    },
    /// A media type Arbor does not import.
    #[error("{what}: unknown media type {media_type:?}")]
    UnknownMediaType {
        /// The descriptor.
        what: String,
        /// Its media type.
        media_type: String,
    },
    /// The compression a media type names is not what the blob holds.
    #[error("{what}: the media type says {declared}, the blob is {found}")]
    CompressionMismatch {
        /// The layer.
        what: String,
        /// What the media type says.
        declared: &'static str,
        /// What the magic bytes say.
        found: &'static str,
    },
    /// The config lists a different number of layers than the manifest.
    #[error("{what}: the manifest has {layers} layers but the config lists {diff_ids} diff_ids")]
    LayerCount {
        /// The image.
        what: String,
        /// Layers in the manifest.
        layers: usize,
        /// diff_ids in the config.
        diff_ids: usize,
    },
    /// A layer could not be decompressed (corrupt or truncated stream).
    #[error("{what}: cannot decompress ({compression}): {source}")]
    Decompress {
        /// The layer.
        what: String,
        /// The compression.
        compression: &'static str,
        /// The decoder's error.
        #[source]
        source: std::io::Error,
    },
    /// A field of an image recipe is invalid.
    #[error("image recipe: {field}: {why}")]
    BadRecipe {
        /// The field (`debian`, `packages`, `pip`, `run`, `allow_hosts`).
        field: &'static str,
        /// What is wrong.
        why: String,
    },
    /// The root filesystem builder failed or is missing.
    #[error("{}: {why}", program.display())]
    Builder {
        /// The program (`mmdebstrap`).
        program: PathBuf,
        /// What happened (its exit status and last lines of output).
        why: String,
    },
    /// A build step (pip or run) failed in its sandbox.
    #[error("image build step {step:?} failed: {why}")]
    StepFailed {
        /// The step's command.
        step: String,
        /// Its exit status and output.
        why: String,
    },
    /// Reading a file of the image failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Options of [`Runtime::import_image`].
#[derive(Clone, Debug, Default)]
pub struct ImageImport {
    /// The name to give the image (else the archive's own name, else
    /// `image-<short id>`).
    pub name: Option<String>,
    /// Bounds on each layer.
    pub limits: UntarLimits,
}

/// What [`Runtime::import_image`] stored.
#[derive(Clone, Debug)]
pub struct ImportedImage {
    /// The image id.
    pub id: ObjectId,
    /// Its name.
    pub name: String,
    /// The record.
    pub record: ImageRecord,
    /// Layers that were new to the store.
    pub layers_new: usize,
    /// Layers the store already had (shared with another image).
    pub layers_shared: usize,
    /// Per-layer counts, bottom first.
    pub reports: Vec<UntarReport>,
}

/// An image as Arbor uses it: its id and record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// The image id.
    pub id: ObjectId,
    /// The record.
    pub record: ImageRecord,
    /// The ids its actions run as (`Ok(None)`: root), resolved from the
    /// config's `User` and the image's `/etc/passwd` and `/etc/group` (see
    /// [`user`]); `Err` names why the user cannot be resolved, and sandboxes
    /// on the image do not open.
    pub user: std::result::Result<Option<user::ImageUser>, String>,
}

impl Image {
    /// The fixed environment of actions on this image: Arbor's, with the
    /// image's `Env` entries replacing or adding variables.
    pub fn fixed_env(&self) -> Vec<(String, String)> {
        let mut env = crate::sandbox::env::fixed_env();
        for kv in &self.record.config.env {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            match env.iter_mut().find(|(ek, _)| ek == k) {
                Some(slot) => slot.1 = v.to_owned(),
                None => env.push((k.to_owned(), v.to_owned())),
            }
        }
        env
    }
}

/// A streaming sha256 over everything read through it.
struct Hashing<R> {
    inner: R,
    hasher: sha2::Sha256,
    bytes: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

fn sha256_hex(h: sha2::Sha256) -> String {
    format!("sha256:{}", hex::encode(h.finalize()))
}

/// `sha256:<hex>` of bytes in memory.
fn sha256_of(bytes: &[u8]) -> String {
    sha256_hex(sha2::Sha256::new_with_prefix(bytes))
}

/// sha256 and length of a file.
fn hash_file(path: &Path) -> std::result::Result<(String, u64), ImageError> {
    let f = std::fs::File::open(path).map_err(|source| ImageError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut h = Hashing {
        inner: f,
        hasher: sha2::Sha256::new(),
        bytes: 0,
    };
    std::io::copy(&mut h, &mut std::io::sink()).map_err(|source| ImageError::Io {
        path: path.to_owned(),
        source,
    })?;
    Ok((sha256_hex(h.hasher), h.bytes))
}

/// A staged (unpacked, verified, not yet stored) layer.
struct Staged {
    dir: PathBuf,
    tree: crate::store::Tree,
    report: UntarReport,
}

/// The merged paths of the layers staged so far (for whiteouts).
#[derive(Default)]
struct MergedPaths(BTreeSet<String>);

impl MergedPaths {
    fn remove_below(&mut self, path: &str) {
        let prefix = format!("{path}/");
        let doomed: Vec<String> = self
            .0
            .range(prefix.clone()..)
            .take_while(|p| p.starts_with(&prefix))
            .cloned()
            .collect();
        for p in doomed {
            self.0.remove(&p);
        }
    }

    fn apply(&mut self, tree: &crate::store::Tree) {
        for e in &tree.entries {
            match &e.kind {
                EntryKind::Whiteout => {
                    self.0.remove(&e.path);
                    self.remove_below(&e.path);
                }
                EntryKind::Dir { opaque } => {
                    if *opaque {
                        self.remove_below(&e.path);
                    }
                    self.0.insert(e.path.clone());
                }
                _ => {
                    self.remove_below(&e.path);
                    self.0.insert(e.path.clone());
                }
            }
        }
    }
}

impl Runtime {
    /// Import an image (OCI layout directory, oci-archive or docker-archive
    /// tarball) and name it. See the module documentation.
    pub fn import_image(&self, src: &Path, opts: &ImageImport) -> Result<ImportedImage> {
        if let Some(name) = &opts.name {
            validate_image_name(name)?;
        }
        let store = self.store();
        let _lock = store.lock_shared()?;
        let mut temps: Vec<PathBuf> = Vec::new();
        let result = self.import_image_inner(src, opts, &mut temps);
        for t in temps {
            if t.exists() {
                crate::cleanup::remove_dir_forcefully(&t);
            }
        }
        result
    }

    fn import_image_inner(
        &self,
        src: &Path,
        opts: &ImageImport,
        temps: &mut Vec<PathBuf>,
    ) -> Result<ImportedImage> {
        let store = self.store();
        let parsed = format::open(src, store, temps)?;
        let what = src.display().to_string();
        if parsed.layers.len() != parsed.diff_ids.len() {
            return Err(ImageError::LayerCount {
                what,
                layers: parsed.layers.len(),
                diff_ids: parsed.diff_ids.len(),
            }
            .into());
        }
        let owners = self.owner_map();
        let mut merged = MergedPaths::default();
        let mut staged: Vec<Staged> = Vec::new();
        for (i, (blob, diff_id)) in parsed.layers.iter().zip(&parsed.diff_ids).enumerate() {
            let lname = format!("layer {} ({})", i + 1, blob.shown);
            if let Some(d) = &blob.digest {
                let (actual, len) = hash_file(&blob.path)?;
                if actual != d.text() {
                    return Err(ImageError::DigestMismatch {
                        what: lname,
                        expected: d.text(),
                        actual,
                    }
                    .into());
                }
                if let Some(size) = blob.size
                    && size != len
                {
                    return Err(ImageError::SizeMismatch {
                        what: lname,
                        expected: size,
                        actual: len,
                    }
                    .into());
                }
            }
            let file = std::fs::File::open(&blob.path).map_err(|source| ImageError::Io {
                path: blob.path.clone(),
                source,
            })?;
            let mut buffered = BufReader::with_capacity(1 << 16, file);
            let found =
                Compression::sniff(buffered.fill_buf().map_err(|source| ImageError::Io {
                    path: blob.path.clone(),
                    source,
                })?);
            if let Some(declared) = blob.compression
                && declared != found
            {
                return Err(ImageError::CompressionMismatch {
                    what: lname,
                    declared: declared.name(),
                    found: found.name(),
                }
                .into());
            }
            let decoder: Box<dyn Read> = match found {
                Compression::None => Box::new(buffered),
                Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(buffered)),
                Compression::Zstd => {
                    Box::new(zstd::stream::read::Decoder::with_buffer(buffered).map_err(
                        |source| ImageError::Decompress {
                            what: lname.clone(),
                            compression: "zstd",
                            source,
                        },
                    )?)
                }
            };
            let mut hashing = Hashing {
                inner: decoder,
                hasher: sha2::Sha256::new(),
                bytes: 0,
            };
            let dir = store.new_temp_path("image-layer");
            std::fs::create_dir(&dir).map_err(|source| ImageError::Io {
                path: dir.clone(),
                source,
            })?;
            temps.push(dir.clone());
            let below = |p: &str| merged.0.contains(p);
            let report =
                match layer::untar_layer(&mut hashing, &dir, &below, &owners, &opts.limits, &lname)
                {
                    Ok(r) => r,
                    Err(layer::LayerError::Archive {
                        problem: layer::ArchiveProblem::Malformed(why),
                        ..
                    }) if found != Compression::None => {
                        return Err(ImageError::Decompress {
                            what: lname,
                            compression: found.name(),
                            source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
                        }
                        .into());
                    }
                    Err(e) => return Err(e.into()),
                };
            let actual = sha256_hex(hashing.hasher);
            if actual != diff_id.text() {
                return Err(ImageError::DigestMismatch {
                    what: format!("{lname}, uncompressed (diff_id)"),
                    expected: diff_id.text(),
                    actual,
                }
                .into());
            }
            let tree = layer::tree_of_dir(&dir, &owners)?;
            crate::store::validate_tree(&tree)?;
            merged.apply(&tree);
            staged.push(Staged { dir, tree, report });
        }
        // Everything is verified: store the layers, the record, the name.
        let mut layers: Vec<LayerId> = Vec::new();
        let (mut new, mut shared) = (0, 0);
        let mut reports = Vec::new();
        let mut bytes = 0u64;
        for s in staged {
            let (id, is_new) = store_layer(store, &s.dir, &s.tree)?;
            if is_new {
                new += 1;
            } else {
                shared += 1;
            }
            bytes += s.report.bytes;
            reports.push(s.report);
            layers.push(id);
        }
        let record = ImageRecord {
            layers,
            config: parsed.config,
            source: ImageSource {
                format: parsed.format.to_owned(),
                manifest_digest: parsed.manifest_digest,
                config_digest: parsed.config_digest,
                diff_ids: parsed.diff_ids.iter().map(Digest::text).collect(),
                name: parsed.name.clone(),
                recipe: None,
            },
            bytes,
        };
        let id = store.put_image(&record)?;
        let name = match (&opts.name, &parsed.name) {
            (Some(n), _) => n.clone(),
            (None, Some(n)) if validate_image_name(n).is_ok() => n.clone(),
            _ => format!("image-{}", id.short()),
        };
        store.set_image_name(&name, &id)?;
        Ok(ImportedImage {
            id,
            name,
            record,
            layers_new: new,
            layers_shared: shared,
            reports,
        })
    }

    /// An image by name, id or unique id prefix.
    pub fn image(&self, what: &str) -> Result<Image> {
        let id = self.store().resolve_image(what)?;
        self.image_by_id(&id)
    }

    /// The image with id `id`.
    pub fn image_by_id(&self, id: &ObjectId) -> Result<Image> {
        let record = self.store().get_image(id)?;
        let spec = record.config.user.as_deref().unwrap_or_default();
        let user = if user::needs_databases(spec) {
            let chain: Vec<PathBuf> = record
                .layers
                .iter()
                .rev()
                .map(|l| self.store().layer_dir(l))
                .collect();
            let passwd = user::read_from_layers(&chain, "etc/passwd");
            let group = user::read_from_layers(&chain, "etc/group");
            user::resolve(spec, passwd.as_deref(), group.as_deref())
        } else {
            user::resolve(spec, None, None)
        };
        Ok(Image {
            id: *id,
            record,
            user,
        })
    }

    /// Every named image, by name.
    pub fn images(&self) -> Result<Vec<(String, Image)>> {
        let mut out = Vec::new();
        for (name, id) in self.store().image_names()? {
            out.push((name, self.image_by_id(&id)?));
        }
        Ok(out)
    }

    /// Remove an image's name; returns how many listed snapshots still use
    /// the image (its layers stay while they do).
    pub fn remove_image(&self, name: &str) -> Result<(ObjectId, usize)> {
        let store = self.store();
        let id = store.remove_image_name(name)?;
        let mut users = 0;
        for s in store.snapshots()? {
            if let Ok(m) = store.get_manifest(&s)
                && m.image == Some(id)
            {
                users += 1;
            }
        }
        Ok((id, users))
    }
}

/// Store a staged layer directory whose tree is `tree`: the tree object,
/// then the directory renamed into `layers/<id>` (unless the store has that
/// layer already). Returns the layer id and whether it was new.
fn store_layer(
    store: &crate::store::Store,
    dir: &Path,
    tree: &crate::store::Tree,
) -> Result<(LayerId, bool)> {
    let id = store.put_tree(tree)?;
    let dest = store.layer_dir(&id);
    if dest.exists() {
        return Ok((id, false));
    }
    crate::seal::install_dir(dir, &dest)?;
    if let Some(parent) = dest.parent() {
        crate::store::fsync_dir(parent)?;
    }
    Ok((id, true))
}

impl From<ImageError> for RuntimeError {
    fn from(e: ImageError) -> Self {
        RuntimeError::Image(Box::new(e))
    }
}

#[cfg(test)]
mod tests;
