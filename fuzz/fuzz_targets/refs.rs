//! Ref files (`refs/tags/<name>`, `refs/images/<name>`) and what a user
//! types to name a snapshot. The first line is a name, the rest the file's
//! content: a ref reads back exactly when it is 64 hex digits and a newline.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (name, content) = text.split_once('\n').unwrap_or((text, ""));
    let rt = arbor_fuzz::runtime();
    let store = rt.store();
    // Whatever is typed resolves or is refused with a reason.
    if let Err(e) = rt.resolve(name) {
        assert!(!e.to_string().is_empty());
    }
    let canonical = content.len() == 65
        && content.ends_with('\n')
        && content[..64].bytes().all(|b| b.is_ascii_hexdigit());
    if store.get_tag(name).is_ok() {
        // A valid tag name: plant the file and read it back.
        let path = store.root().join("refs/tags").join(name);
        std::fs::write(&path, content).expect("write the tag file");
        let got = store.get_tag(name);
        assert_eq!(matches!(got, Ok(Some(_))), canonical, "{got:?}");
        let listed = store.tags();
        assert_eq!(listed.is_ok(), canonical, "{listed:?}");
        let _ = store.resolve(name);
        std::fs::remove_file(&path).expect("remove the tag file");
    }
    if store.image_by_name(name).is_ok() {
        let path = store.root().join("refs/images").join(name);
        std::fs::write(&path, content).expect("write the image name");
        let got = store.image_by_name(name);
        assert_eq!(matches!(got, Ok(Some(_))), canonical, "{got:?}");
        let _ = store.image_names();
        let _ = rt.image(name);
        std::fs::remove_file(&path).expect("remove the image name");
    }
});
