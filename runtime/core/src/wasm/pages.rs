//! Memory pages in the store: each non-zero 64 KiB page is a blob object
//! named by its hash (so equal pages are stored once, across snapshots and
//! sessions), and a snapshot's memory is a page index blob listing the hash
//! of every page ([`ZERO_PAGE`] for zero pages, which are never stored).
//!
//! A snapshot writes many small objects at once: its pages join the other
//! objects of the snapshot in one group commit ([`crate::store::Batch`]).

use std::collections::BTreeSet;

use super::memory::{MemoryImage, PAGE, PageFile, Segment, ZERO_PAGE};
use super::{Result, WasmError};
use crate::store::Store;
use crate::store::object::ObjectId;

/// Encode a page index: magic, page count (u64 LE), 32 bytes per page
/// (the format is the store's, so that gc and fsck read it without the
/// `wasm` feature).
pub fn encode_index(hashes: &[ObjectId]) -> Vec<u8> {
    crate::store::wasm_refs::encode_page_index(hashes)
}

/// Decode a page index written by [`encode_index`].
pub fn decode_index(bytes: &[u8]) -> Result<Vec<ObjectId>> {
    crate::store::wasm_refs::decode_page_index(bytes)
        .ok_or_else(|| WasmError::BadSnapshot("malformed memory page index".into()))
}

/// Rebuild a memory image from the store: every page read back and
/// verified (each page object's blake3 is checked against its id, and the
/// index's against the manifest's), written into one memfd (zero pages
/// stay holes). Verification is kept eager: a page is the guest's state,
/// and a corrupt one must fail the restore rather than a later step. The
/// pages are split over the available cores (up to 8), as reading and
/// hashing them is the whole cost of a restore.
pub fn load_image(store: &Store, index: &ObjectId) -> Result<MemoryImage> {
    let hashes = decode_index(&store.get_blob(index)?)?;
    let pages = hashes.len();
    let file = std::sync::Arc::new(PageFile::new(pages)?);
    let nonzero: Vec<usize> = (0..pages).filter(|&i| hashes[i] != ZERO_PAGE).collect();
    let load = |chunk: &[usize]| -> Result<()> {
        for &i in chunk {
            let h = &hashes[i];
            let bytes = store.get_blob(h)?;
            if bytes.len() != PAGE {
                return Err(WasmError::BadSnapshot(format!(
                    "memory page {h} is {} bytes, not {PAGE}",
                    bytes.len()
                )));
            }
            file.write_page(i, &bytes)?;
        }
        Ok(())
    };
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8)
        .min(nonzero.len() / 64)
        .max(1);
    if workers == 1 {
        load(&nonzero)?;
    } else {
        let chunks: Vec<_> = nonzero.chunks(nonzero.len().div_ceil(workers)).collect();
        crate::parallel::map(&chunks, workers, |_, chunk| load(chunk))
            .into_iter()
            .try_for_each(|r| {
                r.unwrap_or_else(|p| Err(WasmError::Engine(format!("loading pages: {p}"))))
            })?;
    }
    let segments = if pages == 0 {
        Vec::new()
    } else {
        vec![Segment {
            start: 0,
            pages,
            source: Some((file, 0)),
        }]
    };
    Ok(MemoryImage::new(pages, segments, hashes))
}

/// The page objects and the index a memory refers to (for gc and fsck).
pub fn page_objects(store: &Store, index: &ObjectId) -> Result<Vec<ObjectId>> {
    let hashes = decode_index(&store.get_blob(index)?)?;
    let set: BTreeSet<ObjectId> = hashes.into_iter().filter(|h| *h != ZERO_PAGE).collect();
    let mut out = vec![*index];
    out.extend(set);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::object::ObjectKind;
    use std::fs;

    #[test]
    fn index_round_trips_and_rejects_garbage() {
        let hashes = vec![ZERO_PAGE, ObjectId::hash(b"x")];
        assert_eq!(decode_index(&encode_index(&hashes)).unwrap(), hashes);
        assert!(decode_index(b"nope").is_err());
        let mut bad = encode_index(&hashes);
        bad.pop();
        assert!(decode_index(&bad).is_err());
    }

    #[test]
    fn load_image_reads_every_page_in_parallel_and_rejects_a_corrupt_one() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path(), crate::store::OwnerMode::Rootless).unwrap();
        let pages = 300;
        let mut live = vec![0u8; pages * PAGE];
        for i in (0..pages).filter(|i| i % 5 != 0) {
            live[i * PAGE..i * PAGE + 8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
        }
        let hashes: Vec<ObjectId> = live
            .chunks(PAGE)
            .map(super::super::memory::page_hash)
            .collect();
        let mut b = crate::store::Batch::default();
        for (i, h) in hashes.iter().enumerate() {
            if *h != ZERO_PAGE {
                b.add_known(*h, ObjectKind::Blob, &live[i * PAGE..(i + 1) * PAGE]);
            }
        }
        let index = encode_index(&hashes);
        let index_id = crate::store::object::object_id(ObjectKind::Blob, &index);
        b.add_known(index_id, ObjectKind::Blob, index.as_slice());
        b.commit(&store).unwrap();
        let image = load_image(&store, &index_id).unwrap();
        assert_eq!(super::super::memory::read_image(&image).unwrap(), live);
        assert_eq!(image.hashes().as_slice(), hashes.as_slice());
        // Flip one byte of a page object near the end.
        let path = store.object_path(&hashes[298]);
        let mut perm = fs::metadata(&path).unwrap().permissions();
        perm.set_mode(0o644);
        fs::set_permissions(&path, perm).unwrap();
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert!(load_image(&store, &index_id).is_err());
    }
}
