//! Reading states: `log`, `show`, `diff`, `checkout` and `replay`, one
//! renderer each for both backends. A session's rows carry its memory
//! (hash, size, pages that differ) beside the workspace.

use std::path::Path;

use anyhow::Result;
use arbor_runtime::Backend;
use arbor_runtime::layer::MaterializeReport;
use arbor_runtime::replay::{ReplayOptions, ReplayReport};
use arbor_runtime::state::{AnyManifest, Record, StateDiff};
use arbor_runtime::store::SnapshotId;
use serde::Serialize;

use super::{Ctx, tags_by_snapshot};
use crate::error::EXIT_FAILURE;
use crate::output::{self, emit};
use crate::render::{clip, diff_lines, format_bytes, format_time, plural, table};

/// One snapshot of `arbor log`.
#[derive(Serialize)]
struct LogEntry<'a> {
    id: SnapshotId,
    parent: Option<SnapshotId>,
    created_at: u64,
    summary: String,
    /// The label of each recorded step's outcome.
    exits: Vec<String>,
    tags: Vec<String>,
    /// The backend's own record: native action and observation digests, or
    /// a session's steps, outcomes and memory.
    #[serde(flatten)]
    record: Record<'a>,
}

#[derive(Serialize)]
struct LogJson<'a> {
    snapshot: SnapshotId,
    backend: Backend,
    chain: Vec<LogEntry<'a>>,
}

/// `arbor log SNAP`: the chain from the root, one row per snapshot.
pub(super) fn log(ctx: &Ctx, snapshot: &str) -> Result<i32> {
    let snapshot = ctx.runtime.resolve_any(snapshot)?;
    let mut tags = tags_by_snapshot(ctx.store())?;
    let chain = snapshot.chain()?;
    let entries: Vec<LogEntry<'_>> = chain
        .iter()
        .map(|s| LogEntry {
            id: *s.id(),
            parent: s.parent(),
            created_at: s.created_at(),
            summary: s.summary(),
            exits: s.outcomes().iter().map(|o| o.label()).collect(),
            tags: tags.remove(s.id()).unwrap_or_default(),
            record: s.record(),
        })
        .collect();
    let memory: Vec<Option<String>> = chain
        .iter()
        .map(|s| s.session_info().map(|m| m.memory_hash.short()))
        .collect();
    let result = LogJson {
        snapshot: *snapshot.id(),
        backend: snapshot.backend(),
        chain: entries,
    };
    emit(ctx.json, &result, || {
        let sessions = memory.iter().any(Option::is_some);
        let rows: Vec<Vec<String>> = result
            .chain
            .iter()
            .zip(&memory)
            .map(|(e, memory)| {
                let mut action = e.summary.clone();
                if !e.tags.is_empty() {
                    action = format!("{action}  [tag {}]", e.tags.join(", "));
                }
                if let Record::Native {
                    killed_background, ..
                } = &e.record
                    && !killed_background.is_empty()
                {
                    action = format!(
                        "{action}  (ended background: {})",
                        killed_background.join("; ")
                    );
                }
                let exits = if e.exits.is_empty() {
                    "-".to_owned()
                } else {
                    e.exits.join(",")
                };
                let mut row = vec![e.id.short(), format_time(e.created_at)];
                if sessions {
                    row.push(memory.clone().unwrap_or_else(|| "-".to_owned()));
                }
                row.extend([exits, clip(&action, 80)]);
                row
            })
            .collect();
        let mut headers = vec!["SNAPSHOT", "CREATED (UTC)"];
        if sessions {
            headers.push("MEMORY");
        }
        headers.extend(["EXIT", "ACTION"]);
        table(&headers, &rows)
    })?;
    Ok(0)
}

#[derive(Serialize)]
struct ShowJson<'a> {
    id: SnapshotId,
    backend: Backend,
    tags: Vec<String>,
    manifest: AnyManifest<'a>,
}

/// `arbor show SNAP`: the stored record (manifest) as JSON.
pub(super) fn show(ctx: &Ctx, snapshot: &str) -> Result<i32> {
    let snapshot = ctx.runtime.resolve_any(snapshot)?;
    let tags = tags_by_snapshot(ctx.store())?
        .remove(snapshot.id())
        .unwrap_or_default();
    if ctx.json {
        output::json(&ShowJson {
            id: *snapshot.id(),
            backend: snapshot.backend(),
            tags,
            manifest: snapshot.manifest(),
        })?;
    } else {
        let mut text = serde_json::to_string_pretty(&snapshot.manifest())?;
        text.push('\n');
        output::stdout_bytes(text.as_bytes())?;
    }
    Ok(0)
}

#[derive(Serialize)]
struct DiffJson {
    from: SnapshotId,
    to: SnapshotId,
    #[serde(flatten)]
    diff: StateDiff,
}

/// `arbor diff A B`: workspace paths added, modified and deleted (either
/// side of either backend), and with two sessions the memory pages that
/// differ.
pub(super) fn diff(ctx: &Ctx, a: &str, b: &str) -> Result<i32> {
    let a = ctx.runtime.resolve_any(a)?;
    let b = ctx.runtime.resolve_any(b)?;
    let result = DiffJson {
        from: *a.id(),
        to: *b.id(),
        diff: a.diff(&b)?,
    };
    emit(ctx.json, &result, || {
        let w = &result.diff.workspace;
        let mut text = diff_lines(&w.added, &w.modified, &w.deleted);
        match result.diff.memory {
            None if text.is_empty() => text.push_str("no differences\n"),
            None => {}
            Some(m) => {
                if text.is_empty() {
                    text.push_str("no workspace differences\n");
                }
                let [x, y] = m.bytes;
                text.push_str(&format!(
                    "memory: {} of {} 64 KiB pages differ ({x} → {y} bytes)\n",
                    m.pages_changed,
                    x.max(y) / 65536,
                ));
            }
        }
        text
    })?;
    Ok(0)
}

#[derive(Serialize)]
struct CheckoutJson<'a> {
    snapshot: SnapshotId,
    dir: &'a Path,
    report: MaterializeReport,
}

/// `arbor checkout SNAP DIR`: materialise the workspace into DIR.
pub(super) fn checkout(ctx: &Ctx, snapshot: &str, dir: &Path) -> Result<i32> {
    let snapshot = ctx.runtime.resolve_any(snapshot)?;
    let report = snapshot.checkout(dir)?;
    print_checkout(ctx, snapshot.id(), dir, report)
}

/// Print what a checkout of `id` into `dir` materialised.
fn print_checkout(
    ctx: &Ctx,
    id: &SnapshotId,
    dir: &Path,
    report: MaterializeReport,
) -> Result<i32> {
    emit(
        ctx.json,
        &CheckoutJson {
            snapshot: *id,
            dir,
            report,
        },
        || {
            let mut text = format!(
                "checked out {} into {}: {} file{}, {} director{}, {} symlink{}, {}\n",
                id.short(),
                dir.display(),
                report.files,
                plural(report.files as usize),
                report.dirs,
                if report.dirs == 1 { "y" } else { "ies" },
                report.symlinks,
                plural(report.symlinks as usize),
                format_bytes(report.bytes),
            );
            if report.specials_skipped > 0 {
                text.push_str(&format!(
                    "skipped {} device node(s) or socket(s)\n",
                    report.specials_skipped
                ));
            }
            text
        },
    )?;
    Ok(0)
}

/// `arbor replay SNAP`: re-execute the chain from its root and compare
/// every recorded observation (and a session's every memory image); exit 1
/// when anything diverged. `--explain` says what is compared.
pub(super) fn replay(
    ctx: &Ctx,
    snapshot: Option<&str>,
    strict: bool,
    explain: bool,
) -> Result<i32> {
    if explain {
        let text = arbor_runtime::replay::explain();
        let excluded: Vec<&str> = arbor_runtime::digest::DIGEST_EXCLUDED
            .iter()
            .map(|(path, _)| *path)
            .collect();
        #[derive(Serialize)]
        struct Explain<'a> {
            excluded_from_digests: Vec<&'a str>,
            fixed_env: Vec<(String, String)>,
            text: &'a str,
        }
        let value = Explain {
            excluded_from_digests: excluded,
            fixed_env: arbor_runtime::sandbox::env::fixed_env(),
            text: &text,
        };
        emit(ctx.json, &value, || text.clone())?;
        return Ok(0);
    }
    let Some(snapshot) = snapshot else {
        anyhow::bail!("replay needs a snapshot (or --explain)");
    };
    let target = ctx.runtime.resolve_any(snapshot)?;
    let bar = output::progress_bar(ctx.json, 1, "replaying the chain");
    let report = target.replay(ReplayOptions { strict });
    bar.finish_and_clear();
    let report = report?;
    #[derive(Serialize)]
    struct ReplayJson<'a> {
        backend: Backend,
        #[serde(flatten)]
        report: &'a ReplayReport,
    }
    emit(
        ctx.json,
        &ReplayJson {
            backend: target.backend(),
            report: &report,
        },
        || render_replay(&report),
    )?;
    Ok(if report.identical { 0 } else { EXIT_FAILURE })
}

fn render_replay(report: &arbor_runtime::replay::ReplayReport) -> String {
    use arbor_runtime::replay::Divergence;
    let mut text = String::new();
    for step in &report.steps {
        let status = if step.divergences.is_empty() {
            "identical"
        } else {
            "DIVERGED"
        };
        text.push_str(&format!(
            "step {:>3}  {}  {:<9}  {}\n",
            step.step,
            step.recorded.short(),
            status,
            step.actions.join("; ")
        ));
        for d in &step.divergences {
            match d {
                Divergence::Stdout { action, diff } | Divergence::Stderr { action, diff } => {
                    let part = if matches!(d, Divergence::Stdout { .. }) { "stdout" } else { "stderr" };
                    text.push_str(&format!("          action {}: {part} differs\n", action + 1));
                    for line in diff {
                        text.push_str(&format!("            {line}\n"));
                    }
                }
                Divergence::Exit { action, recorded, replayed } => text.push_str(&format!(
                    "          action {}: exit status differs: recorded {recorded:?}, replayed {replayed:?}\n",
                    action + 1
                )),
                Divergence::Filesystem { action, paths } => {
                    text.push_str(&format!("          action {}: filesystem differs\n", action + 1));
                    for p in paths.iter().take(10) {
                        text.push_str(&format!("            {p}\n"));
                    }
                    if paths.len() > 10 {
                        text.push_str(&format!("            … and {} more\n", paths.len() - 10));
                    }
                }
                Divergence::ObservationCount { recorded, replayed } => text.push_str(&format!(
                    "          {recorded} observations recorded, {replayed} replayed\n"
                )),
                // A session's memory, globals, WASI state, workspace, fuel
                // and outcome: one line each.
                other => text.push_str(&format!("          {other}\n")),
            }
        }
    }
    match report.first_divergence() {
        None => text.push_str(&format!(
            "replay: identical ({} steps, {} actions, {} ms)\n",
            report.steps.len(),
            report.actions,
            report.duration_ms
        )),
        Some(first) => {
            let n = report
                .steps
                .iter()
                .filter(|s| !s.divergences.is_empty())
                .count();
            text.push_str(&format!(
                "replay: divergent: first at step {} ({} of {} steps divergent{})\n",
                first.step,
                n,
                report.steps.len(),
                if report.stopped_early {
                    "; stopped there (--strict)"
                } else {
                    ""
                }
            ));
        }
    }
    text
}
