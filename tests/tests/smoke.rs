//! Quick end-to-end smoke test.
use arbor_runtime::ExecOptions;

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

#[test]
fn import_fork_exec_snapshot() {
    let t = arbor_tests::runtime(std::path::Path::new(HELPER));
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let snap = t.runtime.import(&src, Some("base")).unwrap();
    let mut sb = snap.open().unwrap();
    let obs = sb.exec("cat src/main.py; echo hi > new.txt; cd src; export FOO=bar; id -u; hostname", &ExecOptions::default()).unwrap();
    eprintln!("stdout: {}\nstderr: {}", obs.stdout_text(), String::from_utf8_lossy(&obs.stderr));
    assert_eq!(obs.code(), Some(0));
    let s2 = sb.snapshot().unwrap();
    let obs = sb.exec("pwd; echo $FOO; cat ../new.txt", &ExecOptions::default()).unwrap();
    eprintln!("stdout: {}\nstderr: {}", obs.stdout_text(), String::from_utf8_lossy(&obs.stderr));
    assert_eq!(obs.stdout_text(), "/workspace/src\nbar\nhi\n");
    let d = t.runtime.diff(&snap, &s2).unwrap();
    assert_eq!(d.added, vec!["new.txt".to_owned()]);
}
