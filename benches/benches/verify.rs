//! Verification latency per task family, split into sandbox set-up and the
//! checks themselves.
//!
//! For each family of the bundled suite (`envs/tasks`, or `$ARBOR_TASKS`),
//! the gold solution of a few tasks is run once; then `TaskEnv::verify` of
//! those episodes is timed (group `verify`, one bench per family). Each
//! verdict also reports its own split — `verify_setup_ms` (merge the layer
//! views, fork the final snapshot, reset the session, read changed files for
//! the quality layer) and `verify_checks_ms` (the trusted runner in the fork:
//! `python3 -I -S -B`, the hidden tests) — and their medians are printed as a
//! table after the criterion output.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use arbor_benches::{BenchEnv, GroupTiming, quick_mode};
use arbor_envs::TaskEnv;
use arbor_envs::rollout::{Environment as _, Episode};
use arbor_envs::suite::{Suite, bundled_dir};
use arbor_envs::task::Family;
use criterion::{Criterion, criterion_group, criterion_main};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-bench-helper");

/// Per family: the set-up and checks milliseconds of every timed verification.
type Splits = BTreeMap<String, (Vec<u64>, Vec<u64>)>;

fn median(xs: &mut [u64]) -> u64 {
    xs.sort_unstable();
    xs.get(xs.len() / 2).copied().unwrap_or(0)
}

fn verify(c: &mut Criterion) {
    let env = BenchEnv::open(Path::new(HELPER)).expect("open a bench runtime");
    let suite = Suite::load(&bundled_dir()).expect("load the bundled task suite");
    let per_family = if quick_mode() { 1 } else { 4 };
    let splits: Mutex<Splits> = Mutex::new(BTreeMap::new());
    let mut group = GroupTiming {
        sample_size: 10,
        ..GroupTiming::DEFAULT
    }
    .group(c, "verify");
    for family in [Family::Coding, Family::Terminal] {
        let prepared: Vec<(TaskEnv, Episode)> = suite
            .tasks
            .values()
            .filter(|t| t.family == family)
            .take(per_family)
            .map(|spec| {
                let task = TaskEnv::prepare(&env.runtime, spec.clone()).expect("prepare a task");
                let (episode, _) = task.run(&spec.gold).expect("run the gold solution");
                (task, episode)
            })
            .collect();
        let name = family.to_string();
        group.bench_function(&name, |b| {
            b.iter_custom(|iters| {
                let started = Instant::now();
                for i in 0..iters {
                    let (task, episode) = &prepared[i as usize % prepared.len()];
                    let v = task.verify(episode);
                    assert!(v.success(), "{}: {}", task.spec().id, v.summary());
                    let mut s = splits.lock().expect("lock");
                    let e = s.entry(name.clone()).or_default();
                    e.0.push(v.process.verify_setup_ms);
                    e.1.push(v.process.verify_checks_ms);
                }
                started.elapsed()
            });
        });
    }
    group.finish();
    println!("\nverification latency by family (median over every timed verification)");
    println!("| family | tasks | set-up ms | checks ms | verifications |");
    println!("|---|---:|---:|---:|---:|");
    for (family, (mut setup, mut checks)) in splits.into_inner().expect("lock") {
        let n = setup.len();
        println!(
            "| {family} | {per_family} | {} | {} | {n} |",
            median(&mut setup),
            median(&mut checks)
        );
    }
}

criterion_group!(benches, verify);
criterion_main!(benches);
