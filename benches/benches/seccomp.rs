//! The cost of the syscall filter and Landlock per system call.
//!
//! Cases (group `seccomp`), each one action in an open sandbox running
//! `dd if=/dev/zero of=/dev/null bs=1 count=N` (2N+ system calls, each one
//! byte, so the calls dominate):
//! - `confined_dd_bs1`: the default confinement (seccomp filter and Landlock);
//! - `unconfined_dd_bs1`: `RuntimeOptions::confinement` off, the baseline.
//!
//! (median confined − median unconfined) / 2N is the cost per call.

use std::path::Path;

use arbor_benches::{BenchEnv, GroupTiming, Workloads, quick_mode};
use arbor_runtime::sandbox::Confinement;
use arbor_runtime::{ExecOptions, Sandbox};
use criterion::{Criterion, criterion_group, criterion_main};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-bench-helper");

struct Fixture {
    sandbox: Sandbox,
    _env: BenchEnv,
}

fn fixture(confinement: Confinement) -> Fixture {
    let env = BenchEnv::open_with(Path::new(HELPER), |o| o.confinement = confinement)
        .expect("open a bench runtime");
    let (snapshot, _src) = env
        .import_workload(&Workloads::current().small)
        .expect("generate and import the workload");
    let sandbox = snapshot.open().expect("open a sandbox");
    Fixture { sandbox, _env: env }
}

fn dd_bs1(c: &mut Criterion) {
    let count = if quick_mode() { 10_000 } else { 200_000 };
    let command = format!("dd if=/dev/zero of=/dev/null bs=1 count={count} status=none");
    let mut group = GroupTiming::DEFAULT.group(c, "seccomp");
    let options = ExecOptions::default();
    for (name, confinement) in [
        ("confined_dd_bs1", Confinement::default()),
        (
            "unconfined_dd_bs1",
            Confinement {
                syscall_filter: false,
                landlock: false,
            },
        ),
    ] {
        let mut f: Option<Fixture> = None;
        group.bench_function(name, |b| {
            let sandbox = &mut f.get_or_insert_with(|| fixture(confinement)).sandbox;
            b.iter(|| {
                let obs = sandbox.exec(&command, &options).expect("exec dd");
                assert_eq!(
                    obs.code(),
                    Some(0),
                    "dd failed: {}",
                    String::from_utf8_lossy(&obs.stderr)
                );
            });
        });
    }
    group.finish();
}

criterion_group!(benches, dd_bs1);
criterion_main!(benches);
