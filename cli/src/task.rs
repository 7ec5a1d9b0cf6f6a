//! `arbor task list | show | validate | run`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result, anyhow};
use arbor_envs::prepared::StepReport;
use arbor_envs::rollout::{AgentAction, Verdict};
use arbor_envs::suite::{self, Suite};
use arbor_envs::task::{Backend, SessionCheck, WorkspaceCheck};
use arbor_envs::validate::{self, ValidationReport};
use arbor_envs::{TaskSpec, prepare};
use serde::{Deserialize, Serialize};

use crate::args::TaskCommand;
use crate::commands::Ctx;
use crate::error::{EXIT_FAILURE, UsageError, chain_message};
use crate::output::{emit, progress_bar};
use crate::render::table;

/// Run an `arbor task` command.
pub fn run(ctx: &Ctx, tasks: Option<&Path>, command: TaskCommand) -> Result<i32> {
    let dir = tasks.map_or_else(suite::bundled_dir, Path::to_owned);
    match command {
        TaskCommand::List { split } => list(ctx, &dir, split.as_deref()),
        TaskCommand::Show { id } => show(ctx, &dir, &id),
        TaskCommand::Validate { dirs, jobs } => {
            let dirs = if dirs.is_empty() { vec![dir] } else { dirs };
            validate_dirs(ctx, &dirs, jobs)
        }
        TaskCommand::Run { id, actions } => run_actions(ctx, &dir, &id, &actions),
        TaskCommand::ImportSwe {
            instances,
            repo_dir,
            image,
            out,
        } => import_swe(ctx, &instances, &repo_dir, image.as_deref(), &out),
    }
}

/// `arbor task import-swe`.
fn import_swe(
    ctx: &Ctx,
    instances: &Path,
    repo_dir: &Path,
    image: Option<&str>,
    out: &Path,
) -> Result<i32> {
    use arbor_envs::swe;
    let usage = |e: swe::SweError| anyhow!(UsageError(e.to_string()));
    let text = std::fs::read_to_string(instances)
        .with_context(|| format!("reading {}", instances.display()))?;
    let parsed = swe::parse_instances(instances, &text).map_err(usage)?;
    if parsed.is_empty() {
        return Err(anyhow!(UsageError(format!(
            "{}: no instances",
            instances.display()
        ))));
    }
    let image = image
        .map(swe::ImageSpec::parse)
        .transpose()
        .map_err(usage)?;
    let done = swe::import(&parsed, repo_dir, image.as_ref(), out).map_err(usage)?;
    let rows: Vec<serde_json::Value> = done
        .iter()
        .map(|t| serde_json::json!({ "id": t.id, "dir": t.dir }))
        .collect();
    emit(ctx.json, &serde_json::json!({ "imported": rows }), || {
        done.iter()
            .map(|t| format!("imported {} -> {}\n", t.id, t.dir.display()))
            .collect()
    })?;
    Ok(0)
}

fn load_suite(dir: &Path) -> Result<Suite> {
    Suite::load(dir).map_err(|e| anyhow!(UsageError(e.to_string())))
}

fn find<'a>(suite: &'a Suite, id: &str) -> Result<&'a TaskSpec> {
    suite.get(id).ok_or_else(|| {
        anyhow!(UsageError(format!(
            "no task {id:?} in {} (`arbor task list` lists them)",
            suite.dir.display()
        )))
    })
}

#[derive(Serialize)]
struct ListRow<'a> {
    id: &'a str,
    family: String,
    backend: String,
    group: &'a str,
    difficulty: String,
    split: Option<&'a str>,
    candidates: usize,
    max_steps: usize,
}

fn list(ctx: &Ctx, dir: &Path, split: Option<&str>) -> Result<i32> {
    let suite = load_suite(dir)?;
    let specs: Vec<&TaskSpec> = match split {
        Some(s) => suite.split(s).map_err(|e| anyhow!(UsageError(e)))?,
        None => suite.tasks.values().collect(),
    };
    let rows: Vec<ListRow<'_>> = specs
        .iter()
        .map(|t| ListRow {
            id: &t.id,
            family: t.family.to_string(),
            backend: t.backend.to_string(),
            group: &t.group,
            difficulty: format!("{:?}", t.difficulty).to_lowercase(),
            split: suite.split_of(&t.id),
            candidates: t.candidates.len(),
            max_steps: t.limits.max_steps,
        })
        .collect();
    emit(ctx.json, &serde_json::json!({ "tasks": rows }), || {
        let body: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    r.id.to_owned(),
                    r.family.clone(),
                    r.group.to_owned(),
                    r.difficulty.clone(),
                    r.split.unwrap_or("-").to_owned(),
                    r.candidates.to_string(),
                    r.backend.clone(),
                ]
            })
            .collect();
        let mut s = table(
            &[
                "TASK",
                "FAMILY",
                "GROUP",
                "DIFFICULTY",
                "SPLIT",
                "CANDIDATES",
                "BACKEND",
            ],
            &body,
        );
        s.push_str(&format!("{} tasks\n", rows.len()));
        s
    })?;
    Ok(0)
}

#[derive(Serialize)]
struct ShowJson<'a> {
    id: &'a str,
    family: String,
    group: &'a str,
    difficulty: String,
    split: Option<&'a str>,
    instructions: &'a str,
    limits: arbor_envs::rollout::EnvLimits,
    allow: &'a [String],
    byproducts: &'a [String],
    protected: &'a [String],
    setup: &'a [String],
    gold_steps: Vec<String>,
    candidates: Vec<String>,
    canaries: Vec<&'a str>,
    backend: String,
    /// Native tasks: the folder of hidden unit tests.
    checks_dir: Option<&'a Path>,
    /// `wasm` tasks: the declarative hidden checks (in task.toml).
    session_checks: &'a [SessionCheck],
    /// `wasm` tasks: the hidden workspace checks.
    workspace_checks: &'a [WorkspaceCheck],
}

fn show(ctx: &Ctx, dir: &Path, id: &str) -> Result<i32> {
    let suite = load_suite(dir)?;
    let t = find(&suite, id)?;
    let out = ShowJson {
        id: &t.id,
        family: t.family.to_string(),
        group: &t.group,
        difficulty: format!("{:?}", t.difficulty).to_lowercase(),
        split: suite.split_of(&t.id),
        instructions: &t.instructions,
        limits: t.limits,
        allow: t.allow.patterns(),
        byproducts: t.byproducts.patterns(),
        protected: t.protected.patterns(),
        setup: &t.setup,
        gold_steps: t.gold.iter().map(ToString::to_string).collect(),
        candidates: t
            .candidates
            .iter()
            .map(|c| format!("{}: {}", format!("{:?}", c.label).to_lowercase(), c.action))
            .collect(),
        canaries: t.canaries.iter().map(|c| c.name.as_str()).collect(),
        backend: t.backend.to_string(),
        checks_dir: (t.backend == Backend::Native).then_some(t.checks.as_path()),
        session_checks: &t.session_checks,
        workspace_checks: &t.workspace_checks,
    };
    emit(ctx.json, &out, || {
        let mut s = format!(
            "{}  ({} / {} / {}, backend {}, split {})\n\n{}\n\n",
            out.id,
            out.family,
            out.group,
            out.difficulty,
            out.backend,
            out.split.unwrap_or("-"),
            out.instructions.trim()
        );
        s.push_str(&format!(
            "limits: {} steps, {} s per action, {} s in all\n",
            t.limits.max_steps,
            t.limits.step_timeout_ms as f64 / 1000.0,
            t.limits.total_time_ms as f64 / 1000.0
        ));
        s.push_str(&format!("may change: {}\n", out.allow.join(", ")));
        s.push_str(&format!("by-products: {}\n", out.byproducts.join(", ")));
        if !out.protected.is_empty() {
            s.push_str(&format!("protected: {}\n", out.protected.join(", ")));
        }
        if t.backend == Backend::Wasm && !out.setup.is_empty() {
            s.push_str(&format!("setup: {} Python steps\n", out.setup.len()));
            for step in out.setup {
                s.push_str(&format!("  {step:?}\n"));
            }
        } else if !out.setup.is_empty() {
            s.push_str(&format!("setup: {}\n", out.setup.join(" && ")));
        }
        s.push_str(&format!(
            "gold solution: {} actions\n",
            out.gold_steps.len()
        ));
        for g in &out.gold_steps {
            s.push_str(&format!("  {g}\n"));
        }
        s.push_str(&format!("candidates: {}\n", out.candidates.len()));
        for c in &out.candidates {
            s.push_str(&format!("  {c}\n"));
        }
        match out.checks_dir {
            Some(d) => s.push_str(&format!("hidden checks: {}\n", d.display())),
            None => s.push_str(&format!(
                "hidden checks: {} session checks, {} workspace checks (in task.toml)\n",
                out.session_checks.len(),
                out.workspace_checks.len()
            )),
        }
        s
    })?;
    Ok(0)
}

/// Task directories named by `dirs` (a suite folder stands for all its
/// tasks, after its manifest is checked).
fn collect_tasks(dirs: &[PathBuf]) -> Result<Vec<TaskSpec>> {
    let mut specs = Vec::new();
    for d in dirs {
        if d.join("task.toml").is_file() {
            specs.push(TaskSpec::load(d).map_err(|e| anyhow!(UsageError(e.to_string())))?);
        } else if d.join("manifest.toml").is_file() {
            specs.extend(load_suite(d)?.tasks.into_values());
        } else {
            return Err(anyhow!(UsageError(format!(
                "{}: neither a task (task.toml) nor a suite (manifest.toml)",
                d.display()
            ))));
        }
    }
    Ok(specs)
}

#[derive(Serialize)]
struct ValidateJson {
    ok: bool,
    tasks: Vec<ValidateEntry>,
}

#[derive(Serialize)]
struct ValidateEntry {
    task: String,
    ok: bool,
    failures: Vec<String>,
    seconds: f64,
    report: Option<ValidationReport>,
}

fn validate_dirs(ctx: &Ctx, dirs: &[PathBuf], jobs: Option<usize>) -> Result<i32> {
    let specs = collect_tasks(dirs)?;
    let total: u64 = specs.iter().map(|s| validate::plan(s).len() as u64).sum();
    let bar = progress_bar(ctx.json, total, "checks");
    let workers = jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .clamp(1, 64)
        .min(specs.len().max(1));
    let results = arbor_runtime::parallel::map(&specs, workers, |_, spec| {
        let entry = validate_one(ctx, spec.clone(), &bar);
        let line = if entry.ok {
            format!("ok    {} ({:.1} s)", entry.task, entry.seconds)
        } else {
            let mut l = format!("FAIL  {}", entry.task);
            for f in &entry.failures {
                l.push_str(&format!("\n      {f}"));
            }
            l
        };
        if ctx.json {
        } else if bar.is_hidden() {
            let _ = crate::output::stderr_bytes(format!("{line}\n").as_bytes());
        } else {
            bar.println(line);
        }
        entry
    });
    bar.finish_and_clear();
    let tasks: Vec<ValidateEntry> = results
        .into_iter()
        .zip(&specs)
        .map(|(r, spec)| {
            r.unwrap_or_else(|p| ValidateEntry {
                task: spec.id.clone(),
                ok: false,
                failures: vec![format!("validation: {p}")],
                seconds: 0.0,
                report: None,
            })
        })
        .collect();
    let failed = tasks.iter().filter(|t| !t.ok).count();
    let out = ValidateJson {
        ok: failed == 0,
        tasks,
    };
    emit(ctx.json, &out, || {
        let checks: usize = out
            .tasks
            .iter()
            .filter_map(|t| t.report.as_ref())
            .map(|r| r.checks.len())
            .sum();
        format!(
            "{} of {} tasks valid ({} checks run)\n",
            out.tasks.len() - failed,
            out.tasks.len(),
            checks
        )
    })?;
    Ok(if failed == 0 { 0 } else { EXIT_FAILURE })
}

fn validate_one(ctx: &Ctx, spec: TaskSpec, bar: &indicatif::ProgressBar) -> ValidateEntry {
    let t = Instant::now();
    let task = spec.id.clone();
    let planned = validate::plan(&spec).len() as u64;
    let result = prepare(&ctx.runtime, spec).and_then(|env| {
        validate::validate(&env, &mut |c| {
            bar.inc(1);
            bar.set_message(format!("{task}: {}", c.name));
        })
    });
    let seconds = t.elapsed().as_secs_f64();
    match result {
        Ok(report) => ValidateEntry {
            task,
            ok: report.ok(),
            failures: report.failures(),
            seconds,
            report: Some(report),
        },
        Err(e) => {
            bar.inc(planned);
            ValidateEntry {
                task,
                ok: false,
                failures: vec![chain_message(&anyhow::Error::from(e))],
                seconds,
                report: None,
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionsToml {
    action: Vec<AgentAction>,
}

/// Parse an actions file: a JSON array, or TOML `[[action]]` tables.
pub fn read_actions(path: &Path) -> Result<Vec<AgentAction>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow!(UsageError(format!("{}: cannot read: {e}", path.display()))))?;
    let parsed = if path.extension().is_some_and(|e| e == "toml") {
        toml::from_str::<ActionsToml>(&text)
            .map(|a| a.action)
            .map_err(|e| e.to_string())
    } else {
        serde_json::from_str::<Vec<AgentAction>>(&text).map_err(|e| e.to_string())
    };
    parsed.map_err(|e| anyhow!(UsageError(format!("{}: {e}", path.display()))))
}

#[derive(Serialize)]
struct RunJson<'a> {
    task: &'a str,
    steps: Vec<StepReport>,
    snapshot: String,
    verdict: &'a Verdict,
}

fn run_actions(ctx: &Ctx, dir: &Path, id: &str, file: &Path) -> Result<i32> {
    let actions = read_actions(file)?;
    let suite = load_suite(dir)?;
    let spec = find(&suite, id)?.clone();
    let env = prepare(&ctx.runtime, spec).context("prepare the task")?;
    let (steps, snapshot, verdict) = env.run_report(&actions)?;
    let out = RunJson {
        task: id,
        steps,
        snapshot,
        verdict: &verdict,
    };
    emit(ctx.json, &out, || {
        let mut s = String::new();
        for (i, st) in out.steps.iter().enumerate() {
            s.push_str(&format!(
                "[{i}] {} -> {} ({:.0} ms)\n",
                st.action, st.exit, st.duration_ms
            ));
            for line in st.output.lines().take(20) {
                s.push_str(&format!("    {line}\n"));
            }
        }
        s.push_str(&format!("final snapshot {}\n", out.snapshot));
        s.push_str(&format!("verdict: {}\n", verdict.summary()));
        for v in &verdict.hard.violations {
            s.push_str(&format!("  hard: {:?}: {}\n", v.kind, v.detail));
        }
        for c in &verdict.task.checks {
            s.push_str(&format!(
                "  check {} {}{}\n",
                if c.passed { "pass" } else { "FAIL" },
                c.id,
                if c.detail.is_empty() {
                    String::new()
                } else {
                    format!(": {}", c.detail.lines().next().unwrap_or_default())
                }
            ));
        }
        s.push_str(&format!(
            "  quality: +{} ~{} -{} paths, {} lines changed, {} lint errors\n",
            verdict.quality.added,
            verdict.quality.modified,
            verdict.quality.deleted,
            verdict.quality.changed_lines,
            verdict.quality.lint_errors.len()
        ));
        s.push_str(&format!(
            "  process: {} steps, {} commands, {} failed, agent {} ms, verify {} + {} ms\n",
            verdict.process.steps,
            verdict.process.commands,
            verdict.process.failed,
            verdict.process.agent_ms,
            verdict.process.verify_setup_ms,
            verdict.process.verify_checks_ms
        ));
        s
    })?;
    Ok(if verdict.is_fault() { EXIT_FAILURE } else { 0 })
}
