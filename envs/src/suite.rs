//! A task suite: a folder of task directories plus `manifest.toml`, which puts
//! every task in exactly one split.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::task::{Backend, Family, TaskError, TaskSpec};

/// The splits, in order. `train` and the two held-out splits hold the
/// bundled multi-step native tasks (what rollouts and training drive);
/// `upstream` holds one-edit bug fixes in real code graded by its own
/// upstream test suite (native, evaluation); `code-interpreter` holds the
/// `backend = "wasm"` tasks, and only those; `swe-local` holds SWE-bench
/// style instances imported with `arbor task import-swe` (family `upstream`).
pub const SPLITS: &[&str] = &[
    "train",
    "heldout-variants",
    "heldout-families",
    UPSTREAM,
    CODE_INTERPRETER,
    SWE_LOCAL,
];

/// The split of the imported one-edit tasks (family `upstream`).
pub const UPSTREAM: &str = "upstream";

/// The split of the tasks imported by `arbor task import-swe` (family
/// `upstream` too).
pub const SWE_LOCAL: &str = "swe-local";

/// The split of the `backend = "wasm"` (interpreter session) tasks.
pub const CODE_INTERPRETER: &str = "code-interpreter";

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
                let upstream = tasks[id].family == Family::Upstream;
                if upstream != (split == UPSTREAM || split == SWE_LOCAL) {
                    return Err(bad(format!(
                        "{id:?} (family {}) is in split {split:?}: `upstream` tasks go in \
                         {UPSTREAM:?} or {SWE_LOCAL:?}, and only they do",
                        tasks[id].family
                    )));
                }
                let wasm = tasks[id].backend == Backend::Wasm;
                if wasm != (split == CODE_INTERPRETER) {
                    return Err(bad(format!(
                        "{id:?} (backend {}) is in split {split:?}: `wasm` tasks go in \
                         {CODE_INTERPRETER:?}, and only they do",
                        tasks[id].backend
                    )));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_suite_has_its_promised_shape() {
        let suite = Suite::load(&bundled_dir()).expect("the bundled suite loads");
        let count = |f: Family| suite.tasks.values().filter(|t| t.family == f).count();
        assert!(suite.tasks.len() >= 40, "{} tasks", suite.tasks.len());
        assert!(
            count(Family::Coding) >= 25,
            "{} coding",
            count(Family::Coding)
        );
        assert!(
            count(Family::Terminal) >= 15,
            "{} terminal",
            count(Family::Terminal)
        );
        for split in SPLITS {
            assert!(!suite.split(split).unwrap().is_empty(), "{split} is empty");
        }
        for t in suite.tasks.values().filter(|t| t.multi_step) {
            assert!(
                t.candidates.len() >= 6,
                "{}: {} candidates",
                t.id,
                t.candidates.len()
            );
            assert!(t.gold.len() >= 2, "{}: a one-step gold solution", t.id);
        }
        // Groups have several variants, and both families are held out somewhere.
        let mut groups: BTreeMap<&str, usize> = BTreeMap::new();
        for t in suite.tasks.values().filter(|t| t.multi_step) {
            *groups.entry(&t.group).or_default() += 1;
        }
        // The imported tasks: one-edit fixes graded by upstream suites, in
        // their own split, some of them pytest.
        let upstream = suite.split(UPSTREAM).unwrap();
        assert!(upstream.len() >= 6, "{} upstream tasks", upstream.len());
        assert!(
            upstream
                .iter()
                .all(|t| t.family == Family::Upstream && !t.multi_step)
        );
        let pytest = upstream
            .iter()
            .filter(|t| t.check_config.runner == crate::task::CheckRunner::Pytest)
            .count();
        assert!(pytest >= 3, "{pytest} pytest tasks");
        assert!(groups.values().all(|n| *n >= 3), "{groups:?}");
        let held: BTreeSet<Family> = suite
            .split("heldout-families")
            .unwrap()
            .iter()
            .map(|t| t.family)
            .collect();
        assert_eq!(held.len(), 2, "both families have held-out groups");
    }

    #[test]
    fn manifest_mistakes_are_named() {
        let root = tempfile::tempdir().unwrap();
        let bundled = bundled_dir();
        for id in ["py-stats-1", "py-stats-2", "py-cache-1"] {
            copy(&bundled.join(id), &root.path().join(id));
        }
        let write = |m: &str| std::fs::write(root.path().join("manifest.toml"), m).unwrap();
        let err = |m: &str| {
            write(m);
            Suite::load(root.path()).unwrap_err().to_string()
        };
        let e = err(
            "[splits]\ntrain = [\"py-stats-1\", \"py-cache-1\"]\nheldout-families = [\"py-cache-1\", \"py-stats-2\"]\n",
        );
        assert!(e.contains("\"py-cache-1\" is in both"), "{e}");
        let e = err(
            "[splits]\ntrain = [\"py-stats-1\"]\nheldout-families = [\"py-stats-2\", \"py-cache-1\"]\n",
        );
        assert!(
            e.contains("group \"py-stats\" is in heldout-families but also in train"),
            "{e}"
        );
        let e = err("[splits]\ntrain = [\"py-stats-1\", \"py-stats-2\"]\n");
        assert!(e.contains("\"py-cache-1\" is in no split"), "{e}");
        let e =
            err("[splits]\ntrain = [\"py-stats-1\", \"py-stats-2\"]\nholdout = [\"py-cache-1\"]\n");
        assert!(e.contains("unknown split \"holdout\""), "{e}");
        write(
            "[splits]\ntrain = [\"py-stats-1\", \"py-stats-2\"]\nheldout-families = [\"py-cache-1\"]\n",
        );
        let s = Suite::load(root.path()).unwrap();
        assert_eq!(s.split_of("py-cache-1"), Some("heldout-families"));
    }

    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
}
