//! The host-side file API, performed inside the sandbox: in a forked child
//! that has become the sandbox's root and `chroot`ed into the sandbox root,
//! through a cap-std handle on `/workspace` (permissions are checked as
//! inside, new files are owned by the sandbox's root, no path resolves
//! outside).

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::error::Result;
use super::setup::become_sandbox_root;
use super::sys::Syscalls;
use crate::sandbox::protocol::{FileOp, FileResult, ListEntry, MAX_FILE};

/// Run `op` as the sandbox's root in a child of the helper; a failure of
/// the operation itself is a [`FileResult::Failed`], not an error.
pub(super) fn file_op<S: Syscalls>(sys: &mut S, root: &Path, op: &FileOp) -> Result<FileResult> {
    sys.in_child(|sys| {
        become_sandbox_root(sys)?;
        sys.chroot(root)?;
        sys.chdir(Path::new("/"))?;
        Ok(in_workspace(op).unwrap_or_else(|message| FileResult::Failed { message }))
    })
}

fn failed(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> String {
    move |e| format!("{what}: {e}")
}

/// The operation itself, once chrooted; the error names the path and the reason.
fn in_workspace(op: &FileOp) -> std::result::Result<FileResult, String> {
    use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
    let ws = Dir::open_ambient_dir("/workspace", cap_std::ambient_authority())
        .map_err(failed("open /workspace"))?;
    let rel = |p: &str| -> std::result::Result<PathBuf, String> {
        let p = p.trim_start_matches("./");
        if p.starts_with('/') {
            return Err(format!(
                "{p}: absolute paths are not accepted; give a path relative to /workspace"
            ));
        }
        Ok(PathBuf::from(if p.is_empty() { "." } else { p }))
    };
    match op {
        FileOp::Read { path } => {
            let p = rel(path)?;
            let size = ws
                .metadata(&p)
                .map_err(failed(format!("read {path}")))?
                .len();
            if size > MAX_FILE as u64 {
                return Err(format!(
                    "read {path}: the file is {size} bytes; the file API moves at most {MAX_FILE} (use exec or the archive of a smaller directory)"
                ));
            }
            let data = ws.read(p).map_err(failed(format!("read {path}")))?;
            Ok(FileResult::Data { data })
        }
        FileOp::Write { path, data, mode } => {
            let p = rel(path)?;
            if let Some(parent) = p.parent().filter(|p| !p.as_os_str().is_empty()) {
                ws.create_dir_all(parent)
                    .map_err(failed(format!("create parent directories of {path}")))?;
            }
            let mut opts = OpenOptions::new();
            opts.write(true).create(true).truncate(true).mode(*mode);
            let mut file = ws
                .open_with(&p, &opts)
                .map_err(failed(format!("open {path} for writing")))?;
            file.write_all(data)
                .map_err(failed(format!("write {path}")))?;
            file.set_permissions(cap_std::fs::Permissions::from_std(
                fs::Permissions::from_mode(*mode),
            ))
            .map_err(failed(format!("chmod {path}")))?;
            Ok(FileResult::Done)
        }
        FileOp::Delete { path } => {
            ws.remove_file(rel(path)?)
                .map_err(failed(format!("delete {path}")))?;
            Ok(FileResult::Done)
        }
        FileOp::List { path } => {
            let mut entries = Vec::new();
            for entry in ws
                .read_dir(rel(path)?)
                .map_err(failed(format!("list {path}")))?
            {
                let entry = entry.map_err(failed(format!("list {path}")))?;
                let meta = entry
                    .metadata()
                    .map_err(failed(format!("stat entry of {path}")))?;
                let ft = meta.file_type();
                let kind = if ft.is_symlink() {
                    "symlink"
                } else if ft.is_dir() {
                    "dir"
                } else if ft.is_file() {
                    "file"
                } else {
                    "other"
                };
                entries.push(ListEntry {
                    name: entry.file_name().to_string_lossy().into_owned(),
                    kind: kind.to_owned(),
                    size: if ft.is_file() { meta.len() } else { 0 },
                });
            }
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(FileResult::Entries { entries })
        }
    }
}
