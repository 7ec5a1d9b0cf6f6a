//! `arbor serve` end to end, as a process: SIGTERM with an action in
//! flight (it is cancelled after the grace period, every sandbox is closed,
//! nothing is left mounted or running), and a restart on the same store
//! (every snapshot and tag is there; the old sandboxes are gone).
//!
//! The HTTP surface itself is tested from Python (clients/python/tests).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn arbor_bin() -> PathBuf {
    std::env::var_os("ARBOR_TEST_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_arbor")), PathBuf::from)
}

/// One request over the socket (`Connection: close`): status and body.
fn call(sock: &Path, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut s = UnixStream::connect(sock).expect("connect");
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: arbor\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let json = text
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    (status, json)
}

/// A server process, killed if the test ends before it stops it.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl Server {
    /// SIGTERM, then wait; the exit status and how long it took.
    fn terminate(&mut self) -> (std::process::ExitStatus, Duration) {
        let t0 = Instant::now();
        // SAFETY: kill(2) on the child this test spawned and has not reaped.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let status = self.0.wait().expect("wait for the server");
        (status, t0.elapsed())
    }
}

fn start(home: &Path, sock: &Path) -> Server {
    let child = Command::new(arbor_bin())
        .arg("--home")
        .arg(home)
        .args(["serve", "--grace", "1", "--unix"])
        .arg(sock)
        .env_remove("ARBOR_HOME")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start arbor serve");
    let child = Server(child);
    let t0 = Instant::now();
    while call_ok(sock).is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "server did not come up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

fn call_ok(sock: &Path) -> Option<()> {
    UnixStream::connect(sock).ok()?;
    (call(sock, "GET", "/v1/health", None).0 == 200).then_some(())
}

/// Mounts below `dir` (the store's sandboxes mount under it).
fn mounts_under(dir: &Path) -> usize {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let d = dir.to_string_lossy().into_owned();
    text.lines()
        .filter(|l| l.split(' ').nth(4).is_some_and(|m| m.starts_with(&d)))
        .count()
}

/// The child processes of `pid` (the sandboxes' helpers, for a server).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let text = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

/// Whether `pid` is still a live (not zombie) process.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

#[test]
fn sigterm_cancels_in_flight_work_and_a_restart_keeps_every_snapshot() {
    let dir = tempfile::Builder::new()
        .prefix("arbor-serve-test-")
        .tempdir()
        .unwrap();
    let home = dir.path().join("home");
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("a.txt"), "one\n").unwrap();
    let imported = Command::new(arbor_bin())
        .arg("--home")
        .arg(&home)
        .args(["import", "--tag", "base"])
        .arg(&src)
        .env_remove("ARBOR_HOME")
        .output()
        .unwrap();
    assert!(imported.status.success(), "{imported:?}");
    let sock = dir.path().join("s.sock");
    let mut server = start(&home, &sock);

    let (status, sb) = call(
        &sock,
        "POST",
        "/v1/sandboxes",
        Some(&serde_json::json!({"snapshot": "base"})),
    );
    assert_eq!(status, 201, "{sb}");
    let id = sb["id"].as_str().unwrap().to_owned();
    let (status, r) = call(
        &sock,
        "POST",
        &format!("/v1/sandboxes/{id}/exec"),
        Some(&serde_json::json!({"command": "echo two >> a.txt"})),
    );
    assert_eq!((status, r["exit_code"].as_i64()), (200, Some(0)), "{r}");
    let (status, snap) = call(
        &sock,
        "POST",
        &format!("/v1/sandboxes/{id}/snapshot"),
        Some(&serde_json::json!({"tag": "step1"})),
    );
    assert_eq!(status, 201, "{snap}");
    // Positive control for the leak check below: the live sandbox's helper runs now.
    let helpers = children(server.0.id());
    assert!(
        helpers.iter().any(|p| alive(*p)),
        "no helper process seen while a sandbox is live"
    );

    // An action that would outlive the grace period.
    let slow = {
        let (sock, id) = (sock.clone(), id.clone());
        std::thread::spawn(move || {
            call(
                &sock,
                "POST",
                &format!("/v1/sandboxes/{id}/exec"),
                Some(&serde_json::json!({"command": "sleep 60", "timeout_s": 120})),
            )
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let (status, took) = server.terminate();
    assert!(status.success(), "server exit: {status:?}");
    assert!(
        took < Duration::from_secs(20),
        "shutdown took {took:?} with a 1 s grace"
    );
    // The cancelled exec got an answer (a runtime-fault error) or its connection closed; it did not hang.
    let (code, _) = slow.join().unwrap();
    assert_ne!(code, 200, "the 60 s sleep cannot have finished");
    assert_eq!(mounts_under(dir.path()), 0, "mounts left under the store");
    let t1 = Instant::now();
    while helpers.iter().any(|p| alive(*p)) && t1.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = helpers.into_iter().filter(|p| alive(*p)).collect();
    assert!(left.is_empty(), "helpers {left:?} outlived the server");
    assert!(!sock.exists(), "the socket file was left behind");

    // A restart: the snapshots and tags are there, the sandbox is gone.
    let mut server = start(&home, &sock);
    let (status, s) = call(&sock, "GET", "/v1/snapshots/step1", None);
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["id"], snap["id"]);
    let (status, _) = call(&sock, "GET", "/v1/snapshots/base", None);
    assert_eq!(status, 200);
    let (status, e) = call(&sock, "GET", &format!("/v1/sandboxes/{id}"), None);
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{e}"
    );
    // The snapshot's content survived: a fork of it sees the appended line.
    let (status, kids) = call(
        &sock,
        "POST",
        "/v1/snapshots/step1/fork",
        Some(&serde_json::json!({"n": 1})),
    );
    assert_eq!(status, 201, "{kids}");
    let kid = kids["sandboxes"][0]["id"].as_str().unwrap().to_owned();
    let (_, r) = call(
        &sock,
        "POST",
        &format!("/v1/sandboxes/{kid}/exec"),
        Some(&serde_json::json!({"command": "cat a.txt"})),
    );
    assert_eq!(r["stdout"], "one\ntwo\n", "{r}");
    assert!(server.terminate().0.success());
}
