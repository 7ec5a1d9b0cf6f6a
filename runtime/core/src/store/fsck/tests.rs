use super::super::tests::{manifest, store};
use super::super::{Tree, TreeEntry};
use super::*;
use std::os::unix::fs::symlink;

/// Test-only directory → tree (the real one belongs to the layer module).
pub(crate) fn tree_of(dir: &Path) -> Tree {
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<TreeEntry>) {
        for (name, path) in sorted_entries(dir).unwrap() {
            let md = fs::symlink_metadata(&path).unwrap();
            let rel = format!("{prefix}{name}");
            let kind = if md.is_dir() {
                walk(&path, &format!("{rel}/"), out);
                EntryKind::Dir {
                    opaque: is_opaque(&path),
                }
            } else if md.file_type().is_char_device() && md.rdev() == 0 {
                EntryKind::Whiteout
            } else if md.file_type().is_symlink() {
                EntryKind::Symlink {
                    target: fs::read_link(&path).unwrap().to_str().unwrap().into(),
                }
            } else {
                EntryKind::File {
                    size: md.len(),
                    hash: hash_file(&path).unwrap(),
                }
            };
            out.push(TreeEntry {
                path: rel,
                mode: md.mode() & 0o7777,
                uid: 0,
                gid: 0,
                kind,
            });
        }
    }
    let mut entries = Vec::new();
    walk(dir, "", &mut entries);
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Tree { entries }
}

/// Build a layer dir in tmp/, store its tree, and move it into layers/.
pub(crate) fn make_layer(s: &Store, files: &[(&str, &[u8])]) -> LayerId {
    let staging = s.new_temp_path(".staging");
    for (path, content) in files {
        let p = staging.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }
    symlink("../etc/passwd", staging.join("link")).unwrap();
    let id = s.put_tree(&tree_of(&staging)).unwrap();
    if !s.layer_dir(&id).exists() {
        fs::rename(&staging, s.layer_dir(&id)).unwrap();
    }
    id
}

#[test]
fn hand_built_layer_is_clean_and_a_flipped_byte_is_named() {
    let (_d, s) = store();
    let layer = make_layer(&s, &[("src/main.py", b"print(1)\n"), ("README", b"hi")]);
    let id = s.put_manifest(&manifest(None, vec![layer])).unwrap();
    s.list_snapshot(&id).unwrap();
    let report = s.fsck().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.layers_checked, 1);
    assert_eq!(report.files_checked, 4);
    assert!(report.garbage.is_empty(), "{:?}", report.garbage);

    let f = s.layer_dir(&layer).join("src/main.py");
    fs::write(&f, b"print(2)\n").unwrap();
    let report = s.fsck().unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let p = &report.problems[0];
    assert_eq!(p.object_or_path, format!("layers/{layer}/src/main.py"));
    assert!(p.what.starts_with("content hash mismatch"), "{p}");
    assert_eq!(s.verify_layer(&layer).unwrap(), report.problems);
}

#[test]
fn layer_changes_of_every_kind_are_reported() {
    let (_d, s) = store();
    let layer = make_layer(&s, &[("a", b"1"), ("d/b", b"2")]);
    let dir = s.layer_dir(&layer);
    fs::remove_file(dir.join("link")).unwrap();
    symlink("/elsewhere", dir.join("link")).unwrap();
    fs::write(dir.join("extra"), b"").unwrap();
    fs::remove_file(dir.join("d/b")).unwrap();
    fs::write(dir.join("a"), b"longer").unwrap();
    fs::set_permissions(dir.join("d"), Permissions::from_mode(0o700)).unwrap();
    let whats: Vec<_> = s
        .verify_layer(&layer)
        .unwrap()
        .into_iter()
        .map(|p| p.to_string())
        .collect();
    let has = |needle: &str| whats.iter().any(|w| w.contains(needle));
    assert!(has("/a: size mismatch"), "{whats:?}");
    assert!(
        has("/extra: present in the layer directory but not in its tree"),
        "{whats:?}"
    );
    assert!(
        has("/d/b: listed in the layer's tree but missing"),
        "{whats:?}"
    );
    assert!(has("/link: symlink target mismatch"), "{whats:?}");
    assert!(has("/d: mode mismatch"), "{whats:?}");
    assert_eq!(whats.len(), 5, "{whats:?}");
}

#[test]
fn unreadable_files_are_still_verified() {
    let (_d, s) = store();
    let layer = make_layer(&s, &[("secret", b"x")]);
    let p = s.layer_dir(&layer).join("secret");
    fs::set_permissions(&p, Permissions::from_mode(0o000)).unwrap();
    let mut tree = s.get_tree(&layer).unwrap();
    tree.entries
        .iter_mut()
        .find(|e| e.path == "secret")
        .unwrap()
        .mode = 0;
    let id2 = s.put_tree(&tree).unwrap();
    fs::rename(s.layer_dir(&layer), s.layer_dir(&id2)).unwrap();
    assert!(s.verify_layer(&id2).unwrap().is_empty());
    assert_eq!(
        fs::symlink_metadata(s.layer_dir(&id2).join("secret"))
            .unwrap()
            .mode()
            & 0o777,
        0
    );
}

#[test]
fn whiteouts_and_opaque_dirs_verify() {
    let (_d, s) = store();
    let staging = s.new_temp_path(".staging");
    fs::create_dir_all(staging.join("opaque")).unwrap();
    let wh = staging.join("deleted");
    let made = rustix::fs::mknodat(
        rustix::fs::CWD,
        &wh,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    );
    if made.is_err() {
        eprintln!("skipping: cannot create a whiteout (needs CAP_MKNOD)");
        return;
    }
    let opaque = rustix::fs::lsetxattr(
        staging.join("opaque"),
        "user.overlay.opaque",
        b"y",
        rustix::fs::XattrFlags::empty(),
    )
    .is_ok();
    let tree = tree_of(&staging);
    assert_eq!(tree.entries[0].kind, EntryKind::Whiteout);
    assert_eq!(tree.entries[1].kind, EntryKind::Dir { opaque });
    let id = s.put_tree(&tree).unwrap();
    fs::rename(&staging, s.layer_dir(&id)).unwrap();
    assert!(s.verify_layer(&id).unwrap().is_empty());
    if opaque {
        rustix::fs::lremovexattr(s.layer_dir(&id).join("opaque"), "user.overlay.opaque").unwrap();
        let problems = s.verify_layer(&id).unwrap();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].what.starts_with("opaque marker differs"));
    }
    fs::remove_file(s.layer_dir(&id).join("deleted")).unwrap();
    fs::write(s.layer_dir(&id).join("deleted"), b"").unwrap();
    let problems = s.verify_layer(&id).unwrap();
    assert!(
        problems.iter().any(|p| p
            .to_string()
            .ends_with("/deleted: kind mismatch (tree says whiteout, layer has a regular file)")),
        "{problems:?}"
    );
    let id2 = s.put_manifest(&manifest(None, vec![id])).unwrap();
    s.list_snapshot(&id2).unwrap();
    s.remove_snapshot(&id2).unwrap();
    assert_eq!(s.gc().unwrap().layers_removed, 1);
}

#[test]
fn with_access_restores_the_mode() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("f");
    fs::write(&p, b"x").unwrap();
    fs::set_permissions(&p, Permissions::from_mode(0o000)).unwrap();
    let md = fs::symlink_metadata(&p).unwrap();
    let during = with_access(&p, &md, 0o400, false, || {
        Ok(fs::symlink_metadata(&p).unwrap().mode() & 0o777)
    })
    .unwrap();
    assert_eq!(during, 0o400);
    assert_eq!(fs::symlink_metadata(&p).unwrap().mode() & 0o777, 0);
}

#[test]
fn missing_layer_and_dangling_tag_are_problems_garbage_is_not() {
    let (_d, s) = store();
    let layer = make_layer(&s, &[("f", b"1")]);
    let id = s.put_manifest(&manifest(None, vec![layer])).unwrap();
    s.list_snapshot(&id).unwrap();
    s.set_tag("t", &id).unwrap();
    s.put_blob(b"orphan").unwrap();
    fs::write(s.tmp_dir().join("999999999.1.abc"), b"").unwrap();
    let report = s.fsck().unwrap();
    assert!(report.is_clean());
    assert_eq!(report.garbage.len(), 2, "{:?}", report.garbage);
    s.unlist_snapshot(&id).unwrap();
    fs::rename(s.layer_dir(&layer), s.tmp_dir().join("gone")).unwrap();
    let report = s.fsck().unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(report.problems[0].what.contains("not listed"));
    s.list_snapshot(&id).unwrap();
    let report = s.fsck().unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.what == "layer directory missing")
    );
}
