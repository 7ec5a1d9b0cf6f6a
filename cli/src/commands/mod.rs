//! The commands: each resolves its snapshot arguments to the runtime's
//! backend-neutral handle ([`arbor_runtime::AnySnapshot`]), calls it, prints
//! its result (text, or one JSON object with `--json`) and returns the exit
//! status. No command asks which backend a snapshot belongs to: the handle
//! dispatches, once, in the runtime.
//!
//! - [`steps`]: `import`, `exec`, `fanout` — running steps in forks.
//! - [`history`]: `log`, `show`, `diff`, `checkout`, `replay` — reading states.
//! - [`store`]: `ls`, `tag`, `rm`, `gc`, `fsck` — the store's records.
//! - [`bundle`]: `bundle export`, `bundle import` — snapshots between stores.
//! - [`remote`]: `remote add|list|remove|show`, `push`, `pull` — snapshots on S3.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use arbor_runtime::Runtime;
use arbor_runtime::store::{SnapshotId, Store};

use crate::args::{Command, CreditArgs, CreditCommand};
use crate::error::UsageError;
use crate::output::note;

mod bundle;
mod history;
mod images;
mod remote;
mod steps;
mod store;

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
            image,
            workdir,
        } => steps::import(
            ctx,
            dir.as_deref(),
            wasm.as_deref(),
            tag.as_deref(),
            seed.as_deref(),
            image.as_deref().map(|i| (i, workdir)),
        ),
        Command::Image { command } => images::run(ctx, command),
        Command::Bundle { command } => bundle::run(ctx, command),
        Command::Remote { command } => remote::run(ctx, command),
        Command::Push { remote, snapshots } => remote::push(ctx, &remote, &snapshots),
        Command::Pull { remote, what } => remote::pull(ctx, &remote, &what),
        Command::Exec {
            snapshot,
            commit,
            tag,
            timeout,
            allow_host,
            command,
        } => steps::exec(
            ctx,
            &snapshot,
            commit,
            tag.as_deref(),
            timeout,
            &allow_host,
            &command,
        ),
        Command::Fanout {
            snapshot,
            commands,
            commit,
            tag_prefix,
            timeout,
        } => steps::fanout(
            ctx,
            &snapshot,
            &commands,
            commit,
            tag_prefix.as_deref(),
            timeout,
        ),
        Command::Diff { a, b } => history::diff(ctx, &a, &b),
        Command::Log { snapshot } => history::log(ctx, &snapshot),
        Command::Replay {
            snapshot,
            strict,
            explain,
        } => history::replay(ctx, snapshot.as_deref(), strict, explain),
        Command::Checkout { snapshot, dir } => history::checkout(ctx, &snapshot, &dir),
        Command::Ls => store::ls(ctx),
        Command::Show { snapshot } => history::show(ctx, &snapshot),
        Command::Tag {
            snapshot,
            name,
            delete,
        } => store::tag(ctx, snapshot.as_deref(), name.as_deref(), delete.as_deref()),
        Command::Rm { snapshot } => store::rm(ctx, &snapshot),
        Command::Gc => store::gc(ctx),
        Command::Fsck => store::fsck(ctx),
        Command::Task { tasks, command } => crate::task::run(ctx, tasks.as_deref(), command),
        Command::Rollout(args) => crate::rollout::rollout(ctx, &args),
        Command::Serve(args) => serve(ctx, &args),
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
        .clone()
        .ok_or_else(|| UsageError("credit needs a trees file (or `credit eval`)".into()))?;
    crate::rollout::credit(ctx, &tree, &args)
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

fn seconds(flag: &str, s: f64) -> Result<std::time::Duration> {
    if s.is_finite() && s > 0.0 {
        Ok(std::time::Duration::from_secs_f64(s))
    } else {
        Err(anyhow::anyhow!(crate::error::UsageError(format!(
            "{flag} {s} must be a positive number of seconds"
        ))))
    }
}

fn serve(ctx: &Ctx, args: &crate::args::ServeArgs) -> Result<i32> {
    let cfg = arbor_server::ServeConfig {
        unix: args.unix.clone(),
        listen: args.listen,
        tokens: args.tokens.clone(),
        tasks: args.tasks.clone(),
        max_sandboxes: args.max_sandboxes,
        creates_per_second: args.creates_per_second,
        ttl: seconds("--ttl", args.ttl)?,
        max_ttl: seconds("--max-ttl", args.max_ttl)?,
        max_body: args.max_body,
        grace: seconds("--grace", args.grace)?,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(512)
        .build()
        .context("start the tokio runtime")?;
    rt.block_on(arbor_server::serve(ctx.runtime.clone(), cfg))
        .map_err(|e| match e {
            arbor_server::ServeError::Config(m) => anyhow::anyhow!(crate::error::UsageError(m)),
            other => anyhow::Error::from(other),
        })?;
    Ok(0)
}
