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

/// The bounds the archive targets unpack under: small, so one input cannot
/// fill the disk.
pub const UNTAR_LIMITS: arbor_runtime::layer::UntarLimits = arbor_runtime::layer::UntarLimits {
    max_bytes: 8 << 20,
    max_entries: 10_000,
};

/// A destination directory for an archive, with an empty sibling: after
/// unpacking, [`Contained::check`] fails when anything was written beside
/// the destination (`../`, links and symlinks out).
pub struct Contained {
    case: tempfile::TempDir,
    /// The (initially empty) destination.
    pub dest: PathBuf,
}

impl Default for Contained {
    fn default() -> Self {
        let case = fresh_dir();
        let dest = case.path().join("dest");
        std::fs::create_dir(&dest).unwrap();
        std::fs::create_dir(case.path().join("beside")).unwrap();
        Self { case, dest }
    }
}

impl Contained {
    /// Panic when anything appeared beside the destination.
    pub fn check(&self) {
        let beside: Vec<_> = std::fs::read_dir(self.case.path().join("beside"))
            .unwrap()
            .collect();
        assert!(
            beside.is_empty(),
            "written beside the destination: {beside:?}"
        );
        let around: Vec<_> = std::fs::read_dir(self.case.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            around.len(),
            2,
            "written next to the destination: {around:?}"
        );
    }
}
