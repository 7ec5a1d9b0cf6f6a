//! Fork latency and throughput, side by side with forking by `cp -a`.
//!
//! Cases:
//! - group `fork`, for the workspaces `100-files-1MB` and `2000-files-50MB`
//!   (`500-files-5MB` in quick mode):
//!   - `arbor_open_true/<workspace>`: `Snapshot::open()` + `exec("true")`,
//!     timed until `true` has exited in the fork (target median ≤ 5 ms);
//!     the sandbox is dropped after the clock stops;
//!   - `cp_a_true/<workspace>`: the baseline: `cp -a` of the materialised
//!     workspace into a new directory + `true` run there with
//!     `std::process::Command`; the copy is removed after the clock stops.
//! - group `fork_throughput`, on `100-files-1MB`: `arbor_open_true/<N>` for
//!   N = 1, 8, 64: N sandboxes opened from the same snapshot by
//!   min(N, 8) threads, each running `true`; criterion reports forks per
//!   second (`Throughput::Elements(N)`). The N sandboxes are closed after
//!   the clock stops.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use arbor_benches::{BenchEnv, GroupTiming, WorkloadSpec, Workloads};
use arbor_runtime::{ExecOptions, Sandbox, Snapshot};
use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-bench-helper");

/// Most threads opening sandboxes at the same time in the throughput bench.
const MAX_THREADS: usize = 8;

/// A store holding one imported workload and its host copy.
struct Fixture {
    snapshot: Snapshot,
    src: PathBuf,
    env: BenchEnv,
    copies: u64,
}

impl Fixture {
    fn new(spec: &WorkloadSpec) -> Self {
        let env = BenchEnv::open(Path::new(HELPER)).expect("open a bench runtime");
        let (snapshot, src) = env
            .import_workload(spec)
            .expect("generate and import the workload");
        Self {
            snapshot,
            src,
            env,
            copies: 0,
        }
    }
}

/// Open a fork and run `true` in it.
fn fork_and_run_true(snapshot: &Snapshot) -> Sandbox {
    let mut sandbox = snapshot.open().expect("open a fork");
    let obs = sandbox
        .exec("true", &ExecOptions::default())
        .expect("exec true in the fork");
    assert_eq!(
        obs.code(),
        Some(0),
        "true failed in the fork: {}",
        String::from_utf8_lossy(&obs.stderr)
    );
    sandbox
}

/// Time one fork until `true` has exited in it; the sandbox closes untimed.
/// Before the clock starts, the runtime's warm pool is given time to hold its
/// prepared helpers again (as it does between bursts in real use); the
/// throughput group measures back-to-back forks without that pause.
fn time_arbor_fork(snapshot: &Snapshot, env: &BenchEnv) -> Duration {
    let _ = env.runtime.warm_up(Duration::from_secs(5));
    let start = Instant::now();
    let sandbox = fork_and_run_true(snapshot);
    let elapsed = start.elapsed();
    drop(sandbox);
    elapsed
}

/// Time `cp -a` of the workspace plus `true` in the copy; the copy is removed untimed.
fn time_cp_fork(fixture: &mut Fixture) -> Duration {
    fixture.copies += 1;
    let dest = fixture.env.scratch(&format!("cp-fork-{}", fixture.copies));
    let start = Instant::now();
    let status = Command::new("cp")
        .arg("-a")
        .arg(&fixture.src)
        .arg(&dest)
        .status()
        .expect("run cp -a");
    assert!(status.success(), "cp -a failed: {status}");
    let status = Command::new("true")
        .current_dir(&dest)
        .status()
        .expect("run true");
    assert!(status.success(), "true failed: {status}");
    let elapsed = start.elapsed();
    std::fs::remove_dir_all(&dest).expect("remove the cp -a copy");
    elapsed
}

/// Time N forks, each running `true`, opened by min(N, 8) threads; the N
/// sandboxes close after the clock stops.
fn time_n_forks(snapshot: &Snapshot, n: usize) -> Duration {
    let next = AtomicUsize::new(0);
    let opened = Mutex::new(Vec::with_capacity(n));
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..n.min(MAX_THREADS) {
            scope.spawn(|| {
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    let sandbox = fork_and_run_true(snapshot);
                    opened.lock().expect("sandbox list lock").push(sandbox);
                }
            });
        }
    });
    let elapsed = start.elapsed();
    let opened = opened.into_inner().expect("sandbox list lock");
    assert_eq!(opened.len(), n);
    drop(opened);
    elapsed
}

/// A group with the default settings and flat sampling (the same iteration
/// count in every sample), which keeps the slow cases (`cp -a` of 50 MB,
/// 64 forks) within the time budget.
fn flat_group<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut group = GroupTiming::DEFAULT.group(c, name);
    group.sampling_mode(SamplingMode::Flat);
    group
}

fn fork_latency(c: &mut Criterion) {
    let workloads = Workloads::current();
    let mut group = flat_group(c, "fork");
    for spec in [workloads.small, workloads.medium] {
        // Set up lazily: nothing is generated when the filter skips both cases.
        let fixture: Mutex<Option<Fixture>> = Mutex::new(None);
        let with_fixture = |f: &mut dyn FnMut(&mut Fixture)| {
            let mut guard = fixture.lock().expect("fixture lock");
            f(guard.get_or_insert_with(|| Fixture::new(&spec)));
        };
        group.bench_function(BenchmarkId::new("arbor_open_true", spec.label()), |b| {
            with_fixture(&mut |fx| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| time_arbor_fork(&fx.snapshot, &fx.env))
                        .sum()
                })
            });
        });
        group.bench_function(BenchmarkId::new("cp_a_true", spec.label()), |b| {
            with_fixture(&mut |fx| {
                b.iter_custom(|iters| (0..iters).map(|_| time_cp_fork(fx)).sum())
            });
        });
    }
    group.finish();
}

fn fork_throughput(c: &mut Criterion) {
    let workloads = Workloads::current();
    let mut group = flat_group(c, "fork_throughput");
    let mut fixture: Option<Fixture> = None;
    for n in [1usize, 8, 64] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("arbor_open_true", n), &n, |b, &n| {
            let fx = fixture.get_or_insert_with(|| Fixture::new(&workloads.small));
            b.iter_custom(|iters| (0..iters).map(|_| time_n_forks(&fx.snapshot, n)).sum());
        });
    }
    group.finish();
}

criterion_group!(benches, fork_latency, fork_throughput);
criterion_main!(benches);
