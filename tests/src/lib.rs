//! Shared helpers for the integration tests: a runtime on a fresh temporary
//! store, with the helper binary built by this package.

use std::path::{Path, PathBuf};

use arbor_runtime::sandbox::HelperCommand;
use arbor_runtime::{Runtime, RuntimeOptions};

/// A runtime over a fresh store in a temporary directory (kept alive by the
/// returned guard).
pub struct TestRuntime {
    /// The runtime.
    pub runtime: Runtime,
    /// The temporary directory holding the store and scratch space.
    pub dir: tempfile::TempDir,
}

impl TestRuntime {
    /// The store directory.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// A scratch path inside the temporary directory.
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// The helper command for tests.
pub fn helper_command(helper: &Path) -> HelperCommand {
    HelperCommand { program: helper.to_owned(), args: Vec::new() }
}

/// Options for a runtime on `home` using the test helper binary.
pub fn options(home: &Path, helper: &Path) -> RuntimeOptions {
    let mut opts = RuntimeOptions::new(home).expect("runtime options");
    opts.helper = Some(helper_command(helper));
    opts
}

/// Open a runtime on a fresh temporary store.
pub fn runtime(helper: &Path) -> TestRuntime {
    let dir = tempfile::Builder::new().prefix("arbor-test-").tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let runtime = Runtime::open(options(&home, helper)).expect("open runtime");
    TestRuntime { runtime, dir }
}

/// Write a small sample workspace: a few files, a nested directory, a symlink.
pub fn sample_workspace(dir: &Path) {
    std::fs::create_dir_all(dir.join("src/pkg")).expect("mkdir");
    std::fs::write(dir.join("README.md"), "# sample\n").expect("write");
    std::fs::write(dir.join("src/main.py"), "print('hello from arbor')\n").expect("write");
    std::fs::write(dir.join("src/pkg/__init__.py"), "").expect("write");
    std::fs::write(dir.join("src/pkg/util.py"), "def add(a, b):\n    return a + b\n").expect("write");
    std::os::unix::fs::symlink("src/main.py", dir.join("main-link")).expect("symlink");
}
