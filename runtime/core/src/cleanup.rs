//! Removing private directories that may contain read-only or mode-0
//! directories (overlayfs work directories, agent-made trees).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Remove `path` and everything below it without following symlinks, making
/// directories writable where needed. Best effort: failures are ignored (the
/// store's `gc` collects what is left of dead sandboxes).
pub fn remove_dir_forcefully(path: &Path) {
    if std::fs::remove_dir_all(path).is_ok() || !path.exists() {
        return;
    }
    make_dirs_writable(path);
    let _ = std::fs::remove_dir_all(path);
}

fn make_dirs_writable(dir: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            make_dirs_writable(&entry.path());
        }
    }
}
