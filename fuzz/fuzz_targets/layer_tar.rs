//! An image layer's tar, unpacked as image import and image build do: it
//! may be refused, never panic, and never write beside its destination
//! (`../`, absolute names, links and symlinks out). What unpacks scans as a
//! layer.
#![no_main]

use arbor_runtime::layer::{OwnerMap, UntarLimits, tree_of_dir, untar_layer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let case = arbor_fuzz::fresh_dir();
    let dest = case.path().join("dest");
    let beside = case.path().join("beside");
    std::fs::create_dir(&dest).unwrap();
    std::fs::create_dir(&beside).unwrap();
    let owners = OwnerMap::current_user();
    let limits = UntarLimits {
        max_bytes: 8 << 20,
        max_entries: 10_000,
    };
    let below = |p: &str| p.starts_with("etc");
    let got = untar_layer(data, &dest, &below, &owners, &limits, "fuzz layer");
    let outside: Vec<_> = std::fs::read_dir(&beside).unwrap().collect();
    assert!(
        outside.is_empty(),
        "the layer wrote beside its destination: {outside:?}"
    );
    let around: Vec<_> = std::fs::read_dir(case.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        around.len(),
        2,
        "the layer wrote next to its destination: {around:?}"
    );
    if got.is_ok() {
        tree_of_dir(&dest, &owners).expect("an unpacked layer scans");
    }
});
