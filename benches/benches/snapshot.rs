//! Snapshot latency after one small change.
//!
//! Cases (group `snapshot`, function `after_small_change`):
//! - `100-files-1MB`: the small workspace;
//! - `10000-files-200MB`: the large workspace (`1000-files-5MB` in quick mode).
//!
//! Each iteration writes one new 100-byte file through `Sandbox::write_file`
//! (untimed) and then times `Sandbox::snapshot()` alone. The figure of merit
//! is the ratio large / small of the medians (target ≤ 1.5): a snapshot costs
//! what the step changed, never the workspace. The sandbox is reopened on the
//! base snapshot every `REOPEN_EVERY` iterations (untimed), so the layer
//! chain stays short and the same for both sizes.

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
    group.finish();
}

criterion_group!(benches, snapshot_after_small_change);
criterion_main!(benches);
