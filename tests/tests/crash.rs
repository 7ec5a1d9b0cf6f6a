//! Crash safety (design invariant 3): killing the process at every step of
//! the store, import and snapshot protocols leaves a store that `fsck`
//! reports clean, lists no partial snapshot, and leaves no helper process or
//! mount behind. With the feature `wasm` the same holds for every step of a
//! WebAssembly session snapshot that seals a workspace.

use std::path::Path;
use std::process::Command;

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");
const CRASHER: &str = env!("CARGO_BIN_EXE_arbor-test-crasher");

fn helper_path() -> String {
    std::env::var("ARBOR_TEST_HELPER").unwrap_or_else(|_| HELPER.to_owned())
}

fn crasher_path() -> String {
    std::env::var("ARBOR_TEST_CRASHER").unwrap_or_else(|_| CRASHER.to_owned())
}

#[test]
fn every_failpoint_leaves_a_clean_store() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    arbor_tests::sample_workspace(&src);
    let native: Vec<&str> = arbor_runtime::store::FAILPOINTS
        .iter()
        .chain(arbor_runtime::snapshot::FAILPOINTS)
        .copied()
        .collect();
    assert!(native.len() >= 15, "{native:?}");
    // Session points are crashed at on a fresh store (where they are
    // first reached by the session's boot) and on one with a session base
    // (where they are reached sealing a workspace write).
    #[cfg(feature = "wasm")]
    let session: Vec<&str> = arbor_runtime::wasm::FAILPOINTS.to_vec();
    #[cfg(not(feature = "wasm"))]
    let session: Vec<&str> = Vec::new();
    #[cfg(feature = "wasm")]
    assert!(session.len() >= 5, "{session:?}");
    // Positive control: without a failpoint the protocol completes and is clean.
    let control = dir.path().join("control");
    let out = arbor_tests::run_crasher(Path::new(CRASHER), Path::new(HELPER), &control, &src, None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rt =
        arbor_runtime::Runtime::open(arbor_tests::options(&control, Path::new(HELPER))).unwrap();
    assert!(rt.store().get_tag("latest").unwrap().is_some());
    assert!(rt.store().fsck().unwrap().is_clean());
    #[cfg(feature = "wasm")]
    {
        // The session snapshot sealed the workspace write as a layer.
        let wasm = rt.wasm(arbor_runtime::wasm::WasmLimits::default()).unwrap();
        let tag = |t: &str| rt.store().get_tag(t).unwrap().expect(t);
        let base = wasm.snapshot(&tag("session-base")).unwrap();
        let latest = wasm.snapshot(&tag("session-latest")).unwrap();
        let diff = rt
            .diff_layers(&base.manifest().layers, &latest.manifest().layers)
            .unwrap();
        assert!(diff.added.iter().any(|p| p == "out/session"), "{diff:?}");
    }

    // Every point on a fresh store and on one with a prior base (where the
    // import's points are not reached: nothing is imported).
    let runs: Vec<(&str, bool)> = native
        .iter()
        .chain(&session)
        .flat_map(|p| [(*p, true), (*p, false)])
        .collect();
    let mut hit = 0;
    let mut missed = Vec::new();
    for (i, &(point, fresh)) in runs.iter().enumerate() {
        let home = if fresh {
            dir.path().join(format!("home-{i}"))
        } else {
            control.clone()
        };
        let out = arbor_tests::run_crasher(
            Path::new(CRASHER),
            Path::new(HELPER),
            &home,
            &src,
            Some(point),
        );
        if out.status.code() == Some(86) {
            hit += 1;
        } else {
            missed.push((point, fresh));
            // Every session point is reached on both kinds of store.
            assert!(
                !point.starts_with("session."),
                "{point} was not reached (fresh store: {fresh})"
            );
            assert!(
                out.status.success(),
                "at {point}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        if let Some(pid) = stdout.lines().find_map(|l| l.strip_prefix("helper ")) {
            // The helper dies with its parent (PDEATHSIG); give the kernel a moment.
            let gone = (0..100).any(|_| {
                std::thread::sleep(std::time::Duration::from_millis(10));
                !Path::new(&format!("/proc/{pid}")).exists()
                    || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                        .is_ok_and(|s| s.contains(") Z "))
            });
            assert!(gone, "helper {pid} outlived the crash at {point}");
        }
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            !mounts.contains(home.to_str().unwrap()),
            "a mount of {} survived {point}",
            home.display()
        );
        let rt =
            arbor_runtime::Runtime::open(arbor_tests::options(&home, Path::new(HELPER))).unwrap();
        let report = rt.store().fsck().unwrap();
        assert!(
            report.is_clean(),
            "after a crash at {point}: {:?}",
            report.problems
        );
        for id in rt.store().snapshots().unwrap() {
            for layer in listed_layers(&rt, &id, point) {
                assert!(
                    rt.store().layer_dir(&layer).is_dir(),
                    "listed snapshot {id} lacks layer {layer} after {point}"
                );
            }
        }
    }
    // Each point is reached on at least one kind of store.
    let never: Vec<&str> = runs
        .iter()
        .map(|(p, _)| *p)
        .filter(|p| missed.iter().filter(|(m, _)| m == p).count() == 2)
        .collect();
    assert!(
        never.is_empty() && hit >= runs.len() / 2,
        "never reached: {never:?}; {hit} of {} runs crashed; missed (point, fresh store): {missed:?}",
        runs.len()
    );
}

/// The layers of listed snapshot `id`, which must be readable (native or session).
fn listed_layers(
    rt: &arbor_runtime::Runtime,
    id: &arbor_runtime::store::object::SnapshotId,
    point: &str,
) -> Vec<arbor_runtime::store::object::LayerId> {
    let unreadable = |e: &dyn std::fmt::Display| -> ! {
        panic!("listed snapshot {id} unreadable after {point}: {e}")
    };
    #[cfg(feature = "wasm")]
    if rt.store().is_wasm_snapshot(id) {
        let wasm = rt
            .wasm(arbor_runtime::wasm::WasmLimits::default())
            .unwrap_or_else(|e| unreadable(&e));
        let snap = wasm.snapshot(id).unwrap_or_else(|e| unreadable(&e));
        // Its memory's page index is there and well formed.
        snap.page_hashes().unwrap_or_else(|e| unreadable(&e));
        return snap.manifest().layers.clone();
    }
    let snap = rt.snapshot(id).unwrap_or_else(|e| unreadable(&e));
    snap.manifest().layers.clone()
}

#[test]
fn several_processes_share_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    arbor_tests::sample_workspace(&src);
    let home = dir.path().join("home");
    // The shared starting point is tagged once: a process that re-tagged it
    // while another still meant to open the old one would let a concurrent
    // gc collect that one (gc removes what no tag or live sandbox reaches).
    let rt = arbor_runtime::Runtime::open(arbor_tests::options(&home, Path::new(HELPER))).unwrap();
    rt.import(&src, Some("base")).unwrap();
    drop(rt);
    // Each process runs an action on `base`, snapshots, tags and runs gc, all
    // at the same time on the same store.
    let children: Vec<_> = (0..6)
        .map(|_| {
            Command::new(crasher_path())
                .arg(&home)
                .arg(helper_path())
                .arg(&src)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let rt = arbor_runtime::Runtime::open(arbor_tests::options(&home, Path::new(HELPER))).unwrap();
    let report = rt.store().fsck().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let latest = rt
        .store()
        .get_tag("latest")
        .unwrap()
        .expect("a process tagged its result");
    let mut sb = rt.snapshot(&latest).unwrap().open().unwrap();
    let obs = sb
        .exec(
            "cat out/x; tail -n 1 README.md",
            &arbor_runtime::ExecOptions::default(),
        )
        .unwrap();
    assert_eq!(obs.stdout_text(), "1\nchanged\n");
}
