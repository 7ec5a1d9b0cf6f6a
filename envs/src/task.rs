//! The task format: `task.toml` plus a workspace folder and hidden checks.
//! `envs/TASKS.md` documents it for task authors.

use std::fmt;
use std::path::{Path, PathBuf};

use arbor_rollout::{AgentAction, EnvLimits};
use globset::{GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use toml::Spanned;

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
    /// The first pattern that does not parse, with the reason.
    pub fn new(patterns: &[String]) -> Result<Self, String> {
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            let glob = globset::GlobBuilder::new(p)
                .literal_separator(true)
                .build()
                .map_err(|e| format!("glob {p:?}: {e}"))?;
            b.add(glob);
        }
        Ok(Self {
            patterns: patterns.to_vec(),
            set: b.build().map_err(|e| e.to_string())?,
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

/// Default fuel of one agent step of a `wasm` task (well under a second).
pub const DEFAULT_STEP_FUEL: u64 = 2_000_000_000;
/// Default fuel of one hidden check of a `wasm` task.
pub const DEFAULT_CHECK_FUEL: u64 = 400_000_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    id: Spanned<String>,
    family: Family,
    group: Spanned<String>,
    difficulty: Difficulty,
    instructions: Spanned<String>,
    #[serde(default)]
    workspace: Option<Spanned<String>>,
    #[serde(default)]
    setup: Vec<String>,
    limits: RawLimits,
    paths: RawPaths,
    #[serde(default)]
    checks: Option<RawChecks>,
    gold: Spanned<Vec<AgentAction>>,
    #[serde(default)]
    candidates: Vec<Spanned<RawCandidate>>,
    #[serde(default)]
    canaries: Vec<RawCanary>,
    #[serde(default)]
    backend: Backend,
    #[serde(default)]
    session_check: Vec<Spanned<RawSessionCheck>>,
    #[serde(default)]
    workspace_check: Vec<Spanned<RawWorkspaceCheck>>,
    #[serde(default)]
    validate: Option<RawValidate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawValidate {
    #[serde(default)]
    multi_step: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSessionCheck {
    id: String,
    #[serde(default)]
    run: Option<String>,
    #[serde(default)]
    expr: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    expect: Option<toml::Value>,
    #[serde(default)]
    expect_json: Option<String>,
    #[serde(default)]
    tolerance: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkspaceCheck {
    id: String,
    path: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    json: Option<toml::Value>,
    #[serde(default)]
    json_text: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_steps: Spanned<usize>,
    step_timeout_s: Spanned<f64>,
    total_time_s: Spanned<f64>,
    #[serde(default)]
    step_fuel: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPaths {
    allow: Spanned<Vec<String>>,
    #[serde(default)]
    byproducts: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    protected: Option<Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChecks {
    #[serde(default)]
    dir: Option<Spanned<String>>,
    #[serde(default)]
    timeout_s: Option<Spanned<f64>>,
    #[serde(default)]
    fuel: Option<Spanned<u64>>,
    #[serde(default)]
    runner: Option<CheckRunner>,
    #[serde(default)]
    semantics: Option<Spanned<Semantics>>,
    #[serde(default)]
    roots: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    fail_to_pass: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pass_to_pass: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pytest_ini: Option<Spanned<String>>,
    #[serde(default)]
    allow_static: Vec<String>,
}

#[derive(Deserialize)]
struct RawCandidate {
    label: CandidateLabel,
    #[serde(default)]
    replaces: Option<usize>,
    #[serde(flatten)]
    action: AgentAction,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCanary {
    name: Spanned<String>,
    actions: Vec<AgentAction>,
}

/// Whether `dir` holds a test file (`test*.py` or `*_test.py`), looking
/// `depth` folders down (pytest suites keep theirs in `tests/`).
fn has_test_files(dir: &Path, depth: usize) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.filter_map(Result::ok).any(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        match e.file_type() {
            Ok(t) if t.is_file() => {
                n.ends_with(".py") && (n.starts_with("test") || n.ends_with("_test.py"))
            }
            Ok(t) if t.is_dir() => depth > 0 && has_test_files(&e.path(), depth - 1),
            _ => false,
        }
    })
}

/// Whether `id` is a valid task id.
pub fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !id.starts_with('-')
}

struct Source<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Source<'_> {
    fn position(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        (line, column)
    }

    /// The dotted field at `offset`: the enclosing `[table]` and the key on that line.
    fn field_at(&self, offset: usize) -> String {
        let before = &self.text[..offset.min(self.text.len())];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.text[line_start..]
            .find('\n')
            .map_or(self.text.len(), |i| line_start + i);
        let line = &self.text[line_start..line_end];
        let key = line
            .split_once('=')
            .map(|(k, _)| k.trim().to_owned())
            .filter(|k| !k.is_empty() && !k.starts_with('['));
        let table = before[..line_start]
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with('['))
            .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_owned());
        let header = line.trim();
        if header.starts_with('[') {
            return header
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_owned();
        }
        match (table, key) {
            (Some(t), Some(k)) => format!("{t}.{k}"),
            (None, Some(k)) => k,
            (Some(t), None) => t,
            (None, None) => "(top level)".to_owned(),
        }
    }

    fn error_at(
        &self,
        offset: usize,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> TaskError {
        let (line, column) = self.position(offset);
        TaskError::Field {
            file: self.file.to_owned(),
            line,
            column,
            field: field.map_or_else(|| self.field_at(offset), str::to_owned),
            message: message.into(),
        }
    }

    fn error<T>(&self, spanned: &Spanned<T>, field: &str, message: impl Into<String>) -> TaskError {
        self.error_at(spanned.span().start, Some(field), message)
    }
}

impl TaskSpec {
    /// Load and check the task in `dir` (which holds `task.toml`).
    ///
    /// # Errors
    /// [`TaskError`] naming the file, line and field of the first problem.
    pub fn load(dir: &Path) -> Result<Self, TaskError> {
        let file = dir.join("task.toml");
        let text = std::fs::read_to_string(&file).map_err(|e| TaskError::File {
            file: file.clone(),
            message: format!("cannot read: {e}"),
        })?;
        let src = Source {
            file: &file,
            text: &text,
        };
        let raw: RawTask = toml::from_str(&text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            let message = e.message().trim().to_owned();
            let field = missing_field(&message);
            src.error_at(offset, field.as_deref(), message)
        })?;
        Self::check(dir, &src, raw)
    }

    fn check(dir: &Path, src: &Source<'_>, raw: RawTask) -> Result<Self, TaskError> {
        let id = raw.id.get_ref().clone();
        if !valid_id(&id) {
            return Err(src.error(
                &raw.id,
                "id",
                format!("{id:?} is not a task id (1-64 characters of a-z, 0-9 and -)"),
            ));
        }
        let dir_name = dir
            .canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
        if dir_name.as_deref() != Some(id.as_str()) {
            return Err(src.error(
                &raw.id,
                "id",
                format!(
                    "{id:?} differs from the directory name {:?}",
                    dir_name.unwrap_or_default()
                ),
            ));
        }
        if raw.group.get_ref().trim().is_empty() {
            return Err(src.error(&raw.group, "group", "must not be empty"));
        }
        if raw.instructions.get_ref().trim().is_empty() {
            return Err(src.error(&raw.instructions, "instructions", "must not be empty"));
        }
        let workspace = match &raw.workspace {
            Some(w) => {
                let path = dir.join(w.get_ref());
                if !path.is_dir() || !is_plain_relative(w.get_ref()) {
                    return Err(src.error(
                        w,
                        "workspace",
                        format!(
                            "{:?} is not a folder inside the task directory",
                            w.get_ref()
                        ),
                    ));
                }
                path
            }
            None => {
                let path = dir.join("workspace");
                // A `wasm` task may start from an empty workspace.
                if !path.is_dir() && raw.backend == Backend::Native {
                    return Err(TaskError::File {
                        file: path,
                        message: "the task has no workspace folder (set `workspace`)".to_owned(),
                    });
                }
                path
            }
        };
        let limits = &raw.limits;
        if *limits.max_steps.get_ref() == 0 || *limits.max_steps.get_ref() > 1000 {
            return Err(src.error(
                &limits.max_steps,
                "limits.max_steps",
                "must be between 1 and 1000",
            ));
        }
        let seconds = |s: &Spanned<f64>, field: &str| -> Result<u64, TaskError> {
            let v = *s.get_ref();
            if v.is_finite() && v > 0.0 && v <= 86_400.0 {
                Ok((v * 1000.0) as u64)
            } else {
                Err(src.error(
                    s,
                    field,
                    format!("{v} is not a number of seconds in (0, 86400]"),
                ))
            }
        };
        let limits = EnvLimits {
            max_steps: *limits.max_steps.get_ref(),
            step_timeout_ms: seconds(&limits.step_timeout_s, "limits.step_timeout_s")?,
            total_time_ms: seconds(&limits.total_time_s, "limits.total_time_s")?,
        };
        let globs = |s: &Spanned<Vec<String>>, field: &str, extra: &[&str]| {
            let mut all: Vec<String> = extra.iter().map(|p| (*p).to_owned()).collect();
            all.extend(s.get_ref().iter().cloned());
            if let Some(bad) = s
                .get_ref()
                .iter()
                .find(|p| p.starts_with('/') || p.contains(".."))
            {
                return Err(src.error(
                    s,
                    field,
                    format!("{bad:?}: globs are relative to /workspace, without `..`"),
                ));
            }
            Globs::new(&all).map_err(|e| src.error(s, field, e))
        };
        let allow = globs(&raw.paths.allow, "paths.allow", &[])?;
        let empty = Spanned::new(0..0, Vec::new());
        let byproducts = globs(
            raw.paths.byproducts.as_ref().unwrap_or(&empty),
            "paths.byproducts",
            DEFAULT_BYPRODUCTS,
        )?;
        let protected = globs(
            raw.paths.protected.as_ref().unwrap_or(&empty),
            "paths.protected",
            &[],
        )?;
        let wasm = raw.backend == Backend::Wasm;
        let (checks, checks_timeout_ms) = if wasm {
            if let Some(d) = raw.checks.as_ref().and_then(|c| c.dir.as_ref()) {
                return Err(src.error(
                    d,
                    "checks.dir",
                    "a `wasm` task has no checks folder: its hidden checks are \
                     [[session_check]] and [[workspace_check]] tables",
                ));
            }
            let timeout = match raw.checks.as_ref().and_then(|c| c.timeout_s.as_ref()) {
                Some(t) => seconds(t, "checks.timeout_s")?,
                None => 60_000,
            };
            (dir.join("checks"), timeout)
        } else {
            let checks = raw.checks.as_ref();
            let dir_field = checks.and_then(|c| c.dir.as_ref());
            let rel = dir_field.map_or("checks", |d| d.get_ref().as_str());
            let path = dir.join(rel);
            if !has_test_files(&path, 4) || !is_plain_relative(rel) {
                let message = format!(
                    "{rel:?} is not a folder of test files (test*.py or *_test.py) in the task"
                );
                return Err(match dir_field {
                    Some(d) => src.error(d, "checks.dir", message),
                    None => TaskError::File {
                        file: path,
                        message,
                    },
                });
            }
            let timeout = match checks.and_then(|c| c.timeout_s.as_ref()) {
                Some(t) => seconds(t, "checks.timeout_s")?,
                None => 60_000,
            };
            (path, timeout)
        };
        let check_config = check_config(src, raw.checks.as_ref(), &checks, wasm)?;
        let multi_step = raw
            .validate
            .as_ref()
            .and_then(|v| v.multi_step)
            .unwrap_or(raw.family != Family::Upstream);
        if raw.gold.get_ref().is_empty() {
            return Err(src.error(&raw.gold, "gold", "the gold solution has no actions"));
        }
        let gold = raw.gold.into_inner();
        let mut candidates = Vec::new();
        for (i, c) in raw.candidates.into_iter().enumerate() {
            let span = c.span();
            let c = c.into_inner();
            if let Some(r) = c.replaces
                && r >= gold.len()
            {
                return Err(src.error_at(
                    span.start,
                    Some(&format!("candidates[{i}].replaces")),
                    format!(
                        "{r} is not an index of the gold solution (0..{})",
                        gold.len()
                    ),
                ));
            }
            candidates.push(Candidate {
                label: c.label,
                replaces: c.replaces,
                action: c.action,
            });
        }
        let (session_checks, workspace_checks) =
            session_checks(src, wasm, &raw.session_check, &raw.workspace_check)?;
        let fuel = |f: Option<&Spanned<u64>>, field: &str, default: u64| match f {
            Some(f) if !wasm => Err(src.error(f, field, "only `wasm` tasks are metered in fuel")),
            Some(f) if *f.get_ref() < 1_000_000 || *f.get_ref() > 1_000_000_000_000 => {
                Err(src.error(f, field, "must be between 1e6 and 1e12 units"))
            }
            Some(f) => Ok(*f.get_ref()),
            None => Ok(default),
        };
        let step_fuel = fuel(
            raw.limits.step_fuel.as_ref(),
            "limits.step_fuel",
            DEFAULT_STEP_FUEL,
        )?;
        let check_fuel = fuel(
            raw.checks.as_ref().and_then(|c| c.fuel.as_ref()),
            "checks.fuel",
            DEFAULT_CHECK_FUEL,
        )?;
        let mut canaries = Vec::new();
        for c in raw.canaries {
            if c.actions.is_empty() {
                return Err(src.error(&c.name, "canaries.actions", "a canary needs actions"));
            }
            canaries.push(CanarySpec {
                name: c.name.into_inner(),
                actions: c.actions,
            });
        }
        Ok(Self {
            id,
            family: raw.family,
            group: raw.group.into_inner(),
            difficulty: raw.difficulty,
            instructions: raw.instructions.into_inner(),
            dir: dir.to_owned(),
            workspace,
            setup: raw.setup,
            limits,
            allow,
            byproducts,
            protected,
            checks,
            checks_timeout_ms,
            check_config,
            multi_step,
            gold,
            candidates,
            canaries,
            backend: raw.backend,
            session_checks,
            workspace_checks,
            step_fuel,
            check_fuel,
        })
    }
}

/// The `[checks]` settings beyond `dir` and `timeout_s`, checked.
fn check_config(
    src: &Source<'_>,
    raw: Option<&RawChecks>,
    checks_dir: &Path,
    wasm: bool,
) -> Result<CheckConfig, TaskError> {
    let Some(raw) = raw else {
        return Ok(CheckConfig {
            roots: vec![".".to_owned()],
            ..CheckConfig::default()
        });
    };
    let runner = raw.runner.unwrap_or_default();
    let semantics = match &raw.semantics {
        Some(s) => *s.get_ref(),
        None if runner == CheckRunner::Pytest => Semantics::Upstream,
        None => Semantics::Strict,
    };
    if let (Some(s), true) = (&raw.semantics, wasm) {
        return Err(src.error(
            s,
            "checks.semantics",
            "`wasm` tasks have declarative checks",
        ));
    }
    if runner == CheckRunner::Pytest && semantics == Semantics::Strict {
        let s = raw.semantics.as_ref().map_or(0..0, Spanned::span);
        return Err(src.error_at(
            s.start,
            Some("checks.semantics"),
            "pytest checks run with upstream semantics (strict assertions are unittest's)",
        ));
    }
    let roots = match &raw.roots {
        Some(r) => {
            if let Some(bad) = r.get_ref().iter().find(|p| !is_plain_relative(p)) {
                return Err(src.error(
                    r,
                    "checks.roots",
                    format!(
                        "{bad:?}: import roots are folders relative to /workspace, without `..`"
                    ),
                ));
            }
            if r.get_ref().is_empty() {
                return Err(src.error(r, "checks.roots", "give at least one import root"));
            }
            r.get_ref().clone()
        }
        None => vec![".".to_owned()],
    };
    let ids = |f: &Option<Spanned<Vec<String>>>, field: &str| -> Result<Vec<String>, TaskError> {
        let Some(f) = f else { return Ok(Vec::new()) };
        for id in f.get_ref() {
            let ok = match runner {
                CheckRunner::Pytest => {
                    let file = id.split("::").next().unwrap_or_default();
                    file.ends_with(".py") && is_plain_relative(file) && id.contains("::")
                }
                CheckRunner::Unittest => {
                    id.split('.').count() >= 3
                        && id.split('.').all(|p| !p.is_empty() && !p.contains('/'))
                }
            };
            if !ok {
                return Err(src.error(
                    f,
                    field,
                    format!(
                        "{id:?} is not a {runner} test id ({})",
                        match runner {
                            CheckRunner::Pytest => "path/test_x.py::Class::test_name[param]",
                            CheckRunner::Unittest => "module.Class.test_method",
                        }
                    ),
                ));
            }
        }
        Ok(f.get_ref().clone())
    };
    let fail_to_pass = ids(&raw.fail_to_pass, "checks.fail_to_pass")?;
    let pass_to_pass = ids(&raw.pass_to_pass, "checks.pass_to_pass")?;
    let pytest_ini = match &raw.pytest_ini {
        Some(p) => {
            let rel = p.get_ref();
            if !is_plain_relative(rel) || !checks_dir.join(rel).is_file() {
                return Err(src.error(
                    p,
                    "checks.pytest_ini",
                    format!("{rel:?} is not a file of the checks folder"),
                ));
            }
            Some(rel.clone())
        }
        None => None,
    };
    Ok(CheckConfig {
        runner,
        semantics,
        roots,
        fail_to_pass,
        pass_to_pass,
        pytest_ini,
        allow_static: raw.allow_static.clone(),
    })
}

/// A TOML value as JSON (datetimes are refused).
fn toml_to_json(v: &toml::Value) -> Result<serde_json::Value, String> {
    Ok(match v {
        toml::Value::String(s) => serde_json::Value::String(s.clone()),
        toml::Value::Integer(i) => serde_json::Value::from(*i),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .ok_or_else(|| format!("{f} is not a finite number"))?,
        toml::Value::Boolean(b) => serde_json::Value::Bool(*b),
        toml::Value::Datetime(d) => return Err(format!("{d}: a datetime is not a value here")),
        toml::Value::Array(a) => {
            serde_json::Value::Array(a.iter().map(toml_to_json).collect::<Result<_, _>>()?)
        }
        toml::Value::Table(t) => serde_json::Value::Object(
            t.iter()
                .map(|(k, v)| Ok((k.clone(), toml_to_json(v)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

/// An expected value given as `expect` (TOML) or `expect_json` (JSON text).
fn expected_value(
    toml_value: Option<&toml::Value>,
    json_text: Option<&str>,
) -> Result<serde_json::Value, String> {
    match (toml_value, json_text) {
        (Some(v), None) => toml_to_json(v),
        (None, Some(t)) => serde_json::from_str(t).map_err(|e| format!("not JSON: {e}")),
        _ => Err("give exactly one of the TOML value and the JSON text".to_owned()),
    }
}

/// Check and convert the hidden checks of a `wasm` task (and refuse them
/// in a `native` one).
fn session_checks(
    src: &Source<'_>,
    wasm: bool,
    raw_session: &[Spanned<RawSessionCheck>],
    raw_workspace: &[Spanned<RawWorkspaceCheck>],
) -> Result<(Vec<SessionCheck>, Vec<WorkspaceCheck>), TaskError> {
    let at = |span: std::ops::Range<usize>, field: String, message: String| {
        src.error_at(span.start, Some(&field), message)
    };
    if !wasm {
        if let Some(c) = raw_session.first() {
            return Err(at(
                c.span(),
                "session_check".into(),
                "only `backend = \"wasm\"` tasks have session checks".into(),
            ));
        }
        if let Some(c) = raw_workspace.first() {
            return Err(at(
                c.span(),
                "workspace_check".into(),
                "only `backend = \"wasm\"` tasks have workspace checks (native tasks use checks/)"
                    .into(),
            ));
        }
        return Ok((Vec::new(), Vec::new()));
    }
    if raw_session.is_empty() {
        return Err(src.error_at(
            0,
            Some("session_check"),
            "a `wasm` task needs at least one [[session_check]]",
        ));
    }
    let mut ids = std::collections::BTreeSet::new();
    let mut session = Vec::new();
    for (i, c) in raw_session.iter().enumerate() {
        let field = |f: &str| format!("session_check[{i}].{f}");
        let r = c.get_ref();
        if !valid_id(&r.id.replace('_', "-")) || !ids.insert(r.id.clone()) {
            return Err(at(
                c.span(),
                field("id"),
                format!("{:?} is not a unique check id ([a-z0-9_-])", r.id),
            ));
        }
        let target = match (&r.expr, &r.name) {
            (Some(e), None) if !e.trim().is_empty() => SessionTarget::Expr(e.clone()),
            (None, Some(n)) if is_identifier(n) => SessionTarget::Name(n.clone()),
            (None, Some(n)) => {
                return Err(at(
                    c.span(),
                    field("name"),
                    format!("{n:?} is not a Python identifier"),
                ));
            }
            _ => {
                return Err(at(
                    c.span(),
                    field("expr"),
                    "give exactly one of `expr` (an expression) and `name` (a session variable)"
                        .into(),
                ));
            }
        };
        let expect = expected_value(r.expect.as_ref(), r.expect_json.as_deref())
            .map_err(|m| at(c.span(), field("expect"), m))?;
        crate::canonical::Canonical::from_json(&expect).map_err(|e| {
            at(
                c.span(),
                field("expect"),
                format!("not canonical JSON: {e}"),
            )
        })?;
        if let Some(t) = r.tolerance
            && !(t.is_finite() && t >= 0.0)
        {
            return Err(at(
                c.span(),
                field("tolerance"),
                format!("{t} is not a tolerance (a finite number >= 0)"),
            ));
        }
        session.push(SessionCheck {
            id: r.id.clone(),
            run: r.run.clone().filter(|s| !s.trim().is_empty()),
            target,
            expect,
            tolerance: r.tolerance,
        });
    }
    let mut workspace = Vec::new();
    for (i, c) in raw_workspace.iter().enumerate() {
        let field = |f: &str| format!("workspace_check[{i}].{f}");
        let r = c.get_ref();
        if !valid_id(&r.id.replace('_', "-")) || !ids.insert(r.id.clone()) {
            return Err(at(
                c.span(),
                field("id"),
                format!("{:?} is not a unique check id ([a-z0-9_-])", r.id),
            ));
        }
        if !is_plain_relative(&r.path) {
            return Err(at(
                c.span(),
                field("path"),
                format!("{:?} is not a path relative to /workspace", r.path),
            ));
        }
        let expect = match (&r.text, &r.json, &r.json_text) {
            (Some(t), None, None) => WorkspaceExpect::Text(t.clone()),
            (None, j, t) if j.is_some() || t.is_some() => WorkspaceExpect::Json(
                expected_value(j.as_ref(), t.as_deref())
                    .map_err(|m| at(c.span(), field("json"), m))?,
            ),
            _ => {
                return Err(at(
                    c.span(),
                    field("text"),
                    "give exactly one of `text`, `json` and `json_text`".into(),
                ));
            }
        };
        workspace.push(WorkspaceCheck {
            id: r.id.clone(),
            path: r.path.clone(),
            expect,
        });
    }
    Ok((session, workspace))
}

/// Whether `s` is a plain (ASCII) Python identifier.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `missing field `x`` → `x`.
fn missing_field(message: &str) -> Option<String> {
    let rest = message.split("missing field `").nth(1)?;
    Some(rest.split('`').next()?.to_owned())
}

fn is_plain_relative(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && Path::new(p)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task_dir(toml: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("t-1");
        std::fs::create_dir_all(dir.join("workspace")).unwrap();
        std::fs::create_dir_all(dir.join("checks")).unwrap();
        std::fs::write(dir.join("checks/test_x.py"), "").unwrap();
        std::fs::write(dir.join("task.toml"), toml).unwrap();
        root
    }

    const GOOD: &str = r#"id = "t-1"
family = "coding"
group = "g"
difficulty = "easy"
instructions = "fix it"

[limits]
max_steps = 5
step_timeout_s = 10
total_time_s = 60

[paths]
allow = ["src/*.py"]

[[gold]]
write = "src/a.py"
content = "x = 1\n"

[[candidates]]
label = "wrong"
replaces = 0
write = "src/a.py"
content = "x = 2\n"
"#;

    #[test]
    fn a_good_task_loads() {
        let root = task_dir(GOOD);
        let t = TaskSpec::load(&root.path().join("t-1")).unwrap();
        assert_eq!(t.id, "t-1");
        assert_eq!(t.family, Family::Coding);
        assert_eq!(t.limits.step_timeout_ms, 10_000);
        assert!(t.allow.matches("src/a.py"));
        assert!(
            !t.allow.matches("src/sub/a.py"),
            "* stays within a component"
        );
        assert!(t.byproducts.matches("src/__pycache__/a.cpython-311.pyc"));
        assert_eq!(t.candidates[0].replaces, Some(0));
        assert_eq!(t.gold, vec![AgentAction::write("src/a.py", "x = 1\n")]);
    }

    fn load_err(toml: &str) -> String {
        let root = task_dir(toml);
        TaskSpec::load(&root.path().join("t-1"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn malformed_fields_name_file_line_and_field() {
        let e = load_err(&GOOD.replace("max_steps = 5", "max_steps = \"five\""));
        assert!(e.contains("task.toml:8:"), "{e}");
        assert!(e.contains("field `limits.max_steps`"), "{e}");

        let e = load_err(&GOOD.replace("family = \"coding\"", "family = \"cooking\""));
        assert!(e.contains("task.toml:2:"), "{e}");
        assert!(e.contains("field `family`"), "{e}");
        assert!(e.contains("cooking"), "{e}");

        let e = load_err(&GOOD.replace("replaces = 0", "replaces = 7"));
        assert!(e.contains("candidates[0].replaces"), "{e}");
        assert!(e.contains("not an index"), "{e}");

        let e = load_err(&GOOD.replace("id = \"t-1\"", "id = \"other\""));
        assert!(e.contains("task.toml:1:"), "{e}");
        assert!(e.contains("differs from the directory name"), "{e}");

        let e = load_err(&GOOD.replace("instructions = \"fix it\"\n", ""));
        assert!(e.contains("field `instructions`"), "{e}");
        assert!(e.contains("missing"), "{e}");

        let e = load_err(&GOOD.replace("content = \"x = 1\\n\"", "content = \"x\"\nexec = \"ls\""));
        assert!(e.contains("exactly one of"), "{e}");
        assert!(e.contains("task.toml:1"), "{e}");

        let e = load_err(&GOOD.replace("allow = [\"src/*.py\"]", "allow = [\"../x\"]"));
        assert!(e.contains("field `paths.allow`"), "{e}");

        let e = load_err(&GOOD.replace("[limits]", "bogus = 1\n[limits]"));
        assert!(e.contains("unknown field `bogus`"), "{e}");
        assert!(e.contains("task.toml:7:"), "{e}");
    }

    const WASM: &str = r#"id = "t-1"
family = "interpreter"
backend = "wasm"
group = "g"
difficulty = "easy"
instructions = "define f"
setup = ["data = [1, 2]\n"]

[limits]
max_steps = 5
step_timeout_s = 10
total_time_s = 60
step_fuel = 100000000

[paths]
allow = []

[[gold]]
exec = "def f(x):\n    return x + 1\n"

[[session_check]]
id = "f"
expr = "f(41)"
expect = 42

[[session_check]]
id = "pair"
run = "p = (f(1), None)"
expr = "p"
expect_json = '{"tuple": [2, null]}'
tolerance = 0.5

[[session_check]]
id = "data"
name = "data"
expect = [1, 2]

[[workspace_check]]
id = "out"
path = "out.json"
json = { total = 3 }
"#;

    #[test]
    fn a_wasm_task_loads_with_declarative_checks() {
        let root = task_dir(WASM);
        let t = TaskSpec::load(&root.path().join("t-1")).unwrap();
        assert_eq!(t.backend, Backend::Wasm);
        assert_eq!(t.family, Family::Interpreter);
        assert_eq!(t.step_fuel, 100_000_000);
        assert_eq!(t.check_fuel, DEFAULT_CHECK_FUEL);
        assert_eq!(t.session_checks.len(), 3);
        assert_eq!(t.session_checks[0].expect, serde_json::json!(42));
        assert_eq!(
            t.session_checks[1].expect,
            serde_json::json!({"tuple": [2, null]})
        );
        assert_eq!(t.session_checks[1].tolerance, Some(0.5));
        assert_eq!(
            t.session_checks[2].target,
            SessionTarget::Name("data".into())
        );
        assert_eq!(
            t.workspace_checks[0].expect,
            WorkspaceExpect::Json(serde_json::json!({"total": 3}))
        );
        let native = TaskSpec::load(&task_dir(GOOD).path().join("t-1")).unwrap();
        assert_eq!(native.backend, Backend::Native, "the default backend");
        assert!(native.session_checks.is_empty());
    }

    #[test]
    fn malformed_wasm_fields_name_file_line_and_field() {
        let e = load_err(&WASM.replace("backend = \"wasm\"", "backend = \"jvm\""));
        assert!(e.contains("task.toml:3:"), "{e}");
        assert!(e.contains("field `backend`"), "{e}");
        assert!(e.contains("jvm"), "{e}");

        let e = load_err(&WASM.replace("expr = \"f(41)\"\n", ""));
        assert!(e.contains("session_check[0].expr"), "{e}");
        assert!(e.contains("exactly one of `expr`"), "{e}");

        let e = load_err(&WASM.replace("name = \"data\"", "name = \"1x\""));
        assert!(e.contains("session_check[2].name"), "{e}");

        let e = load_err(&WASM.replace("expect = 42\n", "expect = 42\nexpect_json = \"42\"\n"));
        assert!(e.contains("session_check[0].expect"), "{e}");

        let e = load_err(&WASM.replace("[2, null]", "5"));
        assert!(e.contains("session_check[1].expect"), "{e}");
        assert!(e.contains("not canonical JSON"), "{e}");

        let e = load_err(&WASM.replace("id = \"pair\"", "id = \"f\""));
        assert!(e.contains("not a unique check id"), "{e}");

        let e = load_err(&WASM.replace("json = { total = 3 }", "text = \"x\"\njson = 1"));
        assert!(e.contains("workspace_check[0].text"), "{e}");

        let e = load_err(&WASM.replace("step_fuel = 100000000", "step_fuel = 5"));
        assert!(e.contains("field `limits.step_fuel`"), "{e}");

        let e = load_err(&GOOD.replace(
            "[limits]",
            "[[session_check]]\nid = \"x\"\nname = \"x\"\nexpect = 1\n\n[limits]",
        ));
        assert!(e.contains("only `backend = \"wasm\"` tasks"), "{e}");
        assert!(e.contains("task.toml:7:"), "{e}");

        let e = load_err(&WASM.replace(
            "[[session_check]]\nid = \"f\"\nexpr = \"f(41)\"\nexpect = 42\n\n[[session_check]]\nid = \"pair\"\nrun = \"p = (f(1), None)\"\nexpr = \"p\"\nexpect_json = '{\"tuple\": [2, null]}'\ntolerance = 0.5\n\n[[session_check]]\nid = \"data\"\nname = \"data\"\nexpect = [1, 2]\n",
            "",
        ));
        assert!(e.contains("at least one [[session_check]]"), "{e}");
    }
}
