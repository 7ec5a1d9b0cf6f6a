//! The WebAssembly backend with the Python guest (feature `wasm`). The
//! guest is built by `.ci/build-guests`; `ARBOR_PYTHON_GUEST` names another
//! build of it.
//!
//! (~620 lines: the WebAssembly backend's integration tests, sharing one
//! guest fixture.)

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbor_runtime::replay::Divergence;
use arbor_runtime::store::object::ObjectId;
use arbor_runtime::store::{OwnerMode, Store};
use arbor_runtime::wasm::{
    BootSpec, StepOutcome, WasmLimits, WasmOptions, WasmRuntime, WasmSandbox, WasmSnapshot,
};

/// `$ARBOR_PYTHON_GUEST`, else where `.ci/build-guests` puts the guest.
fn guest_path() -> PathBuf {
    std::env::var_os("ARBOR_PYTHON_GUEST")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/wasm-guests/wasm32-wasip1/release/arbor_python_guest.wasm")
        })
}

fn guest() -> &'static [u8] {
    static GUEST: OnceLock<Vec<u8>> = OnceLock::new();
    GUEST.get_or_init(|| {
        let p = guest_path();
        std::fs::read(&p).unwrap_or_else(|e| {
            panic!(
                "the Python guest is not built ({}: {e}); run .ci/build-guests \
                 or set ARBOR_PYTHON_GUEST",
                p.display()
            )
        })
    })
}

fn store_at(dir: &Path) -> Store {
    Store::open(
        dir,
        OwnerMode::for_current_user(arbor_runtime::DEFAULT_UID_BASE),
    )
    .unwrap()
}

fn runtime_with(dir: &Path, limits: WasmLimits) -> WasmRuntime {
    WasmRuntime::open(
        store_at(dir),
        WasmOptions {
            limits,
            ..WasmOptions::default()
        },
    )
    .unwrap()
}

fn runtime(dir: &Path) -> WasmRuntime {
    runtime_with(dir, WasmLimits::default())
}

fn python(rt: &WasmRuntime) -> WasmSnapshot {
    rt.import(guest(), &BootSpec::python()).unwrap()
}

fn run(sb: &mut WasmSandbox, code: &str) -> String {
    let r = sb.step(code).unwrap();
    assert_eq!(
        r.outcome,
        StepOutcome::Ok,
        "step {code:?} failed: {}",
        r.stderr_text()
    );
    r.stdout_text()
}

#[test]
fn python_session_keeps_state_across_steps_and_prints_values() {
    let d = tempfile::tempdir().unwrap();
    let rt = runtime(d.path());
    let root = python(&rt);
    let mut sb = root.open().unwrap();
    assert_eq!(run(&mut sb, "x = 6 * 7"), "");
    assert_eq!(run(&mut sb, "x"), "42\n");
    assert_eq!(run(&mut sb, "print('hi', x + 1)\nx * 2"), "hi 43\n84\n");
    let r = sb.step("1 / 0").unwrap();
    assert_eq!(r.outcome, StepOutcome::Exception);
    assert!(
        r.stderr_text().contains("ZeroDivisionError"),
        "{}",
        r.stderr_text()
    );
    // An exception does not end the session.
    assert_eq!(run(&mut sb, "x"), "42\n");
    // Notebook semantics: only a trailing expression is displayed, constants
    // included; definitions and `None` display nothing.
    assert_eq!(run(&mut sb, "1"), "1\n");
    assert_eq!(run(&mut sb, "'text'"), "'text'\n");
    assert_eq!(run(&mut sb, "y = 2; y"), "2\n");
    assert_eq!(run(&mut sb, "3\nx + y"), "44\n");
    assert_eq!(run(&mut sb, "def f():\n    return x - 1"), "");
    assert_eq!(run(&mut sb, "class C:\n    pass"), "");
    assert_eq!(run(&mut sb, "f(), C.__name__"), "(41, 'C')\n");
    assert_eq!(run(&mut sb, "None"), "");
    assert_eq!(run(&mut sb, "# only a comment"), "");
    assert_eq!(run(&mut sb, ""), "");
    // A failing trailing expression reports its own line.
    let r = sb.step("a = 1\nb = 2\nundefined_name").unwrap();
    assert_eq!(r.outcome, StepOutcome::Exception);
    assert!(r.stderr_text().contains("line 3"), "{}", r.stderr_text());
    assert_eq!(run(&mut sb, "a + b"), "3\n");
    let r = sb.step("def broken(:").unwrap();
    assert_eq!(r.outcome, StepOutcome::Exception);
    assert!(
        r.stderr_text().contains("SyntaxError"),
        "{}",
        r.stderr_text()
    );
}

#[test]
fn forks_are_independent_of_siblings_and_parent() {
    let d = tempfile::tempdir().unwrap();
    let rt = runtime(d.path());
    let root = python(&rt);
    let mut sb = root.open().unwrap();
    run(&mut sb, "shared = [1, 2, 3]");
    let parent = sb.snapshot().unwrap();
    let mut forks = parent.fork(3).unwrap();
    run(&mut forks[0], "secret = 'only in fork 0'\nshared.append(4)");
    assert_eq!(
        run(&mut forks[0], "secret, shared"),
        "('only in fork 0', [1, 2, 3, 4])\n"
    );
    for sibling in &mut forks[1..] {
        let r = sibling.step("secret").unwrap();
        assert_eq!(r.outcome, StepOutcome::Exception);
        assert!(r.stderr_text().contains("NameError"), "{}", r.stderr_text());
        assert_eq!(run(sibling, "shared"), "[1, 2, 3]\n");
    }
    let mut again = parent.open().unwrap();
    assert_eq!(
        run(&mut again, "'secret' in globals(), shared"),
        "(False, [1, 2, 3])\n"
    );
    // The live sandbox that took the parent snapshot is unaffected too.
    assert_eq!(run(&mut sb, "'secret' in globals()"), "False\n");
    // Snapshots of the forks differ; the parent's memory hash is unchanged.
    let s0 = forks[0].snapshot().unwrap();
    let s1 = forks[1].snapshot().unwrap();
    assert_ne!(s0.memory_hash(), s1.memory_hash());
    assert_eq!(
        rt.snapshot(parent.id()).unwrap().memory_hash(),
        parent.memory_hash()
    );
}

const CHILD_ENV: &str = "ARBOR_WASM_TEST_CHILD_STORE";
/// Where the child writes the id of the snapshot it took.
const CHILD_ID_FILE: &str = "child-snapshot-id";

/// Run by `restored_session_in_a_new_process_keeps_its_variables` in a
/// child process: build a session in the store `$ARBOR_WASM_TEST_CHILD_STORE`,
/// snapshot it, write the id to a file next to the store.
#[test]
#[ignore = "run in a child process by restored_session_in_a_new_process_keeps_its_variables"]
fn restore_child() {
    let dir = std::env::var_os(CHILD_ENV).expect("run by the parent test, which sets the store");
    let dir = Path::new(&dir);
    let rt = runtime(dir);
    let root = python(&rt);
    let mut sb = root.open().unwrap();
    run(
        &mut sb,
        "import json\ndata = {'k': [1, 2, 3]}\nclass Box:\n    def __init__(self, v): self.v = v\nb = Box(data)",
    );
    let s = sb.snapshot().unwrap();
    let id_file = dir
        .parent()
        .expect("the store has a parent")
        .join(CHILD_ID_FILE);
    std::fs::write(id_file, s.id().to_string()).unwrap();
}

#[test]
fn restored_session_in_a_new_process_keeps_its_variables() {
    let d = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "restore_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, d.path().join("store"))
        .output()
        .unwrap();
    let report = || {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    assert!(out.status.success(), "child failed:\n{}", report());
    let id = std::fs::read_to_string(d.path().join(CHILD_ID_FILE))
        .unwrap_or_else(|e| panic!("the child wrote no snapshot id ({e}):\n{}", report()));
    let id: ObjectId = id
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("bad snapshot id {id:?}: {e:?}"));
    // A fresh runtime in this process: the image comes from the store.
    let rt = runtime(&d.path().join("store"));
    let snap = rt.snapshot(&id).unwrap();
    let mut sb = snap.open().unwrap();
    assert_eq!(
        run(&mut sb, "b.v['k'].append(4)\njson.dumps(b.v)"),
        "'{\"k\": [1, 2, 3, 4]}'\n"
    );
    assert_eq!(
        sb.memory_bytes() as u64,
        snap.manifest().memory_pages * 65536
    );
    assert!(rt.store().fsck().unwrap().is_clean());
}

/// A chain of snapshots, one per step, using time, randomness, hashing and
/// the workspace: everything a guest could observe.
fn record_chain(rt: &WasmRuntime) -> WasmSnapshot {
    let root = python(rt);
    let mut sb = root.open().unwrap();
    let steps = [
        "import random, time, os\nrandom.seed()\nvals = [random.random() for _ in range(5)]",
        "t0 = time.time(); m0 = time.monotonic()\nnoise = os.urandom(16).hex()",
        "d = {str(i): i * i for i in range(1000)}\nh = hash('abc')",
        "with open('/workspace/out.txt', 'w') as f:\n    f.write(noise)",
        "vals, t0, m0, noise, h, sum(d.values()), open('out.txt').read()",
    ];
    let mut last = root;
    for code in steps {
        let r = sb.step(code).unwrap();
        assert_eq!(r.outcome, StepOutcome::Ok, "{code}: {}", r.stderr_text());
        last = sb.snapshot().unwrap();
    }
    last
}

#[test]
fn replay_is_bit_exact_ten_times_and_a_changed_step_diverges_there() {
    let d = tempfile::tempdir().unwrap();
    let rt = runtime(d.path());
    let tip = record_chain(&rt);
    let chain = rt.chain(&tip).unwrap();
    assert_eq!(chain.len(), 6);
    for i in 0..10 {
        let report = rt.replay(&tip).unwrap();
        assert!(report.identical, "run {i}: {report:?}");
        assert!(report.first_divergence().is_none(), "run {i}: {report:?}");
        assert_eq!(report.actions, 5);
        // One step per snapshot, the boot as step 0.
        assert_eq!(report.steps.len(), 6);
        for (step, recorded) in report.steps.iter().zip(&chain) {
            assert_eq!(&step.recorded, recorded.id());
            let replayed = rt.snapshot(&step.replayed).unwrap();
            assert_eq!(replayed.memory_hash(), recorded.memory_hash());
        }
    }
    // Negative control: step 3 changed.
    let report = rt
        .replay_with(&tip, |step, code| {
            (step == 3).then(|| code.replace("1000", "999"))
        })
        .unwrap();
    assert!(!report.identical);
    let first = report.first_divergence().unwrap();
    assert_eq!(first.step, 3, "{report:?}");
    assert!(
        first.divergences.iter().any(
            |d| matches!(d, Divergence::Memory { recorded, replayed } if recorded != replayed)
        ),
        "{first:?}"
    );
    // The JSON names each part.
    let json = serde_json::to_value(first).unwrap();
    assert!(
        json["divergences"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["part"] == "memory"),
        "{json}"
    );
}

#[test]
fn runaway_guests_are_stopped_and_the_runtime_keeps_working() {
    let d = tempfile::tempdir().unwrap();
    let rt = runtime_with(
        d.path(),
        WasmLimits {
            fuel_per_step: 2_000_000_000,
            memory_bytes: 256 << 20,
            output_bytes: 1000,
            ..WasmLimits::default()
        },
    );
    let root = python(&rt);

    let mut sb = root.open().unwrap();
    let r = sb.step("while True:\n    pass").unwrap();
    assert_eq!(r.outcome, StepOutcome::OutOfFuel);
    assert_eq!(sb.step("1").unwrap().outcome, StepOutcome::Ended);
    // A snapshot of an ended session records why, and so do its forks.
    let ended = sb.snapshot().unwrap();
    assert_eq!(ended.manifest().ended, Some(StepOutcome::OutOfFuel));
    assert_eq!(
        ended.open().unwrap().step("1").unwrap().outcome,
        StepOutcome::Ended
    );

    let mut sb = root.open().unwrap();
    let r = sb
        .step("hog = []\nwhile True:\n    hog.append(bytearray(1 << 20))")
        .unwrap();
    assert!(
        matches!(r.outcome, StepOutcome::MemoryLimit | StepOutcome::Exception),
        "{:?} {}",
        r.outcome,
        r.stderr_text()
    );
    assert!(sb.memory_bytes() <= 256 << 20);

    let mut sb = root.open().unwrap();
    let r = sb
        .step("import sys\nsys.setrecursionlimit(10**7)\ndef f(n): return f(n + 1)\nf(0)")
        .unwrap();
    assert!(
        matches!(r.outcome, StepOutcome::Trap { .. } | StepOutcome::Exception),
        "{:?}",
        r.outcome
    );

    let mut sb = root.open().unwrap();
    let r = sb.step("print('x' * 5000)").unwrap();
    assert_eq!(r.outcome, StepOutcome::Ok);
    assert_eq!(r.stdout.len(), 1000);
    assert_eq!(r.dropped[0], 4001);

    // The runtime and the store still work.
    let mut sb = root.open().unwrap();
    assert_eq!(run(&mut sb, "2 + 2"), "4\n");
    sb.snapshot().unwrap();
    assert!(rt.store().fsck().unwrap().is_clean());
}

#[test]
fn workspace_files_are_shared_with_the_host_and_forked() {
    let d = tempfile::tempdir().unwrap();
    let rt = runtime(d.path());
    let root = python(&rt);
    let mut sb = root.open().unwrap();
    sb.write_file("data/in.txt", b"3 4 5\n").unwrap();
    run(
        &mut sb,
        "nums = [int(x) for x in open('data/in.txt').read().split()]\nwith open('/workspace/sum.txt', 'w') as f:\n    f.write(str(sum(nums)))",
    );
    assert_eq!(sb.read_file("sum.txt").unwrap(), b"12");
    assert!(sb.write_file("../escape", b"x").is_err());
    let s = sb.snapshot().unwrap();
    assert_eq!(s.manifest().layers.len(), 1);
    let mut a = s.open().unwrap();
    let mut b = s.open().unwrap();
    run(&mut a, "open('sum.txt', 'w').write('changed')");
    assert_eq!(a.read_file("sum.txt").unwrap(), b"changed");
    assert_eq!(b.read_file("sum.txt").unwrap(), b"12");
    assert_eq!(
        run(&mut b, "open('sum.txt').read(), nums"),
        "('12', [3, 4, 5])\n"
    );
    // The guest cannot leave /workspace.
    let r = b.step("open('/etc/passwd').read()").unwrap();
    assert_eq!(r.outcome, StepOutcome::Exception);
}

#[test]
fn snapshot_cost_follows_dirty_pages() {
    let d = tempfile::tempdir().unwrap();
    let rt = runtime(d.path());
    let mut sb = session_with_random_blob(&rt, 16, "");
    let big = sb.snapshot().unwrap();
    let objects_before = count_objects(rt.store());
    run(&mut sb, "small = 1");
    let next = sb.snapshot().unwrap();
    let written = count_objects(rt.store()) - objects_before;
    // 16 MiB of random pages were stored once; a small step stores only a
    // few pages (plus the index, outputs and the record).
    assert!(written < 64, "a small step wrote {written} objects");
    assert_ne!(big.memory_hash(), next.memory_hash());
    assert!(next.manifest().memory_pages >= big.manifest().memory_pages);
    let mut objs = rt.referenced_objects(next.id()).unwrap();
    objs.retain(|o| !rt.store().has_object(o));
    assert!(objs.is_empty(), "referenced objects missing: {objs:?}");
}

/// A fresh Python session holding `mib` MiB of random bytes (pages that
/// cannot be deduplicated), then running `more`.
fn session_with_random_blob(rt: &WasmRuntime, mib: usize, more: &str) -> WasmSandbox {
    let mut sb = python(rt).open().unwrap();
    run(
        &mut sb,
        &format!("import os\nblob = [os.urandom(1 << 20) for _ in range({mib})]{more}"),
    );
    sb
}

fn count_objects(store: &Store) -> usize {
    walk(&store.root().join("objects"))
}

fn walk(p: &Path) -> usize {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    if e.path().is_dir() {
                        walk(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn a_chain_of_fifty_small_snapshots_forks_correctly_and_stores_only_dirty_pages() {
    let d = tempfile::tempdir().unwrap();
    let rt = runtime(d.path());
    let mut sb = session_with_random_blob(&rt, 8, "\nvals = []");
    let mut chain = vec![sb.snapshot().unwrap()];
    let mut most_segments = 0;
    for n in 0..50 {
        let before = count_objects(rt.store());
        run(&mut sb, &format!("vals.append({n} * 7)\nx{n} = {n}"));
        let s = sb.snapshot().unwrap();
        let written = count_objects(rt.store()) - before;
        assert!(written < 64, "snapshot {n} wrote {written} objects");
        most_segments = most_segments.max(s.image().unwrap().segment_count());
        chain.push(s);
    }
    // Small snapshots are overlays, not copies of the memory.
    assert!(most_segments > 1, "every snapshot was flattened");
    for (k, snap) in chain
        .iter()
        .enumerate()
        .step_by(7)
        .chain([(50, &chain[50])])
    {
        for _ in 0..2 {
            let mut f = snap.open().unwrap();
            assert_eq!(f.memory_hash(), snap.memory_hash());
            let want: Vec<usize> = (0..k).map(|n| n * 7).collect();
            assert_eq!(
                run(&mut f, "print(vals, len(blob), sum(len(b) for b in blob))"),
                format!("{want:?} 8 {}\n", 8 << 20)
            );
            assert_eq!(
                f.step(&format!("x{k}")).unwrap().outcome,
                StepOutcome::Exception
            );
        }
    }
    // The session itself continues on the last snapshot.
    assert_eq!(run(&mut sb, "print(len(vals), x49)"), "50 49\n");
    // A fresh runtime restores the tip from the store alone.
    let rt2 = runtime(d.path());
    let tip = rt2.snapshot(chain[50].id()).unwrap();
    assert_eq!(tip.memory_hash(), chain[50].memory_hash());
    let mut f = tip.open().unwrap();
    assert_eq!(run(&mut f, "print(vals[-1], x0)"), "343 0\n");
}

#[test]
fn workspace_directories_are_reused_only_when_empty() {
    let d = tempfile::tempdir().unwrap();
    let rt = runtime(d.path());
    let root = python(&rt);
    let mut a = root.open().unwrap();
    a.write_file("kept.txt", b"from a").unwrap();
    run(&mut a, "open('/workspace/guest.txt', 'w').write('g')");
    let a_dir = a.workspace().unwrap().to_path_buf();
    drop(a);
    // A used workspace is removed, never handed to another sandbox.
    assert!(!a_dir.exists());
    let b = root.open().unwrap();
    let b_dir = b.workspace().unwrap().to_path_buf();
    drop(b);
    // An empty one is kept and reused, and is still empty.
    assert!(b_dir.exists());
    let mut c = root.open().unwrap();
    assert_eq!(c.workspace().unwrap(), b_dir);
    assert_eq!(std::fs::read_dir(&b_dir).unwrap().count(), 0);
    assert_eq!(
        run(&mut c, "import os\nprint(os.listdir('/workspace'))"),
        "[]\n"
    );
    run(&mut c, "open('/workspace/c.txt', 'w').write('c')");
    let snap = c.snapshot().unwrap();
    drop(c);
    assert!(!b_dir.exists());
    // A snapshot with files gets a fresh, materialised directory.
    let mut e = snap.open().unwrap();
    assert_eq!(run(&mut e, "print(open('/workspace/c.txt').read())"), "c\n");
    drop(e);
    // Dropping the runtime removes the kept directories.
    let f = root.open().unwrap();
    let f_dir = f.workspace().unwrap().to_path_buf();
    drop(f);
    assert!(f_dir.exists());
    drop((root, snap, rt));
    assert!(!f_dir.exists());
}

/// Sessions live in the store's snapshot index beside native snapshots:
/// listed when taken, kept by gc while a tag reaches them or while a live
/// sandbox of this process stands on them, collected otherwise, and fsck
/// checks what they reference.
#[test]
fn sessions_are_listed_collected_and_checked_like_snapshots() {
    let d = tempfile::tempdir().unwrap();
    let store = store_at(d.path());
    let (kept, doomed) = {
        // Every runtime records the sessions its sandboxes stand on; this
        // one (and every handle of it) is gone before gc runs.
        let rt = runtime(d.path());
        let root = python(&rt);
        assert!(store.is_listed(root.id()) && store.is_wasm_snapshot(root.id()));
        store.set_tag("root", root.id()).unwrap();
        let mut sb = root.open().unwrap();
        run(&mut sb, "kept = list(range(1000))");
        let kept = *sb.snapshot().unwrap().id();
        run(&mut sb, "doomed = 'x' * 300000");
        let doomed = *sb.snapshot().unwrap().id();
        (kept, doomed)
    };
    assert!(store.snapshots().unwrap().contains(&doomed));
    let rt = runtime(d.path());
    let kept = rt.snapshot(&kept).unwrap();
    // A sandbox open on `kept` (untagged) makes it a root while it lives.
    let mut live = kept.open().unwrap();
    let report = store.gc().unwrap();
    assert!(report.snapshots_unlisted >= 1, "{report:?}");
    assert!(!store.is_listed(&doomed), "untagged, unused: collected");
    assert!(!store.has_object(&doomed));
    assert!(
        store.is_listed(kept.id()),
        "a live sandbox's base was collected"
    );
    // Positive control: its state is intact and it snapshots on top.
    assert_eq!(run(&mut live, "print(len(kept))"), "1000\n");
    let next = live.snapshot().unwrap();
    let fsck = store.fsck().unwrap();
    assert!(fsck.is_clean(), "{:?}", fsck.problems);
    // A fresh runtime restores it from the store alone.
    let rt2 = runtime(d.path());
    let mut again = rt2.snapshot(next.id()).unwrap().open().unwrap();
    assert_eq!(run(&mut again, "print(sum(kept))"), "499500\n");
    // A missing page is found by fsck.
    let page = next
        .page_hashes()
        .unwrap()
        .into_iter()
        .find(|h| store.has_object(h))
        .unwrap();
    std::fs::remove_file(store.object_path(&page)).unwrap();
    let fsck = store.fsck().unwrap();
    assert!(
        fsck.problems
            .iter()
            .any(|p| p.what.contains(&page.to_string())),
        "{:?}",
        fsck.problems
    );
}

/// The `Runtime` owns the WebAssembly backend: the same limits give the same
/// backend (a root remembered through one handle is known to the other),
/// other limits another one; `memo_root` makes a root once per key.
#[test]
fn the_runtime_owns_one_wasm_backend_per_limits_and_remembers_roots() {
    let d = tempfile::tempdir().unwrap();
    let rt = arbor_runtime::Runtime::open_at(d.path()).unwrap();
    let limits = WasmLimits::default();
    let a = rt.wasm(limits).unwrap();
    let b = rt.wasm(limits).unwrap();
    let made = std::cell::Cell::new(0);
    let make = |w: &WasmRuntime| {
        made.set(made.get() + 1);
        Ok::<_, arbor_runtime::wasm::WasmError>(python(w))
    };
    let first = a.memo_root("python", || make(&a)).unwrap();
    let again = b.memo_root("python", || make(&b)).unwrap();
    assert_eq!(made.get(), 1, "the shared backend made the root twice");
    assert_eq!(first.id(), again.id());
    let mut sb = again.open().unwrap();
    assert_eq!(run(&mut sb, "6 * 7"), "42\n");
    // Controls: another key is made anew, and so is the same key on the
    // backend of other limits (which is another backend).
    a.memo_root("other", || make(&a)).unwrap();
    assert_eq!(made.get(), 2);
    let other = rt
        .wasm(WasmLimits {
            fuel_per_step: limits.fuel_per_step / 2,
            ..limits
        })
        .unwrap();
    other.memo_root("python", || make(&other)).unwrap();
    assert_eq!(made.get(), 3);
}
