//! The commands: each resolves its snapshot arguments, calls the runtime,
//! prints its result (text, or one JSON object with `--json`) and returns
//! the exit status. `fanout` lives in [`crate::fanout`].

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use arbor_runtime::layer::MaterializeReport;
use arbor_runtime::store::{
    Action, ExitStatus, FsckProblem, Manifest, ObservationDigest, SnapshotId, Store,
};
use arbor_runtime::{ExecOptions, Runtime};
use serde::Serialize;

use crate::args::{Command, CreditArgs, CreditCommand};
use crate::error::{EXIT_FAILURE, UsageError};
use crate::output::{self, emit, note};
use crate::render::{
    action_summary, diff_lines, format_bytes, format_time, one_line, plural, table,
};

/// What every command works with.
#[derive(Debug)]
pub struct Ctx {
    /// The runtime on the chosen store.
    pub runtime: Runtime,
    /// `--json` was given.
    pub json: bool,
}

impl Ctx {
    /// The store.
    pub fn store(&self) -> &Store {
        self.runtime.store()
    }
}

/// Run one command; returns the process exit status.
pub fn run(ctx: &Ctx, command: Command) -> Result<i32> {
    match command {
        Command::Import {
            dir,
            tag,
            wasm,
            seed,
        } => match wasm {
            Some(guest) => {
                import_wasm(ctx, &guest, dir.as_deref(), tag.as_deref(), seed.as_deref())
            }
            None => {
                let dir = dir.ok_or_else(|| UsageError("import needs a directory".into()))?;
                import(ctx, &dir, tag.as_deref())
            }
        },
        Command::Exec {
            snapshot,
            commit,
            tag,
            timeout,
            command,
        } => exec(ctx, &snapshot, commit, tag.as_deref(), timeout, &command),
        Command::Fanout {
            snapshot,
            commands,
            commit,
            tag_prefix,
            timeout,
        } => {
            #[cfg(feature = "wasm")]
            if let Some(id) = session(ctx, &snapshot)? {
                return crate::wasm::fanout(
                    ctx,
                    &id,
                    &commands,
                    commit,
                    tag_prefix.as_deref(),
                    timeout,
                );
            }
            crate::fanout::fanout(
                ctx,
                &snapshot,
                &commands,
                commit,
                tag_prefix.as_deref(),
                timeout,
            )
        }
        Command::Diff { a, b } => diff(ctx, &a, &b),
        Command::Log { snapshot } => log(ctx, &snapshot),
        Command::Replay {
            snapshot,
            strict,
            explain,
        } => replay(ctx, snapshot.as_deref(), strict, explain),
        Command::Checkout { snapshot, dir } => checkout(ctx, &snapshot, &dir),
        Command::Ls => ls(ctx),
        Command::Show { snapshot } => show(ctx, &snapshot),
        Command::Tag {
            snapshot,
            name,
            delete,
        } => tag(ctx, snapshot.as_deref(), name.as_deref(), delete.as_deref()),
        Command::Rm { snapshot } => rm(ctx, &snapshot),
        Command::Gc => gc(ctx),
        Command::Fsck => fsck(ctx),
        Command::Task { tasks, command } => crate::task::run(ctx, tasks.as_deref(), command),
        Command::Rollout(args) => crate::rollout::rollout(ctx, &args),
        // `arbor` hands these to `arbor-train` before it opens the store.
        Command::Train(_) => crate::entry::exec_trainer(),
        Command::Credit(args) => credit(ctx, *args),
    }
}

/// `arbor credit TREE [...]` or `arbor credit eval [...]`.
fn credit(ctx: &Ctx, args: CreditArgs) -> Result<i32> {
    args.check().map_err(UsageError)?;
    if let Some(CreditCommand::Eval(_)) = args.command {
        return crate::entry::exec_trainer();
    }
    let tree = args
        .tree
        .ok_or_else(|| UsageError("credit needs a trees file (or `credit eval`)".into()))?;
    crate::rollout::credit(
        ctx,
        &tree,
        args.export.as_deref(),
        args.pairs.as_deref(),
        args.plot.as_deref(),
        args.margin,
        args.gamma,
    )
}

/// Fail early, before any work, if `name` cannot be a tag.
pub fn check_tag_name(store: &Store, name: &str) -> Result<()> {
    store.get_tag(name)?;
    Ok(())
}

/// The tag of fork `i` of `n` (`PREFIX-1`, `PREFIX-2`, ...) when the forks
/// are tagged; the last name is checked first, so a bad prefix fails
/// before any fork runs.
pub fn fork_tags<'a>(
    store: &Store,
    prefix: Option<&'a str>,
    n: usize,
) -> Result<impl Fn(usize) -> Option<String> + 'a> {
    let tag_of = move |i: usize| prefix.map(|p| format!("{p}-{}", i + 1));
    if let Some(last) = tag_of(n.saturating_sub(1)) {
        check_tag_name(store, &last)?;
    }
    Ok(tag_of)
}

/// Say a step's state was committed (and tagged).
pub fn note_committed(id: &SnapshotId, tag: Option<&str>) -> Result<()> {
    let tagged = tag.map(|t| format!(" (tag {t})")).unwrap_or_default();
    note(false, &format!("committed snapshot {id}{tagged}"))
}

/// Milliseconds from microseconds, for JSON.
pub fn millis(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Milliseconds of a timeout given in seconds.
pub fn timeout_ms(seconds: f64) -> u64 {
    (seconds * 1000.0).round().max(1.0) as u64
}

/// Tags by snapshot.
pub fn tags_by_snapshot(store: &Store) -> Result<BTreeMap<SnapshotId, Vec<String>>> {
    let mut out: BTreeMap<SnapshotId, Vec<String>> = BTreeMap::new();
    for (name, id) in store.tags()? {
        out.entry(id).or_default().push(name);
    }
    Ok(out)
}

#[derive(Serialize)]
struct ImportJson<'a> {
    snapshot: SnapshotId,
    source: &'a Path,
    tag: Option<&'a str>,
}

/// `arbor import --wasm`, or the error that says this build has no
/// WebAssembly backend.
fn import_wasm(
    ctx: &Ctx,
    guest: &str,
    dir: Option<&Path>,
    tag: Option<&str>,
    seed: Option<&str>,
) -> Result<i32> {
    #[cfg(feature = "wasm")]
    {
        crate::wasm::import(ctx, guest, dir, tag, seed)
    }
    #[cfg(not(feature = "wasm"))]
    {
        let _ = (ctx, guest, dir, tag, seed);
        Err(UsageError(
            "this arbor was built without the wasm feature (WebAssembly sessions); rebuild with --features wasm".into(),
        )
        .into())
    }
}

/// The session snapshot `what` names, when it names one (and this build
/// has the WebAssembly backend).
#[cfg(feature = "wasm")]
fn session(ctx: &Ctx, what: &str) -> Result<Option<SnapshotId>> {
    crate::wasm::resolve(ctx, what)
}

fn import(ctx: &Ctx, dir: &Path, tag: Option<&str>) -> Result<i32> {
    if let Some(t) = tag {
        check_tag_name(ctx.store(), t)?;
    }
    let snapshot = ctx.runtime.import(dir, tag)?;
    let id = *snapshot.id();
    emit(
        ctx.json,
        &ImportJson {
            snapshot: id,
            source: dir,
            tag,
        },
        || format!("{id}\n"),
    )?;
    Ok(0)
}

/// The `--json` result of `arbor exec`.
#[derive(Serialize)]
struct ExecJson {
    /// The snapshot the fork was taken from.
    snapshot: SnapshotId,
    command: String,
    stdout: String,
    stderr: String,
    /// Shell-style exit status (124 timeout, 125 disk limit, 128+N signal N).
    exit: i32,
    /// The structured status.
    status: ExitStatus,
    duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    committed: Option<SnapshotId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tag: Option<String>,
    killed_background: Vec<String>,
}

/// The shell command line `arbor exec` runs: one word is a shell string as
/// given (`arbor exec S -- 'make && make test'`); several are an argv, each
/// word quoted so that the shell passes it through unchanged, as
/// `docker exec` does (`arbor exec S -- printf '%s' 'a b'` prints `a b`).
pub fn command_line(words: &[String]) -> String {
    if let [one] = words {
        return one.clone();
    }
    words
        .iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
            if plain {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn exec(
    ctx: &Ctx,
    snapshot: &str,
    commit: bool,
    tag: Option<&str>,
    timeout_s: f64,
    words: &[String],
) -> Result<i32> {
    if words.join(" ").trim().is_empty() {
        return Err(UsageError("the command to run is empty".into()).into());
    }
    #[cfg(feature = "wasm")]
    if let Some(id) = session(ctx, snapshot)? {
        // A session runs Python source: the words are one program text.
        return crate::wasm::exec(ctx, &id, commit, tag, timeout_s, &words.join(" "));
    }
    let command = command_line(words);
    let base = ctx.runtime.resolve(snapshot)?;
    if let Some(t) = tag {
        check_tag_name(ctx.store(), t)?;
    }
    let mut sandbox = base.open()?;
    let obs = sandbox.exec(
        &command,
        &ExecOptions::with_timeout_ms(timeout_ms(timeout_s)),
    )?;
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
    let code = obs.exit.shell_code();
    if ctx.json {
        output::json(&ExecJson {
            snapshot: *base.id(),
            command,
            stdout: String::from_utf8_lossy(&obs.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&obs.stderr).into_owned(),
            exit: code,
            status: obs.exit,
            duration_ms: millis(obs.duration_us),
            committed,
            tag: committed.and(tag.map(str::to_owned)),
            killed_background: obs.killed_background,
        })?;
        return Ok(code);
    }
    output::stdout_bytes(&obs.stdout)?;
    output::stderr_bytes(&obs.stderr)?;
    match obs.exit {
        ExitStatus::Timeout => note(
            false,
            &format!("timed out after {timeout_s} s; its process tree was killed"),
        )?,
        ExitStatus::DiskLimit => note(false, "stopped: the workspace grew past its disk limit")?,
        ExitStatus::Signal { signal } => note(false, &format!("killed by signal {signal}"))?,
        ExitStatus::Code { .. } => {}
    }
    if !obs.killed_background.is_empty() {
        let n = obs.killed_background.len();
        note(
            false,
            &format!(
                "ended {n} background process{} still running: {}",
                if n == 1 { "" } else { "es" },
                obs.killed_background.join("; ")
            ),
        )?;
    }
    if let Some(id) = committed {
        note_committed(&id, tag)?;
    }
    Ok(code)
}

#[derive(Serialize)]
struct DiffJson {
    from: SnapshotId,
    to: SnapshotId,
    added: Vec<String>,
    modified: Vec<String>,
    deleted: Vec<String>,
}

fn diff(ctx: &Ctx, a: &str, b: &str) -> Result<i32> {
    #[cfg(feature = "wasm")]
    {
        let (ia, ib) = (session(ctx, a)?, session(ctx, b)?);
        if ia.is_some() || ib.is_some() {
            let ia = ia.map_or_else(|| ctx.store().resolve(a), Ok)?;
            let ib = ib.map_or_else(|| ctx.store().resolve(b), Ok)?;
            return crate::wasm::diff(ctx, &ia, &ib);
        }
    }
    let a = ctx.runtime.resolve(a)?;
    let b = ctx.runtime.resolve(b)?;
    let d = ctx.runtime.diff(&a, &b)?;
    let result = DiffJson {
        from: *a.id(),
        to: *b.id(),
        added: d.added,
        modified: d.modified,
        deleted: d.deleted,
    };
    emit(ctx.json, &result, || {
        let text = diff_lines(&result.added, &result.modified, &result.deleted);
        if text.is_empty() {
            "no differences\n".to_owned()
        } else {
            text
        }
    })?;
    Ok(0)
}

/// One snapshot of `arbor log`.
#[derive(Serialize)]
struct LogEntry {
    id: SnapshotId,
    parent: Option<SnapshotId>,
    created_at: u64,
    summary: String,
    action: Option<Action>,
    exits: Vec<String>,
    observations: Vec<ObservationDigest>,
    killed_background: Vec<String>,
    tags: Vec<String>,
}

#[derive(Serialize)]
struct LogJson {
    snapshot: SnapshotId,
    chain: Vec<LogEntry>,
}

fn log(ctx: &Ctx, snapshot: &str) -> Result<i32> {
    #[cfg(feature = "wasm")]
    if let Some(id) = session(ctx, snapshot)? {
        return crate::wasm::log(ctx, &id);
    }
    let snapshot = ctx.runtime.resolve(snapshot)?;
    let mut tags = tags_by_snapshot(ctx.store())?;
    let chain: Vec<LogEntry> = ctx
        .runtime
        .log(&snapshot)?
        .into_iter()
        .map(|s| {
            let m = s.manifest().clone();
            LogEntry {
                id: *s.id(),
                parent: m.parent,
                created_at: m.created_at,
                summary: action_summary(m.action.as_ref()),
                exits: m.observations.iter().map(|o| o.exit.label()).collect(),
                action: m.action,
                observations: m.observations,
                killed_background: m.killed_background,
                tags: tags.remove(s.id()).unwrap_or_default(),
            }
        })
        .collect();
    let result = LogJson {
        snapshot: *snapshot.id(),
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
                if !e.killed_background.is_empty() {
                    action = format!(
                        "{action}  (ended background: {})",
                        e.killed_background.join("; ")
                    );
                }
                let exits = if e.exits.is_empty() {
                    "-".to_owned()
                } else {
                    e.exits.join(",")
                };
                vec![e.id.short(), format_time(e.created_at), exits, action]
            })
            .collect();
        table(&["SNAPSHOT", "CREATED (UTC)", "EXIT", "ACTION"], &rows)
    })?;
    Ok(0)
}

#[derive(Serialize)]
struct CheckoutJson<'a> {
    snapshot: SnapshotId,
    dir: &'a Path,
    report: MaterializeReport,
}

fn checkout(ctx: &Ctx, snapshot: &str, dir: &Path) -> Result<i32> {
    #[cfg(feature = "wasm")]
    if let Some(id) = session(ctx, snapshot)? {
        return crate::wasm::checkout(ctx, &id, dir);
    }
    let snapshot = ctx.runtime.resolve(snapshot)?;
    let report = ctx.runtime.checkout(&snapshot, dir)?;
    print_checkout(ctx, snapshot.id(), dir, report)
}

/// Print what a checkout of `id` into `dir` materialised.
pub fn print_checkout(
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

/// One row of `arbor ls`.
#[derive(Serialize)]
struct LsEntry {
    id: SnapshotId,
    created_at: u64,
    parent: Option<SnapshotId>,
    tags: Vec<String>,
    summary: String,
    layers: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The `ls` row of a WebAssembly session snapshot, read from its record's
/// JSON (so that any build lists sessions).
fn session_ls_entry(store: &Store, id: SnapshotId, tags: Vec<String>) -> LsEntry {
    let unreadable = |e: String| LsEntry {
        id,
        created_at: 0,
        parent: None,
        tags: tags.clone(),
        summary: String::new(),
        layers: 0,
        error: Some(e),
    };
    let record: serde_json::Value = match store
        .get_wasm_manifest(&id)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => return unreadable(e),
    };
    let steps: Vec<String> = record["actions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| match x["type"].as_str() {
                    Some("step") => format!(">>> {}", one_line(x["code"].as_str().unwrap_or(""))),
                    Some(other) => format!("{other} {}", x["path"].as_str().unwrap_or("")),
                    None => "?".to_owned(),
                })
                .collect()
        })
        .unwrap_or_default();
    let summary = if record["boot"].is_object() {
        format!(
            "[wasm] import --wasm {}",
            record["boot"]["args"][0].as_str().unwrap_or("?")
        )
    } else {
        match steps.as_slice() {
            [] => "[wasm] (no action)".to_owned(),
            [one] => format!("[wasm] {one}"),
            [first, ..] => format!("[wasm] {} steps: {first}, ...", steps.len()),
        }
    };
    LsEntry {
        id,
        created_at: record["created_at"].as_u64().unwrap_or(0),
        parent: record["parent"].as_str().and_then(|p| p.parse().ok()),
        tags,
        summary,
        layers: record["layers"].as_array().map_or(0, Vec::len),
        error: None,
    }
}

#[derive(Serialize)]
struct LsJson {
    snapshots: Vec<LsEntry>,
}

fn ls(ctx: &Ctx) -> Result<i32> {
    let mut tags = tags_by_snapshot(ctx.store())?;
    let mut snapshots: Vec<LsEntry> = ctx
        .store()
        .snapshots()?
        .into_iter()
        .map(|id| {
            let tags = tags.remove(&id).unwrap_or_default();
            if ctx.store().is_wasm_snapshot(&id) {
                return session_ls_entry(ctx.store(), id, tags);
            }
            match ctx.store().get_manifest(&id) {
                Ok(m) => LsEntry {
                    id,
                    created_at: m.created_at,
                    parent: m.parent,
                    tags,
                    summary: action_summary(m.action.as_ref()),
                    layers: m.layers.len(),
                    error: None,
                },
                Err(e) => LsEntry {
                    id,
                    created_at: 0,
                    parent: None,
                    tags,
                    summary: String::new(),
                    layers: 0,
                    error: Some(e.to_string()),
                },
            }
        })
        .collect();
    // Seconds tie often; within one second, ancestors come first.
    let parents: BTreeMap<SnapshotId, Option<SnapshotId>> =
        snapshots.iter().map(|e| (e.id, e.parent)).collect();
    let depth = |id: &SnapshotId| {
        let mut depth = 0usize;
        let mut cur = parents.get(id).copied().flatten();
        while let Some(p) = cur {
            depth += 1;
            if depth > parents.len() {
                break;
            }
            cur = parents.get(&p).copied().flatten();
        }
        depth
    };
    snapshots.sort_by_cached_key(|e| (e.created_at, depth(&e.id), e.id));
    let result = LsJson { snapshots };
    emit(ctx.json, &result, || {
        if result.snapshots.is_empty() {
            return "no snapshots (create one with `arbor import DIR`)\n".to_owned();
        }
        let rows: Vec<Vec<String>> = result
            .snapshots
            .iter()
            .map(|e| {
                let created = if e.error.is_some() {
                    "?".to_owned()
                } else {
                    format_time(e.created_at)
                };
                let action = e
                    .error
                    .as_ref()
                    .map_or_else(|| e.summary.clone(), |err| format!("unreadable: {err}"));
                vec![
                    e.id.short(),
                    created,
                    e.parent.map_or_else(|| "-".to_owned(), |p| p.short()),
                    if e.tags.is_empty() {
                        "-".to_owned()
                    } else {
                        e.tags.join(",")
                    },
                    crate::render::clip(&action, 80),
                ]
            })
            .collect();
        table(
            &["SNAPSHOT", "CREATED (UTC)", "PARENT", "TAGS", "ACTION"],
            &rows,
        )
    })?;
    Ok(0)
}

#[derive(Serialize)]
struct ShowJson<'a> {
    id: SnapshotId,
    tags: Vec<String>,
    manifest: &'a Manifest,
}

fn show(ctx: &Ctx, snapshot: &str) -> Result<i32> {
    #[cfg(feature = "wasm")]
    if let Some(id) = session(ctx, snapshot)? {
        return crate::wasm::show(ctx, &id);
    }
    let snapshot = ctx.runtime.resolve(snapshot)?;
    let tags = tags_by_snapshot(ctx.store())?
        .remove(snapshot.id())
        .unwrap_or_default();
    let manifest = snapshot.manifest();
    if ctx.json {
        output::json(&ShowJson {
            id: *snapshot.id(),
            tags,
            manifest,
        })?;
    } else {
        let mut text = serde_json::to_string_pretty(manifest)?;
        text.push('\n');
        output::stdout_bytes(text.as_bytes())?;
    }
    Ok(0)
}

#[derive(Serialize)]
struct TagJson<'a> {
    tag: &'a str,
    snapshot: SnapshotId,
    deleted: bool,
}

#[derive(Serialize)]
struct TagsJson {
    tags: BTreeMap<String, SnapshotId>,
}

fn tag(ctx: &Ctx, snapshot: Option<&str>, name: Option<&str>, delete: Option<&str>) -> Result<i32> {
    let store = ctx.store();
    if let Some(name) = delete {
        let Some(id) = store.get_tag(name)? else {
            return Err(arbor_runtime::store::StoreError::UnknownTag(name.to_owned()).into());
        };
        store.delete_tag(name)?;
        emit(
            ctx.json,
            &TagJson {
                tag: name,
                snapshot: id,
                deleted: true,
            },
            || format!("deleted tag {name} (was {})\n", id.short()),
        )?;
        return Ok(0);
    }
    match (snapshot, name) {
        (Some(snapshot), Some(name)) => {
            let id = ctx.store().resolve(snapshot)?;
            store.set_tag(name, &id)?;
            emit(
                ctx.json,
                &TagJson {
                    tag: name,
                    snapshot: id,
                    deleted: false,
                },
                || format!("tagged {} as {name}\n", id.short()),
            )?;
        }
        (Some(_), None) => {
            return Err(UsageError(
                "missing the tag NAME: use `arbor tag SNAP NAME` or `arbor tag --delete NAME`"
                    .into(),
            )
            .into());
        }
        _ => {
            let tags = store.tags()?;
            emit(ctx.json, &TagsJson { tags: tags.clone() }, || {
                if tags.is_empty() {
                    return "no tags\n".to_owned();
                }
                let rows: Vec<Vec<String>> = tags
                    .iter()
                    .map(|(n, id)| vec![n.clone(), id.short()])
                    .collect();
                table(&["TAG", "SNAPSHOT"], &rows)
            })?;
        }
    }
    Ok(0)
}

#[derive(Serialize)]
struct RmJson {
    snapshot: SnapshotId,
    tags_deleted: Vec<String>,
}

fn rm(ctx: &Ctx, snapshot: &str) -> Result<i32> {
    let id = ctx.store().resolve(snapshot)?;
    let tags_deleted = ctx.store().remove_snapshot(&id)?;
    let result = RmJson {
        snapshot: id,
        tags_deleted,
    };
    emit(ctx.json, &result, || {
        let tags = if result.tags_deleted.is_empty() {
            String::new()
        } else {
            format!(
                " and deleted its tag{} {}",
                plural(result.tags_deleted.len()),
                result.tags_deleted.join(", ")
            )
        };
        format!(
            "removed snapshot {} from the list{tags}; its data is freed by `arbor gc` \
             (unless a tagged snapshot builds on it)\n",
            id.short()
        )
    })?;
    Ok(0)
}

#[derive(Serialize)]
struct GcJson {
    snapshots_unlisted: usize,
    objects_removed: usize,
    layers_removed: usize,
    squash_removed: usize,
    tmp_removed: usize,
    run_dirs_removed: usize,
    bytes_freed: u64,
    skipped: Vec<String>,
}

fn gc(ctx: &Ctx) -> Result<i32> {
    let r = ctx.store().gc()?;
    let result = GcJson {
        snapshots_unlisted: r.snapshots_unlisted,
        objects_removed: r.objects_removed,
        layers_removed: r.layers_removed,
        squash_removed: r.squash_removed,
        tmp_removed: r.tmp_removed,
        run_dirs_removed: r.run_dirs_removed,
        bytes_freed: r.bytes_freed,
        skipped: r.skipped,
    };
    emit(ctx.json, &result, || {
        let rows = [
            (
                "snapshots unlisted (no tag reaches them)",
                result.snapshots_unlisted.to_string(),
            ),
            ("objects removed", result.objects_removed.to_string()),
            ("layers removed", result.layers_removed.to_string()),
            ("squash caches removed", result.squash_removed.to_string()),
            ("stale temp entries removed", result.tmp_removed.to_string()),
            (
                "dead sandbox dirs removed",
                result.run_dirs_removed.to_string(),
            ),
            (
                "freed",
                format!(
                    "{} ({} bytes)",
                    format_bytes(result.bytes_freed),
                    result.bytes_freed
                ),
            ),
        ];
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let mut text: String = rows
            .iter()
            .map(|(k, v)| format!("{k:<width$}  {v}\n"))
            .collect();
        for s in &result.skipped {
            text.push_str(&format!("left in place: {s}\n"));
        }
        text
    })?;
    Ok(0)
}

#[derive(Serialize)]
struct ProblemJson {
    path: String,
    what: String,
}

impl From<&FsckProblem> for ProblemJson {
    fn from(p: &FsckProblem) -> Self {
        Self {
            path: p.object_or_path.clone(),
            what: p.what.clone(),
        }
    }
}

#[derive(Serialize)]
struct FsckJson {
    clean: bool,
    objects_checked: usize,
    layers_checked: usize,
    files_checked: usize,
    problems: Vec<ProblemJson>,
    garbage: Vec<String>,
}

fn fsck(ctx: &Ctx) -> Result<i32> {
    let r = ctx.store().fsck()?;
    let result = FsckJson {
        clean: r.is_clean(),
        objects_checked: r.objects_checked,
        layers_checked: r.layers_checked,
        files_checked: r.files_checked,
        problems: r.problems.iter().map(ProblemJson::from).collect(),
        garbage: r.garbage.clone(),
    };
    emit(ctx.json, &result, || {
        let mut text = format!(
            "checked {} object{}, {} layer{}, {} layer entr{}\n",
            r.objects_checked,
            plural(r.objects_checked),
            r.layers_checked,
            plural(r.layers_checked),
            r.files_checked,
            if r.files_checked == 1 { "y" } else { "ies" },
        );
        for g in &r.garbage {
            text.push_str(&format!("info: garbage (gc removes it): {g}\n"));
        }
        for p in &r.problems {
            text.push_str(&format!("problem: {p}\n"));
        }
        if r.is_clean() {
            text.push_str("fsck: clean\n");
        } else {
            let n = r.problems.len();
            text.push_str(&format!("fsck: {n} problem{} found\n", plural(n)));
        }
        text
    })?;
    Ok(if r.is_clean() { 0 } else { EXIT_FAILURE })
}

fn replay(ctx: &Ctx, snapshot: Option<&str>, strict: bool, explain: bool) -> Result<i32> {
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
    #[cfg(feature = "wasm")]
    if let Some(id) = session(ctx, snapshot)? {
        return crate::wasm::replay(ctx, &id);
    }
    let target = ctx.runtime.resolve(snapshot)?;
    let report = arbor_runtime::replay::replay(
        &ctx.runtime,
        &target,
        arbor_runtime::replay::ReplayOptions { strict },
    )?;
    emit(ctx.json, &report, || render_replay(&report))?;
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
                // The session (WebAssembly) parts: one line each.
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
