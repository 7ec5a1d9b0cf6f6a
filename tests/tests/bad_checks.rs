//! Bad input to the verifier: a check file that does not parse, a pytest id
//! that does not exist, and code under test that crashes, hangs or floods
//! its output. Each gets a check error that names the problem, the verdict
//! is 0 with that reason, and the runtime and its store are unharmed (the
//! same task still grades its gold solution 1 afterwards; fsck is clean).

use std::path::{Path, PathBuf};

use arbor_envs::rollout::{AgentAction, Verdict};
use arbor_envs::{TaskEnv, TaskSpec};
use arbor_tests::{TestRuntime, runtime};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

const OPS_BUGGY: &str = "def add(a, b):\n    return a - b\n";
const OPS_FIXED: &str = "def add(a, b):\n    return a + b\n";

const UNITTEST_CHECKS: &str = "import unittest\nfrom ops import add\n\n\nclass Add(unittest.TestCase):\n    def test_small(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_negative(self):\n        self.assertEqual(add(-4, 1), -3)\n";

const PYTEST_CHECKS: &str = "from ops import add\n\n\ndef test_small():\n    assert add(2, 3) == 5\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n";

/// A task over `ops.py` with `checks` as its only check file.
fn write_task(root: &Path, id: &str, check_file: &str, checks: &str, extra: &str) -> PathBuf {
    let dir = root.join(id);
    std::fs::create_dir_all(dir.join("workspace")).unwrap();
    std::fs::create_dir_all(dir.join("checks")).unwrap();
    std::fs::write(dir.join("workspace/ops.py"), OPS_BUGGY).unwrap();
    std::fs::write(dir.join("checks").join(check_file), checks).unwrap();
    std::fs::write(
        dir.join("task.toml"),
        format!(
            r#"id = "{id}"
family = "coding"
group = "ops"
difficulty = "easy"
instructions = "add() subtracts."

[limits]
max_steps = 4
step_timeout_s = 20
total_time_s = 60

[paths]
allow = ["ops.py"]

[checks]
timeout_s = 8
{extra}

[[gold]]
write = "ops.py"
content = '''
{OPS_FIXED}'''
"#
        ),
    )
    .unwrap();
    dir
}

fn prepare(rt: &TestRuntime, dir: &Path) -> TaskEnv {
    TaskEnv::prepare(&rt.runtime, TaskSpec::load(dir).unwrap()).unwrap()
}

/// The verdict's reasons, all of them (summary, problem, per-check details).
fn reasons(v: &Verdict) -> String {
    let mut s = v.summary();
    if let Some(p) = &v.task.problem {
        s.push_str(&format!("\nproblem: {p}"));
    }
    for c in &v.task.checks {
        s.push_str(&format!("\n{} {}: {}", c.id, c.passed, c.detail));
    }
    s
}

/// The code under test with `payload` run when `add` is called.
fn fixed_but(payload: &str) -> Vec<AgentAction> {
    vec![AgentAction::write(
        "ops.py",
        format!("def add(a, b):\n{payload}\n    return a + b\n"),
    )]
}

fn assert_unharmed(rt: &TestRuntime, env: &TaskEnv) {
    let v = env.run_and_verify(&env.spec().gold.clone()).unwrap();
    assert_eq!(v.reward, Some(1.0), "afterwards: {}", reasons(&v));
    let report = rt.runtime.store().fsck().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn a_check_file_that_does_not_parse_is_named_and_scores_zero() {
    let rt = runtime(Path::new(HELPER));
    let dir = write_task(
        rt.dir.path(),
        "bad-parse",
        "test_ops.py",
        "import unittest\n\nclass Add(unittest.TestCase:\n    pass\n",
        "",
    );
    let env = prepare(&rt, &dir);
    for actions in [Vec::new(), env.spec().gold.clone()] {
        let v = env.run_and_verify(&actions).unwrap();
        assert_eq!(v.reward, Some(0.0), "{}", reasons(&v));
        let why = reasons(&v);
        assert!(
            why.contains("test_ops") && why.contains("SyntaxError"),
            "names the file and the error: {why}"
        );
    }
    // Positive control: the same task with a check file that parses.
    std::fs::write(dir.join("checks/test_ops.py"), UNITTEST_CHECKS).unwrap();
    let env = prepare(&rt, &dir);
    assert_unharmed(&rt, &env);
}

#[test]
fn a_pytest_id_that_does_not_exist_is_named_and_scores_zero() {
    let rt = runtime(Path::new(HELPER));
    let dir = write_task(
        rt.dir.path(),
        "bad-id",
        "test_ops.py",
        PYTEST_CHECKS,
        "runner = \"pytest\"\nfail_to_pass = [\"test_ops.py::test_small\", \"test_ops.py::test_nope\"]\npass_to_pass = [\"test_ops.py::test_zero\"]",
    );
    let env = prepare(&rt, &dir);
    let v = env.run_and_verify(&env.spec().gold.clone()).unwrap();
    assert_eq!(v.reward, Some(0.0), "{}", reasons(&v));
    let nope = v
        .task
        .checks
        .iter()
        .find(|c| c.id == "test_ops.py::test_nope")
        .unwrap();
    assert!(!nope.passed);
    assert!(
        nope.detail.contains("not found"),
        "names the missing id: {}",
        nope.detail
    );
    // The ids that exist were graded (and passed).
    assert_eq!(v.task.checks_passed, 2, "{}", reasons(&v));

    // Positive control: without the missing id the gold solution passes.
    std::fs::write(
        dir.join("task.toml"),
        std::fs::read_to_string(dir.join("task.toml"))
            .unwrap()
            .replace(", \"test_ops.py::test_nope\"", ""),
    )
    .unwrap();
    let env = prepare(&rt, &dir);
    assert_unharmed(&rt, &env);
}

#[test]
fn a_subject_that_crashes_hangs_or_floods_gets_a_named_error() {
    let rt = runtime(Path::new(HELPER));
    // The static layer would already refuse os._exit; let the code run to
    // see what the boundary makes of it.
    let dir = write_task(
        rt.dir.path(),
        "bad-subject",
        "test_ops.py",
        UNITTEST_CHECKS,
        "allow_static = [\"process\", \"output\"]",
    );
    let env = prepare(&rt, &dir);
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "crash (segfault)",
            "    import faulthandler\n    faulthandler._sigsegv()",
            &["subject", "signal"],
        ),
        (
            "crash (exit)",
            "    import os\n    os._exit(3)",
            &["subject", "exit"],
        ),
        ("hang", "    while True:\n        pass", &["time"]),
        (
            "flood (print)",
            "    for _ in range(100_000):\n        print('x' * 4096)",
            &["flooded", "output"],
        ),
        (
            "flood (fd 1)",
            "    import os\n    while True:\n        os.write(1, b'x' * 65536)",
            &["flooded", "output"],
        ),
    ];
    for (what, payload, words) in cases {
        let v = env.run_and_verify(&fixed_but(payload)).unwrap();
        let why = reasons(&v).to_lowercase();
        println!("{what}: {why}\n");
        assert_eq!(v.reward, Some(0.0), "{what}: {why}");
        for w in *words {
            assert!(why.contains(w), "{what}: the reason mentions {w:?}: {why}");
        }
    }
    // Positive control and the runtime afterwards: the gold still scores 1.
    assert_unharmed(&rt, &env);
}

#[test]
fn a_pytest_file_that_cannot_be_collected_errors_only_its_own_checks() {
    let rt = runtime(Path::new(HELPER));
    let dir = write_task(
        rt.dir.path(),
        "bad-collect",
        "test_ops.py",
        PYTEST_CHECKS,
        "runner = \"pytest\"",
    );
    std::fs::write(
        dir.join("checks/test_broken.py"),
        "raise RuntimeError('broken at import')\n\n\ndef test_never():\n    pass\n",
    )
    .unwrap();
    let env = prepare(&rt, &dir);
    let v = env.run_and_verify(&env.spec().gold.clone()).unwrap();
    let why = reasons(&v);
    assert_eq!(v.reward, Some(0.0), "{why}");
    let broken = v
        .task
        .checks
        .iter()
        .find(|c| c.id.starts_with("test_broken.py"))
        .unwrap_or_else(|| panic!("the broken file is a check: {why}"));
    assert!(!broken.passed);
    assert!(
        broken.detail.contains("broken at import"),
        "names the collection error: {why}"
    );
    // pytest alone stops the session at a collection error; the other
    // file's checks are still run and graded.
    assert_eq!(v.task.checks_passed, 2, "{why}");

    // Positive control: without the broken file the gold scores 1.
    std::fs::remove_file(dir.join("checks/test_broken.py")).unwrap();
    let env = prepare(&rt, &dir);
    assert_unharmed(&rt, &env);
}

/// Checks parametrized over a set of tuples: pytest names each case by its
/// position (`c3-box7`), which follows the set's iteration order, which
/// follows string hashing.
const SET_CHECKS: &str = "import pytest\nfrom ops import add\n\nCASES = {(f'c{i}', frozenset([i])) for i in range(24)}\n\n\n@pytest.mark.parametrize('name,box', CASES)\ndef test_add(name, box):\n    (i,) = box\n    assert name == f'c{i}' and add(i, i) == 2 * i\n";

#[test]
fn checks_parametrized_over_a_set_keep_their_ids_from_listing_to_running() {
    let rt = runtime(Path::new(HELPER));
    let dir = write_task(
        rt.dir.path(),
        "set-ids",
        "test_ops.py",
        SET_CHECKS,
        "runner = \"pytest\"",
    );
    // Control: the order (so the ids) does depend on the hash seed, so
    // unseeded listing and running would disagree.
    let snap = rt.runtime.import(&dir.join("checks"), None).unwrap();
    let order = |seed: u32| {
        let mut sb = snap.open().unwrap();
        let cmd = format!(
            "PYTHONHASHSEED={seed} python3 -c \"print([n for n, _ in {{(f'c{{i}}', frozenset([i])) for i in range(24)}}])\""
        );
        let obs = sb
            .exec(&cmd, &arbor_runtime::ExecOptions::with_timeout_ms(20_000))
            .unwrap();
        assert_eq!(obs.code(), Some(0), "{obs:?}");
        obs.stdout_text()
    };
    assert_ne!(order(1), order(2), "the set's order follows the seed");

    let env = prepare(&rt, &dir);
    assert_eq!(env.spec().gold.len(), 1);
    for run in 0..2 {
        let v = env.run_and_verify(&env.spec().gold.clone()).unwrap();
        assert_eq!(v.task.checks_total, 24, "run {run}: {}", reasons(&v));
        assert_eq!(v.reward, Some(1.0), "run {run}: {}", reasons(&v));
    }
    // And a wrong solution fails them (the ids are graded, not skipped).
    let v = env.run_and_verify(&[]).unwrap();
    assert_eq!(v.reward, Some(0.0), "{}", reasons(&v));
    assert_eq!(
        v.task.checks_passed,
        1,
        "only add(0, 0) holds: {}",
        reasons(&v)
    );
}
