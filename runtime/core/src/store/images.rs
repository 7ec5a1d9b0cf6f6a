//! Images in the store: an [`ImageRecord`] object (its layer chain, the
//! image's configuration and where it came from) and names for images
//! (`refs/images/<name>`, the 64-hex image id and a newline). An image's
//! layers are ordinary sealed layers, so two images that share base layers
//! store them once.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::fsio::atomic_write_with;
use super::refs::{list_refs, read_ref};
use super::{LayerId, ObjectId, ObjectKind, Result, Store, StoreError, fsync_dir, io_err};

/// The configuration of an image that sandboxes on it use.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageConfig {
    /// `KEY=VALUE` entries; they replace the fixed environment's variables
    /// of the same name in every action on the image.
    #[serde(default)]
    pub env: Vec<String>,
    /// The image's working directory (the workspace also appears there when
    /// a snapshot is imported at it; it stays at `/workspace` as well).
    #[serde(default)]
    pub working_dir: Option<String>,
    /// The image's user (`USER`): every action on the image runs as it
    /// (see [`crate::image::user`]).
    #[serde(default)]
    pub user: Option<String>,
    /// Entrypoint (recorded).
    #[serde(default)]
    pub entrypoint: Option<Vec<String>>,
    /// Cmd (recorded).
    #[serde(default)]
    pub cmd: Option<Vec<String>>,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// Where an image came from, with the digests that were verified.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageSource {
    /// `oci-layout`, `oci-archive`, `docker-archive` or `debian` (built).
    pub format: String,
    /// The manifest's digest (OCI), when there is one.
    #[serde(default)]
    pub manifest_digest: Option<String>,
    /// The config blob's digest.
    pub config_digest: String,
    /// The uncompressed layer digests (`rootfs.diff_ids`), bottom first.
    pub diff_ids: Vec<String>,
    /// The name the archive gave the image, if any.
    #[serde(default)]
    pub name: Option<String>,
    /// For a built image: the recipe it was built from.
    #[serde(default)]
    pub recipe: Option<String>,
}

/// An image: a chain of layers (bottom first) with its configuration.
/// Stored as an [`ObjectKind::Image`] object; the image id is that object's id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecord {
    /// Layers, bottom first: sealed directories `layers/<id>`.
    pub layers: Vec<LayerId>,
    /// The configuration applied to sandboxes.
    pub config: ImageConfig,
    /// Provenance and verified digests.
    pub source: ImageSource,
    /// Bytes of file content over all layers.
    pub bytes: u64,
}

/// Check an image name: 1–128 characters of `[A-Za-z0-9._:-]`, not starting with `.`.
pub fn validate_image_name(name: &str) -> Result<()> {
    let ok = (1..=128).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidImageName(name.to_owned()))
    }
}

impl Store {
    fn image_ref_path(&self, name: &str) -> PathBuf {
        self.root().join("refs/images").join(name)
    }

    /// Store an image record (idempotent); its layers must already be sealed.
    pub fn put_image(&self, image: &ImageRecord) -> Result<ObjectId> {
        for l in &image.layers {
            if !self.layer_dir(l).is_dir() {
                return Err(StoreError::NotFound { id: *l });
            }
        }
        let bytes = serde_json::to_vec(image).map_err(|source| StoreError::Json {
            what: "image",
            source,
        })?;
        self.put(ObjectKind::Image, &bytes)
    }

    /// Load a verified image record.
    pub fn get_image(&self, id: &ObjectId) -> Result<ImageRecord> {
        let bytes = self.get(id, ObjectKind::Image)?;
        serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
            id: *id,
            path: self.object_path(id),
            reason: format!("bad JSON: {e}"),
        })
    }

    /// Name an image (creating or moving the name).
    pub fn set_image_name(&self, name: &str, id: &ObjectId) -> Result<()> {
        validate_image_name(name)?;
        self.get_image(id)?;
        let bytes = format!("{}\n", id.to_hex());
        atomic_write_with(
            &self.tmp_dir(),
            &self.image_ref_path(name),
            bytes.as_bytes(),
            None,
        )
    }

    /// The image named `name`, if the name exists.
    pub fn image_by_name(&self, name: &str) -> Result<Option<ObjectId>> {
        validate_image_name(name)?;
        read_ref(self.image_ref_path(name), "image")
    }

    /// Every image name and its image (files with invalid names are skipped).
    pub fn image_names(&self) -> Result<BTreeMap<String, ObjectId>> {
        list_refs(&self.root().join("refs/images"), validate_image_name, |n| {
            self.image_by_name(n)
        })
    }

    /// Remove the name `name` (the image's data stays while a snapshot uses
    /// it, until gc otherwise).
    pub fn remove_image_name(&self, name: &str) -> Result<ObjectId> {
        let Some(id) = self.image_by_name(name)? else {
            return Err(StoreError::UnknownImage(name.to_owned()));
        };
        let path = self.image_ref_path(name);
        fs::remove_file(&path).map_err(io_err("remove image name", &path))?;
        fsync_dir(&self.root().join("refs/images"))?;
        Ok(id)
    }

    /// The image an image build cache key (64 hex digits: the hash of a
    /// recipe prefix, see `crate::image::build`) led to, if one was recorded.
    /// A cache entry is not a gc root: the image it names may be gone.
    pub fn build_cache_get(&self, key: &str) -> Result<Option<ObjectId>> {
        read_ref(self.build_cache_path(key)?, "image")
    }

    /// Record that the build cache key `key` led to image `id`.
    pub fn build_cache_set(&self, key: &str, id: &ObjectId) -> Result<()> {
        let path = self.build_cache_path(key)?;
        let bytes = format!("{}\n", id.to_hex());
        atomic_write_with(&self.tmp_dir(), &path, bytes.as_bytes(), None)
    }

    /// Forget the build cache entry `key` (its image is gone).
    pub fn build_cache_remove(&self, key: &str) -> Result<()> {
        let path = self.build_cache_path(key)?;
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("remove build cache entry", &path)(e)),
        }
    }

    fn build_cache_path(&self, key: &str) -> Result<std::path::PathBuf> {
        if key.len() != 64 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::BadTag {
                path: self.root().join("refs/image-builds").join(key),
                reason: "a build cache key is 64 hex digits".to_owned(),
            });
        }
        Ok(self.root().join("refs/image-builds").join(key))
    }

    /// Resolve an image name, a full image id or a unique id prefix (of a
    /// named image, at least 4 hex digits).
    pub fn resolve_image(&self, what: &str) -> Result<ObjectId> {
        if let Ok(id) = what.parse::<ObjectId>()
            && self.object_kind(&id).is_ok_and(|k| k == ObjectKind::Image)
        {
            return Ok(id);
        }
        if validate_image_name(what).is_ok()
            && let Some(id) = self.image_by_name(what)?
        {
            return Ok(id);
        }
        if (4..64).contains(&what.len()) && what.bytes().all(|b| b.is_ascii_hexdigit()) {
            let prefix = what.to_ascii_lowercase();
            let mut found: Vec<ObjectId> = self
                .image_names()?
                .into_values()
                .filter(|id| id.to_hex().starts_with(&prefix))
                .collect();
            found.dedup();
            if found.len() == 1 {
                return Ok(found[0]);
            }
        }
        Err(StoreError::UnknownImage(what.to_owned()))
    }
}
