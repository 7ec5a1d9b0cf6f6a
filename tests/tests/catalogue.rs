//! Rows of the README's escape catalogue that the other suites do not
//! cover: descriptor exhaustion, device nodes, setuid bits. Each refusal is
//! shown to come from the defence named (the limit's value, a node kind
//! that is allowed), and the sandbox keeps working afterwards.

use std::path::Path;

use arbor_tests::run;

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

#[test]
fn descriptor_exhaustion_stops_at_the_limit_and_the_sandbox_survives() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let mut sb = t.sample_sandbox();
    let limit = run(&mut sb, "ulimit -n");
    assert_eq!(limit.stdout_text(), "1024\n");
    let obs = run(
        &mut sb,
        "python3 -c 'import os\nfds = []\ntry:\n    while True: fds.append(os.open(\"/dev/null\", os.O_RDONLY))\nexcept OSError as e: print(len(fds), e.errno)'",
    );
    let out = obs.stdout_text();
    let mut parts = out.split_whitespace();
    let opened: usize = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    let errno: i32 = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    // EMFILE, after close to the limit: the rlimit stopped it (a smaller
    // count would mean something else failed first).
    assert_eq!(
        errno,
        libc::EMFILE,
        "{out} {}",
        String::from_utf8_lossy(&obs.stderr)
    );
    assert!((1000..1024).contains(&opened), "{out}");
    assert_eq!(run(&mut sb, "echo after").stdout_text(), "after\n");
}

#[test]
fn device_nodes_cannot_be_made_and_setuid_gains_nothing() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let mut sb = t.sample_sandbox();
    // Positive control: a node kind that is no device is made in /tmp.
    let fifo = run(
        &mut sb,
        "mkfifo /tmp/fifo && test -p /tmp/fifo && echo made",
    );
    assert_eq!(
        fifo.stdout_text(),
        "made\n",
        "{}",
        String::from_utf8_lossy(&fifo.stderr)
    );
    for dir in ["/tmp", "/workspace"] {
        let obs = run(
            &mut sb,
            &format!("mknod {dir}/mem c 1 1; test -e {dir}/mem || echo none"),
        );
        assert_eq!(
            obs.stdout_text(),
            "none\n",
            "a device node was made in {dir}"
        );
    }
    // no_new_privs: a setuid bit can never raise privileges on exec.
    let status = run(&mut sb, "grep -E '^NoNewPrivs:' /proc/self/status");
    assert_eq!(
        status.stdout_text().split_whitespace().collect::<Vec<_>>(),
        ["NoNewPrivs:", "1"]
    );
    // A setuid binary owned by another user runs as the caller: the bit is
    // set (the control), the exec ignores it. Rootless, only one id is
    // mapped and the chown is refused, so only no_new_privs is checked.
    let obs = run(
        &mut sb,
        "cp /usr/bin/id /workspace/suid-id && chown 1000:1000 /workspace/suid-id && chmod 4755 /workspace/suid-id && stat -c %a /workspace/suid-id && /workspace/suid-id -u",
    );
    if obs.code() == Some(0) {
        let out = obs.stdout_text();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines, ["4755", "0"], "the setuid bit took effect");
    } else {
        assert!(
            !arbor_tests::is_root(),
            "{}",
            String::from_utf8_lossy(&obs.stderr)
        );
    }
    // /tmp is mounted nosuid. (The workspace is not: no_new_privs alone
    // makes its setuid bits inert, as shown above.)
    let mounts = run(&mut sb, "cat /proc/self/mountinfo");
    let line = mounts
        .stdout_text()
        .lines()
        .find(|l| l.split_whitespace().nth(4) == Some("/tmp"))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("/tmp is not a mount point:\n{}", mounts.stdout_text()));
    let options = line.split_whitespace().nth(5).unwrap_or("");
    assert!(options.split(',').any(|o| o == "nosuid"), "/tmp: {line}");
}
