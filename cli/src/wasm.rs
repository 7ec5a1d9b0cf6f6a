//! The commands on WebAssembly session snapshots (feature `wasm`):
//! `import --wasm`, and `exec`, `fanout`, `log`, `show`, `diff`,
//! `checkout` and `replay` when their snapshot is a session. `ls`, `tag`,
//! `rm`, `gc` and `fsck` need nothing of their own: the store lists,
//! tags, collects and checks sessions beside native snapshots.
//!
//! For a session, a command's text is one *step*: Python source run in the
//! session's persistent namespace (the bundled guest), like a notebook
//! cell. Exit statuses follow `arbor exec`: 0 ok, 1 an exception, 124 the
//! step ran out of fuel or time, 125 it hit the memory cap, 134 a trap,
//! the code of `sys.exit(N)` for an exit.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result};
use arbor_runtime::store::SnapshotId;
use arbor_runtime::wasm::{
    BootSpec, StepOutcome, StepResult, WasmAction, WasmLimits, WasmManifest, WasmRuntime,
    WasmSnapshot,
};
use serde::Serialize;

use crate::commands::{Ctx, check_tag_name, fork_tags, note_committed, tags_by_snapshot};
use crate::error::{EXIT_FAILURE, UsageError};
use crate::output::{self, emit, note};
use crate::render::{clip, first_line, format_time, one_line, table};

/// The WebAssembly backend over the command's store; `timeout_s` is the
/// wall-clock safety net of one step (fuel is the deterministic limit).
pub fn runtime(ctx: &Ctx, timeout_s: Option<f64>) -> Result<WasmRuntime> {
    let mut limits = WasmLimits::default();
    if let Some(t) = timeout_s {
        limits.timeout = Duration::from_secs_f64(t);
    }
    Ok(ctx.runtime.wasm(limits)?)
}

/// `Some(id)` when what the user typed resolves to a session snapshot.
pub fn resolve(ctx: &Ctx, what: &str) -> Result<Option<SnapshotId>> {
    let id = ctx.store().resolve(what)?;
    Ok(ctx.store().is_wasm_snapshot(&id).then_some(id))
}

/// Why a step stopped, for a note (`None` for ok and exceptions).
fn outcome_note(outcome: &StepOutcome) -> Option<String> {
    match outcome {
        StepOutcome::Ok | StepOutcome::Exception | StepOutcome::Status { .. } => None,
        StepOutcome::Exited { code } => Some(format!(
            "the guest exited with code {code}; the session has ended"
        )),
        StepOutcome::Trap { message } => Some(format!(
            "the guest trapped ({message}); the session has ended"
        )),
        StepOutcome::OutOfFuel => {
            Some("the step ran out of fuel (its CPU budget); the session has ended".into())
        }
        StepOutcome::Timeout => {
            Some("the step passed its wall-clock limit; the session has ended".into())
        }
        StepOutcome::MemoryLimit => {
            Some("the guest tried to grow its memory past the cap; the session has ended".into())
        }
        StepOutcome::Ended => Some("this session had already ended; nothing ran".into()),
    }
}

/// One line describing an action.
fn action_summary(action: &WasmAction) -> String {
    match action {
        WasmAction::Step { code } => format!(">>> {}", one_line(code)),
        WasmAction::WriteFile { path, .. } => format!("write {path}"),
        WasmAction::DeleteFile { path } => format!("delete {path}"),
    }
}

/// One line describing what produced a session snapshot.
pub fn summary(m: &WasmManifest) -> String {
    match (m.boot.as_ref(), m.actions.as_slice()) {
        (Some(boot), _) => format!(
            "import --wasm {} (guest {})",
            boot.args.first().map_or("?", String::as_str),
            m.guest.short()
        ),
        (None, []) => "(no action)".into(),
        (None, [one]) => action_summary(one),
        (None, [first, ..]) => format!("{} steps: {}, ...", m.actions.len(), action_summary(first)),
    }
}

#[derive(Serialize)]
struct ImportJson<'a> {
    snapshot: SnapshotId,
    guest: &'a str,
    guest_module: SnapshotId,
    workspace: Option<&'a Path>,
    tag: Option<&'a str>,
    memory_bytes: u64,
}

/// `arbor import --wasm GUEST [DIR]`: boot the guest (with DIR as its
/// initial `/workspace`) and list the live session as a root snapshot.
pub fn import(
    ctx: &Ctx,
    guest: &str,
    dir: Option<&Path>,
    tag: Option<&str>,
    seed: Option<&str>,
) -> Result<i32> {
    if let Some(t) = tag {
        check_tag_name(ctx.store(), t)?;
    }
    let (name, bytes) = if guest == "python" {
        ("python".to_owned(), arbor_runtime::wasm::python_guest()?)
    } else {
        let path = Path::new(guest);
        let bytes = std::fs::read(path).with_context(|| {
            format!("cannot read the guest module {guest} (give `python` or a .wasm file)")
        })?;
        let stem = path
            .file_stem()
            .map_or_else(|| "guest".to_owned(), |s| s.to_string_lossy().into_owned());
        (stem, bytes)
    };
    let mut boot = BootSpec::python();
    boot.args = vec![name];
    if let Some(seed) = seed {
        let ok = seed.len() == 64 && seed.bytes().all(|b| b.is_ascii_hexdigit());
        if !ok {
            return Err(UsageError(format!("--seed must be 64 hex digits, not {seed:?}")).into());
        }
        boot.seed = seed.to_ascii_lowercase();
    }
    if let Some(dir) = dir {
        // The directory becomes the session's workspace layers; the native
        // snapshot that carried them is not kept in the index.
        let carrier = ctx.runtime.import(dir, None)?;
        boot.workspace_layers = carrier.manifest().layers.clone();
        ctx.store().unlist_snapshot(carrier.id())?;
    }
    let rt = runtime(ctx, None)?;
    let bar = output::progress_bar(ctx.json, 1, "booting the guest (compiled once per machine)");
    let root = rt.import(&bytes, &boot);
    bar.finish_and_clear();
    let root = root?;
    if let Some(t) = tag {
        ctx.store().set_tag(t, root.id())?;
    }
    let m = root.manifest();
    emit(
        ctx.json,
        &ImportJson {
            snapshot: *root.id(),
            guest,
            guest_module: m.guest,
            workspace: dir,
            tag,
            memory_bytes: m.memory_pages * 65536,
        },
        || format!("{}\n", root.id()),
    )?;
    Ok(0)
}

/// The `--json` result of `arbor exec` on a session.
#[derive(Serialize)]
struct ExecJson<'a> {
    snapshot: SnapshotId,
    code: &'a str,
    stdout: String,
    stderr: String,
    exit: i32,
    outcome: &'a StepOutcome,
    fuel: u64,
    duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    committed: Option<SnapshotId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tag: Option<&'a str>,
}

/// `arbor exec SESSION -- CODE`: run CODE as one step in a fork.
pub fn exec(
    ctx: &Ctx,
    id: &SnapshotId,
    commit: bool,
    tag: Option<&str>,
    timeout_s: f64,
    code: &str,
) -> Result<i32> {
    if let Some(t) = tag {
        check_tag_name(ctx.store(), t)?;
    }
    let rt = runtime(ctx, Some(timeout_s))?;
    let base = rt.snapshot(id)?;
    let mut sb = base.open()?;
    let r = sb.step(code)?;
    let committed = if commit {
        let new = sb.snapshot()?;
        if let Some(t) = tag {
            ctx.store().set_tag(t, new.id())?;
        }
        Some(*new.id())
    } else {
        None
    };
    let exit = r.outcome.exit_status().shell_code();
    if ctx.json {
        output::json(&ExecJson {
            snapshot: *id,
            code,
            stdout: r.stdout_text(),
            stderr: r.stderr_text(),
            exit,
            outcome: &r.outcome,
            fuel: r.fuel,
            duration_ms: r.duration.as_secs_f64() * 1e3,
            committed,
            tag: committed.and(tag),
        })?;
        return Ok(exit);
    }
    output::stdout_bytes(&r.stdout)?;
    output::stderr_bytes(&r.stderr)?;
    if let Some(text) = outcome_note(&r.outcome) {
        note(false, &text)?;
    }
    if r.dropped.iter().any(|d| *d > 0) {
        note(
            false,
            &format!(
                "output past the cap was dropped ({} bytes of stdout, {} of stderr)",
                r.dropped[0], r.dropped[1]
            ),
        )?;
    }
    if let Some(new) = committed {
        note_committed(&new, tag)?;
    }
    Ok(exit)
}

#[derive(Serialize)]
struct ForkJson<'a> {
    code: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    stdout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stderr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<StepOutcome>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fuel: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fork_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    committed: Option<SnapshotId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tag: Option<String>,
    /// A runtime fault: the fork could not be run or committed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct FanoutJson<'a> {
    snapshot: SnapshotId,
    forks: Vec<ForkJson<'a>>,
}

/// `arbor fanout SESSION --cmd C ...`: each step in its own fork of the
/// session, concurrently (one worker per core), as native fanout does; a
/// fork that cannot be run or committed is reported in its row and the
/// command exits 1.
pub fn fanout(
    ctx: &Ctx,
    id: &SnapshotId,
    commands: &[String],
    commit: bool,
    tag_prefix: Option<&str>,
    timeout_s: f64,
) -> Result<i32> {
    let tag_of = fork_tags(ctx.store(), tag_prefix, commands.len())?;
    let rt = runtime(ctx, Some(timeout_s))?;
    let base = rt.snapshot(id)?;
    // Untimed: load the memory image and the compiled guest once, so the
    // FORK column shows what each fork costs.
    drop(base.open()?);
    let bar = output::progress_bar(ctx.json, commands.len() as u64, "forks");
    let workers = arbor_runtime::parallel::default_workers(commands.len());
    let runs = arbor_runtime::parallel::map(commands, workers, |_, code| {
        let run = || -> Result<(f64, StepResult, Option<SnapshotId>)> {
            let t0 = std::time::Instant::now();
            let mut sb = base.open()?;
            let fork_us = t0.elapsed().as_secs_f64() * 1e6;
            let r: StepResult = sb.step(code)?;
            let committed = if commit {
                Some(*sb.snapshot()?.id())
            } else {
                None
            };
            Ok((fork_us, r, committed))
        };
        let r = run();
        bar.inc(1);
        r
    });
    let mut forks = Vec::with_capacity(commands.len());
    let mut failed = false;
    for (i, (code, run)) in commands.iter().zip(runs).enumerate() {
        let run = run.unwrap_or_else(|p| Err(anyhow::anyhow!("{p}")));
        let run = run.and_then(|(fork_us, r, committed)| {
            let tag = match (committed, tag_of(i)) {
                (Some(c), Some(t)) => {
                    ctx.store().set_tag(&t, &c)?;
                    Some(t)
                }
                _ => None,
            };
            Ok((fork_us, r, committed, tag))
        });
        forks.push(match run {
            Ok((fork_us, r, committed, tag)) => ForkJson {
                code,
                stdout: Some(r.stdout_text()),
                stderr: Some(r.stderr_text()),
                exit: Some(r.outcome.exit_status().shell_code()),
                outcome: Some(r.outcome),
                fuel: Some(r.fuel),
                fork_us: Some(fork_us),
                duration_ms: Some(r.duration.as_secs_f64() * 1e3),
                committed,
                tag,
                error: None,
            },
            Err(e) => {
                failed = true;
                ForkJson {
                    code,
                    stdout: None,
                    stderr: None,
                    exit: None,
                    outcome: None,
                    fuel: None,
                    fork_us: None,
                    duration_ms: None,
                    committed: None,
                    tag: None,
                    error: Some(crate::error::chain_message(&e)),
                }
            }
        });
    }
    bar.finish_and_clear();
    let result = FanoutJson {
        snapshot: *id,
        forks,
    };
    emit(ctx.json, &result, || {
        let mut errors = String::new();
        let rows: Vec<Vec<String>> = result
            .forks
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let stdout = f.stdout.as_deref().unwrap_or("");
                let out = if stdout.is_empty() {
                    first_line(f.stderr.as_deref().unwrap_or("").as_bytes())
                } else {
                    first_line(stdout.as_bytes())
                };
                if let Some(e) = &f.error {
                    errors.push_str(&format!("fork {} failed: {e}\n", i + 1));
                }
                vec![
                    clip(&one_line(f.code), 40),
                    f.outcome
                        .as_ref()
                        .map_or_else(|| "error".to_owned(), StepOutcome::label),
                    f.fork_us
                        .map_or_else(|| "-".to_owned(), |us| format!("{us:.0} µs")),
                    f.duration_ms
                        .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.2} ms")),
                    f.committed.map_or_else(|| "-".to_owned(), |c| c.short()),
                    clip(&out, 40),
                ]
            })
            .collect();
        let mut text = table(
            &[
                "STEP",
                "OUTCOME",
                "FORK",
                "STEP TIME",
                "COMMITTED",
                "OUTPUT",
            ],
            &rows,
        );
        text.push_str(&errors);
        text
    })?;
    Ok(if failed {
        crate::error::EXIT_FAILURE
    } else {
        0
    })
}

#[derive(Serialize)]
struct LogEntry {
    id: SnapshotId,
    parent: Option<SnapshotId>,
    created_at: u64,
    summary: String,
    actions: Vec<WasmAction>,
    outcomes: Vec<StepOutcome>,
    memory_hash: SnapshotId,
    memory_bytes: u64,
    tags: Vec<String>,
}

#[derive(Serialize)]
struct LogJson {
    snapshot: SnapshotId,
    backend: &'static str,
    chain: Vec<LogEntry>,
}

fn load(ctx: &Ctx, id: &SnapshotId) -> Result<(WasmRuntime, WasmSnapshot)> {
    let rt = runtime(ctx, None)?;
    let snap = rt.snapshot(id)?;
    Ok((rt, snap))
}

/// `arbor log SESSION`: the chain from the boot, one row per snapshot.
pub fn log(ctx: &Ctx, id: &SnapshotId) -> Result<i32> {
    let (rt, snap) = load(ctx, id)?;
    let mut tags = tags_by_snapshot(ctx.store())?;
    let chain: Vec<LogEntry> = rt
        .chain(&snap)?
        .into_iter()
        .map(|s| {
            let m = s.manifest();
            LogEntry {
                id: *s.id(),
                parent: m.parent,
                created_at: m.created_at,
                summary: summary(m),
                actions: m.actions.clone(),
                outcomes: m.observations.iter().map(|o| o.outcome.clone()).collect(),
                memory_hash: m.memory_hash,
                memory_bytes: m.memory_pages * 65536,
                tags: tags.remove(s.id()).unwrap_or_default(),
            }
        })
        .collect();
    let result = LogJson {
        snapshot: *id,
        backend: "wasm",
        chain,
    };
    emit(ctx.json, &result, || {
        let rows: Vec<Vec<String>> = result
            .chain
            .iter()
            .map(|e| {
                let mut action = e.summary.clone();
                if !e.tags.is_empty() {
                    action = format!("{action}  [tag {}]", e.tags.join(", "));
                }
                let outcomes = if e.outcomes.is_empty() {
                    "-".to_owned()
                } else {
                    e.outcomes
                        .iter()
                        .map(StepOutcome::label)
                        .collect::<Vec<_>>()
                        .join(",")
                };
                vec![
                    e.id.short(),
                    format_time(e.created_at),
                    e.memory_hash.short(),
                    outcomes,
                    clip(&action, 80),
                ]
            })
            .collect();
        table(
            &["SNAPSHOT", "CREATED (UTC)", "MEMORY", "OUTCOME", "ACTION"],
            &rows,
        )
    })?;
    Ok(0)
}

#[derive(Serialize)]
struct ShowJson<'a> {
    id: SnapshotId,
    backend: &'static str,
    tags: Vec<String>,
    manifest: &'a WasmManifest,
}

/// `arbor show SESSION`: the session record as JSON.
pub fn show(ctx: &Ctx, id: &SnapshotId) -> Result<i32> {
    let (_rt, snap) = load(ctx, id)?;
    let tags = tags_by_snapshot(ctx.store())?
        .remove(id)
        .unwrap_or_default();
    if ctx.json {
        output::json(&ShowJson {
            id: *id,
            backend: "wasm",
            tags,
            manifest: snap.manifest(),
        })?;
    } else {
        let mut text = serde_json::to_string_pretty(snap.manifest())?;
        text.push('\n');
        output::stdout_bytes(text.as_bytes())?;
    }
    Ok(0)
}

#[derive(Serialize)]
struct DiffJson {
    from: SnapshotId,
    to: SnapshotId,
    added: Vec<String>,
    modified: Vec<String>,
    deleted: Vec<String>,
    /// 64 KiB memory pages that differ (both sessions), else absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_pages_changed: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_bytes: Option<[u64; 2]>,
}

/// The workspace layers of a snapshot of either kind.
fn layers_of(
    ctx: &Ctx,
    rt: &WasmRuntime,
    id: &SnapshotId,
) -> Result<(Vec<arbor_runtime::store::LayerId>, Option<WasmSnapshot>)> {
    if ctx.store().is_wasm_snapshot(id) {
        let s = rt.snapshot(id)?;
        Ok((s.manifest().layers.clone(), Some(s)))
    } else {
        Ok((ctx.store().get_manifest(id)?.layers, None))
    }
}

/// `arbor diff A B` where either is a session: the workspace difference,
/// and with two sessions the number of memory pages that differ.
pub fn diff(ctx: &Ctx, a: &SnapshotId, b: &SnapshotId) -> Result<i32> {
    let rt = runtime(ctx, None)?;
    let (la, sa) = layers_of(ctx, &rt, a)?;
    let (lb, sb) = layers_of(ctx, &rt, b)?;
    let d = ctx.runtime.diff_layers(&la, &lb)?;
    let memory = match (sa, sb) {
        (Some(sa), Some(sb)) => {
            let (pa, pb) = (sa.page_hashes()?, sb.page_hashes()?);
            let n = pa.len().max(pb.len());
            let changed = (0..n).filter(|i| pa.get(*i) != pb.get(*i)).count();
            Some((
                changed,
                [
                    sa.manifest().memory_pages * 65536,
                    sb.manifest().memory_pages * 65536,
                ],
            ))
        }
        _ => None,
    };
    let result = DiffJson {
        from: *a,
        to: *b,
        added: d.added,
        modified: d.modified,
        deleted: d.deleted,
        memory_pages_changed: memory.map(|m| m.0),
        memory_bytes: memory.map(|m| m.1),
    };
    emit(ctx.json, &result, || {
        let mut text = crate::render::diff_lines(&result.added, &result.modified, &result.deleted);
        if text.is_empty() {
            text.push_str("no workspace differences\n");
        }
        if let (Some(n), Some([x, y])) = (result.memory_pages_changed, result.memory_bytes) {
            text.push_str(&format!(
                "memory: {n} of {} 64 KiB pages differ ({} → {} bytes)\n",
                x.max(y) / 65536,
                x,
                y
            ));
        }
        text
    })?;
    Ok(0)
}

/// `arbor checkout SESSION DIR`: materialise the session's workspace.
pub fn checkout(ctx: &Ctx, id: &SnapshotId, dir: &Path) -> Result<i32> {
    let rt = runtime(ctx, None)?;
    let snap = rt.snapshot(id)?;
    let report = ctx.runtime.checkout_layers(&snap.manifest().layers, dir)?;
    crate::commands::print_checkout(ctx, id, dir, report)
}

/// `arbor replay SESSION`: boot the guest again and re-run every step,
/// comparing every output digest and every snapshot's memory hash.
pub fn replay(ctx: &Ctx, id: &SnapshotId) -> Result<i32> {
    let (rt, snap) = load(ctx, id)?;
    let bar = output::progress_bar(ctx.json, 1, "replaying the session");
    let report = rt.replay(&snap);
    bar.finish_and_clear();
    let report = report?;
    #[derive(Serialize)]
    struct ReplayJson<'a> {
        snapshot: SnapshotId,
        backend: &'static str,
        #[serde(flatten)]
        report: &'a arbor_runtime::replay::ReplayReport,
    }
    let identical = report.identical;
    emit(
        ctx.json,
        &ReplayJson {
            snapshot: *id,
            backend: "wasm",
            report: &report,
        },
        || {
            let mut text = String::new();
            for step in report.steps.iter().filter(|s| !s.divergences.is_empty()) {
                let parts: Vec<String> = step.divergences.iter().map(|d| d.to_string()).collect();
                text.push_str(&format!(
                    "step {} (snapshot {}): DIVERGED: {}\n",
                    step.step,
                    step.recorded.short(),
                    parts.join("; ")
                ));
            }
            text.push_str(&format!(
                "{} step{} re-executed from the guest's boot; {} snapshot{} compared: {}\n",
                report.actions,
                crate::render::plural(report.actions),
                report.steps.len(),
                crate::render::plural(report.steps.len()),
                if identical {
                    "identical (bit-exact)"
                } else {
                    "DIVERGED"
                }
            ));
            text
        },
    )?;
    Ok(if identical { 0 } else { EXIT_FAILURE })
}
