//! Snapshot latency after one small change.
//!
//! Cases (group `snapshot`, function `after_small_change`):
//! - `100-files-1MB`: the small workspace;
//! - `10000-files-200MB`: the large workspace (`1000-files-5MB` in quick mode).
//!
//! - `100-files-1MB-under-writes`: the small workspace while another process
//!   writes 1 GB files without pause on the store's filesystem (`dd`, page
//!   cache writeback competing with the snapshot's durability). After each
//!   Arbor sample the same iteration times the kernel floor of a durable
//!   snapshot of that change, under the same writes: `mkdir` an upper
//!   directory, write the 100-byte file, `syncfs`, rename the directory
//!   into place, `fsync` its parent. Both sets' median and p99 go to
//!   `<target>/arbor-bench/snapshot-under-writes.json`.
//!
//! Each iteration writes one new 100-byte file through `Sandbox::write_file`
//! (untimed) and then times `Sandbox::snapshot()` alone. The figure of merit
//! is the ratio large / small of the medians (target ≤ 1.5): a snapshot costs
//! what the step changed, never the workspace. The sandbox is reopened on the
//! base snapshot every `REOPEN_EVERY` iterations (untimed), so the layer
//! chain stays short and the same for both sizes.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};

use arbor_benches::{BenchEnv, GroupTiming, WorkloadSpec, Workloads, small_change};
use arbor_runtime::{Sandbox, Snapshot};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-bench-helper");

/// Snapshots taken on one sandbox before it is reopened on the base snapshot.
const REOPEN_EVERY: u64 = 16;

/// A store holding one imported workload. Fields drop in order: the
/// sandbox before the store it lives in.
struct Fixture {
    sandbox: Option<Sandbox>,
    base: Snapshot,
    _env: BenchEnv,
    /// Snapshots taken on `sandbox` since it was opened.
    taken: u64,
    /// Changes written so far (makes each change's content unique).
    changes: u64,
}

impl Fixture {
    fn new(spec: &WorkloadSpec) -> Self {
        let env = BenchEnv::open(Path::new(HELPER)).expect("open a bench runtime");
        let (base, _src) = env
            .import_workload(spec)
            .expect("generate and import the workload");
        Self {
            sandbox: None,
            base,
            _env: env,
            taken: 0,
            changes: 0,
        }
    }

    /// Write one small change and time the snapshot that seals it.
    fn one_snapshot(&mut self) -> Duration {
        if self.taken >= REOPEN_EVERY {
            self.sandbox = None;
        }
        let sandbox = match &mut self.sandbox {
            Some(sb) => sb,
            none => {
                self.taken = 0;
                none.insert(
                    self.base
                        .open()
                        .expect("open a sandbox on the base snapshot"),
                )
            }
        };
        self.changes += 1;
        let path = format!("bench/change-{:08}.txt", self.changes);
        sandbox
            .write_file(&path, &small_change(self.changes), 0o644)
            .expect("write the small change");
        let start = Instant::now();
        let snapshot = sandbox.snapshot().expect("snapshot");
        let elapsed = start.elapsed();
        assert_ne!(
            snapshot.id(),
            self.base.id(),
            "the change must produce a new snapshot"
        );
        self.taken += 1;
        elapsed
    }
}

/// A process that writes 1 GB files one after another (buffered, as a
/// build or a data loader would) on the filesystem of `dir` until dropped.
struct Traffic(std::process::Child);

impl Traffic {
    fn start(dir: &Path) -> Self {
        let file = dir.join("traffic.bin");
        let script = format!(
            "while :; do dd if=/dev/zero of='{}' bs=1M count=1024 status=none; rm -f '{}'; done",
            file.display(),
            file.display()
        );
        let child = std::process::Command::new("sh")
            .args(["-c", &script])
            .process_group(0)
            .spawn()
            .expect("start the writer");
        // Let its dirty pages build up before the first sample.
        std::thread::sleep(Duration::from_millis(500));
        Self(child)
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        // The writer's own process group: sh and its dd.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

/// The kernel floor of a durable snapshot of one small change: a new upper
/// directory with the file, `syncfs`, rename into place, `fsync` the parent.
fn floor_snapshot(dir: &Path, n: u64) -> Duration {
    let upper = dir.join(format!("floor-upper-{n}"));
    let layer = dir.join(format!("floor-layer-{n}"));
    let start = Instant::now();
    std::fs::create_dir(&upper).expect("mkdir the floor's upper");
    std::fs::write(upper.join("change.txt"), small_change(n)).expect("write the change");
    let f = std::fs::File::open(&upper).expect("open the upper");
    // SAFETY: `f` is an open descriptor for the call's duration.
    let rc = unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f)) };
    assert_eq!(rc, 0, "syncfs: {}", std::io::Error::last_os_error());
    std::fs::rename(&upper, &layer).expect("rename the layer into place");
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .expect("fsync the layers' directory");
    start.elapsed()
}

/// Median, p99 and max of `samples` in milliseconds, with their count.
fn quantiles(samples: &mut [Duration]) -> serde_json::Value {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len().max(1) - 1) as f64 * q).round() as usize;
        samples.get(i).map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
    };
    serde_json::json!({
        "samples": samples.len(),
        "median_ms": at(0.5),
        "p99_ms": at(0.99),
        "max_ms": at(1.0),
    })
}

/// The quantiles of Arbor's and the floor's samples, written to `name`.json
/// in the bench output directory.
fn write_quantiles(name: &str, arbor: &mut [Duration], floor: &mut [Duration]) {
    if arbor.is_empty() {
        return;
    }
    let report = serde_json::json!({
        "arbor": quantiles(arbor),
        "floor": quantiles(floor),
        "writer": "dd if=/dev/zero bs=1M count=1024, in a loop, on the store's filesystem",
    });
    eprintln!("{name}: {report}");
    if let Ok(dir) = arbor_benches::output_dir()
        && std::fs::create_dir_all(&dir).is_ok()
    {
        let _ = std::fs::write(dir.join(format!("{name}.json")), report.to_string());
    }
}

fn snapshot_after_small_change(c: &mut Criterion) {
    let workloads = Workloads::current();
    let mut group = GroupTiming::DEFAULT.group(c, "snapshot");
    for spec in [workloads.small, workloads.large] {
        // Set up lazily: nothing is generated for a case the filter skips.
        let mut fixture: Option<Fixture> = None;
        group.bench_function(BenchmarkId::new("after_small_change", spec.label()), |b| {
            let fixture = fixture.get_or_insert_with(|| Fixture::new(&spec));
            b.iter_custom(|iters| (0..iters).map(|_| fixture.one_snapshot()).sum());
        });
        drop(fixture);
    }
    // The small workspace again, under another process's writes.
    let spec = workloads.small;
    let mut fixture: Option<(Fixture, Traffic)> = None;
    let mut samples = Vec::new();
    let mut floor = Vec::new();
    let floor_dir = std::cell::OnceCell::new();
    group.bench_function(
        BenchmarkId::new(
            "after_small_change",
            format!("{}-under-writes", spec.label()),
        ),
        |b| {
            let (fixture, _) = fixture.get_or_insert_with(|| {
                let f = Fixture::new(&spec);
                let traffic = Traffic::start(&f._env.scratch(""));
                (f, traffic)
            });
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let t = fixture.one_snapshot();
                        samples.push(t);
                        let dir = floor_dir.get_or_init(|| {
                            let d = fixture._env.scratch("floor");
                            std::fs::create_dir_all(&d).expect("mkdir the floor's layers");
                            d
                        });
                        floor.push(floor_snapshot(dir, fixture.changes));
                        t
                    })
                    .sum()
            });
        },
    );
    drop(fixture);
    write_quantiles("snapshot-under-writes", &mut samples, &mut floor);
    group.finish();
}

criterion_group!(benches, snapshot_after_small_change);
criterion_main!(benches);
