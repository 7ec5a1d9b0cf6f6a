//! Bundles between two stores: a round trip keeps every byte, mode and
//! link (FIFOs, whiteouts and parent chains: tests/tests/bundle.rs); an incremental bundle leaves out what its base holds; and a
//! truncated, tampered or incomplete bundle is refused by name with the
//! receiving store unchanged (each refusal beside the same bundle, intact,
//! going in).

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::*;
use crate::Runtime;

fn fixture(dir: &Path) {
    std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
    std::fs::write(dir.join("a.txt"), "hello\n").unwrap();
    std::fs::write(dir.join("sub/b.txt"), "hello\n").unwrap();
    std::fs::write(dir.join("sub/empty"), "").unwrap();
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(dir.join("sub/deeper/big.bin"), big).unwrap();
    std::fs::write(dir.join("run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    std::fs::set_permissions(
        dir.join("sub/deeper"),
        std::fs::Permissions::from_mode(0o711),
    )
    .unwrap();
    std::os::unix::fs::symlink("../a.txt", dir.join("sub/link")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.join("abs-link")).unwrap();
}

struct Pair {
    _dir: tempfile::TempDir,
    from: Runtime,
    to: Runtime,
    src: std::path::PathBuf,
}

fn pair() -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    fixture(&src);
    let from = Runtime::open_at(dir.path().join("from")).unwrap();
    let to = Runtime::open_at(dir.path().join("to")).unwrap();
    Pair {
        from,
        to,
        src,
        _dir: dir,
    }
}

fn bundle(store: &Store, roots: &[BundleRoot], since: &[SnapshotId]) -> (Vec<u8>, ExportReport) {
    let mut out = Vec::new();
    let rep = export(store, roots, since, &mut out, &mut |_| {}).unwrap();
    assert_eq!(rep.bytes, out.len() as u64);
    (out, rep)
}

fn root(id: &SnapshotId, tag: Option<&str>) -> BundleRoot {
    BundleRoot {
        id: *id,
        tag: tag.map(str::to_owned),
    }
}

/// Every path under the store (but `tmp/` and the lock), with its type and size.
fn fingerprint(root: &Path) -> BTreeMap<String, (u32, u64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if rel == "tmp" || rel == "lock" {
                continue;
            }
            let md = std::fs::symlink_metadata(&p).unwrap();
            out.insert(rel, (md.mode() & libc::S_IFMT, md.len()));
            if md.is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

fn tmp_is_empty(store: &Store) -> bool {
    std::fs::read_dir(store.tmp_dir()).unwrap().next().is_none()
}

#[test]
fn a_round_trip_keeps_every_file_mode_and_link_and_fsck_is_clean() {
    let p = pair();
    let snap = p.from.import(&p.src, Some("base")).unwrap();
    let (bytes, out) = bundle(p.from.store(), &[root(snap.id(), Some("base"))], &[]);
    assert_eq!(out.snapshots, 1);
    assert_eq!(out.layers, 1);
    // "hello\n" twice, sent once.
    assert_eq!(out.contents, 4, "{out:?}");
    let rep = import(p.to.store(), &bytes[..]).unwrap();
    assert_eq!(rep.layers_new, 1);
    assert_eq!(rep.objects_new, out.objects);
    assert_eq!(rep.snapshots_listed, 1);
    assert_eq!(rep.tags_set, vec!["base".to_owned()]);
    assert!(p.to.store().is_listed(snap.id()));
    assert_eq!(p.to.store().get_tag("base").unwrap(), Some(*snap.id()));
    let fsck = p.to.store().fsck().unwrap();
    assert!(fsck.is_clean(), "{:?}", fsck.problems);
    assert_eq!(fsck.layers_checked, 1);
    assert!(tmp_is_empty(p.to.store()));

    // The imported snapshot checks out to the very files the exported one does.
    let there = p.to.snapshot(snap.id()).unwrap();
    let dest = p._dir.path().join("checkout");
    p.to.checkout(&there, &dest).unwrap();
    let here = p._dir.path().join("checkout-source");
    p.from.checkout(&snap, &here).unwrap();
    let owners = p.to.owner_map();
    let a = crate::layer::tree_of_dir(&here, &owners).unwrap();
    let b = crate::layer::tree_of_dir(&dest, &owners).unwrap();
    assert_eq!(a.entries.len(), 9, "{a:?}");
    assert_eq!(a, b);
    assert_eq!(
        std::fs::read_link(dest.join("sub/link")).unwrap(),
        Path::new("../a.txt")
    );

    // Again: everything is there already, nothing is rewritten.
    let again = import(p.to.store(), &bytes[..]).unwrap();
    assert_eq!(again.objects_new, 0);
    assert_eq!(again.layers_new, 0);
    assert_eq!(again.layers_present, 1);
    assert_eq!(again.snapshots_listed, 0);
    assert_eq!(again.tags_set, vec!["base".to_owned()]);
}

#[test]
fn a_tag_that_names_another_snapshot_is_left_alone() {
    let p = pair();
    let snap = p.from.import(&p.src, None).unwrap();
    let other = p.to.import(&p.src.join("sub"), Some("taken")).unwrap();
    let (bytes, _) = bundle(p.from.store(), &[root(snap.id(), Some("taken"))], &[]);
    let rep = import(p.to.store(), &bytes[..]).unwrap();
    assert_eq!(rep.tags_conflicting, vec!["taken".to_owned()]);
    assert!(rep.tags_set.is_empty());
    assert_eq!(p.to.store().get_tag("taken").unwrap(), Some(*other.id()));
    assert!(p.to.store().is_listed(snap.id()));
}

#[test]
fn an_incremental_bundle_leaves_out_what_the_base_holds_and_needs_the_base() {
    let p = pair();
    let base = p.from.import(&p.src, None).unwrap();
    // A second snapshot sharing every file but one.
    std::fs::write(p.src.join("a.txt"), "changed\n").unwrap();
    let next = p.from.import(&p.src, None).unwrap();
    let (full, full_rep) = bundle(p.from.store(), &[root(next.id(), None)], &[]);
    let (inc, inc_rep) = bundle(p.from.store(), &[root(next.id(), None)], &[*base.id()]);
    // Only "changed\n" travels: the 3 MB file and the rest are the base's.
    assert_eq!(inc_rep.contents, 1, "{inc_rep:?}");
    assert!(
        inc.len() * 20 < full.len(),
        "{} vs {}",
        inc.len(),
        full.len()
    );
    assert_eq!(full_rep.contents, 5);

    // Without the base: refused by name, nothing stored.
    let before = fingerprint(p.to.store().root());
    let err = import(p.to.store(), &inc[..]).unwrap_err();
    assert!(matches!(err, BundleError::MissingBase { .. }), "{err}");
    assert!(err.to_string().contains(&base.id().short()), "{err}");
    assert_eq!(fingerprint(p.to.store().root()), before);
    assert!(tmp_is_empty(p.to.store()));

    // With the base: the files come from the base's layer.
    let (base_bundle, _) = bundle(p.from.store(), &[root(base.id(), None)], &[]);
    import(p.to.store(), &base_bundle[..]).unwrap();
    let rep = import(p.to.store(), &inc[..]).unwrap();
    assert_eq!(rep.layers_new, 1);
    assert!(p.to.store().fsck().unwrap().is_clean());
    let dest = p._dir.path().join("checkout");
    p.to.checkout(&p.to.snapshot(next.id()).unwrap(), &dest)
        .unwrap();
    assert_eq!(std::fs::read(dest.join("a.txt")).unwrap(), b"changed\n");
    assert_eq!(
        std::fs::read(dest.join("sub/deeper/big.bin")).unwrap(),
        std::fs::read(p.src.join("sub/deeper/big.bin")).unwrap()
    );
}

/// Offsets of every frame of a bundle, and its length.
fn frames(bytes: &[u8]) -> Vec<(usize, u8)> {
    let mut at = PREAMBLE;
    let mut out = Vec::new();
    while at < bytes.len() {
        let kind = bytes[at];
        let len = u64::from_le_bytes(bytes[at + 1..at + 9].try_into().unwrap()) as usize;
        out.push((at, kind));
        at += 9 + len;
    }
    assert_eq!(at, bytes.len());
    out
}

#[test]
fn a_truncated_bundle_is_refused_and_the_store_is_unchanged() {
    let p = pair();
    let snap = p.from.import(&p.src, Some("t")).unwrap();
    let (bytes, _) = bundle(p.from.store(), &[root(snap.id(), Some("t"))], &[]);
    let before = fingerprint(p.to.store().root());
    let mut cuts: Vec<usize> = frames(&bytes)
        .iter()
        .flat_map(|(at, _)| [*at, at + 5, at + 40])
        .collect();
    cuts.extend([0, 3, 8, 15, bytes.len() / 2, bytes.len() - 1]);
    for cut in cuts.into_iter().filter(|c| *c < bytes.len()) {
        let err = import(p.to.store(), &bytes[..cut]).unwrap_err();
        assert!(
            matches!(
                err,
                BundleError::Truncated { .. } | BundleError::NotABundle(_)
            ),
            "cut at {cut}: {err}"
        );
        assert_eq!(fingerprint(p.to.store().root()), before, "cut at {cut}");
        assert!(tmp_is_empty(p.to.store()), "cut at {cut}");
    }
    // Positive control: the whole bundle goes in.
    import(p.to.store(), &bytes[..]).unwrap();
    assert_ne!(fingerprint(p.to.store().root()), before);
}

#[test]
fn a_tampered_bundle_is_refused_by_name_and_the_store_is_unchanged() {
    let p = pair();
    let snap = p.from.import(&p.src, None).unwrap();
    let (bytes, _) = bundle(p.from.store(), &[root(snap.id(), None)], &[]);
    let before = fingerprint(p.to.store().root());
    let fr = frames(&bytes);
    // One byte flipped in each frame's payload (and in its kind byte), then
    // a frame dropped, two frames swapped, and bytes after the end.
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, (at, kind)) in fr.iter().enumerate() {
        let end = fr.get(i + 1).map_or(bytes.len(), |n| n.0);
        for off in [at + 9, (at + 9 + end) / 2, end - 1] {
            if off < end {
                let mut b = bytes.clone();
                b[off] ^= 0x20;
                cases.push((format!("flip in {} frame at {off}", *kind as char), b));
            }
        }
        let mut b = bytes.clone();
        b[*at] = b'Z';
        cases.push((format!("kind of {} frame", *kind as char), b));
        if *kind != HEADER && *kind != END {
            let mut b = bytes[..*at].to_vec();
            b.extend_from_slice(&bytes[end..]);
            cases.push((format!("{} frame dropped", *kind as char), b));
        }
    }
    let mut b = bytes.clone();
    b.extend_from_slice(b"junk");
    cases.push(("bytes after the end".into(), b));
    let mut b = bytes.clone();
    b[8] = 9;
    cases.push(("version".into(), b));
    for (what, b) in &cases {
        let err = import(p.to.store(), &b[..]).unwrap_err();
        assert!(
            matches!(
                err,
                BundleError::Tampered { .. }
                    | BundleError::Truncated { .. }
                    | BundleError::Version { .. }
                    | BundleError::MissingContent { .. }
            ),
            "{what}: {err}"
        );
        assert_eq!(fingerprint(p.to.store().root()), before, "{what}");
        assert!(tmp_is_empty(p.to.store()), "{what}");
    }
    assert!(cases.len() > 20);
    // Positive control.
    import(p.to.store(), &bytes[..]).unwrap();
    assert!(p.to.store().fsck().unwrap().is_clean());
}

#[test]
fn garbage_and_empty_input_are_not_bundles() {
    let p = pair();
    for input in [&b""[..], b"hello world, not a bundle", b"ARBORBD"] {
        let err = import(p.to.store(), input).unwrap_err();
        assert!(matches!(err, BundleError::NotABundle(_)), "{err}");
    }
}

#[test]
fn a_damaged_source_store_fails_the_export() {
    let p = pair();
    let snap = p.from.import(&p.src, None).unwrap();
    let layer = p.from.snapshot(snap.id()).unwrap().manifest().layers[0];
    let file = p.from.store().layer_dir(&layer).join("a.txt");
    let mut perms = std::fs::metadata(&file).unwrap().permissions();
    perms.set_mode(0o644);
    std::fs::set_permissions(&file, perms).unwrap();
    std::fs::write(&file, "HELLO\n").unwrap();
    let mut out = Vec::new();
    let err = export(
        p.from.store(),
        &[root(snap.id(), None)],
        &[],
        &mut out,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(err.to_string().contains("a.txt"), "{err}");
    // What was written has the bad content and no end frame: no importer takes it.
    let err = import(p.to.store(), &out[..]).unwrap_err();
    assert!(
        matches!(
            err,
            BundleError::Tampered { .. } | BundleError::Truncated { .. }
        ),
        "{err}"
    );
}

/// `bytes` with only the frames `keep` keeps, and a fresh end frame whose
/// counts and digest match what is left (what a forger would write).
fn reframe(bytes: &[u8], keep: impl Fn(u8, &[u8]) -> bool) -> Vec<u8> {
    let fr = frames(bytes);
    let mut out = bytes[..PREAMBLE].to_vec();
    let mut counts = (0u64, 0u64, 0u64);
    for (i, (at, kind)) in fr.iter().enumerate() {
        let end = fr.get(i + 1).map_or(bytes.len(), |n| n.0);
        if *kind == END || !keep(*kind, &bytes[at + 9..end]) {
            continue;
        }
        match *kind {
            OBJECT => counts.0 += 1,
            CONTENT => counts.1 += 1,
            LAYER => counts.2 += 1,
            _ => {}
        }
        out.extend_from_slice(&bytes[*at..end]);
    }
    let t = Trailer {
        objects: counts.0,
        contents: counts.1,
        layers: counts.2,
        digest: blake3::hash(&out).to_hex().to_string(),
    };
    let j = json(&t);
    out.push(END);
    out.extend_from_slice(&(j.len() as u64).to_le_bytes());
    out.extend_from_slice(&j);
    out
}

#[test]
fn a_forged_bundle_without_what_its_manifest_names_lists_nothing() {
    let p = pair();
    let snap = p.from.import(&p.src, Some("f")).unwrap();
    let (bytes, _) = bundle(p.from.store(), &[root(snap.id(), Some("f"))], &[]);
    let layers = p.from.store().snapshot_refs(snap.id()).unwrap().layers;
    assert_eq!(layers.len(), 1);
    // Positive control for the forger: a reframe that keeps everything imports.
    let same = reframe(&bytes, |_, _| true);
    assert_eq!(same, bytes);
    // The layer (its tree and its rebuild frame) left out, counts and digest redone.
    let forged = reframe(&bytes, |kind, payload| {
        kind != LAYER && !(kind == OBJECT && payload[..32] == layers[0].0)
    });
    let err = import(p.to.store(), &forged[..]).unwrap_err();
    assert!(matches!(err, BundleError::Incomplete { .. }), "{err}");
    assert!(err.to_string().contains(&layers[0].to_hex()), "{err}");
    assert!(!p.to.store().is_listed(snap.id()));
    assert_eq!(p.to.store().get_tag("f").unwrap(), None);
    assert!(p.to.store().snapshots().unwrap().is_empty());
    // The intact bundle still goes in over what the forgery left.
    import(p.to.store(), &bytes[..]).unwrap();
    assert!(p.to.store().is_listed(snap.id()));
    assert!(p.to.store().fsck().unwrap().is_clean());
}
