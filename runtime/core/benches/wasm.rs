//! The WebAssembly backend with the Python guest: fork, snapshot, restore
//! and step latency versus guest memory size, beside rebuilding the same
//! state by re-running the prefix of steps and the native backend's fork.
//!
//! Run: `.ci/build-guests && cargo bench -p arbor-runtime --features wasm
//! --bench wasm`. Quick mode (`ARBOR_BENCH_QUICK=1`, or criterion's
//! `--test`, or `cargo test --benches`): 16 and 64 MiB only, few samples,
//! well under a minute. `ARBOR_PYTHON_GUEST` names another build of the
//! guest; `ARBOR_WASM_NO_PAGEMAP=1` finds dirty pages by hashing every page.
//!
//! For each size N (16, 64, 256 MiB of random bytes held by a Python list,
//! so N MiB of guest memory is touched), on the snapshot S taken right after
//! allocating them:
//! - `wasm_fork_step/N`: `S.open()` + `step("1")`, timed until the step
//!   returns (the sandbox is dropped untimed; its memory is reset and
//!   reused by the next fork, as in a rollout that forks one branch point
//!   again and again);
//! - `wasm_fork_step_cold/N`: the same with that reuse turned off, so
//!   every fork maps the image afresh and its first step takes the
//!   copy-on-write faults;
//! - `wasm_fork_drop/N`: dropping a fork after its first step (where the
//!   reuse is paid: the pages it wrote are copied back from the image);
//! - `wasm_fork/N`: `S.open()` alone;
//! - `wasm_step/N`: `step("x = 1")` on a live fork;
//! - `wasm_snapshot/N`: `snapshot()` after one small step (pages dirtied
//!   by that step are hashed and stored);
//! - `wasm_restore/N`: a fresh runtime loads S from the store (every page
//!   read and verified, split over the cores), opens it and runs
//!   `step("1")`;
//! - `wasm_rebuild/N` (printed, not a criterion benchmark: one run takes
//!   seconds): the alternative to forking, open the root and re-run the
//!   allocation step; the median of 3 runs (1 in quick mode).
//!
//! Printed beside them (not criterion benchmarks): `fork breakdown/N`,
//! wall time, thread CPU time and minor page faults of `open()`, the first
//! and second `step("1")` and a step after a snapshot remapped the dirty
//! pages; `restore breakdown/N`, the same for the parts of a restore.
//!
//! `native_fork_true`: the native backend's `Snapshot::open()` +
//! `exec("true")` on a small imported directory (needs user namespaces;
//! skipped with a message where they are unavailable).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arbor_runtime::store::{OwnerMode, Store};
use arbor_runtime::wasm::{
    BootSpec, StepOutcome, WasmOptions, WasmRuntime, WasmSandbox, WasmSnapshot,
};
use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};

fn guest() -> Vec<u8> {
    let p = std::env::var_os("ARBOR_PYTHON_GUEST")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/wasm-guests/wasm32-wasip1/release/arbor_python_guest.wasm")
        });
    std::fs::read(&p).unwrap_or_else(|e| {
        panic!(
            "the Python guest is not built ({}: {e}); run .ci/build-guests \
             or set ARBOR_PYTHON_GUEST",
            p.display()
        )
    })
}

/// Quick mode: `ARBOR_BENCH_QUICK=1`, or criterion runs the benches as
/// tests (`--test`, or no `--bench` as under `cargo test --benches`).
fn quick_mode() -> bool {
    if std::env::var("ARBOR_BENCH_QUICK").is_ok_and(|v| v == "1") {
        return true;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    args.iter().any(|a| a == "--test") || !args.iter().any(|a| a == "--bench")
}

/// Criterion settings of a group: (samples, warm-up, measurement).
fn timing() -> (usize, Duration, Duration) {
    if quick_mode() {
        (10, Duration::from_millis(100), Duration::from_millis(500))
    } else {
        (20, Duration::from_millis(500), Duration::from_secs(3))
    }
}

fn open_runtime(dir: &Path) -> WasmRuntime {
    let store = Store::open(
        dir,
        OwnerMode::for_current_user(arbor_runtime::DEFAULT_UID_BASE),
    )
    .expect("open store");
    WasmRuntime::open(store, WasmOptions::default()).expect("open wasm runtime")
}

fn ok(sb: &mut WasmSandbox, code: &str) {
    let r = sb.step(code).expect("step");
    assert_eq!(r.outcome, StepOutcome::Ok, "{code}: {}", r.stderr_text());
}

fn alloc_step(mib: usize) -> String {
    format!("import os\nblob = [os.urandom(1 << 20) for _ in range({mib})]")
}

struct Fixture {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    rt: WasmRuntime,
    snap: WasmSnapshot,
}

/// Rebuild the state instead of forking it: open the root, re-run the
/// allocation step.
fn rebuild_once(root: &WasmSnapshot, mib: usize) -> (Duration, WasmSandbox) {
    let t = Instant::now();
    let mut sb = root.open().expect("open root");
    ok(&mut sb, &alloc_step(mib));
    (t.elapsed(), sb)
}

fn fixture(mib: usize, wasm: &[u8]) -> Fixture {
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path().to_path_buf();
    let rt = open_runtime(&dir);
    let t = Instant::now();
    let root = rt.import(wasm, &BootSpec::python()).expect("import");
    eprintln!(
        "import (compile cache warm after the first): {:?}",
        t.elapsed()
    );
    let (first, mut sb) = rebuild_once(&root, mib);
    let mut rebuild = vec![first];
    if !quick_mode() {
        rebuild.extend((0..2).map(|_| rebuild_once(&root, mib).0));
    }
    rebuild.sort();
    eprintln!(
        "wasm_rebuild/{mib}: median {:?} of {} runs {rebuild:?}",
        rebuild[rebuild.len() / 2],
        rebuild.len()
    );
    let t = Instant::now();
    let snap = sb.snapshot().expect("snapshot");
    eprintln!(
        "first snapshot of {mib} MiB: {:?} ({} pages, {} MiB of linear memory)",
        t.elapsed(),
        snap.manifest().memory_pages,
        snap.manifest().memory_pages * 64 / 1024
    );
    // How the image of a continued session grows: one small step, then a
    // snapshot, a few times (the bench's `wasm_snapshot` does the same).
    let mut sb = snap.open().expect("open");
    let mut segments = Vec::new();
    for n in 0..4 {
        ok(&mut sb, &format!("x = {n}"));
        let s = sb.snapshot().expect("snapshot");
        segments.push(s.image().expect("image").segment_count());
    }
    eprintln!("image segments after each of 4 small steps + snapshots: {segments:?}");
    Fixture {
        _dir: d,
        dir,
        rt,
        snap,
    }
}

/// Minor page faults of this thread so far.
fn minflt() -> i64 {
    // SAFETY: getrusage writes a plain struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut u);
        u.ru_minflt
    }
}

/// CPU time this thread has used (unlike wall time, not inflated when
/// other processes share the cores).
fn cpu_time() -> Duration {
    // SAFETY: clock_gettime writes a plain struct it is given.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts
    };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Wall time, thread CPU time and minor page faults of `f`.
fn measure<T>(f: impl FnOnce() -> T) -> (T, [i64; 3]) {
    let (f0, c0, t) = (minflt(), cpu_time(), Instant::now());
    let out = f();
    let wall = t.elapsed().as_nanos() as i64;
    let cpu = (cpu_time() - c0).as_nanos() as i64;
    (out, [wall, cpu, minflt() - f0])
}

/// Where a fork's time until its first step returns goes: `open()`, the
/// first `step("1")`, a second `step("1")`, and a `step("1")` on the same
/// instance right after a snapshot remapped its dirty pages (so it takes
/// the copy-on-write faults again, but not on a fresh instance), each with
/// the minor page faults it took (medians of 100 forks).
fn fork_breakdown(snap: &WasmSnapshot, mib: usize) {
    let mut rows: Vec<[[i64; 3]; 4]> = Vec::new();
    for _ in 0..100 {
        let (mut sb, open) = measure(|| snap.open().expect("fork"));
        let ((), first) = measure(|| ok(&mut sb, "1"));
        let ((), second) = measure(|| ok(&mut sb, "1"));
        sb.snapshot().expect("snapshot");
        let ((), remapped) = measure(|| ok(&mut sb, "1"));
        rows.push([open, first, second, remapped]);
    }
    let median = |k: usize| median_cell(&rows, k, 1e3, "µs", 1);
    eprintln!(
        "fork breakdown/{mib} (medians of 100): open: {}; first step: {}; second step: {}; \
         step after a snapshot remapped the dirty pages: {}",
        median(0),
        median(1),
        median(2),
        median(3)
    );
}

/// Column `k` of `rows` (nanoseconds wall, nanoseconds CPU, page faults) as
/// medians: the times divided by `scale` and shown in `unit`.
fn median_cell(rows: &[[[i64; 3]; 4]], k: usize, scale: f64, unit: &str, digits: usize) -> String {
    let m = |j: usize| {
        let mut v: Vec<i64> = rows.iter().map(|r| r[k][j]).collect();
        v.sort_unstable();
        v[v.len() / 2]
    };
    format!(
        "{:.digits$} {unit} wall, {:.digits$} {unit} cpu, {} faults",
        m(0) as f64 / scale,
        m(1) as f64 / scale,
        m(2)
    )
}

/// Where a restore's time goes: loading the snapshot record, loading the
/// memory image (every page read and verified), opening (the first open
/// in a runtime also loads the compiled guest from the cache) and the
/// first step (medians of 5).
fn restore_breakdown(dir: &Path, snap: &WasmSnapshot, mib: usize) {
    let mut rows: Vec<[[i64; 3]; 4]> = Vec::new();
    for _ in 0..5 {
        let rt = open_runtime(dir);
        let (s, record) = measure(|| rt.snapshot(snap.id()).expect("load"));
        let (_, image) = measure(|| s.image().expect("image"));
        let (mut sb, open) = measure(|| s.open().expect("open"));
        let ((), step) = measure(|| ok(&mut sb, "1"));
        rows.push([record, image, open, step]);
    }
    let median = |k: usize| median_cell(&rows, k, 1e6, "ms", 2);
    eprintln!(
        "restore breakdown/{mib} (medians of 5): record: {}; image: {}; open: {}; first step: {}",
        median(0),
        median(1),
        median(2),
        median(3)
    );
}

/// `iters` forks of `snap`, each timed until its first step returns (the
/// drop is not timed).
fn fork_and_step(snap: &WasmSnapshot, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let t = Instant::now();
        let mut sb = snap.open().expect("fork");
        ok(&mut sb, "1");
        total += t.elapsed();
        drop(sb);
    }
    total
}

fn sizes() -> Vec<usize> {
    if quick_mode() {
        vec![16, 64]
    } else {
        vec![16, 64, 256]
    }
}

fn bench_wasm(c: &mut Criterion) {
    let wasm = guest();
    {
        let d = tempfile::tempdir().expect("tempdir");
        let rt = open_runtime(d.path());
        let id = rt.store().put_blob(&wasm).expect("put guest");
        let rep = rt.guest_module(&id, Some(&wasm)).expect("compile");
        eprintln!("guest module: {:?} in {:?}", rep.source, rep.took);
    }
    for mib in sizes() {
        let f = fixture(mib, &wasm);
        fork_breakdown(&f.snap, mib);
        restore_breakdown(&f.dir, &f.snap, mib);
        let mut g = c.benchmark_group("wasm");
        let (samples, warm_up, measurement) = timing();
        g.sample_size(samples)
            .warm_up_time(warm_up)
            .measurement_time(measurement);
        g.bench_with_input(BenchmarkId::new("wasm_fork_step", mib), &f, |b, f| {
            b.iter_custom(|iters| fork_and_step(&f.snap, iters))
        });
        // The same with every fork mapping the image afresh: no memory of
        // a dropped fork is reused, so the first step takes its
        // copy-on-write faults.
        g.bench_with_input(BenchmarkId::new("wasm_fork_step_cold", mib), &f, |b, f| {
            arbor_runtime::wasm::memory::set_recycling(false);
            b.iter_custom(|iters| fork_and_step(&f.snap, iters));
            arbor_runtime::wasm::memory::set_recycling(true);
        });
        // Where the reuse is paid: dropping a fork after its first step
        // (its written pages are copied back from the image).
        g.bench_with_input(BenchmarkId::new("wasm_fork_drop", mib), &f, |b, f| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut sb = f.snap.open().expect("fork");
                    ok(&mut sb, "1");
                    let t = Instant::now();
                    drop(sb);
                    total += t.elapsed();
                }
                total
            })
        });
        g.bench_with_input(BenchmarkId::new("wasm_fork", mib), &f, |b, f| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t = Instant::now();
                    let sb = f.snap.open().expect("fork");
                    total += t.elapsed();
                    drop(sb);
                }
                total
            })
        });
        g.bench_with_input(BenchmarkId::new("wasm_step", mib), &f, |b, f| {
            let mut sb = f.snap.open().expect("fork");
            b.iter(|| ok(&mut sb, "x = 1"))
        });
        g.bench_with_input(BenchmarkId::new("wasm_snapshot", mib), &f, |b, f| {
            let mut sb = f.snap.open().expect("fork");
            let mut n = 0u64;
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    ok(&mut sb, &format!("x = {n}"));
                    let t = Instant::now();
                    sb.snapshot().expect("snapshot");
                    total += t.elapsed();
                }
                total
            })
        });
        // A restore takes up to a second: the same number of iterations
        // per sample instead of criterion's 1, 2, ..., n.
        g.sample_size(10).sampling_mode(SamplingMode::Flat);
        g.bench_with_input(BenchmarkId::new("wasm_restore", mib), &f, |b, f| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let rt = open_runtime(&f.dir);
                    let t = Instant::now();
                    let s = rt.snapshot(f.snap.id()).expect("load");
                    let mut sb = s.open().expect("open");
                    ok(&mut sb, "1");
                    total += t.elapsed();
                }
                total
            })
        });
        g.finish();
        drop(f.rt);
    }
}

fn bench_native(c: &mut Criterion) {
    let d = tempfile::tempdir().expect("tempdir");
    let src = d.path().join("src");
    std::fs::create_dir(&src).expect("mkdir");
    for i in 0..100 {
        std::fs::write(src.join(format!("f{i}.txt")), vec![b'x'; 10_000]).expect("write");
    }
    let opened = arbor_runtime::RuntimeOptions::new(d.path().join("home"))
        .and_then(arbor_runtime::Runtime::open)
        .and_then(|rt| rt.import(&src, None).map(|s| (rt, s)))
        .and_then(|(rt, s)| {
            let mut sb = s.open()?;
            sb.exec("true", &arbor_runtime::ExecOptions::default())?;
            Ok((rt, s))
        });
    let (_rt, snap) = match opened {
        Ok(x) => x,
        Err(e) => {
            eprintln!("native_fork_true skipped: {e}");
            return;
        }
    };
    let mut g = c.benchmark_group("wasm");
    let (samples, warm_up, measurement) = timing();
    g.sample_size(samples)
        .warm_up_time(warm_up)
        .measurement_time(measurement);
    g.bench_function("native_fork_true", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t = Instant::now();
                let mut sb = snap.open().expect("fork");
                sb.exec("true", &arbor_runtime::ExecOptions::default())
                    .expect("exec");
                total += t.elapsed();
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, bench_wasm, bench_native);
criterion_main!(benches);
