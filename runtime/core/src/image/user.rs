//! The image's `User`, resolved to the ids its actions run as.
//!
//! An image's configuration names a user the way a Dockerfile's `USER`
//! does: `name`, `uid`, `name:group`, `uid:gid` (or a mix). Names are looked
//! up in the image's own `/etc/passwd` and `/etc/group` (its topmost layer
//! that has the file); a numeric uid need not be listed (its group is then
//! the passwd entry's, or 0). Resolution fails with a message naming the
//! user and what is missing, and a sandbox on such an image does not open.
//!
//! How the ids are applied: every action of a sandbox on the image runs in a
//! user namespace of its own, nested in the sandbox's, where the sandbox's
//! root is mapped to exactly this uid and gid. So `id` reports the image's
//! user, the action holds no capability (a non-root uid keeps none across
//! `exec`), permission checks apply to it as to that user (a mode-000 file
//! is unreadable, `chown` is refused), and what it writes is stored as
//! today (owned by the sandbox's root, which is what the workspace is
//! owned by, so the workspace stays writable). Every other id, the image's
//! root included, shows as the overflow id (65534) inside; supplementary
//! groups are not kept. This is the same in root and rootless mode, so a
//! replay on either agrees.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The ids an image's actions run as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ImageUser {
    /// The uid inside the action's user namespace.
    pub uid: u32,
    /// The gid inside the action's user namespace.
    pub gid: u32,
}

/// The largest file read for `/etc/passwd` or `/etc/group`.
const MAX_DB_BYTES: u64 = 4 << 20;

/// A user or group database line's fields: `name:x:id:...`.
fn lookup<'a>(db: &'a str, name: &str) -> Option<Vec<&'a str>> {
    db.lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 3 && f[0] == name)
}

fn lookup_id(db: &str, id: u32) -> Option<Vec<&str>> {
    db.lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 4 && f[2].parse::<u32>().ok() == Some(id))
}

/// A numeric id, refusing the value the kernel reserves (`-1`).
fn numeric(s: &str) -> Option<Result<u32, String>> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(match s.parse::<u32>() {
        Ok(n) if n != u32::MAX => Ok(n),
        _ => Err(format!("{s} is not a valid id (0 to {})", u32::MAX - 1)),
    })
}

/// Resolve `spec` (the image's `User`) against the image's user and group
/// databases (`None`: the image has no such file). `Ok(None)`: root, as
/// without a `User`.
///
/// # Errors
/// A message naming the user, or the group, that cannot be resolved.
pub fn resolve(
    spec: &str,
    passwd: Option<&str>,
    group: Option<&str>,
) -> Result<Option<ImageUser>, String> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Ok(None);
    }
    let (user, grp) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    let missing = |what: &str, name: &str, file: &str, present: bool| {
        if present {
            format!("the image's User {spec:?}: no {what} {name:?} in its {file}")
        } else {
            format!(
                "the image's User {spec:?}: {what} {name:?} cannot be looked up: the image has no {file}"
            )
        }
    };
    let (uid, passwd_gid) = match numeric(user) {
        Some(n) => {
            let uid = n.map_err(|e| format!("the image's User {spec:?}: {e}"))?;
            let gid = passwd
                .and_then(|db| lookup_id(db, uid))
                .and_then(|f| f[3].parse::<u32>().ok());
            (uid, gid)
        }
        None => {
            let db = passwd.ok_or_else(|| missing("user", user, "/etc/passwd", false))?;
            let f = lookup(db, user).ok_or_else(|| missing("user", user, "/etc/passwd", true))?;
            let bad = || format!("the image's User {spec:?}: its /etc/passwd entry is malformed");
            let uid = f[2].parse::<u32>().map_err(|_| bad())?;
            let gid = f
                .get(3)
                .ok_or_else(bad)?
                .parse::<u32>()
                .map_err(|_| bad())?;
            (uid, Some(gid))
        }
    };
    let gid = match grp {
        None => passwd_gid.unwrap_or(0),
        Some("") => return Err(format!("the image's User {spec:?}: an empty group")),
        Some(g) => match numeric(g) {
            Some(n) => n.map_err(|e| format!("the image's User {spec:?}: {e}"))?,
            None => {
                let db = group.ok_or_else(|| missing("group", g, "/etc/group", false))?;
                let f = lookup(db, g).ok_or_else(|| missing("group", g, "/etc/group", true))?;
                f[2].parse::<u32>().map_err(|_| {
                    format!("the image's User {spec:?}: its /etc/group entry is malformed")
                })?
            }
        },
    };
    if uid == u32::MAX || gid == u32::MAX {
        return Err(format!(
            "the image's User {spec:?}: id {} is reserved",
            u32::MAX
        ));
    }
    Ok(Some(ImageUser { uid, gid }))
}

/// Whether resolving `spec` needs the image's databases at all.
pub(crate) fn needs_databases(spec: &str) -> bool {
    let spec = spec.trim();
    if spec.is_empty() {
        return false;
    }
    match spec.split_once(':') {
        Some((u, g)) => numeric(u).is_none() || numeric(g).is_none(),
        None => true,
    }
}

/// The text of `rel` (e.g. `etc/passwd`) in a layer chain (topmost first),
/// as the overlay shows it: the topmost layer that has the path decides (a
/// regular file is read; a whiteout, a directory or a link hides it), and a
/// layer where a parent is a whiteout or a file, or an opaque directory
/// without the path, hides it in every lower one. `None` when no file is seen.
pub(crate) fn read_from_layers(layers: &[PathBuf], rel: &str) -> Option<String> {
    let parts: Vec<&str> = rel.split('/').collect();
    'layers: for dir in layers {
        let mut p = dir.clone();
        let mut opaque_above = false;
        for (i, part) in parts.iter().enumerate() {
            p.push(part);
            match std::fs::symlink_metadata(&p) {
                Err(_) if opaque_above => return None,
                Err(_) => continue 'layers,
                Ok(m) if i + 1 == parts.len() => {
                    if !m.is_file() || m.len() > MAX_DB_BYTES {
                        return None;
                    }
                    return std::fs::read(&p)
                        .ok()
                        .map(|b| String::from_utf8_lossy(&b).into_owned());
                }
                Ok(m) if m.is_dir() => {
                    opaque_above |= crate::layer::is_opaque(&p).unwrap_or(false);
                }
                Ok(_) => return None,
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\napp:x:1000:1001::/home/app:/bin/sh\n";
    const GROUP: &str = "root:x:0:\nstaff:x:50:\napp:x:1001:\n";

    #[test]
    fn the_forms_a_dockerfile_user_takes_resolve() {
        let r = |s: &str| resolve(s, Some(PASSWD), Some(GROUP));
        assert_eq!(r(""), Ok(None));
        assert_eq!(
            r("app"),
            Ok(Some(ImageUser {
                uid: 1000,
                gid: 1001
            }))
        );
        assert_eq!(r("app:staff"), Ok(Some(ImageUser { uid: 1000, gid: 50 })));
        assert_eq!(r("app:7"), Ok(Some(ImageUser { uid: 1000, gid: 7 })));
        assert_eq!(
            r("1000"),
            Ok(Some(ImageUser {
                uid: 1000,
                gid: 1001
            }))
        );
        // A uid the image does not list is allowed, with group 0.
        assert_eq!(r("4242"), Ok(Some(ImageUser { uid: 4242, gid: 0 })));
        assert_eq!(r("4242:9"), Ok(Some(ImageUser { uid: 4242, gid: 9 })));
        assert_eq!(r("root"), Ok(Some(ImageUser { uid: 0, gid: 0 })));
        // Numeric ids need no database at all.
        assert_eq!(
            resolve("5:6", None, None),
            Ok(Some(ImageUser { uid: 5, gid: 6 }))
        );
        assert!(!needs_databases("5:6") && needs_databases("app") && needs_databases("5"));
    }

    #[test]
    fn an_unresolvable_user_is_refused_by_name() {
        let r = |s: &str| resolve(s, Some(PASSWD), Some(GROUP)).unwrap_err();
        assert!(r("nobody-here").contains("no user \"nobody-here\" in its /etc/passwd"));
        assert!(r("app:wheel").contains("no group \"wheel\" in its /etc/group"));
        assert!(r("4294967295").contains("not a valid id"));
        assert!(r("99999999999").contains("not a valid id"));
        assert!(r("app:").contains("an empty group"));
        let e = resolve("app", None, None).unwrap_err();
        assert!(e.contains("the image has no /etc/passwd"), "{e}");
        let e = resolve("app", Some("app:x:notanumber:1::/:/bin/sh\n"), None).unwrap_err();
        assert!(e.contains("malformed"), "{e}");
    }

    #[test]
    fn the_topmost_layer_with_the_file_decides() {
        let t = tempfile::tempdir().unwrap();
        let (top, mid, low) = (
            t.path().join("top"),
            t.path().join("mid"),
            t.path().join("low"),
        );
        for d in [&top, &mid, &low] {
            std::fs::create_dir_all(d.join("etc")).unwrap();
        }
        std::fs::write(low.join("etc/passwd"), "low\n").unwrap();
        std::fs::write(mid.join("etc/passwd"), "mid\n").unwrap();
        let chain = vec![top.clone(), mid.clone(), low.clone()];
        assert_eq!(
            read_from_layers(&chain, "etc/passwd").as_deref(),
            Some("mid\n")
        );
        // A directory in the top layer where the file was hides it.
        std::fs::create_dir(top.join("etc/passwd")).unwrap();
        assert_eq!(read_from_layers(&chain, "etc/passwd"), None);
        std::fs::remove_dir(top.join("etc/passwd")).unwrap();
        // A file where its parent was hides it too.
        std::fs::remove_dir(top.join("etc")).unwrap();
        std::fs::write(top.join("etc"), "").unwrap();
        assert_eq!(read_from_layers(&chain, "etc/passwd"), None);
        std::fs::remove_file(top.join("etc")).unwrap();
        // An opaque directory without the file hides the lower ones' (where
        // the filesystem has user xattrs).
        std::fs::create_dir(top.join("etc")).unwrap();
        if rustix::fs::setxattr(
            top.join("etc"),
            "user.overlay.opaque",
            b"y",
            rustix::fs::XattrFlags::empty(),
        )
        .is_ok()
        {
            assert_eq!(read_from_layers(&chain, "etc/passwd"), None);
            std::fs::write(top.join("etc/passwd"), "top\n").unwrap();
            assert_eq!(
                read_from_layers(&chain, "etc/passwd").as_deref(),
                Some("top\n")
            );
        }
        // Control: without the top layer, the middle one's.
        assert_eq!(
            read_from_layers(&chain[1..], "etc/passwd").as_deref(),
            Some("mid\n")
        );
        assert_eq!(
            read_from_layers(&chain[2..], "etc/passwd").as_deref(),
            Some("low\n")
        );
    }
}
