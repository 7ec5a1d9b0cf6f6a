//! `arbor rollout` and `arbor credit`.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use arbor_envs::rollout::credit::CreditConfig;
use arbor_envs::rollout::driver::{DriverConfig, Progress, Strategy, run_tree_with};
use arbor_envs::rollout::export::{formats, informative_pairs, pairs, records, svg};
use arbor_envs::rollout::policy::{AnyPolicy, resolve};
use arbor_envs::rollout::tree::{Forest, RolloutTree, TREE_SCHEMA};
use arbor_envs::suite::{self, Suite};
use serde::Serialize;

use crate::args::RolloutArgs;
use crate::commands::Ctx;
use crate::error::UsageError;
use crate::output::{emit, progress_bar};
use crate::render::table;

#[derive(Serialize)]
struct TreeSummary {
    task: String,
    nodes: usize,
    leaves: usize,
    success_rate: Option<f64>,
    actions: u64,
    verifier_runs: u64,
    forks: u64,
    faults: u64,
    wall_s: f64,
    fork_snapshot_share: f64,
}

fn summary(t: &RolloutTree) -> TreeSummary {
    let busy = t.stats.fork_s + t.stats.snapshot_s + t.stats.action_s + t.stats.verify_s;
    TreeSummary {
        task: t.task.clone(),
        nodes: t.nodes.len(),
        leaves: t.graded_leaves().count(),
        success_rate: t.success_rate(),
        actions: t.budget.actions,
        verifier_runs: t.budget.verifier_runs,
        forks: t.stats.forks,
        faults: t.stats.faults,
        wall_s: t.stats.wall_s,
        fork_snapshot_share: if busy > 0.0 {
            (t.stats.fork_s + t.stats.snapshot_s) / busy
        } else {
            0.0
        },
    }
}

/// Run `arbor rollout`.
pub fn rollout(ctx: &Ctx, args: &RolloutArgs) -> Result<i32> {
    let strategy: Strategy = args
        .strategy
        .parse()
        .map_err(|e: String| anyhow!(UsageError(e)))?;
    let dir = args.tasks.clone().unwrap_or_else(suite::bundled_dir);
    let suite = Suite::load(&dir).map_err(|e| anyhow!(UsageError(e.to_string())))?;
    let specs = match (&args.task, &args.split) {
        (Some(id), _) => vec![
            suite
                .get(id)
                .ok_or_else(|| anyhow!(UsageError(format!("no task {id:?} in {}", dir.display()))))?
                .clone(),
        ],
        (None, Some(split)) => suite
            .split(split)
            .map_err(|e| anyhow!(UsageError(e)))?
            .into_iter()
            .cloned()
            .collect(),
        (None, None) => return Err(anyhow!(UsageError("give --task or --split".to_owned()))),
    };
    let mut cfg = DriverConfig::new(args.budget, strategy);
    cfg.seed = args.seed;
    if let Some(w) = args.workers {
        cfg.workers = w.max(1);
    }
    let progress = Arc::new(Progress::default());
    let bar = progress_bar(ctx.json, args.budget * specs.len() as u64, "budget");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("start the tokio runtime")?;
    // An `openai:` policy connects to its server here (a wrong URL or model
    // fails now, by name, before any sandbox opens).
    let policy: AnyPolicy = rt
        .block_on(resolve(&args.policy))
        .map_err(|e| anyhow!(UsageError(e)))?;
    let started = Instant::now();
    let trees: Vec<RolloutTree> = rt.block_on(async {
        let ticker = {
            let progress = Arc::clone(&progress);
            let bar = bar.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    let a = progress.actions.load(Ordering::Relaxed);
                    let v = progress.verifier_runs.load(Ordering::Relaxed);
                    let f = progress.forks.load(Ordering::Relaxed);
                    let leaves = progress.leaves.load(Ordering::Relaxed);
                    let wins = progress.successes.load(Ordering::Relaxed);
                    let faults = progress.faults.load(Ordering::Relaxed);
                    let secs = started.elapsed().as_secs_f64().max(1e-3);
                    bar.set_position(a + v);
                    bar.set_message(format!(
                        "{:.1} steps/s, {:.1} forks/s, success {}/{leaves}{}",
                        a as f64 / secs,
                        f as f64 / secs,
                        wins,
                        if faults > 0 {
                            format!(", {faults} faults")
                        } else {
                            String::new()
                        }
                    ));
                }
            })
        };
        let mut trees = Vec::new();
        for spec in specs {
            let runtime = ctx.runtime.clone();
            let env = tokio::task::spawn_blocking(move || arbor_envs::environment(&runtime, spec))
                .await
                .map_err(|e| anyhow!("prepare: {e}"))??;
            let tree = run_tree_with(env, policy.clone(), &cfg, Arc::clone(&progress)).await?;
            trees.push(tree);
        }
        ticker.abort();
        Ok::<_, anyhow::Error>(trees)
    })?;
    bar.finish_and_clear();
    let forest = Forest {
        schema: TREE_SCHEMA.to_owned(),
        trees,
    };
    let text = serde_json::to_vec(&forest).context("encode the trees")?;
    std::fs::write(&args.out, &text).with_context(|| format!("write {}", args.out.display()))?;
    // Tag the leaves so `gc` keeps every node (ancestors of a tag are kept).
    let key = hex_prefix(&text);
    let mut tags = 0;
    for t in &forest.trees {
        for n in t.nodes.iter().filter(|n| n.edges.is_empty()) {
            let id = n
                .snapshot
                .parse()
                .map_err(|e| anyhow!("snapshot id {}: {e}", n.snapshot))?;
            ctx.store()
                .set_tag(&format!("rollout.{key}.{}.{}", t.task, n.id), &id)?;
            tags += 1;
        }
    }
    // The trees themselves go into the store too, as a one-file snapshot
    // tagged `rollout.KEY` (verified on every read, kept by gc):
    // `arbor credit rollout.KEY` reads it back after any restart.
    let stored = format!("rollout.{key}");
    let tmp = tempfile::tempdir().context("tempdir")?;
    std::fs::write(tmp.path().join(FOREST_FILE), &text).context("stage the trees")?;
    ctx.runtime.import(tmp.path(), Some(&stored))?;
    let summaries: Vec<TreeSummary> = forest.trees.iter().map(summary).collect();
    emit(
        ctx.json,
        &serde_json::json!({ "out": args.out, "stored": stored, "trees": summaries, "tags": tags }),
        || {
            let rows: Vec<Vec<String>> = summaries
                .iter()
                .map(|s| {
                    vec![
                        s.task.clone(),
                        s.nodes.to_string(),
                        s.leaves.to_string(),
                        s.success_rate
                            .map_or("-".to_owned(), |r| format!("{:.0}%", r * 100.0)),
                        format!("{}+{}", s.actions, s.verifier_runs),
                        s.forks.to_string(),
                        s.faults.to_string(),
                        format!("{:.1}s", s.wall_s),
                        format!("{:.1}%", s.fork_snapshot_share * 100.0),
                    ]
                })
                .collect();
            let mut out = table(
                &[
                    "TASK",
                    "NODES",
                    "LEAVES",
                    "SUCCESS",
                    "ACTIONS+VERIFY",
                    "FORKS",
                    "FAULTS",
                    "WALL",
                    "FORK+SNAP",
                ],
                &rows,
            );
            out.push_str(&format!(
                "wrote {} ({} trees), stored as {stored}; {tags} leaf tags keep their snapshots from gc\n",
                args.out.display(),
                summaries.len()
            ));
            out
        },
    )?;
    Ok(0)
}

fn hex_prefix(bytes: &[u8]) -> String {
    let h = blake3::hash(bytes);
    h.to_hex()[..12].to_owned()
}

/// The file name of the trees inside their stored snapshot.
const FOREST_FILE: &str = "forest.json";

/// Load trees: a file written by `arbor rollout`, or the stored copy
/// (`rollout.KEY`, or any snapshot holding `forest.json`), checked out
/// with every byte verified.
pub fn load_forest(ctx: &Ctx, path: &Path) -> Result<Forest> {
    let text = if path.is_file() {
        std::fs::read(path)
            .map_err(|e| anyhow!(UsageError(format!("{}: cannot read: {e}", path.display()))))?
    } else {
        let name = path.to_string_lossy();
        let snap = ctx.runtime.resolve(&name).map_err(|e| {
            anyhow!(UsageError(format!(
                "{name}: neither a trees file nor a stored rollout ({e})"
            )))
        })?;
        let tmp = tempfile::tempdir().context("tempdir")?;
        let dest = tmp.path().join("out");
        ctx.runtime.checkout(&snap, &dest)?;
        std::fs::read(dest.join(FOREST_FILE)).map_err(|e| {
            anyhow!(UsageError(format!(
                "{name}: the snapshot holds no {FOREST_FILE}: {e}"
            )))
        })?
    };
    let forest: Forest = serde_json::from_slice(&text).map_err(|e| {
        anyhow!(UsageError(format!(
            "{}: not a trees file: {e}",
            path.display()
        )))
    })?;
    if forest.schema != TREE_SCHEMA {
        return Err(anyhow!(UsageError(format!(
            "{}: schema {:?}, this arbor reads {TREE_SCHEMA:?}",
            path.display(),
            forest.schema
        ))));
    }
    Ok(forest)
}

fn write_lines<T: Serialize>(path: &Path, items: &[T]) -> Result<()> {
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?,
    );
    for it in items {
        serde_json::to_writer(&mut f, it)?;
        f.write_all(b"\n")?;
    }
    f.flush()?;
    Ok(())
}

/// Run `arbor credit`.
pub fn credit(ctx: &Ctx, tree: &Path, args: &crate::args::CreditArgs) -> Result<i32> {
    let (export_to, pairs_to, plot) = (
        args.export.as_deref(),
        args.pairs.as_deref(),
        args.plot.as_deref(),
    );
    let (margin, gamma) = (args.margin, args.gamma);
    if !(0.0..=1.0).contains(&gamma) {
        return Err(anyhow!(UsageError(format!(
            "--gamma {gamma} is not in [0, 1]"
        ))));
    }
    let forest = load_forest(ctx, tree)?;
    let cfg = CreditConfig {
        gamma,
        ..CreditConfig::default()
    };
    let mut all_records = Vec::new();
    let mut all_pairs = Vec::new();
    let mut rows = Vec::new();
    for t in &forest.trees {
        let recs = records(t, &cfg).with_context(|| format!("credit of {}", t.task))?;
        let prs = pairs(t, &cfg, margin)?;
        let branch_points = t.nodes.iter().filter(|n| n.edges.len() > 1).count();
        let mean_abs = if recs.is_empty() {
            0.0
        } else {
            recs.iter().map(|r| r.advantage.abs()).sum::<f64>() / recs.len() as f64
        };
        rows.push(serde_json::json!({
            "task": t.task,
            "edges": recs.len(),
            "branch_points": branch_points,
            "informative_pairs": informative_pairs(&recs),
            "mean_abs_advantage": mean_abs,
            "preference_pairs": prs.len(),
            "success_rate": t.success_rate(),
        }));
        all_records.extend(recs);
        all_pairs.extend(prs);
    }
    if let Some(p) = export_to {
        write_lines(p, &all_records)?;
    }
    let mut exported = serde_json::Value::Null;
    if let (Some(format), Some(out)) = (args.format, args.out.as_deref()) {
        let started = std::time::Instant::now();
        let w = formats::write(&all_records, format, args.normalise, out).map_err(|e| match e {
            formats::ExportError::Missing { .. } | formats::ExportError::Ragged { .. } => {
                anyhow!(UsageError(e.to_string()))
            }
            formats::ExportError::Write { .. } => anyhow!(e),
        })?;
        let secs = started.elapsed().as_secs_f64();
        exported = serde_json::json!({
            "format": format.name(),
            "path": out.display().to_string(),
            "rows": w.rows,
            "bytes": w.bytes,
            "seconds": secs,
        });
    }
    if let Some(p) = pairs_to {
        write_lines(p, &all_pairs)?;
    }
    if let Some(p) = plot {
        let first = forest
            .trees
            .first()
            .ok_or_else(|| anyhow!(UsageError("the file holds no tree".to_owned())))?;
        std::fs::write(p, svg(first, &cfg)?).with_context(|| format!("write {}", p.display()))?;
    }
    emit(
        ctx.json,
        &serde_json::json!({ "trees": rows, "records": all_records.len(), "pairs": all_pairs.len(), "export": exported }),
        || {
            let body: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    vec![
                        r["task"].as_str().unwrap_or_default().to_owned(),
                        r["edges"].to_string(),
                        r["branch_points"].to_string(),
                        r["informative_pairs"].to_string(),
                        format!("{:.3}", r["mean_abs_advantage"].as_f64().unwrap_or(0.0)),
                        r["preference_pairs"].to_string(),
                    ]
                })
                .collect();
            let mut s = table(
                &[
                    "TASK",
                    "EDGES",
                    "BRANCH POINTS",
                    "(S,A) WITH A≠0",
                    "MEAN |A|",
                    "PAIRS",
                ],
                &body,
            );
            for (what, p) in [
                ("advantages", export_to),
                ("pairs", pairs_to),
                ("plot", plot),
            ] {
                if let Some(p) = p {
                    s.push_str(&format!("{what}: {}\n", p.display()));
                }
            }
            if let Some(f) = exported["format"].as_str() {
                s.push_str(&format!(
                    "{f}: {} ({} samples, {} bytes)\n",
                    exported["path"].as_str().unwrap_or_default(),
                    exported["rows"],
                    exported["bytes"]
                ));
            }
            s
        },
    )?;
    Ok(0)
}
