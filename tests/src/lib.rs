//! Shared helpers for the integration tests: a runtime on a fresh temporary
//! store, with the helper binary built by this package.

use std::path::{Path, PathBuf};

use arbor_runtime::sandbox::HelperCommand;
use arbor_runtime::{ExecOptions, Observation, Runtime, RuntimeOptions, Sandbox};

/// A runtime over a fresh store in a temporary directory (kept alive by the
/// returned guard).
#[derive(Debug)]
pub struct TestRuntime {
    /// The runtime.
    pub runtime: Runtime,
    /// The temporary directory holding the store and scratch space.
    pub dir: tempfile::TempDir,
}

impl TestRuntime {
    /// A sandbox open on a [`sample_workspace`] imported from
    /// `scratch("src")`.
    pub fn sample_sandbox(&self) -> Sandbox {
        let src = self.scratch("src");
        sample_workspace(&src);
        self.runtime.import(&src, None).unwrap().open().unwrap()
    }

    /// The store directory.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// A scratch path inside the temporary directory.
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// The helper command for tests: `$ARBOR_TEST_HELPER` when set (the
/// unprivileged test phase runs copies of the binaries), else `helper`.
pub fn helper_command(helper: &Path) -> HelperCommand {
    let program = std::env::var_os("ARBOR_TEST_HELPER")
        .map(PathBuf::from)
        .unwrap_or_else(|| helper.to_owned());
    HelperCommand {
        program,
        args: Vec::new(),
    }
}

/// Options for a runtime on `home` using the test helper binary.
pub fn options(home: &Path, helper: &Path) -> RuntimeOptions {
    let mut opts = RuntimeOptions::new(home).expect("runtime options");
    opts.helper = Some(helper_command(helper));
    opts
}

/// Open a runtime on a fresh temporary store with adjusted options.
pub fn runtime_with(helper: &Path, adjust: impl FnOnce(&mut RuntimeOptions)) -> TestRuntime {
    let dir = tempfile::Builder::new()
        .prefix("arbor-test-")
        .tempdir()
        .expect("tempdir");
    let home = dir.path().join("home");
    let mut opts = options(&home, helper);
    adjust(&mut opts);
    let runtime = Runtime::open(opts).expect("open runtime");
    TestRuntime { runtime, dir }
}

/// Whether the current process runs as real root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Pids of host processes whose command line contains `needle`.
pub fn host_pids_matching(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            let text = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if text.contains(needle) {
                out.push(pid);
            }
        }
    }
    out
}

/// Open a runtime on a fresh temporary store.
pub fn runtime(helper: &Path) -> TestRuntime {
    let dir = tempfile::Builder::new()
        .prefix("arbor-test-")
        .tempdir()
        .expect("tempdir");
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(dir.path()).unwrap().permissions(),
        0o755,
    );
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let home = dir.path().join("home");
    let runtime = Runtime::open(options(&home, helper)).expect("open runtime");
    TestRuntime { runtime, dir }
}

/// Run `cmd` in `sb` with a 30 s timeout; an action that cannot run at all
/// panics.
pub fn run(sb: &mut Sandbox, cmd: &str) -> Observation {
    sb.exec(cmd, &ExecOptions::with_timeout_ms(30_000)).unwrap()
}

/// Write a small sample workspace: a few files, a nested directory, a symlink.
pub fn sample_workspace(dir: &Path) {
    std::fs::create_dir_all(dir.join("src/pkg")).expect("mkdir");
    std::fs::write(dir.join("README.md"), "# sample\n").expect("write");
    std::fs::write(dir.join("src/main.py"), "print('hello from arbor')\n").expect("write");
    std::fs::write(dir.join("src/pkg/__init__.py"), "").expect("write");
    std::fs::write(
        dir.join("src/pkg/util.py"),
        "def add(a, b):\n    return a + b\n",
    )
    .expect("write");
    std::os::unix::fs::symlink("src/main.py", dir.join("main-link")).expect("symlink");
}

/// Run the crash-test binary (`arbor-test-crasher HOME HELPER SOURCE`) to
/// completion, with `ARBOR_FAILPOINT` set when `failpoint` is given.
/// `$ARBOR_TEST_CRASHER` and `$ARBOR_TEST_HELPER` override the defaults.
pub fn run_crasher(
    crasher: &Path,
    helper: &Path,
    home: &Path,
    src: &Path,
    failpoint: Option<&str>,
) -> std::process::Output {
    let crasher =
        std::env::var_os("ARBOR_TEST_CRASHER").map_or_else(|| crasher.to_owned(), PathBuf::from);
    let mut cmd = std::process::Command::new(crasher);
    cmd.arg(home).arg(&helper_command(helper).program).arg(src);
    if let Some(point) = failpoint {
        cmd.env("ARBOR_FAILPOINT", point);
    }
    cmd.output().expect("run arbor-test-crasher")
}

/// A tiny WebAssembly guest speaking the Arbor guest protocol without WASI,
/// for session tests that need no interpreter: the input buffer is at 1024,
/// and `arbor_step` stores the input's first byte at address 0 and returns 0.
#[cfg(feature = "wasm")]
pub fn tiny_guest() -> Vec<u8> {
    use wasm_encoder::{
        CodeSection, ExportKind, ExportSection, Function, FunctionSection, Instruction as I,
        MemArg, MemorySection, MemoryType, Module, TypeSection, ValType,
    };
    let mut m = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32], [ValType::I32]);
    types.ty().function([], [ValType::I32]);
    m.section(&types);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    funcs.function(1);
    m.section(&funcs);
    let mut mem = MemorySection::new();
    mem.memory(MemoryType {
        minimum: 1,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    m.section(&mem);
    let mut exports = ExportSection::new();
    exports.export("arbor_input", ExportKind::Func, 0);
    exports.export("arbor_step", ExportKind::Func, 1);
    m.section(&exports);
    let byte = MemArg {
        offset: 0,
        align: 0,
        memory_index: 0,
    };
    let mut code = CodeSection::new();
    let mut input = Function::new([]);
    input.instruction(&I::I32Const(1024)).instruction(&I::End);
    code.function(&input);
    let mut step = Function::new([]);
    step.instruction(&I::I32Const(0))
        .instruction(&I::I32Const(1024))
        .instruction(&I::I32Load8U(byte))
        .instruction(&I::I32Store8(byte))
        .instruction(&I::I32Const(0))
        .instruction(&I::End);
    code.function(&step);
    m.section(&code);
    m.finish()
}
