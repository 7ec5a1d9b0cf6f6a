//! Memory pages in the store: each non-zero 64 KiB page is a blob object
//! named by its hash (so equal pages are stored once, across snapshots and
//! sessions), and a snapshot's memory is a page index blob listing the hash
//! of every page ([`ZERO_PAGE`] for zero pages, which are never stored).
//!
//! A snapshot writes many small objects at once, so they are written in a
//! batch that keeps the store's crash-safety protocol at the cost of two
//! `syncfs` calls instead of two `fsync`s per object: every new object goes
//! to a temp file in `tmp/`, `syncfs`, each is renamed into `objects/`,
//! `syncfs` again. The caller writes the object that refers to them (the
//! snapshot record) only after that, so a crash leaves at most unreferenced
//! objects.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

use super::memory::{MemoryImage, PAGE, PageFile, Segment, ZERO_PAGE};
use super::{Result, WasmError};
use crate::store::object::{OBJECT_HEADER_LEN, OBJECT_MAGIC, OBJECT_VERSION, ObjectId, ObjectKind};
use crate::store::{Store, StoreError};

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

/// Objects to write in one batch.
#[derive(Default)]
pub struct Batch<'a> {
    items: Vec<(ObjectId, ObjectKind, &'a [u8])>,
    seen: BTreeSet<ObjectId>,
}

impl std::fmt::Debug for Batch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("objects", &self.items.len())
            .finish()
    }
}

impl<'a> Batch<'a> {
    /// Add a blob whose id (`object_id(Blob, bytes)`) the caller computed.
    pub fn blob(&mut self, id: ObjectId, bytes: &'a [u8]) {
        if self.seen.insert(id) {
            self.items.push((id, ObjectKind::Blob, bytes));
        }
    }

    /// Write every object the store does not hold yet; returns how many
    /// were written.
    pub fn write(self, store: &Store) -> Result<usize> {
        let io = |op: &'static str, path: &std::path::Path| {
            let path = path.to_path_buf();
            move |source: std::io::Error| WasmError::Store(StoreError::Io { op, path, source })
        };
        let mut staged = Vec::new();
        let result = (|| -> Result<()> {
            for (id, kind, payload) in &self.items {
                let path = store.object_path(id);
                let total = (OBJECT_HEADER_LEN + payload.len()) as u64;
                if fs::symlink_metadata(&path).is_ok_and(|m| m.len() == total) {
                    continue;
                }
                let tmp = store.new_temp_path(".page");
                let mut f = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .custom_flags(libc::O_CLOEXEC)
                    .open(&tmp)
                    .map_err(io("create temp file", &tmp))?;
                staged.push((tmp.clone(), path));
                let mut header = Vec::with_capacity(OBJECT_HEADER_LEN);
                header.extend_from_slice(&OBJECT_MAGIC);
                header.push(OBJECT_VERSION);
                header.push(*kind as u8);
                header.extend_from_slice(&(payload.len() as u64).to_le_bytes());
                f.write_all(&header).map_err(io("write temp file", &tmp))?;
                f.write_all(payload).map_err(io("write temp file", &tmp))?;
            }
            if staged.is_empty() {
                return Ok(());
            }
            syncfs(store)?;
            for (tmp, dest) in &staged {
                if let Some(fan) = dest.parent()
                    && !fan.exists()
                {
                    fs::create_dir_all(fan).map_err(io("create object directory", fan))?;
                }
                fs::rename(tmp, dest).map_err(io("rename temp file into place", dest))?;
            }
            syncfs(store)
        })();
        if result.is_err() {
            for (tmp, _) in &staged {
                let _ = fs::remove_file(tmp);
            }
        }
        result.map(|()| staged.len())
    }
}

fn syncfs(store: &Store) -> Result<()> {
    let dir = store.tmp_dir();
    let f = fs::File::open(&dir).map_err(|source| {
        WasmError::Store(StoreError::Io {
            op: "open",
            path: dir.clone(),
            source,
        })
    })?;
    rustix::fs::syncfs(&f).map_err(|e| {
        WasmError::Store(StoreError::Io {
            op: "syncfs",
            path: dir.clone(),
            source: e.into(),
        })
    })
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
    fn batch_writes_verifiable_objects_once() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path(), crate::store::OwnerMode::Rootless).unwrap();
        let page = vec![3u8; PAGE];
        let id = crate::store::object::object_id(ObjectKind::Blob, &page);
        let mut b = Batch::default();
        b.blob(id, &page);
        b.blob(id, &page);
        assert_eq!(b.write(&store).unwrap(), 1);
        assert_eq!(store.get_blob(&id).unwrap(), page);
        let mut again = Batch::default();
        again.blob(id, &page);
        assert_eq!(again.write(&store).unwrap(), 0);
        assert!(store.fsck().unwrap().is_clean());
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
        let mut b = Batch::default();
        for (i, h) in hashes.iter().enumerate() {
            if *h != ZERO_PAGE {
                b.blob(*h, &live[i * PAGE..(i + 1) * PAGE]);
            }
        }
        let index = encode_index(&hashes);
        let index_id = crate::store::object::object_id(ObjectKind::Blob, &index);
        b.blob(index_id, &index);
        b.write(&store).unwrap();
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
