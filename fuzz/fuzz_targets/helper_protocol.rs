//! The helper's pipe: length-prefixed JSON frames, read in both directions
//! (requests by the helper, responses by the runtime). A frame that decodes
//! re-encodes to a frame that decodes to the same value.
#![no_main]

use std::io::Cursor;

use arbor_runtime::sandbox::protocol::{Request, Response, read_frame, write_frame};
use libfuzzer_sys::fuzz_target;

fn stream<T>(data: &[u8])
where
    T: serde::Serialize + for<'de> serde::Deserialize<'de>,
{
    let mut r = Cursor::new(data);
    while let Ok(Some(msg)) = read_frame::<_, T>(&mut r) {
        let first = serde_json::to_value(&msg).expect("a decoded frame serializes");
        let mut buf = Vec::new();
        write_frame(&mut buf, &msg).expect("a decoded frame re-encodes");
        let again: T = read_frame(&mut Cursor::new(&buf))
            .expect("the re-encoded frame reads")
            .expect("the re-encoded frame is there");
        assert_eq!(serde_json::to_value(&again).unwrap(), first);
    }
}

fuzz_target!(|data: &[u8]| {
    stream::<Request>(data);
    stream::<Response>(data);
});
