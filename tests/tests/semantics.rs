//! Filesystem semantics of the overlay backend, the copy backend and a plain
//! directory, on the same operations. Every difference is asserted here and
//! documented in the README ("Overlay vs copy vs plain directory"); a new,
//! undocumented difference fails this test.

use std::collections::BTreeMap;
use std::path::Path;

use arbor_runtime::{ExecOptions, WorkspaceBackend, WorkspaceChoice};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

/// Python run inside the sandbox, in the current directory: one line per
/// operation, `name: result`.
const SCRIPT: &str = r#"
import os, errno
def op(name, f):
    try:
        r = f()
        print(f"{name}: ok{'' if r is None else ' ' + str(r)}")
    except OSError as e:
        print(f"{name}: {errno.errorcode.get(e.errno, e.errno)}")
op("rename lower file", lambda: os.rename("file.txt", "file-renamed.txt"))
op("rename lower dir", lambda: os.rename("dir", "dir-renamed"))
op("rename new dir", lambda: (os.mkdir("fresh"), os.rename("fresh", "fresh2"))[1])
op("mv lower dir (coreutils)", lambda: os.system("mv dir2 dir2-moved") >> 8 or None)
op("hard link lower file", lambda: os.link("link-src.txt", "hard.txt"))
def nlink():
    with open("hard.txt", "a") as f: f.write("more\n")
    return (os.stat("link-src.txt").st_nlink, open("link-src.txt").read().count("more"))
op("hard link shares content", nlink)
op("chmod lower file", lambda: (os.chmod("mode.txt", 0o600), oct(os.stat("mode.txt").st_mode & 0o777))[1])
op("chown lower file to 1000", lambda: (os.chown("own.txt", 1000, 1000), os.stat("own.txt").st_uid)[1])
def sparse():
    with open("sparse.bin", "wb") as f:
        f.truncate(1 << 30); f.seek((1 << 30) - 1); f.write(b"x")
    st = os.stat("sparse.bin")
    return (st.st_size, st.st_blocks * 512 < (1 << 20))
op("sparse 1 GiB file", sparse)
def large():
    with open("large.bin", "wb") as f:
        for _ in range(32): f.write(b"y" * (1 << 20))
    return os.stat("large.bin").st_size
op("32 MiB file", large)
op("symlink", lambda: (os.symlink("file-renamed.txt", "ln"), os.readlink("ln"))[1])
op("delete lower file", lambda: os.unlink("del.txt"))
op("rmdir lower dir after emptying", lambda: (os.unlink("gone/x"), os.rmdir("gone"))[1])
op("recreate deleted dir", lambda: (os.mkdir("gone"), os.listdir("gone"))[1])
def ino():
    a = os.stat("ino.txt").st_ino
    os.chmod("ino.txt", 0o640)
    return a == os.stat("ino.txt").st_ino
op("inode number stable across copy-up", ino)
"#;

fn make_source(dir: &Path) {
    for (name, content) in [
        ("file.txt", "f\n"),
        ("dir/inner.txt", "i\n"),
        ("dir2/inner.txt", "i\n"),
        ("link-src.txt", "l\n"),
        ("mode.txt", "m\n"),
        ("own.txt", "o\n"),
        ("del.txt", "d\n"),
        ("gone/x", "x\n"),
        ("ino.txt", "n\n"),
    ] {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
}

fn results(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn run(backend: WorkspaceBackend, plain: bool) -> BTreeMap<String, String> {
    let t = arbor_tests::runtime_with(Path::new(HELPER), |o| {
        o.workspace = WorkspaceChoice::Force(backend)
    });
    let src = t.scratch("src");
    make_source(&src);
    let mut sb = t.runtime.import(&src, None).unwrap().open().unwrap();
    sb.write_file("semantics.py", SCRIPT.as_bytes(), 0o644)
        .unwrap();
    let cmd = if plain {
        // A plain directory: a copy on the sandbox's own tmpfs.
        "mkdir /tmp/plain && cp -a /workspace/. /tmp/plain/ && cd /tmp/plain && python3 semantics.py"
    } else {
        "python3 semantics.py"
    };
    let obs = sb.exec(cmd, &ExecOptions::default()).unwrap();
    assert_eq!(
        obs.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&obs.stderr)
    );
    results(&obs.stdout_text())
}

#[test]
fn overlay_copy_and_plain_directory_differ_only_as_documented() {
    let overlay = run(WorkspaceBackend::Overlay, false);
    let copy = run(WorkspaceBackend::Copy, false);
    let plain = run(WorkspaceBackend::Copy, true);
    assert_eq!(plain.len(), 15, "{plain:?}");
    let mut table = String::from(
        "| operation | plain directory | copy backend | overlay backend |\n|---|---|---|---|\n",
    );
    for (op, p) in &plain {
        table.push_str(&format!(
            "| {op} | {p} | {} | {} |\n",
            copy[op], overlay[op]
        ));
    }
    println!("{table}");
    // The copy backend is a plain directory.
    assert_eq!(copy, plain);
    // Overlay differs exactly here (documented in the README).
    let mut expected = plain.clone();
    expected.insert("rename lower dir".into(), "EXDEV".into());
    let differing: Vec<&String> = overlay
        .keys()
        .filter(|k| overlay[*k] != expected[*k])
        .collect();
    assert!(
        differing.is_empty(),
        "undocumented overlay differences: {differing:?}\n{table}"
    );
}
