//! Reading the three image formats into one description: the layer blobs
//! (with the digests, sizes and compression the image declares), the
//! uncompressed `diff_ids`, and the config.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::ImageError;
use crate::layer::clean_archive_path;
use crate::runtime::Result;
use crate::store::{ImageConfig, Store};

/// A sha256 digest (the only algorithm accepted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digest(pub String);

impl Digest {
    /// Parse `sha256:<64 lowercase hex>`.
    pub fn parse(what: &str, text: &str) -> std::result::Result<Self, ImageError> {
        match text.strip_prefix("sha256:") {
            Some(h)
                if h.len() == 64
                    && h.bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
            {
                Ok(Self(h.to_owned()))
            }
            _ => Err(ImageError::BadDigest {
                what: what.to_owned(),
                digest: text.to_owned(),
            }),
        }
    }

    /// `sha256:<hex>`.
    pub fn text(&self) -> String {
        format!("sha256:{}", self.0)
    }
}

/// A layer blob's compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// A plain tar.
    None,
    /// gzip.
    Gzip,
    /// zstd.
    Zstd,
}

impl Compression {
    /// From the first bytes of a blob.
    pub fn sniff(head: &[u8]) -> Self {
        if head.starts_with(&[0x1f, 0x8b]) {
            Self::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Self::Zstd
        } else {
            Self::None
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "an uncompressed tar",
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
        }
    }
}

pub(super) struct LayerBlob {
    pub path: PathBuf,
    pub shown: String,
    pub digest: Option<Digest>,
    pub size: Option<u64>,
    /// What the media type declares (`None`: undeclared, docker-archive).
    pub compression: Option<Compression>,
}

pub(super) struct Parsed {
    pub format: &'static str,
    pub layers: Vec<LayerBlob>,
    pub diff_ids: Vec<Digest>,
    pub config: ImageConfig,
    pub config_digest: String,
    pub manifest_digest: Option<String>,
    pub name: Option<String>,
}

/// Largest JSON document (index, manifest, config) read.
const MAX_JSON: u64 = 8 << 20;

/// A directory holding an image's files: a user's OCI layout directory, or
/// an archive unpacked into the store's `tmp/` (whose symlinks and hard
/// links are kept in `links`, never created on disk).
struct Files {
    root: PathBuf,
    links: HashMap<String, String>,
    unpacked: bool,
}

impl Files {
    /// The host path of member `rel` (links resolved, at most 16 hops).
    fn path(&self, what: &str, rel: &str) -> std::result::Result<PathBuf, ImageError> {
        let missing = || ImageError::MissingBlob {
            what: what.to_owned(),
            path: rel.to_owned(),
        };
        let mut cur = clean_archive_path(rel.as_bytes())
            .ok()
            .flatten()
            .ok_or_else(missing)?;
        for _ in 0..16 {
            match self.links.get(&cur) {
                Some(next) => cur = next.clone(),
                None => {
                    let p = self.root.join(&cur);
                    return match std::fs::symlink_metadata(&p) {
                        Ok(m) if m.is_file() => Ok(p),
                        Ok(m) if m.file_type().is_symlink() && !self.unpacked => {
                            Err(ImageError::Malformed {
                                what: what.to_owned(),
                                why: format!(
                                    "{rel} is a symlink; an image layout's blobs must be files"
                                ),
                            })
                        }
                        _ => Err(missing()),
                    };
                }
            }
        }
        Err(missing())
    }

    fn exists(&self, rel: &str) -> bool {
        self.links.contains_key(rel) || self.root.join(rel).is_file()
    }

    /// Read a small JSON member, checking its digest and size when given.
    fn json<T: for<'de> Deserialize<'de>>(
        &self,
        what: &str,
        rel: &str,
        digest: Option<(&Digest, Option<u64>)>,
    ) -> std::result::Result<(T, String), ImageError> {
        let path = self.path(what, rel)?;
        let io = |source| ImageError::Io {
            path: path.clone(),
            source,
        };
        let len = std::fs::metadata(&path).map_err(io)?.len();
        if len > MAX_JSON {
            return Err(ImageError::Malformed {
                what: what.to_owned(),
                why: format!("{len} bytes; a JSON document of an image is at most {MAX_JSON}"),
            });
        }
        let bytes = std::fs::read(&path).map_err(io)?;
        let actual = super::sha256_of(&bytes);
        if let Some((d, size)) = digest {
            if actual != d.text() {
                return Err(ImageError::DigestMismatch {
                    what: what.to_owned(),
                    expected: d.text(),
                    actual,
                });
            }
            if let Some(size) = size
                && size != len
            {
                return Err(ImageError::SizeMismatch {
                    what: what.to_owned(),
                    expected: size,
                    actual: len,
                });
            }
        }
        let v = serde_json::from_slice(&bytes).map_err(|e| ImageError::Malformed {
            what: what.to_owned(),
            why: format!("bad JSON: {e}"),
        })?;
        Ok((v, actual))
    }
}

/// Unpack an outer archive (regular files and directories; links recorded).
fn unpack_outer(
    src: &Path,
    dest: &Path,
) -> std::result::Result<HashMap<String, String>, ImageError> {
    let io = |p: &Path| {
        let p = p.to_owned();
        move |source| ImageError::Io {
            path: p.clone(),
            source,
        }
    };
    let bad = |why: String| ImageError::NotAnImage {
        path: src.to_owned(),
        why,
    };
    let file = std::fs::File::open(src).map_err(io(src))?;
    let mut ar = tar::Archive::new(file);
    let mut links = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for entry in ar
        .entries()
        .map_err(|e| bad(format!("not a tar archive: {e}")))?
    {
        let mut entry = entry.map_err(|e| bad(format!("truncated or malformed tar: {e}")))?;
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let Some(rel) =
            clean_archive_path(&raw).map_err(|p| bad(format!("entry {shown:?}: {p}")))?
        else {
            continue;
        };
        if !seen.insert(rel.clone()) && entry.header().entry_type() != tar::EntryType::Directory {
            return Err(bad(format!("entry {shown:?}: duplicate entry")));
        }
        let target = dest.join(&rel);
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                std::fs::create_dir_all(&target).map_err(io(&target))?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(io(parent))?;
                }
                let size = entry.size();
                let mut out = std::fs::File::create(&target).map_err(io(&target))?;
                let n =
                    std::io::copy(&mut (&mut entry).take(size), &mut out).map_err(io(&target))?;
                if n != size {
                    return Err(bad(format!(
                        "truncated: entry {shown:?} ends after {n} of its {size} bytes"
                    )));
                }
            }
            tar::EntryType::Symlink | tar::EntryType::Link => {
                let t = entry
                    .link_name_bytes()
                    .map(|t| t.into_owned())
                    .unwrap_or_default();
                let t = std::str::from_utf8(&t)
                    .map_err(|_| bad(format!("entry {shown:?}: link target is not UTF-8")))?;
                let resolved = if entry.header().entry_type() == tar::EntryType::Symlink {
                    let (parent, _) = rel.rsplit_once('/').unwrap_or(("", ""));
                    let joined = if parent.is_empty() {
                        t.to_owned()
                    } else {
                        format!("{parent}/{t}")
                    };
                    normalize(&joined)
                } else {
                    clean_archive_path(t.as_bytes()).ok().flatten()
                };
                let resolved = resolved.ok_or_else(|| {
                    bad(format!(
                        "entry {shown:?}: link to {t:?} points outside the archive"
                    ))
                })?;
                links.insert(rel, resolved);
            }
            _ => {}
        }
    }
    Ok(links)
}

/// Lexically normalise a relative path; `None` if it climbs out.
fn normalize(p: &str) -> Option<String> {
    if p.starts_with('/') {
        return None;
    }
    let mut out: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            c => out.push(c),
        }
    }
    (!out.is_empty()).then(|| out.join("/"))
}

/// Open `src` (a directory or an archive), unpacking archives under the
/// store's `tmp/` (their directories are pushed on `temps`).
pub(super) fn open(src: &Path, store: &Store, temps: &mut Vec<PathBuf>) -> Result<Parsed> {
    let meta = std::fs::metadata(src).map_err(|source| ImageError::Io {
        path: src.to_owned(),
        source,
    })?;
    let (files, archive) = if meta.is_dir() {
        (
            Files {
                root: src.to_owned(),
                links: HashMap::new(),
                unpacked: false,
            },
            false,
        )
    } else {
        let dir = store.new_temp_path("image-archive");
        std::fs::create_dir(&dir).map_err(|source| ImageError::Io {
            path: dir.clone(),
            source,
        })?;
        temps.push(dir.clone());
        let links = unpack_outer(src, &dir)?;
        (
            Files {
                root: dir,
                links,
                unpacked: true,
            },
            true,
        )
    };
    if files.exists("oci-layout") && files.exists("index.json") {
        Ok(oci(
            &files,
            if archive { "oci-archive" } else { "oci-layout" },
        )?)
    } else if files.exists("manifest.json") {
        Ok(docker(&files)?)
    } else {
        Err(ImageError::NotAnImage {
            path: src.to_owned(),
            why: "no oci-layout and index.json (OCI) nor manifest.json (docker-archive)".into(),
        }
        .into())
    }
}

#[derive(Deserialize)]
struct Descriptor {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    digest: String,
    size: Option<u64>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    platform: Option<Platform>,
}

#[derive(Deserialize)]
struct Platform {
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    os: String,
}

#[derive(Deserialize)]
struct Index {
    manifests: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct OciManifest {
    config: Descriptor,
    layers: Vec<Descriptor>,
}

#[derive(Deserialize, Default)]
struct ConfigFile {
    #[serde(default)]
    config: Option<ContainerConfig>,
    rootfs: Option<RootFs>,
}

#[derive(Deserialize, Default)]
struct ContainerConfig {
    #[serde(rename = "Env", default)]
    env: Option<Vec<String>>,
    #[serde(rename = "WorkingDir", default)]
    working_dir: Option<String>,
    #[serde(rename = "User", default)]
    user: Option<String>,
    #[serde(rename = "Entrypoint", default)]
    entrypoint: Option<Vec<String>>,
    #[serde(rename = "Cmd", default)]
    cmd: Option<Vec<String>>,
    #[serde(rename = "Labels", default)]
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct RootFs {
    diff_ids: Vec<String>,
}

const INDEX_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
const MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];
const CONFIG_TYPES: &[&str] = &[
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
];

fn layer_compression(what: &str, media_type: &str) -> std::result::Result<Compression, ImageError> {
    Ok(match media_type {
        "application/vnd.oci.image.layer.v1.tar"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar"
        | "application/vnd.docker.image.rootfs.diff.tar" => Compression::None,
        "application/vnd.oci.image.layer.v1.tar+gzip"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
        | "application/vnd.docker.image.rootfs.diff.tar.gzip"
        | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip" => Compression::Gzip,
        "application/vnd.oci.image.layer.v1.tar+zstd"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd" => Compression::Zstd,
        other => {
            return Err(ImageError::UnknownMediaType {
                what: what.to_owned(),
                media_type: other.to_owned(),
            });
        }
    })
}

fn blob_path(d: &Digest) -> String {
    format!("blobs/sha256/{}", d.0)
}

/// The last path component of a reference (`localhost/py:3` → `py:3`).
fn short_name(reference: &str) -> String {
    reference.rsplit('/').next().unwrap_or(reference).to_owned()
}

fn config_of(
    cfg: ConfigFile,
    what: &str,
) -> std::result::Result<(ImageConfig, Vec<Digest>), ImageError> {
    let rootfs = cfg.rootfs.ok_or_else(|| ImageError::Malformed {
        what: what.to_owned(),
        why: "no rootfs.diff_ids".into(),
    })?;
    let diff_ids = rootfs
        .diff_ids
        .iter()
        .map(|d| Digest::parse(&format!("{what}: diff_id"), d))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let c = cfg.config.unwrap_or_default();
    Ok((
        ImageConfig {
            env: c.env.unwrap_or_default(),
            working_dir: c.working_dir.filter(|w| !w.is_empty()),
            user: c.user.filter(|u| !u.is_empty()),
            entrypoint: c.entrypoint,
            cmd: c.cmd,
            labels: c.labels.unwrap_or_default(),
        },
        diff_ids,
    ))
}

fn oci(files: &Files, format: &'static str) -> std::result::Result<Parsed, ImageError> {
    let (index, _): (Index, _) = files.json("index.json", "index.json", None)?;
    let mut desc = index
        .manifests
        .into_iter()
        .next()
        .ok_or_else(|| ImageError::Malformed {
            what: "index.json".into(),
            why: "no manifests".into(),
        })?;
    let mut name = desc
        .annotations
        .get("org.opencontainers.image.ref.name")
        .or_else(|| desc.annotations.get("io.containerd.image.name"))
        .map(|n| short_name(n));
    // Nested indexes: pick linux/amd64 (else the first manifest).
    for _ in 0..4 {
        if !INDEX_TYPES.contains(&desc.media_type.as_str()) {
            break;
        }
        let what = format!("index {}", desc.digest);
        let d = Digest::parse(&what, &desc.digest)?;
        let (inner, _): (Index, _) = files.json(&what, &blob_path(&d), Some((&d, desc.size)))?;
        let mut ms = inner.manifests;
        let pick = ms
            .iter()
            .position(|m| {
                m.platform.as_ref().is_some_and(|p| {
                    p.os == "linux"
                        && p.architecture == std::env::consts::ARCH.replace("x86_64", "amd64")
                })
            })
            .unwrap_or(0);
        if ms.is_empty() {
            return Err(ImageError::Malformed {
                what,
                why: "no manifests".into(),
            });
        }
        desc = ms.swap_remove(pick);
        if name.is_none() {
            name = desc
                .annotations
                .get("org.opencontainers.image.ref.name")
                .map(|n| short_name(n));
        }
    }
    let what = format!("manifest {}", desc.digest);
    if !desc.media_type.is_empty() && !MANIFEST_TYPES.contains(&desc.media_type.as_str()) {
        return Err(ImageError::UnknownMediaType {
            what,
            media_type: desc.media_type,
        });
    }
    let md = Digest::parse(&what, &desc.digest)?;
    let (manifest, _): (OciManifest, _) =
        files.json(&what, &blob_path(&md), Some((&md, desc.size)))?;
    let cwhat = format!("config {}", manifest.config.digest);
    if !CONFIG_TYPES.contains(&manifest.config.media_type.as_str()) {
        return Err(ImageError::UnknownMediaType {
            what: cwhat,
            media_type: manifest.config.media_type,
        });
    }
    let cd = Digest::parse(&cwhat, &manifest.config.digest)?;
    let (cfg, config_digest): (ConfigFile, _) =
        files.json(&cwhat, &blob_path(&cd), Some((&cd, manifest.config.size)))?;
    let (config, diff_ids) = config_of(cfg, &cwhat)?;
    let mut layers = Vec::new();
    for (i, l) in manifest.layers.iter().enumerate() {
        let lwhat = format!("layer {} ({})", i + 1, l.digest);
        let compression = layer_compression(&lwhat, &l.media_type)?;
        let d = Digest::parse(&lwhat, &l.digest)?;
        layers.push(LayerBlob {
            path: files.path(&lwhat, &blob_path(&d))?,
            shown: d.text(),
            digest: Some(d),
            size: l.size,
            compression: Some(compression),
        });
    }
    Ok(Parsed {
        format,
        layers,
        diff_ids,
        config,
        config_digest,
        manifest_digest: Some(md.text()),
        name,
    })
}

#[derive(Deserialize)]
struct DockerEntry {
    #[serde(rename = "Config")]
    config: String,
    #[serde(rename = "RepoTags", default)]
    repo_tags: Option<Vec<String>>,
    #[serde(rename = "Layers")]
    layers: Vec<String>,
}

/// The digest a member's name states (`blobs/sha256/<hex>`, `<hex>.json`,
/// `<hex>/layer.tar`), if any.
fn named_digest(rel: &str) -> Option<Digest> {
    let hexish = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    let parts: Vec<&str> = rel.split('/').collect();
    match parts.as_slice() {
        ["blobs", "sha256", h] if hexish(h) => Some(Digest(h.to_ascii_lowercase())),
        [f] if f.strip_suffix(".json").is_some_and(hexish) => {
            Some(Digest(f.trim_end_matches(".json").to_ascii_lowercase()))
        }
        _ => None,
    }
}

fn docker(files: &Files) -> std::result::Result<Parsed, ImageError> {
    let (entries, _): (Vec<DockerEntry>, _) = files.json("manifest.json", "manifest.json", None)?;
    let entry = entries
        .into_iter()
        .next()
        .ok_or_else(|| ImageError::Malformed {
            what: "manifest.json".into(),
            why: "no images".into(),
        })?;
    let cwhat = format!("config {}", entry.config);
    let named = named_digest(&entry.config);
    let (cfg, config_digest): (ConfigFile, _) =
        files.json(&cwhat, &entry.config, named.as_ref().map(|d| (d, None)))?;
    let (config, diff_ids) = config_of(cfg, &cwhat)?;
    let mut layers = Vec::new();
    for (i, rel) in entry.layers.iter().enumerate() {
        let lwhat = format!("layer {} ({rel})", i + 1);
        layers.push(LayerBlob {
            path: files.path(&lwhat, rel)?,
            shown: rel.clone(),
            digest: named_digest(rel),
            size: None,
            compression: None,
        });
    }
    Ok(Parsed {
        format: "docker-archive",
        layers,
        diff_ids,
        config,
        config_digest,
        manifest_digest: None,
        name: entry
            .repo_tags
            .and_then(|t| t.into_iter().next())
            .map(|n| short_name(&n)),
    })
}
