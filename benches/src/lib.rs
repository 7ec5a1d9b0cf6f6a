//! Shared set-up for Arbor's criterion benches (`benches/benches/*.rs`):
//! deterministic workspaces, a runtime on a temporary store driven by the
//! bench helper binary, and the quick mode used as a smoke check.
//!
//! Workspaces are generated from a fixed-seed xorshift generator, so every
//! run benchmarks byte-identical trees: nested directories, file sizes that
//! vary over two orders of magnitude, text content. Nothing here asserts on
//! timings; the benches only report them.
#![deny(missing_docs)]

pub mod compare;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use arbor_runtime::sandbox::HelperCommand;
use arbor_runtime::{Runtime, RuntimeOptions, Sandbox, Snapshot};

/// Environment variable that forces the quick (small sizes) mode.
pub const QUICK_ENV: &str = "ARBOR_BENCH_QUICK";

/// Whether the benches run in quick mode: `ARBOR_BENCH_QUICK=1`, or criterion
/// runs them as tests (`cargo bench -- --test`, or `cargo test --benches`,
/// which passes no `--bench`). Quick mode shrinks the large workspaces so the
/// whole suite finishes in well under two minutes.
pub fn quick_mode() -> bool {
    if std::env::var(QUICK_ENV).is_ok_and(|v| v == "1") {
        return true;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    args.iter().any(|a| a == "--test") || !args.iter().any(|a| a == "--bench")
}

/// Criterion settings for a bench group: a handful of samples over a few
/// seconds, so the full suite (`cargo bench -p arbor-benches`) stays well
/// under ten minutes on two cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupTiming {
    /// Samples per benchmark (criterion's minimum is 10).
    pub sample_size: usize,
    /// Warm-up time per benchmark.
    pub warm_up: Duration,
    /// Measurement time per benchmark.
    pub measurement: Duration,
}

impl GroupTiming {
    /// The default for these benches: 20 samples, 1 s warm-up, 6 s measurement.
    pub const DEFAULT: Self = Self {
        sample_size: 20,
        warm_up: Duration::from_secs(1),
        measurement: Duration::from_secs(6),
    };

    /// A benchmark group named `name` with these settings.
    pub fn group<'a>(
        self,
        c: &'a mut criterion::Criterion,
        name: &str,
    ) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
        let mut group = c.benchmark_group(name);
        group
            .sample_size(self.sample_size)
            .warm_up_time(self.warm_up)
            .measurement_time(self.measurement);
        group
    }
}

/// A tiny xorshift64 pseudo-random generator: deterministic for a seed,
/// fast, and good enough for benchmark content (not for anything else).
#[derive(Clone, Debug)]
pub struct Xorshift64 {
    /// Never zero (xorshift's only fixed point).
    state: u64,
}

impl Xorshift64 {
    /// A generator for `seed` (a zero seed is replaced by a fixed constant).
    pub fn new(seed: u64) -> Self {
        Self {
            state: if seed == 0 {
                0x9E37_79B9_7F4A_7C15
            } else {
                seed
            },
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }

    /// A value in `0..n` (`n` > 0; the slight modulo bias does not matter here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Fill `buf` with printable text: lowercase letters and spaces, with a
    /// newline ending every 64-byte line.
    pub fn fill_text(&mut self, buf: &mut [u8]) {
        const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz      ";
        for (i, chunk) in buf.chunks_mut(8).enumerate() {
            let bits = self.next_u64();
            for (j, byte) in chunk.iter_mut().enumerate() {
                let pos = i * 8 + j;
                *byte = if pos % 64 == 63 {
                    b'\n'
                } else {
                    ALPHABET[((bits >> (j * 5)) & 31) as usize]
                };
            }
        }
    }
}

/// The shape of a generated workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkloadSpec {
    /// Number of regular files.
    pub files: usize,
    /// Total bytes over all files (exact).
    pub total_bytes: u64,
    /// PRNG seed: the same spec always produces the same bytes.
    pub seed: u64,
}

impl WorkloadSpec {
    /// A spec with the benches' fixed seed.
    pub const fn new(files: usize, total_bytes: u64) -> Self {
        Self {
            files,
            total_bytes,
            seed: 0x00A7_B0C0_FFEE,
        }
    }

    /// A short label for benchmark ids, e.g. `10000-files-200MB`.
    pub fn label(&self) -> String {
        let mb = self.total_bytes as f64 / 1e6;
        if mb >= 1.0 {
            format!("{}-files-{}MB", self.files, mb.round())
        } else {
            format!(
                "{}-files-{}KB",
                self.files,
                (self.total_bytes as f64 / 1e3).round()
            )
        }
    }
}

/// 1 MB expressed in bytes (decimal, as the labels print it).
pub const MB: u64 = 1_000_000;

/// The workspaces the benches use, by role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workloads {
    /// The small workspace: 100 files, ~1 MB (the same in both modes).
    pub small: WorkloadSpec,
    /// The medium workspace of the `cp -a` comparison: 2,000 files / 50 MB
    /// (500 files / 5 MB in quick mode).
    pub medium: WorkloadSpec,
    /// The large workspace of the snapshot bench: 10,000 files / 200 MB
    /// (1,000 files / 5 MB in quick mode).
    pub large: WorkloadSpec,
}

impl Workloads {
    /// The full-size workspaces.
    pub const FULL: Self = Self {
        small: WorkloadSpec::new(100, MB),
        medium: WorkloadSpec::new(2_000, 50 * MB),
        large: WorkloadSpec::new(10_000, 200 * MB),
    };

    /// The quick-mode workspaces.
    pub const QUICK: Self = Self {
        small: WorkloadSpec::new(100, MB),
        medium: WorkloadSpec::new(500, 5 * MB),
        large: WorkloadSpec::new(1_000, 5 * MB),
    };

    /// [`Self::QUICK`] in quick mode, else [`Self::FULL`].
    pub fn current() -> Self {
        if quick_mode() {
            Self::QUICK
        } else {
            Self::FULL
        }
    }
}

/// What [`generate_workspace`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkspaceStats {
    /// Regular files written.
    pub files: usize,
    /// Directories created (the root excluded).
    pub dirs: usize,
    /// Bytes written.
    pub bytes: u64,
}

/// Files per leaf directory of a generated workspace.
const FILES_PER_DIR: usize = 20;
/// Leaf directories per parent directory.
const DIRS_PER_PARENT: usize = 16;

/// Generate the workspace described by `spec` into `dir` (created; must not
/// exist): `src/mNN/sNN/fNNNNN.txt` with [`FILES_PER_DIR`] files per leaf
/// directory, plus a `README.md`. File sizes follow a rough log-uniform
/// spread (1x to ~256x) scaled so that they sum to exactly `total_bytes`.
pub fn generate_workspace(dir: &Path, spec: &WorkloadSpec) -> Result<WorkspaceStats> {
    ensure!(spec.files >= 1, "a workspace needs at least one file");
    ensure!(!dir.exists(), "{} already exists", dir.display());
    let mut rng = Xorshift64::new(spec.seed);
    // Relative weights: 2^k * (1..=16), k in 0..8.
    let weights: Vec<u64> = (0..spec.files)
        .map(|_| (1u64 << rng.below(8)) * (1 + rng.below(16)))
        .collect();
    let weight_sum: u64 = weights.iter().sum();
    let mut sizes: Vec<u64> = weights
        .iter()
        .map(|w| (u128::from(spec.total_bytes) * u128::from(*w) / u128::from(weight_sum)) as u64)
        .collect();
    let assigned: u64 = sizes.iter().sum();
    if let Some(first) = sizes.first_mut() {
        *first += spec.total_bytes - assigned;
    }

    let mut dirs = 0;
    let mut bytes = 0;
    let mut buf = Vec::new();
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    for (i, size) in sizes.iter().enumerate() {
        let leaf = i / FILES_PER_DIR;
        let parent = dir
            .join("src")
            .join(format!("m{:02}", leaf / DIRS_PER_PARENT));
        let leaf_dir = parent.join(format!("s{:02}", leaf % DIRS_PER_PARENT));
        if i % FILES_PER_DIR == 0 {
            if !parent.exists() {
                dirs += 1;
            }
            std::fs::create_dir_all(&leaf_dir)
                .with_context(|| format!("create {}", leaf_dir.display()))?;
            dirs += 1;
        }
        let path = if i == 0 {
            dir.join("README.md")
        } else {
            leaf_dir.join(format!("f{i:05}.txt"))
        };
        let len = usize::try_from(*size).context("file size does not fit in memory")?;
        buf.resize(len, 0);
        rng.fill_text(&mut buf);
        let mut out = BufWriter::new(
            File::create(&path).with_context(|| format!("create {}", path.display()))?,
        );
        out.write_all(&buf)
            .and_then(|()| out.flush())
            .with_context(|| format!("write {}", path.display()))?;
        bytes += *size;
    }
    if dir.join("src").exists() {
        dirs += 1;
    }
    Ok(WorkspaceStats {
        files: spec.files,
        dirs,
        bytes,
    })
}

/// A sandbox open on the small workload, on its own bench runtime. Fields
/// drop in order: the sandbox before the store it lives in.
#[derive(Debug)]
pub struct OpenSandbox {
    /// The sandbox.
    pub sandbox: Sandbox,
    _env: BenchEnv,
}

impl OpenSandbox {
    /// Open one on a runtime made by [`BenchEnv::open_with`]; panics with
    /// the step that failed (benches have no caller to return to).
    pub fn new(helper: &Path, configure: impl FnOnce(&mut RuntimeOptions)) -> Self {
        let env = BenchEnv::open_with(helper, configure).expect("open a bench runtime");
        let (snapshot, _src) = env
            .import_workload(&Workloads::current().small)
            .expect("generate and import the workload");
        let sandbox = snapshot.open().expect("open a sandbox");
        Self { sandbox, _env: env }
    }
}

/// A runtime on a fresh store in a temporary directory, with scratch space
/// for generated workspaces; everything is removed on drop.
#[derive(Debug)]
pub struct BenchEnv {
    /// The runtime (overlay backend unless `ARBOR_BACKEND` says otherwise).
    pub runtime: Runtime,
    /// Holds the store (`home/`) and the scratch space; removed on drop.
    dir: tempfile::TempDir,
}

impl BenchEnv {
    /// Open a runtime on a fresh temporary store whose sandboxes are driven
    /// by `helper` (a binary calling `arbor_runtime::sandbox::helper::main`).
    pub fn open(helper: &Path) -> Result<Self> {
        Self::open_with(helper, |_| {})
    }

    /// [`BenchEnv::open`] with `configure` applied to the runtime's options
    /// (e.g. the confinement turned off, for a baseline).
    pub fn open_with(helper: &Path, configure: impl FnOnce(&mut RuntimeOptions)) -> Result<Self> {
        ensure!(
            helper.is_file(),
            "the sandbox helper {} does not exist",
            helper.display()
        );
        let dir = tempfile::Builder::new()
            .prefix("arbor-bench-")
            .tempdir()
            .context("create a temporary directory")?;
        // The sandbox's root is an unprivileged mapped uid when running as
        // real root: it must be able to traverse to the store.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .with_context(|| format!("chmod {}", dir.path().display()))?;
        let mut options =
            RuntimeOptions::new(dir.path().join("home")).context("runtime options")?;
        options.helper = Some(HelperCommand {
            program: helper.to_owned(),
            args: Vec::new(),
        });
        configure(&mut options);
        let runtime = Runtime::open(options).context("open the runtime")?;
        Ok(Self { runtime, dir })
    }

    /// A path under the scratch space (not created).
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Generate `spec` under the scratch space, import it as a root
    /// snapshot, and flush the page cache's dirty data (so the first timed
    /// `syncfs` does not pay for the import). Returns the snapshot and the
    /// generated host directory (kept, for the `cp -a` baseline).
    pub fn import_workload(&self, spec: &WorkloadSpec) -> Result<(Snapshot, PathBuf)> {
        let src = self.scratch(&format!("workload-{}", spec.label()));
        let stats = generate_workspace(&src, spec)?;
        ensure!(
            stats.bytes == spec.total_bytes,
            "generated {} bytes, expected {}",
            stats.bytes,
            spec.total_bytes
        );
        let snapshot = self
            .runtime
            .import(&src, None)
            .with_context(|| format!("import {}", src.display()))?;
        sync_all()?;
        Ok((snapshot, src))
    }
}

/// Flush all dirty data to disk (`sync`), so that later `syncfs` calls time
/// only what the benchmark itself wrote.
pub fn sync_all() -> Result<()> {
    let status = Command::new("sync").status().context("run sync")?;
    if !status.success() {
        bail!("sync failed: {status}");
    }
    Ok(())
}

/// 100 bytes of content unique to `n`, for the "one small change" of the
/// snapshot bench (unique content gives every snapshot a new layer id).
pub fn small_change(n: u64) -> Vec<u8> {
    let mut data = format!("change {n:020}\n").into_bytes();
    data.resize(99, b'.');
    data.push(b'\n');
    data
}

/// `$ARBOR_BENCH_OUT`, else `<target>/arbor-bench` (the bench binary lives
/// in `<target>/<profile>/deps/`): where the benches write their reports.
///
/// # Errors
/// When the bench binary cannot be located.
pub fn output_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("ARBOR_BENCH_OUT") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        let dir = PathBuf::from(dir);
        let dir = if dir.is_absolute() {
            dir
        } else {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir)
        };
        return Ok(dir.join("arbor-bench"));
    }
    let exe = std::env::current_exe().context("locate the bench binary")?;
    let target = exe
        .ancestors()
        .nth(3)
        .filter(|t| t.join("CACHEDIR.TAG").exists() || t.ends_with("target"))
        .map(Path::to_owned)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    Ok(target.join("arbor-bench"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_is_deterministic_and_exact() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let spec = WorkloadSpec::new(45, 12_345);
        let a = generate_workspace(&tmp.path().join("a"), &spec).expect("generate a");
        let b = generate_workspace(&tmp.path().join("b"), &spec).expect("generate b");
        assert_eq!(a, b);
        assert_eq!(a.bytes, 12_345);
        assert_eq!(a.files, 45);
        let read =
            |root: &Path, rel: &str| std::fs::read(root.join(rel)).expect("read generated file");
        for rel in [
            "README.md",
            "src/m00/s00/f00001.txt",
            "src/m00/s02/f00044.txt",
        ] {
            assert_eq!(
                read(&tmp.path().join("a"), rel),
                read(&tmp.path().join("b"), rel),
                "{rel}"
            );
        }
    }

    #[test]
    fn small_change_is_100_bytes_and_unique() {
        assert_eq!(small_change(7).len(), 100);
        assert_ne!(small_change(7), small_change(8));
    }

    #[test]
    fn labels() {
        assert_eq!(Workloads::FULL.large.label(), "10000-files-200MB");
        assert_eq!(Workloads::FULL.small.label(), "100-files-1MB");
        assert_eq!(WorkloadSpec::new(3, 2_000).label(), "3-files-2KB");
    }
}
