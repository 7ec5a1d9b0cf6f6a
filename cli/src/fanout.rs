//! `arbor fanout`: run each command in its own fork of one snapshot,
//! concurrently, on a pool of at most `available_parallelism()` threads.
//!
//! Each fork is its own sandbox (its own helper process and private upper
//! layer over the snapshot's shared lower chain), so the threads share
//! nothing but the store. Progress goes to stderr and is hidden with
//! `--json` or when stderr is not a terminal.

use anyhow::{Context as _, Result, anyhow};
use arbor_runtime::store::{ExitStatus, SnapshotId};
use arbor_runtime::{ExecOptions, Observation, Snapshot};
use indicatif::ProgressBar;
use serde::Serialize;

use crate::commands::{Ctx, fork_tags, millis, timeout_ms};
use crate::error::{EXIT_FAILURE, chain_message};
use crate::output::emit;
use crate::render::{clip, first_line, format_duration_us, one_line, table};

/// What one fork produced.
#[derive(Debug)]
struct ForkRun {
    observation: Observation,
    committed: Option<SnapshotId>,
}

/// One fork in the `--json` result.
#[derive(Serialize)]
struct ForkJson {
    command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    stdout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stderr: Option<String>,
    /// Shell-style exit status (124 timeout, 125 disk limit, 128+N signal N).
    #[serde(skip_serializing_if = "Option::is_none")]
    exit: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<ExitStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    committed: Option<SnapshotId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tag: Option<String>,
    killed_background: Vec<String>,
    /// A runtime fault: the fork could not be run or committed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct FanoutJson {
    snapshot: SnapshotId,
    forks: Vec<ForkJson>,
}

/// Run the fanout; returns the exit status (1 if any fork failed to run).
pub fn fanout(
    ctx: &Ctx,
    snapshot: &str,
    commands: &[String],
    commit: bool,
    tag_prefix: Option<&str>,
    timeout_s: f64,
) -> Result<i32> {
    let base = ctx.runtime.resolve(snapshot)?;
    let tag_of = fork_tags(ctx.store(), tag_prefix, commands.len())?;
    let options = ExecOptions::with_timeout_ms(timeout_ms(timeout_s));
    let bar = crate::output::progress_bar(ctx.json, commands.len() as u64, "forks");
    let results = run_pool(&base, commands, &options, commit, &bar);
    bar.finish_and_clear();

    let mut forks = Vec::with_capacity(commands.len());
    let mut failed = false;
    for (i, (command, result)) in commands.iter().zip(results).enumerate() {
        let result = result.and_then(|run| {
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
        forks.push(match result {
            Ok((run, tag)) => {
                let obs = run.observation;
                ForkJson {
                    command: command.clone(),
                    stdout: Some(String::from_utf8_lossy(&obs.stdout).into_owned()),
                    stderr: Some(String::from_utf8_lossy(&obs.stderr).into_owned()),
                    exit: Some(obs.exit.shell_code()),
                    status: Some(obs.exit),
                    duration_ms: Some(millis(obs.duration_us)),
                    committed: run.committed,
                    tag,
                    killed_background: obs.killed_background,
                    error: None,
                }
            }
            Err(e) => {
                failed = true;
                ForkJson {
                    command: command.clone(),
                    stdout: None,
                    stderr: None,
                    exit: None,
                    status: None,
                    duration_ms: None,
                    committed: None,
                    tag: None,
                    killed_background: Vec::new(),
                    error: Some(chain_message(&e)),
                }
            }
        });
    }
    let result = FanoutJson {
        snapshot: *base.id(),
        forks,
    };
    emit(ctx.json, &result, || render(&result, commit))?;
    Ok(if failed { EXIT_FAILURE } else { 0 })
}

/// The text table (and any fork errors below it).
fn render(result: &FanoutJson, commit: bool) -> String {
    let mut headers = vec!["#", "COMMAND", "EXIT", "TIME"];
    if commit {
        headers.push("SNAPSHOT");
    }
    headers.push("STDOUT (FIRST LINE)");
    let mut errors = String::new();
    let rows: Vec<Vec<String>> = result
        .forks
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut row = vec![(i + 1).to_string(), clip(&one_line(&f.command), 48)];
            row.push(
                f.status
                    .as_ref()
                    .map_or_else(|| "error".to_owned(), ExitStatus::label),
            );
            row.push(f.duration_ms.map_or_else(
                || "-".to_owned(),
                |ms| format_duration_us((ms * 1000.0) as u64),
            ));
            if commit {
                let id = f.committed.map_or_else(|| "-".to_owned(), |id| id.short());
                row.push(match &f.tag {
                    Some(tag) => format!("{id} ({tag})"),
                    None => id,
                });
            }
            row.push(clip(
                &first_line(f.stdout.as_deref().unwrap_or("").as_bytes()),
                60,
            ));
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
        crate::render::plural(rows.len())
    );
    text.push_str(&table(&headers, &rows));
    text.push_str(&errors);
    text
}

/// Run every command in its own fork on at most `available_parallelism()`
/// threads; results in command order.
fn run_pool(
    base: &Snapshot,
    commands: &[String],
    options: &ExecOptions,
    commit: bool,
    bar: &ProgressBar,
) -> Vec<Result<ForkRun>> {
    let workers = arbor_runtime::parallel::default_workers(commands.len());
    arbor_runtime::parallel::map(commands, workers, |_, command| {
        let run = run_fork(base, command, options, commit);
        bar.inc(1);
        run
    })
    .into_iter()
    .map(|r| r.unwrap_or_else(|p| Err(anyhow!("{p}"))))
    .collect()
}

/// Open a fork of `base`, run `command`, and snapshot the result if asked.
fn run_fork(
    base: &Snapshot,
    command: &str,
    options: &ExecOptions,
    commit: bool,
) -> Result<ForkRun> {
    let mut sandbox = base.open().context("open a fork")?;
    let observation = sandbox.exec(command, options)?;
    let committed = if commit {
        Some(*sandbox.snapshot().context("commit the fork")?.id())
    } else {
        None
    };
    Ok(ForkRun {
        observation,
        committed,
    })
}
