//! [`TaskEnv`]: a prepared task that implements [`Environment`], and its
//! layered verifier.
//!
//! Preparation imports the task's workspace (and runs its setup) as the root
//! snapshot, and imports the hidden checks, with the trusted runner, as a
//! separate single-layer snapshot. Both are tagged by a hash of the task's
//! files, so they are made once per store. The checks snapshot is never part
//! of any agent's sandbox: the verifier binds it read-only at `/verifier` into
//! a fresh fork of the episode's final snapshot, for the one action that runs
//! the checks, after resetting the session (nothing the agent exported reaches
//! it), and decides from the runner's nonce-tagged result line alone.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use arbor_rollout::env::{
    EpisodeStep, HardConstraints, ProcessDiagnostics, SoftQuality, TaskOutcome, Violation,
    ViolationKind, describe_exit,
};
use arbor_rollout::{
    AgentAction, EnvError, EnvLimits, EnvObservation, EnvSandbox, EnvSnapshot, Environment,
    Episode, StepResult, Verdict,
};
use arbor_runtime::layer::{self, MergedView};
use arbor_runtime::sandbox::ReadOnlyMount;
use arbor_runtime::store::object::{EntryKind, ExitStatus};
use arbor_runtime::{ExecOptions, Runtime, Sandbox, SandboxError, Snapshot};
use serde::Deserialize;

use crate::task::{Backend, CandidateLabel, Globs, TaskSpec};

/// The trusted check runner, placed at `/verifier/.arbor/runner.py`.
pub const RUNNER: &str = include_str!("runner.py");

/// Python module names of the standard library (a workspace file at the top
/// level with one of these names would shadow it).
const STDLIB_MODULES: &str = include_str!("stdlib_modules.txt");

/// How the checks are started: a trusted interpreter, isolated (`-I`), no
/// `site` (`-S`), no bytecode (`-B`).
const PYTHON: &str = "/usr/bin/python3 -I -S -B /verifier/.arbor/runner.py";

/// Name of the nonce file the runner reads and deletes before any workspace code runs.
const NONCE_FILE: &str = ".arbor-verifier-nonce";

/// Bytes of an action's output kept in an observation.
const OBSERVATION_BYTES: usize = 8 << 10;

/// Version of the preparation format; part of the cache key.
const PREPARE_VERSION: &str = "arbor-task-v1";

/// Grader hooks: added or changed, any of these breaks a hard constraint.
const HOOK_GLOBS: &[&str] = &[
    "**/conftest.py",
    "**/sitecustomize.py",
    "**/usercustomize.py",
    "**/*.pth",
    "**/entry_points.txt",
    "**/pytest.ini",
    "**/.pytest_cache",
    "**/.pytest_cache/**",
    "**/junit*.xml",
    "**/test-results*",
    "**/test_results*",
    "**/results.json",
    "**/.arbor*",
    "**/.arbor*/**",
];

fn hooks() -> &'static Globs {
    static HOOKS: OnceLock<Globs> = OnceLock::new();
    HOOKS.get_or_init(|| {
        let patterns: Vec<String> = HOOK_GLOBS.iter().map(|s| (*s).to_owned()).collect();
        Globs::new(&patterns).expect("the built-in hook globs parse")
    })
}

/// Whether `path` (a workspace path) would shadow a standard-library module:
/// `json.py` or `json/` at the top level, where the workspace is on `sys.path`.
pub fn shadows_stdlib(path: &str) -> bool {
    let top = path.split('/').next().unwrap_or(path);
    let name = top.strip_suffix(".py").unwrap_or(top);
    STDLIB_MODULES.lines().any(|m| m == name) && (top.ends_with(".py") || path.contains('/'))
}

/// A task ready to run: its root snapshot, its checks snapshot and the ids of
/// its hidden checks.
#[derive(Debug)]
pub struct TaskEnv {
    spec: TaskSpec,
    runtime: Runtime,
    root: Snapshot,
    checks: Snapshot,
    check_ids: Vec<String>,
    candidates: Vec<AgentAction>,
}

#[derive(Deserialize)]
struct ListedIds {
    ids: Vec<String>,
}

#[derive(Deserialize)]
struct RunnerResult {
    tests: Vec<RunnerTest>,
    tampered: Vec<String>,
    lint: Vec<String>,
}

#[derive(Deserialize)]
struct RunnerTest {
    id: String,
    outcome: String,
    detail: String,
    #[serde(default)]
    asserts: Vec<serde_json::Value>,
}

impl TaskEnv {
    /// Prepare `spec` in `runtime`'s store (reusing earlier preparations).
    ///
    /// # Errors
    /// Runtime faults, a failing setup command, checks that list no test.
    pub fn prepare(runtime: &Runtime, spec: TaskSpec) -> Result<Self, EnvError> {
        let task_err = |message: String| EnvError::Task {
            task: spec.id.clone(),
            message,
        };
        if spec.backend != Backend::Native {
            return Err(task_err(format!(
                "it uses the {} backend, which TaskEnv (rollouts and training) does not drive; \
                 use arbor_envs::prepare (`arbor task run`, `arbor task validate`)",
                spec.backend
            )));
        }
        let key = content_key(&spec).map_err(&task_err)?;
        let store = runtime.store();
        let root_tag = format!("task.{}.{key}", spec.id);
        let checks_tag = format!("checks.{}.{key}", spec.id);
        let root = match store.get_tag(&root_tag).map_err(runtime_err)? {
            Some(id) => runtime.snapshot(&id)?,
            None => make_root(runtime, &spec, &root_tag)?,
        };
        let checks = match store.get_tag(&checks_tag).map_err(runtime_err)? {
            Some(id) => runtime.snapshot(&id)?,
            None => {
                let tmp = tempfile::tempdir().map_err(|e| task_err(format!("tempdir: {e}")))?;
                copy_checks(&spec.checks, tmp.path()).map_err(&task_err)?;
                runtime.import(tmp.path(), Some(&checks_tag))?
            }
        };
        let mut sb = root.open()?;
        sb.reset_session();
        let mut opts = ExecOptions::with_timeout_ms(spec.checks_timeout_ms);
        opts.mounts = vec![ReadOnlyMount::new(&checks, "verifier")?];
        let obs = sb.exec(&format!("{PYTHON} list"), &opts)?;
        drop(sb);
        if obs.code() != Some(0) {
            return Err(task_err(format!(
                "listing the hidden checks failed ({}): {}",
                describe_exit(&obs.exit),
                String::from_utf8_lossy(&obs.stderr).trim()
            )));
        }
        let listed: ListedIds = serde_json::from_slice(&obs.stdout)
            .map_err(|e| task_err(format!("the runner's list output is not JSON: {e}")))?;
        if listed.ids.is_empty() {
            return Err(task_err(
                "the hidden checks define no test method (class with test* methods)".to_owned(),
            ));
        }
        let candidates = shuffled_candidates(&spec);
        Ok(Self {
            spec,
            runtime: runtime.clone(),
            root,
            checks,
            check_ids: listed.ids,
            candidates,
        })
    }

    /// The task.
    pub fn spec(&self) -> &TaskSpec {
        &self.spec
    }

    /// The root snapshot.
    pub fn root(&self) -> &Snapshot {
        &self.root
    }

    /// The ids of the hidden checks (`module.Class.method`).
    pub fn check_ids(&self) -> &[String] {
        &self.check_ids
    }

    /// The runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Run `actions` from the root snapshot in one sandbox and snapshot the
    /// end state. Every action is run, even past the step limit (the
    /// verifier reports that).
    ///
    /// # Errors
    /// Runtime faults only.
    pub fn run(&self, actions: &[AgentAction]) -> Result<(Episode, Vec<StepResult>), EnvError> {
        let mut sb = EnvSandbox::Native(self.root.open()?);
        let mut results = Vec::with_capacity(actions.len());
        for (i, a) in actions.iter().enumerate() {
            results.push(self.step(&mut sb, i, a)?);
        }
        let last = sb.snapshot()?;
        let episode = Episode {
            task: self.spec.id.clone(),
            root: EnvSnapshot::Native(self.root.clone()),
            steps: results.iter().map(|r| r.record.clone()).collect(),
            last,
        };
        Ok((episode, results))
    }

    /// Run `actions` and verify the result.
    ///
    /// # Errors
    /// Runtime faults while running the actions (verification faults are verdicts).
    pub fn run_and_verify(&self, actions: &[AgentAction]) -> Result<Verdict, EnvError> {
        let (episode, _) = self.run(actions)?;
        Ok(self.verify(&episode))
    }

    fn hard_constraints(
        &self,
        episode: &Episode,
        base: &MergedView,
        last: &MergedView,
    ) -> HardConstraints {
        let spec = &self.spec;
        let mut violations = path_violations(spec, base, last);
        let limits = spec.limits;
        violations.extend(step_limit_violation(&limits, episode.steps.len()));
        for (i, s) in episode.steps.iter().enumerate() {
            match s.exit {
                ExitStatus::Timeout => violations.push(Violation {
                    kind: ViolationKind::AgentTimeout,
                    detail: format!("step {i} ({}) timed out", s.action),
                }),
                ExitStatus::DiskLimit => violations.push(Violation {
                    kind: ViolationKind::AgentDiskLimit,
                    detail: format!("step {i} ({}) hit the disk limit", s.action),
                }),
                _ => {}
            }
        }
        violations.extend(time_limit_violation(&limits, agent_ms(&episode.steps)));
        HardConstraints { violations }
    }

    fn quality(
        &self,
        sb: &mut Sandbox,
        base: &MergedView,
        last: &MergedView,
    ) -> Result<SoftQuality, SandboxError> {
        let d = layer::diff(base, last);
        let mut changed_lines = 0;
        for path in d.added.iter().chain(&d.modified) {
            let Some(EntryKind::File { size, .. }) = last.entries.get(path).map(|e| &e.kind) else {
                continue;
            };
            if *size > 256 << 10 {
                continue;
            }
            let new = match sb.read_file(path) {
                Ok(b) => b,
                Err(SandboxError::File(_)) => continue,
                Err(e) => return Err(e),
            };
            let old = if d.modified.contains(path) {
                std::fs::read(self.spec.workspace.join(path)).unwrap_or_default()
            } else {
                Vec::new()
            };
            changed_lines += line_changes(&old, &new);
        }
        changed_lines += d
            .deleted
            .iter()
            .filter_map(|p| std::fs::read(self.spec.workspace.join(p)).ok())
            .map(|old| line_changes(&old, b""))
            .sum::<usize>();
        Ok(SoftQuality {
            added: d.added.len(),
            modified: d.modified.len(),
            deleted: d.deleted.len(),
            changed_lines,
            lint_errors: Vec::new(),
        })
    }

    fn run_checks(
        &self,
        sb: &mut Sandbox,
        python_files: &[String],
    ) -> Result<(TaskOutcome, Vec<String>, Vec<String>), SandboxError> {
        let nonce = hex::encode(nonce_bytes());
        let mut outcome = TaskOutcome {
            checks_total: self.check_ids.len(),
            ..TaskOutcome::default()
        };
        match sb.write_file(NONCE_FILE, nonce.as_bytes(), 0o600) {
            Ok(()) => {}
            Err(SandboxError::File(m)) => {
                outcome.problem =
                    Some(format!("the final state refuses the verifier's files: {m}"));
                return Ok((outcome, Vec::new(), Vec::new()));
            }
            Err(e) => return Err(e),
        }
        let mut opts = ExecOptions::with_timeout_ms(self.spec.checks_timeout_ms);
        opts.mounts = vec![ReadOnlyMount::new(&self.checks, "verifier")?];
        let mut cmd = format!("exec {PYTHON} run /workspace/{NONCE_FILE}");
        for f in python_files {
            cmd.push(' ');
            cmd.push_str(&shell_quote(f));
        }
        let obs = sb.exec(&cmd, &opts)?;
        let prefix = format!("ARBOR-RESULT {nonce} ");
        let stdout = String::from_utf8_lossy(&obs.stdout);
        let lines: Vec<&str> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .collect();
        let parsed: Option<RunnerResult> = match lines.as_slice() {
            [one] => serde_json::from_str(one).ok(),
            _ => None,
        };
        let Some(result) = parsed else {
            let why = match obs.exit {
                ExitStatus::Timeout => "the checks timed out".to_owned(),
                ref e => format!(
                    "no result from the check runner ({}): {}",
                    describe_exit(e),
                    tail(&String::from_utf8_lossy(&obs.stderr), 400)
                ),
            };
            outcome.problem = Some(why);
            return Ok((outcome, Vec::new(), Vec::new()));
        };
        let by_id: BTreeMap<&str, &RunnerTest> =
            result.tests.iter().map(|t| (t.id.as_str(), t)).collect();
        for id in &self.check_ids {
            let result = match by_id.get(id.as_str()) {
                Some(t) if t.outcome == "pass" => recheck(&t.asserts)
                    .map_err(|why| format!("the verifier's own comparison failed: {why}")),
                Some(t) => Err(t.detail.clone()),
                None => Err("not reported by the runner".to_owned()),
            };
            outcome.record(id.clone(), result);
        }
        Ok((outcome, result.tampered, result.lint))
    }

    fn verify_inner(
        &self,
        episode: &Episode,
        process: &mut ProcessDiagnostics,
    ) -> Result<Verdict, EnvError> {
        let t0 = Instant::now();
        let (Some(root_snap), Some(last_snap)) = (episode.root.native(), episode.last.native())
        else {
            return Err(self.not_native());
        };
        let store = self.runtime.store();
        let base =
            layer::merge_layers(store, &root_snap.manifest().layers).map_err(SandboxError::from)?;
        let last =
            layer::merge_layers(store, &last_snap.manifest().layers).map_err(SandboxError::from)?;
        let mut hard = self.hard_constraints(episode, &base, &last);
        let mut sb = last_snap.open()?;
        sb.reset_session();
        let mut quality = self.quality(&mut sb, &base, &last)?;
        let d = layer::diff(&base, &last);
        let python_files: Vec<String> = d
            .added
            .iter()
            .chain(&d.modified)
            .filter(|p| p.ends_with(".py"))
            .filter(|p| {
                matches!(
                    last.entries.get(*p).map(|e| &e.kind),
                    Some(EntryKind::File { .. })
                )
            })
            .cloned()
            .collect();
        process.verify_setup_ms = millis(t0);
        let t1 = Instant::now();
        let (task, tampered, lint) = self.run_checks(&mut sb, &python_files)?;
        process.verify_checks_ms = millis(t1);
        quality.lint_errors = lint;
        if !tampered.is_empty() {
            hard.violations.push(Violation {
                kind: ViolationKind::Tampering,
                detail: format!("changed while the checks ran: {}", tampered.join(", ")),
            });
        }
        Ok(Verdict::graded(hard, task, quality, process.clone()))
    }
}

impl TaskEnv {
    /// The fault of being handed another backend's state.
    fn not_native(&self) -> EnvError {
        EnvError::Task {
            task: self.spec.id.clone(),
            message: "a native task was given a WebAssembly session's state".into(),
        }
    }
}

impl Environment for TaskEnv {
    fn id(&self) -> &str {
        &self.spec.id
    }

    fn limits(&self) -> EnvLimits {
        self.spec.limits
    }

    fn reset(&self) -> Result<(EnvSnapshot, EnvObservation), EnvError> {
        Ok((
            EnvSnapshot::Native(self.root.clone()),
            observation(&self.spec, 0, None),
        ))
    }

    fn step(
        &self,
        sandbox: &mut EnvSandbox,
        step: usize,
        action: &AgentAction,
    ) -> Result<StepResult, EnvError> {
        let Some(sandbox) = sandbox.native_mut() else {
            return Err(self.not_native());
        };
        let limit = self.spec.limits.step_timeout_ms;
        let started = Instant::now();
        let (exit, output, duration_us) = match action {
            AgentAction::Exec {
                command,
                timeout_ms,
            } => {
                let timeout = timeout_ms.map_or(limit, |t| t.min(limit));
                let obs = sandbox.exec(command, &ExecOptions::with_timeout_ms(timeout))?;
                let mut out = String::from_utf8_lossy(&obs.stdout).into_owned();
                out.push_str(&String::from_utf8_lossy(&obs.stderr));
                (obs.exit, cap(out), obs.duration_us)
            }
            AgentAction::Write {
                path,
                content,
                mode,
            } => file_outcome(
                sandbox.write_file(path, content.as_bytes(), *mode),
                || format!("wrote {} bytes to {path}", content.len()),
                started,
            )?,
            AgentAction::Delete { path } => file_outcome(
                sandbox.delete_file(path),
                || format!("deleted {path}"),
                started,
            )?,
            AgentAction::Submit => (ExitStatus::Code { code: 0 }, "submitted".to_owned(), 0),
        };
        Ok(StepResult {
            observation: observation(&self.spec, step + 1, Some((action, output, exit))),
            record: EpisodeStep {
                action: action.clone(),
                exit,
                duration_us,
            },
        })
    }

    fn verify(&self, episode: &Episode) -> Verdict {
        let mut process = ProcessDiagnostics {
            steps: episode.steps.len(),
            commands: episode.steps.iter().filter(|s| s.action.is_exec()).count(),
            failed: episode
                .steps
                .iter()
                .filter(|s| s.exit != ExitStatus::Code { code: 0 })
                .count(),
            agent_ms: agent_ms(&episode.steps),
            ..ProcessDiagnostics::default()
        };
        match self.verify_inner(episode, &mut process) {
            Ok(v) => v,
            Err(e) => Verdict::fault(e.to_string(), process),
        }
    }

    fn candidates(&self, _observation: &EnvObservation) -> Vec<AgentAction> {
        self.candidates.clone()
    }

    /// The solution in the task's own candidate actions (its `right`
    /// candidates in order, which `task validate` proves solve it), so a
    /// discrete policy can imitate every step; the free-form gold when the
    /// task lists no right candidate.
    fn reference_solution(&self) -> Option<Vec<AgentAction>> {
        Some(reference_solution(&self.spec))
    }
}

/// What the agent sees after `step` actions: the task, and the last
/// action with its output and exit status.
pub(crate) fn observation(
    spec: &TaskSpec,
    step: usize,
    last: Option<(&AgentAction, String, ExitStatus)>,
) -> EnvObservation {
    let (last_action, output, exit) = match last {
        Some((action, output, exit)) => (Some(action.text()), output, Some(exit)),
        None => (None, String::new(), None),
    };
    EnvObservation {
        task: spec.id.clone(),
        instructions: spec.instructions.clone(),
        step,
        last_action,
        output,
        exit,
    }
}

/// A task's `right` candidates, in order.
pub(crate) fn right_candidates(spec: &TaskSpec) -> Vec<AgentAction> {
    spec.candidates
        .iter()
        .filter(|c| c.label == CandidateLabel::Right)
        .map(|c| c.action.clone())
        .collect()
}

/// A task's `right` candidates in order (which `task validate` proves
/// solve it), else its free-form gold.
pub(crate) fn reference_solution(spec: &TaskSpec) -> Vec<AgentAction> {
    let right = right_candidates(spec);
    if right.is_empty() {
        spec.gold.clone()
    } else {
        right
    }
}

/// The hard-constraint violations of a workspace change from `base` to
/// `last`: grader hooks and modules shadowing the standard library added or
/// changed, paths outside `allow` (and the by-products) changed.
pub(crate) fn path_violations(
    spec: &TaskSpec,
    base: &MergedView,
    last: &MergedView,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    let d = layer::diff(base, last);
    let is_dir = |path: &str| {
        matches!(
            base.entries.get(path).map(|e| &e.kind),
            Some(EntryKind::Dir { .. })
        ) || matches!(
            last.entries.get(path).map(|e| &e.kind),
            Some(EntryKind::Dir { .. })
        )
    };
    let changed: Vec<(&str, &String)> = d
        .added
        .iter()
        .map(|p| ("added", p))
        .chain(d.modified.iter().map(|p| ("modified", p)))
        .chain(d.deleted.iter().map(|p| ("deleted", p)))
        .collect();
    let ok_file = |p: &str| spec.allow.matches(p) || spec.byproducts.matches(p);
    for (how, path) in &changed {
        let path = path.as_str();
        if *how != "deleted" && (hooks().matches(path) || shadows_stdlib(path)) {
            violations.push(Violation {
                kind: ViolationKind::GraderHook,
                detail: format!("{path} {how}"),
            });
            continue;
        }
        if ok_file(path) {
            continue;
        }
        if is_dir(path) {
            // A directory is judged by what changed inside it: fine when
            // it was only modified in place (its children are judged on
            // their own), or when an allowed change lies beneath it.
            let prefix = format!("{path}/");
            let covers = *how == "modified"
                || changed
                    .iter()
                    .any(|(_, p)| p.starts_with(&prefix) && ok_file(p))
                || spec.allow.patterns().iter().any(|g| g.starts_with(&prefix));
            if covers {
                continue;
            }
        }
        let kind = if spec.protected.matches(path) {
            ViolationKind::ProtectedChanged
        } else {
            ViolationKind::OutsideAllowed
        };
        violations.push(Violation {
            kind,
            detail: format!("{path} {how}"),
        });
    }
    violations
}

/// Re-evaluate a passing test's recorded assertions here, in the verifier
/// process: the runner only serialises the values (canonical plain data), so
/// a passing test stands only if every comparison it made holds here too,
/// whatever the agent's code did to the interpreter. A passing test must
/// have recorded at least one assertion.
pub fn recheck(asserts: &[serde_json::Value]) -> Result<(), String> {
    if asserts.is_empty() {
        return Err("the test recorded no assertion".to_owned());
    }
    for (i, a) in asserts.iter().enumerate() {
        let ok = eval_assert(a).map_err(|e| format!("assertion {i}: {e}"))?;
        if !ok {
            let text = a.to_string();
            let short: String = text.chars().take(200).collect();
            return Err(format!("assertion {i} does not hold: {short}"));
        }
    }
    Ok(())
}

fn eval_assert(a: &serde_json::Value) -> Result<bool, String> {
    use serde_json::Value;
    let parts = a.as_array().ok_or("not an array")?;
    let op = parts
        .first()
        .and_then(Value::as_str)
        .ok_or("no operation")?;
    let arg = |i: usize| {
        parts
            .get(i)
            .ok_or_else(|| format!("{op}: missing operand {i}"))
    };
    Ok(match op {
        "eq" => canon_eq(arg(1)?, arg(2)?)?,
        "ne" => !canon_eq(arg(1)?, arg(2)?)?,
        "true" => canon_eq(arg(1)?, &serde_json::json!(["bool", true]))?,
        "false" => canon_eq(arg(1)?, &serde_json::json!(["bool", false]))?,
        "in" | "notin" => {
            let found = canon_contains(arg(2)?, arg(1)?)?;
            if op == "in" { found } else { !found }
        }
        "near" => {
            let (x, y) = (canon_number(arg(1)?)?, canon_number(arg(2)?)?);
            let tol = canon_number(arg(3)?)?;
            x == y || (x - y).abs() <= tol
        }
        "lt" | "le" | "gt" | "ge" => {
            let (x, y) = (canon_number(arg(1)?)?, canon_number(arg(2)?)?);
            match op {
                "lt" => x < y,
                "le" => x <= y,
                "gt" => x > y,
                _ => x >= y,
            }
        }
        "raises" => true,
        "overflow" => return Err("too much recorded data to verify".to_owned()),
        other => return Err(format!("unknown operation {other:?}")),
    })
}

/// A canonical value's tag and payload.
fn canon_parts(v: &serde_json::Value) -> Result<(&str, Option<&serde_json::Value>), String> {
    let arr = v
        .as_array()
        .ok_or_else(|| format!("not a canonical value: {v}"))?;
    let tag = arr
        .first()
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| format!("not a canonical value: {v}"))?;
    Ok((tag, arr.get(1)))
}

fn canon_number(v: &serde_json::Value) -> Result<f64, String> {
    match canon_parts(v)? {
        ("int" | "float", Some(serde_json::Value::String(s))) => {
            s.parse::<f64>().map_err(|e| format!("{s:?}: {e}"))
        }
        _ => Err(format!("not a number: {v}")),
    }
}

/// Equality of canonical values: same type, same value (floats numerically).
fn canon_eq(a: &serde_json::Value, b: &serde_json::Value) -> Result<bool, String> {
    let (ta, pa) = canon_parts(a)?;
    let (tb, pb) = canon_parts(b)?;
    if ta != tb {
        return Ok(false);
    }
    match ta {
        "float" => {
            let (x, y) = (canon_number(a)?, canon_number(b)?);
            Ok(x == y || (x.is_nan() && y.is_nan()))
        }
        "list" | "tuple" | "set" | "frozenset" => {
            let (xs, ys) = (as_items(pa)?, as_items(pb)?);
            if xs.len() != ys.len() {
                return Ok(false);
            }
            for (x, y) in xs.iter().zip(ys) {
                if !canon_eq(x, y)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        "dict" => {
            let (xs, ys) = (as_items(pa)?, as_items(pb)?);
            if xs.len() != ys.len() {
                return Ok(false);
            }
            for (x, y) in xs.iter().zip(ys) {
                let (kx, ky) = (as_items(Some(x))?, as_items(Some(y))?);
                if kx.len() != 2 || ky.len() != 2 {
                    return Err("a dict entry is not a pair".to_owned());
                }
                if !canon_eq(&kx[0], &ky[0])? || !canon_eq(&kx[1], &ky[1])? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        _ => Ok(pa == pb),
    }
}

fn as_items(v: Option<&serde_json::Value>) -> Result<&Vec<serde_json::Value>, String> {
    v.and_then(serde_json::Value::as_array)
        .ok_or_else(|| "a container without items".to_owned())
}

fn canon_contains(
    container: &serde_json::Value,
    member: &serde_json::Value,
) -> Result<bool, String> {
    let (tag, payload) = canon_parts(container)?;
    match tag {
        "str" | "bytes" => {
            let (mt, mp) = canon_parts(member)?;
            if mt != tag {
                return Err("substring test needs text on both sides".to_owned());
            }
            let hay = payload
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default();
            let needle = mp.and_then(serde_json::Value::as_str).unwrap_or_default();
            if tag == "bytes" {
                // Hex pairs: search on byte boundaries.
                Ok(hay.len() >= needle.len()
                    && (0..=hay.len() - needle.len())
                        .step_by(2)
                        .any(|i| &hay[i..i + needle.len()] == needle))
            } else {
                Ok(hay.contains(needle))
            }
        }
        "dict" => {
            for pair in as_items(payload)? {
                if canon_eq(&as_items(Some(pair))?[0], member)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        _ => {
            for item in as_items(payload)? {
                if canon_eq(item, member)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
    }
}

/// The violation of an episode of `steps` actions past the task's step limit.
pub(crate) fn step_limit_violation(limits: &EnvLimits, steps: usize) -> Option<Violation> {
    (steps > limits.max_steps).then(|| Violation {
        kind: ViolationKind::StepLimit,
        detail: format!("{steps} actions, the task allows {}", limits.max_steps),
    })
}

/// The violation of actions that took `agent_ms` in all, past the task's
/// total time limit.
pub(crate) fn time_limit_violation(limits: &EnvLimits, agent_ms: u64) -> Option<Violation> {
    (agent_ms > limits.total_time_ms).then(|| Violation {
        kind: ViolationKind::TimeLimit,
        detail: format!(
            "actions took {agent_ms} ms, the task allows {}",
            limits.total_time_ms
        ),
    })
}

/// The candidates in a fixed order that does not follow their labels (a
/// stable shuffle keyed by the task id), so position gives nothing away.
pub(crate) fn shuffled_candidates(spec: &TaskSpec) -> Vec<AgentAction> {
    let mut keyed: Vec<([u8; 32], AgentAction)> = spec
        .candidates
        .iter()
        .map(|c| {
            let mut h = blake3::Hasher::new();
            h.update(spec.id.as_bytes());
            h.update(c.action.text().as_bytes());
            (*h.finalize().as_bytes(), c.action.clone())
        })
        .collect();
    keyed.sort_by_key(|k| k.0);
    keyed.into_iter().map(|(_, a)| a).collect()
}

/// The label of `action` among the task's candidates, if it is one.
pub fn candidate_label(spec: &TaskSpec, action: &AgentAction) -> Option<CandidateLabel> {
    spec.candidates
        .iter()
        .find(|c| &c.action == action)
        .map(|c| c.label)
}

fn file_outcome(
    r: Result<(), SandboxError>,
    done: impl FnOnce() -> String,
    started: Instant,
) -> Result<(ExitStatus, String, u64), EnvError> {
    let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    match r {
        Ok(()) => Ok((ExitStatus::Code { code: 0 }, done(), us)),
        Err(SandboxError::File(m)) => Ok((ExitStatus::Code { code: 1 }, m, us)),
        Err(e) => Err(e.into()),
    }
}

fn make_root(runtime: &Runtime, spec: &TaskSpec, tag: &str) -> Result<Snapshot, EnvError> {
    if spec.setup.is_empty() {
        return Ok(runtime.import(&spec.workspace, Some(tag))?);
    }
    let imported = runtime.import(&spec.workspace, None)?;
    let mut sb = imported.open()?;
    for (i, cmd) in spec.setup.iter().enumerate() {
        let obs = sb.exec(cmd, &ExecOptions::with_timeout_ms(120_000))?;
        if obs.code() != Some(0) {
            return Err(EnvError::Task {
                task: spec.id.clone(),
                message: format!(
                    "setup[{i}] {cmd:?} failed ({}): {}",
                    describe_exit(&obs.exit),
                    tail(&String::from_utf8_lossy(&obs.stderr), 600)
                ),
            });
        }
    }
    sb.reset_session();
    let root = sb.snapshot()?;
    runtime
        .store()
        .set_tag(tag, root.id())
        .map_err(runtime_err)?;
    Ok(root)
}

pub(crate) fn runtime_err(e: arbor_runtime::store::StoreError) -> EnvError {
    EnvError::Sandbox(SandboxError::Store(e))
}

/// A hash of everything preparation depends on: `task.toml`, the workspace,
/// the checks and the runner.
fn content_key(spec: &TaskSpec) -> Result<String, String> {
    let mut h = blake3::Hasher::new();
    h.update(PREPARE_VERSION.as_bytes());
    h.update(RUNNER.as_bytes());
    let toml = std::fs::read(spec.dir.join("task.toml")).map_err(|e| format!("task.toml: {e}"))?;
    h.update(&toml);
    for (label, dir) in [("workspace", &spec.workspace), ("checks", &spec.checks)] {
        h.update(label.as_bytes());
        hash_dir(&mut h, dir, dir)?;
    }
    Ok(hex::encode(&h.finalize().as_bytes()[..6]))
}

pub(crate) fn hash_dir(h: &mut blake3::Hasher, root: &Path, dir: &Path) -> Result<(), String> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let path = e.path();
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        let meta =
            std::fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        h.update(rel.as_bytes());
        h.update(&[0]);
        if meta.is_dir() {
            h.update(b"d");
            hash_dir(h, root, &path)?;
        } else if meta.file_type().is_symlink() {
            h.update(b"l");
            let t = std::fs::read_link(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            h.update(t.to_string_lossy().as_bytes());
        } else {
            use std::os::unix::fs::PermissionsExt;
            h.update(&meta.permissions().mode().to_le_bytes());
            let data = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            h.update(&(data.len() as u64).to_le_bytes());
            h.update(&data);
        }
    }
    Ok(())
}

/// The checks folder plus the runner at `.arbor/runner.py`.
fn copy_checks(src: &Path, dst: &Path) -> Result<(), String> {
    copy_tree(src, dst)?;
    let arbor = dst.join(".arbor");
    std::fs::create_dir_all(&arbor).map_err(|e| format!("{}: {e}", arbor.display()))?;
    std::fs::write(arbor.join("runner.py"), RUNNER).map_err(|e| format!("runner.py: {e}"))
}

fn copy_tree(src: &Path, dst: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dst).map_err(|e| format!("{}: {e}", dst.display()))?;
    for e in std::fs::read_dir(src).map_err(|e| format!("{}: {e}", src.display()))? {
        let e = e.map_err(|e| e.to_string())?;
        let from = e.path();
        let to = dst.join(e.file_name());
        let meta =
            std::fs::symlink_metadata(&from).map_err(|e| format!("{}: {e}", from.display()))?;
        if meta.is_dir() {
            if e.file_name() != "__pycache__" {
                copy_tree(&from, &to)?;
            }
        } else if meta.is_file() {
            std::fs::copy(&from, &to).map_err(|e| format!("{}: {e}", from.display()))?;
        }
    }
    Ok(())
}

fn agent_ms(steps: &[EpisodeStep]) -> u64 {
    steps.iter().map(|s| s.duration_us).sum::<u64>() / 1000
}

pub(crate) fn millis(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn nonce_bytes() -> [u8; 16] {
    let mut b = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_err()
    {
        // Fall back to a hash of time and pid (still unknown to the agent in advance).
        let mut h = blake3::Hasher::new();
        h.update(&std::process::id().to_le_bytes());
        h.update(format!("{:?}", std::time::SystemTime::now()).as_bytes());
        b.copy_from_slice(&h.finalize().as_bytes()[..16]);
    }
    b
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

pub(crate) fn cap(mut s: String) -> String {
    if s.len() > OBSERVATION_BYTES {
        let mut cut = OBSERVATION_BYTES;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        let dropped = s.len() - cut;
        s.truncate(cut);
        s.push_str(&format!("\n[... {dropped} bytes more]"));
    }
    s
}

pub(crate) fn tail(s: &str, n: usize) -> String {
    let s = s.trim();
    if s.len() <= n {
        return s.to_owned();
    }
    let mut start = s.len() - n;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &s[start..])
}

/// Lines added plus lines removed between two texts (a multiset comparison,
/// which is exact for pure insertions and deletions and close otherwise).
pub(crate) fn line_changes(old: &[u8], new: &[u8]) -> usize {
    fn count(b: &[u8]) -> BTreeMap<&[u8], isize> {
        let mut m: BTreeMap<&[u8], isize> = BTreeMap::new();
        for l in b.split(|c| *c == b'\n').filter(|l| !l.is_empty()) {
            *m.entry(l).or_default() += 1;
        }
        m
    }
    let (a, b) = (count(old), count(new));
    let mut total = 0isize;
    for (l, n) in &a {
        total += (n - b.get(l).copied().unwrap_or(0)).max(0);
    }
    for (l, n) in &b {
        total += (n - a.get(l).copied().unwrap_or(0)).max(0);
    }
    total.unsigned_abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdlib_shadowing_is_recognised_at_the_top_level_only() {
        assert!(shadows_stdlib("json.py"));
        assert!(shadows_stdlib("unittest/__init__.py"));
        assert!(!shadows_stdlib("pkg/json.py"));
        assert!(!shadows_stdlib("mymodule.py"));
        assert!(
            !shadows_stdlib("json"),
            "a file without .py is not a module"
        );
    }

    #[test]
    fn hooks_match_anywhere() {
        for p in [
            "conftest.py",
            "a/b/conftest.py",
            "x.pth",
            "sitecustomize.py",
            ".pytest_cache/v",
            "junit-report.xml",
            ".arbor-verifier-nonce",
        ] {
            assert!(hooks().matches(p), "{p}");
        }
        for p in ["src/app.py", "tests/test_app.py", "README.md"] {
            assert!(!hooks().matches(p), "{p}");
        }
    }

    #[test]
    fn recorded_assertions_are_rechecked_here() {
        use serde_json::json;
        let i = |n: i64| json!(["int", n.to_string()]);
        let f = |x: &str| json!(["float", x]);
        let ok = |a: serde_json::Value| recheck(&[a]).is_ok();
        assert!(ok(json!(["eq", i(3), i(3)])));
        assert!(!ok(json!(["eq", i(3), i(4)])));
        assert!(
            !ok(json!(["eq", i(1), f("1.0")])),
            "int and float differ, as in the runner"
        );
        assert!(ok(json!(["eq", f("0.0"), f("-0.0")])));
        assert!(ok(json!(["eq", f("nan"), f("nan")])));
        assert!(ok(json!([
            "near",
            f("0.30000000000000004"),
            f("0.3"),
            f("5e-08")
        ])));
        assert!(!ok(json!(["near", f("0.31"), f("0.3"), f("5e-08")])));
        assert!(ok(json!(["lt", i(2), f("2.5")])));
        assert!(!ok(json!(["ge", i(2), f("2.5")])));
        let list = json!(["list", [i(1), ["str", "a"]]]);
        assert!(ok(json!(["eq", list, list])));
        assert!(ok(json!(["in", ["str", "a"], list])));
        assert!(ok(json!(["notin", ["str", "b"], list])));
        assert!(ok(json!(["in", ["str", "ell"], ["str", "hello"]])));
        assert!(ok(json!([
            "in",
            ["bytes", "6c6c"],
            ["bytes", "68656c6c6f"]
        ])));
        assert!(
            !ok(json!(["in", ["bytes", "56"], ["bytes", "6565"]])),
            "byte boundaries"
        );
        let d = json!(["dict", [[["str", "k"], i(1)]]]);
        assert!(ok(json!(["in", ["str", "k"], d])));
        assert!(ok(json!(["true", ["bool", true]])));
        assert!(!ok(json!(["true", i(1)])));
        assert!(
            recheck(&[]).is_err(),
            "a passing test must have asserted something"
        );
        assert!(recheck(&[json!(["overflow"])]).is_err());
        assert!(recheck(&[json!(["eq", "junk", i(1)])]).is_err());
    }

    #[test]
    fn line_changes_count_insertions_and_deletions() {
        assert_eq!(line_changes(b"a\nb\nc\n", b"a\nb\nc\n"), 0);
        assert_eq!(line_changes(b"a\nb\n", b"a\nx\nb\n"), 1);
        assert_eq!(line_changes(b"a\nb\n", b"a\nc\n"), 2);
        assert_eq!(line_changes(b"", b"a\nb\n"), 2);
    }
}
