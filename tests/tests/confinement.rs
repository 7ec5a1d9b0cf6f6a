//! The kernel confinements every action installs (issue 21): the seccomp
//! filter (`Seccomp: 2`, each listed call refused with `EPERM`, `clone3` with
//! `ENOSYS`, x32 entry refused, threads and fork still work) and Landlock
//! (writes only beneath `/workspace`, `/tmp`, `/dev/shm` and to the given
//! device nodes). Each probe also runs with the confinement off, the
//! positive control that shows the probe would have reached the kernel.

use std::collections::BTreeMap;
use std::path::Path;

use arbor_runtime::sandbox::Confinement;
use arbor_runtime::{ExecOptions, PeerCommand};
use serde_json::Value;

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");
const PROBE: &str = include_str!("../probes/confinement.py");

fn sandbox(t: &arbor_tests::TestRuntime) -> arbor_runtime::Sandbox {
    let src = t.scratch("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("probe.py"), PROBE).unwrap();
    t.runtime.import(&src, None).unwrap().open().unwrap()
}

fn with(confinement: Confinement) -> arbor_tests::TestRuntime {
    arbor_tests::runtime_with(Path::new(HELPER), |o| o.confinement = confinement)
}

const OFF: Confinement = Confinement {
    syscall_filter: false,
    landlock: false,
};

fn parse(stdout: &str) -> BTreeMap<String, Value> {
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout:?}"))
}

fn probe(sb: &mut arbor_runtime::Sandbox) -> BTreeMap<String, Value> {
    let obs = sb
        .exec(
            "python3 /workspace/probe.py",
            &ExecOptions::with_timeout_ms(60_000),
        )
        .unwrap();
    assert_eq!(
        obs.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&obs.stderr)
    );
    parse(&obs.stdout_text())
}

fn s(v: &str) -> Value {
    Value::String(v.to_owned())
}

/// The calls that only the filter refuses (the kernel would have let the
/// sandbox's root make them), with the filter's answer.
fn refused_by_the_filter() -> Vec<(&'static str, Value)> {
    let mut v = vec![
        ("unshare_user", s("EPERM")),
        ("unshare_net", s("EPERM")),
        ("setns", s("EPERM")),
        ("keyctl", s("EPERM")),
        ("io_uring_setup", s("EPERM")),
        ("userfaultfd", s("EPERM")),
        ("personality_no_aslr", s("EPERM")),
        ("clone3", s("ENOSYS")),
        ("pidfd_open_init", s("EPERM")),
        ("perf_event_open", s("EPERM")),
        ("bpf", s("EPERM")),
    ];
    if cfg!(target_arch = "x86_64") {
        v.push(("x32_getpid", s("EPERM")));
    }
    v
}

#[test]
fn every_action_runs_under_the_syscall_filter() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let mut sb = sandbox(&t);
    let on = probe(&mut sb);
    assert_eq!(on["Seccomp"], s("2"), "{on:?}");
    assert_eq!(on["NoNewPrivs"], s("1"), "{on:?}");
    for (name, want) in refused_by_the_filter() {
        assert_eq!(on[name], want, "{name}: {on:?}");
    }
    // What programs need is untouched: threads (clone3 falls back to
    // clone), fork, queries, unshare without namespace flags, own pidfd.
    for name in [
        "getpid",
        "unshare_none",
        "personality_query",
        "pidfd_open_self",
        "thread",
        "fork",
    ] {
        assert_eq!(on[name], Value::from(0), "{name}: {on:?}");
    }

    // Positive control: the same probes with the filter off reach the
    // kernel, which answers otherwise.
    let t = with(OFF);
    let mut sb = sandbox(&t);
    let off = probe(&mut sb);
    assert_eq!(off["Seccomp"], s("0"), "{off:?}");
    for (name, want) in refused_by_the_filter() {
        assert_ne!(
            off[name], want,
            "{name} is refused without the filter too: {off:?}"
        );
    }
}

#[test]
fn the_verifiers_peer_runs_under_the_filter_too() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let mut sb = sandbox(&t);
    let opts = ExecOptions {
        peer: Some(PeerCommand {
            command: "grep '^Seccomp:' /proc/self/status".to_owned(),
            env: Vec::new(),
        }),
        ..ExecOptions::with_timeout_ms(30_000)
    };
    let obs = sb.exec("sleep 1", &opts).unwrap();
    let peer = obs.peer.expect("peer result");
    assert_eq!(String::from_utf8_lossy(&peer.stdout), "Seccomp:\t2\n");

    // Positive control: off, the peer's status says so.
    let t = with(OFF);
    let mut sb = sandbox(&t);
    let obs = sb.exec("sleep 1", &opts).unwrap();
    let peer = obs.peer.expect("peer result");
    assert_eq!(String::from_utf8_lossy(&peer.stdout), "Seccomp:\t0\n");
}

/// Writes Landlock must allow, then the one only Landlock refuses: the
/// action's own `/proc/self/comm` (procfs is not read-only, and a mount flag
/// cannot narrow it).
const WRITES: &str = "echo a > /workspace/a && echo b > /tmp/b && echo c > /dev/shm/c && \
     echo d > /dev/null && mkdir -p /workspace/d/e && ln -s a /workspace/l && \
     mv /workspace/a /workspace/d/a && rm /workspace/l && echo allowed; \
     (echo probe > /proc/self/comm) 2>/dev/null && echo comm-written || echo comm-refused";

#[test]
fn landlock_confines_writes_where_the_kernel_has_it() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let mut sb = sandbox(&t);
    let obs = sb.exec(WRITES, &ExecOptions::default()).unwrap();
    let on = obs.stdout_text();
    assert!(
        on.starts_with("allowed\n"),
        "{on:?} {}",
        String::from_utf8_lossy(&obs.stderr)
    );
    if arbor_runtime::sandbox::helper::landlock::abi().is_none() {
        eprintln!("skipped: this kernel has no Landlock");
        return;
    }
    assert_eq!(on, "allowed\ncomm-refused\n");

    // Positive control: without Landlock the write goes through.
    let t = with(Confinement {
        landlock: false,
        ..Confinement::default()
    });
    let mut sb = sandbox(&t);
    let obs = sb.exec(WRITES, &ExecOptions::default()).unwrap();
    assert_eq!(obs.stdout_text(), "allowed\ncomm-written\n");
}
