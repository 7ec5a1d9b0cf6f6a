//! The task format: `task.toml` plus a workspace folder and hidden checks.
//! `envs/TASKS.md` documents it for task authors.

use std::fmt;
use std::path::{Path, PathBuf};

use arbor_rollout::{AgentAction, EnvLimits};
use globset::{GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

/// Errors loading a task. Every message names the file, and for `task.toml`
/// the line, column and field.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// A field of `task.toml` is missing, of the wrong type, or invalid.
    #[error("{}:{line}:{column}: field `{field}`: {message}", file.display())]
    Field {
        /// The `task.toml`.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The field, as a dotted path (`limits.max_steps`, `gold[2]`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A file of the task is missing or unreadable, or the task as a whole is inconsistent.
    #[error("{}: {message}", file.display())]
    File {
        /// The file or directory.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// `coding`, `terminal` or `interpreter`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Bug fixes and small features, graded by hidden unit tests.
    Coding,
    /// Goal states reached with shell commands, graded by predicates.
    Terminal,
    /// State built in a live interpreter session (backend `wasm`), graded
    /// by reading the session's values natively.
    Interpreter,
    /// One-edit bug fixes in real projects, graded by the projects' own
    /// upstream test suites (unittest or pytest ids, as SWE-bench does).
    Upstream,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Coding => "coding",
            Self::Terminal => "terminal",
            Self::Interpreter => "interpreter",
            Self::Upstream => "upstream",
        })
    }
}

/// Which test runner executes a native task's hidden checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckRunner {
    /// `unittest` discovery of `test*.py` in the checks folder.
    #[default]
    Unittest,
    /// pytest node ids (`tests/test_x.py::TestY::test_z[param]`); pytest
    /// runs in the checks' own trusted environment, never in the workspace.
    Pytest,
}

impl fmt::Display for CheckRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Unittest => "unittest",
            Self::Pytest => "pytest",
        })
    }
}

/// How the hidden checks compare values of the code under test.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Semantics {
    /// Assertions take plain built-in values only, compared on the trusted
    /// side and re-checked by the arbor process; a passing test must assert
    /// something (the bundled families).
    #[default]
    Strict,
    /// As the upstream suite runs: any assertion, comparisons of the code's
    /// own objects evaluated with its own semantics in the subject, tests
    /// pass by not raising (imported test suites).
    Upstream,
}

impl fmt::Display for Semantics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Strict => "strict",
            Self::Upstream => "upstream",
        })
    }
}

/// How a native task's hidden checks are run (`[checks]` beyond `dir`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CheckConfig {
    /// The runner.
    pub runner: CheckRunner,
    /// Strict or upstream semantics.
    pub semantics: Semantics,
    /// Folders of the workspace (relative) the code under test is imported
    /// from, in order (`["."]`, or `["src"]` for a src layout).
    pub roots: Vec<String>,
    /// Check ids that must pass and failed before the fix (SWE-bench's
    /// FAIL_TO_PASS); with `pass_to_pass`, the checks that decide the
    /// reward. Empty: every discovered check.
    pub fail_to_pass: Vec<String>,
    /// Check ids that must keep passing (SWE-bench's PASS_TO_PASS).
    pub pass_to_pass: Vec<String>,
    /// The pytest configuration file in the checks folder, if any.
    pub pytest_ini: Option<String>,
    /// Entries of the static integrity analysis this task allows in the
    /// agent's changes (e.g. `"dunder:__eq__"` when the fix is in `__eq__`).
    pub allow_static: Vec<String>,
}

impl CheckConfig {
    /// The ids that decide the reward when the task names them.
    pub fn listed_ids(&self) -> Vec<String> {
        self.fail_to_pass
            .iter()
            .chain(&self.pass_to_pass)
            .cloned()
            .collect()
    }
}

/// Where a task runs: `native` (bash in an overlay sandbox) or `wasm` (a
/// persistent Python session in the WebAssembly guest).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// Shell commands in a native sandbox; hidden unit tests in `checks/`.
    #[default]
    Native,
    /// Python code run as steps of one interpreter session; declarative
    /// `[[session_check]]` and `[[workspace_check]]` hidden checks.
    Wasm,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Native => "native",
            Self::Wasm => "wasm",
        })
    }
}

/// A hidden check of a `wasm` task that reads the session: in a fresh fork
/// of the final snapshot, run `run` (statements, optional), then evaluate
/// `expr` (bound to a fresh name nobody can predict) or take the session
/// variable `name`, read it with the native inspector and compare the
/// canonical JSON with `expect` on the host.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionCheck {
    /// Unique within the task.
    pub id: String,
    /// Python statements run first (may call the agent's code).
    pub run: Option<String>,
    /// What is read.
    pub target: SessionTarget,
    /// The expected canonical JSON (see `envs/TASKS.md`).
    pub expect: serde_json::Value,
    /// Absolute tolerance for floats (`None`: exact).
    pub tolerance: Option<f64>,
}

/// What a [`SessionCheck`] reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionTarget {
    /// An expression, evaluated after `run`.
    Expr(String),
    /// A variable of the session's `__main__`.
    Name(String),
}

/// A hidden check of a `wasm` task that reads a workspace file on the host.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkspaceCheck {
    /// Unique within the task.
    pub id: String,
    /// Path relative to `/workspace`.
    pub path: String,
    /// What the file must hold.
    pub expect: WorkspaceExpect,
}

/// What a [`WorkspaceCheck`] expects.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceExpect {
    /// Exactly this text.
    Text(String),
    /// JSON equal to this value (objects by key, numbers by type and value).
    Json(serde_json::Value),
}

/// How hard a task is meant to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Difficulty {
    /// One or two obvious edits.
    Easy,
    /// Needs reading and a test run.
    Medium,
    /// Several interacting changes.
    Hard,
}

/// What a candidate action is (never shown to policies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateLabel {
    /// A step of a correct solution.
    Right,
    /// Plausible but incorrect.
    Wrong,
    /// Damages the task or attacks the grader.
    Harmful,
    /// Inspection; changes nothing.
    Neutral,
}

/// A candidate action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// What it is.
    pub label: CandidateLabel,
    /// For a `wrong` candidate: the gold action it is an alternative to.
    pub replaces: Option<usize>,
    /// The action.
    pub action: AgentAction,
}

/// A task-specific attack that must score 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanarySpec {
    /// Its name.
    pub name: String,
    /// The attack.
    pub actions: Vec<AgentAction>,
}

/// Why a glob list does not compile.
#[derive(Debug, thiserror::Error)]
pub enum GlobError {
    /// A pattern that does not parse.
    #[error("glob {pattern:?}: {source}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// Why.
        source: globset::Error,
    },
    /// The patterns together do not build a set.
    #[error("{0}")]
    Set(globset::Error),
}

/// A glob list, kept with its source text.
#[derive(Clone, Debug)]
pub struct Globs {
    patterns: Vec<String>,
    set: GlobSet,
}

impl Globs {
    /// Compile `patterns` (`*` stays within one path component, `**` crosses them).
    ///
    /// # Errors
    /// [`GlobError`]: the first pattern that does not parse, with the reason.
    pub fn new(patterns: &[String]) -> Result<Self, GlobError> {
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            let glob = globset::GlobBuilder::new(p)
                .literal_separator(true)
                .build()
                .map_err(|source| GlobError::Pattern {
                    pattern: p.clone(),
                    source,
                })?;
            b.add(glob);
        }
        Ok(Self {
            patterns: patterns.to_vec(),
            set: b.build().map_err(GlobError::Set)?,
        })
    }

    /// Whether `path` (relative, `/`-separated) matches any pattern.
    pub fn matches(&self, path: &str) -> bool {
        self.set.is_match(path)
    }

    /// The patterns.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// By-products every task tolerates.
pub const DEFAULT_BYPRODUCTS: &[&str] = &["**/__pycache__", "**/__pycache__/**", "**/*.pyc"];

/// A loaded, checked task.
#[derive(Clone, Debug)]
pub struct TaskSpec {
    /// Unique id (`[a-z0-9-]`), equal to the directory name.
    pub id: String,
    /// `coding` or `terminal`.
    pub family: Family,
    /// The family of variants this task belongs to.
    pub group: String,
    /// How hard.
    pub difficulty: Difficulty,
    /// What the agent is told.
    pub instructions: String,
    /// The task directory.
    pub dir: PathBuf,
    /// The initial workspace folder.
    pub workspace: PathBuf,
    /// Commands run once, in a sandbox, to make the root snapshot.
    pub setup: Vec<String>,
    /// Host names the setup commands may reach through the egress proxy
    /// (`setup_allow_hosts`; none by default: loopback only). The agent's
    /// steps and the checks never get egress.
    pub setup_allow_hosts: Vec<String>,
    /// `workdir = "image"`: the workspace also appears at the image's
    /// `WorkingDir`, where the agent's actions start (the checks still see
    /// it at `/workspace`).
    pub at_image_workdir: bool,
    /// The image the task runs on (`None`: the host's system view).
    pub image: Option<TaskImage>,
    /// Limits on the agent.
    pub limits: EnvLimits,
    /// Paths the solution may change.
    pub allow: Globs,
    /// By-products the solution may leave (the defaults plus the task's).
    pub byproducts: Globs,
    /// Visible tests and graders (also protected by not being in `allow`).
    pub protected: Globs,
    /// The hidden checks folder.
    pub checks: PathBuf,
    /// Time limit of one verification run, in milliseconds.
    pub checks_timeout_ms: u64,
    /// How the hidden checks are run (native tasks).
    pub check_config: CheckConfig,
    /// Whether validation applies the rules of the bundled multi-step
    /// families (at least 6 candidates with right, harmful and wrong ones,
    /// and no single candidate solving the task alone). Imported one-edit
    /// tasks set `[validate] multi_step = false`.
    pub multi_step: bool,
    /// The gold solution.
    pub gold: Vec<AgentAction>,
    /// Candidate actions for discrete policies.
    pub candidates: Vec<Candidate>,
    /// Task-specific canaries.
    pub canaries: Vec<CanarySpec>,
    /// `native` or `wasm`.
    pub backend: Backend,
    /// Hidden session checks (`wasm` tasks).
    pub session_checks: Vec<SessionCheck>,
    /// Hidden workspace checks (`wasm` tasks).
    pub workspace_checks: Vec<WorkspaceCheck>,
    /// Fuel of one agent step (`wasm` tasks; about one unit per
    /// WebAssembly instruction).
    pub step_fuel: u64,
    /// Fuel of one hidden check's code (`wasm` tasks).
    pub check_fuel: u64,
}

/// Where a task's image comes from (`image = "..."` in `task.toml`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskImage {
    /// An image in the store, by name (`arbor image import` put it there).
    Named(String),
    /// An image archive in the task directory (OCI layout tarball or
    /// docker-archive), imported on first use.
    Archive(PathBuf),
    /// An image built from a recipe (an `[image]` table: Debian suite,
    /// packages, pip requirements, commands), built on first use and cached
    /// by the recipe (`arbor image build`).
    Recipe(arbor_runtime::image::ImageRecipe),
}

/// Default fuel of one agent step of a `wasm` task (well under a second).
pub const DEFAULT_STEP_FUEL: u64 = 2_000_000_000;
/// Default fuel of one hidden check of a `wasm` task.
pub const DEFAULT_CHECK_FUEL: u64 = 400_000_000;

/// Whether `id` is a valid task id.
pub fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !id.starts_with('-')
}

/// Whether `p` is a plain relative path (no root, no `.` or `..`).
pub(crate) fn is_plain_relative(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && Path::new(p)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

mod checks;
mod load;
pub use load::read_image_recipe;
#[cfg(test)]
mod tests;
