//! Writing an OCI image layout (the format `skopeo copy oci:DIR` and
//! `podman save --format oci-dir` write) from layer tarballs: used to
//! build images from root filesystems, and by the tests.

use std::io::Write;
use std::path::Path;

use sha2::Digest as _;

use super::Compression;
use crate::store::ImageConfig;

/// One layer: an uncompressed tar and how to compress it in the layout.
#[derive(Clone, Debug)]
pub struct LayoutLayer {
    /// The layer's tar stream, uncompressed.
    pub tar: Vec<u8>,
    /// The compression of its blob.
    pub compression: Compression,
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

fn put_blob(dir: &Path, bytes: &[u8]) -> std::io::Result<String> {
    let h = sha(bytes);
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs)?;
    std::fs::write(blobs.join(&h), bytes)?;
    Ok(format!("sha256:{h}"))
}

/// Compress `tar` as `compression` says.
pub fn compress(tar: &[u8], compression: Compression) -> std::io::Result<Vec<u8>> {
    Ok(match compression {
        Compression::None => tar.to_vec(),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(tar)?;
            e.finish()?
        }
        Compression::Zstd => zstd::stream::encode_all(tar, 3)?,
    })
}

/// The OCI media type of a layer blob.
pub fn layer_media_type(compression: Compression) -> &'static str {
    match compression {
        Compression::None => "application/vnd.oci.image.layer.v1.tar",
        Compression::Gzip => "application/vnd.oci.image.layer.v1.tar+gzip",
        Compression::Zstd => "application/vnd.oci.image.layer.v1.tar+zstd",
    }
}

/// The image config JSON (OCI) for `config` over layers with `diff_ids`.
pub fn config_json(config: &ImageConfig, diff_ids: &[String]) -> serde_json::Value {
    serde_json::json!({
        "architecture": std::env::consts::ARCH.replace("x86_64", "amd64"),
        "os": "linux",
        "config": {
            "Env": config.env,
            "WorkingDir": config.working_dir.clone().unwrap_or_default(),
            "User": config.user.clone().unwrap_or_default(),
            "Entrypoint": config.entrypoint,
            "Cmd": config.cmd,
            "Labels": config.labels,
        },
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    })
}

/// Write an OCI image layout into the directory `dir` (created if absent):
/// each layer compressed as asked, the config, the manifest and an
/// `index.json` naming the image `name`.
pub fn write_oci_layout(
    dir: &Path,
    layers: &[LayoutLayer],
    config: &ImageConfig,
    name: Option<&str>,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut descs = Vec::new();
    let mut diff_ids = Vec::new();
    for l in layers {
        diff_ids.push(format!("sha256:{}", sha(&l.tar)));
        let blob = compress(&l.tar, l.compression)?;
        let digest = put_blob(dir, &blob)?;
        descs.push(serde_json::json!({
            "mediaType": layer_media_type(l.compression),
            "digest": digest,
            "size": blob.len(),
        }));
    }
    let cfg = serde_json::to_vec(&config_json(config, &diff_ids))?;
    let cfg_digest = put_blob(dir, &cfg)?;
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": cfg_digest,
            "size": cfg.len(),
        },
        "layers": descs,
    }))?;
    let m_digest = put_blob(dir, &manifest)?;
    let mut desc = serde_json::json!({
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": m_digest,
        "size": manifest.len(),
    });
    if let Some(n) = name {
        desc["annotations"] = serde_json::json!({"org.opencontainers.image.ref.name": n});
    }
    std::fs::write(
        dir.join("index.json"),
        serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "manifests": [desc]}))?,
    )?;
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    Ok(())
}

/// A tar of the directory tree `src` (symlinks kept as links, owners
/// root), for building an image from a root filesystem.
pub fn tar_dir(src: &Path) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    b.follow_symlinks(false);
    b.mode(tar::HeaderMode::Deterministic);
    b.append_dir_all(".", src)?;
    b.into_inner()
}

/// A minimal root filesystem in `dir` made of the host's own `tools` (found
/// in `/usr/bin` or `/bin`) and the shared libraries `ldd` names for them,
/// laid out merged-`/usr` (`bin` → `usr/bin`, `lib` → `usr/lib`, the
/// dynamic loader at the path the binaries name). For tests and benches
/// that need a real image without a package registry.
pub fn rootfs_of_host_tools(dir: &Path, tools: &[&str]) -> std::io::Result<()> {
    let copy = |from: &Path, to: &Path| -> std::io::Result<()> {
        if let Some(p) = to.parent() {
            std::fs::create_dir_all(p)?;
        }
        std::fs::copy(std::fs::canonicalize(from)?, to).map(|_| ())
    };
    for tool in tools {
        let host = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{tool} is not on this host"),
                )
            })?;
        copy(&host, &dir.join("usr/bin").join(tool))?;
        let out = std::process::Command::new("ldd").arg(&host).output()?;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let lib = match line.split_once("=>") {
                Some((_, r)) => r.split_whitespace().next(),
                None => line.split_whitespace().next(),
            };
            let Some(lib) = lib.filter(|l| l.starts_with('/')) else {
                continue;
            };
            let rel = Path::new(lib).strip_prefix("/").unwrap_or(Path::new(lib));
            let rel = if rel.starts_with("lib64") || rel.starts_with("usr") {
                rel.to_path_buf()
            } else {
                Path::new("usr").join(rel)
            };
            copy(Path::new(lib), &dir.join(rel))?;
        }
    }
    for (link, target) in [
        ("bin", "usr/bin"),
        ("lib", "usr/lib"),
        ("usr/bin/sh", "bash"),
    ] {
        if std::fs::symlink_metadata(dir.join(link)).is_err() {
            std::os::unix::fs::symlink(target, dir.join(link))?;
        }
    }
    std::fs::create_dir_all(dir.join("etc"))
}
