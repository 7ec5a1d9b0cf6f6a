//! `arbor bundle export | import`: snapshots between stores as one verified
//! stream (see `arbor_runtime::bundle`).

use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use anyhow::{Context as _, Result, bail};
use arbor_runtime::bundle::{self, BundleRoot, ExportReport, ImportReport};
use arbor_runtime::store::SnapshotId;

use super::Ctx;
use crate::args::BundleCommand;
use crate::output::{self, emit};
use crate::render::{format_bytes, plural};

pub(super) fn run(ctx: &Ctx, command: BundleCommand) -> Result<i32> {
    match command {
        BundleCommand::Export {
            snapshots,
            out,
            since,
        } => export(ctx, &snapshots, &since, &out),
        BundleCommand::Import { file } => import(ctx, &file),
    }
}

/// A snapshot argument as a bundle root: a tag name travels with it.
pub(super) fn root(ctx: &Ctx, what: &str) -> Result<BundleRoot> {
    let id = ctx.store().resolve(what)?;
    let tag = ctx
        .store()
        .get_tag(what)
        .ok()
        .flatten()
        .filter(|t| *t == id)
        .map(|_| what.to_owned());
    Ok(BundleRoot { id, tag })
}

fn export(ctx: &Ctx, snapshots: &[String], since: &[String], out: &str) -> Result<i32> {
    let roots = snapshots
        .iter()
        .map(|s| root(ctx, s))
        .collect::<Result<Vec<_>>>()?;
    let bases = since
        .iter()
        .map(|s| ctx.store().resolve(s).map_err(Into::into))
        .collect::<Result<Vec<SnapshotId>>>()?;
    let bar = output::progress_bar(
        ctx.json || out == "-",
        0,
        "writing the bundle (bytes of files)",
    );
    let mut tick = |n: u64| {
        bar.inc_length(n);
        bar.inc(n);
    };
    let rep = if out == "-" {
        let stdout = std::io::stdout().lock();
        let r = bundle::export(
            ctx.store(),
            &roots,
            &bases,
            BufWriter::new(stdout),
            &mut tick,
        );
        bar.finish_and_clear();
        let rep = r?;
        // The bundle is stdout: the summary goes to stderr.
        output::note(ctx.json, &summary_export(&rep))?;
        return Ok(0);
    } else {
        let dest = Path::new(out);
        if fs::symlink_metadata(dest).is_ok() {
            bail!("{out} exists; the bundle is written only to a new file");
        }
        let partial = dest.with_file_name(format!(
            ".{}.partial-{}",
            dest.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("bundle"),
            std::process::id()
        ));
        let file =
            File::create(&partial).with_context(|| format!("create {}", partial.display()))?;
        let mut w = BufWriter::new(file);
        let r = bundle::export(ctx.store(), &roots, &bases, &mut w, &mut tick)
            .map_err(anyhow::Error::from)
            .and_then(|rep| {
                let f = w.into_inner().map_err(|e| e.into_error())?;
                f.sync_all()?;
                Ok(rep)
            })
            .and_then(|rep| {
                fs::hard_link(&partial, dest)
                    .with_context(|| format!("create {out} (it may have appeared meanwhile)"))?;
                Ok(rep)
            });
        bar.finish_and_clear();
        let _ = fs::remove_file(&partial);
        r?
    };
    emit(ctx.json, &rep, || format!("{}\n", summary_export(&rep)))?;
    Ok(0)
}

fn summary_export(rep: &ExportReport) -> String {
    format!(
        "bundle of {} snapshot{}: {} object{}, {} layer{}, {} file content{} ({}), {} in all",
        rep.snapshots,
        plural(rep.snapshots as usize),
        rep.objects,
        plural(rep.objects as usize),
        rep.layers,
        plural(rep.layers as usize),
        rep.contents,
        plural(rep.contents as usize),
        format_bytes(rep.content_bytes),
        format_bytes(rep.bytes)
    )
}

fn import(ctx: &Ctx, file: &str) -> Result<i32> {
    let bar = output::progress_bar(ctx.json, 1, "importing the bundle (verifying every byte)");
    let input: Box<dyn Read> = if file == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(File::open(file).with_context(|| format!("open {file}"))?)
    };
    let r = bundle::import(ctx.store(), BufReader::with_capacity(1 << 20, input));
    bar.finish_and_clear();
    let rep: ImportReport = r.with_context(|| format!("import {file}"))?;
    emit(ctx.json, &rep, || summary_import(&rep))?;
    let _ = std::io::stdout().flush();
    Ok(0)
}

/// One line per root snapshot: its id, and its tag in parentheses.
pub(super) fn roots_text(roots: &[BundleRoot]) -> String {
    let mut s = String::new();
    for r in roots {
        s.push_str(&r.id.to_hex());
        if let Some(t) = &r.tag {
            s.push_str(&format!(" ({t})"));
        }
        s.push('\n');
    }
    s
}

/// What an import did, for people (also `arbor pull`'s summary).
pub(super) fn summary_import(rep: &ImportReport) -> String {
    let mut s = roots_text(&rep.roots);
    s.push_str(&format!(
        "{} object{} new, {} already here; {} layer{} new, {} already here; {} snapshot{} listed; {}\n",
        rep.objects_new,
        plural(rep.objects_new as usize),
        rep.objects_present,
        rep.layers_new,
        plural(rep.layers_new as usize),
        rep.layers_present,
        rep.snapshots_listed,
        plural(rep.snapshots_listed as usize),
        format_bytes(rep.bytes)
    ));
    for t in &rep.tags_conflicting {
        s.push_str(&format!(
            "tag {t} names another snapshot here: left alone\n"
        ));
    }
    s
}
