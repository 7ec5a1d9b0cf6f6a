//! `arbor remote add | list | remove | show`, `arbor push`, `arbor pull`:
//! snapshots on an S3-compatible object store (see `arbor_runtime::remote`).

use std::io::Write as _;

use anyhow::{Context as _, Result};
use arbor_runtime::remote::{self, PullReport, PushReport, Remote, RemoteSpec};
use serde::Serialize;

use super::Ctx;
use super::bundle::{root, summary_import};
use crate::args::RemoteCommand;
use crate::output::{self, emit};
use crate::render::{format_bytes, plural};

pub(super) fn run(ctx: &Ctx, command: RemoteCommand) -> Result<i32> {
    let store = ctx.store();
    match command {
        RemoteCommand::Add {
            name,
            url,
            endpoint,
            region,
        } => {
            let spec = RemoteSpec::new(&name, &url, endpoint.as_deref(), region.as_deref())?;
            remote::config::add(store, spec.clone())?;
            emit(ctx.json, &spec, || {
                format!("remote {name}: {}\n", describe(&spec))
            })?;
        }
        RemoteCommand::List => {
            let list = remote::config::list(store)?;
            #[derive(Serialize)]
            struct Remotes {
                remotes: Vec<RemoteSpec>,
            }
            let text = list
                .iter()
                .map(|r| format!("{}\t{}\n", r.name, describe(r)))
                .collect::<String>();
            emit(ctx.json, &Remotes { remotes: list }, || text)?;
        }
        RemoteCommand::Remove { name } => {
            let spec = remote::config::remove(store, &name)?;
            emit(ctx.json, &spec, || {
                format!(
                    "removed remote {name} ({}); what was pushed there stays\n",
                    spec.url
                )
            })?;
        }
        RemoteCommand::Show { name } => {
            let r = Remote::open(&remote::config::get(store, &name)?)?;
            let l = r.listing()?;
            emit(ctx.json, &l, || {
                let mut s = format!(
                    "{}: {} snapshot{}, {} object{} and {} file content{} ({})\n",
                    describe(r.spec()),
                    l.snapshots.len(),
                    plural(l.snapshots.len()),
                    l.objects,
                    plural(l.objects as usize),
                    l.contents,
                    plural(l.contents as usize),
                    format_bytes(l.bytes)
                );
                for (t, id) in &l.tags {
                    s.push_str(&format!("{t}\t{id}\n"));
                }
                for id in &l.snapshots {
                    s.push_str(&format!("{id}\n"));
                }
                s
            })?;
        }
    }
    Ok(0)
}

fn describe(r: &RemoteSpec) -> String {
    match &r.endpoint {
        Some(e) => format!("{} at {e}", r.url),
        None => r.url.clone(),
    }
}

fn open(ctx: &Ctx, name: &str) -> Result<Remote> {
    Ok(Remote::open(&remote::config::get(ctx.store(), name)?)?)
}

pub(super) fn push(ctx: &Ctx, name: &str, snapshots: &[String]) -> Result<i32> {
    let roots = snapshots
        .iter()
        .map(|s| root(ctx, s))
        .collect::<Result<Vec<_>>>()?;
    let r = open(ctx, name)?;
    let bar = output::progress_bar(ctx.json, 0, &format!("pushing to {name} (bytes uploaded)"));
    let mut tick = |n: u64| {
        bar.inc_length(n);
        bar.inc(n);
    };
    let rep = r.push(ctx.store(), &roots, &mut tick);
    bar.finish_and_clear();
    let rep: PushReport = rep.with_context(|| format!("push to {name}"))?;
    emit(ctx.json, &rep, || {
        let mut s = super::bundle::roots_text(&rep.roots);
        s.push_str(&format!(
            "pushed {} snapshot{} to {name}: {} object{} and {} file content{} sent ({}), {} and {} already there\n",
            rep.snapshots,
            plural(rep.snapshots as usize),
            rep.objects_sent,
            plural(rep.objects_sent as usize),
            rep.contents_sent,
            plural(rep.contents_sent as usize),
            format_bytes(rep.bytes_sent),
            rep.objects_present,
            rep.contents_present,
        ));
        s
    })?;
    let _ = std::io::stdout().flush();
    Ok(0)
}

pub(super) fn pull(ctx: &Ctx, name: &str, what: &[String]) -> Result<i32> {
    let r = open(ctx, name)?;
    let bar = output::progress_bar(
        ctx.json,
        0,
        &format!("pulling from {name} (bytes fetched, every one verified)"),
    );
    let mut tick = |n: u64| {
        bar.inc_length(n);
        bar.inc(n);
    };
    let rep = r.pull(ctx.store(), what, &mut tick);
    bar.finish_and_clear();
    let rep: PullReport = rep.with_context(|| format!("pull from {name}"))?;
    emit(ctx.json, &rep, || {
        format!(
            "{}fetched {} from {name}\n",
            summary_import(&rep.import),
            format_bytes(rep.bytes_fetched)
        )
    })?;
    let _ = std::io::stdout().flush();
    Ok(0)
}
