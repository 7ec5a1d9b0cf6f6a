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

use arbor_benches::{GroupTiming, OpenSandbox, quick_mode};
use arbor_runtime::ExecOptions;
use arbor_runtime::sandbox::Confinement;
use criterion::{Criterion, criterion_group, criterion_main};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-bench-helper");

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
        let mut f: Option<OpenSandbox> = None;
        group.bench_function(name, |b| {
            let sandbox = &mut f
                .get_or_insert_with(|| {
                    OpenSandbox::new(Path::new(HELPER), |o| o.confinement = confinement)
                })
                .sandbox;
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
