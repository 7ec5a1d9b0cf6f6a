//! `arbor train`: attached training, offline training from exported records,
//! and the experiment (`--compare`); libtorch through arbor-trainer.

use std::io::BufRead as _;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow};
use arbor_envs::TaskEnv;
use arbor_envs::rollout::Environment;
use arbor_envs::rollout::export::AdvantageRecord;
use arbor_envs::suite::{self, Suite};
use arbor_trainer::attached::{AttachedConfig, Credit, run_attached};
use arbor_trainer::experiment::{
    ARMS, ArmTasks, ExactScorer, ExperimentConfig, PPO_EPOCHS, RL_LR, Report, TaskSets,
    behaviour_clone, evaluate, gold_samples, plot_curves, run_arm, table,
};
use arbor_trainer::ground_truth::explore::{ExploreConfig, explore};
use arbor_trainer::learner::{Learner, LearnerConfig, Loss};
use arbor_trainer::model::ModelConfig;
use arbor_trainer::policy::{FeatureCache, NetPolicy};

use arbor_cli::args::TrainArgs;
use arbor_cli::commands::Ctx;
use arbor_cli::error::UsageError;
use arbor_cli::output::{emit, note};

fn device_line(ctx: &Ctx) -> Result<tch::Device> {
    let device = arbor_trainer::device();
    note(
        ctx.json,
        &format!(
            "device: {device:?} (CUDA available: {}, devices: {})",
            tch::Cuda::is_available(),
            tch::Cuda::device_count()
        ),
    )?;
    Ok(device)
}

fn prepare(ctx: &Ctx, suite: &Suite, split: &str) -> Result<Vec<Arc<dyn Environment>>> {
    suite
        .split(split)
        .map_err(|e| anyhow!(UsageError(e)))?
        .into_iter()
        .map(|spec| {
            TaskEnv::prepare(&ctx.runtime, spec.clone())
                .map(|e| Arc::new(e) as Arc<dyn Environment>)
                .with_context(|| format!("prepare {}", spec.id))
        })
        .collect()
}

/// Run `arbor train`.
pub fn train(ctx: &Ctx, args: &TrainArgs) -> Result<i32> {
    tch::set_num_threads(1);
    let device = device_line(ctx)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .context("start the tokio runtime")?;
    if let Some(records) = &args.records {
        return offline(ctx, args, records, device);
    }
    let dir = args.tasks.clone().unwrap_or_else(suite::bundled_dir);
    let suite = Suite::load(&dir).map_err(|e| anyhow!(UsageError(e.to_string())))?;
    if args.compare {
        return compare(ctx, args, &suite, device, &rt);
    }
    let sets = TaskSets {
        train: prepare(ctx, &suite, "train")?,
        heldout_variants: prepare(ctx, &suite, "heldout-variants")?,
        heldout_families: prepare(ctx, &suite, "heldout-families")?,
    };
    attached(ctx, args, &sets, device, &rt)
}

/// Prepare and explore `ids` for exact scoring.
fn explored(
    ctx: &Ctx,
    suite: &Suite,
    ids: &[String],
) -> Result<(Vec<Arc<dyn Environment>>, ExactScorer)> {
    let mut envs = Vec::new();
    let mut explored = Vec::new();
    for id in ids {
        let spec = suite
            .get(id)
            .ok_or_else(|| anyhow!(UsageError(format!("no task {id} in the suite"))))?
            .clone();
        let globs = spec.byproducts.clone();
        let env: Arc<dyn Environment> = Arc::new(
            TaskEnv::prepare(&ctx.runtime, spec).with_context(|| format!("prepare {id}"))?,
        );
        let ex = explore(
            env.as_ref(),
            &ctx.runtime,
            &move |p: &str| globs.matches(p),
            ExploreConfig {
                workers: 2,
                max_states: 20_000,
            },
            &|_| {},
        )
        .map_err(|e| anyhow!("explore {id}: {e}"))?;
        note(
            ctx.json,
            &format!(
                "explored {id}: {} decision states, {} env steps",
                ex.states.len(),
                ex.cost.env_steps()
            ),
        )?;
        envs.push(env);
        explored.push(ex);
    }
    Ok((envs, ExactScorer::new(explored)))
}

fn compare(
    ctx: &Ctx,
    args: &TrainArgs,
    suite: &Suite,
    device: tch::Device,
    rt: &tokio::runtime::Runtime,
) -> Result<i32> {
    let mut cfg = if args.smoke {
        ExperimentConfig::smoke(args.out.clone())
    } else {
        ExperimentConfig::full(args.out.clone())
    };
    if let Some(s) = &args.seeds {
        cfg.seeds.clone_from(s);
    }
    if let Some(b) = args.budget {
        cfg.budget = b;
    }
    if let Some(w) = args.workers {
        cfg.workers = w.max(1);
    }
    if let Some(lr) = args.rl_lr {
        if !(lr.is_finite() && lr > 0.0) {
            return Err(anyhow!(UsageError(format!(
                "--rl-lr must be a positive number, got {lr}"
            ))));
        }
        cfg.rl_lr = lr;
    }
    std::fs::create_dir_all(&cfg.out).with_context(|| format!("create {}", cfg.out.display()))?;
    let (train, in_dist) = explored(ctx, suite, &cfg.train_tasks)?;
    let (_, validation) = explored(ctx, suite, &cfg.validation_tasks)?;
    let (_, heldout) = explored(ctx, suite, &cfg.heldout_tasks)?;
    let scoring = format!(
        "exact; in-distribution: {}; validation: {}; held-out: {}",
        in_dist.describe(),
        validation.describe(),
        heldout.describe()
    );
    note(ctx.json, &scoring)?;
    let json = ctx.json;
    let log = move |line: String| {
        let _ = note(json, &line);
    };
    let tasks = ArmTasks {
        train: &train,
        in_dist: &in_dist,
        validation: &validation,
        heldout: &heldout,
    };
    let mut runs = Vec::new();
    for &seed in &cfg.seeds {
        for arm in ARMS {
            let r = rt
                .block_on(run_arm(arm, seed, &tasks, &cfg, device, &log))
                .map_err(|e| anyhow!("{} seed {seed}: {e}", arm.name))?;
            runs.push(r);
        }
    }
    let md = table(&runs, &cfg);
    let png = cfg.out.join("learning-curve.png");
    plot_curves(&runs, &png).map_err(|e| anyhow!(e))?;
    let report = Report {
        config: cfg.clone(),
        runs,
        device: format!("{device:?}"),
        scoring,
        table: md.clone(),
    };
    let json_path = cfg.out.join("report.json");
    std::fs::write(&json_path, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("write {}", json_path.display()))?;
    let md_path = cfg.out.join("report.md");
    std::fs::write(&md_path, &md).with_context(|| format!("write {}", md_path.display()))?;
    emit(ctx.json, &report, || {
        format!(
            "{md}\ntable: {}\nreport: {}\nlearning curve: {}\n",
            md_path.display(),
            json_path.display(),
            png.display()
        )
    })?;
    Ok(0)
}

/// Attached training of the default arm (BC warm start, then branched
/// PPO), with checkpoints that resume and continue the curve.
fn attached(
    ctx: &Ctx,
    args: &TrainArgs,
    sets: &TaskSets,
    device: tch::Device,
    rt: &tokio::runtime::Runtime,
) -> Result<i32> {
    let seed = args
        .seeds
        .as_ref()
        .and_then(|s| s.first().copied())
        .unwrap_or(1);
    let budget = args.budget.unwrap_or(400);
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let ckpt = args.checkpoint.clone();
    let (mut learner, mut curve): (Learner, Vec<(u64, f64)>) = match (&ckpt, args.resume) {
        (Some(dir), true) => {
            let l = Learner::load(dir, device).map_err(|e| anyhow!(UsageError(e)))?;
            let curve = std::fs::read(dir.join("curve.json"))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default();
            (l, curve)
        }
        _ => (
            Learner::new(
                ModelConfig {
                    seed,
                    ..ModelConfig::default()
                },
                LearnerConfig::default(),
                device,
            ),
            Vec::new(),
        ),
    };
    let actor = Arc::new(NetPolicy::new(learner.net.cfg, device).exploring(0.2));
    actor
        .publish(&learner.net, learner.counters.version)
        .map_err(|e| anyhow!(e))?;
    let mut used = 0;
    if !args.resume {
        let (samples, gold_used) = rt
            .block_on(gold_samples(&sets.train, FeatureCache::default()))
            .map_err(|e| anyhow!(e))?;
        used += gold_used;
        behaviour_clone(&mut learner, &samples, 30, 32, seed);
        learner.counters.version += 1;
        actor
            .publish(&learner.net, learner.counters.version)
            .map_err(|e| anyhow!(e))?;
        note(
            ctx.json,
            &format!("behaviour cloning on {} gold decisions", samples.len()),
        )?;
    }
    learner.set_lr(RL_LR);
    let cfg = AttachedConfig {
        budget: budget.saturating_sub(used),
        tree_budget: 40,
        workers,
        batch: 32,
        epochs: PPO_EPOCHS,
        channel: 8,
        max_staleness: 4,
        credit: Credit::Branched,
        seed: seed.wrapping_add(learner.counters.updates),
        first_task: 0,
    };
    let (l, report, _) = rt
        .block_on(run_attached(&sets.train, Arc::clone(&actor), learner, &cfg))
        .map_err(|e| anyhow!(e))?;
    learner = l;
    learner.counters.env_steps += used + report.env_steps;
    let eval = rt
        .block_on(evaluate(
            &sets.heldout_variants,
            actor.clone(),
            8,
            workers,
            seed,
        ))
        .map_err(|e| anyhow!(e))?;
    curve.push((learner.counters.env_steps, eval.mean()));
    if let Some(dir) = &ckpt {
        learner.save(dir).map_err(|e| anyhow!(e))?;
        std::fs::write(dir.join("curve.json"), serde_json::to_vec(&curve)?)?;
    }
    let out = serde_json::json!({
        "counters": learner.counters,
        "attached": report,
        "heldout_variants_success": eval.mean(),
        "curve": curve,
        "checkpoint": ckpt,
    });
    emit(ctx.json, &out, || {
        format!(
            "trained: {} updates, {} samples, version {}, budget {} (this run {})\n\
             learner: {:.0} samples/s, waiting for data {:.0}% of its time; staleness ≤ {} (dropped {})\n\
             heldout-variants success {:.3}; curve {:?}\n{}",
            learner.counters.updates,
            learner.counters.samples,
            learner.counters.version,
            learner.counters.env_steps,
            used + report.env_steps,
            report.samples_per_s,
            report.learner_wait_share * 100.0,
            report.max_staleness_seen,
            report.dropped_stale,
            eval.mean(),
            curve,
            ckpt.as_ref()
                .map_or(String::new(), |d| format!("checkpoint: {}\n", d.display()))
        )
    })?;
    Ok(0)
}

/// Offline PPO from exported advantage records.
fn offline(ctx: &Ctx, args: &TrainArgs, path: &Path, device: tch::Device) -> Result<i32> {
    let file = std::fs::File::open(path)
        .map_err(|e| anyhow!(UsageError(format!("{}: {e}", path.display()))))?;
    let mut cache = FeatureCache::default();
    let mut samples = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let r: AdvantageRecord = arbor_envs::rollout::export::parse_record(&line).map_err(|e| {
            anyhow!(UsageError(format!(
                "{}:{}: not an advantage record: {e}",
                path.display(),
                i + 1
            )))
        })?;
        if let Some(s) = cache.sample(&r, r.advantage) {
            samples.push(s);
        }
    }
    let mut learner = match (&args.checkpoint, args.resume) {
        (Some(dir), true) => Learner::load(dir, device).map_err(|e| anyhow!(UsageError(e)))?,
        _ => Learner::new(ModelConfig::default(), LearnerConfig::default(), device),
    };
    let mut last = None;
    for chunk in samples.chunks(32) {
        last = Some(learner.update(chunk, Loss::Ppo));
    }
    if let Some(dir) = &args.checkpoint {
        learner.save(dir).map_err(|e| anyhow!(e))?;
    }
    let out = serde_json::json!({
        "records": samples.len(),
        "counters": learner.counters,
        "last_loss": last.map(|u| u.loss),
    });
    emit(ctx.json, &out, || {
        format!(
            "trained on {} records: {} updates in all; last loss {:?}\n",
            samples.len(),
            learner.counters.updates,
            last.map(|u| u.loss)
        )
    })?;
    Ok(0)
}
