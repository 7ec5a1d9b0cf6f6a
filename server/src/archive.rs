//! Tar streams in and out, read defensively: a client's archive names
//! plain files, directories and symlinks that stay inside; anything else
//! (`..`, absolute names, hard links, devices, a path through a symlink) is
//! refused with a reason before anything is written.

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use crate::error::{ApiError, ApiResult};

/// One entry of a client's archive, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir(String),
    /// A file with its permission bits and bytes.
    File {
        /// Relative path.
        path: String,
        /// Permission bits (`0o7777` at most).
        mode: u32,
        /// Content.
        data: Vec<u8>,
    },
    /// A symlink whose target stays inside the tree.
    Symlink {
        /// Relative path.
        path: String,
        /// Its target, as stored.
        target: String,
    },
}

/// Normalise a client's relative path: `.` components dropped; empty,
/// absolute, `..` and NUL refused. `""` and `"."` are the root (`""`).
///
/// # Errors
/// A 400 naming the path and why.
pub fn relative(path: &str) -> ApiResult<String> {
    if path.contains('\0') {
        return Err(ApiError::bad_request(format!(
            "path {path:?} contains a NUL byte"
        )));
    }
    if path.starts_with('/') {
        return Err(ApiError::bad_request(format!(
            "path {path:?} is absolute; give it relative to /workspace"
        )));
    }
    let mut parts = Vec::new();
    for c in Path::new(path).components() {
        match c {
            Component::Normal(p) => parts.push(
                p.to_str()
                    .ok_or_else(|| ApiError::bad_request(format!("path {path:?} is not UTF-8")))?,
            ),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(ApiError::bad_request(format!(
                    "path {path:?} has a `..` component: paths stay inside /workspace"
                )));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(ApiError::bad_request(format!("path {path:?} is absolute")));
            }
        }
    }
    Ok(parts.join("/"))
}

/// A workspace path from an API parameter: relative to `/workspace`, or
/// absolute inside it.
///
/// # Errors
/// As [`relative`].
pub fn workspace_path(path: &str) -> ApiResult<String> {
    let inside = path
        .strip_prefix("/workspace/")
        .or_else(|| (path == "/workspace").then_some(""));
    relative(inside.unwrap_or(path))
}

/// Whether a symlink at `path` pointing to `target` stays inside the tree.
fn target_stays_inside(path: &str, target: &str) -> bool {
    if target.starts_with('/') || target.is_empty() || target.contains('\0') {
        return false;
    }
    let mut depth: i64 = path.split('/').count() as i64 - 1;
    for c in Path::new(target).components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

/// Read and check every entry of a tar archive (capped at `max_files` entries).
///
/// # Errors
/// A 400 naming the first bad entry.
pub fn read_entries(bytes: &[u8], max_files: usize) -> ApiResult<Vec<Entry>> {
    let bad = |what: String| ApiError::bad_request(format!("archive: {what}"));
    let mut archive = tar::Archive::new(bytes);
    let mut out = Vec::new();
    let entries = archive
        .entries()
        .map_err(|e| bad(format!("not a tar stream: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| bad(format!("unreadable entry: {e}")))?;
        if out.len() >= max_files {
            return Err(bad(format!("more than {max_files} entries")));
        }
        let raw = entry.path_bytes().into_owned();
        let name = String::from_utf8(raw).map_err(|_| bad("an entry name is not UTF-8".into()))?;
        let path = relative(&name).map_err(|e| bad(e.message))?;
        let kind = entry.header().entry_type();
        if path.is_empty() {
            if kind.is_dir() {
                continue;
            }
            return Err(bad(format!("entry {name:?} names the root")));
        }
        let item = if kind.is_dir() {
            Entry::Dir(path)
        } else if kind.is_file() {
            let mode = entry.header().mode().unwrap_or(0o644) & 0o7777;
            let mut data = Vec::new();
            entry
                .read_to_end(&mut data)
                .map_err(|e| bad(format!("read {name:?}: {e}")))?;
            Entry::File { path, mode, data }
        } else if kind.is_symlink() {
            let target = entry
                .link_name_bytes()
                .map(|t| String::from_utf8_lossy(&t).into_owned())
                .unwrap_or_default();
            if !target_stays_inside(&path, &target) {
                return Err(bad(format!(
                    "symlink {name:?} -> {target:?} points outside the tree"
                )));
            }
            Entry::Symlink { path, target }
        } else if kind.is_hard_link() {
            return Err(bad(format!(
                "{name:?} is a hard link; send the file itself"
            )));
        } else if kind.is_pax_global_extensions() || kind.is_pax_local_extensions() {
            continue;
        } else {
            return Err(bad(format!(
                "{name:?} is a {kind:?} entry; only files, directories and symlinks are accepted"
            )));
        };
        out.push(item);
    }
    // No entry may go through a symlink another entry made.
    let links: Vec<&str> = out
        .iter()
        .filter_map(|e| match e {
            Entry::Symlink { path, .. } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    for e in &out {
        let p = match e {
            Entry::Dir(p) | Entry::File { path: p, .. } | Entry::Symlink { path: p, .. } => p,
        };
        if let Some(l) = links
            .iter()
            .find(|l| p.len() > l.len() && p.starts_with(*l) && p.as_bytes()[l.len()] == b'/')
        {
            return Err(bad(format!("{p:?} goes through the symlink {l:?}")));
        }
    }
    Ok(out)
}

/// Write checked entries under `root` (a fresh directory).
///
/// # Errors
/// A 500 when the host filesystem fails; 400 when two entries collide.
pub fn extract(entries: &[Entry], root: &Path) -> ApiResult<usize> {
    let io = |what: &str, p: &Path, e: std::io::Error| {
        ApiError::internal(format!("{what} {}: {e}", p.display()))
    };
    let mut files = 0;
    for e in entries {
        match e {
            Entry::Dir(p) => {
                let dest = root.join(p);
                fs::create_dir_all(&dest).map_err(|e| io("create", &dest, e))?;
            }
            Entry::File { path, mode, data } => {
                let dest = root.join(path);
                make_parent(&dest, root)?;
                if fs::symlink_metadata(&dest).is_ok_and(|m| !m.is_file()) {
                    return Err(ApiError::bad_request(format!(
                        "archive: {path:?} is both a file and a directory or symlink"
                    )));
                }
                fs::write(&dest, data).map_err(|e| io("write", &dest, e))?;
                fs::set_permissions(&dest, fs::Permissions::from_mode(mode & 0o777))
                    .map_err(|e| io("chmod", &dest, e))?;
                files += 1;
            }
            Entry::Symlink { path, target } => {
                let dest = root.join(path);
                make_parent(&dest, root)?;
                if fs::symlink_metadata(&dest).is_ok() {
                    return Err(ApiError::bad_request(format!(
                        "archive: {path:?} is given twice"
                    )));
                }
                std::os::unix::fs::symlink(target, &dest).map_err(|e| io("symlink", &dest, e))?;
                files += 1;
            }
        }
    }
    Ok(files)
}

fn make_parent(dest: &Path, root: &Path) -> ApiResult<()> {
    if let Some(parent) = dest.parent() {
        // Each existing ancestor must be a real directory (read_entries
        // already refused paths through the archive's own symlinks).
        let mut p = PathBuf::from(root);
        for c in parent
            .strip_prefix(root)
            .unwrap_or(Path::new(""))
            .components()
        {
            p.push(c);
            match fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(ApiError::bad_request(format!(
                        "archive: {} is not a directory",
                        p.strip_prefix(root).unwrap_or(&p).display()
                    )));
                }
                Err(_) => fs::create_dir(&p)
                    .map_err(|e| ApiError::internal(format!("create {}: {e}", p.display())))?,
            }
        }
    }
    Ok(())
}

/// A tar archive of files: `(path, mode, bytes)`, directories implied.
///
/// # Errors
/// 500 when the archive cannot be built.
pub fn build(files: &[(String, u32, Vec<u8>)]) -> ApiResult<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, mode, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(*mode);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mtime(0);
        b.append_data(&mut h, path, &data[..])
            .map_err(|e| ApiError::internal(format!("archive {path}: {e}")))?;
    }
    b.into_inner()
        .map_err(|e| ApiError::internal(format!("finish the archive: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(entries: &[(&str, tar::EntryType, &[u8], &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, kind, data, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            // Write the raw name so hostile names reach the reader unchanged.
            h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            if !link.is_empty() {
                h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
            }
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn paths_are_normalised_and_escapes_refused() {
        assert_eq!(relative("./a/./b").unwrap(), "a/b");
        assert_eq!(relative(".").unwrap(), "");
        assert_eq!(workspace_path("/workspace/src/x").unwrap(), "src/x");
        assert_eq!(workspace_path("/workspace").unwrap(), "");
        for bad in ["../x", "a/../../x", "/etc/passwd", "a\0b", "/workspacex/a"] {
            let e = workspace_path(bad).unwrap_err();
            assert_eq!(e.code, "bad_request", "{bad:?}");
        }
        assert!(target_stays_inside("a/b", "../c"));
        assert!(!target_stays_inside("a", "../c"));
        assert!(!target_stays_inside("a", "/etc"));
    }

    #[test]
    fn a_good_archive_extracts_and_hostile_ones_are_named() {
        let good = tar_of(&[
            ("src/", tar::EntryType::Directory, b"", ""),
            ("src/a.py", tar::EntryType::Regular, b"print(1)\n", ""),
            ("link", tar::EntryType::Symlink, b"", "src/a.py"),
        ]);
        let entries = read_entries(&good, 100).unwrap();
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(extract(&entries, dir.path()).unwrap(), 2);
        assert_eq!(fs::read(dir.path().join("link")).unwrap(), b"print(1)\n");
        for (archive, says) in [
            (
                tar_of(&[("../x", tar::EntryType::Regular, b"x", "")]),
                "`..`",
            ),
            (
                tar_of(&[("/etc/x", tar::EntryType::Regular, b"x", "")]),
                "absolute",
            ),
            (
                tar_of(&[("l", tar::EntryType::Symlink, b"", "/etc")]),
                "outside",
            ),
            (
                tar_of(&[("l", tar::EntryType::Link, b"", "x")]),
                "hard link",
            ),
            (
                tar_of(&[("d", tar::EntryType::Char, b"", "")]),
                "only files",
            ),
            (
                tar_of(&[
                    ("l", tar::EntryType::Symlink, b"", "sub"),
                    ("l/x", tar::EntryType::Regular, b"x", ""),
                ]),
                "through the symlink",
            ),
        ] {
            let e = read_entries(&archive, 100).unwrap_err();
            assert!(e.message.contains(says), "{says}: {}", e.message);
        }
        assert!(read_entries(b"not a tar at all, certainly", 10).is_err());
    }

    #[test]
    fn a_built_archive_reads_back() {
        let t = build(&[("a/b.txt".into(), 0o600, b"hi".to_vec())]).unwrap();
        let e = read_entries(&t, 10).unwrap();
        assert_eq!(
            e,
            vec![Entry::File {
                path: "a/b.txt".into(),
                mode: 0o600,
                data: b"hi".to_vec()
            }]
        );
    }
}
