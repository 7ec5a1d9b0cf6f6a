//! The rollout driver on the bundled suite, 2 workers: branched trees against
//! the same budget spent on independent (unbranched) episodes.
//!
//! Group `rollout`: `branched` (uniform, 3 ways every 2 steps) and
//! `independent` (unbranched episodes from the root), both under the
//! `mixture:0.6` policy with the same budget (executed actions + verifier
//! runs) per task; criterion times one tree per task of the set. Printed
//! after the criterion output, medians over every timed tree:
//! environment steps/s and forks/s, the share of worker time spent forking
//! and snapshotting (target under 10%), wall time per tree, and the number
//! of distinct (state, action) pairs that receive a non-zero advantage.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arbor_benches::{BenchEnv, GroupTiming, quick_mode};
use arbor_envs::TaskEnv;
use arbor_envs::rollout::Environment;
use arbor_envs::rollout::credit::CreditConfig;
use arbor_envs::rollout::driver::{DriverConfig, Progress, Strategy, run_tree};
use arbor_envs::rollout::export::{informative_pairs, records};
use arbor_envs::rollout::policy::MixturePolicy;
use arbor_envs::rollout::tree::RolloutTree;
use arbor_envs::suite::{Suite, bundled_dir};
use criterion::{Criterion, criterion_group, criterion_main};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-bench-helper");

/// Tasks timed: the first variant of four groups of the training split,
/// coding and terminal alternating (quick mode: two).
fn task_set(suite: &Suite) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for t in suite.split("train").expect("train split") {
        if seen.insert(t.group.clone()) {
            out.push(t.id.clone());
        }
    }
    let (coding, terminal): (Vec<String>, Vec<String>) =
        out.into_iter().partition(|id| id.starts_with("py-"));
    let mut mixed: Vec<String> = coding
        .into_iter()
        .zip(terminal)
        .flat_map(|(a, b)| [a, b])
        .collect();
    mixed.truncate(if quick_mode() { 2 } else { 4 });
    mixed
}

#[derive(Default)]
struct Tally {
    wall: Vec<f64>,
    steps_per_s: Vec<f64>,
    forks_per_s: Vec<f64>,
    share: Vec<f64>,
    informative: Vec<f64>,
    success: Vec<f64>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn record(t: &mut Tally, tree: &RolloutTree) {
    let s = &tree.stats;
    let busy = s.fork_s + s.snapshot_s + s.action_s + s.verify_s;
    t.wall.push(s.wall_s);
    t.steps_per_s
        .push(tree.budget.actions as f64 / s.wall_s.max(1e-9));
    t.forks_per_s.push(s.forks as f64 / s.wall_s.max(1e-9));
    t.share.push(if busy > 0.0 {
        (s.fork_s + s.snapshot_s) / busy
    } else {
        0.0
    });
    let recs = records(tree, &CreditConfig::default()).expect("credit");
    t.informative.push(informative_pairs(&recs) as f64);
    t.success.push(tree.success_rate().unwrap_or(0.0));
}

fn rollout(c: &mut Criterion) {
    let env = BenchEnv::open(Path::new(HELPER)).expect("open a bench runtime");
    env.runtime.warm_up(Duration::from_secs(10)).ok();
    let suite = Suite::load(&bundled_dir()).expect("the bundled suite");
    let budget: u64 = if quick_mode() { 30 } else { 80 };
    let tasks: Vec<Arc<dyn Environment>> = task_set(&suite)
        .iter()
        .map(|id| {
            Arc::new(
                TaskEnv::prepare(&env.runtime, suite.get(id).expect("task").clone())
                    .expect("prepare"),
            ) as Arc<dyn Environment>
        })
        .collect();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio");
    let tallies: Mutex<BTreeMap<&str, Tally>> = Mutex::new(BTreeMap::new());
    let mut group = GroupTiming {
        sample_size: 10,
        warm_up: Duration::from_millis(500),
        measurement: Duration::from_secs(if quick_mode() { 1 } else { 60 }),
    }
    .group(c, "rollout");
    let strategies = [
        ("branched", Strategy::Uniform { every: 2, width: 3 }),
        ("independent", Strategy::Independent { episodes: 10_000 }),
    ];
    let mut seed = 0u64;
    for (name, strategy) in strategies {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    for task in &tasks {
                        seed += 1;
                        let mut cfg = DriverConfig::new(budget, strategy);
                        cfg.workers = 2;
                        cfg.seed = seed;
                        let started = Instant::now();
                        let tree = tokio
                            .block_on(run_tree(
                                Arc::clone(task),
                                Arc::new(MixturePolicy { p: 0.6 }),
                                &cfg,
                                Arc::new(Progress::default()),
                            ))
                            .expect("grow a tree");
                        total += started.elapsed();
                        assert!(tree.budget.used() <= budget);
                        record(
                            tallies.lock().expect("lock").entry(name).or_default(),
                            &tree,
                        );
                    }
                }
                total / u32::try_from(tasks.len()).unwrap_or(1)
            });
        });
    }
    group.finish();
    println!(
        "\nrollout driver, 2 workers, mixture:0.6, budget {budget} (actions + verifier runs) per tree, {} tasks; medians over every timed tree",
        tasks.len()
    );
    println!(
        "| strategy | wall per tree | env steps/s | forks/s | fork+snapshot share of worker time | (state, action) pairs with A ≠ 0 | success rate | trees |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, mut t) in tallies.into_inner().expect("lock") {
        let n = t.wall.len();
        println!(
            "| {name} | {:.2} s | {:.1} | {:.1} | {:.1}% | {:.0} | {:.0}% | {n} |",
            median(&mut t.wall),
            median(&mut t.steps_per_s),
            median(&mut t.forks_per_s),
            median(&mut t.share) * 100.0,
            median(&mut t.informative),
            median(&mut t.success) * 100.0,
        );
    }
}

criterion_group!(benches, rollout);
criterion_main!(benches);
