//! A layer directory as a bundle carries it: read file by file from a sealed
//! layer ([`LayerFiles`]), and written again, exactly, from its tree and the
//! file contents ([`rebuild_layer`]) — directories with their modes and
//! opaque markers, files, symlinks, FIFOs and whiteouts, owners mapped
//! through the receiving store's [`OwnerMap`]. Each content is re-hashed as it
//! is copied; the rebuilt directory is then scanned and compared with the
//! tree, so what gets installed is the layer the tree names or nothing.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::fsio::{Relaxed, open_dir_path};
use super::materialize::open_source_file;
use super::writer::{EntryWriter, discard_dest, prepare_dest};
use super::{LayerError, OwnerMap, Result, tree_of_dir};
use crate::store::Store;
use crate::store::object::{EntryKind, LayerId, ObjectId, Tree, TreeEntry};

/// Whether a bundle can carry this entry: everything but device nodes and
/// sockets (which no layer Arbor writes holds; an image import drops them).
pub fn carriable(entry: &TreeEntry) -> bool {
    match entry.kind {
        EntryKind::Special { format, .. } => format == libc::S_IFIFO,
        _ => true,
    }
}

/// The regular files of one sealed layer, opened for reading below its
/// directory (never through a symlink). In rootless mode, files the caller
/// made unreadable to itself are made readable while open and restored when
/// this is dropped.
pub struct LayerFiles {
    dir: PathBuf,
    fd: OwnedFd,
    relaxed: Relaxed,
}

impl std::fmt::Debug for LayerFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayerFiles")
            .field("dir", &self.dir)
            .finish()
    }
}

impl LayerFiles {
    /// Open the directory of layer `id` in `store`.
    pub fn open(store: &Store, id: &LayerId) -> Result<Self> {
        let dir = store.layer_dir(id);
        let fd = open_dir_path(&dir).map_err(|source| LayerError::ReadSource {
            path: dir.clone(),
            source,
        })?;
        Ok(Self {
            dir,
            fd,
            relaxed: Relaxed::new(),
        })
    }

    /// Open the regular file `rel`, checking that it has `size` bytes.
    pub fn file(&mut self, rel: &str, size: u64) -> Result<(std::fs::File, PathBuf)> {
        let host = self.dir.join(rel);
        let fd = match open_source_file(&self.fd, rel, &host, size) {
            Err(LayerError::ReadSource { source, .. })
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                self.relaxed
                    .allow_path(&self.dir, rel, 0o400)
                    .map_err(|source| LayerError::ReadSource {
                        path: host.clone(),
                        source,
                    })?;
                open_source_file(&self.fd, rel, &host, size)?
            }
            other => other?,
        };
        Ok((std::fs::File::from(fd), host))
    }
}

/// Where [`rebuild_layer`] gets a file's content: the open file (positioned
/// at its start, `size` bytes of content) and its path for errors.
pub type ContentSource<'a> =
    dyn FnMut(&str, &ObjectId, u64) -> Result<(std::fs::File, PathBuf)> + 'a;

/// Write the layer `tree` (id `id`) into `dest` (absent or empty), taking
/// each regular file's content from `content(path, hash, size)`, then scan
/// the result and compare it with the tree (ownership aside, as `fsck`
/// does: a rootless store cannot keep other owners). On any error what was
/// written is removed.
pub fn rebuild_layer(
    id: &LayerId,
    tree: &Tree,
    dest: &Path,
    owners: &OwnerMap,
    content: &mut ContentSource<'_>,
) -> Result<()> {
    let created = prepare_dest(dest)?;
    let result = write_tree(id, tree, dest, owners, content);
    if result.is_err() {
        discard_dest(dest, created);
    }
    result
}

fn write_tree(
    id: &LayerId,
    tree: &Tree,
    dest: &Path,
    owners: &OwnerMap,
    content: &mut ContentSource<'_>,
) -> Result<()> {
    let mut writer = EntryWriter::open(dest)?;
    for entry in &tree.entries {
        let path = entry.path.as_str();
        let owner = Some(owners.to_host(entry.uid, entry.gid));
        match &entry.kind {
            EntryKind::Dir { opaque } => writer.dir(path, entry.mode, owner, *opaque)?,
            EntryKind::Symlink { target } => writer.symlink(path, target, owner)?,
            EntryKind::Whiteout => writer.whiteout(path)?,
            EntryKind::Special { format, .. } if *format == libc::S_IFIFO => {
                writer.fifo(path, entry.mode, owner)?;
            }
            EntryKind::Special { .. } => {
                return Err(LayerError::Corrupt {
                    path: dest.join(path).display().to_string(),
                    what: format!(
                        "layer {id} lists a device node or socket, which a bundle does not carry"
                    ),
                });
            }
            EntryKind::File { size, hash } => {
                let (src, src_path) = content(path, hash, *size)?;
                let got = writer.file(path, &src, &src_path, *size, entry.mode, owner)?;
                if ObjectId::from(got) != *hash {
                    return Err(LayerError::ContentMismatch {
                        path: src_path,
                        what: format!("blake3 is {}, tree says {hash}", ObjectId::from(got)),
                    });
                }
            }
        }
    }
    writer.finish()?;
    let written = tree_of_dir(dest, owners)?;
    let strip = |t: &Tree| -> Vec<TreeEntry> {
        t.entries
            .iter()
            .map(|e| TreeEntry {
                uid: 0,
                gid: 0,
                ..e.clone()
            })
            .collect()
    };
    let (want, got) = (strip(tree), strip(&written));
    if want != got {
        let first = want
            .iter()
            .zip(&got)
            .find(|(a, b)| a != b)
            .map(|(a, _)| a.path.clone())
            .unwrap_or_else(|| format!("{} entries written, tree lists {}", got.len(), want.len()));
        return Err(LayerError::Corrupt {
            path: dest.join(&first).display().to_string(),
            what: format!("the rebuilt layer {id} differs from its tree here"),
        });
    }
    Ok(())
}
