//! An image archive (`arbor image import`: oci-archive or docker-archive,
//! plain or compressed): imported, or refused with a named error that
//! leaves no image name behind.
#![no_main]

use arbor_runtime::image::ImageImport;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let rt = arbor_fuzz::runtime();
    let case = arbor_fuzz::fresh_dir();
    let file = case.path().join("image.tar");
    std::fs::write(&file, data).unwrap();
    let before = rt.store().image_names().unwrap();
    let opts = ImageImport {
        name: None,
        limits: arbor_fuzz::UNTAR_LIMITS,
    };
    match rt.import_image(&file, &opts) {
        Ok(imported) => {
            let named = rt.store().image_by_name(&imported.name).unwrap();
            assert_eq!(named, Some(imported.id));
            // Leave the store as it was, so the next case starts the same.
            rt.remove_image(&imported.name)
                .expect("remove the imported image");
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            assert_eq!(
                rt.store().image_names().unwrap(),
                before,
                "refused, yet named: {e}"
            );
        }
    }
});
