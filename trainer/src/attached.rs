//! The attached loop: rollout workers and the learner run concurrently.
//!
//! Workers (tokio tasks) grow trees with the actor policy and stream
//! training samples over a bounded channel; the learner (its own thread:
//! libtorch calls block) batches them, updates, and publishes new weights
//! into the actor, which the workers pick up at their next decision. Every
//! edge records the version that chose it; samples older than
//! `max_staleness` versions are dropped and counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arbor_rollout::Environment;
use arbor_rollout::driver::{DriverConfig, Progress, Strategy, run_tree};
use arbor_rollout::policy::Policy;
use arbor_rollout::tree::RolloutTree;
use serde::{Deserialize, Serialize};

use crate::learner::{Learner, Loss, Sample};
use crate::policy::{NetPolicy, branch_samples, grpo_samples, vine_samples};

/// What the workers grow and how the learner uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Credit {
    /// Branched trees (uniform, 3 ways every 2 steps); PPO on branch-point advantages.
    Branched,
    /// Unbranched groups (`independent`); PPO objective on GRPO episode advantages.
    Grpo,
    /// VinePPO-style (`vine:4`): one episode, four Monte-Carlo continuations
    /// from each of its states; PPO on the episode's steps with
    /// `V̂(s_{t+1}) − V̂(s_t)`.
    Vine,
}

/// Settings of one attached run.
#[derive(Clone, Debug)]
pub struct AttachedConfig {
    /// Environment budget (actions + verifier runs) to spend, over all trees.
    pub budget: u64,
    /// Budget of one tree.
    pub tree_budget: u64,
    /// Rollout workers (trees grown at once).
    pub workers: usize,
    /// Samples per update.
    pub batch: usize,
    /// PPO passes over each batch before its weights are published (the
    /// clipped ratio against the behaviour log-probs keeps repeated passes
    /// from moving the policy too far).
    pub epochs: usize,
    /// Capacity of the sample channel (back-pressure).
    pub channel: usize,
    /// Drop samples more than this many versions old.
    pub max_staleness: u64,
    /// Branched or GRPO.
    pub credit: Credit,
    /// Seed of the trees.
    pub seed: u64,
    /// Where the task cursor starts: tasks are taken in turn from here
    /// (modulo their number). A run made of several attached phases passes
    /// each phase's [`AttachedReport::next_task`] on, so that every task is
    /// trained on, not only the first few of each phase.
    pub first_task: u64,
}

/// What happened during an attached run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AttachedReport {
    /// Trees grown.
    pub trees: usize,
    /// Budget spent.
    pub env_steps: u64,
    /// Samples received by the learner.
    pub samples: u64,
    /// Samples dropped as too stale.
    pub dropped_stale: u64,
    /// Largest staleness seen (versions).
    pub max_staleness_seen: u64,
    /// Updates made.
    pub updates: u64,
    /// Distinct policy versions on the edges of the trees.
    pub versions_in_trees: Vec<u64>,
    /// The most versions found on one tree's edges.
    pub max_versions_per_tree: usize,
    /// Learner throughput: samples per second of learner run time.
    pub samples_per_s: f64,
    /// Share of the learner's time spent waiting for data.
    pub learner_wait_share: f64,
    /// Seconds during which a learner update and a rollout worker ran at the same time.
    pub overlap_s: f64,
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// Mean leaf success of the trees grown.
    pub train_success: f64,
    /// The task cursor after the run: the next phase's `first_task`.
    pub next_task: u64,
    /// Trees grown per task id.
    pub trees_per_task: std::collections::BTreeMap<String, usize>,
}

/// Intervals of activity, for measuring overlap.
#[derive(Debug, Default)]
struct Activity {
    learner: Vec<(Instant, Instant)>,
    workers: Vec<(Instant, Instant)>,
}

fn overlap(a: &[(Instant, Instant)], b: &[(Instant, Instant)]) -> f64 {
    let mut total = 0.0;
    for (s1, e1) in a {
        for (s2, e2) in b {
            let start = (*s1).max(*s2);
            let end = (*e1).min(*e2);
            if end > start {
                total += (end - start).as_secs_f64();
            }
        }
    }
    total
}

/// Run rollouts and learning concurrently until `cfg.budget` is spent.
/// `tasks` are cycled through; the learner trains `learner` and publishes
/// into `actor`.
///
/// # Errors
/// A tree could not be grown (runtime failure) or the learner thread died.
pub async fn run_attached(
    tasks: &[Arc<dyn Environment>],
    actor: Arc<NetPolicy>,
    learner: Learner,
    cfg: &AttachedConfig,
) -> Result<(Learner, AttachedReport, Vec<RolloutTree>), String> {
    let started = Instant::now();
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Sample>>(cfg.channel.max(1));
    let activity = Arc::new(Mutex::new(Activity::default()));
    let spent = Arc::new(AtomicU64::new(0));
    // The learner thread.
    let learner_actor = Arc::clone(&actor);
    let learner_activity = Arc::clone(&activity);
    let batch = cfg.batch.max(1);
    let epochs = cfg.epochs.max(1);
    let max_stale = cfg.max_staleness;
    let learner_thread = std::thread::spawn(move || {
        let mut learner = learner;
        let mut buffer: Vec<Sample> = Vec::new();
        let (mut samples, mut dropped, mut worst) = (0u64, 0u64, 0u64);
        let mut waited = Duration::ZERO;
        let t0 = Instant::now();
        loop {
            let w = Instant::now();
            let msg = rx.recv();
            waited += w.elapsed();
            let Ok(incoming) = msg else { break };
            for s in incoming {
                samples += 1;
                let stale = learner.counters.version.saturating_sub(s.version);
                worst = worst.max(stale);
                if stale > max_stale {
                    dropped += 1;
                } else {
                    buffer.push(s);
                }
            }
            while buffer.len() >= batch {
                let chunk: Vec<Sample> = buffer.drain(..batch).collect();
                let u0 = Instant::now();
                for _ in 0..epochs {
                    learner.update(&chunk, Loss::Ppo);
                }
                learner.counters.version += 1;
                let _ = learner_actor.publish(&learner.net, learner.counters.version);
                if let Ok(mut a) = learner_activity.lock() {
                    a.learner.push((u0, Instant::now()));
                }
            }
        }
        if !buffer.is_empty() {
            let u0 = Instant::now();
            for _ in 0..epochs {
                learner.update(&buffer, Loss::Ppo);
            }
            learner.counters.version += 1;
            let _ = learner_actor.publish(&learner.net, learner.counters.version);
            if let Ok(mut a) = learner_activity.lock() {
                a.learner.push((u0, Instant::now()));
            }
        }
        let run = t0.elapsed().as_secs_f64().max(1e-9);
        (
            learner,
            samples,
            dropped,
            worst,
            waited.as_secs_f64() / run,
            samples as f64 / run,
        )
    });

    // The workers.
    let next_task = Arc::new(AtomicU64::new(cfg.first_task));
    let trees: Arc<Mutex<Vec<RolloutTree>>> = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for w in 0..cfg.workers.max(1) {
        let tasks: Vec<Arc<dyn Environment>> = tasks.to_vec();
        let actor = Arc::clone(&actor);
        let tx = tx.clone();
        let spent = Arc::clone(&spent);
        let next_task = Arc::clone(&next_task);
        let trees = Arc::clone(&trees);
        let activity = Arc::clone(&activity);
        let cfg = cfg.clone();
        handles.push(tokio::spawn(async move {
            let mut cache = actor.feature_cache();
            loop {
                // Reserve this tree's budget (what is left, up to a tree's worth).
                let reserved = spent.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                    let left = cfg.budget.saturating_sub(s);
                    (left >= 4).then(|| s + left.min(cfg.tree_budget))
                });
                let Ok(before) = reserved else { break };
                let budget = cfg.budget.saturating_sub(before).min(cfg.tree_budget);
                let i = next_task.fetch_add(1, Ordering::SeqCst) as usize % tasks.len();
                let strategy = match cfg.credit {
                    Credit::Branched => Strategy::Uniform { every: 2, width: 3 },
                    Credit::Grpo => Strategy::Independent { episodes: 10_000 },
                    Credit::Vine => Strategy::Vine { k: 4 },
                };
                let mut dc = DriverConfig::new(budget, strategy);
                dc.workers = 1;
                dc.seed = cfg
                    .seed
                    .wrapping_mul(1_000_003)
                    .wrapping_add(i as u64 * 7919 + w as u64);
                let t0 = Instant::now();
                let policy: Arc<dyn Policy> = actor.clone();
                let tree = run_tree(
                    Arc::clone(&tasks[i]),
                    policy,
                    &dc,
                    Arc::new(Progress::default()),
                )
                .await
                .map_err(|e| e.to_string())?;
                if let Ok(mut a) = activity.lock() {
                    a.workers.push((t0, Instant::now()));
                }
                // Give back what the tree did not use.
                spent.fetch_sub(budget - tree.budget.used().min(budget), Ordering::SeqCst);
                let samples = match cfg.credit {
                    Credit::Branched => branch_samples(&tree, &mut cache),
                    Credit::Grpo => grpo_samples(&tree, &mut cache),
                    Credit::Vine => vine_samples(&tree, &mut cache),
                };
                let tx = tx.clone();
                // A blocking send on a bounded channel: back-pressure on the workers.
                tokio::task::spawn_blocking(move || tx.send(samples))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|_| "the learner stopped".to_owned())?;
                if let Ok(mut t) = trees.lock() {
                    t.push(tree);
                }
            }
            Ok::<(), String>(())
        }));
    }
    drop(tx);
    let mut first_error = None;
    for h in handles {
        match h.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => first_error = first_error.or(Some(e)),
            Err(e) => first_error = first_error.or(Some(e.to_string())),
        }
    }
    let (learner, samples, dropped, worst, wait_share, rate) =
        tokio::task::spawn_blocking(move || {
            learner_thread
                .join()
                .map_err(|_| "the learner thread panicked".to_owned())
        })
        .await
        .map_err(|e| e.to_string())??;
    if let Some(e) = first_error {
        return Err(e);
    }
    let trees = std::mem::take(&mut *trees.lock().map_err(|_| "lock")?);
    let mut versions: Vec<u64> = trees
        .iter()
        .flat_map(|t| t.edges.iter().map(|e| e.policy_version))
        .collect();
    versions.sort_unstable();
    versions.dedup();
    let per_tree = trees
        .iter()
        .map(|t| {
            let mut v: Vec<u64> = t.edges.iter().map(|e| e.policy_version).collect();
            v.sort_unstable();
            v.dedup();
            v.len()
        })
        .max()
        .unwrap_or(0);
    let act = activity.lock().map_err(|_| "lock")?;
    let successes: Vec<f64> = trees.iter().filter_map(RolloutTree::success_rate).collect();
    let mut trees_per_task = std::collections::BTreeMap::new();
    for t in &trees {
        *trees_per_task.entry(t.task.clone()).or_insert(0) += 1;
    }
    let report = AttachedReport {
        trees: trees.len(),
        env_steps: trees.iter().map(|t| t.budget.used()).sum(),
        samples,
        dropped_stale: dropped,
        max_staleness_seen: worst,
        updates: learner.counters.updates,
        versions_in_trees: versions,
        max_versions_per_tree: per_tree,
        samples_per_s: rate,
        learner_wait_share: wait_share,
        overlap_s: overlap(&act.learner, &act.workers),
        wall_s: started.elapsed().as_secs_f64(),
        train_success: if successes.is_empty() {
            0.0
        } else {
            successes.iter().sum::<f64>() / successes.len() as f64
        },
        next_task: next_task.load(Ordering::SeqCst),
        trees_per_task,
    };
    drop(act);
    Ok((learner, report, trees))
}
