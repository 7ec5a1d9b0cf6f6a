//! A sandbox's `/workspace` directory, and the empty ones kept for reuse.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::runtime::WasmRuntime;
use super::{Result, WasmError};
use crate::layer::{MaterializeOptions, MergedView};
use crate::store::object::LayerId;

/// Empty workspace directories of dropped sandboxes, kept by the runtime
/// for reuse: a fork of a snapshot whose workspace is empty (the usual
/// case for interpreter sessions) then pays neither a `mkdir` nor an
/// `rmdir`, which on a busy ext4 cost hundreds of microseconds. A directory
/// is kept only if it is empty when its sandbox is dropped (the guest's
/// instance is gone by then); the rest are removed on drop.
#[derive(Debug, Default)]
pub(super) struct SpareDirs(Mutex<Vec<PathBuf>>);

/// At most this many spare directories are kept.
const MAX_SPARE_DIRS: usize = 64;

impl SpareDirs {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<PathBuf>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take(&self) -> Option<PathBuf> {
        self.lock().pop()
    }

    /// Keep `dir` if it is an empty directory (not a link) and there is
    /// room, else remove it.
    fn give(&self, dir: PathBuf) {
        let empty = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir())
            && std::fs::read_dir(&dir).is_ok_and(|mut rd| rd.next().is_none());
        if empty {
            let mut spare = self.lock();
            if spare.len() < MAX_SPARE_DIRS {
                spare.push(dir);
                return;
            }
        }
        crate::cleanup::remove_dir_forcefully(&dir);
    }
}

impl Drop for SpareDirs {
    fn drop(&mut self) {
        for dir in self.lock().drain(..) {
            crate::cleanup::remove_dir_forcefully(&dir);
        }
    }
}

/// A sandbox's workspace directory.
#[derive(Debug)]
pub(super) struct Workspace {
    pub(super) dir: PathBuf,
    pub(super) base: MergedView,
    spare: Arc<SpareDirs>,
}

impl Workspace {
    /// Materialise `layers` into a fresh directory `run/<pid>-wasm<n>` (gc
    /// removes those of dead processes); an empty chain reuses an empty
    /// directory a dropped sandbox left, else costs one `mkdir`.
    pub(super) fn materialize(rt: &WasmRuntime, layers: &[LayerId]) -> Result<Workspace> {
        let spare = rt.inner.spare_dirs.clone();
        if layers.is_empty()
            && let Some(dir) = spare.take()
        {
            return Ok(Workspace {
                dir,
                base: MergedView::default(),
                spare,
            });
        }
        let dir = rt.run_dir();
        let made = (|| -> Result<MergedView> {
            if layers.is_empty() {
                std::fs::create_dir(&dir).map_err(|e| {
                    WasmError::Workspace(format!("cannot create {}: {e}", dir.display()))
                })?;
                Ok(MergedView::default())
            } else {
                crate::layer::materialize(
                    rt.store(),
                    layers,
                    &dir,
                    &MaterializeOptions::default(),
                )?;
                Ok(crate::layer::merge_layers(rt.store(), layers)?)
            }
        })();
        match made {
            Ok(base) => Ok(Workspace { dir, base, spare }),
            Err(e) => {
                crate::cleanup::remove_dir_forcefully(&dir);
                Err(e)
            }
        }
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        self.spare.give(std::mem::take(&mut self.dir));
    }
}
