//! `arbor remote`, `arbor push`, `arbor pull` against a real S3-compatible
//! server (s3s-fs, an S3 server on a directory, from the crate registry)
//! started on loopback by the test: a chain moves through the remote to a
//! fresh store and checks out and replays identically there; a second push
//! of a related snapshot sends only what is new; a damaged or missing key
//! on the remote is refused by name with the store unchanged; a server
//! killed mid-push fails the push clearly, leaves nothing a pull takes for
//! a snapshot, and a retry completes.
//!
//! The server is `$ARBOR_S3_SERVER` (`make test` installs it with
//! `.ci/prerequisites`), else `target/tools/bin/s3s-fs`.

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const KEY: &str = "arbor-test-key";
const SECRET: &str = "arbor-test-secret";
const BUCKET: &str = "arbor-bucket";

fn bin() -> PathBuf {
    std::env::var_os("ARBOR_TEST_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_arbor")), PathBuf::from)
}

fn server_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("ARBOR_S3_SERVER") {
        return PathBuf::from(p);
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/bin/s3s-fs");
    assert!(
        p.is_file(),
        "no S3 server: set ARBOR_S3_SERVER to an s3s-fs binary, or run .ci/prerequisites \
         (it installs s3s-fs into target/tools)"
    );
    p
}

/// An s3s-fs server on loopback, its data in `data/`, killed when dropped.
struct Server {
    child: Child,
    port: u16,
    data: PathBuf,
}

impl Server {
    fn start(data: &Path, port: Option<u16>) -> Self {
        fs::create_dir_all(data.join(BUCKET)).unwrap();
        for _ in 0..5 {
            let port = port.unwrap_or_else(|| {
                TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            });
            let mut child = Command::new(server_bin())
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--access-key", KEY, "--secret-key", SECRET])
                .arg(data)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start the S3 server");
            let until = Instant::now() + Duration::from_secs(20);
            while Instant::now() < until {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Self {
                        child,
                        port,
                        data: data.to_path_buf(),
                    };
                }
                if child.try_wait().unwrap().is_some() {
                    break; // the port was taken meanwhile: another one
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("the S3 server did not start");
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The server's file for a key under the remote's prefix.
    fn file(&self, rel: &str) -> PathBuf {
        self.data.join(BUCKET).join("team/arbor").join(rel)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn arbor(home: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("ARBOR_HOME")
        .env("AWS_ACCESS_KEY_ID", KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
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

/// Fails with exit status 1; returns stderr.
fn fails(home: &Path, args: &[&str]) -> String {
    let out = arbor(home, args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "arbor {args:?} should fail: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn add_remote(home: &Path, server: &Server) {
    ok(
        home,
        &[
            "remote",
            "add",
            "origin",
            &format!("s3://{BUCKET}/team/arbor"),
            "--endpoint",
            &server.endpoint(),
        ],
    );
}

/// Names and sizes of everything in a store but `tmp/` and the lock.
fn listing(home: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![home.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).expect("read store").flatten() {
            let p = e.path();
            let rel = p.strip_prefix(home).unwrap().display().to_string();
            if rel == "tmp" || rel.ends_with("lock") {
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

/// Every file under `dir` with its bytes (symlinks as their targets).
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let md = fs::symlink_metadata(&p).unwrap();
            if md.is_dir() {
                stack.push(p);
                out.push((rel, Vec::new()));
            } else if md.file_type().is_symlink() {
                out.push((
                    rel,
                    fs::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                ));
            } else {
                out.push((rel, fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn big_bytes(len: u32, salt: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(salt) >> 13) as u8)
        .collect()
}

#[test]
fn snapshots_move_through_a_real_s3_server_and_damage_there_is_refused_by_name() {
    let dir = tempfile::Builder::new()
        .prefix("arbor-remote-test-")
        .tempdir()
        .unwrap();
    let (a, b, c) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("c"),
    );
    let server = Server::start(&dir.path().join("s3"), None);
    let src = dir.path().join("src");
    fs::create_dir_all(src.join("pkg")).unwrap();
    fs::write(src.join("pkg/mod.py"), "X = 1\n").unwrap();
    fs::write(src.join("notes.txt"), "notes\n").unwrap();
    // Larger than the multipart threshold: it goes up in parts.
    let big = big_bytes(20 << 20, 7);
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
            "echo 'X = 2' > pkg/mod.py && ln -s notes.txt link && rm notes.txt && echo one > log",
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

    // No credentials: a clear error, nothing asked of the server.
    add_remote(&a, &server);
    let out = Command::new(bin())
        .args(["--home", a.to_str().unwrap(), "push", "origin", "s1"])
        .env_remove("ARBOR_HOME")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no S3 credentials") && err.contains("AWS_ACCESS_KEY_ID"),
        "{err}"
    );
    // A bad URL and a taken name are refused, the remotes file unchanged.
    let before = fs::read(a.join("remotes.json")).unwrap();
    let err = fails(&a, &["remote", "add", "x", "s3://Bad_Bucket/p"]);
    assert!(err.contains("is not a bucket name"), "{err}");
    let err = fails(&a, &["remote", "add", "origin", "s3://other-bucket"]);
    assert!(err.contains("exists already"), "{err}");
    assert_eq!(fs::read(a.join("remotes.json")).unwrap(), before);
    let list = json(&a, &["remote", "list"]);
    assert_eq!(list["remotes"][0]["name"], "origin", "{list}");

    // The first push sends everything; the same push again sends nothing.
    let p1 = json(&a, &["push", "origin", "s1"]);
    assert_eq!(p1["snapshots"], 2, "{p1}");
    assert!(p1["contents_sent"].as_u64().unwrap() >= 3, "{p1}");
    let sent1 = p1["bytes_sent"].as_u64().unwrap();
    assert!(sent1 >= big.len() as u64, "{p1}");
    let again = json(&a, &["push", "origin", "s1"]);
    assert_eq!(again["bytes_sent"], 0, "{again}");
    assert_eq!(again["objects_present"], p1["objects_sent"], "{again}");
    // A related snapshot shares all but its own step.
    let p2 = json(&a, &["push", "origin", "s2"]);
    let sent2 = p2["bytes_sent"].as_u64().unwrap();
    assert!(sent2 > 0 && sent2 * 1000 < sent1, "{p2} after {p1}");
    assert!(p2["contents_present"].as_u64().unwrap() >= 3, "{p2}");
    let show = json(&a, &["remote", "show", "origin"]);
    assert_eq!(
        show["snapshots"].as_array().map(Vec::len),
        Some(2),
        "{show}"
    );
    assert_eq!(show["tags"].as_array().map(Vec::len), Some(2), "{show}");

    // Into a fresh store by tag: fsck clean, the same files, the same replay.
    add_remote(&b, &server);
    let got = json(&b, &["pull", "origin", "s2"]);
    assert_eq!(got["snapshots_listed"], 3, "{got}");
    assert_eq!(got["tags_set"], serde_json::json!(["s2"]), "{got}");
    let fsck = json(&b, &["fsck"]);
    assert_eq!(fsck["problems"].as_array().map(Vec::len), Some(0), "{fsck}");
    for (home, out) in [(&a, "co-a"), (&b, "co-b")] {
        ok(
            home,
            &["checkout", "s2", dir.path().join(out).to_str().unwrap()],
        );
    }
    let (fa, fb) = (
        files(&dir.path().join("co-a")),
        files(&dir.path().join("co-b")),
    );
    assert!(fa.iter().any(|(p, b)| p == "big.bin" && *b == big));
    assert_eq!(fa, fb);
    let replay = json(&b, &["replay", "s2"]);
    assert_eq!(replay["identical"], Value::Bool(true), "{replay}");
    // Pulled again: nothing is fetched.
    let again = json(&b, &["pull", "origin", "s2"]);
    assert_eq!(again["bytes_fetched"], 0, "{again}");

    // Not on the remote: named.
    add_remote(&c, &server);
    ok(&c, &["ls"]);
    let empty = listing(&c);
    let err = fails(&c, &["pull", "origin", "no-such-tag"]);
    assert!(
        err.contains("tag no-such-tag is not on remote origin"),
        "{err}"
    );
    let err = fails(&c, &["pull", "origin", &"0".repeat(64)]);
    assert!(err.contains("is not on remote origin"), "{err}");

    // One byte of the big file's content flipped on the server (same size).
    let hash = blake3::hash(&big).to_hex().to_string();
    let content = server.file(&format!("contents/{hash}"));
    let good = fs::read(&content).unwrap();
    let mut bad = good.clone();
    bad[good.len() / 2] ^= 1;
    fs::write(&content, &bad).unwrap();
    let err = fails(&c, &["pull", "origin", "s2"]);
    assert!(
        err.contains("fails verification") && err.contains(&hash),
        "{err}"
    );
    assert_eq!(listing(&c), empty);
    // Cut short on the server: named as that key.
    fs::write(&content, &good[..good.len() - 1]).unwrap();
    let err = fails(&c, &["pull", "origin", "s2"]);
    assert!(
        err.contains(&format!("contents/{hash} is damaged")),
        "{err}"
    );
    assert_eq!(listing(&c), empty);
    fs::write(&content, &good).unwrap();
    // A record that names more than the remote holds (an object deleted).
    let s1 = ok(&a, &["--json", "show", "s1"]);
    let s1: Value = serde_json::from_str(&s1).unwrap();
    let s1_id = s1["id"].as_str().unwrap().to_owned();
    let manifest = server.file(&format!("objects/{s1_id}"));
    let kept = fs::read(&manifest).unwrap();
    fs::remove_file(&manifest).unwrap();
    let err = fails(&c, &["pull", "origin", "s2"]);
    assert!(
        err.contains(&format!("objects/{s1_id} is damaged: it is missing")),
        "{err}"
    );
    assert_eq!(listing(&c), empty);
    fs::write(&manifest, &kept).unwrap();
    // Positive control: the repaired remote pulls.
    let got = json(&c, &["pull", "origin", "s1", "s2"]);
    assert_eq!(got["snapshots_listed"], 3, "{got}");
    assert_eq!(
        ok(&c, &["exec", "s2", "--", "cat log pkg/mod.py"]),
        "one\ntwo\nX = 2\n"
    );
    assert_ne!(listing(&c), empty);
}

#[test]
fn a_server_killed_mid_push_fails_it_clearly_and_a_retry_completes() {
    let dir = tempfile::Builder::new()
        .prefix("arbor-remote-kill-")
        .tempdir()
        .unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let data = dir.path().join("s3");
    let mut server = Server::start(&data, None);
    let src = dir.path().join("src");
    fs::create_dir_all(&src).unwrap();
    // Many distinct files, so the push is still going when the server dies.
    for i in 0..1500u32 {
        fs::write(src.join(format!("f{i:04}.bin")), big_bytes(24 << 10, i)).unwrap();
    }
    fs::write(src.join("big.bin"), big_bytes(40 << 20, 99)).unwrap();
    ok(&a, &["import", src.to_str().unwrap(), "--tag", "many"]);
    add_remote(&a, &server);
    add_remote(&b, &server);

    let push = Command::new(bin())
        .args(["--home", a.to_str().unwrap(), "push", "origin", "many"])
        .env_remove("ARBOR_HOME")
        .env("AWS_ACCESS_KEY_ID", KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let contents = server.file("contents");
    let until = Instant::now() + Duration::from_secs(60);
    while fs::read_dir(&contents).map_or(0, |d| d.count()) < 20 {
        assert!(Instant::now() < until, "the push uploaded nothing");
        std::thread::sleep(Duration::from_millis(2));
    }
    server.kill();
    let out = push.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "the push should fail: {err}");
    assert!(
        err.contains("push to origin") && err.contains("remote origin: cannot"),
        "{err}"
    );
    let uploaded = fs::read_dir(&contents).unwrap().count();
    eprintln!("killed after {uploaded} contents: {err}");
    assert!(
        uploaded < 1501,
        "{uploaded} contents: the push had finished"
    );

    // The same data, the same port: what the push left is not a snapshot.
    let server = Server::start(&data, Some(server.port));
    assert!(
        !server.file("snapshots").exists()
            || fs::read_dir(server.file("snapshots")).unwrap().count() == 0
    );
    ok(&b, &["ls"]);
    let empty = listing(&b);
    let err = fails(&b, &["pull", "origin", "many"]);
    assert!(err.contains("tag many is not on remote origin"), "{err}");
    assert_eq!(listing(&b), empty);

    // The retry sends only what is missing (a cut-off upload counts as missing).
    let p = json(&a, &["push", "origin", "many"]);
    assert!(p["contents_present"].as_u64().unwrap() >= 15, "{p}");
    assert!(p["contents_sent"].as_u64().unwrap() >= 1, "{p}");
    eprintln!("retry: {p}");
    let got = json(&b, &["pull", "origin", "many"]);
    assert_eq!(got["snapshots_listed"], 1, "{got}");
    let fsck = json(&b, &["fsck"]);
    assert_eq!(fsck["problems"].as_array().map(Vec::len), Some(0), "{fsck}");
    ok(
        &b,
        &["checkout", "many", dir.path().join("co").to_str().unwrap()],
    );
    assert_eq!(files(&dir.path().join("co")), files(&src));
}
