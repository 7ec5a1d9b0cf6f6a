//! `arbor train --compare`: three arms at an equal environment budget
//! (executed actions + verifier runs, behaviour-cloning data included):
//!
//! - (a) `bc+branched-ppo`: BC warm start, then PPO on branch-point advantages;
//! - (b) `bc+grpo`: BC warm start, then GRPO on unbranched groups;
//! - (c) `branched-ppo`: PPO on branch-point advantages without a warm start.
//!
//! Each arm and seed is evaluated on `heldout-variants` and
//! `heldout-families` separately (episodes sampled through a shared tree per
//! task; success = the root's Monte-Carlo value), with paired-bootstrap 95%
//! intervals over tasks, the environment budget, wall time, and a learning
//! curve (success on `heldout-variants` against budget spent) drawn as PNG.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arbor_rollout::Environment;
use arbor_rollout::driver::{DriverConfig, Progress, Strategy, run_tree};
use arbor_rollout::policy::{GoldPolicy, Policy, Rng};
use serde::{Deserialize, Serialize};
use tch::Device;

use crate::attached::{AttachedConfig, AttachedReport, Credit, run_attached};
use crate::learner::{Learner, LearnerConfig, Loss, Sample};
use crate::model::ModelConfig;
use crate::policy::{FeatureCache, NetPolicy, bc_samples};

/// One arm of the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Arm {
    /// Its name.
    pub name: &'static str,
    /// Behaviour cloning from gold trajectories first.
    pub warm_start: bool,
    /// Branched PPO or GRPO.
    pub credit: Credit,
}

/// The three arms.
pub const ARMS: [Arm; 3] = [
    Arm {
        name: "bc+branched-ppo",
        warm_start: true,
        credit: Credit::Branched,
    },
    Arm {
        name: "bc+grpo",
        warm_start: true,
        credit: Credit::Grpo,
    },
    Arm {
        name: "branched-ppo",
        warm_start: false,
        credit: Credit::Branched,
    },
];

/// Settings of the experiment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExperimentConfig {
    /// Label (`smoke` or `full`).
    pub label: String,
    /// Seeds per arm.
    pub seeds: Vec<u64>,
    /// Environment budget per arm and seed (BC data included).
    pub budget: u64,
    /// Budget of one training tree.
    pub tree_budget: u64,
    /// Episodes per task in the final evaluation.
    pub eval_episodes: usize,
    /// Points of the learning curve (besides the start).
    pub curve_points: usize,
    /// Episodes per task for a learning-curve point.
    pub curve_episodes: usize,
    /// Rollout workers.
    pub workers: usize,
    /// Samples per update.
    pub batch: usize,
    /// Passes over the gold data for BC.
    pub bc_epochs: usize,
    /// Staleness bound (versions).
    pub max_staleness: u64,
    /// Optimiser settings (behaviour cloning uses their learning rate).
    pub learner: LearnerConfig,
    /// Adam learning rate of the RL phases (PPO, GRPO), for every arm.
    pub rl_lr: f64,
    /// Passes over each batch of the RL phases.
    pub ppo_epochs: usize,
    /// Network shape.
    pub model: ModelConfig,
    /// Where the report, plot and checkpoints go.
    pub out: PathBuf,
}

impl ExperimentConfig {
    /// The labelled smoke version: one seed per arm, a small budget.
    pub fn smoke(out: PathBuf) -> Self {
        Self {
            label: "smoke".to_owned(),
            seeds: vec![1],
            budget: 500,
            tree_budget: 40,
            eval_episodes: 10,
            curve_points: 2,
            curve_episodes: 4,
            workers: 2,
            batch: 32,
            bc_epochs: 60,
            max_staleness: 4,
            learner: LearnerConfig::default(),
            rl_lr: RL_LR,
            ppo_epochs: PPO_EPOCHS,
            model: ModelConfig::default(),
            out,
        }
    }

    /// The full experiment: three seeds per arm.
    pub fn full(out: PathBuf) -> Self {
        Self {
            label: "full".to_owned(),
            seeds: vec![1, 2, 3],
            budget: 1500,
            tree_budget: 60,
            eval_episodes: 20,
            curve_points: 3,
            curve_episodes: 6,
            ..Self::smoke(out)
        }
    }
}

/// Adam learning rate of PPO and GRPO. Behaviour cloning runs at
/// [`LearnerConfig::default`]'s 1e-2; PPO at that rate undid it within a
/// few updates (train success 0.30 → 0.10 in the first full run).
pub const RL_LR: f64 = 1e-3;
/// PPO passes over each batch.
pub const PPO_EPOCHS: usize = 4;

/// Success per task of one evaluation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Task → success rate.
    pub tasks: BTreeMap<String, f64>,
    /// Budget the evaluation used (not counted against training).
    pub env_steps: u64,
}

impl Evaluation {
    /// Mean over tasks.
    pub fn mean(&self) -> f64 {
        if self.tasks.is_empty() {
            return 0.0;
        }
        self.tasks.values().sum::<f64>() / self.tasks.len() as f64
    }
}

/// One arm and seed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    /// The arm.
    pub arm: String,
    /// The seed.
    pub seed: u64,
    /// Learning curve: (training budget spent, success on heldout-variants).
    pub curve: Vec<(u64, f64)>,
    /// Final evaluation per split.
    pub eval: BTreeMap<String, Evaluation>,
    /// Training budget spent (BC data included).
    pub env_steps: u64,
    /// Wall seconds (training and evaluation).
    pub wall_s: f64,
    /// The attached phases.
    pub attached: Vec<AttachedReport>,
}

/// `episodes` independent episodes per task with `policy`: success = the mean
/// reward of the finished episodes (an unbiased Monte-Carlo estimate; runtime
/// faults are left out). The budget pays for every episode in full, so none
/// is cut short. The result depends on the seed only, not on the number of
/// workers or their scheduling: the i-th episode's first action is the i-th
/// draw of the tree's generator and its path has the i-th job's seed.
///
/// # Errors
/// A tree could not be grown.
pub async fn evaluate(
    tasks: &[Arc<dyn Environment>],
    policy: Arc<dyn Policy>,
    episodes: usize,
    workers: usize,
    seed: u64,
) -> Result<Evaluation, String> {
    let mut out = Evaluation::default();
    for (i, task) in tasks.iter().enumerate() {
        let max = task.limits().max_steps as u64 + 1;
        let mut dc = DriverConfig::new(
            episodes as u64 * (max + 1),
            Strategy::Independent { episodes },
        );
        dc.workers = workers;
        dc.seed = seed.wrapping_mul(31).wrapping_add(i as u64);
        let tree = run_tree(
            Arc::clone(task),
            Arc::clone(&policy),
            &dc,
            Arc::new(Progress::default()),
        )
        .await
        .map_err(|e| e.to_string())?;
        out.env_steps += tree.budget.used();
        out.tasks
            .insert(task.id().to_owned(), tree.success_rate().unwrap_or(0.0));
    }
    Ok(out)
}

/// Gold trajectories of `tasks` as BC samples; returns them and the budget used.
///
/// # Errors
/// A tree could not be grown.
pub async fn gold_samples(tasks: &[Arc<dyn Environment>]) -> Result<(Vec<Sample>, u64), String> {
    let mut cache = FeatureCache::default();
    let mut samples = Vec::new();
    let mut used = 0;
    for task in tasks {
        let max = task.limits().max_steps as u64 + 2;
        let mut dc = DriverConfig::new(max + 1, Strategy::Independent { episodes: 1 });
        dc.workers = 1;
        let tree = run_tree(
            Arc::clone(task),
            Arc::new(GoldPolicy),
            &dc,
            Arc::new(Progress::default()),
        )
        .await
        .map_err(|e| e.to_string())?;
        used += tree.budget.used();
        samples.extend(bc_samples(&tree, &mut cache));
    }
    Ok((samples, used))
}

/// Behaviour cloning: `epochs` shuffled passes in batches of `batch`.
pub fn behaviour_clone(
    learner: &mut Learner,
    samples: &[Sample],
    epochs: usize,
    batch: usize,
    seed: u64,
) {
    if samples.is_empty() {
        return;
    }
    let mut order: Vec<usize> = (0..samples.len()).collect();
    let mut rng = Rng::new(seed);
    for _ in 0..epochs {
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        for chunk in order.chunks(batch.max(1)) {
            let b: Vec<Sample> = chunk.iter().map(|&i| samples[i].clone()).collect();
            learner.update(&b, Loss::Bc);
        }
    }
}

/// The task sets of a run.
#[derive(Clone)]
pub struct TaskSets {
    /// Training tasks.
    pub train: Vec<Arc<dyn Environment>>,
    /// Unseen variants of trained groups.
    pub heldout_variants: Vec<Arc<dyn Environment>>,
    /// Groups never trained on.
    pub heldout_families: Vec<Arc<dyn Environment>>,
}

impl std::fmt::Debug for TaskSets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskSets")
            .field("train", &self.train.len())
            .field("heldout_variants", &self.heldout_variants.len())
            .field("heldout_families", &self.heldout_families.len())
            .finish()
    }
}

/// Run one arm with one seed.
///
/// # Errors
/// A tree could not be grown, or the learner failed.
pub async fn run_arm(
    arm: Arm,
    seed: u64,
    sets: &TaskSets,
    cfg: &ExperimentConfig,
    device: Device,
    log: &(dyn Fn(String) + Sync),
) -> Result<RunResult, String> {
    let started = Instant::now();
    let model = ModelConfig { seed, ..cfg.model };
    let mut learner = Learner::new(model, cfg.learner, device);
    // The acting policy explores (ε = 0.2); evaluation uses an exact copy.
    let actor = Arc::new(NetPolicy::new(model, device).exploring(0.2));
    actor.publish(&learner.net, 0)?;
    let evaluator = Arc::new(NetPolicy::new(model, device));
    let mut curve = Vec::new();
    let point = |learner_env: u64, net: &crate::model::Drrn, version: u64| {
        let evaluator = Arc::clone(&evaluator);
        let published = evaluator.publish(net, version);
        async move {
            published?;
            let e = evaluate(
                &sets.heldout_variants,
                evaluator,
                cfg.curve_episodes,
                cfg.workers,
                seed ^ 0xc0,
            )
            .await?;
            Ok::<(u64, f64), String>((learner_env, e.mean()))
        }
    };
    curve.push(point(0, &learner.net, 0).await?);
    log(format!(
        "{} seed {seed}: start, heldout-variants {:.2}",
        arm.name, curve[0].1
    ));
    let mut env_steps = 0;
    if arm.warm_start {
        let (samples, used) = gold_samples(&sets.train).await?;
        env_steps += used;
        behaviour_clone(&mut learner, &samples, cfg.bc_epochs, cfg.batch, seed);
        learner.counters.version += 1;
        actor.publish(&learner.net, learner.counters.version)?;
        log(format!(
            "{} seed {seed}: behaviour cloning on {} gold decisions ({used} budget)",
            arm.name,
            samples.len()
        ));
        curve.push(point(env_steps, &learner.net, learner.counters.version).await?);
        log(format!(
            "{} seed {seed}: after behaviour cloning, heldout-variants {:.2}",
            arm.name,
            curve.last().map_or(0.0, |c| c.1)
        ));
    }
    learner.set_lr(cfg.rl_lr);
    let remaining = cfg.budget.saturating_sub(env_steps);
    let phases = cfg.curve_points.max(1) as u64;
    let mut attached = Vec::new();
    let mut next_task = 0;
    for phase in 0..phases {
        let share = remaining / phases
            + if phase + 1 == phases {
                remaining % phases
            } else {
                0
            };
        let ac = AttachedConfig {
            budget: share,
            tree_budget: cfg.tree_budget,
            workers: cfg.workers,
            batch: cfg.batch,
            epochs: cfg.ppo_epochs,
            channel: 8,
            max_staleness: cfg.max_staleness,
            credit: arm.credit,
            seed: seed.wrapping_mul(101).wrapping_add(phase),
            first_task: next_task,
        };
        let (l, report, _) = run_attached(&sets.train, Arc::clone(&actor), learner, &ac).await?;
        learner = l;
        next_task = report.next_task;
        env_steps += report.env_steps;
        learner.counters.env_steps = env_steps;
        log(format!(
            "{} seed {seed}: {} trees, {} updates, train success {:.2}, versions per tree ≤ {}",
            arm.name,
            report.trees,
            report.updates,
            report.train_success,
            report.max_versions_per_tree
        ));
        attached.push(report);
        curve.push(point(env_steps, &learner.net, learner.counters.version).await?);
        log(format!(
            "{} seed {seed}: budget {env_steps}, heldout-variants {:.2}",
            arm.name,
            curve.last().map_or(0.0, |c| c.1)
        ));
    }
    let ckpt = cfg
        .out
        .join("checkpoints")
        .join(format!("{}-seed{seed}", arm.name));
    learner.save(&ckpt)?;
    evaluator.publish(&learner.net, learner.counters.version)?;
    let mut eval = BTreeMap::new();
    for (split, tasks) in [
        ("heldout-variants", &sets.heldout_variants),
        ("heldout-families", &sets.heldout_families),
    ] {
        let e = evaluate(
            tasks,
            Arc::clone(&evaluator) as Arc<dyn Policy>,
            cfg.eval_episodes,
            cfg.workers,
            seed ^ 0xe7,
        )
        .await?;
        log(format!(
            "{} seed {seed}: final {split} {:.3}",
            arm.name,
            e.mean()
        ));
        eval.insert(split.to_owned(), e);
    }
    Ok(RunResult {
        arm: arm.name.to_owned(),
        seed,
        curve,
        eval,
        env_steps,
        wall_s: started.elapsed().as_secs_f64(),
        attached,
    })
}

/// Mean and paired-bootstrap 95% interval of per-task values.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// The mean.
    pub mean: f64,
    /// 2.5th percentile.
    pub lo: f64,
    /// 97.5th percentile.
    pub hi: f64,
}

/// Bootstrap over tasks (the same resampled tasks for every series, so
/// differences are paired): the interval of each series' mean and of
/// `series[i] − series[reference]`.
pub fn paired_bootstrap(
    series: &[Vec<f64>],
    reference: usize,
    rounds: usize,
    seed: u64,
) -> (Vec<Interval>, Vec<Interval>) {
    let n = series.first().map_or(0, Vec::len);
    let mut rng = Rng::new(seed);
    let mut means: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); series.len()];
    let mut diffs: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); series.len()];
    if n == 0 {
        let z = Interval {
            mean: 0.0,
            lo: 0.0,
            hi: 0.0,
        };
        return (vec![z; series.len()], vec![z; series.len()]);
    }
    for _ in 0..rounds {
        let idx: Vec<usize> = (0..n).map(|_| rng.below(n)).collect();
        let m: Vec<f64> = series
            .iter()
            .map(|s| idx.iter().map(|&i| s[i]).sum::<f64>() / n as f64)
            .collect();
        for (k, v) in m.iter().enumerate() {
            means[k].push(*v);
            diffs[k].push(v - m[reference]);
        }
    }
    let interval = |mean: f64, mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)];
        Interval {
            mean,
            lo: at(0.025),
            hi: at(0.975),
        }
    };
    let mean_of = |s: &Vec<f64>| s.iter().sum::<f64>() / n as f64;
    let a = series
        .iter()
        .zip(means)
        .map(|(s, v)| interval(mean_of(s), v))
        .collect();
    let d = series
        .iter()
        .zip(diffs)
        .map(|(s, v)| interval(mean_of(s) - mean_of(&series[reference]), v))
        .collect();
    (a, d)
}

/// The report of a whole experiment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// Settings.
    pub config: ExperimentConfig,
    /// Every arm and seed.
    pub runs: Vec<RunResult>,
    /// The device used.
    pub device: String,
    /// Markdown table.
    pub table: String,
}

/// Per split and arm: per-task success averaged over seeds.
fn per_task(runs: &[RunResult], arm: &str, split: &str) -> Vec<(String, f64)> {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.arm == arm) {
        if let Some(e) = r.eval.get(split) {
            for (t, v) in &e.tasks {
                let s = sums.entry(t.clone()).or_default();
                s.0 += v;
                s.1 += 1;
            }
        }
    }
    sums.into_iter()
        .map(|(t, (s, n))| (t, s / n as f64))
        .collect()
}

/// The Markdown table: success with 95% intervals per split, the difference
/// to arm (b) with its paired interval, budget and wall time.
pub fn table(runs: &[RunResult], cfg: &ExperimentConfig) -> String {
    let mut s = String::from(
        "| arm | split | success (95% CI) | vs bc+grpo (paired 95% CI) | env budget per seed | wall per seed | seeds |\n|---|---|---|---|---:|---:|---:|\n",
    );
    for split in ["heldout-variants", "heldout-families"] {
        let series: Vec<Vec<f64>> = ARMS
            .iter()
            .map(|a| {
                per_task(runs, a.name, split)
                    .into_iter()
                    .map(|(_, v)| v)
                    .collect()
            })
            .collect();
        let (iv, diff) = paired_bootstrap(&series, 1, 2000, 7);
        for (k, arm) in ARMS.iter().enumerate() {
            let rs: Vec<&RunResult> = runs.iter().filter(|r| r.arm == arm.name).collect();
            let budget = rs.iter().map(|r| r.env_steps).sum::<u64>() / rs.len().max(1) as u64;
            let wall = rs.iter().map(|r| r.wall_s).sum::<f64>() / rs.len().max(1) as f64;
            let d = if k == 1 {
                "—".to_owned()
            } else {
                format!(
                    "{:+.3} [{:+.3}, {:+.3}]",
                    diff[k].mean, diff[k].lo, diff[k].hi
                )
            };
            s.push_str(&format!(
                "| {} | {split} | {:.3} [{:.3}, {:.3}] | {d} | {budget} | {wall:.0} s | {} |\n",
                arm.name,
                iv[k].mean,
                iv[k].lo,
                iv[k].hi,
                rs.len()
            ));
        }
    }
    s.push_str(&format!(
        "\n{} run: {} seed(s) per arm, training budget {} (actions + verifier runs, BC data included) per arm and seed, {} evaluation episodes per task; behaviour cloning {} epochs at Adam lr {}, PPO/GRPO at lr {} with {} passes per batch; intervals: paired bootstrap over tasks (2,000 resamples).\n",
        cfg.label,
        cfg.seeds.len(),
        cfg.budget,
        cfg.eval_episodes,
        cfg.bc_epochs,
        cfg.learner.lr,
        cfg.rl_lr,
        cfg.ppo_epochs
    ));
    s
}

/// Draw the learning curves (mean over seeds per arm) as a PNG.
///
/// # Errors
/// Drawing or writing failed.
pub fn plot_curves(runs: &[RunResult], path: &Path) -> Result<(), String> {
    crate::plot::curves(
        &ARMS
            .iter()
            .map(|a| {
                let rs: Vec<&RunResult> = runs.iter().filter(|r| r.arm == a.name).collect();
                let n = rs.iter().map(|r| r.curve.len()).min().unwrap_or(0);
                let pts: Vec<(f64, f64)> = (0..n)
                    .map(|i| {
                        let x =
                            rs.iter().map(|r| r.curve[i].0 as f64).sum::<f64>() / rs.len() as f64;
                        let y = rs.iter().map(|r| r.curve[i].1).sum::<f64>() / rs.len() as f64;
                        (x, y)
                    })
                    .collect();
                (a.name.to_owned(), pts)
            })
            .collect::<Vec<_>>(),
        "training budget (actions + verifier runs)",
        "success on heldout-variants",
        path,
    )
}
