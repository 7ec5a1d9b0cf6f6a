//! The [`Environment`] trait and the values that cross it: agent actions,
//! observations, episodes and the layered [`Verdict`].
//!
//! (~630 lines: the `Environment` trait and every value that crosses it, kept
//! together so the contract reads in one place.)
//!
//! An environment is stateless between calls: the live state of an episode is
//! the caller's [`Sandbox`] (and the snapshots it takes), so a driver can fork
//! any step's snapshot and continue from it without the environment knowing.

use std::fmt;

use arbor_runtime::store::object::ExitStatus;
use arbor_runtime::{AnySandbox, AnySnapshot};
use serde::{Deserialize, Serialize};

/// An action an agent takes: free-form, not limited to a task's candidates.
///
/// Serialised flat, the same way in `task.toml`, action files and rollout
/// trees: `{"exec": "ls -la"}`, `{"exec": "make", "timeout_s": 30}`,
/// `{"write": "src/a.py", "content": "..."}` (optional `"mode": 493`),
/// `{"delete": "src/old.py"}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawAction", into = "RawAction")]
pub enum AgentAction {
    /// A shell command, run by `bash -c` in the session.
    Exec {
        /// The command text.
        command: String,
        /// Its own wall-clock limit in milliseconds (the task's step limit caps it).
        timeout_ms: Option<u64>,
    },
    /// Create or replace a file under `/workspace`.
    Write {
        /// Path relative to `/workspace`.
        path: String,
        /// The whole new content.
        content: String,
        /// Permission bits.
        mode: u32,
    },
    /// Delete a file under `/workspace`.
    Delete {
        /// Path relative to `/workspace`.
        path: String,
    },
    /// End the episode here (the agent submits its state for grading). Runs
    /// nothing; a driver offers it to discrete policies beside the candidates.
    Submit,
}

impl AgentAction {
    /// A shell command with the environment's default time limit.
    pub fn exec(command: impl Into<String>) -> Self {
        Self::Exec {
            command: command.into(),
            timeout_ms: None,
        }
    }

    /// A file write with mode 0644.
    pub fn write(path: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Write {
            path: path.into(),
            content: content.into(),
            mode: 0o644,
        }
    }

    /// The text a policy reads for this action (and hashes into features).
    pub fn text(&self) -> String {
        match self {
            Self::Exec { command, .. } => format!("exec: {command}"),
            Self::Write { path, content, .. } => format!("write {path}:\n{content}"),
            Self::Delete { path } => format!("delete {path}"),
            Self::Submit => "submit".to_owned(),
        }
    }

    /// Whether it is a shell command.
    pub fn is_exec(&self) -> bool {
        matches!(self, Self::Exec { .. })
    }
}

impl fmt::Display for AgentAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exec { command, .. } => write!(f, "exec {command:?}"),
            Self::Write { path, content, .. } => {
                write!(f, "write {path} ({} bytes)", content.len())
            }
            Self::Delete { path } => write!(f, "delete {path}"),
            Self::Submit => f.write_str("submit"),
        }
    }
}

/// The flat wire form of [`AgentAction`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAction {
    /// Shell text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<String>,
    /// Time limit of an `exec`, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// Path of a write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<String>,
    /// Content of a write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Mode of a write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    /// Path of a delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete: Option<String>,
    /// `true` for a submit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit: Option<bool>,
}

impl TryFrom<RawAction> for AgentAction {
    type Error = String;

    fn try_from(raw: RawAction) -> Result<Self, String> {
        let kinds = [
            raw.exec.is_some(),
            raw.write.is_some(),
            raw.delete.is_some(),
            raw.submit.is_some(),
        ]
        .iter()
        .filter(|k| **k)
        .count();
        if kinds != 1 {
            return Err(
                "an action needs exactly one of `exec`, `write` (with `content`), `delete` or `submit = true`"
                    .to_owned(),
            );
        }
        if let Some(submit) = raw.submit {
            if !submit || raw.content.is_some() || raw.mode.is_some() || raw.timeout_s.is_some() {
                return Err("`submit` takes only the value true".to_owned());
            }
            return Ok(Self::Submit);
        }
        if let Some(command) = raw.exec {
            if raw.content.is_some() || raw.mode.is_some() {
                return Err("`content` and `mode` belong to `write`, not `exec`".to_owned());
            }
            let timeout_ms = match raw.timeout_s {
                None => None,
                Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Some((s * 1000.0) as u64),
                Some(s) => return Err(format!("`timeout_s` = {s} is not in (0, 86400]")),
            };
            return Ok(Self::Exec {
                command,
                timeout_ms,
            });
        }
        if raw.timeout_s.is_some() {
            return Err("`timeout_s` belongs to `exec`".to_owned());
        }
        if let Some(path) = raw.write {
            let content = raw
                .content
                .ok_or_else(|| format!("`write = {path:?}` needs `content`"))?;
            let mode = raw.mode.unwrap_or(0o644);
            if mode > 0o7777 {
                return Err(format!("`mode` = {mode} is not a permission value"));
            }
            return Ok(Self::Write {
                path,
                content,
                mode,
            });
        }
        if raw.content.is_some() || raw.mode.is_some() {
            return Err("`content` and `mode` belong to `write`".to_owned());
        }
        Ok(Self::Delete {
            path: raw.delete.unwrap_or_default(),
        })
    }
}

impl From<AgentAction> for RawAction {
    fn from(a: AgentAction) -> Self {
        match a {
            AgentAction::Exec {
                command,
                timeout_ms,
            } => Self {
                exec: Some(command),
                timeout_s: timeout_ms.map(|ms| ms as f64 / 1000.0),
                ..Self::default()
            },
            AgentAction::Write {
                path,
                content,
                mode,
            } => Self {
                write: Some(path),
                content: Some(content),
                mode: (mode != 0o644).then_some(mode),
                ..Self::default()
            },
            AgentAction::Delete { path } => Self {
                delete: Some(path),
                ..Self::default()
            },
            AgentAction::Submit => Self {
                submit: Some(true),
                ..Self::default()
            },
        }
    }
}

/// What a policy sees.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvObservation {
    /// The task's id.
    pub task: String,
    /// The task's instructions.
    pub instructions: String,
    /// Actions taken so far.
    pub step: usize,
    /// The last action, as text.
    pub last_action: Option<String>,
    /// The last action's output (stdout then stderr, capped), or the file
    /// operation's result.
    pub output: String,
    /// How the last action ended.
    pub exit: Option<ExitStatus>,
}

impl EnvObservation {
    /// The whole observation as one text (what text policies read).
    pub fn text(&self) -> String {
        let mut s = format!("task: {}\n{}\n", self.task, self.instructions.trim());
        if let Some(a) = &self.last_action {
            s.push_str(&format!("\n$ {a}\n"));
            s.push_str(&self.output);
            if let Some(exit) = &self.exit {
                s.push_str(&format!("\n[{}]", describe_exit(exit)));
            }
        }
        s
    }
}

/// `exit 0`, `signal 9`, `timeout`, `disk limit`.
pub fn describe_exit(exit: &ExitStatus) -> String {
    match exit {
        ExitStatus::Code { code } => format!("exit {code}"),
        ExitStatus::Signal { signal } => format!("signal {signal}"),
        ExitStatus::Timeout => "timeout".to_owned(),
        ExitStatus::DiskLimit => "disk limit".to_owned(),
    }
}

/// The record of one step of an episode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpisodeStep {
    /// The action.
    pub action: AgentAction,
    /// How it ended (file operations: exit 0 when done, exit 1 when refused).
    pub exit: ExitStatus,
    /// Wall-clock duration in microseconds.
    pub duration_us: u64,
}

/// The result of [`Environment::step`]: a transition (what the policy sees
/// next, and the step kept in the episode). The runtime's result of running
/// one step is [`arbor_runtime::StepResult`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// What the policy sees next.
    pub observation: EnvObservation,
    /// The record kept in the episode.
    pub record: EpisodeStep,
}

/// A finished (or cut-off) episode, as the verifier sees it: the task's root,
/// every action with its outcome, and the final state.
#[derive(Clone, Debug)]
pub struct Episode {
    /// The task's id.
    pub task: String,
    /// The snapshot the episode started from.
    pub root: AnySnapshot,
    /// The actions, in order.
    pub steps: Vec<EpisodeStep>,
    /// The snapshot of the final state.
    pub last: AnySnapshot,
}

/// The limits an environment imposes on the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvLimits {
    /// Actions per episode.
    pub max_steps: usize,
    /// Wall-clock limit of one action, in milliseconds.
    pub step_timeout_ms: u64,
    /// Sum of the agent's action durations, in milliseconds.
    pub total_time_ms: u64,
}

/// How verification ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum VerdictOutcome {
    /// The episode was graded; `reward` holds.
    Graded,
    /// The runtime itself failed (the helper died, the store failed): no
    /// reward; such episodes are counted and excluded from statistics.
    RuntimeFault {
        /// What failed.
        message: String,
    },
}

/// Which hard constraint an episode broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// A visible test or grader file was changed or deleted.
    ProtectedChanged,
    /// A path outside the declared paths and by-products changed.
    OutsideAllowed,
    /// A grader hook (`conftest.py`, `sitecustomize.py`, `*.pth`, a fake
    /// result file, a module shadowing the standard library) was added or changed.
    GraderHook,
    /// More actions than the task allows.
    StepLimit,
    /// An action of the agent's ran past its time limit.
    AgentTimeout,
    /// An action of the agent's hit the disk limit.
    AgentDiskLimit,
    /// The agent's actions took longer than the task's total time.
    TimeLimit,
    /// The checks saw the grading machinery modified at run time.
    Tampering,
    /// An action of the agent's ended its interpreter session (a trap, the
    /// memory limit, an exit: WebAssembly sessions).
    AgentCrash,
    /// The agent's changes introduce introspection or process control
    /// (frame or garbage-collector walking, import hooks, `os._exit`, new
    /// comparison dunders, ...) found by the static integrity analysis.
    Introspection,
}

/// One broken hard constraint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Which.
    pub kind: ViolationKind,
    /// The path, step or detail.
    pub detail: String,
}

/// Layer 1: hard constraints; any violation means reward 0.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HardConstraints {
    /// Every violation found.
    pub violations: Vec<Violation>,
}

impl HardConstraints {
    /// Whether every hard constraint holds.
    pub fn hold(&self) -> bool {
        self.violations.is_empty()
    }
}

/// The result of one hidden check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// `module.Class.method`.
    pub id: String,
    /// Whether it passed.
    pub passed: bool,
    /// The failure or error message.
    pub detail: String,
}

/// Layer 2: the task outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskOutcome {
    /// Hidden checks the task has.
    pub checks_total: usize,
    /// Hidden checks that passed.
    pub checks_passed: usize,
    /// Per check.
    pub checks: Vec<CheckResult>,
    /// Why the checks produced no result, when they did not (they crashed,
    /// timed out, were killed by the agent's code).
    pub problem: Option<String>,
}

impl TaskOutcome {
    /// Record one check's result: `Err` carries why it failed.
    pub fn record(&mut self, id: String, result: Result<(), String>) {
        let passed = result.is_ok();
        self.checks_passed += usize::from(passed);
        self.checks.push(CheckResult {
            id,
            passed,
            detail: result.err().unwrap_or_default(),
        });
    }

    /// Whether every hidden check passed (and there was at least one).
    pub fn all_passed(&self) -> bool {
        self.problem.is_none() && self.checks_total > 0 && self.checks_passed == self.checks_total
    }
}

/// Layer 3: soft quality; ranks successful solutions only.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftQuality {
    /// Paths added.
    pub added: usize,
    /// Paths modified.
    pub modified: usize,
    /// Paths deleted.
    pub deleted: usize,
    /// Lines added plus lines removed over changed text files.
    pub changed_lines: usize,
    /// Syntax errors in changed Python files (the lint available everywhere).
    pub lint_errors: Vec<String>,
}

/// Layer 4: process diagnostics; reported, never rewarded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessDiagnostics {
    /// Actions taken.
    pub steps: usize,
    /// Shell commands among them.
    pub commands: usize,
    /// Actions that did not end with exit 0.
    pub failed: usize,
    /// Sum of the agent's action durations, in milliseconds.
    pub agent_ms: u64,
    /// Verification: forking the final state and preparing the checks, in milliseconds.
    pub verify_setup_ms: u64,
    /// Verification: running the checks, in milliseconds.
    pub verify_checks_ms: u64,
}

/// The layered verifier's result. `reward` is derived lexicographically,
/// never as a weighted sum: 1 exactly when every hard constraint holds and
/// every hidden check passes, else 0; `None` for a runtime fault.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Graded, or a fault of the runtime.
    pub outcome: VerdictOutcome,
    /// 1.0 or 0.0 when graded; `None` on a runtime fault.
    pub reward: Option<f64>,
    /// Layer 1.
    pub hard: HardConstraints,
    /// Layer 2.
    pub task: TaskOutcome,
    /// Layer 3.
    pub quality: SoftQuality,
    /// Layer 4.
    pub process: ProcessDiagnostics,
}

impl Verdict {
    /// A graded verdict; the reward follows from the layers.
    pub fn graded(
        hard: HardConstraints,
        task: TaskOutcome,
        quality: SoftQuality,
        process: ProcessDiagnostics,
    ) -> Self {
        let reward = if hard.hold() && task.all_passed() {
            1.0
        } else {
            0.0
        };
        Self {
            outcome: VerdictOutcome::Graded,
            reward: Some(reward),
            hard,
            task,
            quality,
            process,
        }
    }

    /// A runtime fault: no reward.
    pub fn fault(message: impl Into<String>, process: ProcessDiagnostics) -> Self {
        Self {
            outcome: VerdictOutcome::RuntimeFault {
                message: message.into(),
            },
            reward: None,
            hard: HardConstraints::default(),
            task: TaskOutcome::default(),
            quality: SoftQuality::default(),
            process,
        }
    }

    /// Whether the episode succeeded (reward 1).
    pub fn success(&self) -> bool {
        self.reward == Some(1.0)
    }

    /// Whether the runtime failed.
    pub fn is_fault(&self) -> bool {
        matches!(self.outcome, VerdictOutcome::RuntimeFault { .. })
    }

    /// One line: reward and the first reason.
    pub fn summary(&self) -> String {
        match &self.outcome {
            VerdictOutcome::RuntimeFault { message } => format!("runtime fault: {message}"),
            VerdictOutcome::Graded => {
                let reward = self.reward.unwrap_or(0.0);
                if let Some(v) = self.hard.violations.first() {
                    format!(
                        "reward {reward}: hard constraint broken ({:?}: {})",
                        v.kind, v.detail
                    )
                } else if let Some(p) = &self.task.problem {
                    format!("reward {reward}: checks produced no result: {p}")
                } else {
                    format!(
                        "reward {reward}: {}/{} hidden checks passed",
                        self.task.checks_passed, self.task.checks_total
                    )
                }
            }
        }
    }
}

/// Errors of environments: faults of the runtime or of the task definition,
/// never something the agent did (that is an observation or a verdict).
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// The runtime failed.
    #[error(transparent)]
    Runtime(#[from] arbor_runtime::RuntimeError),
    /// A sandbox operation failed in the runtime.
    #[error(transparent)]
    Sandbox(#[from] arbor_runtime::SandboxError),
    /// The task itself is broken (setup failed, checks missing, ...).
    #[error("task {task}: {message}")]
    Task {
        /// The task's id.
        task: String,
        /// What is wrong.
        message: String,
    },
}

#[cfg(feature = "wasm")]
impl From<arbor_runtime::wasm::WasmError> for EnvError {
    fn from(e: arbor_runtime::wasm::WasmError) -> Self {
        EnvError::Runtime(e.into())
    }
}

/// A task environment. Implemented by `arbor-envs`; driven by the rollout driver.
///
/// One greedy episode by hand (the driver does this, branching, in parallel):
///
/// ```no_run
/// use arbor_rollout::{Environment, EnvError, Episode};
///
/// fn first_candidate_episode(env: &dyn Environment) -> Result<bool, EnvError> {
///     let (root, mut observation) = env.reset()?;
///     let mut sandbox = root.open()?;
///     let mut steps = Vec::new();
///     for step in 0..env.limits().max_steps {
///         let Some(action) = env.candidates(&observation).into_iter().next() else {
///             break;
///         };
///         let result = env.step(&mut sandbox, step, &action)?;
///         observation = result.observation;
///         steps.push(result.record);
///     }
///     let last = sandbox.snapshot()?;
///     let episode = Episode { task: env.id().to_owned(), root, steps, last };
///     Ok(env.verify(&episode).success())
/// }
/// ```
pub trait Environment: Send + Sync {
    /// The task's id.
    fn id(&self) -> &str;

    /// The limits on the agent.
    fn limits(&self) -> EnvLimits;

    /// The root snapshot every episode starts from, and the first observation.
    ///
    /// # Errors
    /// When the runtime fails or the task cannot be prepared.
    fn reset(&self) -> Result<(AnySnapshot, EnvObservation), EnvError>;

    /// Apply `action` in `sandbox` (a fork of some snapshot of this task's
    /// episode) and observe. `step` is the number of actions taken before.
    ///
    /// # Errors
    /// Only runtime faults; a failing or timed-out action is an observation.
    fn step(
        &self,
        sandbox: &mut AnySandbox,
        step: usize,
        action: &AgentAction,
    ) -> Result<Transition, EnvError>;

    /// Grade an episode. Never fails: a runtime fault is a
    /// [`VerdictOutcome::RuntimeFault`] verdict.
    fn verify(&self, episode: &Episode) -> Verdict;

    /// Candidate actions for discrete policies in this state (may be empty:
    /// actions are free-form).
    fn candidates(&self, observation: &EnvObservation) -> Vec<AgentAction>;

    /// A known solution (the task's gold actions), for the `gold` and
    /// `mixture` policies; `None` when the environment has none.
    fn reference_solution(&self) -> Option<Vec<AgentAction>> {
        None
    }
}
