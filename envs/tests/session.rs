//! The `backend = "wasm"` task family (feature `wasm`): every bundled session
//! task's gold scores 1, forged objects and endless steps score 0 without
//! hurting the runtime, and the hidden checks never reach the agent's
//! session. Needs the Python guest (`.ci/build-guests`, or
//! `ARBOR_PYTHON_GUEST`); the bundled suite is `$ARBOR_TASKS` or
//! `envs/tasks`.

use std::sync::OnceLock;

use arbor_envs::rollout::AgentAction;
use arbor_envs::rollout::env::ViolationKind;
use arbor_envs::session::SessionEnv;
use arbor_envs::suite::{self, Suite};
use arbor_envs::task::Backend;
use arbor_runtime::Runtime;

/// One store and runtime for the whole test binary (the guest is booted
/// once per task and process).
fn runtime() -> &'static Runtime {
    static RT: OnceLock<(tempfile::TempDir, Runtime)> = OnceLock::new();
    &RT.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("arbor-session-test-")
            .tempdir()
            .unwrap();
        let rt = Runtime::open_at(dir.path().join("home")).unwrap();
        (dir, rt)
    })
    .1
}

fn suite() -> &'static Suite {
    static SUITE: OnceLock<Suite> = OnceLock::new();
    SUITE.get_or_init(|| Suite::load(&suite::bundled_dir()).expect("the bundled suite loads"))
}

fn env(id: &str) -> SessionEnv {
    let spec = suite().get(id).unwrap_or_else(|| panic!("no task {id}"));
    SessionEnv::prepare(runtime(), spec.clone()).unwrap()
}

fn exec(code: &str) -> AgentAction {
    AgentAction::exec(code)
}

#[test]
fn every_session_task_scores_one_for_gold_and_zero_for_nothing() {
    let ids: Vec<&String> = suite()
        .tasks
        .values()
        .filter(|t| t.backend == Backend::Wasm)
        .map(|t| &t.id)
        .collect();
    assert!(ids.len() >= 8, "{} session tasks", ids.len());
    assert_eq!(
        suite().split("code-interpreter").unwrap().len(),
        ids.len(),
        "the code-interpreter split holds exactly the session tasks"
    );
    for id in ids {
        let env = env(id);
        let gold = env.run_and_verify(&env.spec().gold).unwrap();
        assert_eq!(gold.reward, Some(1.0), "{id}: gold: {}", gold.summary());
        let noop = env.run_and_verify(&[]).unwrap();
        assert_eq!(noop.reward, Some(0.0), "{id}: no-op: {}", noop.summary());
    }
}

#[test]
fn a_forged_eq_subclass_scores_zero() {
    let env = env("session-topk-1");
    let mut actions = env.spec().gold.clone();
    actions.push(exec(
        "class Yes(list):\n    def __eq__(self, other):\n        return True\n    def __repr__(self):\n        return \"['bob', 'dee', 'cy']\"\n\
         leaders = Yes(['bob', 'dee', 'cy'])\n\
         def top_k(xs, k):\n    return Yes()\n",
    ));
    let v = env.run_and_verify(&actions).unwrap();
    assert_eq!(v.reward, Some(0.0), "{}", v.summary());
    // Both layers see it: the static one names the new __eq__, and the
    // session check, on its own, refuses the value.
    assert_eq!(v.hard.violations.len(), 1, "{:?}", v.hard.violations);
    assert!(
        v.hard.violations[0]
            .detail
            .contains("introduces dunder:__eq__"),
        "{:?}",
        v.hard.violations
    );
    let leaders = v.task.checks.iter().find(|c| c.id == "leaders").unwrap();
    assert!(!leaders.passed);
    assert!(
        leaders.detail.contains("not plain data") && leaders.detail.contains("Yes"),
        "{}",
        leaders.detail
    );
}

#[test]
fn an_endless_step_is_stopped_scores_zero_and_the_runtime_goes_on() {
    let env = env("session-intervals-1");
    let mut actions = env.spec().gold.clone();
    actions.push(exec("while True:\n    pass\n"));
    let t = std::time::Instant::now();
    let v = env.run_and_verify(&actions).unwrap();
    assert!(
        t.elapsed().as_secs() < 20,
        "stopped by fuel: {:?}",
        t.elapsed()
    );
    assert_eq!(v.reward, Some(0.0), "{}", v.summary());
    assert!(
        v.hard
            .violations
            .iter()
            .any(|x| x.kind == ViolationKind::AgentTimeout),
        "{:?}",
        v.hard.violations
    );
    // A function that loops only when the checks call it: the check's own
    // fuel runs out, that check fails, nothing else is affected.
    let mut actions = env.spec().gold.clone();
    actions.push(exec(
        "_merge = merge\ndef merge(intervals):\n    if list(map(list, intervals)) == [[5, 6], [1, 3], [2, 4]]:\n        return _merge(intervals)\n    while True:\n        pass\n",
    ));
    let v = env.run_and_verify(&actions).unwrap();
    assert_eq!(v.reward, Some(0.0), "{}", v.summary());
    assert!(v.hard.violations.is_empty(), "{:?}", v.hard.violations);
    assert!(
        v.task
            .checks
            .iter()
            .any(|c| !c.passed && c.detail.contains("OutOfFuel")),
        "{:?}",
        v.task.checks
    );
    // The next episode on the same runtime is fine.
    let again = env.run_and_verify(&env.spec().gold).unwrap();
    assert_eq!(again.reward, Some(1.0), "{}", again.summary());
}

#[test]
fn hidden_checks_never_reach_the_agents_session() {
    let env = env("session-trie-1");
    let episode = env.run(&env.spec().gold).unwrap();
    let v = env.verify(&episode);
    assert_eq!(v.reward, Some(1.0), "{}", v.summary());
    // The checks ran in forks; the final snapshot is what the agent left.
    let image = episode.last.image().unwrap();
    let memory = arbor_runtime::wasm::memory::read_image(&image).unwrap();
    let has = |needle: &[u8]| memory.windows(needle.len()).any(|w| w == needle);
    assert!(
        has(b"starts_with"),
        "control: the agent's own code is there"
    );
    for hidden in [&b"planet"[..], b"_arbor_check_", b"mood"] {
        assert!(
            !has(hidden),
            "{} found in the agent's memory",
            String::from_utf8_lossy(hidden)
        );
    }
    // A session continued from the final snapshot sees none of it either.
    let mut sb = episode.last.open().unwrap();
    let r = sb
        .step("print(sorted(k for k in globals() if not k.startswith('__')))")
        .unwrap();
    let names = r.stdout_text();
    assert!(names.contains("index"), "{names}");
    assert!(!names.contains("_arbor"), "{names}");
    assert!(!names.contains("'t'"), "a check's variable leaked: {names}");
    // Episodes never record the verifier's code.
    for a in &episode.last.manifest().actions {
        let text = format!("{a:?}");
        assert!(!text.contains("planet"), "{text}");
    }
}

#[test]
fn fake_result_files_and_exits_score_zero() {
    let env = env("session-records-1");
    let mut actions = env.spec().gold.clone();
    actions.push(AgentAction::write("results.json", "{\"passed\": true}\n"));
    let v = env.run_and_verify(&actions).unwrap();
    assert_eq!(v.reward, Some(0.0), "{}", v.summary());
    assert!(
        v.hard
            .violations
            .iter()
            .any(|x| x.kind == ViolationKind::GraderHook)
    );
    let mut actions = env.spec().gold.clone();
    actions.push(exec("import os\nos._exit(0)\n"));
    let v = env.run_and_verify(&actions).unwrap();
    assert_eq!(v.reward, Some(0.0), "{}", v.summary());
    assert!(
        v.hard
            .violations
            .iter()
            .any(|x| x.kind == ViolationKind::AgentCrash)
    );
}

/// Branched rollouts on a session task: a tree's nodes are session
/// snapshots, every child of a branch point is a fork of that node's live
/// interpreter state (the node's snapshot is its parent), replaying any
/// root-to-leaf path reproduces the leaf's verdict, and the budget holds.
#[test]
fn branched_rollouts_fork_live_sessions_and_paths_replay_to_their_verdicts() {
    use std::sync::Arc;

    use arbor_envs::rollout::Environment;
    use arbor_envs::rollout::driver::{DriverConfig, Progress, Strategy, run_tree};
    use arbor_envs::rollout::policy::MixturePolicy;
    use arbor_envs::rollout::tree::Origin;

    let env = Arc::new(env("session-topk-1"));
    let mut cfg = DriverConfig::new(60, Strategy::Uniform { every: 2, width: 3 });
    cfg.workers = 2;
    cfg.seed = 3;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let tree = tokio
        .block_on(run_tree(
            Arc::clone(&env) as Arc<dyn Environment>,
            Arc::new(MixturePolicy { p: 0.8 }),
            &cfg,
            Arc::new(Progress::default()),
        ))
        .unwrap();
    assert!(tree.budget.used() <= 60, "{:?}", tree.budget);
    assert_eq!(tree.stats.faults, 0, "faults");
    let rt = env.runtime();
    let branch_points: Vec<_> = tree.nodes.iter().filter(|n| n.edges.len() > 1).collect();
    assert!(!branch_points.is_empty(), "no branch point");
    for node in &branch_points {
        let id = node.snapshot.parse().unwrap();
        assert!(rt.store().is_wasm_snapshot(&id), "a node is not a session");
        for &e in &node.edges {
            let child = &tree.nodes[tree.edges[e].to];
            if child.origin == Origin::Terminal {
                continue;
            }
            let snap = rt.snapshot(&child.snapshot.parse().unwrap()).unwrap();
            assert_eq!(
                snap.manifest().parent,
                Some(id),
                "edge {e}: not forked from the node"
            );
        }
    }
    let leaves: Vec<_> = tree.graded_leaves().collect();
    assert!(!leaves.is_empty());
    for leaf in leaves.iter().take(8) {
        let v = env.run_and_verify(&tree.actions_to(leaf.id)).unwrap();
        let recorded = &leaf.leaf.as_ref().unwrap().verdict;
        assert_eq!(v.reward, recorded.reward, "leaf {}", leaf.id);
        assert_eq!(
            v.task.checks_passed, recorded.task.checks_passed,
            "leaf {}",
            leaf.id
        );
    }
}

/// Values graded natively (the strict runner's `canon`, run by the system
/// Python) and in a session (the guest's native inspector) take the same
/// canonical JSON, and the same values are refused by both.
#[test]
fn native_and_session_grading_share_one_canonical_format() {
    use arbor_envs::canonical::Canonical;
    use arbor_runtime::wasm::StepOutcome;
    use arbor_runtime::wasm::inspect::Inspected;

    const ACCEPTED: &[&str] = &[
        "None",
        "True",
        "0",
        "-5",
        "2**63 - 1",
        "2**63",
        "-(2**63)",
        "-(2**63) - 1",
        "10**40",
        "1.0",
        "-0.0",
        "1e300",
        "1e16",
        "1e15",
        "1e-05",
        "0.1 + 0.2",
        "'é\"\\\\\\n\\x01 ok'",
        "[1, (2, (3, ())), []]",
        "((),)",
        "{'b': 1, 'a': [2]}",
        "{'tuple': 1}",
        "{'set': [1]}",
        "{'dict': {}}",
        "{'int': '5'}",
        "{'': 0, ' ': 1, 'é': 2, 'tuple': 3}",
        "{1, 'a', 2.5, None, -3, 10**30}",
        "frozenset({3, -1})",
        "set()",
        "{'k': [{'x': (1.5, 'y')}]}",
    ];
    const REFUSED: &[&str] = &[
        "b'x'",
        "{1: 2}",
        "{(1, 2)}",
        "float('nan')",
        "float('inf')",
        "type('L', (list,), {})()",
        "bytearray(b'x')",
        "eval('[' * 70 + ']' * 70)",
    ];

    // Native: the strict runner's serialiser, in the trusted interpreter
    // (from a private copy: the source tree need not be readable by the
    // user the tests run as).
    let strict = tempfile::tempdir().unwrap();
    std::fs::write(
        strict.path().join("strict.py"),
        include_str!("../src/verifier/strict.py"),
    )
    .unwrap();
    let strict_dir = strict.path().to_str().unwrap();
    let all: Vec<&str> = ACCEPTED.iter().chain(REFUSED).copied().collect();
    let script = format!(
        "import json, sys\nsys.path.insert(0, {strict_dir:?})\nimport strict\nout = []\n\
         for e in json.load(sys.stdin):\n    try:\n        out.append({{'ok': strict.canon_text(strict.canon(eval(e)))}})\n\
         \x20   except TypeError as x:\n        out.append({{'refused': str(x)}})\nprint(json.dumps(out))\n"
    );
    let mut child = std::process::Command::new("/usr/bin/python3")
        .args(["-I", "-S", "-B", "-c", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        child.stdin.as_mut().unwrap(),
        serde_json::to_string(&all).unwrap().as_bytes(),
    )
    .unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let native: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(native.len(), all.len());

    // Session: the guest's inspector, in a fresh fork per value.
    let env = env("session-topk-1");
    let inspect = |expr: &str| {
        let mut sb = env.root().open().unwrap();
        let r = sb.step(&format!("_arbor_v = {expr}\n")).unwrap();
        assert_eq!(r.outcome, StepOutcome::Ok, "{expr}: {}", r.stderr_text());
        sb.inspect("_arbor_v").unwrap()
    };
    let mut sessions = Vec::new();
    for (expr, n) in all.iter().zip(&native) {
        let session = inspect(expr);
        if ACCEPTED.contains(expr) {
            let text = n["ok"]
                .as_str()
                .unwrap_or_else(|| panic!("{expr}: refused natively: {n}"));
            let native_json: serde_json::Value = serde_json::from_str(text).unwrap();
            let Inspected::Value(session_json) = &session else {
                panic!("{expr}: the inspector gave {session:?}");
            };
            assert_eq!(
                &native_json, session_json,
                "{expr}: the same canonical JSON"
            );
            let (a, b) = (
                Canonical::from_json(&native_json).unwrap(),
                Canonical::from_json(session_json).unwrap(),
            );
            assert!(a.equals(&b), "{expr}: the comparator agrees");
            assert_eq!(a.to_json(), native_json, "{expr}: already canonical");
            sessions.push(b);
        } else {
            assert!(n.get("refused").is_some(), "{expr}: accepted natively: {n}");
            assert!(
                matches!(session, Inspected::Refused(_)),
                "{expr}: the inspector gave {session:?}"
            );
        }
    }
    // Control: a value that differs is caught, by value and by type.
    for (i, a) in sessions.iter().enumerate() {
        for (j, b) in sessions.iter().enumerate() {
            if i != j && a.to_json() != b.to_json() {
                assert!(!a.equals(b), "{} vs {}", ACCEPTED[i], ACCEPTED[j]);
            }
        }
    }
    let pair = Canonical::from_json(&serde_json::json!({"tuple": [1, 2]})).unwrap();
    let list = Canonical::from_json(&serde_json::json!([1, 2])).unwrap();
    assert!(!pair.equals(&list), "a tuple is not a list");
}
