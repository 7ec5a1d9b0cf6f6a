//! Isolation invariants (design invariant 6): nothing inside a sandbox can
//! write outside `/workspace` and `/tmp`, reach the network, see host
//! processes or host files, or exhaust the host's process table. Each
//! negative check has a positive control that shows it could fail.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;

use arbor_runtime::ExecOptions;
use arbor_runtime::store::object::ExitStatus;
use arbor_tests::run;

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

#[test]
fn writes_outside_workspace_and_tmp_fail() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let mut sb = t.sample_sandbox();
    let ok = run(
        &mut sb,
        "echo a > /workspace/ok && echo b > /tmp/ok && echo fine",
    );
    assert_eq!(ok.stdout_text(), "fine\n", "positive control");
    for target in [
        "/usr/arbor-x",
        "/etc/arbor-x",
        "/arbor-x",
        "/bin/arbor-x",
        "/dev/arbor-x",
        "/proc/arbor-x",
    ] {
        let obs = run(&mut sb, &format!("echo x > {target}"));
        assert_ne!(obs.code(), Some(0), "{target} was writable");
    }
    // Remounting the read-only view is refused (CAP_SYS_ADMIN is dropped).
    let obs = run(
        &mut sb,
        "mount -o remount,rw / 2>&1; mount -t tmpfs none /usr 2>&1; echo $?",
    );
    assert!(
        obs.stdout_text().trim_end().ends_with("32") || !obs.stdout_text().contains("\n0\n"),
        "{}",
        obs.stdout_text()
    );
    assert!(!Path::new("/usr/arbor-x").exists() && !Path::new("/arbor-x").exists());
}

#[test]
fn network_is_loopback_only() {
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let _ = conn.write_all(b"host-secret\n");
        }
    });
    // Positive control: the host itself reaches the listener.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    assert_eq!(buf, "host-secret\n");

    let t = arbor_tests::runtime(Path::new(HELPER));
    let mut sb = t.sample_sandbox();
    let obs = run(
        &mut sb,
        &format!("timeout 5 bash -c 'cat < /dev/tcp/127.0.0.1/{port}' 2>&1; echo rc=$?"),
    );
    assert!(
        !obs.stdout_text().contains("host-secret"),
        "{}",
        obs.stdout_text()
    );
    // Only the loopback interface exists, and it is up.
    let obs = run(
        &mut sb,
        "ls /sys/class/net 2>/dev/null || cat /proc/net/dev | tail -n +3 | cut -d: -f1",
    );
    assert_eq!(
        obs.stdout_text().split_whitespace().collect::<Vec<_>>(),
        ["lo"]
    );
    // Loopback inside works (positive control for the namespace itself).
    let obs = run(
        &mut sb,
        "python3 -c \"import socket;s=socket.socket();s.bind(('127.0.0.1',0));s.listen();c=socket.create_connection(s.getsockname());print('loopback-ok')\"",
    );
    assert_eq!(
        obs.stdout_text(),
        "loopback-ok\n",
        "{}",
        String::from_utf8_lossy(&obs.stderr)
    );
}

#[test]
fn host_processes_are_invisible() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let mut sb = t.sample_sandbox();
    let obs = run(
        &mut sb,
        "ls /proc | grep -E '^[0-9]+$' | wc -l; cat /proc/1/cmdline | tr '\\0' ' '",
    );
    let text = obs.stdout_text();
    let count: usize = text.lines().next().unwrap().trim().parse().unwrap();
    assert!(count <= 6, "saw {count} processes: {text}");
    let own = std::process::id();
    let obs = run(
        &mut sb,
        &format!("test -e /proc/{own}/cmdline && grep -c arbor /proc/{own}/cmdline || echo absent"),
    );
    assert!(
        obs.stdout_text().contains("absent") || own <= 6,
        "{}",
        obs.stdout_text()
    );
    // Positive control: the host does see itself.
    assert!(Path::new(&format!("/proc/{own}/cmdline")).exists());
}

/// The action's init (pid 1 of its /proc) never execs: it holds what it
/// inherited from the helper. In rootless mode it has the action's own uid,
/// so only the system (not dumpable, descriptors closed) keeps the action
/// from opening its descriptors, e.g. writing forged frames into the
/// helper's protocol pipe through `/proc/1/fd/1`, or from walking into the
/// host's store through a directory descriptor.
#[test]
fn the_action_cannot_reach_its_init_or_the_helpers_descriptors() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let mut sb = t.sample_sandbox();
    let obs = run(
        &mut sb,
        "echo \"self $$\"
         for p in /proc/[0-9]*; do
             ls \"$p/fd\" >/dev/null 2>&1 && echo \"fd-readable ${p#/proc/}\"
         done
         for pid in 1 $PPID self; do
             for f in environ mem; do (: </proc/$pid/$f) 2>/dev/null && echo \"reach $pid/$f\"; done
             for f in root cwd fd; do ls /proc/$pid/$f/ >/dev/null 2>&1 && echo \"reach $pid/$f\"; done
         done
         for n in 0 1 2 3 4 5 6 7 8 9 10 11 12; do
             (printf 'ARBORxxxxxxxxxxxx' >/proc/1/fd/$n) 2>/dev/null && echo \"wrote 1/$n\"
         done
         true",
    );
    let text = obs.stdout_text();
    let own: &str = text
        .lines()
        .find_map(|l| l.strip_prefix("self "))
        .expect("the shell printed its pid");
    // Positive controls: the shell reaches its own descriptors and files.
    assert!(text.contains(&format!("fd-readable {own}\n")), "{text}");
    for f in ["environ", "mem", "root", "cwd", "fd"] {
        assert!(text.contains(&format!("reach self/{f}\n")), "{f}: {text}");
    }
    // The init (pid 1) is out of reach, whatever the mode.
    for l in text.lines() {
        assert!(
            !l.ends_with(" 1") && !l.contains(" 1/"),
            "the action reached its init: {l}\n{text}"
        );
    }
    // And the helper's protocol is intact: the next action runs.
    let next = run(&mut sb, "echo next");
    assert_eq!(next.stdout_text(), "next\n");
    assert_eq!(
        obs.exit,
        ExitStatus::Code { code: 0 },
        "{}",
        String::from_utf8_lossy(&obs.stderr)
    );
}

#[test]
fn host_paths_are_not_visible() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let canary = t.scratch("host-canary.txt");
    std::fs::write(&canary, "canary").unwrap();
    let mut sb = t.sample_sandbox();
    let project = env!("CARGO_MANIFEST_DIR");
    let store = t.home();
    let obs = run(&mut sb, "test -x /usr/bin/bash && echo control-ok");
    assert_eq!(obs.stdout_text(), "control-ok\n", "positive control");
    for path in [
        canary.to_str().unwrap(),
        store.to_str().unwrap(),
        project,
        "/root",
        "/home",
        "/work",
        "/sys/fs/cgroup",
    ] {
        let obs = run(
            &mut sb,
            &format!("test -e '{path}' && echo visible || echo absent"),
        );
        assert_eq!(
            obs.stdout_text(),
            "absent\n",
            "{path} is visible inside the sandbox"
        );
    }
    let obs = run(&mut sb, "grep -c . /etc/passwd");
    assert_eq!(
        obs.stdout_text(),
        "2\n",
        "the sandbox has its own /etc/passwd"
    );
}

#[test]
fn fork_bomb_is_contained() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let mut sb = t.sample_sandbox();
    let limit = run(&mut sb, "ulimit -u");
    assert_eq!(limit.stdout_text(), "512\n");
    let started = std::time::Instant::now();
    let obs = sb
        .exec(
            "bomb() { bomb | bomb & }; bomb; sleep 3; echo survived",
            &ExecOptions::with_timeout_ms(20_000),
        )
        .unwrap();
    assert!(started.elapsed().as_secs() < 60);
    // Either the shell finished (fork failures) or the timeout ended it; the host is fine.
    assert!(
        matches!(obs.exit, ExitStatus::Code { .. } | ExitStatus::Timeout),
        "{:?}",
        obs.exit
    );
    let ok = run(&mut sb, "echo after");
    assert_eq!(ok.stdout_text(), "after\n");
    if arbor_tests::is_root() {
        // As real root the sandbox runs as a dedicated unprivileged uid, so
        // RLIMIT_NPROC applies, and the pids cgroup caps it as well.
        assert!(!sb.cgroups().is_empty() || !Path::new("/sys/fs/cgroup/pids").exists());
    }
}

/// The verifier's process boundary (`ExecOptions::peer`): the main action and
/// its peer talk over the channel at fd 3, share `/workspace` and `/tmp`, but
/// the peer sees neither the main action's read-only mounts, nor its
/// environment, nor its processes. Positive controls: the main action sees
/// its own mount, variable and process, and the peer sees its own.
#[test]
fn a_peer_shares_the_channel_and_files_but_nothing_else() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let checks_dir = t.scratch("checks");
    std::fs::create_dir_all(&checks_dir).unwrap();
    std::fs::write(checks_dir.join("secret.txt"), "hidden\n").unwrap();
    let checks = t.runtime.import(&checks_dir, None).unwrap();
    let mut sb = t.sample_sandbox();
    let mut opts = ExecOptions::with_timeout_ms(30_000);
    opts.mounts = vec![arbor_runtime::sandbox::ReadOnlyMount::new(&checks, "verifier").unwrap()];
    opts.env = vec![("MAIN_ONLY".into(), "main-secret".into())];
    // The peer reports what it can see over the channel, then leaves a file
    // in the shared /tmp and sleeps: it is stopped when the main action ends.
    let peer = "read -r go <&3; { \
        echo \"peer-secret=$(cat /verifier/secret.txt 2>&1 | head -c 60)\"; \
        echo \"peer-env=${MAIN_ONLY-unset}\"; \
        echo \"peer-sleepers=$(pgrep -c -f sleep-marker-main || echo 0)\"; \
        echo \"peer-own=$(ls /proc | grep -c '^[0-9]')\"; \
      } >&3; echo from-peer > /tmp/shared.txt; echo from-peer-ws > /workspace/peer.txt; \
      exec -a sleep-marker-peer sleep 60";
    opts.peer = Some(arbor_runtime::PeerCommand {
        command: peer.into(),
        env: vec![],
    });
    let main = "(exec -a sleep-marker-main sleep 30) & sleep 0.2; \
        echo main-sees-own=$(pgrep -c -f sleep-marker-main); echo go >&3; \
        head -n 4 <&3; sleep 0.3; cat /tmp/shared.txt /workspace/peer.txt; \
        echo main-secret=$(cat /verifier/secret.txt); echo main-env=$MAIN_ONLY; \
        echo main-sees-peer=$(pgrep -c -f sleep-marker-peer || echo 0)";
    let obs = sb.exec(main, &opts).unwrap();
    let out = obs.stdout_text();
    assert_eq!(
        obs.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&obs.stderr)
    );
    // Positive controls: the main action sees its own mount and variable.
    assert!(out.contains("main-secret=hidden"), "{out}");
    assert!(out.contains("main-env=main-secret"), "{out}");
    assert!(out.contains("main-sees-own=1"), "{out}");
    // The peer reached the main action over the channel and through the
    // shared /tmp and /workspace ...
    assert!(out.contains("from-peer\nfrom-peer-ws\n"), "{out}");
    // ... but saw neither the hidden mount nor the variable nor the main
    // action's processes; and the main action cannot see the peer's either.
    assert!(
        out.contains("peer-secret=cat: /verifier/secret.txt: No such file"),
        "{out}"
    );
    assert!(out.contains("peer-env=unset"), "{out}");
    assert!(out.contains("peer-sleepers=0"), "{out}");
    assert!(out.contains("main-sees-peer=0"), "{out}");
    let peer = obs.peer.expect("the peer's result");
    assert!(
        peer.stopped,
        "the sleeping peer is stopped when the main action ends"
    );
    assert!(obs.duration_us < 20_000_000, "{}", obs.duration_us);
    // A variable given for one action does not enter the session.
    assert!(!sb.session().env.contains_key("MAIN_ONLY"));
}
