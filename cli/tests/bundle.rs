//! `arbor bundle export | import` between stores, end to end: a chain of
//! snapshots with deletions (whiteouts), a replaced directory (opaque), a
//! FIFO, a symlink and a mode change moves to a fresh store, runs and
//! replays there identically; an incremental bundle is a fraction of the
//! full one and is refused, by name, by a store without its base; a bundle
//! cut short or with a flipped byte is refused with the store unchanged.
//!
//! The binary is `$ARBOR_TEST_BIN` when set, else the one cargo built.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn bin() -> PathBuf {
    std::env::var_os("ARBOR_TEST_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_arbor")), PathBuf::from)
}

fn arbor(home: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("ARBOR_HOME")
        .output()
        .expect("run arbor")
}

fn ok(home: &Path, args: &[&str]) -> String {
    let out = arbor(home, args);
    assert!(
        out.status.success(),
        "arbor {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn json(home: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(home, &all)).expect("one JSON object")
}

/// Names and sizes of everything in a store but `tmp/` and the lock.
fn listing(home: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![home.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).expect("read store").flatten() {
            let p = e.path();
            let rel = p.strip_prefix(home).unwrap().display().to_string();
            if rel == "tmp" || rel == "lock" {
                continue;
            }
            let md = fs::symlink_metadata(&p).unwrap();
            out.push((rel, if md.is_file() { md.len() } else { 0 }));
            if md.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_chain_moves_between_stores_runs_and_replays_and_bad_bundles_change_nothing() {
    let dir = tempfile::Builder::new()
        .prefix("arbor-bundle-test-")
        .tempdir()
        .unwrap();
    let (a, b, c) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("c"),
    );
    let src = dir.path().join("src");
    fs::create_dir_all(src.join("old/deep")).unwrap();
    fs::write(src.join("keep.txt"), "keep\n").unwrap();
    fs::write(src.join("gone.txt"), "gone\n").unwrap();
    fs::write(src.join("old/deep/x"), "x\n").unwrap();
    let big: Vec<u8> = (0..2_000_000u32).map(|i| (i % 253) as u8).collect();
    fs::write(src.join("big.bin"), &big).unwrap();
    ok(&a, &["import", src.to_str().unwrap(), "--tag", "base"]);
    ok(
        &a,
        &[
            "exec",
            "base",
            "--commit",
            "--tag",
            "s1",
            "--",
            "rm gone.txt && rm -rf old && mkdir old && echo new > old/y && mkfifo pipe \
             && ln -s keep.txt link && chmod 600 keep.txt && echo one > log",
        ],
    );
    ok(
        &a,
        &[
            "exec",
            "s1",
            "--commit",
            "--tag",
            "s2",
            "--",
            "echo two >> log",
        ],
    );

    let full = dir.path().join("full.bundle");
    let inc = dir.path().join("inc.bundle");
    let f = json(
        &a,
        &["bundle", "export", "s2", "--out", full.to_str().unwrap()],
    );
    assert_eq!(f["snapshots"], 3, "{f}");
    let i = json(
        &a,
        &[
            "bundle",
            "export",
            "s2",
            "--since",
            "base",
            "--out",
            inc.to_str().unwrap(),
        ],
    );
    assert_eq!(i["snapshots"], 2, "{i}");
    let (full_len, inc_len) = (
        fs::metadata(&full).unwrap().len(),
        fs::metadata(&inc).unwrap().len(),
    );
    assert!(
        inc_len * 50 < full_len,
        "incremental {inc_len} vs full {full_len}"
    );
    // An existing file is left alone.
    let out = arbor(
        &a,
        &["bundle", "export", "s2", "--out", full.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exists"));
    assert_eq!(fs::metadata(&full).unwrap().len(), full_len);

    // The full bundle into a fresh store: tags, files, FIFO, whiteouts.
    let got = json(&b, &["bundle", "import", full.to_str().unwrap()]);
    assert_eq!(got["tags_set"], serde_json::json!(["s2"]), "{got}");
    assert_eq!(got["snapshots_listed"], 3);
    let seen = ok(
        &b,
        &[
            "exec",
            "s2",
            "--",
            "cat log old/y; ls old; test ! -e gone.txt && echo no-gone; test -p pipe && echo fifo; \
             readlink link; stat -c %a keep.txt; sha256sum big.bin",
        ],
    );
    let want_sum = {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(&big))
    };
    assert!(
        seen.contains("one\ntwo\nnew\ny\nno-gone\nfifo\nkeep.txt\n600\n")
            && seen.contains(&want_sum),
        "{seen}"
    );
    let replay = json(&b, &["replay", "s2"]);
    assert_eq!(replay["identical"], Value::Bool(true), "{replay}");
    let fsck = json(&b, &["fsck"]);
    assert_eq!(fsck["problems"].as_array().map(Vec::len), Some(0), "{fsck}");

    // The incremental one needs its base.
    ok(&c, &["ls"]);
    let before = listing(&c);
    let out = arbor(&c, &["bundle", "import", inc.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("incremental") && err.contains("import a bundle of the base first"),
        "{err}"
    );
    assert_eq!(listing(&c), before);
    // Cut short, or one byte flipped: refused, store unchanged.
    let bytes = fs::read(&full).unwrap();
    let cut = dir.path().join("cut.bundle");
    fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let out = arbor(&c, &["bundle", "import", cut.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("truncated"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut flipped = bytes.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x01;
    let bad = dir.path().join("bad.bundle");
    fs::write(&bad, &flipped).unwrap();
    let out = arbor(&c, &["bundle", "import", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("tampered"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(listing(&c), before);
    // Positive control: base (through a pipe) then the increment.
    let mut export = Command::new(bin())
        .args([
            "--home",
            a.to_str().unwrap(),
            "bundle",
            "export",
            "base",
            "--out",
            "-",
        ])
        .env_remove("ARBOR_HOME")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = Command::new(bin())
        .args(["--home", c.to_str().unwrap(), "bundle", "import", "-"])
        .env_remove("ARBOR_HOME")
        .stdin(export.stdout.take().unwrap())
        .output()
        .unwrap();
    assert!(export.wait().unwrap().success());
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let got = json(&c, &["bundle", "import", inc.to_str().unwrap()]);
    assert_eq!(got["layers_new"], 2, "{got}");
    assert_eq!(ok(&c, &["exec", "s2", "--", "cat log"]), "one\ntwo\n");
    assert_ne!(listing(&c), before);
}
