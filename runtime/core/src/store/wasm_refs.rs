//! WebAssembly session snapshots as the store sees them: what one
//! references (for gc, fsck and `rm`), read from its record without the
//! `wasm` feature, so that a store holding sessions is collected and
//! checked correctly by any build of arbor. The backend itself is
//! `crate::wasm` (feature `wasm`).
//!
//! A session snapshot is an [`ObjectKind::WasmManifest`] object (JSON).
//! Its memory is a page index blob ([`encode_page_index`]) listing the
//! hash of every 64 KiB page; all-zero pages are [`ZERO_PAGE_ID`] and never
//! stored.

use serde::Deserialize;

use super::{LayerId, ObjectId, ObjectKind, Result, SnapshotId, Store, StoreError};

const PAGE_INDEX_MAGIC: &[u8; 16] = b"arbor-wasm-mem1\0";

/// The id standing for an all-zero page in a page index (never stored).
pub const ZERO_PAGE_ID: ObjectId = ObjectId([0; 32]);

/// Encode a page index: magic, page count (u64 LE), 32 bytes per page.
pub fn encode_page_index(hashes: &[ObjectId]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + hashes.len() * 32);
    out.extend_from_slice(PAGE_INDEX_MAGIC);
    out.extend_from_slice(&(hashes.len() as u64).to_le_bytes());
    for h in hashes {
        out.extend_from_slice(&h.0);
    }
    out
}

/// Decode a page index written by [`encode_page_index`]; `None` if it is
/// malformed.
pub fn decode_page_index(bytes: &[u8]) -> Option<Vec<ObjectId>> {
    if bytes.len() < 24 || &bytes[..16] != PAGE_INDEX_MAGIC {
        return None;
    }
    let n = usize::try_from(u64::from_le_bytes(bytes[16..24].try_into().ok()?)).ok()?;
    if bytes.len() != n.checked_mul(32)?.checked_add(24)? {
        return None;
    }
    Some(
        bytes[24..]
            .chunks_exact(32)
            .map(|c| {
                let mut a = [0u8; 32];
                a.copy_from_slice(c);
                ObjectId(a)
            })
            .collect(),
    )
}

/// The fields of a session record that name other objects (the rest of
/// the record is ignored here).
#[derive(Deserialize)]
struct Record {
    guest: ObjectId,
    memory: ObjectId,
    #[serde(default)]
    layers: Vec<LayerId>,
    parent: Option<SnapshotId>,
    #[serde(default)]
    actions: Vec<ActionRefs>,
    #[serde(default)]
    observations: Vec<OutputRefs>,
}

#[derive(Deserialize)]
struct ActionRefs {
    #[serde(default)]
    content: Option<ObjectId>,
}

#[derive(Deserialize)]
struct OutputRefs {
    stdout: ObjectId,
    stderr: ObjectId,
}

/// What one WebAssembly session snapshot references directly (not
/// through its parent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WasmRefs {
    /// The snapshot it was taken from.
    pub parent: Option<SnapshotId>,
    /// Its workspace layers, bottom first.
    pub layers: Vec<LayerId>,
    /// The guest module, the page index, every stored page, the blobs of
    /// its actions and outputs.
    pub objects: Vec<ObjectId>,
}

impl Store {
    /// The kind of a stored object, read from its header alone (reading
    /// the object with [`Store::get`] verifies the rest).
    ///
    /// # Errors
    /// [`StoreError::NotFound`], or [`StoreError::Corrupt`] when the header
    /// is unreadable.
    pub fn object_kind(&self, id: &ObjectId) -> Result<ObjectKind> {
        let path = self.object_path(id);
        if !self.has_object(id) {
            return Err(StoreError::NotFound { id: *id });
        }
        super::gc::header_kind(&path).ok_or_else(|| StoreError::Corrupt {
            id: *id,
            path,
            reason: "unreadable object header".into(),
        })
    }

    /// Whether `id` names a WebAssembly session snapshot (false when it
    /// names anything else or nothing).
    pub fn is_wasm_snapshot(&self, id: &SnapshotId) -> bool {
        self.object_kind(id)
            .is_ok_and(|k| k == ObjectKind::WasmManifest)
    }

    /// Load a verified WebAssembly session record (its JSON).
    ///
    /// # Errors
    /// As [`Store::get`]; [`StoreError::WrongKind`] when `id` is another kind.
    pub fn get_wasm_manifest(&self, id: &SnapshotId) -> Result<Vec<u8>> {
        self.get(id, ObjectKind::WasmManifest)
    }

    /// What a session snapshot references, with its page index read and
    /// verified.
    ///
    /// # Errors
    /// When the record or its page index is missing, corrupt or malformed.
    pub fn wasm_refs(&self, id: &SnapshotId) -> Result<WasmRefs> {
        let bytes = self.get_wasm_manifest(id)?;
        let rec: Record = serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
            id: *id,
            path: self.object_path(id),
            reason: format!("bad WebAssembly session record: {e}"),
        })?;
        let index = self.get_blob(&rec.memory)?;
        let pages = decode_page_index(&index).ok_or_else(|| StoreError::Corrupt {
            id: rec.memory,
            path: self.object_path(&rec.memory),
            reason: "malformed memory page index".into(),
        })?;
        let mut objects = vec![rec.guest, rec.memory];
        objects.extend(pages.into_iter().filter(|p| *p != ZERO_PAGE_ID));
        objects.extend(rec.actions.iter().filter_map(|a| a.content));
        for o in &rec.observations {
            objects.extend([o.stdout, o.stderr]);
        }
        objects.sort();
        objects.dedup();
        Ok(WasmRefs {
            parent: rec.parent,
            layers: rec.layers,
            objects,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_index_round_trips_and_rejects_malformed_input() {
        let ids = [ObjectId([1; 32]), ZERO_PAGE_ID, ObjectId([7; 32])];
        let enc = encode_page_index(&ids);
        assert_eq!(decode_page_index(&enc).unwrap(), ids);
        assert!(decode_page_index(&enc[..enc.len() - 1]).is_none());
        let mut bad = enc.clone();
        bad[0] ^= 1;
        assert!(decode_page_index(&bad).is_none());
        let mut huge = enc;
        huge[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_page_index(&huge).is_none());
    }
}
