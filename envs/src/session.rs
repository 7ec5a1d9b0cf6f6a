//! [`SessionEnv`]: a prepared `backend = "wasm"` task (feature `wasm`) —
//! a persistent Python session in the WebAssembly guest — and its layered
//! verifier.
//!
//! Preparation boots the guest on the task's workspace (imported as
//! workspace layers) and runs the setup steps, giving the task's root
//! snapshot; it is made once per process and store (a fork of it costs
//! microseconds). An episode runs the agent's actions in one session:
//! `exec` is Python code run as one step, `write`/`delete` go through the
//! host's file API. The verifier never touches the agent's session: each
//! hidden check runs in its own fresh fork of the final snapshot (so one
//! check's side effects cannot help another), with its own fuel, and the
//! value it reads comes from the guest's native inspector
//! ([`WasmSandbox::inspect`]); the comparison happens here, in Rust.
//!
//! (~610 lines: the task, its episode read back from the session snapshots
//! and its two hook impls, which read as one.)

mod checks;

use std::borrow::Cow;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use arbor_rollout::env::{ProcessDiagnostics, SoftQuality, TaskOutcome, Violation, ViolationKind};
use arbor_rollout::{AgentAction, EnvError, Episode, Verdict};
use arbor_runtime::layer::{self, MergedView};
use arbor_runtime::wasm::{
    BootSpec, StepOutcome, WasmError, WasmLimits, WasmRuntime, WasmSandbox, WasmSnapshot,
};
use arbor_runtime::{AnySandbox, AnySnapshot, Runtime};
use serde::Serialize;

use crate::failure;
use crate::skeleton::{self, ActionOutcome, Graded, RootSource, StepFacts, TaskBackend};
use crate::task::{DEFAULT_STEP_FUEL, TaskSpec};
use crate::verifier::{cap, integrity, millis, tail};

/// Version of the preparation; part of the root cache key.
const PREPARE_VERSION: &str = "arbor-session-task-v1";

/// Limits of the runtime every session task shares (a task's own fuel is
/// set per sandbox).
fn runtime_limits() -> WasmLimits {
    WasmLimits {
        fuel_per_step: DEFAULT_STEP_FUEL,
        timeout: Duration::from_secs(30),
        memory_bytes: 1 << 30,
        output_bytes: 1 << 20,
    }
}

fn wasm_err(e: WasmError) -> EnvError {
    EnvError::from(e)
}

fn layer_err(e: arbor_runtime::layer::LayerError) -> EnvError {
    EnvError::Runtime(e.into())
}

/// The guest's bytes and their blake3 hash, read once per process.
fn guest_and_hash() -> Result<&'static (Vec<u8>, String), EnvError> {
    static GUEST: OnceLock<(Vec<u8>, String)> = OnceLock::new();
    if let Some(guest) = GUEST.get() {
        return Ok(guest);
    }
    // A failure is not remembered: the next call tries again.
    let bytes = arbor_runtime::wasm::python_guest().map_err(wasm_err)?;
    let hash = blake3::hash(&bytes).to_hex().to_string();
    Ok(GUEST.get_or_init(|| (bytes, hash)))
}

/// The guest's bytes.
fn guest() -> Result<&'static [u8], EnvError> {
    guest_and_hash().map(|(b, _)| b.as_slice())
}

/// One agent action of a session episode.
#[derive(Clone, Debug, Serialize)]
pub struct SessionStep {
    /// The action.
    pub action: AgentAction,
    /// How it ended (file actions: `ok`, or `exception` when refused).
    pub outcome: StepOutcome,
    /// Stdout then stderr (capped), or the file action's message.
    pub output: String,
    /// Wall-clock microseconds.
    pub duration_us: u64,
    /// Fuel used.
    pub fuel: u64,
}

/// A finished session episode.
#[derive(Clone, Debug)]
pub struct SessionEpisode {
    /// The task.
    pub task: String,
    /// The snapshot it started from.
    pub root: WasmSnapshot,
    /// What happened.
    pub steps: Vec<SessionStep>,
    /// The final snapshot.
    pub last: WasmSnapshot,
}

/// A `wasm` task ready to run.
#[derive(Debug)]
pub struct SessionEnv {
    spec: TaskSpec,
    runtime: WasmRuntime,
    root: WasmSnapshot,
    candidates: Vec<AgentAction>,
}

impl SessionEnv {
    /// Prepare `spec` (a `backend = "wasm"` task) in `runtime`'s store:
    /// import its workspace, boot the guest on it and run the setup steps
    /// (once per process and store).
    ///
    /// # Errors
    /// The guest is not built, a setup step fails, runtime faults.
    pub fn prepare(runtime: &Runtime, spec: TaskSpec) -> Result<Self, EnvError> {
        // The runtime owns the WebAssembly backend (one per store and limits)
        // and remembers roots by content, so every episode and every
        // TaskEnv of this task shares one root.
        let wrt = runtime.wasm(runtime_limits()).map_err(wasm_err)?;
        let (_, root) = skeleton::prepare_root(&SessionRoots { runtime, wrt: &wrt }, &spec)?;
        Ok(Self {
            candidates: crate::verifier::shuffled_candidates(&spec),
            spec,
            runtime: wrt,
            root,
        })
    }

    /// The task.
    pub fn spec(&self) -> &TaskSpec {
        &self.spec
    }

    /// The root snapshot every episode starts from.
    pub fn root(&self) -> &WasmSnapshot {
        &self.root
    }

    /// The WebAssembly runtime.
    pub fn runtime(&self) -> &WasmRuntime {
        &self.runtime
    }

    /// Open a sandbox on `snapshot` with the task's per-step fuel.
    fn open_agent(&self, snapshot: &WasmSnapshot) -> Result<WasmSandbox, EnvError> {
        let mut sb = snapshot.open().map_err(wasm_err)?;
        let limits = self.agent_limits(&sb);
        sb.set_step_limits(limits);
        Ok(sb)
    }

    /// Run one agent action in `sb`.
    ///
    /// # Errors
    /// Runtime faults only (what the agent's code does is an outcome).
    pub fn step(
        &self,
        sb: &mut WasmSandbox,
        action: &AgentAction,
    ) -> Result<SessionStep, EnvError> {
        let t = Instant::now();
        let file = |r: Result<(), WasmError>, done: String| match r {
            Ok(()) => Ok((StepOutcome::Ok, done)),
            Err(WasmError::InvalidInput(m) | WasmError::Workspace(m)) => {
                Ok((StepOutcome::Exception, m))
            }
            Err(e) => Err(wasm_err(e)),
        };
        let (outcome, output, fuel) = match action {
            AgentAction::Exec { command, .. } => {
                let r = sb.step(command).map_err(wasm_err)?;
                let mut out = r.stdout_text();
                out.push_str(&r.stderr_text());
                (r.outcome, cap(out), r.fuel)
            }
            AgentAction::Write { path, content, .. } => {
                let (o, m) = file(
                    sb.write_file(path, content.as_bytes()),
                    format!("wrote {} bytes to {path}", content.len()),
                )?;
                (o, m, 0)
            }
            AgentAction::Delete { path } => {
                let (o, m) = file(sb.delete_file(path), format!("deleted {path}"))?;
                (o, m, 0)
            }
            AgentAction::Submit => (StepOutcome::Ok, "submitted".to_owned(), 0),
        };
        Ok(SessionStep {
            action: action.clone(),
            outcome,
            output,
            duration_us: u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX),
            fuel,
        })
    }

    /// Run `actions` from the root snapshot in one session and snapshot
    /// the end state. Every action is run, even past the step limit (the
    /// verifier reports that).
    ///
    /// # Errors
    /// Runtime faults only.
    pub fn run(&self, actions: &[AgentAction]) -> Result<SessionEpisode, EnvError> {
        let mut sb = self.open_agent(&self.root)?;
        let mut steps = Vec::with_capacity(actions.len());
        for a in actions {
            steps.push(self.step(&mut sb, a)?);
        }
        let last = sb.snapshot().map_err(wasm_err)?;
        Ok(SessionEpisode {
            task: self.spec.id.clone(),
            root: self.root.clone(),
            steps,
            last,
        })
    }

    /// Run `actions` and verify the result.
    ///
    /// # Errors
    /// Runtime faults while running the actions (verification faults are verdicts).
    pub fn run_and_verify(&self, actions: &[AgentAction]) -> Result<Verdict, EnvError> {
        let episode = self.run(actions)?;
        Ok(self.verify(&episode))
    }

    /// The layered verdict of `episode`. Runtime faults become a fault
    /// verdict (no reward), never a 0.
    pub fn verify(&self, episode: &SessionEpisode) -> Verdict {
        skeleton::verify_episode(self, episode)
    }

    /// Grade `episode` (the [`TaskBackend::run_checks`] hook).
    fn grade(
        &self,
        episode: &SessionEpisode,
        process: &mut ProcessDiagnostics,
    ) -> Result<Graded, EnvError> {
        let t0 = Instant::now();
        let store = self.runtime.store();
        let base =
            layer::merge_layers(store, &episode.root.manifest().layers).map_err(layer_err)?;
        let last =
            layer::merge_layers(store, &episode.last.manifest().layers).map_err(layer_err)?;
        let mut hard = self.hard_constraints(&episode.steps, &base, &last);
        // The static integrity layer, as for native tasks: over every code
        // step (each is new code) and every changed Python file.
        let allow = &self.spec.check_config.allow_static;
        for (i, s) in episode.steps.iter().enumerate() {
            if let AgentAction::Exec { command, .. } = &s.action
                && let Ok(found) = integrity::introduced(None, command)
            {
                hard.violations
                    .extend(integrity::report(&format!("step {i}"), &found, allow));
            }
        }
        let (files, _) = integrity::analyse_changes(
            store,
            &self.spec,
            &base,
            &last,
            &episode.root.manifest().layers,
            &episode.last.manifest().layers,
        )
        .map_err(layer_err)?;
        hard.violations.extend(files);
        process.verify_setup_ms = millis(t0);
        let t1 = Instant::now();
        let mut task = TaskOutcome {
            checks_total: self.spec.session_checks.len() + self.spec.workspace_checks.len(),
            ..TaskOutcome::default()
        };
        for c in &self.spec.session_checks {
            failure::record(
                &mut task,
                c.id.clone(),
                self.session_check(&episode.last, c)?,
            );
        }
        let unchanged = episode.root.manifest().layers == episode.last.manifest().layers;
        let quality = if self.spec.workspace_checks.is_empty() && unchanged {
            self.quality(episode, None, &base, &last)?
        } else {
            let sb = episode.last.open().map_err(wasm_err)?;
            for c in &self.spec.workspace_checks {
                failure::record(&mut task, c.id.clone(), checks::workspace_check(&sb, c));
            }
            self.quality(episode, Some(&sb), &base, &last)?
        };
        process.verify_checks_ms = millis(t1);
        Ok(Graded {
            hard,
            task,
            quality,
        })
    }

    fn quality(
        &self,
        episode: &SessionEpisode,
        sb: Option<&WasmSandbox>,
        base: &MergedView,
        last: &MergedView,
    ) -> Result<SoftQuality, EnvError> {
        // Code size: the lines of Python the agent ran, plus the lines its
        // file changes touched.
        let code = skeleton::code_lines(episode.steps.iter().map(|s| &s.action));
        let files = match sb {
            Some(sb) => {
                let mut read =
                    |path: &str| Ok::<_, EnvError>(Some(sb.read_file(path).unwrap_or_default()));
                return skeleton::quality(
                    &self.spec,
                    base,
                    last,
                    code,
                    skeleton::FinalFiles::Read(&mut read),
                    false,
                );
            }
            None => skeleton::FinalFiles::Unread,
        };
        skeleton::quality(&self.spec, base, last, code, files, false)
    }
}

/// A step outcome in words: [`StepOutcome::label`], with a trap's message.
pub fn describe_outcome(o: &StepOutcome) -> String {
    match o {
        StepOutcome::Trap { message } => format!("trap: {}", one_line(message, 120)),
        _ => o.label(),
    }
}

fn one_line(s: &str, n: usize) -> String {
    crate::canonical::short(s, n)
}

/// A hash of what the root depends on: `task.toml`, the workspace, the guest.
fn content_key(spec: &TaskSpec) -> Result<String, EnvError> {
    let guest_hash = guest_and_hash()?;
    let h = skeleton::content_key(
        spec,
        PREPARE_VERSION,
        &[guest_hash.1.as_bytes()],
        &[("workspace", &spec.workspace, true)],
    )
    .map_err(|e| EnvError::Task {
        task: spec.id.clone(),
        message: e.to_string(),
    })?;
    Ok(skeleton::key_hex(&h, 8))
}

/// Session roots: the guest booted on the workspace after the setup steps,
/// cached by content in the runtime's memo (per process and store).
struct SessionRoots<'a> {
    runtime: &'a Runtime,
    wrt: &'a WasmRuntime,
}

impl RootSource for SessionRoots<'_> {
    type Root = WasmSnapshot;

    fn root_key(&self, spec: &TaskSpec) -> Result<String, EnvError> {
        content_key(spec)
    }

    fn cached_root(
        &self,
        _spec: &TaskSpec,
        key: &str,
        make: &mut dyn FnMut() -> Result<WasmSnapshot, EnvError>,
    ) -> Result<WasmSnapshot, EnvError> {
        self.wrt.memo_root(key, make)
    }

    fn make_root(&self, spec: &TaskSpec, _key: &str) -> Result<WasmSnapshot, EnvError> {
        make_root(self.runtime, self.wrt, spec)
    }
}

/// Boot the guest on the task's workspace and run its setup steps.
fn make_root(
    runtime: &Runtime,
    wrt: &WasmRuntime,
    spec: &TaskSpec,
) -> Result<WasmSnapshot, EnvError> {
    let mut boot = BootSpec::python();
    if spec.workspace.is_dir() {
        let imported = runtime.import(&spec.workspace, None)?;
        boot.workspace_layers = imported.manifest().layers.clone();
    }
    let booted = wrt.import(guest()?, &boot).map_err(wasm_err)?;
    if spec.setup.is_empty() {
        return Ok(booted);
    }
    let mut sb = booted.open().map_err(wasm_err)?;
    for (i, code) in spec.setup.iter().enumerate() {
        let r = sb.step(code).map_err(wasm_err)?;
        if r.outcome != StepOutcome::Ok {
            return Err(EnvError::Task {
                task: spec.id.clone(),
                message: format!(
                    "setup[{i}] failed ({:?}): {}",
                    r.outcome,
                    tail(&r.stderr_text(), 600)
                ),
            });
        }
    }
    sb.snapshot().map_err(wasm_err)
}

impl SessionEnv {
    /// The agent's per-step limits for this task.
    fn agent_limits(&self, sb: &WasmSandbox) -> WasmLimits {
        let mut limits = sb.step_limits();
        limits.fuel_per_step = self.spec.step_fuel;
        limits.timeout = Duration::from_millis(self.spec.limits.step_timeout_ms.max(1000));
        limits
    }

    /// A rollout episode as the session verifier needs it: the exact
    /// outcome of every recorded action, read from the session snapshots
    /// between the episode's root and its last state.
    fn session_episode(&self, episode: &Episode) -> Result<SessionEpisode, EnvError> {
        let mismatch = |what: &str| EnvError::Task {
            task: self.spec.id.clone(),
            message: format!("the episode does not match its session snapshots: {what}"),
        };
        let (Some(root), Some(last)) = (episode.root.wasm(), episode.last.wasm()) else {
            return Err(mismatch("not a WebAssembly session's states"));
        };
        let chain = self.runtime.chain(last).map_err(wasm_err)?;
        let from = chain
            .iter()
            .position(|s| s.id() == root.id())
            .ok_or_else(|| mismatch("the root is not an ancestor of the last state"))?;
        let mut outcomes = chain[from + 1..]
            .iter()
            .flat_map(|s| s.manifest().observations.iter().map(|o| o.outcome.clone()))
            .collect::<Vec<_>>()
            .into_iter();
        let mut steps = Vec::with_capacity(episode.steps.len());
        for s in &episode.steps {
            let outcome = if matches!(s.action, AgentAction::Submit) {
                StepOutcome::Ok
            } else {
                outcomes
                    .next()
                    .ok_or_else(|| mismatch("fewer recorded actions than steps"))?
            };
            steps.push(SessionStep {
                action: s.action.clone(),
                outcome,
                output: String::new(),
                duration_us: s.duration_us,
                fuel: 0,
            });
        }
        if outcomes.next().is_some() {
            return Err(mismatch("more recorded actions than steps"));
        }
        Ok(SessionEpisode {
            task: episode.task.clone(),
            root: root.clone(),
            steps,
            last: last.clone(),
        })
    }
}

impl TaskBackend for SessionEnv {
    type Step = SessionStep;
    type State = AnySnapshot;
    type Sandbox = AnySandbox;
    type Recorded = Episode;
    type Episode = SessionEpisode;

    fn spec(&self) -> &TaskSpec {
        &self.spec
    }

    fn root_state(&self) -> AnySnapshot {
        AnySnapshot::Wasm(self.root.clone())
    }

    fn candidate_list(&self) -> &[AgentAction] {
        &self.candidates
    }

    fn run_action(
        &self,
        sandbox: &mut AnySandbox,
        action: &AgentAction,
    ) -> Result<ActionOutcome, EnvError> {
        let Some(sb) = sandbox.wasm_mut() else {
            return Err(EnvError::Task {
                task: self.spec.id.clone(),
                message: "a session task was given a native sandbox".into(),
            });
        };
        // Set on every step: a rollout's sandbox is not from `open_agent`.
        let limits = self.agent_limits(sb);
        sb.set_step_limits(limits);
        let s = SessionEnv::step(self, sb, action)?;
        Ok(ActionOutcome {
            exit: s.outcome.exit_status(),
            output: s.output,
            duration_us: s.duration_us,
        })
    }

    /// The exact outcome of every recorded action is read from the session
    /// snapshots, so a recorded episode that does not match them is refused
    /// here, before any diagnostics (its fault verdict carries none).
    fn episode<'r>(&self, recorded: &'r Episode) -> Result<Cow<'r, SessionEpisode>, EnvError> {
        self.session_episode(recorded).map(Cow::Owned)
    }

    fn steps<'e>(&self, episode: &'e SessionEpisode) -> &'e [SessionStep] {
        &episode.steps
    }

    fn run_checks(
        &self,
        e: &SessionEpisode,
        p: &mut ProcessDiagnostics,
    ) -> Result<Graded, EnvError> {
        self.grade(e, p)
    }

    fn facts(&self, index: usize, s: &SessionStep) -> StepFacts {
        let kind = match &s.outcome {
            StepOutcome::OutOfFuel | StepOutcome::Timeout => Some(ViolationKind::AgentTimeout),
            StepOutcome::Trap { .. } | StepOutcome::MemoryLimit | StepOutcome::Exited { .. } => {
                Some(ViolationKind::AgentCrash)
            }
            _ if s.duration_us / 1000 > self.spec.limits.step_timeout_ms => {
                Some(ViolationKind::AgentTimeout)
            }
            _ => None,
        };
        StepFacts {
            is_exec: s.action.is_exec(),
            ok: s.outcome == StepOutcome::Ok,
            duration_us: s.duration_us,
            violation: kind.map(|kind| Violation {
                kind,
                detail: format!(
                    "step {index} ({}) ended the session: {:?}",
                    one_line(&s.action.text(), 60),
                    s.outcome
                ),
            }),
        }
    }
}

// Rollouts, credit and the attached trainer drive session tasks like
// native ones: a tree's nodes are session snapshots, and siblings are
// forks of the same live interpreter state.
crate::skeleton::environment_by_skeleton!(SessionEnv);
