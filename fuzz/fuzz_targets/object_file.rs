//! The object file header: magic, version, kind byte, payload length. The
//! id given is the file's own hash, so only the header can refuse it, and
//! it must refuse exactly the files whose header is wrong.
#![no_main]

use std::path::Path;

use arbor_runtime::store::{OBJECT_HEADER_LEN, ObjectId, ObjectKind, Store};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let id = ObjectId::hash(data);
    let got = Store::check_raw(&id, data, Path::new("fuzz-input"));
    let well_formed = data.len() >= OBJECT_HEADER_LEN
        && data[..4] == arbor_runtime::store::OBJECT_MAGIC
        && data[4] == arbor_runtime::store::OBJECT_VERSION
        && ObjectKind::from_byte(data[5]).is_some()
        && u64::from_le_bytes(data[6..OBJECT_HEADER_LEN].try_into().unwrap())
            == (data.len() - OBJECT_HEADER_LEN) as u64;
    assert_eq!(got.is_ok(), well_formed, "{got:?}");
    if let Ok(kind) = got {
        assert_eq!(kind as u8, data[5]);
        // Any other id is refused: the hash check is not skipped.
        let mut other = id;
        other.0[0] ^= 1;
        assert!(Store::check_raw(&other, data, Path::new("fuzz-input")).is_err());
    }
});
