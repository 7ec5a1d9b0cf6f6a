//! The sandbox's workspace: its private writable part (an overlay's upper
//! directory or a private copy), the delta it holds, and mounting it again
//! after a snapshot seals it.

use std::path::{Path, PathBuf};

use super::protocol::{Request, Response, WorkspaceMount};
use super::{Result, Sandbox, SandboxError};
use crate::layer::{self, MergedView};
use crate::store::object::{EntryKind, LayerId, ObjectId, ObjectKind, SnapshotId, Tree, TreeEntry};

/// A path a sandbox wrote (see [`Sandbox::written_paths`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathChange {
    /// Relative to `/workspace`.
    pub path: String,
    /// Whether the base snapshot had it.
    pub kind: ChangeKind,
}

/// How a written path relates to the base snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// New.
    Added,
    /// Present in the base snapshot and written (possibly back to what it was).
    Modified,
    /// Present in the base snapshot and deleted.
    Deleted,
}

/// The sandbox's private writable part.
///
/// Invariant: for `Overlay`, `upper` and `work` are directories on the same
/// filesystem as the store's layers, `upper` holds exactly the changes since
/// the last snapshot, and `work` is private to the current mount.
#[derive(Debug)]
pub(super) enum Private {
    Overlay {
        upper: PathBuf,
        work: PathBuf,
    },
    Copy {
        workspace: PathBuf,
        base: Box<MergedView>,
    },
}

impl Sandbox {
    /// The tree of the changes since the last snapshot (cached until the next action).
    pub(crate) fn delta(&mut self) -> Result<(Tree, ObjectId)> {
        if let Some(cached) = &self.delta_cache {
            return Ok(cached.clone());
        }
        let owners = self.runtime.owner_map();
        let tree = match &self.private {
            Private::Overlay { upper, .. } => layer::tree_of_dir(upper, &owners)?,
            Private::Copy { workspace, base } => {
                let out = self.runtime.store().new_temp_path("delta");
                let tree = layer::write_delta_layer(workspace, base, &out, &owners);
                crate::cleanup::remove_dir_forcefully(&out);
                tree?
            }
        };
        crate::store::validate_tree(&tree)?;
        let bytes = serde_json::to_vec(&tree).map_err(|e| SandboxError::Encode {
            what: "tree",
            source: e,
        })?;
        let id = self.hold(ObjectKind::Tree, bytes);
        self.delta_cache = Some((tree.clone(), id));
        Ok((tree, id))
    }

    /// Every workspace path written since the base snapshot, directories
    /// aside. With the overlay backend that is every file copied up, even
    /// one whose content was later put back as it was (so a write that is
    /// undone again is still seen); with the copy backend, every path whose
    /// content or metadata differs from the base.
    ///
    /// # Errors
    /// Runtime faults reading the private layer or the lower chain.
    pub fn written_paths(&mut self) -> Result<Vec<PathChange>> {
        let (tree, _) = self.delta()?;
        let mut lowers = Vec::with_capacity(self.layers.len());
        for id in self.layers.iter().rev() {
            lowers.push(self.runtime.layer_index(id)?);
        }
        let mut out = Vec::new();
        for e in &tree.entries {
            let below = lower_entry(&lowers, &e.path);
            let kind = match (&e.kind, below) {
                (EntryKind::Dir { opaque: false }, _) => continue,
                (EntryKind::Whiteout, None) => continue,
                (EntryKind::Whiteout, Some(_)) => ChangeKind::Deleted,
                (_, Some(_)) => ChangeKind::Modified,
                (_, None) => ChangeKind::Added,
            };
            out.push(PathChange {
                path: e.path.clone(),
                kind,
            });
        }
        Ok(out)
    }

    /// Unmount the workspace so its private part can be sealed.
    pub(crate) fn unmount_workspace(&mut self) -> Result<()> {
        if matches!(self.private, Private::Overlay { .. }) {
            match self.helper.request(&Request::UnmountWorkspace)? {
                Response::Ok => {}
                other => return Err(self.helper.unexpected(other)),
            }
        }
        Ok(())
    }

    /// The directory holding the private changes (overlay upper or copy workspace).
    pub(crate) fn private_dir(&self) -> &Path {
        match &self.private {
            Private::Overlay { upper, .. } => upper,
            Private::Copy { workspace, .. } => workspace,
        }
    }

    /// Whether the workspace is an overlay (else a private copy).
    pub(crate) fn is_overlay(&self) -> bool {
        matches!(self.private, Private::Overlay { .. })
    }

    /// Copy backend: write the delta since the base as a layer directory at `out`.
    pub(crate) fn write_copy_delta(&self, out: &Path) -> Result<Tree> {
        match &self.private {
            Private::Copy { workspace, base } => Ok(layer::write_delta_layer(
                workspace,
                base,
                out,
                &self.runtime.owner_map(),
            )?),
            Private::Overlay { .. } => Err(SandboxError::NeedsCopyBackend {
                op: "write_copy_delta",
            }),
        }
    }

    /// Mount the current (unsealed) upper again after a failed seal.
    pub(crate) fn remount_after_failed_seal(&mut self) -> Result<()> {
        let Private::Overlay { upper, work } = &mut self.private else {
            return Ok(());
        };
        if !upper.exists() {
            return Err(SandboxError::UpperGone {
                path: upper.clone(),
            });
        }
        crate::cleanup::remove_dir_forcefully(work);
        make_upper(upper, work, &self.runtime.owner_map())?;
        let lowers = self.runtime.lower_dirs(self.base.as_ref(), &self.layers)?;
        let ws = WorkspaceMount::Overlay {
            lowers,
            upper: upper.clone(),
            work: work.clone(),
        };
        match self.helper.request(&Request::MountWorkspace(ws))? {
            Response::Ok => Ok(()),
            other => Err(self.helper.unexpected(other)),
        }
    }

    /// After sealing: continue on `layers` (bottom first) as snapshot `base`
    /// with a fresh, empty private part.
    pub(crate) fn continue_on(&mut self, base: SnapshotId, layers: Vec<LayerId>) -> Result<()> {
        self.generation += 1;
        let owners = self.runtime.owner_map();
        match &mut self.private {
            Private::Overlay { upper, work } => {
                crate::cleanup::remove_dir_forcefully(work);
                if upper.exists() {
                    crate::cleanup::remove_dir_forcefully(upper);
                }
                let new_upper = self.run_dir.join(format!("upper-{}", self.generation));
                let new_work = self.run_dir.join(format!("work-{}", self.generation));
                make_upper(&new_upper, &new_work, &owners)?;
                let lowers = self.runtime.lower_dirs(Some(&base), &layers)?;
                let ws = WorkspaceMount::Overlay {
                    lowers,
                    upper: new_upper.clone(),
                    work: new_work.clone(),
                };
                match self.helper.request(&Request::MountWorkspace(ws))? {
                    Response::Ok => {}
                    other => return Err(self.helper.unexpected(other)),
                }
                *upper = new_upper;
                *work = new_work;
            }
            Private::Copy { base: view, .. } => {
                **view = layer::merge_layers(self.runtime.store(), &layers)?;
            }
        }
        record_base(&self.run_dir, Some(&base))?;
        self.base = Some(base);
        self.layers = layers;
        self.delta_cache = None;
        Ok(())
    }
}

/// Whether a private entry equals what the lower chain (topmost first)
/// already holds at its path: then it records no change.
pub(super) fn same_as_lower(
    lowers: &[std::sync::Arc<crate::runtime::LayerIndex>],
    entry: &TreeEntry,
) -> bool {
    match entry.kind {
        // A deletion is a change; an opaque directory hides what was below.
        EntryKind::Whiteout | EntryKind::Dir { opaque: true } => false,
        _ => lower_entry(lowers, &entry.path).is_some_and(|lower| {
            let same_kind = match (&lower.kind, &entry.kind) {
                (EntryKind::Dir { .. }, EntryKind::Dir { .. }) => true,
                (a, b) => a == b,
            };
            same_kind
                && lower.mode == entry.mode
                && (lower.uid, lower.gid) == (entry.uid, entry.gid)
        }),
    }
}

/// The entry the lower chain (topmost first) shows at `path`, with overlay
/// semantics: whiteouts, opaque directories and non-directories above a
/// path hide it.
fn lower_entry<'a>(
    lowers: &'a [std::sync::Arc<crate::runtime::LayerIndex>],
    path: &str,
) -> Option<&'a TreeEntry> {
    for layer in lowers {
        if let Some(e) = layer.get(path) {
            return (!matches!(e.kind, EntryKind::Whiteout)).then_some(e);
        }
        let mut ancestor = path;
        while let Some(i) = ancestor.rfind('/') {
            ancestor = &ancestor[..i];
            if let Some(a) = layer.get(ancestor)
                && !matches!(a.kind, EntryKind::Dir { opaque: false })
            {
                return None;
            }
        }
    }
    None
}

/// Record the base snapshot in the run directory so that `gc` keeps the
/// mounted chain alive while this sandbox runs.
pub(super) fn record_base(run_dir: &Path, base: Option<&SnapshotId>) -> Result<()> {
    let Some(base) = base else { return Ok(()) };
    let path = run_dir.join("base");
    std::fs::write(&path, base.to_hex()).map_err(|e| SandboxError::io("write", &path, e))
}

fn mkdir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|e| SandboxError::io("create directory", path, e))
}

/// Create an empty upper directory owned by the sandbox's root (its
/// attributes are those of `/workspace` inside) and an empty work directory.
pub(super) fn make_upper(upper: &Path, work: &Path, owners: &layer::OwnerMap) -> Result<()> {
    mkdir(upper)?;
    mkdir(work)?;
    let (uid, gid) = owners.to_host(0, 0);
    for dir in [upper, work] {
        rustix::fs::chown(
            dir,
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
        )
        .map_err(|e| SandboxError::io("chown", dir, e.into()))?;
    }
    Ok(())
}
