//! Every decoder of a stored object, behind a valid header and hash: what a
//! disk, a remote or a hand-edited store can hold. The first byte picks the
//! kind; the rest is the payload. Decoding may refuse, never panic; what is
//! accepted is walked (fsck, the image's user) as the runtime would.
#![no_main]

use arbor_runtime::store::ObjectKind;
use arbor_runtime::store::wasm_refs::{decode_page_index, encode_page_index};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, payload)) = data.split_first() else {
        return;
    };
    let rt = arbor_fuzz::runtime();
    let store = rt.store();
    let kind = match pick % 6 {
        0 => {
            // The page index of a WebAssembly memory image: what decodes
            // re-encodes to the same bytes.
            if let Some(pages) = decode_page_index(payload) {
                assert_eq!(encode_page_index(&pages), payload);
            }
            return;
        }
        1 => ObjectKind::Blob,
        2 => ObjectKind::Tree,
        3 => ObjectKind::Manifest,
        4 => ObjectKind::WasmManifest,
        _ => ObjectKind::Image,
    };
    let id = store.put(kind, payload).expect("put into the fuzz store");
    match kind {
        ObjectKind::Blob => assert_eq!(store.get_blob(&id).expect("a blob reads back"), payload),
        ObjectKind::Tree => {
            if let Ok(tree) = store.get_tree(&id) {
                arbor_runtime::store::validate_tree(&tree).expect("get_tree returns valid trees");
            }
        }
        ObjectKind::Manifest => {
            if store.get_manifest(&id).is_ok() && store.list_snapshot(&id).is_ok() {
                let _ = store.fsck();
                let _ = rt.resolve(&id.to_hex());
                store.unlist_snapshot(&id).expect("unlist");
            }
        }
        ObjectKind::WasmManifest => {
            let _ = store.wasm_refs(&id);
        }
        ObjectKind::Image => {
            if store.get_image(&id).is_ok() {
                let _ = rt.image_by_id(&id);
            }
        }
    }
    let _ = std::fs::remove_file(store.object_path(&id));
});
