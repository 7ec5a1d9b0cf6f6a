//! A task suite: a folder of task directories plus `manifest.toml`, which puts
//! every task in exactly one split.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::task::{TaskError, TaskSpec};

/// The splits, in order.
pub const SPLITS: &[&str] = &["train", "heldout-variants", "heldout-families"];

/// The bundled suite's folder: `$ARBOR_TASKS` if set, else `envs/tasks` of
/// this source tree.
pub fn bundled_dir() -> PathBuf {
    std::env::var_os("ARBOR_TASKS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks"),
        PathBuf::from,
    )
}

/// A loaded suite.
#[derive(Clone, Debug)]
pub struct Suite {
    /// The folder.
    pub dir: PathBuf,
    /// Every task, by id.
    pub tasks: BTreeMap<String, TaskSpec>,
    /// Split name → task ids.
    pub splits: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    splits: BTreeMap<String, Vec<String>>,
}

impl Suite {
    /// Load every task under `dir` and the manifest, and check that the
    /// splits partition the tasks and keep held-out families out of training.
    ///
    /// # Errors
    /// The first malformed task, or what is wrong with the manifest.
    pub fn load(dir: &Path) -> Result<Self, TaskError> {
        let mut tasks = BTreeMap::new();
        let rd = std::fs::read_dir(dir).map_err(|e| TaskError::File {
            file: dir.to_owned(),
            message: format!("cannot read the task folder: {e}"),
        })?;
        let mut dirs: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join("task.toml").is_file())
            .collect();
        dirs.sort();
        for d in dirs {
            let t = TaskSpec::load(&d)?;
            tasks.insert(t.id.clone(), t);
        }
        let file = dir.join("manifest.toml");
        let bad = |message: String| TaskError::File {
            file: file.clone(),
            message,
        };
        let text = std::fs::read_to_string(&file).map_err(|e| bad(format!("cannot read: {e}")))?;
        let manifest: Manifest = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        for (split, ids) in &manifest.splits {
            if !SPLITS.contains(&split.as_str()) {
                return Err(bad(format!(
                    "unknown split {split:?} (the splits are {})",
                    SPLITS.join(", ")
                )));
            }
            for id in ids {
                if !tasks.contains_key(id) {
                    return Err(bad(format!(
                        "split {split:?} lists {id:?}, which is not a task here"
                    )));
                }
                if let Some(other) = seen.insert(id, split) {
                    return Err(bad(format!("{id:?} is in both {other:?} and {split:?}")));
                }
            }
        }
        if let Some(missing) = tasks.keys().find(|id| !seen.contains_key(id.as_str())) {
            return Err(bad(format!("task {missing:?} is in no split")));
        }
        let groups = |split: &str| -> BTreeSet<&str> {
            manifest
                .splits
                .get(split)
                .into_iter()
                .flatten()
                .map(|id| tasks[id].group.as_str())
                .collect()
        };
        let train = groups("train");
        if let Some(g) = groups("heldout-families")
            .iter()
            .find(|g| train.contains(*g))
        {
            return Err(bad(format!(
                "group {g:?} is in heldout-families but also in train"
            )));
        }
        if let Some(g) = groups("heldout-variants")
            .iter()
            .find(|g| !train.contains(*g))
        {
            return Err(bad(format!(
                "group {g:?} is in heldout-variants but has no variant in train"
            )));
        }
        Ok(Self {
            dir: dir.to_owned(),
            splits: manifest.splits,
            tasks,
        })
    }

    /// The task `id`.
    pub fn get(&self, id: &str) -> Option<&TaskSpec> {
        self.tasks.get(id)
    }

    /// The split `id` is in.
    pub fn split_of(&self, id: &str) -> Option<&str> {
        self.splits
            .iter()
            .find(|(_, ids)| ids.iter().any(|i| i == id))
            .map(|(s, _)| s.as_str())
    }

    /// The tasks of `split`.
    ///
    /// # Errors
    /// An unknown split name.
    pub fn split(&self, split: &str) -> Result<Vec<&TaskSpec>, String> {
        let ids = self.splits.get(split).ok_or_else(|| {
            format!(
                "unknown split {split:?} (the splits are {})",
                SPLITS.join(", ")
            )
        })?;
        Ok(ids.iter().filter_map(|id| self.tasks.get(id)).collect())
    }
}
