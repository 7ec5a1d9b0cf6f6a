//! Crash-safe file primitives shared by the store and the snapshot module:
//! atomic writes (temp file → write → fsync → rename → fsync directory),
//! failpoints that kill the process between those steps, streaming file
//! hashing that never follows symlinks, and deletion of trees that may hold
//! read-only directories.

use std::collections::hash_map::RandomState;
use std::fs::{self, File, OpenOptions, Permissions};
use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{ObjectId, Result, StoreError, io_err};

/// Every failpoint name the store calls [`failpoint`] with.
pub const FAILPOINTS: &[&str] = &[
    "object.tmp-written",
    "object.fsynced",
    "object.renamed",
    "batch.renamed-one",
    "index.created",
    "ref.tmp-written",
    "ref.renamed",
    "gc.deleting",
];

/// Kill the process at once, without running destructors or flushing
/// anything (`_exit(86)`), when the environment variable `ARBOR_FAILPOINT`
/// equals `name`. Crash tests use this to stop at every step of a protocol.
pub fn failpoint(name: &str) {
    if std::env::var_os("ARBOR_FAILPOINT").is_some_and(|v| v == name) {
        // SAFETY: `_exit` only ends the process; skipping destructors and
        // buffered I/O is exactly the unclean death this failpoint simulates.
        unsafe { libc::_exit(86) }
    }
}

/// Failpoints called by one atomic write, in protocol order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteFailpoints {
    /// After the temp file is written, before fsync.
    pub written: &'static str,
    /// After fsync, before the rename (if any).
    pub fsynced: Option<&'static str>,
    /// After the rename, before the directory fsync.
    pub renamed: &'static str,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh temp name `"<pid>.<counter>.<random><suffix>"`, unique within
/// this process and very likely across processes; the pid prefix lets gc
/// tell stale entries (dead owner) from live ones.
pub(crate) fn temp_name(suffix: &str) -> String {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(n);
    format!("{}.{n}.{:016x}{suffix}", std::process::id(), h.finish())
}

/// Write `bytes` to `dest` so that after a crash `dest` holds either its old
/// content or all of `bytes`: temp file in `dir_tmp` (same filesystem as
/// `dest`) → write → fsync → rename → fsync of `dest`'s directory.
pub fn atomic_write(dir_tmp: &Path, dest: &Path, bytes: &[u8]) -> Result<()> {
    atomic_write_with(dir_tmp, dest, bytes, None)
}

/// [`atomic_write`] with failpoints between the steps.
pub(crate) fn atomic_write_with(
    dir_tmp: &Path,
    dest: &Path,
    bytes: &[u8],
    fps: Option<WriteFailpoints>,
) -> Result<()> {
    let tmp = dir_tmp.join(temp_name(""));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(io_err("create temp file", &tmp))?;
        f.write_all(bytes)
            .map_err(io_err("write temp file", &tmp))?;
        if let Some(fp) = fps {
            failpoint(fp.written);
        }
        f.sync_all().map_err(io_err("fsync temp file", &tmp))?;
        if let Some(fp) = fps.and_then(|f| f.fsynced) {
            failpoint(fp);
        }
        drop(f);
        fs::rename(&tmp, dest).map_err(io_err("rename temp file into place", dest))
    })();
    if written.is_err() {
        // Best effort: the write already failed and that error is reported.
        let _ = fs::remove_file(&tmp);
    }
    written?;
    if let Some(fp) = fps {
        failpoint(fp.renamed);
    }
    fsync_dir(dest.parent().unwrap_or(Path::new(".")))
}

/// fsync a directory so that renames and unlinks inside it are durable.
pub fn fsync_dir(path: &Path) -> Result<()> {
    File::open(path)
        .and_then(|d| d.sync_all())
        .map_err(io_err("fsync directory", path))
}

/// Streaming blake3 of a regular file's content (not a blob object id: no
/// header is hashed). Opened with `O_NOFOLLOW`, so a symlink is an error,
/// never followed; anything but a regular file is refused.
pub fn hash_file(path: &Path) -> Result<ObjectId> {
    let not_regular = || StoreError::NotRegularFile {
        path: path.to_path_buf(),
    };
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => not_regular(),
            _ => io_err("open for hashing", path)(e),
        })?;
    let md = f.metadata().map_err(io_err("stat", path))?;
    if !md.is_file() {
        return Err(not_regular());
    }
    let mut h = blake3::Hasher::new();
    h.update_reader(&f)
        .map_err(io_err("read for hashing", path))?;
    Ok(h.finalize().into())
}

/// Delete `path` (file, symlink, device or directory tree) without following
/// symlinks, making read-only directories writable first. Refuses to descend
/// into a directory on another device than `dev` (something is mounted
/// there). Returns the apparent size of the files removed.
pub(crate) fn remove_tree(path: &Path, dev: u64) -> Result<u64> {
    let md = fs::symlink_metadata(path).map_err(io_err("stat", path))?;
    if !md.is_dir() {
        fs::remove_file(path).map_err(io_err("remove", path))?;
        return Ok(if md.is_file() { md.len() } else { 0 });
    }
    if md.dev() != dev {
        return Err(StoreError::MountInside {
            path: path.to_path_buf(),
        });
    }
    if md.mode() & 0o700 != 0o700 {
        fs::set_permissions(path, Permissions::from_mode((md.mode() & 0o7777) | 0o700))
            .map_err(io_err("make directory writable", path))?;
    }
    let mut freed = 0;
    for entry in fs::read_dir(path).map_err(io_err("list directory", path))? {
        let entry = entry.map_err(io_err("list directory", path))?;
        freed += remove_tree(&entry.path(), dev)?;
    }
    fs::remove_dir(path).map_err(io_err("remove directory", path))?;
    Ok(freed)
}

/// Whether process `pid` exists (signal 0; `EPERM` means it exists).
pub(crate) fn pid_alive(pid: i32) -> bool {
    match rustix::process::Pid::from_raw(pid) {
        None => false,
        Some(p) => !matches!(
            rustix::process::test_kill_process(p),
            Err(rustix::io::Errno::SRCH)
        ),
    }
}

/// Whether a `tmp/` or `run/` entry named `"<pid><sep>..."` belongs to a dead
/// process. Names without a pid prefix count as stale iff `unparsable_is_stale`.
pub(crate) fn owner_dead(name: &str, sep: char, unparsable_is_stale: bool) -> bool {
    match name.split(sep).next().and_then(|p| p.parse::<i32>().ok()) {
        Some(pid) if pid > 0 => !pid_alive(pid),
        _ => unparsable_is_stale,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let tmp = d.path().join("tmp");
        fs::create_dir(&tmp).unwrap();
        let dest = d.path().join("f");
        atomic_write(&tmp, &dest, b"one").unwrap();
        atomic_write(&tmp, &dest, b"two").unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"two");
        assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0);
    }

    #[test]
    fn hash_file_refuses_symlinks_and_dirs() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        fs::write(&f, b"hello").unwrap();
        assert_eq!(hash_file(&f).unwrap(), ObjectId::hash(b"hello"));
        std::os::unix::fs::symlink(&f, d.path().join("l")).unwrap();
        assert!(matches!(
            hash_file(&d.path().join("l")),
            Err(StoreError::NotRegularFile { .. })
        ));
        assert!(matches!(
            hash_file(d.path()),
            Err(StoreError::NotRegularFile { .. })
        ));
    }

    #[test]
    fn remove_tree_handles_read_only_dirs() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("t");
        fs::create_dir_all(t.join("a/b")).unwrap();
        fs::write(t.join("a/b/f"), b"12345").unwrap();
        fs::set_permissions(t.join("a/b"), Permissions::from_mode(0o555)).unwrap();
        fs::set_permissions(t.join("a"), Permissions::from_mode(0o500)).unwrap();
        let dev = fs::metadata(d.path()).unwrap().dev();
        assert_eq!(remove_tree(&t, dev).unwrap(), 5);
        assert!(!t.exists());
    }

    #[test]
    fn temp_names_carry_pid_and_are_unique() {
        let a = temp_name(".x");
        assert!(a.starts_with(&format!("{}.", std::process::id())));
        assert_ne!(a, temp_name(".x"));
        assert!(!owner_dead(&a, '.', true));
        assert!(owner_dead("999999999.1.2", '.', false));
        assert!(!owner_dead("junk", '-', false));
    }
}
