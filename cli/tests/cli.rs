//! End-to-end tests of the `arbor` binary on a temporary store: import,
//! exec, diff, log, checkout, tags, fanout, ls, rm + gc, fsck against a
//! corrupted layer, and the errors for bad input. Each negative check comes
//! with a positive control that shows it could have failed.
//!
//! (~1,080 lines: end-to-end tests of one binary sharing one `Env` fixture.)
//!
//! The binary is `$ARBOR_TEST_BIN` when set (the unprivileged phase of
//! `make test` runs copies of the binaries), else the one cargo built.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `arbor` binary under test.
fn arbor_bin() -> PathBuf {
    std::env::var_os("ARBOR_TEST_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_arbor")), PathBuf::from)
}

/// A temporary store plus scratch space.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Self {
            dir: tempfile::Builder::new()
                .prefix("arbor-cli-test-")
                .tempdir()
                .expect("tempdir"),
        }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Run `arbor --home <home> ARGS...`.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(arbor_bin())
            .arg("--home")
            .arg(self.home())
            .args(args)
            .env_remove("ARBOR_HOME")
            .output()
            .expect("run arbor")
    }

    /// Run and require exit status 0; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "arbor {args:?} failed: {}",
            describe(&out)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Run with `--json` and require exit status `code`; returns the object.
    fn json_with(&self, code: i32, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.run(&all);
        assert_eq!(
            out.status.code(),
            Some(code),
            "arbor {all:?}: {}",
            describe(&out)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.lines().count(), 1, "not exactly one JSON line: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON from {all:?}: {e}: {text}"))
    }

    fn json(&self, args: &[&str]) -> Value {
        self.json_with(0, args)
    }

    /// Write a small project and import it with tag `base`; returns its id.
    fn import_sample(&self) -> String {
        let src = self.path("src");
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::write(src.join("hello.txt"), "hello\n").unwrap();
        fs::write(
            src.join("payload.txt"),
            "the quick brown fox jumps over the lazy dog\n",
        )
        .unwrap();
        fs::write(src.join("sub/data.txt"), "data\n").unwrap();
        let id = self.ok(&["import", src.to_str().unwrap(), "--tag", "base"]);
        let id = id.trim().to_owned();
        assert_eq!(
            id.len(),
            64,
            "import should print a snapshot id, got {id:?}"
        );
        id
    }
}

fn describe(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn str_of(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_owned()
}

#[test]
fn import_exec_diff_log_checkout_and_tags() {
    let env = Env::new();
    let base = env.import_sample();
    assert_eq!(
        str_of(&env.json(&["show", "base"])["id"]),
        base,
        "the tag resolves to the import"
    );

    let exec = env.json(&[
        "exec",
        "base",
        "--commit",
        "--",
        "echo new > added.txt; rm sub/data.txt; echo more >> hello.txt; echo done",
    ]);
    assert_eq!(exec["exit"], 0);
    assert_eq!(exec["stdout"], "done\n");
    assert_eq!(str_of(&exec["snapshot"]), base);
    let child = str_of(&exec["committed"]);
    assert_eq!(child.len(), 64);

    // diff shows exactly the step's changes; a snapshot against itself shows none.
    let diff = env.ok(&["diff", "base", &child]);
    assert!(diff.lines().any(|l| l == "+ added.txt"), "{diff}");
    assert!(diff.lines().any(|l| l == "~ hello.txt"), "{diff}");
    assert!(diff.lines().any(|l| l == "- sub/data.txt"), "{diff}");
    assert!(!diff.contains("payload.txt"), "{diff}");
    assert_eq!(env.ok(&["diff", &child, &child]), "no differences\n");
    let dj = env.json(&["diff", "base", &child]);
    assert_eq!(dj["added"], serde_json::json!(["added.txt"]));
    assert_eq!(dj["deleted"], serde_json::json!(["sub/data.txt"]));

    // log: root first, then the exec with its exit status.
    let log = env.ok(&["log", &child]);
    let lines: Vec<&str> = log.lines().skip(1).collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(
        lines[0].starts_with(&base[..12]) && lines[0].contains("import "),
        "{log}"
    );
    assert!(
        lines[1].starts_with(&child[..12]) && lines[1].contains("$ echo new > added.txt"),
        "{log}"
    );
    let lj = env.json(&["log", &child]);
    let chain = lj["chain"].as_array().unwrap();
    assert_eq!(chain.len(), 2);
    assert_eq!(str_of(&chain[0]["id"]), base);
    assert_eq!(chain[1]["exits"], serde_json::json!(["0"]));
    assert_eq!(str_of(&chain[1]["parent"]), base);

    // checkout reproduces the files; a non-empty destination is refused.
    let co = env.path("checkout");
    env.ok(&["checkout", &child, co.to_str().unwrap()]);
    assert_eq!(fs::read_to_string(co.join("added.txt")).unwrap(), "new\n");
    assert_eq!(
        fs::read_to_string(co.join("hello.txt")).unwrap(),
        "hello\nmore\n"
    );
    assert!(co.join("sub").is_dir() && !co.join("sub/data.txt").exists());
    let again = env.run(&["checkout", &child, co.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2), "{}", describe(&again));
    assert!(stderr(&again).contains("not empty"), "{}", describe(&again));

    // Tags and unique prefixes resolve like ids.
    env.ok(&["tag", &child, "mytag"]);
    assert_eq!(
        env.ok(&["exec", "mytag", "--", "cat", "added.txt"]),
        "new\n"
    );
    assert_eq!(
        env.ok(&["exec", &child[..10], "--", "cat added.txt"]),
        "new\n"
    );
    assert_eq!(
        env.ok(&["exec", "base", "--", "cat hello.txt"]),
        "hello\n",
        "the parent is unchanged"
    );
    let tags = env.json(&["tag"]);
    assert_eq!(str_of(&tags["tags"]["mytag"]), child);
    env.ok(&["tag", "--delete", "mytag"]);
    let gone = env.run(&["exec", "mytag", "--", "true"]);
    assert_eq!(gone.status.code(), Some(2), "{}", describe(&gone));
}

#[test]
fn exec_exit_statuses_and_commit_tag() {
    let env = Env::new();
    env.import_sample();
    assert_eq!(
        env.run(&["exec", "base", "--", "exit 3"]).status.code(),
        Some(3)
    );
    assert_eq!(
        env.run(&["exec", "base", "--", "true"]).status.code(),
        Some(0)
    );
    assert_eq!(
        env.run(&["exec", "base", "--", "kill -TERM $$"])
            .status
            .code(),
        Some(128 + 15)
    );
    let started = Instant::now();
    let out = env.run(&[
        "exec",
        "base",
        "--timeout",
        "1",
        "--",
        "sleep 30 & sleep 30",
    ]);
    assert_eq!(out.status.code(), Some(124), "{}", describe(&out));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the timeout did not stop the command"
    );
    assert!(stderr(&out).contains("timed out"), "{}", describe(&out));

    // Human mode keeps stdout for the command; the new id goes to stderr.
    let out = env.run(&[
        "exec",
        "base",
        "--commit",
        "--tag",
        "step1",
        "--",
        "echo x > x.txt; echo out; echo err >&2",
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert!(
        stderr(&out).contains("err\n") && stderr(&out).contains("committed snapshot"),
        "{}",
        describe(&out)
    );
    assert_eq!(env.ok(&["exec", "step1", "--", "cat x.txt"]), "x\n");
}

#[test]
fn fanout_forks_see_only_their_own_change() {
    let env = Env::new();
    env.import_sample();
    let result = env.json(&[
        "fanout",
        "base",
        "--cmd",
        "echo a > f",
        "--cmd",
        "echo b > f; echo second",
        "--cmd",
        "echo c > f",
        "--commit",
    ]);
    let forks = result["forks"].as_array().unwrap();
    assert_eq!(forks.len(), 3);
    assert_eq!(forks[1]["stdout"], "second\n");
    let ids: Vec<String> = forks.iter().map(|f| str_of(&f["committed"])).collect();
    for (id, want) in ids.iter().zip(["a\n", "b\n", "c\n"]) {
        assert_eq!(env.ok(&["exec", id, "--", "cat f"]), want);
        let diff = env.ok(&["diff", "base", id]);
        assert_eq!(diff, "+ f\n");
    }
    // Control: the base never had f.
    let base = env.run(&["exec", "base", "--", "cat f"]);
    assert_eq!(base.status.code(), Some(1), "{}", describe(&base));

    // The text table: a header and one row per command, in order; tags by prefix.
    let table = env.ok(&[
        "fanout",
        "base",
        "--cmd",
        "echo one",
        "--cmd",
        "exit 7",
        "--commit",
        "--tag-prefix",
        "t",
    ]);
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with(['1', '2']))
        .collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(
        rows[0].contains("echo one") && rows[0].ends_with("one"),
        "{table}"
    );
    assert!(
        rows[1].contains("exit 7") && rows[1].contains(" 7 "),
        "{table}"
    );
    assert_eq!(env.ok(&["exec", "t-2", "--", "echo ok"]), "ok\n");
}

#[test]
fn ls_json_and_rm_gc_remove_an_untagged_snapshot() {
    let env = Env::new();
    let base = env.import_sample();
    let kept = str_of(
        &env.json(&[
            "exec",
            "base",
            "--commit",
            "--tag",
            "kept",
            "--",
            "echo k > k",
        ])["committed"],
    );
    let doomed = str_of(
        &env.json(&["exec", "base", "--commit", "--", "echo big > doomed.txt"])["committed"],
    );

    let ls = env.json(&["ls"]);
    let entries = ls["snapshots"].as_array().unwrap();
    let ids: Vec<String> = entries.iter().map(|e| str_of(&e["id"])).collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0], base, "sorted by creation time, root first");
    assert!(ids.contains(&kept) && ids.contains(&doomed));
    let created: Vec<u64> = entries
        .iter()
        .map(|e| e["created_at"].as_u64().unwrap())
        .collect();
    assert!(created.windows(2).all(|w| w[0] <= w[1]), "{created:?}");
    assert_eq!(entries[0]["tags"], serde_json::json!(["base"]));
    assert!(env.ok(&["ls"]).contains(&doomed[..12]));

    let doomed_layer = {
        let show = env.json(&["show", &doomed]);
        let layers = show["manifest"]["layers"].as_array().unwrap().clone();
        str_of(layers.last().unwrap())
    };
    let kept_layer = str_of(
        env.json(&["show", "kept"])["manifest"]["layers"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
    );
    assert!(env.home().join("layers").join(&doomed_layer).is_dir());

    let rm = env.json(&["rm", &doomed]);
    assert_eq!(str_of(&rm["snapshot"]), doomed);
    assert!(!env.ok(&["ls"]).contains(&doomed[..12]));
    let gc = env.json(&["gc"]);
    assert!(gc["layers_removed"].as_u64().unwrap() >= 1, "{gc}");
    assert!(gc["bytes_freed"].as_u64().unwrap() > 0, "{gc}");
    assert!(
        !env.home().join("layers").join(&doomed_layer).exists(),
        "gc left the removed snapshot's layer"
    );
    // Control: the tagged sibling and the base survive gc, data included.
    assert!(env.home().join("layers").join(&kept_layer).is_dir());
    assert_eq!(env.ok(&["exec", "kept", "--", "cat k"]), "k\n");
    let after = env.run(&["show", &doomed]);
    assert_eq!(after.status.code(), Some(2), "{}", describe(&after));
    assert!(stderr(&after).contains(&doomed), "{}", describe(&after));
    let fsck = env.json(&["fsck"]);
    assert_eq!(fsck["clean"], true, "{fsck}");
}

/// Find `payload.txt` in a sealed layer of the store.
fn layer_file(home: &Path, name: &str) -> PathBuf {
    for layer in fs::read_dir(home.join("layers")).unwrap() {
        let candidate = layer.unwrap().path().join(name);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!("no layer holds {name}");
}

/// Flip one byte of a file in place, keeping its permission bits.
fn flip_byte(path: &Path) {
    let mode = fs::metadata(path).unwrap().permissions().mode();
    fs::set_permissions(path, fs::Permissions::from_mode(mode | 0o200)).unwrap();
    let mut bytes = fs::read(path).unwrap();
    bytes[4] ^= 0x01;
    fs::write(path, &bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn fsck_and_checkout_name_a_corrupted_layer_file() {
    let env = Env::new();
    env.import_sample();
    let fsck = env.run(&["fsck"]);
    assert!(fsck.status.success(), "{}", describe(&fsck));
    assert!(String::from_utf8_lossy(&fsck.stdout).contains("fsck: clean"));
    let good = env.path("good");
    env.ok(&["checkout", "base", good.to_str().unwrap()]);

    flip_byte(&layer_file(&env.home(), "payload.txt"));

    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.status.code(), Some(1), "{}", describe(&fsck));
    let text = String::from_utf8_lossy(&fsck.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("problem:") && l.contains("payload.txt")),
        "{text}"
    );
    let fj = env.json_with(1, &["fsck"]);
    assert_eq!(fj["clean"], false);
    assert!(
        fj["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| str_of(&p["path"]).ends_with("/payload.txt")),
        "{fj}"
    );

    let bad = env.path("bad");
    let co = env.run(&["checkout", "base", bad.to_str().unwrap()]);
    assert_eq!(co.status.code(), Some(1), "{}", describe(&co));
    assert!(
        stderr(&co).starts_with("arbor: error: ") && stderr(&co).contains("payload.txt"),
        "{}",
        describe(&co)
    );
    assert!(
        !bad.join("payload.txt").exists(),
        "corrupt data reached the host"
    );
}

#[test]
fn bad_input_is_named_and_exits_2() {
    let env = Env::new();
    env.import_sample();
    assert_eq!(env.ok(&["diff", "base", "base"]), "no differences\n");

    let out = env.run(&["diff", "base", "0123abcd"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).starts_with("arbor: error: ") && stderr(&out).contains("\"0123abcd\""),
        "{}",
        describe(&out)
    );

    let out = env.run(&["exec", "nosuchtag", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(stderr(&out).contains("nosuchtag"), "{}", describe(&out));

    let err = env.json_with(2, &["log", "zzzz"]);
    assert!(str_of(&err["error"]).contains("zzzz"), "{err}");

    let out = env.run(&["tag", "base", "bad/name"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(stderr(&out).contains("bad/name"), "{}", describe(&out));
    let out = env.run(&["tag", "--delete", "never-made"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(stderr(&out).contains("never-made"), "{}", describe(&out));
    let out = env.run(&["import", env.path("missing").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(stderr(&out).contains("missing"), "{}", describe(&out));

    // Usage errors: clap's message behind the arbor prefix; help still works.
    let out = env.run(&["exec", "base"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).starts_with("arbor: error: "),
        "{}",
        describe(&out)
    );
    let err = env.json_with(2, &["exec", "base"]);
    assert!(str_of(&err["error"]).contains("CMD"), "{err}");
    assert!(env.run(&["--help"]).status.success());
    assert!(env.ok(&["exec", "--help"]).contains("124"));
}

#[test]
fn placeholder_commands_do_not_exist() {
    let env = Env::new();
    let out = env.run(&["bench"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "`arbor bench` should be unknown: {}",
        describe(&out)
    );
    assert!(env.run(&["ls"]).status.success());
}

#[test]
fn replay_reports_identical_and_divergent_chains() {
    let env = Env::new();
    env.import_sample();
    env.ok(&[
        "exec",
        "base",
        "--commit",
        "--tag",
        "s1",
        "--",
        "echo more >> hello.txt",
    ]);
    env.ok(&[
        "exec",
        "s1",
        "--commit",
        "--tag",
        "s2",
        "--",
        "cat hello.txt; git init -q . && git add -A && git commit -qm one",
    ]);
    // A deterministic chain replays identically: exit 0.
    let report = env.json(&["replay", "s2"]);
    assert_eq!(report["identical"], Value::Bool(true), "{report}");
    assert_eq!(report["steps"].as_array().map(Vec::len), Some(2));
    // A step printing $RANDOM diverges at exactly that step: exit 1.
    env.ok(&[
        "exec",
        "s2",
        "--commit",
        "--tag",
        "s3",
        "--",
        "echo $RANDOM",
    ]);
    env.ok(&["exec", "s3", "--commit", "--tag", "s4", "--", "echo steady"]);
    let report = env.json_with(1, &["replay", "s4"]);
    assert_eq!(report["identical"], Value::Bool(false));
    let divergent: Vec<u64> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| !s["divergences"].as_array().unwrap().is_empty())
        .map(|s| s["step"].as_u64().unwrap())
        .collect();
    assert_eq!(divergent, [3]);
    assert_eq!(report["steps"][2]["divergences"][0]["part"], "stdout");
    // Text mode names the step and the stream; --strict stops there.
    let out = env.run(&["replay", "s4", "--strict"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("first at step 3")
            && text.contains("stdout differs")
            && text.contains("--strict"),
        "{text}"
    );
    assert!(!text.contains("step   4"), "{text}");
    // --explain lists the (short) exclusion list.
    let explain = env.json(&["replay", "--explain"]);
    assert_eq!(
        explain["excluded_from_digests"],
        serde_json::json!([".git/index"])
    );
}

/// A one-task suite: make `out/greeting.txt` say hello, in two steps.
fn write_suite(root: &Path, max_steps: &str) -> PathBuf {
    let suite = root.join("suite");
    let task = suite.join("greet-1");
    fs::create_dir_all(task.join("workspace/out")).unwrap();
    fs::create_dir_all(task.join("checks")).unwrap();
    fs::write(task.join("workspace/out/.keep"), "").unwrap();
    fs::write(
        task.join("checks/test_goal.py"),
        "import unittest\n\n\nclass Goal(unittest.TestCase):\n    def test_greeting(self):\n        with open('out/greeting.txt') as f:\n            self.assertEqual(f.read(), 'hello\\n')\n\n    def test_name(self):\n        with open('out/name.txt') as f:\n            self.assertEqual(f.read().strip(), 'arbor')\n",
    )
    .unwrap();
    let toml = format!(
        r#"id = "greet-1"
family = "terminal"
group = "greet"
difficulty = "easy"
instructions = "Write hello to out/greeting.txt and arbor to out/name.txt."

[limits]
max_steps = {max_steps}
step_timeout_s = 20
total_time_s = 60

[paths]
allow = ["out/*.txt"]

[[gold]]
exec = "echo hello > out/greeting.txt"
[[gold]]
exec = "echo arbor > out/name.txt"

[[candidates]]
label = "right"
exec = "echo hello > out/greeting.txt"
[[candidates]]
label = "right"
exec = "echo arbor > out/name.txt"
[[candidates]]
label = "wrong"
replaces = 0
exec = "echo Hello > out/greeting.txt"
[[candidates]]
label = "wrong"
exec = "echo arbour > out/name.txt"
[[candidates]]
label = "harmful"
exec = "rm -rf out"
[[candidates]]
label = "neutral"
exec = "ls -la out"
"#
    );
    fs::write(task.join("task.toml"), toml).unwrap();
    fs::write(
        suite.join("manifest.toml"),
        "[splits]\ntrain = [\"greet-1\"]\n",
    )
    .unwrap();
    suite
}

#[test]
fn task_list_show_run_and_validate() {
    let env = Env::new();
    let suite = write_suite(env.dir.path(), "6");
    let tasks = suite.to_str().unwrap();
    let list = env.json(&["task", "--tasks", tasks, "list"]);
    assert_eq!(list["tasks"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["tasks"][0]["split"], "train", "{list}");
    let show = env.ok(&["task", "--tasks", tasks, "show", "greet-1"]);
    assert!(show.contains("Write hello"), "{show}");
    assert!(show.contains("candidates: 6"), "{show}");

    let actions = env.path("actions.json");
    fs::write(
        &actions,
        r#"[{"exec": "ls out"}, {"write": "out/greeting.txt", "content": "hello\n"}, {"exec": "echo arbor > out/name.txt"}]"#,
    )
    .unwrap();
    let run = env.json(&[
        "task",
        "--tasks",
        tasks,
        "run",
        "greet-1",
        "--actions",
        actions.to_str().unwrap(),
    ]);
    assert_eq!(run["verdict"]["reward"], 1.0, "{run}");
    assert_eq!(run["steps"].as_array().unwrap().len(), 3, "{run}");
    let toml_actions = env.path("actions.toml");
    fs::write(
        &toml_actions,
        "[[action]]\nexec = \"echo hi > out/greeting.txt\"\n",
    )
    .unwrap();
    let run = env.json(&[
        "task",
        "--tasks",
        tasks,
        "run",
        "greet-1",
        "--actions",
        toml_actions.to_str().unwrap(),
    ]);
    assert_eq!(run["verdict"]["reward"], 0.0, "{run}");
    assert_eq!(run["verdict"]["task"]["checks_total"], 2, "{run}");

    let report = env.json(&["task", "validate", tasks]);
    assert_eq!(report["ok"], true, "{report}");
    let checks = report["tasks"][0]["report"]["checks"].as_array().unwrap();
    assert!(
        checks.iter().any(|c| c["name"] == "canary:conftest"),
        "{report}"
    );
    assert!(
        checks
            .iter()
            .any(|c| c["name"] == "right-candidates-in-order"),
        "{report}"
    );

    let err = env.json_with(2, &["task", "--tasks", tasks, "show", "nope"]);
    assert!(str_of(&err["error"]).contains("no task \"nope\""), "{err}");
}

#[test]
fn a_malformed_task_names_file_line_and_field() {
    let env = Env::new();
    let suite = write_suite(env.dir.path(), "\"many\"");
    let task = suite.join("greet-1");
    let out = env.run(&["task", "validate", task.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = stderr(&out);
    assert!(err.contains("greet-1/task.toml:8:13"), "{err}");
    assert!(err.contains("field `limits.max_steps`"), "{err}");
    // A task that fails its checks is reported and exits 1.
    let suite = write_suite(&env.path("second"), "6");
    fs::write(
        suite.join("greet-1/checks/test_goal.py"),
        "import unittest\n\n\nclass Goal(unittest.TestCase):\n    def test_never(self):\n        self.assertTrue(False)\n",
    )
    .unwrap();
    let out = env.run(&["task", "validate", suite.join("greet-1").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains("gold: expected reward 1, got 0"),
        "{}",
        describe(&out)
    );
}

#[test]
fn rollout_and_credit_write_trees_records_pairs_and_a_plot() {
    let env = Env::new();
    let suite = write_suite(env.dir.path(), "6");
    let tasks = suite.to_str().unwrap();
    let out = env.path("trees.json");
    let run = env.json(&[
        "rollout",
        "--tasks",
        tasks,
        "--task",
        "greet-1",
        "--policy",
        "mixture:0.5",
        "--branch",
        "uniform:3:1",
        "--budget",
        "24",
        "--workers",
        "2",
        "--seed",
        "7",
        "--out",
        out.to_str().unwrap(),
    ]);
    let tree = &run["trees"][0];
    assert!(tree["leaves"].as_u64().unwrap() >= 2, "{run}");
    assert!(
        tree["actions"].as_u64().unwrap() + tree["verifier_runs"].as_u64().unwrap() <= 24,
        "{run}"
    );
    let stored = str_of(&run["stored"]);
    let adv = env.path("adv.jsonl");
    let pairs = env.path("pairs.jsonl");
    let plot = env.path("tree.svg");
    let credit = env.json(&[
        "credit",
        out.to_str().unwrap(),
        "--export",
        adv.to_str().unwrap(),
        "--pairs",
        pairs.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
    ]);
    let lines = fs::read_to_string(&adv).unwrap();
    assert_eq!(
        lines.lines().count() as u64,
        credit["records"].as_u64().unwrap()
    );
    for line in lines.lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        assert_eq!(r["schema"], "arbor.advantage-record/2");
        assert!(
            r["q"].is_number() && r["behaviour_log_prob"].is_number(),
            "{r}"
        );
    }
    assert!(fs::read_to_string(&plot).unwrap().starts_with("<svg"));
    // A token format refuses a tree of discrete actions, naming the field,
    // and writes nothing; JSON lines (no tokens needed) go through.
    let verl = env.path("adv.parquet");
    let err = env.json_with(
        2,
        &[
            "credit",
            out.to_str().unwrap(),
            "--format",
            "verl",
            "--out",
            verl.to_str().unwrap(),
        ],
    );
    assert!(
        str_of(&err["error"]).contains("`context.prompt_ids`"),
        "{err}"
    );
    assert!(!verl.exists());
    let jsonl = env.path("adv2.jsonl");
    let done = env.json(&[
        "credit",
        out.to_str().unwrap(),
        "--format",
        "jsonl",
        "--out",
        jsonl.to_str().unwrap(),
    ]);
    assert_eq!(done["export"]["rows"], credit["records"], "{done}");
    assert_eq!(fs::read_to_string(&jsonl).unwrap(), lines);
    // After gc, the stored copy still reads back (verified) with the same credit.
    env.ok(&["gc"]);
    fs::remove_file(&out).unwrap();
    let again = env.json(&["credit", &stored]);
    assert_eq!(again["records"], credit["records"], "{again}");
    // Bad input is named.
    let err = env.json_with(
        2,
        &[
            "rollout",
            "--tasks",
            tasks,
            "--task",
            "greet-1",
            "--branch",
            "sideways",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(
        str_of(&err["error"]).contains("unknown branching strategy"),
        "{err}"
    );
    let err = env.json_with(2, &["credit", "rollout.nope"]);
    assert!(
        str_of(&err["error"]).contains("neither a trees file"),
        "{err}"
    );
}

/// A WebAssembly Python session through the snapshot commands: import,
/// exec (+ commit), restore in a new process, fanout independence, a
/// runaway step stopped, ls, log, show, diff, checkout, bit-exact replay,
/// rm + gc keeping what tags reach, fsck.
#[test]
fn wasm_sessions_work_with_every_snapshot_command() {
    let env = Env::new();
    let ws = env.path("ws");
    fs::create_dir_all(&ws).unwrap();
    fs::write(ws.join("seed.txt"), "7\n").unwrap();
    let imported = env.json(&[
        "import",
        "--wasm",
        "python",
        ws.to_str().unwrap(),
        "--tag",
        "py",
    ]);
    let root = str_of(&imported["snapshot"]);
    assert!(imported["memory_bytes"].as_u64().unwrap() > 1 << 20);

    let e = env.json(&[
        "exec",
        "py",
        "--commit",
        "--tag",
        "s1",
        "--",
        "x = int(open('seed.txt').read()) * 6; data = {'a': [1, 2]}",
    ]);
    assert_eq!(e["exit"], 0, "{e}");
    let s1 = str_of(&e["committed"]);
    // Each arbor process restores the session from the store.
    let e = env.json(&["exec", "s1", "--", "print(x, data)"]);
    assert_eq!(e["stdout"], "42 {'a': [1, 2]}\n", "{e}");
    // Control: the parent session never had x.
    let e = env.json_with(1, &["exec", "py", "--", "print(x)"]);
    assert!(str_of(&e["stderr"]).contains("NameError"), "{e}");

    let f = env.json(&[
        "fanout",
        "s1",
        "--cmd",
        "x = 1; open('out.txt', 'w').write('one'); print(x)",
        "--cmd",
        "print(x)",
        "--commit",
        "--tag-prefix",
        "f",
    ]);
    let forks = f["forks"].as_array().unwrap();
    assert_eq!(forks[0]["stdout"], "1\n");
    assert_eq!(forks[1]["stdout"], "42\n", "a sibling's change leaked: {f}");

    // A step that never ends runs out of fuel; the session is not harmed.
    let e = env.json_with(124, &["exec", "s1", "--", "while True: pass"]);
    assert_eq!(e["outcome"]["type"], "out_of_fuel", "{e}");
    assert_eq!(
        env.json(&["exec", "s1", "--", "print(x)"])["stdout"],
        "42\n"
    );

    let ls = env.json(&["ls"]);
    let rows = ls["snapshots"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{ls}");
    assert!(
        rows.iter()
            .all(|r| str_of(&r["summary"]).starts_with("[wasm]")),
        "{ls}"
    );
    let log = env.json(&["log", "f-1"]);
    let chain: Vec<String> = log["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| str_of(&c["id"]))
        .collect();
    assert_eq!(chain.len(), 3);
    assert_eq!(
        (chain[0].as_str(), chain[1].as_str()),
        (root.as_str(), s1.as_str())
    );
    assert_eq!(env.json(&["show", "s1"])["backend"], "wasm");

    let d = env.json(&["diff", "s1", "f-1"]);
    assert_eq!(d["added"], serde_json::json!(["out.txt"]), "{d}");
    assert!(d["memory_pages_changed"].as_u64().unwrap() > 0, "{d}");
    let d = env.json(&["diff", "f-1", "f-1"]);
    assert_eq!(d["memory_pages_changed"], 0, "{d}");

    let co = env.path("co");
    env.ok(&["checkout", "f-1", co.to_str().unwrap()]);
    assert_eq!(fs::read_to_string(co.join("out.txt")).unwrap(), "one");
    assert_eq!(fs::read_to_string(co.join("seed.txt")).unwrap(), "7\n");

    let r = env.json(&["replay", "f-1"]);
    assert_eq!(r["identical"], true, "{r}");
    // The shared report: two actions; the boot and one step per snapshot.
    assert_eq!(r["actions"], 2, "{r}");
    assert!(r["steps"].as_array().is_some_and(|s| s.len() >= 2), "{r}");
    // Replay leaves no snapshots of its own in the index.
    assert_eq!(env.json(&["ls"])["snapshots"].as_array().unwrap().len(), 4);

    env.ok(&["rm", "f-2"]);
    env.ok(&["gc"]);
    let ls = env.json(&["ls"]);
    assert_eq!(ls["snapshots"].as_array().unwrap().len(), 3, "{ls}");
    let fsck = env.run(&["fsck"]);
    assert!(fsck.status.success(), "{}", describe(&fsck));
    assert_eq!(
        env.json(&["exec", "f-1", "--", "print(x)"])["stdout"],
        "1\n",
        "gc lost a tagged session's state"
    );
}

/// `task run` on a bundled code-interpreter task (`backend = "wasm"`): the
/// gold steps score 1, a forged always-equal result scores 0, and the
/// verdict says why.
#[test]
fn task_run_grades_a_session_task_on_the_session_state() {
    let env = Env::new();
    let run_actions = |name: &str, actions: serde_json::Value| {
        let file = env.path(name);
        fs::write(&file, actions.to_string()).unwrap();
        env.json(&[
            "task",
            "run",
            "session-topk-1",
            "--actions",
            file.to_str().unwrap(),
        ])
    };
    let run = run_actions(
        "gold.json",
        serde_json::json!([
            {"exec": "def top_k(xs, k):\n    return [] if k <= 0 else sorted(xs, reverse=True)[:k]\n"},
            {"exec": "leaders = [n for n, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]"},
        ]),
    );
    assert_eq!(run["verdict"]["reward"], 1.0, "{run}");
    let run = run_actions(
        "forged.json",
        serde_json::json!([
            {"exec": "class Any(list):\n    def __eq__(self, other):\n        return True\n\ndef top_k(xs, k):\n    return Any()\n"},
            {"exec": "leaders = Any()"},
        ]),
    );
    assert_eq!(run["verdict"]["reward"], 0.0, "{run}");
    assert_eq!(run["verdict"]["task"]["checks_passed"], 0, "{run}");
}

/// `arbor train` and `arbor credit eval` are handed, argument for argument,
/// to the `arbor-train` binary (`$ARBOR_TRAIN` here: a script that records
/// its arguments), whose exit status becomes arbor's; other commands are
/// not. Without an `arbor-train`, the error names it and how to build it.
#[test]
fn train_and_credit_eval_run_in_the_arbor_train_binary() {
    let env = Env::new();
    let log = env.path("trainer-args");
    let fake = env.path("fake-arbor-train");
    fs::write(
        &fake,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\nexit 7\n",
            log.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
    let run = |args: &[&str], trainer: Option<&Path>, path: Option<&Path>| {
        let mut c = Command::new(arbor_bin());
        c.args(args).env_remove("ARBOR_TRAIN");
        if let Some(t) = trainer {
            c.env("ARBOR_TRAIN", t);
        }
        if let Some(p) = path {
            c.env("PATH", p);
        }
        c.output().unwrap()
    };
    let home = env.home();
    let home = home.to_str().unwrap();
    for args in [
        vec![
            "--home",
            home,
            "train",
            "--compare",
            "--smoke",
            "--seeds",
            "3",
        ],
        vec!["--home", home, "credit", "eval", "--quick", "--json"],
    ] {
        let _ = fs::remove_file(&log);
        let out = run(&args, Some(&fake), None);
        assert_eq!(out.status.code(), Some(7), "{args:?}: {}", describe(&out));
        let got = fs::read_to_string(&log).unwrap();
        assert_eq!(got.lines().collect::<Vec<_>>(), args, "{args:?}");
    }
    // Positive control: other commands never reach the trainer.
    let _ = fs::remove_file(&log);
    let out = run(&["--home", home, "ls"], Some(&fake), None);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!log.exists(), "ls ran the trainer");

    // No arbor-train anywhere: a copy of arbor alone in a folder, empty PATH.
    let lone = env.path("lone");
    fs::create_dir(&lone).unwrap();
    fs::copy(arbor_bin(), lone.join("arbor")).unwrap();
    let out = Command::new(lone.join("arbor"))
        .args(["--home", home, "train", "--compare"])
        .env_remove("ARBOR_TRAIN")
        .env("PATH", &lone)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("arbor-train") && err.contains("cargo build --release -p arbor-train"),
        "{err}"
    );
}

/// `arbor exec S -- CMD ARG...` runs an argv: every argument reaches the
/// command unchanged (spaces, quotes, `$`, `;`, empty words), as with
/// `docker exec`; a single argument is a shell string.
#[test]
fn exec_with_several_arguments_runs_them_as_an_argv() {
    let env = Env::new();
    env.import_sample();
    let words = ["a b", "c'd", "$HOME", "", "x;y", "*", "\\n"];
    let mut args = vec!["exec", "base", "--", "printf", "%s|"];
    args.extend(words);
    assert_eq!(env.ok(&args), "a b|c'd|$HOME||x;y|*|\\n|");
    // Positive control: one argument is a shell string (expansion, `;`).
    assert_eq!(
        env.ok(&["exec", "base", "--", "printf '%s|' $((1+2)); echo ok"]),
        "3|ok\n"
    );
    // And the argv form runs the program it names, with its exit status.
    assert_eq!(
        env.run(&["exec", "base", "--", "sh", "-c", "exit 5"])
            .status
            .code(),
        Some(5)
    );
}

#[test]
fn image_import_ls_show_import_on_it_and_rm() {
    use arbor_runtime::image::Compression;
    use arbor_runtime::image::write::{LayoutLayer, tar_dir, write_oci_layout};
    let env = Env::new();
    let root = env.path("rootfs");
    fs::create_dir_all(root.join("etc")).unwrap();
    fs::write(root.join("etc/os-release"), "ID=tiny\n").unwrap();
    let layout = env.path("layout");
    let config = arbor_runtime::store::ImageConfig {
        env: vec!["A=1".into()],
        ..Default::default()
    };
    let layer = LayoutLayer {
        tar: tar_dir(&root).unwrap(),
        compression: Compression::Gzip,
    };
    write_oci_layout(&layout, &[layer], &config, None).unwrap();
    let l = layout.to_str().unwrap();
    let imported = env.json(&["image", "import", l, "--tag", "tiny:1"]);
    assert_eq!(imported["name"], "tiny:1");
    assert_eq!(imported["layers"], 1);
    assert_eq!(imported["format"], "oci-layout");
    let again = env.json(&["image", "import", l, "--tag", "tiny:2"]);
    assert_eq!(again["image"], imported["image"], "same content, same id");
    assert_eq!(again["layers_new"], 0);
    let ls = env.json(&["image", "ls"]);
    assert_eq!(ls.as_array().map(Vec::len), Some(2), "{ls}");
    let show = env.ok(&["image", "show", "tiny:1"]);
    assert!(
        show.contains("env A=1") && show.contains("tiny:1, tiny:2"),
        "{show}"
    );
    // A workspace on the image records it.
    let src = env.path("ws");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), "x").unwrap();
    let snap = env.json(&["import", src.to_str().unwrap(), "--image", "tiny:1"]);
    assert_eq!(snap["image"], imported["image"]);
    // Bad input: an unknown image, a corrupt blob; the store stays clean.
    let out = env.run(&["import", src.to_str().unwrap(), "--image", "nope"]);
    assert!(!out.status.success());
    assert!(
        describe(&out).contains("no image named \"nope\""),
        "{}",
        describe(&out)
    );
    let blob = fs::read_dir(layout.join("blobs/sha256"))
        .unwrap()
        .flatten()
        .max_by_key(|e| e.metadata().unwrap().len())
        .unwrap()
        .path();
    let mut b = fs::read(&blob).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 1;
    fs::write(&blob, b).unwrap();
    let out = env.run(&["image", "import", l, "--tag", "bad"]);
    assert!(!out.status.success());
    assert!(
        describe(&out).contains("digest mismatch"),
        "{}",
        describe(&out)
    );
    let fsck = env.json(&["fsck"]);
    assert_eq!(fsck["problems"].as_array().map(Vec::len), Some(0), "{fsck}");
    env.ok(&["image", "rm", "tiny:2"]);
    let ls = env.json(&["image", "ls"]);
    assert_eq!(ls.as_array().map(Vec::len), Some(1), "{ls}");
}
