//! [`TaskEnv`]: a prepared native task — its root snapshot, its checks
//! snapshot and the ids of its hidden checks — which implements
//! [`Environment`] and grades an episode with the layered verifier.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Instant;

use arbor_rollout::env::{
    EpisodeStep, ProcessDiagnostics, SoftQuality, TaskOutcome, Violation, ViolationKind,
    describe_exit,
};
use arbor_rollout::{AgentAction, EnvError, Environment, Episode, Transition, Verdict};
use arbor_runtime::image::Image;
use arbor_runtime::layer::{self, MergedView};
use arbor_runtime::sandbox::ChangeKind;
use arbor_runtime::store::object::ExitStatus;
use arbor_runtime::{AnySandbox, AnySnapshot};
use arbor_runtime::{ExecOptions, Runtime, Sandbox, SandboxError, Snapshot};

use super::checks::{ListFailure, NoReport};
use super::{
    CheckReport, CheckRun, cap, checks, integrity, millis, runtime_err, shuffled_candidates, tail,
    verifier_site,
};
use crate::failure::{self, CheckFailure};
use crate::skeleton::{self, ActionOutcome, Graded, RootSource, StepFacts, TaskBackend};
use crate::task::{Backend, TaskImage, TaskSpec};

/// Version of the preparation format; part of the cache key.
const PREPARE_VERSION: &str = "arbor-task-v2";

/// A task ready to run: its root snapshot, its checks snapshot and the ids of
/// its hidden checks.
#[derive(Debug)]
pub struct TaskEnv {
    spec: TaskSpec,
    runtime: Runtime,
    root: Snapshot,
    checks: Snapshot,
    /// The checks that decide the reward: the task's listed ids, else every
    /// check the runner discovered (empty when listing failed).
    check_ids: Vec<String>,
    /// Why the hidden checks could not be listed (every verdict is then 0
    /// and says so).
    list_problem: Option<ListFailure>,
    candidates: Vec<AgentAction>,
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
        let (key, root) = skeleton::prepare_root(&NativeRoots { runtime }, &spec)?;
        let store = runtime.store();
        let checks_tag = format!("checks.{}.{key}", spec.id);
        let checks = match store.get_tag(&checks_tag).map_err(runtime_err)? {
            Some(id) => runtime.snapshot(&id)?,
            None => {
                let tmp = tempfile::tempdir().map_err(|e| task_err(format!("tempdir: {e}")))?;
                checks::write_checks_dir(&spec, tmp.path()).map_err(|e| task_err(e.to_string()))?;
                runtime.import(tmp.path(), Some(&checks_tag))?
            }
        };
        let listed = spec.check_config.listed_ids();
        let (check_ids, list_problem) = if listed.is_empty() {
            let mut sb = root.open()?;
            sb.reset_session();
            match checks::list(&mut sb, &checks, spec.checks_timeout_ms)? {
                Ok(ids) => (ids, None),
                Err(problem) => (Vec::new(), Some(problem)),
            }
        } else {
            (listed, None)
        };
        let candidates = shuffled_candidates(&spec);
        Ok(Self {
            spec,
            runtime: runtime.clone(),
            root,
            checks,
            check_ids,
            list_problem,
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
    pub fn run(&self, actions: &[AgentAction]) -> Result<(Episode, Vec<Transition>), EnvError> {
        let mut sb = AnySandbox::Native(self.root.open()?);
        let mut results = Vec::with_capacity(actions.len());
        for (i, a) in actions.iter().enumerate() {
            results.push(self.step(&mut sb, i, a)?);
        }
        let last = sb.snapshot()?;
        let episode = Episode {
            task: self.spec.id.clone(),
            root: AnySnapshot::Native(self.root.clone()),
            steps: results.iter().map(|r| r.record.clone()).collect(),
            last,
        };
        Ok((episode, results))
    }

    /// Run every hidden check on `state` (a snapshot of this task's
    /// workspace) and return the trusted runner's raw report, before any
    /// judging: what `verify` decides from, exposed to measure agreement
    /// with an upstream run of the same suite.
    ///
    /// # Errors
    /// Runtime faults; `Ok(Err(why))` when the runner gave no report.
    pub fn check_report(&self, state: &Snapshot) -> Result<Result<CheckRun, NoReport>, EnvError> {
        if let Some(problem) = &self.list_problem {
            return Ok(Err(NoReport::Listing(problem.clone())));
        }
        let mut sb = state.open()?;
        sb.reset_session();
        Ok(
            checks::run(&mut sb, &self.checks, self.spec.checks_timeout_ms)?.map(|r| CheckRun {
                tests: r
                    .tests
                    .into_iter()
                    .map(|t| CheckReport {
                        id: t.id,
                        outcome: t.outcome,
                        detail: t.detail,
                    })
                    .collect(),
                problem: r.problem,
                subject: r.subject,
            }),
        )
    }

    /// Run `actions` and verify the result.
    ///
    /// # Errors
    /// Runtime faults while running the actions (verification faults are verdicts).
    pub fn run_and_verify(&self, actions: &[AgentAction]) -> Result<Verdict, EnvError> {
        let (episode, _) = self.run(actions)?;
        Ok(self.verify(&episode))
    }

    fn quality(
        &self,
        sb: &mut Sandbox,
        base: &MergedView,
        last: &MergedView,
    ) -> Result<SoftQuality, SandboxError> {
        let mut read = |path: &str| match sb.read_file(path) {
            Ok(b) => Ok(Some(b)),
            Err(SandboxError::File(_)) => Ok(None),
            Err(e) => Err(e),
        };
        skeleton::quality(
            &self.spec,
            base,
            last,
            0,
            skeleton::FinalFiles::Read(&mut read),
            true,
        )
    }

    /// Run the hidden checks in `sb` and judge every check that decides
    /// the reward.
    fn run_checks(&self, sb: &mut Sandbox) -> Result<TaskOutcome, SandboxError> {
        let mut outcome = TaskOutcome {
            checks_total: self.check_ids.len(),
            ..TaskOutcome::default()
        };
        if let Some(problem) = &self.list_problem {
            outcome.problem = Some(problem.to_string());
            return Ok(outcome);
        }
        let result = match checks::run(sb, &self.checks, self.spec.checks_timeout_ms)? {
            Ok(r) => r,
            Err(why) => {
                outcome.problem = Some(why.to_string());
                return Ok(outcome);
            }
        };
        if let Some(problem) = &result.problem {
            outcome.problem = Some(problem.clone());
        }
        let by_id: BTreeMap<&str, &checks::RunnerTest> =
            result.tests.iter().map(|t| (t.id.as_str(), t)).collect();
        let semantics = self.spec.check_config.semantics;
        for id in &self.check_ids {
            let verdict = match by_id.get(id.as_str()) {
                Some(t) => checks::judge(t, semantics),
                None => match checks::module_error(&result.tests, id) {
                    Some(t) => Err(CheckFailure::Reported(t.detail.clone())),
                    None => checks::whole_file(&result.tests, id, semantics).unwrap_or_else(|| {
                        Err(CheckFailure::NotReported {
                            subject: result.subject.clone(),
                        })
                    }),
                },
            };
            failure::record(&mut outcome, id.clone(), verdict);
        }
        Ok(outcome)
    }

    /// Grade `episode` (the [`TaskBackend::run_checks`] hook).
    fn grade(
        &self,
        episode: &Episode,
        process: &mut ProcessDiagnostics,
    ) -> Result<Graded, EnvError> {
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
        let mut hard = self.hard_constraints(&episode.steps, &base, &last);
        let mut sb = last_snap.open()?;
        sb.reset_session();
        let mut quality = self.quality(&mut sb, &base, &last)?;
        let (static_violations, syntax) = integrity::analyse_changes(
            store,
            &self.spec,
            &base,
            &last,
            &root_snap.manifest().layers,
            &last_snap.manifest().layers,
        )
        .map_err(SandboxError::from)?;
        hard.violations.extend(static_violations);
        quality.lint_errors = syntax;
        process.verify_setup_ms = millis(t0);
        let t1 = Instant::now();
        let task = self.run_checks(&mut sb)?;
        process.verify_checks_ms = millis(t1);
        let tampered = self.written_during_checks(&mut sb)?;
        if !tampered.is_empty() {
            hard.violations.push(Violation {
                kind: ViolationKind::Tampering,
                detail: format!("changed while the checks ran: {}", tampered.join(", ")),
            });
        }
        Ok(Graded {
            hard,
            task,
            quality,
        })
    }

    /// Files of the final state that were written (even if put back) or
    /// deleted while the checks ran: the code under test changing what the
    /// checks read. New files (a program's output) and by-products are
    /// fine.
    fn written_during_checks(&self, sb: &mut Sandbox) -> Result<Vec<String>, SandboxError> {
        Ok(sb
            .written_paths()?
            .into_iter()
            .filter(|c| c.kind != ChangeKind::Added)
            .filter(|c| {
                !self.spec.byproducts.matches(&c.path)
                    && !CHECK_BYPRODUCTS.contains(&c.path.as_str())
            })
            .map(|c| c.path)
            .take(20)
            .collect())
    }
}

/// Files the checks' own programs legitimately rewrite (git refreshes its
/// index on `git status`).
const CHECK_BYPRODUCTS: &[&str] = &[".git/index"];

impl TaskEnv {
    /// The fault of being handed another backend's state.
    fn not_native(&self) -> EnvError {
        EnvError::Task {
            task: self.spec.id.clone(),
            message: "a native task was given a WebAssembly session's state".into(),
        }
    }
}

impl TaskBackend for TaskEnv {
    type Step = EpisodeStep;
    type State = AnySnapshot;
    type Sandbox = AnySandbox;
    type Recorded = Episode;
    type Episode = Episode;

    fn spec(&self) -> &TaskSpec {
        &self.spec
    }

    fn root_state(&self) -> AnySnapshot {
        AnySnapshot::Native(self.root.clone())
    }

    fn candidate_list(&self) -> &[AgentAction] {
        &self.candidates
    }

    fn run_action(
        &self,
        sandbox: &mut AnySandbox,
        action: &AgentAction,
    ) -> Result<ActionOutcome, EnvError> {
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
        Ok(ActionOutcome {
            exit,
            output,
            duration_us,
        })
    }

    /// A native episode is graded as recorded. Another backend's states are
    /// refused later, in [`TaskBackend::run_checks`], so that fault verdict
    /// keeps the episode's process diagnostics (as it always has).
    fn episode<'r>(&self, recorded: &'r Episode) -> Result<Cow<'r, Episode>, EnvError> {
        Ok(Cow::Borrowed(recorded))
    }

    fn steps<'e>(&self, episode: &'e Episode) -> &'e [EpisodeStep] {
        &episode.steps
    }

    fn run_checks(
        &self,
        episode: &Episode,
        process: &mut ProcessDiagnostics,
    ) -> Result<Graded, EnvError> {
        self.grade(episode, process)
    }

    fn facts(&self, index: usize, s: &EpisodeStep) -> StepFacts {
        let violation = match s.exit {
            ExitStatus::Timeout => Some(Violation {
                kind: ViolationKind::AgentTimeout,
                detail: format!("step {index} ({}) timed out", s.action),
            }),
            ExitStatus::DiskLimit => Some(Violation {
                kind: ViolationKind::AgentDiskLimit,
                detail: format!("step {index} ({}) hit the disk limit", s.action),
            }),
            _ => None,
        };
        StepFacts {
            is_exec: s.action.is_exec(),
            ok: s.exit == ExitStatus::Code { code: 0 },
            duration_us: s.duration_us,
            violation,
        }
    }
}

crate::skeleton::environment_by_skeleton!(TaskEnv);

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

/// Native roots: made by importing the workspace and running the setup
/// commands, cached in the store under the tag `task.<id>.<key>`.
struct NativeRoots<'a> {
    runtime: &'a Runtime,
}

/// The store tag a native root is cached under.
fn root_tag(spec: &TaskSpec, key: &str) -> String {
    format!("task.{}.{key}", spec.id)
}

impl RootSource for NativeRoots<'_> {
    type Root = Snapshot;

    fn root_key(&self, spec: &TaskSpec) -> Result<String, EnvError> {
        let key = content_key(spec).map_err(|e| EnvError::Task {
            task: spec.id.clone(),
            message: e.to_string(),
        })?;
        // The image is part of the root: a name moved to another image, or
        // another archive, makes another root.
        Ok(match task_image(self.runtime, spec)? {
            Some(img) => format!("{key}-{}", &img.id.to_hex()[..12]),
            None => key,
        })
    }

    fn cached_root(
        &self,
        spec: &TaskSpec,
        key: &str,
        make: &mut dyn FnMut() -> Result<Snapshot, EnvError>,
    ) -> Result<Snapshot, EnvError> {
        // `make_root` sets the tag itself (with no setup step the import
        // tags the root directly).
        match self
            .runtime
            .store()
            .get_tag(&root_tag(spec, key))
            .map_err(runtime_err)?
        {
            Some(id) => Ok(self.runtime.snapshot(&id)?),
            None => make(),
        }
    }

    fn make_root(&self, spec: &TaskSpec, key: &str) -> Result<Snapshot, EnvError> {
        make_root(self.runtime, spec, &root_tag(spec, key))
    }
}

/// The task's image: by name from the store, or its archive imported (once:
/// the image is named after the archive's sha256).
fn task_image(runtime: &Runtime, spec: &TaskSpec) -> Result<Option<Image>, EnvError> {
    let task_err = |message: String| EnvError::Task {
        task: spec.id.clone(),
        message,
    };
    match &spec.image {
        None => Ok(None),
        Some(TaskImage::Named(name)) => runtime.image(name).map(Some).map_err(|e| {
            task_err(format!(
                "image {name:?}: {e} (import it with `arbor image import FILE --tag {name}`)"
            ))
        }),
        Some(TaskImage::Archive(path)) => {
            let bytes = std::fs::read(path)
                .map_err(|e| task_err(format!("image archive {}: {e}", path.display())))?;
            let name = format!("task-archive-{}", &blake3::hash(&bytes).to_hex()[..16]);
            drop(bytes);
            if let Ok(img) = runtime.image(&name) {
                return Ok(Some(img));
            }
            let imported = runtime
                .import_image(
                    path,
                    &arbor_runtime::image::ImageImport {
                        name: Some(name),
                        ..Default::default()
                    },
                )
                .map_err(|e| task_err(format!("image archive {}: {e}", path.display())))?;
            Ok(Some(runtime.image_by_id(&imported.id)?))
        }
        Some(TaskImage::Recipe(recipe)) => runtime
            .build_image(recipe, None, &mut |_| {})
            .map(|built| Some(built.image))
            .map_err(|e| task_err(format!("building the task's image: {e}"))),
    }
}

fn make_root(runtime: &Runtime, spec: &TaskSpec, tag: &str) -> Result<Snapshot, EnvError> {
    let image = task_image(runtime, spec)?;
    let at = spec.at_image_workdir;
    if spec.setup.is_empty() {
        return Ok(runtime.import_with(&spec.workspace, Some(tag), image.as_ref(), at)?);
    }
    let imported = runtime.import_with(&spec.workspace, None, image.as_ref(), at)?;
    let mut sb = imported.open()?;
    if !spec.setup_allow_hosts.is_empty() {
        sb.allow_egress(&spec.setup_allow_hosts)?;
    }
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

/// Why a task's preparation key could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum PrepareKeyError {
    /// A file of the task could not be read.
    #[error(transparent)]
    File(#[from] skeleton::KeyError),
    /// The trusted site (pytest's distributions) could not be listed.
    #[error("the trusted verifier site: {0}")]
    Site(#[from] checks::SiteError),
}

/// A hash of everything preparation depends on: `task.toml`, the workspace,
/// the checks and the runner.
fn content_key(spec: &TaskSpec) -> Result<String, PrepareKeyError> {
    let parts = [
        checks::TRUSTED,
        checks::RUNNER,
        checks::BOUNDARY,
        checks::STRICT,
        checks::SUBJECT,
    ]
    .map(str::as_bytes);
    let mut h = skeleton::content_key(
        spec,
        PREPARE_VERSION,
        &parts,
        &[
            ("workspace", &spec.workspace, false),
            ("checks", &spec.checks, false),
        ],
    )?;
    if spec.check_config.runner == crate::task::CheckRunner::Pytest {
        // The trusted site's distributions (pytest 8.3.4, ...) by name.
        let site = verifier_site()?;
        let mut dists: Vec<String> = std::fs::read_dir(&site)
            .map_err(|source| skeleton::KeyError {
                path: site.clone(),
                source,
            })?
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".dist-info"))
            .collect();
        dists.sort();
        h.update(dists.join("\n").as_bytes());
    }
    Ok(skeleton::key_hex(&h, 6))
}
