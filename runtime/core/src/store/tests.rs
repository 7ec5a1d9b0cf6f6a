use super::*;

pub(crate) fn store() -> (tempfile::TempDir, Store) {
    let d = tempfile::tempdir().unwrap();
    let s = Store::open(&d.path().join("store"), OwnerMode::Rootless).unwrap();
    (d, s)
}

pub(crate) fn manifest(parent: Option<SnapshotId>, layers: Vec<LayerId>) -> Manifest {
    Manifest {
        layers,
        session: SessionState::default(),
        parent,
        action: None,
        observations: vec![],
        created_at: 1,
        killed_background: vec![],
        image: None,
        workdir: None,
    }
}

fn flip(path: &Path, at: usize) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).unwrap();
    let mut b = fs::read(path).unwrap();
    b[at] ^= 0x01;
    fs::write(path, b).unwrap();
}

#[test]
fn put_get_roundtrip_and_idempotent() {
    fn send_sync<T: Send + Sync + Clone>() {}
    send_sync::<Store>();
    let (_d, s) = store();
    let id = s.put_blob(b"hello").unwrap();
    assert_eq!(s.put_blob(b"hello").unwrap(), id);
    assert_eq!(s.get_blob(&id).unwrap(), b"hello");
    let m = manifest(None, vec![]);
    let mid = s.put_manifest(&m).unwrap();
    assert_eq!(s.get_manifest(&mid).unwrap(), m);
    assert_ne!(s.put(ObjectKind::Tree, b"hello").unwrap(), id);
    assert!(matches!(
        s.get_blob(&ObjectId([7; 32])),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn flipped_byte_is_corrupt_and_fsck_reports_it() {
    let (_d, s) = store();
    let id = s.put_blob(b"some content").unwrap();
    let path = s.object_path(&id);
    flip(&path, OBJECT_HEADER_LEN + 3);
    let err = s.get_blob(&id).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains(&path.display().to_string()));
    let report = s.fsck().unwrap();
    assert!(!report.is_clean());
    assert!(
        report.problems[0]
            .object_or_path
            .contains(&id.to_hex()[2..])
    );
}

#[test]
fn truncated_header_and_wrong_kind() {
    let (_d, s) = store();
    let id = s.put_blob(b"x").unwrap();
    assert!(matches!(
        s.get_tree(&id),
        Err(StoreError::WrongKind {
            actual: ObjectKind::Blob,
            expected: ObjectKind::Tree,
            ..
        })
    ));
    fs::write(s.object_path(&id), b"ARBO\x01").unwrap();
    assert!(matches!(
        s.get_blob(&id),
        Err(StoreError::Corrupt { reason, .. }) if reason.contains("truncated header")
    ));
}

#[test]
fn invalid_trees_are_refused() {
    let (_d, s) = store();
    let e = |p: &str| TreeEntry {
        path: p.into(),
        mode: 0o644,
        uid: 0,
        gid: 0,
        kind: EntryKind::Whiteout,
    };
    for entries in [
        vec![e("b"), e("a")],
        vec![e("a"), e("a")],
        vec![e("/a")],
        vec![e("a/../b")],
        vec![e("a//b")],
        vec![e("./a")],
        vec![e("")],
    ] {
        assert!(matches!(
            s.put_tree(&Tree { entries }),
            Err(StoreError::InvalidTree { .. })
        ));
    }
    assert!(
        s.put_tree(&Tree {
            entries: vec![e("a"), e("a/b")]
        })
        .is_ok()
    );
}

#[test]
fn mode_mismatch_is_explained() {
    let d = tempfile::tempdir().unwrap();
    Store::open(d.path(), OwnerMode::Rootless).unwrap();
    let err = Store::open(d.path(), OwnerMode::Root { uid_base: 100_000 }).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("written in rootless mode"), "{msg}");
    assert!(msg.contains("runs as real root"), "{msg}");
    assert!(msg.contains(&d.path().display().to_string()), "{msg}");
    let d2 = tempfile::tempdir().unwrap();
    Store::open(d2.path(), OwnerMode::Root { uid_base: 1 }).unwrap();
    let err = Store::open(d2.path(), OwnerMode::Rootless).unwrap_err();
    assert!(err.to_string().contains("written in root mode"), "{err}");
    assert!(matches!(
        Store::open(d2.path(), OwnerMode::Root { uid_base: 2 }),
        Err(StoreError::UidBaseMismatch { .. })
    ));
    assert!(Store::open(d2.path(), OwnerMode::Root { uid_base: 1 }).is_ok());
}

#[test]
fn locks_exclude_each_other() {
    let (_d, s) = store();
    let shared = s.lock_shared().unwrap();
    let _shared2 = s.lock_shared().unwrap();
    let path = s.root().join("lock");
    let f = File::open(&path).unwrap();
    assert!(rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err());
    drop(shared);
    drop(_shared2);
    assert!(rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok());
}

/// Re-executed in a child process by `failpoints_leave_fsck_clean`.
#[test]
fn failpoint_child() {
    let Some(root) = std::env::var_os("ARBOR_FAILPOINT_STORE") else {
        return;
    };
    let s = Store::open(Path::new(&root), OwnerMode::Rootless).unwrap();
    let blob = s.put_blob(b"payload").unwrap();
    let _ = blob;
    // A group commit of two objects (one already stored).
    let mut batch = Batch::default();
    batch.add(ObjectKind::Blob, &b"payload"[..]);
    batch.add(ObjectKind::Blob, &b"batched"[..]);
    batch.add(ObjectKind::Blob, &b"batched too"[..]);
    let staged = batch.stage(&s).unwrap();
    assert_eq!(staged.len(), 2);
    staged.sync().unwrap();
    staged.publish(&[]).unwrap();
    let id = s.put_manifest(&manifest(None, vec![])).unwrap();
    s.list_snapshot(&id).unwrap();
    s.set_tag("t", &id).unwrap();
    s.remove_snapshot(&id).unwrap();
    s.gc().unwrap();
}

#[test]
fn failpoints_leave_fsck_clean() {
    let exe = std::env::current_exe().unwrap();
    // libtest names tests by their path without the crate name.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let name = format!("{module}::failpoint_child");
    for fp in FAILPOINTS {
        let d = tempfile::tempdir().unwrap();
        let status = std::process::Command::new(&exe)
            .args(["--exact", &name, "--test-threads=1"])
            .env("ARBOR_FAILPOINT", fp)
            .env("ARBOR_FAILPOINT_STORE", d.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(86), "failpoint {fp} was not reached");
        let s = Store::open(d.path(), OwnerMode::Rootless).unwrap();
        let report = s.fsck().unwrap();
        assert!(report.is_clean(), "after {fp}: {:?}", report.problems);
    }
}

mod proptests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn blobs_roundtrip_and_corruption_is_detected(
            data in proptest::collection::vec(any::<u8>(), 0..2048),
            at in any::<proptest::sample::Index>(),
            mask in 1u8..=255,
        ) {
            let (_d, s) = store();
            let id = s.put_blob(&data).unwrap();
            prop_assert_eq!(s.get_blob(&id).unwrap(), data.clone());
            let path = s.object_path(&id);
            let mut bytes = fs::read(&path).unwrap();
            let i = at.index(bytes.len());
            bytes[i] ^= mask;
            fs::write(&path, &bytes).unwrap();
            let corrupt = matches!(s.get_blob(&id), Err(StoreError::Corrupt { .. }));
            prop_assert!(corrupt);
        }
    }
}
