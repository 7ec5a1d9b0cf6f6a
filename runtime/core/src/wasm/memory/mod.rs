//! Linear memories mapped copy-on-write from snapshot images.
//!
//! A [`MemoryImage`] is the content of one snapshot's linear memory as a
//! short list of [`Segment`]s: runs of 64 KiB pages that live in a memfd
//! ([`PageFile`]) at some offset, or that are zero. Each snapshot writes only
//! the pages that changed since its parent into a fresh memfd and overlays
//! them on the parent's segment list, so taking it costs what the steps
//! dirtied. The session then remaps only its dirty pages from the new image.
//!
//! Flattening (copying every non-zero page into one memfd) costs the whole
//! memory, so it is never paid per snapshot:
//! - at snapshot time only when the image has become wasteful, i.e. its
//!   segments exceed a quarter of its pages or the page files it holds are
//!   more than twice its size ([`MemoryImage::overlay`]); both need as many
//!   newly dirtied pages as the flatten copies, so the cost is amortised
//!   over the dirty pages (a few page copies per dirty page at worst);
//! - at fork time, lazily and once per image, when the image has more than
//!   [`MAX_SEGMENTS`] segments ([`MemoryImage::for_mapping`]): the first
//!   open of a fragmented snapshot pays one copy, every later fork of it
//!   maps one segment. Snapshots that are never forked never pay it.
//!
//! A fork reserves the whole address range wasmtime asks for (4 GiB plus the
//! guard, `PROT_NONE`) and maps each segment there `MAP_PRIVATE | MAP_FIXED`:
//! a handful of `mmap` calls whatever the memory's size, and a page is copied
//! by the kernel only when the guest writes it. wasmtime gets the mapping
//! through [`ImageMemoryCreator`], a [`wasmtime::MemoryCreator`] that takes
//! the image staged on the calling thread by [`stage_image`].
//!
//! Pages written since the mapping was made are found in
//! `/proc/self/pagemap`: a page of a private file mapping that the guest
//! wrote is an anonymous page (no "file" bit), a page only read is still the
//! memfd's. Where pagemap cannot be read, every page counts as dirty and the
//! page hashes decide (the result is the same, only slower).

mod creator;
mod image;
mod pagemap;
mod region;
#[cfg(test)]
mod tests;

pub use creator::{ImageMemoryCreator, stage_image, take_created};
pub use image::{MemoryImage, PageFile, Segment, flatten, read_image};
pub use pagemap::pagemap_available;
pub use region::{Region, SharedRegion, recycling, set_recycling};

use std::sync::OnceLock;

use super::WasmError;
use crate::store::object::ObjectId;

/// Size of a WebAssembly page, which is also the unit of dirty tracking and
/// of page objects in the store.
pub const PAGE: usize = 64 * 1024;

/// Images with more segments than this are flattened (lazily, once) before a
/// fork maps them, so that a fork never needs more than this many `mmap`
/// calls.
pub const MAX_SEGMENTS: usize = 16;

/// At snapshot time an image is flattened when its segments exceed
/// `max(MIN_FLATTEN_SEGMENTS, pages / 4)`; this bounds the mappings (VMAs)
/// of a live session.
const MIN_FLATTEN_SEGMENTS: usize = 64;

/// The hash recorded for an all-zero page (never stored as an object).
pub const ZERO_PAGE: ObjectId = crate::store::wasm_refs::ZERO_PAGE_ID;

fn os_page() -> usize {
    static SIZE: OnceLock<usize> = OnceLock::new();
    *SIZE.get_or_init(|| {
        // SAFETY: sysconf only reads a system constant.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(n).ok().filter(|n| *n > 0).unwrap_or(4096)
    })
}

/// A fresh private anonymous mapping of `len` bytes (no swap reserved) at
/// an address the kernel chooses; `None` if mmap fails (errno is kept for
/// [`os_err`]).
fn map_anonymous(len: usize, prot: libc::c_int) -> Option<usize> {
    // SAFETY: a new mapping at an address the kernel picks; nothing else
    // refers to it, and its owner unmaps it.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (base != libc::MAP_FAILED).then_some(base as usize)
}

fn os_err(what: &'static str) -> WasmError {
    WasmError::Memory {
        what,
        source: std::io::Error::last_os_error(),
    }
}

/// The memory hash of a page-hash list.
pub fn memory_hash(hashes: &[ObjectId]) -> ObjectId {
    let mut h = blake3::Hasher::new();
    h.update(b"arbor-wasm-memory\0");
    h.update(&(hashes.len() as u64).to_le_bytes());
    for p in hashes {
        h.update(&p.0);
    }
    h.finalize().into()
}

/// The hash of one page: [`ZERO_PAGE`] if it is all zero, else its blob id.
pub fn page_hash(bytes: &[u8]) -> ObjectId {
    if is_zero(bytes) {
        ZERO_PAGE
    } else {
        crate::store::object::object_id(crate::store::object::ObjectKind::Blob, bytes)
    }
}

fn is_zero(bytes: &[u8]) -> bool {
    let (pre, words, post) = {
        // SAFETY: u64 has no invalid bit patterns, so viewing aligned
        // bytes as u64 words is sound; align_to handles the unaligned ends.
        unsafe { bytes.align_to::<u64>() }
    };
    pre.iter().all(|b| *b == 0) && words.iter().all(|w| *w == 0) && post.iter().all(|b| *b == 0)
}
