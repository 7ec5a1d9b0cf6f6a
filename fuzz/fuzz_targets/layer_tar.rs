//! An image layer's tar, unpacked as image import and image build do: it
//! may be refused, never panic, and never write beside its destination
//! (`../`, absolute names, links and symlinks out). What unpacks scans as a
//! layer.
#![no_main]

use arbor_runtime::layer::{OwnerMap, tree_of_dir, untar_layer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let out = arbor_fuzz::Contained::default();
    let owners = OwnerMap::current_user();
    let below = |p: &str| p.starts_with("etc");
    let limits = arbor_fuzz::UNTAR_LIMITS;
    let got = untar_layer(data, &out.dest, &below, &owners, &limits, "fuzz layer");
    out.check();
    if got.is_ok() {
        tree_of_dir(&out.dest, &owners).expect("an unpacked layer scans");
    }
});
