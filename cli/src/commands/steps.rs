//! Running steps: `import` (a directory, or a WebAssembly guest booted into
//! a session), `exec` (one step in a fork) and `fanout` (one step in each of
//! N forks, concurrently). A step is a shell command on a native snapshot
//! and Python source on a session; the runtime's handle runs either.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use arbor_runtime::state::SessionImport;
use arbor_runtime::store::{ExitStatus, SnapshotId};
use arbor_runtime::{AnySnapshot, Backend, ExecOptions, Outcome, StepResult};
use serde::Serialize;

use super::{Ctx, check_tag_name, fork_tags, note_committed, timeout_ms};
use crate::error::{EXIT_FAILURE, UsageError, chain_message};
use crate::output::{self, emit, note};
use crate::render::{clip, first_line, format_duration_us, one_line, plural, table};

#[derive(Serialize)]
struct ImportJson<'a> {
    snapshot: SnapshotId,
    backend: Backend,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a Path>,
    #[serde(skip_serializing_if = "Option::is_none")]
    guest: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    guest_module: Option<SnapshotId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    workspace: Option<&'a Path>,
    tag: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<arbor_runtime::store::ObjectId>,
}

/// `arbor import DIR` (a native root snapshot) or `arbor import --wasm
/// GUEST [DIR]` (boot the guest, with DIR as its initial `/workspace`, and
/// list the live session as a root snapshot).
pub(super) fn import(
    ctx: &Ctx,
    dir: Option<&Path>,
    guest: Option<&str>,
    tag: Option<&str>,
    seed: Option<&str>,
    image: Option<(&str, bool)>,
) -> Result<i32> {
    let at_workdir = image.is_some_and(|(_, w)| w);
    let image = image.map(|(i, _)| ctx.runtime.image(i)).transpose()?;
    if let Some(t) = tag {
        check_tag_name(ctx.store(), t)?;
    }
    let snapshot = match guest {
        Some(guest) => {
            let bar =
                output::progress_bar(ctx.json, 1, "booting the guest (compiled once per machine)");
            let root = ctx.runtime.import_session(&SessionImport {
                guest,
                workspace: dir,
                seed,
            });
            bar.finish_and_clear();
            root?
        }
        None => {
            let dir = dir.ok_or_else(|| UsageError("import needs a directory".into()))?;
            AnySnapshot::from(
                ctx.runtime
                    .import_with(dir, None, image.as_ref(), at_workdir)?,
            )
        }
    };
    let id = *snapshot.id();
    if let Some(t) = tag {
        ctx.store().set_tag(t, &id)?;
    }
    let session = snapshot.session_info();
    emit(
        ctx.json,
        &ImportJson {
            snapshot: id,
            backend: snapshot.backend(),
            source: guest.is_none().then_some(dir).flatten(),
            guest,
            guest_module: session.map(|s| s.guest_module),
            workspace: guest.and(dir),
            tag,
            memory_bytes: session.map(|s| s.memory_bytes),
            image: image.as_ref().map(|i| i.id),
        },
        || format!("{id}\n"),
    )?;
    Ok(0)
}

/// One step's result in `--json` (`exec`, and each fork of `fanout`).
#[derive(Serialize)]
struct StepJson {
    stdout: String,
    stderr: String,
    /// Shell-style exit status (124 timeout, 125 disk/memory limit, 128+N signal N).
    exit: i32,
    /// The structured status in the native vocabulary.
    status: ExitStatus,
    /// How the step ended in its backend's own vocabulary.
    outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    fuel: Option<u64>,
    duration_ms: f64,
    killed_background: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    egress: Vec<arbor_runtime::sandbox::egress::EgressEvent>,
}

impl From<StepResult> for StepJson {
    fn from(r: StepResult) -> Self {
        Self {
            stdout: String::from_utf8_lossy(&r.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&r.stderr).into_owned(),
            exit: r.outcome.shell_code(),
            status: r.outcome.exit_status(),
            fuel: r.fuel,
            duration_ms: r.duration.as_secs_f64() * 1e3,
            killed_background: r.killed_background,
            egress: r.egress,
            outcome: r.outcome,
        }
    }
}

/// The `--json` result of `arbor exec`.
#[derive(Serialize)]
struct ExecJson {
    /// The snapshot the fork was taken from.
    snapshot: SnapshotId,
    backend: Backend,
    command: String,
    #[serde(flatten)]
    step: StepJson,
    #[serde(skip_serializing_if = "Option::is_none")]
    committed: Option<SnapshotId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tag: Option<String>,
}

/// The notes a step deserves on stderr: why it stopped, output dropped
/// past a cap, background processes it left that were ended.
fn step_notes(r: &StepResult, timeout: Duration) -> Result<()> {
    if let Some(text) = r.outcome.note(timeout) {
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
    if !r.killed_background.is_empty() {
        let n = r.killed_background.len();
        note(
            false,
            &format!(
                "ended {n} background process{} still running: {}",
                if n == 1 { "" } else { "es" },
                r.killed_background.join("; ")
            ),
        )?;
    }
    Ok(())
}

/// `arbor exec SNAP -- WORDS`: one step in a fork of SNAP (committed as a
/// new snapshot with `--commit`).
pub(super) fn exec(
    ctx: &Ctx,
    snapshot: &str,
    commit: bool,
    tag: Option<&str>,
    timeout_s: f64,
    allow_hosts: &[String],
    words: &[String],
) -> Result<i32> {
    if words.join(" ").trim().is_empty() {
        return Err(UsageError("the command to run is empty".into()).into());
    }
    let base = ctx.runtime.resolve_any(snapshot)?;
    if let Some(t) = tag {
        check_tag_name(ctx.store(), t)?;
    }
    let command = base.backend().step_text(words);
    let options = ExecOptions::with_timeout_ms(timeout_ms(timeout_s));
    let mut sandbox = base.open()?;
    if !allow_hosts.is_empty() {
        sandbox
            .native_mut()
            .ok_or_else(|| {
                UsageError("a WebAssembly session has no network (--allow-host)".into())
            })?
            .allow_egress(allow_hosts)?;
    }
    let result = sandbox.run(&command, &options)?;
    let committed = if commit {
        let new = sandbox.snapshot()?;
        if let Some(t) = tag {
            ctx.store().set_tag(t, new.id())?;
        }
        Some(*new.id())
    } else {
        None
    };
    drop(sandbox);
    let code = result.outcome.shell_code();
    if ctx.json {
        output::json(&ExecJson {
            snapshot: *base.id(),
            backend: base.backend(),
            command,
            step: result.into(),
            committed,
            tag: committed.and(tag.map(str::to_owned)),
        })?;
        return Ok(code);
    }
    output::stdout_bytes(&result.stdout)?;
    output::stderr_bytes(&result.stderr)?;
    for e in &result.egress {
        note(
            false,
            &format!(
                "egress: {} {}:{} {}",
                e.method,
                e.host,
                e.port,
                match &e.reason {
                    Some(r) if !e.allowed => format!("refused ({r})"),
                    Some(r) => format!("allowed, failed ({r})"),
                    None => format!("allowed ({} B out, {} B in)", e.bytes_out, e.bytes_in),
                }
            ),
        )?;
    }
    step_notes(&result, Duration::from_secs_f64(timeout_s))?;
    if let Some(id) = committed {
        note_committed(&id, tag)?;
    }
    Ok(code)
}

/// What one fork of a fanout produced.
struct ForkRun {
    fork_us: f64,
    result: StepResult,
    committed: Option<SnapshotId>,
}

/// One fork in the `--json` result of `fanout`.
#[derive(Serialize)]
struct ForkJson {
    command: String,
    #[serde(flatten)]
    step: Option<StepJson>,
    /// Time to open the fork, in microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    fork_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    committed: Option<SnapshotId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tag: Option<String>,
    /// A runtime fault: the fork could not be opened, run or committed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct FanoutJson {
    snapshot: SnapshotId,
    backend: Backend,
    forks: Vec<ForkJson>,
}

/// `arbor fanout SNAP --cmd C ...`: each step in its own fork of SNAP,
/// concurrently on at most one worker per core. Each fork is its own
/// sandbox (native: its own helper and private upper layer over the shared
/// lower chain; a session: its own copy-on-write memory), so the workers
/// share nothing but the store. A fork that cannot be opened, run or
/// committed is reported in its row and the command exits 1.
pub(super) fn fanout(
    ctx: &Ctx,
    snapshot: &str,
    commands: &[String],
    commit: bool,
    tag_prefix: Option<&str>,
    timeout_s: f64,
) -> Result<i32> {
    let base = ctx.runtime.resolve_any(snapshot)?;
    let tag_of = fork_tags(ctx.store(), tag_prefix, commands.len())?;
    let options = ExecOptions::with_timeout_ms(timeout_ms(timeout_s));
    // Untimed: what every fork shares is loaded once, so the FORK column
    // shows what each fork costs.
    base.warm()?;
    let bar = output::progress_bar(ctx.json, commands.len() as u64, "forks");
    let workers = arbor_runtime::parallel::default_workers(commands.len());
    let runs = arbor_runtime::parallel::map(commands, workers, |_, command| {
        let run = run_fork(&base, command, &options, commit);
        bar.inc(1);
        run
    });
    bar.finish_and_clear();

    let mut forks = Vec::with_capacity(commands.len());
    let mut failed = false;
    for (i, (command, run)) in commands.iter().zip(runs).enumerate() {
        let run = run.unwrap_or_else(|p| Err(anyhow!("{p}")));
        let run = run.and_then(|run| {
            let tag = match (run.committed, tag_of(i)) {
                (Some(id), Some(tag)) => {
                    ctx.store()
                        .set_tag(&tag, &id)
                        .with_context(|| format!("tag fork {} as {tag}", i + 1))?;
                    Some(tag)
                }
                _ => None,
            };
            Ok((run, tag))
        });
        forks.push(match run {
            Ok((run, tag)) => ForkJson {
                command: command.clone(),
                step: Some(run.result.into()),
                fork_us: Some(run.fork_us),
                committed: run.committed,
                tag,
                error: None,
            },
            Err(e) => {
                failed = true;
                ForkJson {
                    command: command.clone(),
                    step: None,
                    fork_us: None,
                    committed: None,
                    tag: None,
                    error: Some(chain_message(&e)),
                }
            }
        });
    }
    let result = FanoutJson {
        snapshot: *base.id(),
        backend: base.backend(),
        forks,
    };
    emit(ctx.json, &result, || render_fanout(&result, commit))?;
    Ok(if failed { EXIT_FAILURE } else { 0 })
}

/// Open a fork of `base`, run `command`, and snapshot the result if asked.
fn run_fork(
    base: &AnySnapshot,
    command: &str,
    options: &ExecOptions,
    commit: bool,
) -> Result<ForkRun> {
    let t0 = Instant::now();
    let mut sandbox = base.open().context("open a fork")?;
    let fork_us = t0.elapsed().as_secs_f64() * 1e6;
    let result = sandbox.run(command, options)?;
    let committed = if commit {
        Some(*sandbox.snapshot().context("commit the fork")?.id())
    } else {
        None
    };
    Ok(ForkRun {
        fork_us,
        result,
        committed,
    })
}

/// The fanout table (and any fork errors below it).
fn render_fanout(result: &FanoutJson, commit: bool) -> String {
    let mut headers = vec!["#", "COMMAND", "EXIT", "FORK", "TIME"];
    if commit {
        headers.push("SNAPSHOT");
    }
    headers.push("OUTPUT (FIRST LINE)");
    let mut errors = String::new();
    let dash = || "-".to_owned();
    let rows: Vec<Vec<String>> = result
        .forks
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut row = vec![(i + 1).to_string(), clip(&one_line(&f.command), 48)];
            row.push(
                f.step
                    .as_ref()
                    .map_or_else(|| "error".to_owned(), |s| s.outcome.label()),
            );
            row.push(
                f.fork_us
                    .map_or_else(dash, |us| format_duration_us(us as u64)),
            );
            row.push(f.step.as_ref().map_or_else(dash, |s| {
                format_duration_us((s.duration_ms * 1000.0) as u64)
            }));
            if commit {
                let id = f.committed.map_or_else(dash, |id| id.short());
                row.push(match &f.tag {
                    Some(tag) => format!("{id} ({tag})"),
                    None => id,
                });
            }
            let out = f.step.as_ref().map_or_else(String::new, |s| {
                if s.stdout.is_empty() {
                    first_line(s.stderr.as_bytes())
                } else {
                    first_line(s.stdout.as_bytes())
                }
            });
            row.push(clip(&out, 60));
            if let Some(e) = &f.error {
                errors.push_str(&format!("fork {} failed: {e}\n", i + 1));
            }
            row
        })
        .collect();
    let mut text = format!(
        "forked {} {} way{}\n",
        result.snapshot.short(),
        rows.len(),
        plural(rows.len())
    );
    text.push_str(&table(&headers, &rows));
    text.push_str(&errors);
    text
}
