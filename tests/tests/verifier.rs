//! The verifier's integrity (the environments issue): hidden checks never
//! reach the agent's sandbox or its snapshots, they are mounted read-only for
//! one action only, agent-caused limits score 0, runtime faults are not
//! rewards, a leaky git history fails validation, and the layered verdict
//! keeps every layer.

use std::path::{Path, PathBuf};

use arbor_envs::rollout::env::ViolationKind;
use arbor_envs::rollout::{AgentAction, Environment as _};
use arbor_envs::validate;
use arbor_envs::{PreparedTask, TaskEnv, TaskSpec};
use arbor_runtime::ExecOptions;
use arbor_runtime::sandbox::ReadOnlyMount;
use arbor_tests::{TestRuntime, runtime};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");
const MARKER: &str = "HIDDEN-CHECK-MARKER-4f1d";

/// A small coding task: `calc.add` is wrong; the hidden check contains MARKER.
fn write_task(root: &Path, id: &str, extra_toml: &str, setup: &str) -> PathBuf {
    let dir = root.join(id);
    std::fs::create_dir_all(dir.join("workspace/calc")).unwrap();
    std::fs::create_dir_all(dir.join("workspace/tests")).unwrap();
    std::fs::create_dir_all(dir.join("checks")).unwrap();
    std::fs::write(dir.join("workspace/calc/__init__.py"), "").unwrap();
    std::fs::write(
        dir.join("workspace/calc/ops.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("workspace/tests/test_ops.py"),
        "import unittest\nfrom calc.ops import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 1), 2)\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("checks/test_hidden.py"),
        format!(
            "# {MARKER}\nimport unittest\nfrom calc.ops import add\n\n\nclass Hidden(unittest.TestCase):\n    def test_small(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_negative(self):\n        self.assertEqual(add(-4, 1), -3)\n"
        ),
    )
    .unwrap();
    let toml = format!(
        r#"id = "{id}"
family = "coding"
group = "calc"
difficulty = "easy"
instructions = "add() subtracts; make it add."
{setup}
{extra_toml}

[paths]
allow = ["calc/*.py"]
protected = ["tests/**"]

[[gold]]
exec = "cat calc/ops.py"
[[gold]]
write = "calc/ops.py"
content = "def add(a, b):\n    return a + b\n"
"#
    );
    std::fs::write(dir.join("task.toml"), toml).unwrap();
    dir
}

const LIMITS: &str = "[limits]\nmax_steps = 4\nstep_timeout_s = 2\ntotal_time_s = 60\n";

fn prepare(rt: &TestRuntime, dir: &Path) -> TaskEnv {
    TaskEnv::prepare(&rt.runtime, TaskSpec::load(dir).unwrap()).unwrap()
}

fn gold() -> Vec<AgentAction> {
    vec![
        AgentAction::exec("cat calc/ops.py"),
        AgentAction::write("calc/ops.py", "def add(a, b):\n    return a + b\n"),
    ]
}

#[test]
fn gold_scores_one_and_the_verdict_keeps_every_layer() {
    let rt = runtime(Path::new(HELPER));
    let dir = write_task(rt.dir.path(), "calc-1", LIMITS, "");
    let env = prepare(&rt, &dir);
    assert_eq!(env.check_ids().len(), 2);
    let v = env.run_and_verify(&gold()).unwrap();
    assert_eq!(v.reward, Some(1.0), "{}", v.summary());
    assert_eq!((v.task.checks_passed, v.task.checks_total), (2, 2));
    assert_eq!(v.quality.modified, 1, "{:?}", v.quality);
    assert_eq!(v.quality.changed_lines, 2, "{:?}", v.quality);
    assert!(v.quality.lint_errors.is_empty());
    assert_eq!(
        (v.process.steps, v.process.commands, v.process.failed),
        (2, 1, 0)
    );

    let v = env.run_and_verify(&[]).unwrap();
    assert_eq!(v.reward, Some(0.0));
    assert!(v.hard.hold(), "doing nothing breaks no constraint");
    assert_eq!(v.task.checks_passed, 0);

    // A syntax error is reported by the lint layer (and fails the checks).
    let v = env
        .run_and_verify(&[AgentAction::write("calc/ops.py", "def add(a, b:\n")])
        .unwrap();
    assert_eq!(v.reward, Some(0.0));
    assert_eq!(v.quality.lint_errors.len(), 1, "{:?}", v.quality);
    // File and line (the parser reports where it ran out of input).
    assert!(
        v.quality.lint_errors[0].starts_with("calc/ops.py:2: "),
        "{:?}",
        v.quality
    );
}

#[test]
fn hidden_checks_never_reach_the_agent_or_its_snapshots() {
    let rt = runtime(Path::new(HELPER));
    let dir = write_task(
        rt.dir.path(),
        "calc-2",
        "[limits]\nmax_steps = 4\nstep_timeout_s = 60\ntotal_time_s = 120\n",
        "",
    );
    let env = prepare(&rt, &dir);
    let (episode, steps) = env
        .run(&[
            AgentAction::exec("ls -A /verifier | wc -l"),
            AgentAction::exec(format!(
                "grep -rl --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr {MARKER} / 2>/dev/null | wc -l"
            )),
        ])
        .unwrap();
    assert_eq!(
        steps[0].observation.output.trim(),
        "0",
        "the mount point is empty"
    );
    assert_eq!(
        steps[1].observation.output.trim(),
        "0",
        "the marker is nowhere"
    );
    // Neither the root nor the final snapshot holds a check file.
    for snap in [&episode.root, &episode.last] {
        let snap = snap.native().expect("a native task's states");
        let view = arbor_runtime::layer::merge_layers(rt.runtime.store(), &snap.manifest().layers)
            .unwrap();
        assert!(
            view.entries.keys().all(|p| !p.contains("test_hidden")),
            "{:?}",
            view.entries.keys().collect::<Vec<_>>()
        );
    }
    // The verifier still finds them: the episode is graded normally.
    let v = env.verify(&episode);
    assert_eq!(v.task.checks_total, 2);
}

#[test]
fn read_only_mounts_last_one_action_and_cannot_be_written() {
    let rt = runtime(Path::new(HELPER));
    let ws = rt.scratch("ws");
    let checks = rt.scratch("checks");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&checks).unwrap();
    std::fs::write(checks.join("secret.txt"), "s3cret\n").unwrap();
    let base = rt.runtime.import(&ws, None).unwrap();
    let mounted = rt.runtime.import(&checks, None).unwrap();
    let mut sb = base.open().unwrap();
    let mut opts = ExecOptions::with_timeout_ms(20_000);
    opts.mounts = vec![ReadOnlyMount::new(&mounted, "verifier").unwrap()];
    let obs = sb
        .exec(
            "cat /verifier/secret.txt; touch /verifier/x 2>&1 || echo refused; cp /verifier/secret.txt /workspace/copy 2>&1; true",
            &opts,
        )
        .unwrap();
    let out = obs.stdout_text();
    assert!(out.starts_with("s3cret\n"), "{out}");
    assert!(out.contains("refused"), "{out}");
    let obs = sb
        .exec(
            "ls -A /verifier | wc -l",
            &ExecOptions::with_timeout_ms(20_000),
        )
        .unwrap();
    assert_eq!(obs.stdout_text().trim(), "0", "gone after the action");
    // Only mount points of the sandbox are accepted, and single layers.
    let mut bad = ExecOptions::with_timeout_ms(20_000);
    bad.mounts = vec![ReadOnlyMount::new(&mounted, "etc").unwrap()];
    let err = sb.exec("true", &bad).unwrap_err().to_string();
    assert!(err.contains("not a mount point"), "{err}");
    let snap = sb.snapshot().unwrap();
    let err = ReadOnlyMount::new(&snap, "verifier")
        .unwrap_err()
        .to_string();
    assert!(err.contains("exactly one"), "{err}");
}

#[test]
fn agent_caused_limits_score_zero() {
    let rt = runtime(Path::new(HELPER));
    let dir = write_task(rt.dir.path(), "calc-3", LIMITS, "");
    let env = prepare(&rt, &dir);
    let mut timed_out = gold();
    timed_out.push(AgentAction::exec("sleep 30"));
    let v = env.run_and_verify(&timed_out).unwrap();
    assert_eq!(v.reward, Some(0.0));
    assert!(!v.is_fault(), "an agent's timeout is an ordinary outcome");
    assert!(
        v.hard
            .violations
            .iter()
            .any(|x| x.kind == ViolationKind::AgentTimeout),
        "{:?}",
        v.hard
    );
    assert_eq!(v.task.checks_passed, 2, "the checks themselves pass");

    let mut long = gold();
    long.extend(std::iter::repeat_n(AgentAction::exec("true"), 3));
    let v = env.run_and_verify(&long).unwrap();
    assert_eq!(v.reward, Some(0.0));
    assert!(
        v.hard
            .violations
            .iter()
            .any(|x| x.kind == ViolationKind::StepLimit),
        "{:?}",
        v.hard
    );
}

#[test]
fn a_runtime_fault_is_not_a_reward() {
    let rt = runtime(Path::new(HELPER));
    let dir = write_task(rt.dir.path(), "calc-4", LIMITS, "");
    let env = prepare(&rt, &dir);
    let (episode, _) = env.run(&gold()).unwrap();
    // Damage the store under the final snapshot: its newest layer disappears.
    let layer = *episode
        .last
        .native()
        .expect("a native task's state")
        .manifest()
        .layers
        .last()
        .unwrap();
    let layer_dir = rt.runtime.store().layer_dir(&layer);
    std::fs::rename(&layer_dir, rt.scratch("moved-layer")).unwrap();
    let v = env.verify(&episode);
    assert!(v.is_fault(), "{}", v.summary());
    assert_eq!(v.reward, None);
}

#[test]
fn a_git_workspace_with_history_beyond_its_base_fails_validation() {
    let rt = runtime(Path::new(HELPER));
    let clean = write_task(
        rt.dir.path(),
        "calc-5",
        LIMITS,
        "setup = [\"git init -q && git add -A && git commit -qm base\"]",
    );
    let leaky = write_task(
        rt.dir.path(),
        "calc-6",
        LIMITS,
        "setup = [\"git init -q && git add -A && git commit -qm base && git tag v1 && git checkout -qb fix && echo x > calc/fix.txt && git add -A && git commit -qm fix && git checkout -q -\"]",
    );
    let problems = |dir: &Path| {
        let env = PreparedTask::Native(Box::new(prepare(&rt, dir)));
        let report = validate::validate(&env, &mut |_| {}).unwrap();
        report.problems
    };
    let clean = problems(&clean);
    assert!(clean.iter().all(|p| !p.contains("git")), "{clean:?}");
    let leaky = problems(&leaky);
    for what in ["commits", "tags", "refs"] {
        assert!(
            leaky.iter().any(|p| p.contains(&format!(" {what} "))),
            "{what}: {leaky:?}"
        );
    }
}

/// An image with the host's python3 and its standard library (no
/// site-packages), a marker file, and nothing else.
fn python_image(rt: &TestRuntime, name: &str) {
    use arbor_runtime::image::write::{
        LayoutLayer, rootfs_of_host_tools, tar_dir, write_oci_layout,
    };
    let root = rt.dir.path().join("py-rootfs");
    rootfs_of_host_tools(&root, &["bash", "python3", "cat", "ls", "env", "git"]).unwrap();
    let stdlib = std::fs::canonicalize("/usr/bin/python3").unwrap();
    let ver = stdlib.file_name().unwrap().to_str().unwrap().to_owned(); // python3.11
    let src = Path::new("/usr/lib").join(&ver);
    let dst = root.join("usr/lib").join(&ver);
    let st = std::process::Command::new("cp")
        .args(["-a", "--no-preserve=ownership"])
        .arg(&src)
        .arg(&dst)
        .status()
        .unwrap();
    assert!(st.success());
    let _ = std::fs::remove_dir_all(dst.join("dist-packages"));
    std::fs::write(root.join("etc/image-marker"), "on-the-image\n").unwrap();
    let layout = rt.dir.path().join("py-layout");
    let layer = LayoutLayer {
        tar: tar_dir(&root).unwrap(),
        compression: arbor_runtime::image::Compression::Zstd,
    };
    write_oci_layout(&layout, &[layer], &Default::default(), None).unwrap();
    rt.runtime
        .import_image(
            &layout,
            &arbor_runtime::image::ImageImport {
                name: Some(name.into()),
                ..Default::default()
            },
        )
        .unwrap();
}

#[test]
fn a_task_on_an_image_runs_and_is_verified_inside_it() {
    let rt = runtime(Path::new(HELPER));
    // A task naming an image that is not there is refused by name.
    let dir = write_task(
        rt.dir.path(),
        "calc-img",
        &format!("image = \"pyimg:1\"\n{LIMITS}"),
        "",
    );
    let e = TaskEnv::prepare(&rt.runtime, TaskSpec::load(&dir).unwrap())
        .map(|_| ())
        .expect_err("no such image yet")
        .to_string();
    assert!(
        e.contains("pyimg:1") && e.contains("arbor image import"),
        "{e}"
    );
    python_image(&rt, "pyimg:1");
    let env = prepare(&rt, &dir);
    let image = rt.runtime.image("pyimg:1").unwrap();
    assert_eq!(env.root().manifest().image, Some(image.id));
    // The agent's steps see the image (control: the host has no such file).
    assert!(!Path::new("/etc/image-marker").exists());
    let (_, steps) = env
        .run(&[AgentAction::exec(
            "cat /etc/image-marker; python3 -c 'import sys; print(sys.prefix)'",
        )])
        .unwrap();
    let text = format!("{:?}", steps[0]);
    assert!(text.contains("on-the-image"), "{text}");
    // The hidden checks run there too, and grade as on the host.
    let v = env.run_and_verify(&gold()).unwrap();
    assert_eq!(v.reward, Some(1.0), "{}", v.summary());
    let v = env.run_and_verify(&[]).unwrap();
    assert_eq!(v.reward, Some(0.0), "{}", v.summary());
}
