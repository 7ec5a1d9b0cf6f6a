//! What the fuzz targets share: one scratch directory per fuzzing process
//! (under `$TMPDIR`, which `make fuzz` points inside `fuzz/target`) and one
//! store opened there.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbor_runtime::Runtime;

/// This process's scratch directory.
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        tempfile::Builder::new()
            .prefix("arbor-fuzz-")
            .tempdir()
            .expect("a scratch directory under $TMPDIR")
            .keep()
    })
}

/// A runtime on a store in the scratch directory, opened once.
pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| Runtime::open_at(scratch().join("store")).expect("the fuzz store opens"))
}

/// A new empty directory in the scratch directory (removed when dropped).
pub fn fresh_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("case-")
        .tempdir_in(scratch())
        .expect("a case directory")
}
