//! End-to-end tests of `arbor task import-swe`: a tiny git repository with a
//! bug, its fix and a test becomes a task that `arbor task validate` accepts
//! (gold 1, no-op 0); a patch that does not apply is refused, naming the
//! instance, and nothing is written (with a positive control).
//!
//! The binary is `$ARBOR_TEST_BIN` when set, else the one cargo built.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn arbor_bin() -> PathBuf {
    std::env::var_os("ARBOR_TEST_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_arbor")), PathBuf::from)
}

fn arbor(home: &Path, args: &[&str]) -> Output {
    Command::new(arbor_bin())
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("ARBOR_HOME")
        .output()
        .expect("run arbor")
}

fn describe(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn sh(dir: &Path, script: &str) -> String {
    let out = Command::new("bash")
        .arg("-ec")
        .arg(script)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("bash");
    assert!(out.status.success(), "{script}: {}", describe(&out));
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `repos/local__calc` at its buggy base, and the instance (as JSON) that
/// fixes `add` and adds a test for it.
fn fixture(root: &Path) -> Value {
    let repo = root.join("repos/local__calc");
    std::fs::create_dir_all(&repo).unwrap();
    sh(
        &repo,
        "git init -q . && mkdir calc tests && touch calc/__init__.py tests/__init__.py
         printf 'def add(a, b):\\n    return a - b\\n' > calc/ops.py
         printf 'from calc.ops import add\\n\\n\\ndef test_zero():\\n    assert add(0, 0) == 0\\n' > tests/test_ops.py
         git add -A && git commit -qm base",
    );
    let base = sh(&repo, "git rev-parse HEAD").trim().to_owned();
    let patch = sh(
        &repo,
        "sed -i 's/a - b/a + b/' calc/ops.py && git diff && git checkout -q -- .",
    );
    let test_patch = sh(
        &repo,
        "printf '\\n\\ndef test_two():\\n    assert add(1, 1) == 2\\n' >> tests/test_ops.py && git diff && git checkout -q -- .",
    );
    json!({
        "instance_id": "local__calc-1",
        "repo": "local/calc",
        "base_commit": base,
        "patch": patch,
        "test_patch": test_patch,
        "FAIL_TO_PASS": "[\"tests/test_ops.py::test_two\"]",
        "PASS_TO_PASS": ["tests/test_ops.py::test_zero"],
        "problem_statement": "`calc.ops.add(1, 1)` is 0; it should be 2.",
    })
}

fn import(root: &Path, instances: &[Value], out: &Path) -> Output {
    let file = root.join("instances.jsonl");
    let text: String = instances.iter().map(|i| format!("{i}\n")).collect();
    std::fs::write(&file, text).unwrap();
    arbor(
        &root.join("home"),
        &[
            "task",
            "import-swe",
            file.to_str().unwrap(),
            "--repo-dir",
            root.join("repos").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    )
}

#[test]
fn an_imported_instance_validates() {
    let tmp = tempfile::tempdir().unwrap();
    let inst = fixture(tmp.path());
    let out_dir = tmp.path().join("tasks");
    let out = import(tmp.path(), &[inst], &out_dir);
    assert!(out.status.success(), "{}", describe(&out));
    let task = out_dir.join("local-calc-1");
    assert!(task.join("checks/tests/test_ops.py").is_file());
    assert!(!task.join("workspace/tests/test_ops.py").exists());
    let out = arbor(
        &tmp.path().join("home"),
        &["--json", "task", "validate", task.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", describe(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = report["tasks"][0]["report"]["checks"].as_array().unwrap();
    let got = |name: &str| {
        checks
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["got"].clone())
    };
    assert_eq!(got("gold"), Some(json!(1.0)), "{report}");
    assert_eq!(got("noop"), Some(json!(0.0)), "{report}");
    assert_eq!(report["ok"], true, "{report}");
}

#[test]
fn a_patch_that_does_not_apply_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let good = fixture(tmp.path());
    let mut bad = good.clone();
    bad["instance_id"] = json!("local__calc-2");
    bad["patch"] = json!(good["patch"].as_str().unwrap().replace("a - b", "a * b"));
    let out_dir = tmp.path().join("tasks");
    let out = import(tmp.path(), &[good.clone(), bad], &out_dir);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("local__calc-2") && err.contains("`patch`") && err.contains("does not apply"),
        "{err}"
    );
    assert!(!out_dir.exists());
    // The control: the good instance alone is imported.
    let out = import(tmp.path(), &[good], &out_dir);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(out_dir.join("local-calc-1/task.toml").is_file());
}

/// The files under `dir` that git ignores although they are there (a task
/// folder's file that git ignores is missing from every clean clone); `None`
/// when `dir` is not in a git work tree.
fn ignored_files(dir: &Path) -> Option<Vec<String>> {
    let out = Command::new("git")
        .args([
            "-c",
            "safe.directory=*",
            "ls-files",
            "--others",
            "--ignored",
        ])
        .args(["--exclude-standard", "--", "."])
        .current_dir(dir)
        .output()
        .expect("run git");
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).expect("utf-8");
    Some(
        text.lines()
            // Bytecode a host tool may leave behind is not part of a task.
            .filter(|l| !l.split('/').any(|c| c == "__pycache__"))
            .map(str::to_owned)
            .collect(),
    )
}

/// Every file of the bundled tasks is in git: a project's own `.gitignore`
/// inside a task's workspace (isodate's ignores its generated `version.py`)
/// must not silently drop a file from the commit, as it did once: the task
/// passed here and failed on every clean clone. Control: a nested
/// `.gitignore` in a scratch repository is reported.
#[test]
fn bundled_task_files_are_all_tracked() {
    let scratch = tempfile::tempdir().unwrap();
    sh(
        scratch.path(),
        "git init -q . && mkdir -p t/workspace/src && printf 'src/version.py\\n' > t/workspace/.gitignore
         echo 'v = 1' > t/workspace/src/version.py && echo 'x = 1' > t/workspace/src/a.py",
    );
    assert_eq!(
        ignored_files(scratch.path()),
        Some(vec!["t/workspace/src/version.py".to_owned()]),
        "control: a nested .gitignore's file is reported"
    );

    let tasks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../envs/tasks");
    // The unprivileged pass runs from a copy; the clone itself (0700 in CI)
    // is not readable to that user, and the root pass checked it already.
    if let Err(e) = std::fs::read_dir(&tasks) {
        eprintln!("skipped: cannot read {}: {e}", tasks.display());
        return;
    }
    let Some(ignored) = ignored_files(&tasks) else {
        eprintln!("skipped: {} is not in a git work tree", tasks.display());
        return;
    };
    assert!(
        ignored.is_empty(),
        "task files that git ignores (add them with `git add -f`): {ignored:?}"
    );
}
