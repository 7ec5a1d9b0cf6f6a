//! Symlink escapes (design invariant 6 and 7): links planted by the agent —
//! `x -> /etc/passwd`, `up -> ../../..`, and a lower layer holding
//! `d -> /etc` with a directory `d/passwd` above it — pushed through the file
//! API, `checkout`, squash and `diff`: no host file is read or written.

use std::path::Path;

use arbor_runtime::ExecOptions;

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

fn passwd_digest() -> Vec<u8> {
    std::fs::read("/etc/passwd").unwrap()
}

#[test]
fn planted_symlinks_never_reach_host_paths() {
    let before = passwd_digest();
    let t = arbor_tests::runtime_with(Path::new(HELPER), |o| o.squash_after = 1);
    let src = t.scratch("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("plain.txt"), "inside\n").unwrap();
    let base = t.runtime.import(&src, None).unwrap();
    let mut sb = base.open().unwrap();
    let obs = sb
        .exec(
            "ln -s /etc/passwd x && ln -s ../../.. up && ln -s /etc d",
            &ExecOptions::default(),
        )
        .unwrap();
    assert_eq!(obs.code(), Some(0));
    let with_links = sb.snapshot().unwrap();

    // Positive control: the file API reads ordinary files.
    assert_eq!(sb.read_file("plain.txt").unwrap(), b"inside\n");
    // Reads and writes through the links fail and touch nothing on the host.
    assert!(sb.read_file("x").is_err(), "read through x -> /etc/passwd");
    assert!(
        sb.read_file("up/etc/passwd").is_err(),
        "read through up -> ../../.."
    );
    assert!(sb.read_file("d/passwd").is_err(), "read through d -> /etc");
    assert!(sb.write_file("x", b"pwned\n", 0o644).is_err());
    assert!(sb.write_file("d/passwd", b"pwned\n", 0o644).is_err());
    assert!(
        sb.write_file("up/tmp/arbor-escape", b"pwned\n", 0o644)
            .is_err()
    );
    assert!(!Path::new("/tmp/arbor-escape").exists());

    // Replace the lower-layer symlink `d` by a directory `d/passwd` above it.
    let obs = sb
        .exec(
            "rm d && mkdir -p d/passwd && echo decoy > d/passwd/file",
            &ExecOptions::default(),
        )
        .unwrap();
    assert_eq!(obs.code(), Some(0));
    let top = sb.snapshot().unwrap();
    assert_eq!(top.manifest().layers.len(), 3);

    // checkout writes links verbatim and a real directory d/passwd.
    let out = t.scratch("checkout");
    t.runtime.checkout(&top, &out).unwrap();
    assert_eq!(
        std::fs::read_link(out.join("x")).unwrap(),
        Path::new("/etc/passwd")
    );
    assert!(std::fs::symlink_metadata(out.join("d")).unwrap().is_dir());
    assert_eq!(
        std::fs::read_to_string(out.join("d/passwd/file")).unwrap(),
        "decoy\n"
    );

    // diff names paths only.
    let d = t.runtime.diff(&with_links, &top).unwrap();
    assert!(
        d.added.contains(&"d/passwd".to_owned()) || d.modified.contains(&"d".to_owned()),
        "{d:?}"
    );

    // Squash (squash_after = 1): a fresh sandbox mounts the squashed chain and sees the same.
    drop(sb);
    let mut again = top.open().unwrap();
    let obs = again
        .exec(
            "readlink x; cat d/passwd/file; test -L d || echo dir",
            &ExecOptions::default(),
        )
        .unwrap();
    assert_eq!(obs.stdout_text(), "/etc/passwd\ndecoy\ndir\n");
    let squash = t.runtime.store().squash_dir(top.id());
    if t.runtime.workspace_backend() == arbor_runtime::WorkspaceBackend::Overlay {
        assert!(squash.is_dir());
        assert_eq!(
            std::fs::read_link(squash.join("x")).unwrap(),
            Path::new("/etc/passwd")
        );
    }

    assert_eq!(passwd_digest(), before, "/etc/passwd on the host changed");
    assert!(t.runtime.store().fsck().unwrap().is_clean());
}
