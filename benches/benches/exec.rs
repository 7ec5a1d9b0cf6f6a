//! Exec overhead of `true`.
//!
//! Cases (group `exec`):
//! - `sandbox_true`: `Sandbox::exec("true")` in a sandbox that is already
//!   open on the 100-file workspace (a fresh process tree per action, with
//!   session capture and the observation digest);
//! - `host_bash_c_true`: `bash -c true` on the host through
//!   `std::process::Command`.
//!
//! The ratio sandbox / host of the medians is the exec overhead.

use std::path::Path;
use std::process::Command;

use arbor_benches::{GroupTiming, OpenSandbox};
use arbor_runtime::ExecOptions;
use criterion::{Criterion, criterion_group, criterion_main};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-bench-helper");

fn exec_true(c: &mut Criterion) {
    let mut group = GroupTiming::DEFAULT.group(c, "exec");
    let mut fixture: Option<OpenSandbox> = None;
    let options = ExecOptions::default();
    group.bench_function("sandbox_true", |b| {
        let sandbox = &mut fixture
            .get_or_insert_with(|| OpenSandbox::new(Path::new(HELPER), |_| {}))
            .sandbox;
        b.iter(|| {
            let obs = sandbox
                .exec("true", &options)
                .expect("exec true in the sandbox");
            assert_eq!(
                obs.code(),
                Some(0),
                "true failed in the sandbox: {}",
                String::from_utf8_lossy(&obs.stderr)
            );
        });
    });
    drop(fixture);
    group.bench_function("host_bash_c_true", |b| {
        b.iter(|| {
            let status = Command::new("bash")
                .args(["-c", "true"])
                .status()
                .expect("run bash -c true");
            assert!(status.success(), "bash -c true failed: {status}");
        });
    });
    group.finish();
}

criterion_group!(benches, exec_true);
criterion_main!(benches);
