//! Replay (design invariants 5 and 8): a deterministic chain of ordinary
//! coding actions replays identically, run after run, through fresh forks;
//! a changed step, `$RANDOM`, the clock and `/dev/urandom` are reported
//! divergent at exactly their step; a broken chain is a clear error.

use std::path::Path;

use arbor_runtime::replay::{Divergence, ReplayOptions, replay};
use arbor_runtime::store::object::Action;
use arbor_runtime::{ExecOptions, Runtime, Snapshot};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

enum Step {
    Sh(&'static str),
    Write(&'static str, &'static str),
}

/// Twenty ordinary coding steps: edits, Python, a test file, git.
const CHAIN: &[Step] = &[
    Step::Write("calc.py", "def add(a, b):\n    return a + b\n"),
    Step::Sh("python3 -c 'import calc; print(calc.add(2, 3))'"),
    Step::Write(
        "test_calc.py",
        "import calc\nassert calc.add(1, 2) == 3\nassert calc.add(-1, 1) == 0\nprint('tests passed')\n",
    ),
    Step::Sh("python3 test_calc.py"),
    Step::Sh("git init -q . && git add -A && git commit -qm 'add calc' && git log --oneline"),
    Step::Sh("sed -i 's/return a + b/return b + a/' calc.py && cat calc.py"),
    Step::Sh("python3 test_calc.py && git diff --stat"),
    Step::Sh("git commit -qam 'commute' && git log --format='%H %an %ad %s'"),
    Step::Write("util/__init__.py", ""),
    Step::Write(
        "util/strings.py",
        "def shout(s):\n    return s.upper() + '!'\n",
    ),
    Step::Sh("python3 -c 'from util.strings import shout; print(shout(\"hi\"))'"),
    Step::Sh("mkdir -p data && seq 1 50 > data/numbers.txt && wc -l data/numbers.txt"),
    Step::Sh(
        "python3 -c 'print(sum(int(l) for l in open(\"data/numbers.txt\")))' > data/sum.txt; cat data/sum.txt",
    ),
    Step::Sh("git add -A && git commit -qm 'data' && git log --oneline | wc -l"),
    Step::Sh("rm data/numbers.txt && ls data"),
    Step::Sh("cd util && ls && cd .."),
    Step::Sh(
        "python3 -c 'import json; print(json.dumps({\"b\": 1, \"a\": [1, 2]}, sort_keys=True))' > out.json",
    ),
    Step::Sh("git status --short"),
    Step::Sh("git stash -q && git stash list && git stash pop -q && git status --short"),
    Step::Sh("git log --oneline && python3 test_calc.py"),
];

fn project(t: &arbor_tests::TestRuntime) -> Snapshot {
    let src = t.scratch("project");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("README.md"), "# calc\n").unwrap();
    t.runtime.import(&src, Some("root")).unwrap()
}

/// Run `steps` linearly in one sandbox, snapshotting after each.
fn record(t: &arbor_tests::TestRuntime, steps: &[Step]) -> Vec<Snapshot> {
    let mut sb = project(t).open().unwrap();
    let mut out = Vec::new();
    for step in steps {
        match step {
            Step::Sh(cmd) => {
                let obs = sb.exec(cmd, &ExecOptions::default()).unwrap();
                assert_eq!(
                    obs.code(),
                    Some(0),
                    "{cmd}: {}",
                    String::from_utf8_lossy(&obs.stderr)
                );
            }
            Step::Write(path, content) => sb.write_file(path, content.as_bytes(), 0o644).unwrap(),
        }
        out.push(sb.snapshot().unwrap());
    }
    out
}

fn first_divergent_step(rt: &Runtime, snap: &Snapshot) -> Option<usize> {
    replay(rt, snap, ReplayOptions::default())
        .unwrap()
        .first_divergence()
        .map(|s| s.step)
}

#[test]
fn a_twenty_step_coding_chain_replays_identically_ten_times() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let chain = record(&t, CHAIN);
    let last = chain.last().unwrap();
    assert_eq!(t.runtime.log(last).unwrap().len(), 21);
    let mut replayed = Vec::new();
    for run in 0..10 {
        let report = replay(&t.runtime, last, ReplayOptions::default()).unwrap();
        assert_eq!(report.steps.len(), 20);
        assert!(
            report.identical,
            "run {run}: {:#?}",
            report.first_divergence()
        );
        replayed.push(report.replayed);
    }
    // Every replay reproduces the recorded final workspace and session; the
    // only file allowed to differ is the one left out of digests.
    for id in replayed {
        let snap = t.runtime.snapshot(&id).unwrap();
        assert_eq!(snap.manifest().session, last.manifest().session);
        assert_eq!(snap.manifest().observations, last.manifest().observations);
        let d = t.runtime.diff(last, &snap).unwrap();
        assert!(d.added.is_empty() && d.deleted.is_empty(), "{d:?}");
        assert!(
            d.modified
                .iter()
                .all(|p| arbor_runtime::digest::is_excluded(p)),
            "{d:?}"
        );
    }
}

/// Re-create `chain` with step `k` (1-based) carrying `action` instead, but
/// the recorded observations of the original: what a chain with one edit
/// changed looks like to replay.
fn with_changed_step(rt: &Runtime, chain: &[Snapshot], k: usize, action: Action) -> Snapshot {
    let store = rt.store();
    let mut parent = chain[0].manifest().parent;
    let mut last = None;
    for (i, snap) in chain.iter().enumerate() {
        let mut m = snap.manifest().clone();
        m.parent = parent;
        if i + 1 == k {
            m.action = Some(action.clone());
        }
        let id = store.put_manifest(&m).unwrap();
        store.list_snapshot(&id).unwrap();
        parent = Some(id);
        last = Some(id);
    }
    rt.snapshot(&last.unwrap()).unwrap()
}

#[test]
fn a_changed_edit_diverges_at_exactly_that_step() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let chain = record(&t, &CHAIN[..8]);
    // Positive control: the unchanged chain is identical.
    assert_eq!(
        first_divergent_step(&t.runtime, chain.last().unwrap()),
        None
    );
    let edited = with_changed_step(
        &t.runtime,
        &chain,
        6,
        Action::Exec {
            command: "sed -i 's/return a + b/return a+b/' calc.py && cat calc.py".into(),
            timeout_ms: 60_000,
        },
    );
    let report = replay(&t.runtime, &edited, ReplayOptions::default()).unwrap();
    let first = report.first_divergence().expect("the edited step diverges");
    assert_eq!(first.step, 6);
    assert!(
        first
            .divergences
            .iter()
            .any(|d| matches!(d, Divergence::Stdout { .. }))
    );
    assert!(first.divergences.iter().any(
        |d| matches!(d, Divergence::Filesystem { paths, .. } if paths.iter().any(|p| p.starts_with("calc.py")))
    ));
    // --strict stops there.
    let strict = replay(&t.runtime, &edited, ReplayOptions { strict: true }).unwrap();
    assert_eq!(strict.steps.len(), 6);
    assert!(strict.stopped_early);
}

#[test]
fn uncontrolled_sources_diverge_at_exactly_their_step() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    for (noisy, part) in [
        ("echo $RANDOM", "stdout"),
        ("date +%s%N", "stdout"),
        ("python3 -c 'import time; print(time.time())'", "stdout"),
        ("head -c8 /dev/urandom > noise.bin", "filesystem"),
    ] {
        let steps = [
            Step::Write("a.txt", "a\n"),
            Step::Sh("cat a.txt"),
            Step::Sh(noisy),
            Step::Sh("echo steady > b.txt && cat b.txt"),
        ];
        let chain = record(&t, &steps);
        let report = replay(&t.runtime, chain.last().unwrap(), ReplayOptions::default()).unwrap();
        let divergent: Vec<usize> = report
            .steps
            .iter()
            .filter(|s| !s.divergences.is_empty())
            .map(|s| s.step)
            .collect();
        assert_eq!(divergent, [3], "{noisy}: {report:#?}");
        let d = &report.steps[2].divergences;
        let found = d.iter().any(|d| match d {
            Divergence::Stdout { .. } => part == "stdout",
            Divergence::Filesystem { paths, .. } => {
                part == "filesystem" && paths.iter().any(|p| p.starts_with("noise.bin"))
            }
            _ => false,
        });
        assert!(found, "{noisy}: {d:?}");
    }
}

#[test]
fn a_broken_chain_is_a_clear_error() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let chain = record(&t, &CHAIN[..2]);
    let last = chain.last().unwrap();
    let root = t.runtime.log(last).unwrap()[0].clone();
    // Corrupt root layer: a flipped byte in one of its files.
    let layer = t.runtime.store().layer_dir(&root.manifest().layers[0]);
    let readme = layer.join("README.md");
    let mut bytes = std::fs::read(&readme).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&readme, &bytes).unwrap();
    let err = replay(&t.runtime, last, ReplayOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("root") && err.contains("README.md"), "{err}");
    bytes[0] ^= 1;
    std::fs::write(&readme, &bytes).unwrap();
    assert!(
        replay(&t.runtime, last, ReplayOptions::default())
            .unwrap()
            .identical,
        "positive control"
    );
    // Deleted root: its manifest object is gone.
    std::fs::remove_file(t.runtime.store().object_path(root.id())).unwrap();
    let err = replay(&t.runtime, last, ReplayOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("broken") && err.contains(&root.id().to_hex()),
        "{err}"
    );
}

#[test]
fn replays_snapshots_persisted_by_an_earlier_process() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    arbor_tests::sample_workspace(&src);
    let home = dir.path().join("home");
    let crasher = Path::new(env!("CARGO_BIN_EXE_arbor-test-crasher"));
    let out = arbor_tests::run_crasher(crasher, Path::new(HELPER), &home, &src, None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rt = Runtime::open(arbor_tests::options(&home, Path::new(HELPER))).unwrap();
    let latest = rt.resolve("latest").unwrap();
    let report = replay(&rt, &latest, ReplayOptions::default()).unwrap();
    assert_eq!(report.steps.len(), 1);
    assert!(report.identical, "{report:#?}");
}
