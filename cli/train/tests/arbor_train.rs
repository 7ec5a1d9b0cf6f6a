//! The `arbor-train` binary on its own: it runs the trainer's commands and
//! refuses every other with a usage error (status 2) that says so.

use std::process::Command;

fn run(args: &[&str]) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_arbor-train"))
        .arg("--home")
        .arg(home.path())
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn arbor_train_runs_only_the_trainer_commands() {
    let out = run(&["ls"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("runs only `train` and `credit eval`"), "{err}");
    // Positive control: a trainer command is taken (and fails on its input,
    // naming it, not on the command).
    let out = run(&["train", "--records", "/nonexistent/records.jsonl"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(!err.contains("runs only"), "{err}");
    assert!(err.contains("/nonexistent/records.jsonl"), "{err}");
}
