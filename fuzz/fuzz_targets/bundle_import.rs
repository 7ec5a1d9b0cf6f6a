//! A bundle (`arbor import`, `POST /v1/bundles`): refused with a named
//! error or imported whole. A refused bundle leaves the store as it was:
//! nothing listed, no tag set, fsck clean.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let rt = arbor_fuzz::runtime();
    let store = rt.store();
    let before = (store.snapshots().unwrap(), store.tags().unwrap());
    match arbor_runtime::bundle::import(store, data) {
        Ok(report) => {
            for root in &report.roots {
                assert!(store.is_listed(&root.id), "an imported root is listed");
            }
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            let after = (store.snapshots().unwrap(), store.tags().unwrap());
            assert_eq!(before, after, "a refused bundle changed the store: {e}");
        }
    }
});
