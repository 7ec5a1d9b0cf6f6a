//! Sandbox behaviour end to end: session state, output capping, limits,
//! background processes, the file API, snapshots and long chains.

use std::path::Path;

use arbor_runtime::ExecOptions;
use arbor_runtime::store::object::ExitStatus;

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

fn helper() -> &'static Path {
    Path::new(HELPER)
}

fn opts() -> ExecOptions {
    ExecOptions::default()
}

#[test]
fn import_fork_exec_snapshot_and_diff() {
    let t = arbor_tests::runtime(helper());
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let snap = t.runtime.import(&src, Some("base")).unwrap();
    let mut sb = snap.open().unwrap();
    let obs = sb
        .exec(
            "cat src/main.py; echo hi > new.txt; id -u; hostname; readlink main-link",
            &opts(),
        )
        .unwrap();
    assert_eq!(
        obs.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&obs.stderr)
    );
    assert_eq!(
        obs.stdout_text(),
        "print('hello from arbor')\n0\narbor\nsrc/main.py\n"
    );
    let s2 = sb.snapshot().unwrap();
    assert_eq!(s2.manifest().parent, Some(*snap.id()));
    assert_eq!(s2.manifest().observations.len(), 1);
    let d = t.runtime.diff(&snap, &s2).unwrap();
    assert_eq!(d.added, vec!["new.txt".to_owned()]);
    assert!(d.modified.is_empty() && d.deleted.is_empty());
    // The host directory is untouched.
    assert!(!src.join("new.txt").exists());
}

#[test]
fn session_state_survives_actions_robustly() {
    let t = arbor_tests::runtime(helper());
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let snap = t.runtime.import(&src, None).unwrap();
    let mut sb = snap.open().unwrap();
    // cd in a subshell does not move the session; a plain cd does, even with `exit 3` after it.
    sb.exec("(cd src/pkg); export SUB=1", &opts()).unwrap();
    assert_eq!(sb.session().cwd, "/workspace");
    let obs = sb
        .exec(
            "cd src; export MULTI=$'line1\\nline2'; unset TZ; exit 3",
            &opts(),
        )
        .unwrap();
    assert_eq!(obs.code(), Some(3));
    assert_eq!(sb.session().cwd, "/workspace/src");
    assert_eq!(
        sb.session().env.get("MULTI").map(String::as_str),
        Some("line1\nline2")
    );
    assert_eq!(sb.session().env.get("SUB").map(String::as_str), Some("1"));
    assert!(sb.session().unset.contains(&"TZ".to_owned()));
    let obs = sb
        .exec(
            "pwd; printf '%s|' \"$MULTI\"; echo \"${TZ-unset}\"",
            &opts(),
        )
        .unwrap();
    assert_eq!(obs.stdout_text(), "/workspace/src\nline1\nline2|unset\n");
    // The session is part of the snapshot: a fork of it starts there.
    let s2 = sb.snapshot().unwrap();
    let mut other = s2.open().unwrap();
    let obs = other.exec("pwd; echo \"$SUB\"", &opts()).unwrap();
    assert_eq!(obs.stdout_text(), "/workspace/src\n1\n");
}

#[test]
fn deterministic_environment_and_fresh_tmp() {
    let t = arbor_tests::runtime(helper());
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let snap = t.runtime.import(&src, None).unwrap();
    let mut sb = snap.open().unwrap();
    let obs = sb
        .exec("echo $TZ $LANG $PYTHONHASHSEED $SOURCE_DATE_EPOCH $HOME; echo $$; echo x > /tmp/scratch", &opts())
        .unwrap();
    assert_eq!(obs.stdout_text(), "UTC C.UTF-8 0 946684800 /tmp/home\n2\n");
    let obs = sb
        .exec("test -e /tmp/scratch && echo kept || echo fresh", &opts())
        .unwrap();
    assert_eq!(obs.stdout_text(), "fresh\n");
}

#[test]
fn output_is_capped_with_a_mark() {
    let t = arbor_tests::runtime_with(helper(), |o| o.limits.output_bytes = 1000);
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let mut sb = t.runtime.import(&src, None).unwrap().open().unwrap();
    let obs = sb
        .exec(
            "head -c 100000 /dev/zero | tr '\\0' a; echo small >&2",
            &opts(),
        )
        .unwrap();
    assert_eq!(obs.code(), Some(0));
    assert!(obs.stdout.starts_with(&[b'a'; 1000]));
    let text = obs.stdout_text();
    assert!(
        text.contains("[arbor: output truncated, 99000 bytes dropped]"),
        "{}",
        &text[1000..]
    );
    assert_eq!(obs.stderr, b"small\n");
}

#[test]
fn timeout_kills_the_whole_tree() {
    let t = arbor_tests::runtime(helper());
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let mut sb = t.runtime.import(&src, None).unwrap().open().unwrap();
    // Positive control: the same command with a short sleep completes.
    let ok = sb
        .exec(
            "sleep 0.1 & wait; echo done",
            &ExecOptions::with_timeout_ms(10_000),
        )
        .unwrap();
    assert_eq!(ok.stdout_text(), "done\n");
    let started = std::time::Instant::now();
    let obs = sb
        .exec(
            "(sleep 4321.5 &) ; sleep 4321.25 & sleep 4321.75",
            &ExecOptions::with_timeout_ms(500),
        )
        .unwrap();
    assert_eq!(obs.exit, ExitStatus::Timeout);
    assert!(started.elapsed().as_secs() < 10);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        arbor_tests::host_pids_matching("sleep 4321").is_empty(),
        "sleep processes survived the timeout"
    );
    // The sandbox keeps working after a timeout.
    assert_eq!(
        sb.exec("echo alive", &opts()).unwrap().stdout_text(),
        "alive\n"
    );
}

#[test]
fn background_processes_are_ended_and_listed_in_the_snapshot() {
    let t = arbor_tests::runtime(helper());
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let mut sb = t.runtime.import(&src, None).unwrap().open().unwrap();
    let obs = sb.exec("sleep 7777 & echo started", &opts()).unwrap();
    assert_eq!(obs.code(), Some(0));
    assert_eq!(obs.killed_background, vec!["sleep 7777".to_owned()]);
    assert!(arbor_tests::host_pids_matching("sleep 7777").is_empty());
    let snap = sb.snapshot().unwrap();
    assert_eq!(
        snap.manifest().killed_background,
        vec!["sleep 7777".to_owned()]
    );
}

#[test]
fn disk_filling_action_is_stopped_and_the_store_keeps_working() {
    let t = arbor_tests::runtime_with(helper(), |o| o.limits.upper_bytes = 8 << 20);
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let base = t.runtime.import(&src, None).unwrap();
    let mut sb = base.open().unwrap();
    // Positive control: a small write is fine.
    assert_eq!(
        sb.exec("head -c 100000 /dev/zero > small", &opts())
            .unwrap()
            .code(),
        Some(0)
    );
    let obs = sb
        .exec(
            "while true; do head -c 1048576 /dev/zero >> big; done",
            &ExecOptions::with_timeout_ms(30_000),
        )
        .unwrap();
    assert_eq!(obs.exit, ExitStatus::DiskLimit);
    // Another sandbox on the same store works and snapshots fine.
    let mut other = base.open().unwrap();
    other.exec("echo ok > ok.txt", &opts()).unwrap();
    let s = other.snapshot().unwrap();
    assert!(t.runtime.store().fsck().unwrap().is_clean());
    assert_eq!(
        t.runtime.diff(&base, &s).unwrap().added,
        vec!["ok.txt".to_owned()]
    );
}

#[test]
fn file_api_reads_writes_lists_and_deletes() {
    let t = arbor_tests::runtime(helper());
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let mut sb = t.runtime.import(&src, None).unwrap().open().unwrap();
    sb.write_file("new/dir/file.txt", b"content\n", 0o640)
        .unwrap();
    assert_eq!(sb.read_file("new/dir/file.txt").unwrap(), b"content\n");
    let obs = sb
        .exec(
            "stat -c '%a %u' new/dir/file.txt; cat new/dir/file.txt",
            &opts(),
        )
        .unwrap();
    assert_eq!(obs.stdout_text(), "640 0\ncontent\n");
    let names: Vec<String> = sb
        .list_dir("")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["README.md", "main-link", "new", "src"]);
    sb.delete_file("README.md").unwrap();
    assert!(sb.read_file("README.md").is_err());
    let err = sb.read_file("does/not/exist").unwrap_err().to_string();
    assert!(err.contains("does/not/exist"), "{err}");
    let snap = sb.snapshot().unwrap();
    assert_eq!(snap.manifest().observations.len(), 3);
}

#[test]
fn long_chain_of_300_layers_mounts_and_squashes() {
    let t = arbor_tests::runtime_with(helper(), |o| o.squash_after = 1000);
    let src = t.scratch("src");
    std::fs::create_dir_all(&src).unwrap();
    let mut snap = t.runtime.import(&src, None).unwrap();
    let mut sb = snap.open().unwrap();
    for i in 0..300 {
        sb.write_file(&format!("f{i:03}"), format!("{i}\n").as_bytes(), 0o644)
            .unwrap();
        snap = sb.snapshot().unwrap();
    }
    assert_eq!(snap.manifest().layers.len(), 301);
    drop(sb);
    let mut fresh = snap.open().unwrap();
    let obs = fresh.exec("ls | wc -l; cat f000 f299", &opts()).unwrap();
    assert_eq!(obs.stdout_text(), "300\n0\n299\n");

    // The same chain through a squashed layer cached under the snapshot id.
    let opts2 = {
        let mut o = arbor_tests::options(&t.home(), helper());
        o.squash_after = 100;
        o
    };
    let rt2 = arbor_runtime::Runtime::open(opts2).unwrap();
    let snap2 = rt2.snapshot(snap.id()).unwrap();
    let mut squashed = snap2.open().unwrap();
    if rt2.workspace_backend() == arbor_runtime::WorkspaceBackend::Overlay {
        assert!(
            rt2.store().squash_dir(snap.id()).is_dir(),
            "overlay mounts long chains through the squash cache"
        );
    }
    let obs = squashed.exec("ls | wc -l; cat f000 f299", &opts()).unwrap();
    assert_eq!(obs.stdout_text(), "300\n0\n299\n");
    squashed.exec("echo more > extra", &opts()).unwrap();
    let next = squashed.snapshot().unwrap();
    assert_eq!(
        next.manifest().layers.len(),
        302,
        "snapshot ids and chains do not change with squashing"
    );
}

#[test]
fn a_private_store_directory_still_works() {
    use std::os::unix::fs::PermissionsExt;
    let t = arbor_tests::runtime(helper());
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let snap = t.runtime.import(&src, None).unwrap();
    std::fs::set_permissions(t.home(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(t.dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    // Reopening the store repairs what the sandbox's root must traverse (search only).
    let rt = arbor_runtime::Runtime::open(arbor_tests::options(&t.home(), helper())).unwrap();
    let mut sb = rt.snapshot(snap.id()).unwrap().open().unwrap();
    assert_eq!(
        sb.exec("cat README.md", &opts()).unwrap().stdout_text(),
        "# sample\n"
    );
}

#[test]
fn the_async_adapter_runs_sandboxes_from_tokio() {
    let t = arbor_tests::runtime(helper());
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let snap = t.runtime.import(&src, None).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let outputs = rt.block_on(async {
        let mut handles = Vec::new();
        for i in 0..3 {
            let snap = snap.clone();
            handles.push(tokio::spawn(async move {
                let sb = arbor_runtime::asynchronous::AsyncSandbox::open(snap)
                    .await
                    .unwrap();
                sb.exec(format!("echo {i} > f; cat f"), ExecOptions::default())
                    .await
                    .unwrap();
                let s = sb.snapshot().await.unwrap();
                (i, s)
            }));
        }
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap());
        }
        out
    });
    for (i, snap) in outputs {
        let mut sb = snap.open().unwrap();
        assert_eq!(
            sb.exec("cat f", &opts()).unwrap().stdout_text(),
            format!("{i}\n")
        );
    }
}

/// A step whose changes equal an earlier layer's exactly (the same file
/// content written back) gives a chain holding one layer twice; overlayfs
/// refuses such a chain (ELOOP), so it is mounted from its squashed copy.
#[test]
fn a_chain_that_repeats_a_layer_still_mounts_and_reads_right() {
    let rt = arbor_tests::runtime(Path::new(HELPER));
    let src = rt.scratch("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("keep.txt"), "k\n").unwrap();
    let base = rt.runtime.import(&src, None).unwrap();
    let mut sb = base.open().unwrap();
    sb.write_file("a.txt", b"X\n", 0o644).unwrap();
    let s1 = sb.snapshot().unwrap();
    sb.write_file("a.txt", b"Y\n", 0o644).unwrap();
    sb.snapshot().unwrap();
    sb.write_file("a.txt", b"X\n", 0o644).unwrap();
    let s3 = sb.snapshot().unwrap();
    let layers = &s3.manifest().layers;
    assert_eq!(
        layers.last(),
        s1.manifest().layers.last(),
        "the third step's layer is the first step's: {layers:?}"
    );
    let obs = sb.exec("cat a.txt keep.txt", &opts()).unwrap();
    assert_eq!(obs.stdout_text(), "X\nk\n");
    let mut again = s3.open().unwrap();
    let obs = again.exec("cat a.txt && echo Z > a.txt", &opts()).unwrap();
    assert_eq!(obs.stdout_text(), "X\n");
    let s4 = again.snapshot().unwrap();
    let obs = s4.open().unwrap().exec("cat a.txt", &opts()).unwrap();
    assert_eq!(obs.stdout_text(), "Z\n");
}

#[test]
fn streamed_output_arrives_while_the_action_runs_and_joins_to_the_observation() {
    use arbor_runtime::OutputStream;
    use std::time::Instant;
    let t = arbor_tests::runtime(helper());
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let snap = t.runtime.import(&src, None).unwrap();
    let cmd = "echo one; echo err >&2; sleep 0.5; echo two";
    let start = Instant::now();
    let mut chunks: Vec<(OutputStream, Vec<u8>, f64)> = Vec::new();
    let mut streamed = snap.open().unwrap();
    let obs = streamed
        .exec_streaming(cmd, &opts(), &mut |s, d| {
            chunks.push((s, d.to_vec(), start.elapsed().as_secs_f64()));
        })
        .unwrap();
    let end = start.elapsed().as_secs_f64();
    // The first chunk came before the action ended (it sleeps half a second after it).
    assert_eq!(chunks[0].1, b"one\n");
    assert!(
        chunks[0].2 + 0.3 < end,
        "first chunk at {} of {end}",
        chunks[0].2
    );
    let join = |k: OutputStream| -> Vec<u8> {
        chunks
            .iter()
            .filter(|c| c.0 == k)
            .flat_map(|c| c.1.clone())
            .collect()
    };
    assert_eq!(join(OutputStream::Stdout), obs.stdout);
    assert_eq!(join(OutputStream::Stderr), obs.stderr);
    assert_eq!(obs.stdout, b"one\ntwo\n");
    // The same action without streaming records the same step.
    let mut plain = snap.open().unwrap();
    let again = plain.exec(cmd, &opts()).unwrap();
    assert_eq!(again.digest, obs.digest);
}

#[test]
fn large_files_move_up_to_the_file_api_limit_and_past_it_fail_cleanly() {
    use arbor_runtime::sandbox::protocol::MAX_FILE;
    let t = arbor_tests::runtime(helper());
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let snap = t.runtime.import(&src, None).unwrap();
    let mut sb = snap.open().unwrap();
    // 24 MiB of random bytes: as JSON numbers this frame passed the 64 MiB
    // limit and the read hung; as base64 it fits.
    let obs = sb
        .exec(
            "head -c 25165824 /dev/urandom > big.bin && sha256sum big.bin",
            &opts(),
        )
        .unwrap();
    assert_eq!(
        obs.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&obs.stderr)
    );
    let data = sb.read_file("big.bin").unwrap();
    assert_eq!(data.len(), 25_165_824);
    let written = vec![7u8; 24 << 20];
    sb.write_file("copy.bin", &written, 0o644).unwrap();
    assert_eq!(sb.read_file("copy.bin").unwrap(), written);
    // Past the limit: a clear error on both sides, and the sandbox goes on.
    sb.exec(
        &format!("head -c {} /dev/zero > huge.bin", MAX_FILE + 1),
        &opts(),
    )
    .unwrap();
    let e = sb.read_file("huge.bin").unwrap_err().to_string();
    assert!(e.contains("moves at most"), "{e}");
    let e = sb
        .write_file("huge2.bin", &vec![0u8; MAX_FILE + 1], 0o644)
        .unwrap_err()
        .to_string();
    assert!(e.contains("moves at most"), "{e}");
    let after = sb.exec("echo still here", &opts()).unwrap();
    assert_eq!(after.stdout_text(), "still here\n");
}

/// Files and directories the agent made unreadable to their owner (mode
/// 000, a directory with only `x` or none, one with only `w`) are
/// snapshotted, forked and checked out like any other, in rootless mode too,
/// where the runtime has no DAC override over them (they are the caller's
/// own files) and must not fail on them. The modes stay as the agent left
/// them: in the fork (control: root there still reads the files) and in the
/// checkout.
#[test]
fn files_the_agent_made_unreadable_are_still_snapshotted() {
    use std::os::unix::fs::PermissionsExt;
    let t = arbor_tests::runtime(helper());
    let src = t.scratch("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("kept.txt"), "kept\n").unwrap();
    let snap = t.runtime.import(&src, None).unwrap();
    let mut sb = snap.open().unwrap();
    let run = |sb: &mut arbor_runtime::Sandbox, cmd: &str| {
        let obs = sb.exec(cmd, &opts()).unwrap();
        assert_eq!(
            obs.code(),
            Some(0),
            "{cmd}: {}",
            String::from_utf8_lossy(&obs.stderr)
        );
        obs.stdout_text()
    };
    const MODES: &str = "stat -c '%n %a' . d d/e d/e/f g h kept.txt";
    run(
        &mut sb,
        "mkdir -p d/e h && echo deep > d/e/f && echo top > g && \
         chmod 000 d/e/f g && chmod 100 d/e && chmod 000 d && chmod 200 h",
    );
    let want = ". 755\nd 0\nd/e 100\nd/e/f 0\ng 0\nh 200\nkept.txt 644\n";
    assert_eq!(run(&mut sb, MODES), want);
    let child = sb.snapshot().unwrap();
    // The sandbox goes on on the new snapshot, and a second seal works too.
    run(&mut sb, "echo later > /tmp/x");
    let again = sb.snapshot().unwrap();
    drop(sb);
    let mut fork = child.fork(1).unwrap().pop().unwrap();
    assert_eq!(run(&mut fork, MODES), want);
    assert_eq!(run(&mut fork, "cat g d/e/f kept.txt"), "top\ndeep\nkept\n");
    drop(fork);
    assert_eq!(again.manifest().layers, child.manifest().layers);

    let out = t.scratch("out");
    t.runtime.checkout(&child, &out).unwrap();
    let mode = |rel: &str| {
        std::fs::symlink_metadata(out.join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(
        [mode("d"), mode("h"), mode("g"), mode("kept.txt")],
        [0, 0o200, 0, 0o644]
    );
    for (dir, m) in [("d", 0o755), ("d/e", 0o755)] {
        std::fs::set_permissions(out.join(dir), std::fs::Permissions::from_mode(m)).unwrap();
    }
    assert_eq!(mode("d/e/f"), 0);
    for f in ["g", "d/e/f"] {
        std::fs::set_permissions(out.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(out.join("d/e/f")).unwrap(),
        "deep\n"
    );
    assert_eq!(std::fs::read_to_string(out.join("g")).unwrap(), "top\n");
    let f = t.runtime.store().fsck().unwrap();
    assert!(f.is_clean(), "{:?}", f.problems);
}

/// Group commit under concurrency: 8 sandboxes snapshot at once, round
/// after round, sharing some objects and layers (the even ones do exactly
/// the same thing, so they race to install the same layer) and not others.
/// Every snapshot is listed with all it refers to, each chain reads back
/// its own files, `fsck` is clean and no temp file is left.
#[test]
fn eight_concurrent_snapshotters_share_objects_and_leave_a_clean_store() {
    let t = arbor_tests::runtime(helper());
    let src = t.scratch("src");
    arbor_tests::sample_workspace(&src);
    let base = t.runtime.import(&src, None).unwrap();
    let rounds = 4;
    let finals: Vec<(usize, arbor_runtime::Snapshot)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let base = &base;
                s.spawn(move || {
                    let mut sb = base.open().unwrap();
                    let mut last = None;
                    for r in 0..rounds {
                        let who = if i % 2 == 0 { "even".to_owned() } else { format!("odd-{i}") };
                        let obs = sb
                            .exec(
                                &format!("echo shared {r} > shared-{r}.txt && echo {who} {r} > mine-{r}.txt && cat mine-{r}.txt"),
                                &opts(),
                            )
                            .unwrap();
                        assert_eq!(obs.code(), Some(0), "{}", String::from_utf8_lossy(&obs.stderr));
                        last = Some(sb.snapshot().unwrap());
                    }
                    (i, last.unwrap())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let store = t.runtime.store();
    let listed = store.snapshots().unwrap();
    for (i, snap) in &finals {
        let chain = t.runtime.log(snap).unwrap();
        assert_eq!(chain.len(), rounds + 1, "thread {i}");
        for s in &chain {
            assert!(
                listed.contains(s.id()),
                "thread {i}: {} is not listed",
                s.id()
            );
        }
        let mut sb = snap.open().unwrap();
        let who = if i % 2 == 0 {
            "even".to_owned()
        } else {
            format!("odd-{i}")
        };
        for r in 0..rounds {
            assert_eq!(
                sb.read_file(&format!("shared-{r}.txt")).unwrap(),
                format!("shared {r}\n").into_bytes()
            );
            assert_eq!(
                sb.read_file(&format!("mine-{r}.txt")).unwrap(),
                format!("{who} {r}\n").into_bytes()
            );
        }
    }
    // The even sandboxes sealed the same changes: one layer, shared.
    let even: std::collections::BTreeSet<_> = finals
        .iter()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, s)| s.manifest().layers.clone())
        .collect();
    assert_eq!(even.len(), 1, "{even:?}");
    let report = store.fsck().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let left: Vec<_> = std::fs::read_dir(store.tmp_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left in tmp/: {left:?}");
}
