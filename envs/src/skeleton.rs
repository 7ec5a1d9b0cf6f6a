//! The task-environment skeleton both kinds of task share: a native task
//! ([`crate::TaskEnv`]) and a session task (`SessionEnv`, feature `wasm`)
//! differ only in how they make a root, run one action and grade; the
//! episode (reset, steps, verification and its fault verdict, candidates,
//! the reference solution), the preparation key, the process diagnostics,
//! the hard constraints and the soft quality are written here once, behind
//! the [`TaskBackend`] seam.

use std::borrow::Cow;
use std::path::Path;

use arbor_rollout::env::{
    EpisodeStep, HardConstraints, ProcessDiagnostics, SoftQuality, TaskOutcome, Violation,
    ViolationKind,
};
use arbor_rollout::{AgentAction, EnvError, EnvLimits, EnvObservation, Transition, Verdict};
use arbor_runtime::layer::{self, MergedView};
use arbor_runtime::store::object::{EntryKind, ExitStatus};

use crate::task::TaskSpec;
use crate::verifier::{observation, path_violations};

/// Files larger than this are not read to count changed lines.
const QUALITY_READ_LIMIT: u64 = 256 << 10;

/// What the skeleton needs to know of one recorded action.
#[derive(Clone, Debug)]
pub(crate) struct StepFacts {
    /// Whether it was code (`exec`).
    pub is_exec: bool,
    /// Whether it ended well (exit 0; a session step's `ok`).
    pub ok: bool,
    /// Wall-clock microseconds.
    pub duration_us: u64,
    /// The hard constraint it broke on its own (a timeout, a crash), if any.
    pub violation: Option<Violation>,
}

/// How one agent action ended, as the episode records and the agent sees it.
#[derive(Clone, Debug)]
pub(crate) struct ActionOutcome {
    /// Its exit status (a session step's outcome, as an exit status).
    pub exit: ExitStatus,
    /// Stdout then stderr (capped), or the file action's message.
    pub output: String,
    /// Wall-clock microseconds.
    pub duration_us: u64,
}

/// The graded layers a backend's checks produce; the skeleton adds the
/// process diagnostics and the reward.
#[derive(Clone, Debug, Default)]
pub(crate) struct Graded {
    /// Layer 1.
    pub hard: HardConstraints,
    /// Layer 2.
    pub task: TaskOutcome,
    /// Layer 3.
    pub quality: SoftQuality,
}

/// The backend-specific half of a task environment: its root, how one
/// agent action becomes a runtime step, how a recorded episode reads and
/// its checks. The rest — the episode's flow ([`reset`], [`step`],
/// [`verify`], [`candidates`], [`reference_solution`]), the diagnostics and
/// the hard constraints — is provided.
///
/// The state, sandbox and episode types are associated (the real backends
/// use [`arbor_runtime::AnySnapshot`], [`arbor_runtime::AnySandbox`] and
/// [`arbor_rollout::Episode`]) so the flow can be driven without a runtime.
pub(crate) trait TaskBackend {
    /// One recorded action of an episode, as the verifier reads it.
    type Step;
    /// A state of the task (the root is one).
    type State;
    /// What an action runs in.
    type Sandbox;
    /// A finished episode, as the rollout hands it to the verifier.
    type Recorded;
    /// A finished episode, as this backend grades it.
    type Episode: Clone;

    /// The task.
    fn spec(&self) -> &TaskSpec;

    /// The state every episode starts from.
    fn root_state(&self) -> Self::State;

    /// The task's candidate actions, in the order every observation offers.
    fn candidate_list(&self) -> &[AgentAction];

    /// Run one agent action in `sandbox`.
    ///
    /// # Errors
    /// Runtime faults only (what the agent's action does is an outcome).
    fn run_action(
        &self,
        sandbox: &mut Self::Sandbox,
        action: &AgentAction,
    ) -> Result<ActionOutcome, EnvError>;

    /// `recorded` as this backend grades it (borrowed when it already is).
    ///
    /// # Errors
    /// A recorded episode that does not fit this backend.
    fn episode<'r>(&self, recorded: &'r Self::Recorded)
    -> Result<Cow<'r, Self::Episode>, EnvError>;

    /// The recorded actions of `episode`.
    fn steps<'e>(&self, episode: &'e Self::Episode) -> &'e [Self::Step];

    /// Grade `episode`: the hard constraints, the hidden checks and the
    /// quality, timing the setup and the checks into `process`.
    ///
    /// # Errors
    /// Runtime faults (they become a fault verdict, never a 0).
    fn run_checks(
        &self,
        episode: &Self::Episode,
        process: &mut ProcessDiagnostics,
    ) -> Result<Graded, EnvError>;

    /// What the skeleton needs to know of step `index`.
    fn facts(&self, index: usize, step: &Self::Step) -> StepFacts;

    /// The process diagnostics of an episode of `steps`, before grading.
    fn process(&self, steps: &[Self::Step]) -> ProcessDiagnostics {
        let facts: Vec<StepFacts> = steps
            .iter()
            .enumerate()
            .map(|(i, s)| self.facts(i, s))
            .collect();
        ProcessDiagnostics {
            steps: facts.len(),
            commands: facts.iter().filter(|f| f.is_exec).count(),
            failed: facts.iter().filter(|f| !f.ok).count(),
            agent_ms: agent_ms(&facts),
            ..ProcessDiagnostics::default()
        }
    }

    /// The hard constraints of an episode of `steps` that changed the
    /// workspace from `base` to `last`: paths, the step limit, each step's
    /// own violation, the total time limit.
    fn hard_constraints(
        &self,
        steps: &[Self::Step],
        base: &MergedView,
        last: &MergedView,
    ) -> HardConstraints {
        let spec = self.spec();
        let mut violations = path_violations(spec, base, last);
        violations.extend(step_limit_violation(&spec.limits, steps.len()));
        let facts: Vec<StepFacts> = steps
            .iter()
            .enumerate()
            .map(|(i, s)| self.facts(i, s))
            .collect();
        violations.extend(facts.iter().filter_map(|f| f.violation.clone()));
        violations.extend(time_limit_violation(&spec.limits, agent_ms(&facts)));
        HardConstraints { violations }
    }
}

/// The root state and the first observation of an episode.
pub(crate) fn reset<B: TaskBackend>(b: &B) -> (B::State, EnvObservation) {
    (b.root_state(), observation(b.spec(), 0, None))
}

/// Run `action` as step `step` (from 0) in `sandbox`: what the agent sees
/// next and what the episode records.
///
/// # Errors
/// Runtime faults only.
pub(crate) fn step<B: TaskBackend>(
    b: &B,
    sandbox: &mut B::Sandbox,
    step: usize,
    action: &AgentAction,
) -> Result<Transition, EnvError> {
    let done = b.run_action(sandbox, action)?;
    Ok(Transition {
        observation: observation(b.spec(), step + 1, Some((action, done.output, done.exit))),
        record: EpisodeStep {
            action: action.clone(),
            exit: done.exit,
            duration_us: done.duration_us,
        },
    })
}

/// The layered verdict of a recorded episode. A recorded episode that does
/// not fit the backend is a fault verdict with empty diagnostics (nothing
/// could be read of it); see [`verify_episode`] for the rest.
pub(crate) fn verify<B: TaskBackend>(b: &B, recorded: &B::Recorded) -> Verdict {
    match b.episode(recorded) {
        Ok(episode) => verify_episode(b, &episode),
        Err(e) => Verdict::fault(e.to_string(), ProcessDiagnostics::default()),
    }
}

/// The layered verdict of `episode`: the process diagnostics first (so a
/// fault verdict still carries them), then the backend's checks. A runtime
/// fault becomes a fault verdict (no reward), never a 0.
pub(crate) fn verify_episode<B: TaskBackend>(b: &B, episode: &B::Episode) -> Verdict {
    let mut process = b.process(b.steps(episode));
    match b.run_checks(episode, &mut process) {
        Ok(g) => Verdict::graded(g.hard, g.task, g.quality, process),
        Err(e) => Verdict::fault(e.to_string(), process),
    }
}

/// The candidate actions every observation offers (a fixed order that does
/// not follow their labels).
pub(crate) fn candidates<B: TaskBackend>(b: &B) -> Vec<AgentAction> {
    b.candidate_list().to_vec()
}

/// The solution in the task's own candidate actions (its `right`
/// candidates in order, which `task validate` proves solve it), so a
/// discrete policy can imitate every step; the free-form gold when the
/// task lists no right candidate.
pub(crate) fn reference_solution<B: TaskBackend>(b: &B) -> Option<Vec<AgentAction>> {
    Some(crate::verifier::reference_solution(b.spec()))
}

/// How a backend makes its task's root and caches it: a native task under
/// store tags, a session task in `WasmRuntime::memo_root`. Preparation runs
/// before the environment exists, so this is its own small trait.
pub(crate) trait RootSource {
    /// The root snapshot.
    type Root;

    /// The preparation key of `spec`: roots are cached under it.
    ///
    /// # Errors
    /// A file of the task that cannot be read.
    fn root_key(&self, spec: &TaskSpec) -> Result<String, EnvError>;

    /// The root cached under `key`, else the one `make` makes (cached).
    ///
    /// # Errors
    /// The cache's runtime faults, or what `make` returns.
    fn cached_root(
        &self,
        spec: &TaskSpec,
        key: &str,
        make: &mut dyn FnMut() -> Result<Self::Root, EnvError>,
    ) -> Result<Self::Root, EnvError>;

    /// Make the root of `spec` (import the workspace, run the setup steps).
    ///
    /// # Errors
    /// A failing setup step, runtime faults.
    fn make_root(&self, spec: &TaskSpec, key: &str) -> Result<Self::Root, EnvError>;
}

/// The root of `spec` and its preparation key: the cached one, else a new
/// one made once.
///
/// # Errors
/// As [`RootSource`]'s hooks.
pub(crate) fn prepare_root<S: RootSource>(
    source: &S,
    spec: &TaskSpec,
) -> Result<(String, S::Root), EnvError> {
    let key = source.root_key(spec)?;
    let root = source.cached_root(spec, &key, &mut || source.make_root(spec, &key))?;
    Ok((key, root))
}

/// Milliseconds the agent's actions took in all.
fn agent_ms(facts: &[StepFacts]) -> u64 {
    facts.iter().map(|f| f.duration_us).sum::<u64>() / 1000
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

/// Reads one file of the final state; `Ok(None)` skips it.
pub(crate) type ReadFinal<'a, E> = dyn FnMut(&str) -> Result<Option<Vec<u8>>, E> + 'a;

/// How [`quality`] reads the final state's files.
pub(crate) enum FinalFiles<'a, E> {
    /// Not read (nothing to read them with): only the counts.
    #[cfg_attr(
        not(feature = "wasm"),
        expect(dead_code, reason = "only session tasks grade unread states")
    )]
    Unread,
    /// Read with this function.
    Read(&'a mut ReadFinal<'a, E>),
}

/// The soft quality of a change from `base` to `last`: files added,
/// modified and deleted, and the lines changed — `code_lines` (code the
/// agent ran), plus the lines of every added or modified file read through
/// `files`, plus, with `count_deleted`, the lines of deleted files.
///
/// # Errors
/// What `files` returns.
pub(crate) fn quality<E>(
    spec: &TaskSpec,
    base: &MergedView,
    last: &MergedView,
    code_lines: usize,
    files: FinalFiles<'_, E>,
    count_deleted: bool,
) -> Result<SoftQuality, E> {
    let d = layer::diff(base, last);
    let mut changed_lines = code_lines;
    if let FinalFiles::Read(read) = files {
        for path in d.added.iter().chain(&d.modified) {
            let Some(EntryKind::File { size, .. }) = last.entries.get(path).map(|e| &e.kind) else {
                continue;
            };
            if *size > QUALITY_READ_LIMIT {
                continue;
            }
            let Some(new) = read(path)? else { continue };
            let old = if d.modified.contains(path) {
                std::fs::read(spec.workspace.join(path)).unwrap_or_default()
            } else {
                Vec::new()
            };
            changed_lines += line_changes(&old, &new);
        }
    }
    if count_deleted {
        changed_lines += d
            .deleted
            .iter()
            .filter_map(|p| std::fs::read(spec.workspace.join(p)).ok())
            .map(|old| line_changes(&old, b""))
            .sum::<usize>();
    }
    Ok(SoftQuality {
        added: d.added.len(),
        modified: d.modified.len(),
        deleted: d.deleted.len(),
        changed_lines,
        lint_errors: Vec::new(),
    })
}

/// The lines of Python an episode's code steps ran (blank lines and
/// comments not counted).
#[cfg_attr(
    not(any(feature = "wasm", test)),
    expect(dead_code, reason = "only session tasks run code steps")
)]
pub(crate) fn code_lines<'a>(actions: impl IntoIterator<Item = &'a AgentAction>) -> usize {
    actions
        .into_iter()
        .filter_map(|a| match a {
            AgentAction::Exec { command, .. } => Some(
                command
                    .lines()
                    .filter(|l| !l.trim().is_empty() && !l.trim().starts_with('#'))
                    .count(),
            ),
            _ => None,
        })
        .sum()
}

/// Lines added plus lines removed between two texts (a multiset comparison,
/// which is exact for pure insertions and deletions and close otherwise).
pub(crate) fn line_changes(old: &[u8], new: &[u8]) -> usize {
    use std::collections::BTreeMap;
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

/// A file or folder that could not be read to compute a preparation key.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct KeyError {
    /// The file or folder.
    pub path: std::path::PathBuf,
    /// Why.
    pub source: std::io::Error,
}

/// The preparation key of `spec`: a hash of `version`, the `parts` (the
/// runner's sources, the guest's hash), `task.toml` and the folders in
/// `dirs` (`(label, folder, optional)`; a missing optional folder is
/// skipped), ready for more input and for [`key_hex`]. Roots are cached
/// under it.
///
/// # Errors
/// [`KeyError`] for a file that cannot be read.
pub(crate) fn content_key(
    spec: &TaskSpec,
    version: &str,
    parts: &[&[u8]],
    dirs: &[(&str, &Path, bool)],
) -> Result<blake3::Hasher, KeyError> {
    let mut h = blake3::Hasher::new();
    h.update(version.as_bytes());
    for p in parts {
        h.update(p);
    }
    let toml_path = spec.dir.join("task.toml");
    let toml = std::fs::read(&toml_path).map_err(|source| KeyError {
        path: toml_path,
        source,
    })?;
    h.update(&toml);
    for (label, dir, optional) in dirs {
        if *optional && !dir.is_dir() {
            continue;
        }
        h.update(label.as_bytes());
        hash_dir(&mut h, dir, dir)?;
    }
    Ok(h)
}

/// Feed every entry under `dir` (names relative to `root`, kinds, modes,
/// contents and link targets, in name order) to `h`.
///
/// # Errors
/// [`KeyError`] for an entry that cannot be read.
pub(crate) fn hash_dir(h: &mut blake3::Hasher, root: &Path, dir: &Path) -> Result<(), KeyError> {
    let err = |path: &Path| {
        let path = path.to_owned();
        move |source| KeyError { path, source }
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(err(dir))?
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
        let meta = std::fs::symlink_metadata(&path).map_err(err(&path))?;
        h.update(rel.as_bytes());
        h.update(&[0]);
        if meta.is_dir() {
            h.update(b"d");
            hash_dir(h, root, &path)?;
        } else if meta.file_type().is_symlink() {
            h.update(b"l");
            let t = std::fs::read_link(&path).map_err(err(&path))?;
            h.update(t.to_string_lossy().as_bytes());
        } else {
            use std::os::unix::fs::PermissionsExt;
            h.update(&meta.permissions().mode().to_le_bytes());
            let data = std::fs::read(&path).map_err(err(&path))?;
            h.update(&(data.len() as u64).to_le_bytes());
            h.update(&data);
        }
    }
    Ok(())
}

/// The first `bytes` bytes of a key hash, as hex.
pub(crate) fn key_hex(h: &blake3::Hasher, bytes: usize) -> String {
    hex::encode(&h.finalize().as_bytes()[..bytes])
}

/// `impl Environment for $ty` by the skeleton: both task kinds hand the
/// episode's flow (reset, step, verify, candidates, reference solution) to
/// the functions above and differ only in their [`TaskBackend`] hooks.
macro_rules! environment_by_skeleton {
    ($ty:ty) => {
        impl arbor_rollout::Environment for $ty {
            fn id(&self) -> &str {
                &self.spec.id
            }

            fn limits(&self) -> arbor_rollout::EnvLimits {
                self.spec.limits
            }

            fn reset(
                &self,
            ) -> Result<
                (arbor_runtime::AnySnapshot, arbor_rollout::EnvObservation),
                arbor_rollout::EnvError,
            > {
                Ok($crate::skeleton::reset(self))
            }

            fn step(
                &self,
                sandbox: &mut arbor_runtime::AnySandbox,
                step: usize,
                action: &arbor_rollout::AgentAction,
            ) -> Result<arbor_rollout::Transition, arbor_rollout::EnvError> {
                $crate::skeleton::step(self, sandbox, step, action)
            }

            fn verify(&self, episode: &arbor_rollout::Episode) -> arbor_rollout::Verdict {
                $crate::skeleton::verify(self, episode)
            }

            fn candidates(
                &self,
                _observation: &arbor_rollout::EnvObservation,
            ) -> Vec<arbor_rollout::AgentAction> {
                $crate::skeleton::candidates(self)
            }

            fn reference_solution(&self) -> Option<Vec<arbor_rollout::AgentAction>> {
                $crate::skeleton::reference_solution(self)
            }
        }
    };
}
pub(crate) use environment_by_skeleton;

#[cfg(test)]
mod tests;
