//! Verification latency per task family, the cost of the verifier's process
//! boundary against a baseline measured in the same run, and the boundary's
//! round trip.
//!
//! - Group `verify`: for each native family of the bundled suite
//!   (`envs/tasks`, or `$ARBOR_TASKS`: coding, terminal, upstream), the gold
//!   solution of a few tasks is run once; then `TaskEnv::verify` of those
//!   episodes is timed. Each verdict reports its own split —
//!   `verify_setup_ms` (merge the layer views, fork the final snapshot, the
//!   static analysis, the quality layer) and `verify_checks_ms` (the paired
//!   action: trusted runner and subject).
//! - The same-run baseline: the same checks run *without* the boundary, as
//!   a plain harness would (unittest discovery or pytest in one interpreter
//!   with the code under test, in a fork of the same final snapshot, the
//!   checks mounted read-only). The ratio is the boundary's price.
//! - Group `rpc`: a task whose check calls a workspace function N times
//!   (N = 0 and N = 2000); the difference over N is the round trip of one
//!   call across the boundary (µs per call, calls per second).
//!
//! Medians are printed as tables after the criterion output.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use arbor_benches::{BenchEnv, GroupTiming, quick_mode};
use arbor_envs::rollout::{Environment as _, Episode};
use arbor_envs::suite::{Suite, bundled_dir};
use arbor_envs::task::{CheckRunner, Family};
use arbor_envs::verifier::verifier_site;
use arbor_envs::{TaskEnv, TaskSpec};
use arbor_runtime::sandbox::ReadOnlyMount;
use arbor_runtime::{ExecOptions, Runtime, Snapshot};
use criterion::{Criterion, criterion_group, criterion_main};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-bench-helper");

/// Per family: set-up, checks and baseline milliseconds.
#[derive(Default)]
struct Splits {
    setup: Vec<u64>,
    checks: Vec<u64>,
    whole: Vec<u64>,
    baseline: Vec<u64>,
    tasks: usize,
}

fn median(xs: &mut [u64]) -> u64 {
    xs.sort_unstable();
    xs.get(xs.len() / 2).copied().unwrap_or(0)
}

/// The plain harness's program: the task's checks run in one interpreter
/// with the code under test (`/verifier/checks`; pytest from
/// `/verifier/site`, the task's listed ids from `/verifier/ids`).
const BASELINE: &str = r#"import os, sys
os.chdir("/workspace")
if sys.argv[1] == "pytest":
    sys.path[:0] = ["/verifier/site", "/workspace"]
    import pytest
    ids = [l for l in open("/verifier/ids").read().splitlines() if l]
    args = ["/verifier/checks/" + i for i in ids] or ["/verifier/checks"]
    pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", "/verifier/checks"] + args)
else:
    sys.path[:0] = ["/verifier/checks", "/workspace"]
    import unittest
    unittest.main(module=None, argv=["u", "discover", "-s", "/verifier/checks",
                                     "-t", "/verifier/checks", "-q"], exit=False)
"#;

/// The baseline's mount: the checks, the program, pytest's site for pytest
/// tasks, the listed ids.
fn baseline_snapshot(rt: &Runtime, spec: &TaskSpec) -> Snapshot {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(&spec.checks, &dir.path().join("checks"));
    std::fs::write(dir.path().join("baseline.py"), BASELINE).expect("write");
    std::fs::write(
        dir.path().join("ids"),
        spec.check_config.listed_ids().join("\n"),
    )
    .expect("write");
    if spec.check_config.runner == CheckRunner::Pytest {
        copy_tree(
            &verifier_site().expect("pytest's trusted site (.ci/prerequisites)"),
            &dir.path().join("site"),
        );
    }
    rt.import(dir.path(), None).expect("import the baseline")
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let ty = e.file_type().expect("file type");
        if ty.is_dir() && e.file_name() != "__pycache__" {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else if ty.is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
        }
    }
}

/// One baseline run of `spec`'s checks on `episode`'s final state, in ms.
fn baseline_ms(spec: &TaskSpec, mount: &Snapshot, episode: &Episode) -> u64 {
    let last = episode.last.native().expect("a native episode");
    let t = Instant::now();
    let mut sb = last.open().expect("fork the final snapshot");
    sb.reset_session();
    let mut opts = ExecOptions::with_timeout_ms(spec.checks_timeout_ms);
    opts.mounts = vec![ReadOnlyMount::new(mount, "verifier").expect("mount")];
    let mode = match spec.check_config.runner {
        CheckRunner::Pytest => "pytest",
        CheckRunner::Unittest => "unittest",
    };
    let obs = sb
        .exec(
            &format!("exec /usr/bin/python3 -I -S -B /verifier/baseline.py {mode}"),
            &opts,
        )
        .expect("run the baseline");
    assert_eq!(
        obs.code(),
        Some(0),
        "{}: {}",
        spec.id,
        String::from_utf8_lossy(&obs.stderr)
    );
    u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn verify(c: &mut Criterion) {
    let env = BenchEnv::open(Path::new(HELPER)).expect("open a bench runtime");
    let suite = Suite::load(&bundled_dir()).expect("load the bundled task suite");
    let per_family = if quick_mode() { 1 } else { 4 };
    let splits: Mutex<BTreeMap<String, Splits>> = Mutex::new(BTreeMap::new());
    let mut group = GroupTiming {
        sample_size: 10,
        ..GroupTiming::DEFAULT
    }
    .group(c, "verify");
    for family in [Family::Coding, Family::Terminal, Family::Upstream] {
        let prepared: Vec<(TaskEnv, Episode, Snapshot)> = suite
            .tasks
            .values()
            .filter(|t| t.family == family)
            .take(per_family)
            .map(|spec| {
                let task = TaskEnv::prepare(&env.runtime, spec.clone()).expect("prepare a task");
                let (episode, _) = task.run(&spec.gold).expect("run the gold solution");
                let mount = baseline_snapshot(&env.runtime, spec);
                (task, episode, mount)
            })
            .collect();
        let name = family.to_string();
        splits
            .lock()
            .expect("lock")
            .entry(name.clone())
            .or_default()
            .tasks = prepared.len();
        group.bench_function(&name, |b| {
            b.iter_custom(|iters| {
                let mut spent = std::time::Duration::ZERO;
                for i in 0..iters {
                    let (task, episode, mount) = &prepared[i as usize % prepared.len()];
                    let started = Instant::now();
                    let v = task.verify(episode);
                    let took = started.elapsed();
                    spent += took;
                    assert!(v.success(), "{}: {}", task.spec().id, v.summary());
                    // The same checks without the boundary, right after.
                    let base = baseline_ms(task.spec(), mount, episode);
                    let mut s = splits.lock().expect("lock");
                    let e = s.entry(name.clone()).or_default();
                    e.setup.push(v.process.verify_setup_ms);
                    e.checks.push(v.process.verify_checks_ms);
                    e.whole
                        .push(u64::try_from(took.as_millis()).unwrap_or(u64::MAX));
                    e.baseline.push(base);
                }
                spent
            });
        });
    }
    group.finish();
    println!(
        "\nverification latency by family (median over every timed verification; the baseline \
         runs the same checks in one interpreter with the code under test, in the same run)"
    );
    println!(
        "| family | tasks | set-up ms | checks ms | whole verify ms | baseline ms | verify / baseline | verifications |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (family, mut s) in splits.into_inner().expect("lock") {
        let n = s.setup.len();
        let whole = median(&mut s.whole);
        let base = median(&mut s.baseline);
        println!(
            "| {family} | {} | {} | {} | {whole} | {base} | {:.2} | {n} |",
            s.tasks,
            median(&mut s.setup),
            median(&mut s.checks),
            whole as f64 / base.max(1) as f64
        );
    }
}

/// A task whose one check calls `f` (the identity, in the workspace) `n`
/// times.
fn rpc_task(root: &Path, n: usize) -> TaskSpec {
    let id = format!("rpc-{n}");
    let dir = root.join(&id);
    std::fs::create_dir_all(dir.join("workspace")).expect("mkdir");
    std::fs::create_dir_all(dir.join("checks")).expect("mkdir");
    std::fs::write(dir.join("workspace/f.py"), "def f(x):\n    return x\n").expect("write");
    std::fs::write(
        dir.join("checks/test_rpc.py"),
        format!(
            "import unittest\nfrom f import f\n\n\nclass Rpc(unittest.TestCase):\n    def test_calls(self):\n        for i in range({n}):\n            f(i)\n        self.assertEqual(f(1), 1)\n"
        ),
    )
    .expect("write");
    std::fs::write(
        dir.join("task.toml"),
        format!(
            "id = \"{id}\"\nfamily = \"coding\"\ngroup = \"rpc\"\ndifficulty = \"easy\"\ninstructions = \"-\"\n\n[limits]\nmax_steps = 1\nstep_timeout_s = 10\ntotal_time_s = 10\n\n[paths]\nallow = [\"f.py\"]\n\n[[gold]]\nexec = \"true\"\n"
        ),
    )
    .expect("write");
    TaskSpec::load(&dir).expect("load the rpc task")
}

fn rpc(c: &mut Criterion) {
    const CALLS: usize = 2000;
    let env = BenchEnv::open(Path::new(HELPER)).expect("open a bench runtime");
    let root = tempfile::tempdir().expect("tempdir");
    let checks_ms: Mutex<BTreeMap<usize, Vec<u64>>> = Mutex::new(BTreeMap::new());
    let mut group = GroupTiming {
        sample_size: 10,
        ..GroupTiming::DEFAULT
    }
    .group(c, "rpc");
    for n in [0, CALLS] {
        let task = TaskEnv::prepare(&env.runtime, rpc_task(root.path(), n)).expect("prepare");
        let (episode, _) = task.run(&[]).expect("run");
        group.bench_function(format!("{n}-calls"), |b| {
            b.iter_custom(|iters| {
                let started = Instant::now();
                for _ in 0..iters {
                    let v = task.verify(&episode);
                    assert!(v.success(), "{}", v.summary());
                    checks_ms
                        .lock()
                        .expect("lock")
                        .entry(n)
                        .or_default()
                        .push(v.process.verify_checks_ms);
                }
                started.elapsed()
            });
        });
    }
    group.finish();
    let mut m = checks_ms.into_inner().expect("lock");
    let none = median(m.entry(0).or_default());
    let many = median(m.entry(CALLS).or_default());
    let per_call_us = (many.saturating_sub(none) as f64 * 1000.0) / CALLS as f64;
    println!("\nthe boundary's round trip (median checks time of a verification)");
    println!("| check | checks ms | µs per call | calls per second |");
    println!("|---|---:|---:|---:|");
    println!("| no call | {none} | | |");
    println!(
        "| {CALLS} calls of the identity | {many} | {per_call_us:.0} | {:.0} |",
        1e6 / per_call_us.max(1e-9)
    );
}

criterion_group!(benches, verify, rpc);
criterion_main!(benches);
