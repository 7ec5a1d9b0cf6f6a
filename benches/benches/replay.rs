//! Replay throughput beside the original execution time.
//!
//! Cases (group `replay`), on a 20-step chain of ordinary coding actions
//! (file writes, Python, a test file, git) over a 100-file workspace:
//! - `record_20_steps`: running the chain linearly in one sandbox and
//!   snapshotting after every step (the original execution);
//! - `replay_20_steps`: `arbor_runtime::replay::replay` of the recorded
//!   chain, each step re-executed in a fresh fork and compared;
//!   criterion reports steps per second (`Throughput::Elements(20)`).

use std::path::Path;
use std::time::{Duration, Instant};

use arbor_benches::{BenchEnv, GroupTiming, Workloads};
use arbor_runtime::replay::{ReplayOptions, replay};
use arbor_runtime::{ExecOptions, Snapshot};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-bench-helper");

/// The chain, one shell command per step.
const STEPS: &[&str] = &[
    "printf 'def add(a, b):\\n    return a + b\\n' > calc.py",
    "python3 -c 'import calc; print(calc.add(2, 3))'",
    "printf 'import calc\\nassert calc.add(1, 2) == 3\\nprint(\"ok\")\\n' > test_calc.py",
    "python3 test_calc.py",
    "git init -q . && git add -A && git commit -qm init && git log --oneline",
    "sed -i 's/a + b/b + a/' calc.py",
    "python3 test_calc.py",
    "git commit -qam swap && git log --oneline | wc -l",
    "mkdir -p data && seq 1 100 > data/n.txt",
    "python3 -c 'print(sum(map(int, open(\"data/n.txt\"))))'",
    "cat data/n.txt | tail -n 3",
    "git add -A && git commit -qm data",
    "cd data && ls && cd ..",
    "rm data/n.txt && ls data",
    "echo done > status.txt",
    "git status --short",
    "python3 -c 'import json; print(json.dumps({\"a\": 1}))' > out.json",
    "cat out.json",
    "git add -A && git commit -qm out && git log --oneline",
    "python3 test_calc.py",
];

/// Run the chain linearly, snapshotting after each step; returns the last
/// snapshot and the time the steps and snapshots took.
fn record(base: &Snapshot) -> (Snapshot, Duration) {
    let mut sandbox = base.open().expect("open a sandbox");
    let started = Instant::now();
    let mut last = None;
    for step in STEPS {
        let obs = sandbox
            .exec(step, &ExecOptions::default())
            .expect("exec a chain step");
        assert_eq!(
            obs.code(),
            Some(0),
            "{step}: {}",
            String::from_utf8_lossy(&obs.stderr)
        );
        last = Some(sandbox.snapshot().expect("snapshot a chain step"));
    }
    let elapsed = started.elapsed();
    (last.expect("a non-empty chain"), elapsed)
}

fn replay_chain(c: &mut Criterion) {
    let env = BenchEnv::open(Path::new(HELPER)).expect("open a bench runtime");
    let (base, _src) = env
        .import_workload(&Workloads::current().small)
        .expect("generate and import the workload");
    let (recorded, _) = record(&base);
    let steps = u64::try_from(STEPS.len()).unwrap_or(u64::MAX);
    let mut group = GroupTiming {
        sample_size: 10,
        ..GroupTiming::DEFAULT
    }
    .group(c, "replay");
    group.throughput(Throughput::Elements(steps));
    group.bench_function("record_20_steps", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| record(&base).1).sum());
    });
    group.bench_function("replay_20_steps", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let started = Instant::now();
                    let report = replay(&env.runtime, &recorded, ReplayOptions::default())
                        .expect("replay the chain");
                    let elapsed = started.elapsed();
                    assert!(
                        report.identical,
                        "the chain diverged: {:?}",
                        report.first_divergence()
                    );
                    elapsed
                })
                .sum()
        });
    });
    group.finish();
}

criterion_group!(benches, replay_chain);
criterion_main!(benches);
