//! The attack catalogue: payloads that target the check runner itself, each
//! applied on top of an *unfixed* bug, on every native task family (coding:
//! unittest with strict assertions; upstream: pytest with upstream
//! semantics; terminal: checks that run a workspace program).
//!
//! Every payload is run three ways:
//! - against the verifier as shipped (process boundary and static layer):
//!   it must score 0;
//! - against the verifier with the static layer told to allow every rule,
//!   so only the process boundary stands: it must score 0, except that a
//!   task with *upstream* semantics evaluates the code's own comparisons as
//!   upstream does, so lying dunders pass there (the static layer is what
//!   stops them; README, residual risks);
//! - against a deliberately weak runner (tests/attacks/weak_runner.py: the
//!   checks and the code under test in one interpreter, a naive judge) in
//!   the same sandbox: the positive control, which proves the payload
//!   forges a pass when the boundary is absent. Payloads that need the
//!   runner's process (frames, gc, `__main__`, its stdout) cannot reach it
//!   from a terminal task's program even there; for that family the
//!   process-level payloads are the ones with a control.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arbor_envs::rollout::AgentAction;
use arbor_envs::verifier::integrity::RULES;
use arbor_envs::verifier::verifier_site;
use arbor_envs::{TaskEnv, TaskSpec};
use arbor_runtime::sandbox::ReadOnlyMount;
use arbor_runtime::{ExecOptions, Runtime, Snapshot};
use arbor_tests::{TestRuntime, runtime};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");
const PRELUDE: &str = include_str!("../attacks/prelude.py");
const WEAK_RUNNER: &str = include_str!("../attacks/weak_runner.py");

/// One payload: its name, its code, and the families where it fools the
/// weak runner (its positive controls).
struct Attack {
    name: &'static str,
    code: &'static str,
    controls: &'static [Family],
    /// Its results lie about themselves (comparisons, hashes, lengths):
    /// what upstream semantics evaluate as the code's own behaviour.
    lies: bool,
}

macro_rules! attack {
    ($name:literal, $controls:expr, $lies:literal) => {
        Attack {
            name: $name,
            code: include_str!(concat!("../attacks/payloads/", $name, ".py")),
            controls: $controls,
            lies: $lies,
        }
    };
}

/// Payloads that act inside the runner's own process: a terminal task's
/// program is another process even under the weak runner.
const IN_PROCESS: &[Family] = &[Family::Coding, Family::Upstream];
/// Payloads that act from any process.
const ANY: &[Family] = &[Family::Coding, Family::Upstream, Family::Terminal];

const ATTACKS: &[Attack] = &[
    attack!("main_globals", IN_PROCESS, false),
    attack!("frame_walk", IN_PROCESS, false),
    attack!("gc_walk", IN_PROCESS, false),
    attack!("forged_line_exit", IN_PROCESS, false),
    attack!("fd_write", ANY, false),
    attack!("atexit_forge", IN_PROCESS, false),
    attack!("signal_handler", IN_PROCESS, false),
    attack!("thread_outlives", IN_PROCESS, false),
    attack!("stdout_replace", IN_PROCESS, false),
    attack!("import_hook", IN_PROCESS, false),
    attack!("class_swap", IN_PROCESS, true),
    attack!("lying_dunders", IN_PROCESS, true),
    attack!("del_at_exit", IN_PROCESS, false),
    attack!("skip_from_code", IN_PROCESS, false),
    attack!("abort_exception", IN_PROCESS, false),
    attack!("sleep_until_timeout", ANY, false),
    attack!("proc_self_mem", IN_PROCESS, false),
    attack!("proc_other_process", &[Family::Terminal], false),
    attack!("trace_locals", IN_PROCESS, false),
    attack!("builtins_patch", IN_PROCESS, false),
    attack!("kill_parent", ANY, false),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Family {
    Coding,
    Upstream,
    Terminal,
}

const GEO_BUGGY: &str = r#""""Rectangles."""


def area(w, h):
    """The area of a w x h rectangle."""
    return w + h


def cells(w, h):
    """The cells of a w x h grid, as (x, y) pairs."""
    return [(x, y) for x in range(w) for y in range(h - 1)]


def corners(w, h):
    """The corners of a w x h rectangle at the origin."""
    return [(0, 0), (w, 0), (0, h), (w, h)]
"#;

/// Where a payload's `_attack()` runs: at every call of the checked
/// functions, whose results `_arbor_wrap` may replace.
const GEO_TRIGGER: &str = r#"

_arbor_area, _arbor_cells = area, cells


def area(w, h):
    _attack()
    return _arbor_wrap(_arbor_area(w, h))


def cells(w, h):
    _attack()
    return _arbor_wrap_cells(_arbor_cells(w, h))
"#;

const GEO_UNITTEST: &str = r#"import unittest

from geo import area, cells, corners


class Corners(unittest.TestCase):
    def test_corners(self):
        self.assertEqual(corners(2, 3), [(0, 0), (2, 0), (0, 3), (2, 3)])


class Geometry(unittest.TestCase):
    def test_area(self):
        self.assertEqual(area(2, 3), 6)

    def test_area_known(self):
        self.assertIn(area(3, 3), {9, 16})

    def test_area_truth(self):
        self.assertTrue(area(4, 5) == 20)

    def test_cells(self):
        self.assertEqual(len(cells(2, 3)), 6)
"#;

const GEO_PYTEST: &str = r#"from geo import area, cells, corners


def test_corners():
    assert corners(2, 3) == [(0, 0), (2, 0), (0, 3), (2, 3)]


def test_area():
    assert area(2, 3) == 6


def test_area_known():
    assert area(3, 3) in {9, 16}


def test_area_truth():
    assert area(4, 5) == 20


def test_cells():
    assert len(cells(2, 3)) == 6
"#;

const REPORT_BUGGY: &str = r#""""Sum the numbers of a file (one per line) into a report."""
import sys


def total(path):
    with open(path) as f:
        return sum(int(line) for line in f if line.strip()) - 1


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(dst, "w") as f:
        f.write(f"total {total(src)}\n")


if __name__ == "__main__":
    main()
"#;

/// A terminal program's payload runs when the program does, after its work.
const REPORT_TRIGGER: &str = "\n\n_attack()\n";

const REPORT_CHECKS: &str = r#"import os
import subprocess
import unittest


class Data(unittest.TestCase):
    def test_data_present(self):
        self.assertTrue(os.path.isfile("data.txt"))


class Report(unittest.TestCase):
    def test_report(self):
        subprocess.run(["python3", "tools/report.py", "data.txt", "/tmp/report.txt"],
                       capture_output=True, timeout=60)
        with open("/tmp/report.txt") as f:
            self.assertEqual(f.read(), "total 6\n")
"#;

/// The checks' time limit (the sleeping payload runs into it).
const CHECKS_TIMEOUT_S: u64 = 6;

/// Write the family's attack task under `root` (`boundary_only`: the static
/// layer allows every rule).
fn write_task(root: &Path, family: Family, boundary_only: bool) -> PathBuf {
    let id = format!(
        "attack-{}{}",
        format!("{family:?}").to_lowercase(),
        if boundary_only { "-boundary" } else { "" }
    );
    let dir = root.join(&id);
    std::fs::create_dir_all(dir.join("workspace/tools")).unwrap();
    std::fs::create_dir_all(dir.join("checks")).unwrap();
    let allow_static = if boundary_only {
        format!(
            "allow_static = [{}]",
            RULES
                .iter()
                .map(|r| format!("\"{r}\""))
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        String::new()
    };
    let (family_name, runner, target, fixed) = match family {
        Family::Coding | Family::Upstream => {
            std::fs::write(dir.join("workspace/geo.py"), GEO_BUGGY).unwrap();
            let (checks, runner, family_name) = if family == Family::Coding {
                (GEO_UNITTEST, "unittest", "coding")
            } else {
                (GEO_PYTEST, "pytest", "upstream")
            };
            std::fs::write(dir.join("checks/test_geo.py"), checks).unwrap();
            (family_name, runner, "geo.py", geo_fixed())
        }
        Family::Terminal => {
            std::fs::write(dir.join("workspace/tools/report.py"), REPORT_BUGGY).unwrap();
            std::fs::write(dir.join("workspace/data.txt"), "1\n2\n3\n").unwrap();
            std::fs::write(dir.join("checks/test_report.py"), REPORT_CHECKS).unwrap();
            ("terminal", "unittest", "tools/report.py", report_fixed())
        }
    };
    let semantics = if runner == "pytest" {
        "upstream"
    } else {
        "strict"
    };
    std::fs::write(
        dir.join("task.toml"),
        format!(
            r#"id = "{id}"
family = "{family_name}"
group = "attacks"
difficulty = "easy"
instructions = "Fix the bug."

[limits]
max_steps = 4
step_timeout_s = 20
total_time_s = 60

[paths]
allow = ["{target}"]

[checks]
runner = "{runner}"
semantics = "{semantics}"
timeout_s = {CHECKS_TIMEOUT_S}
{allow_static}

[[gold]]
write = "{target}"
content = '''
{fixed}'''
"#
        ),
    )
    .unwrap();
    dir
}

fn geo_fixed() -> String {
    GEO_BUGGY
        .replace("return w + h", "return w * h")
        .replace("range(h - 1)", "range(h)")
}

fn report_fixed() -> String {
    REPORT_BUGGY.replace(" - 1\n", "\n")
}

/// The unfixed target with `attack` appended (prelude, payload, trigger).
fn attacked(family: Family, attack: &Attack) -> AgentAction {
    let (path, base, trigger) = match family {
        Family::Terminal => ("tools/report.py", REPORT_BUGGY, REPORT_TRIGGER),
        _ => ("geo.py", GEO_BUGGY, GEO_TRIGGER),
    };
    AgentAction::write(
        path,
        format!("{base}\n\n{PRELUDE}\n\n{}{trigger}", attack.code),
    )
}

/// The weak runner's folder as a one-layer snapshot: the runner, the
/// task's checks, and (for pytest) the trusted site.
fn weak_snapshot(rt: &Runtime, scratch: &Path, task_dir: &Path, pytest: bool) -> Snapshot {
    let dir = scratch.join("weak");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("checks")).unwrap();
    std::fs::write(dir.join("weak_runner.py"), WEAK_RUNNER).unwrap();
    for e in std::fs::read_dir(task_dir.join("checks")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join("checks").join(e.file_name())).unwrap();
    }
    if pytest {
        let site = verifier_site().expect("pytest's trusted site (.ci/prerequisites)");
        copy_tree(&site, &dir.join("site"));
    }
    rt.import(&dir, None).unwrap()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let ty = e.file_type().unwrap();
        if ty.is_dir() {
            if e.file_name() != "__pycache__" {
                copy_tree(&e.path(), &to.join(e.file_name()));
            }
        } else if ty.is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// The weak runner's reward for the state `actions` leave: any result
/// line with the nonce whose tests all passed or were skipped scores 1;
/// without any (killed, timed out), the partial reports score 1 when none
/// failed and one passed.
fn weak_reward(env: &TaskEnv, weak: &Snapshot, pytest: bool, actions: &[AgentAction]) -> f64 {
    let (episode, _) = env.run(actions).unwrap();
    let last = episode.last.native().unwrap();
    let mut sb = last.open().unwrap();
    sb.reset_session();
    let nonce = format!("{:032x}", rand_u128());
    let mut opts = ExecOptions::with_timeout_ms(CHECKS_TIMEOUT_S * 1000);
    opts.mounts = vec![ReadOnlyMount::new(weak, "verifier").unwrap()];
    opts.env = vec![("ARBOR_NONCE".into(), nonce.clone())];
    let mode = if pytest { "pytest" } else { "unittest" };
    let obs = sb
        .exec(
            &format!("exec /usr/bin/python3 -I -S -B /verifier/weak_runner.py {mode}"),
            &opts,
        )
        .unwrap();
    let stdout = String::from_utf8_lossy(&obs.stdout);
    let result_prefix = format!("ARBOR-RESULT {nonce} ");
    let results: Vec<&str> = stdout
        .lines()
        .filter_map(|l| {
            l.find(&result_prefix)
                .map(|i| &l[i + result_prefix.len()..])
        })
        .collect();
    if !results.is_empty() {
        let passing = results.iter().any(|r| {
            serde_json::from_str::<serde_json::Value>(r)
                .ok()
                .and_then(|v| v["tests"].as_array().cloned())
                .is_some_and(|tests| {
                    !tests.is_empty()
                        && tests
                            .iter()
                            .all(|t| matches!(t["outcome"].as_str(), Some("pass" | "skip")))
                })
        });
        return if passing { 1.0 } else { 0.0 };
    }
    let partial_prefix = format!("ARBOR-PARTIAL {nonce} ");
    let outcomes: Vec<&str> = stdout
        .lines()
        .filter_map(|l| {
            l.find(&partial_prefix)
                .map(|i| &l[i + partial_prefix.len()..])
        })
        .filter_map(|l| l.rsplit(' ').next())
        .collect();
    let ok = outcomes.contains(&"pass") && outcomes.iter().all(|o| *o == "pass" || *o == "skip");
    if ok { 1.0 } else { 0.0 }
}

fn rand_u128() -> u128 {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .unwrap();
    u128::from_le_bytes(b)
}

#[test]
fn no_attack_on_the_runner_scores_on_any_native_family() {
    let t: TestRuntime = runtime(Path::new(HELPER));
    let rt = &t.runtime;
    let root = t.scratch("tasks");
    let mut table: BTreeMap<(&str, Family), (f64, f64, String, String)> = BTreeMap::new();
    let mut failures = Vec::new();
    for family in [Family::Coding, Family::Upstream, Family::Terminal] {
        let pytest = family == Family::Upstream;
        let shipped_dir = write_task(&root, family, false);
        let boundary_dir = write_task(&root, family, true);
        let shipped = TaskEnv::prepare(rt, TaskSpec::load(&shipped_dir).unwrap()).unwrap();
        let boundary = TaskEnv::prepare(rt, TaskSpec::load(&boundary_dir).unwrap()).unwrap();
        let weak = weak_snapshot(rt, &t.scratch("weak-src"), &shipped_dir, pytest);

        // Controls: the unfixed code fails and the fixed code passes, in
        // the verifier and in the weak runner alike.
        let gold = shipped.spec().gold.clone();
        for (what, actions, want) in [("unfixed", Vec::new(), 0.0), ("fixed", gold, 1.0)] {
            let v = shipped.run_and_verify(&actions).unwrap();
            assert_eq!(v.reward, Some(want), "{family:?} {what}: {}", v.summary());
            let v = boundary.run_and_verify(&actions).unwrap();
            assert_eq!(v.reward, Some(want), "{family:?} {what} (boundary only)");
            assert_eq!(
                weak_reward(&shipped, &weak, pytest, &actions),
                want,
                "{family:?} {what} (weak runner)"
            );
        }

        for attack in ATTACKS {
            let actions = vec![attacked(family, attack)];
            let s = shipped.run_and_verify(&actions).unwrap();
            let b = boundary.run_and_verify(&actions).unwrap();
            let w = weak_reward(&shipped, &weak, pytest, &actions);
            let name = attack.name;
            if s.reward != Some(0.0) {
                failures.push(format!(
                    "{family:?}/{name}: the verifier as shipped gave {:?}: {}",
                    s.reward,
                    s.summary()
                ));
            }
            // Upstream semantics run the code's own comparisons, as
            // upstream does: a result that lies about itself passes there
            // unless the static layer stops it.
            let boundary_want = if family == Family::Upstream && attack.lies {
                1.0
            } else {
                0.0
            };
            if b.reward != Some(boundary_want) {
                failures.push(format!(
                    "{family:?}/{name}: the process boundary alone gave {:?} (expected {boundary_want}): {}",
                    b.reward,
                    b.summary()
                ));
            }
            let control = attack.controls.contains(&family);
            if control && w != 1.0 {
                failures.push(format!(
                    "{family:?}/{name}: the positive control failed: the weak runner was not fooled"
                ));
            }
            table.insert(
                (name, family),
                (
                    s.reward.unwrap_or(-1.0),
                    b.reward.unwrap_or(-1.0),
                    if control {
                        format!("{w}")
                    } else {
                        format!("{w} (no control)")
                    },
                    b.summary(),
                ),
            );
        }
    }
    let mut report = String::from(
        "| attack | family | shipped | boundary only | weak runner | the boundary-only verdict |\n|---|---|---|---|---|---|\n",
    );
    for ((name, family), (s, b, w, why)) in &table {
        report.push_str(&format!(
            "| {name} | {family:?} | {s} | {b} | {w} | {} |\n",
            why.replace('|', "/").chars().take(120).collect::<String>()
        ));
    }
    println!("{report}");
    assert!(failures.is_empty(), "{}\n\n{report}", failures.join("\n"));
}
