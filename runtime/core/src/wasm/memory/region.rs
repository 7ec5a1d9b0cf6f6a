//! [`Region`]: the reserved address range of one live linear memory, its
//! mapping from an image and the recycling of dropped regions.

use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};

use super::image::{MemoryImage, Segment};
use super::pagemap::pagemap;
use super::{PAGE, map_anonymous, os_err, os_page};
use crate::wasm::{Result, WasmError};

/// A reserved address range holding one linear memory.
///
/// Invariant: `[base, base + mapped)` is readable and writable, the rest of
/// `[base, base + reserved)` is `PROT_NONE`; `size <= mapped` except right
/// after creation, when `mapped` may exceed `size` until the host grows the
/// memory to the image's size (no guest code runs in between).
#[derive(Debug)]
pub struct Region {
    pub(super) base: usize,
    reserved: usize,
    guard: usize,
    pub(super) size: usize,
    pub(super) mapped: usize,
    /// The image whose content `[0, image size)` holds, apart from the
    /// pages written since (the anonymous ones): set by `map_image` and
    /// `remap_pages`.
    image: Option<Arc<MemoryImage>>,
}

/// Regions of dropped sandboxes, reset to their image's content and kept
/// for the next fork of an image with the same content (see
/// [`Region::recycle`]).
static SPARE_REGIONS: Mutex<Vec<Region>> = Mutex::new(Vec::new());
/// At most this many spare regions are kept.
const MAX_SPARE_REGIONS: usize = 32;
/// A region is kept only if resetting it copies at most this many bytes
/// (the pages a fork writes in its first steps are few; a session that
/// wrote much is cheaper to map afresh).
const MAX_RESET_BYTES: usize = 8 << 20;

/// 0: not decided yet, 1: on, 2: off.
static RECYCLING: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Whether dropped regions are recycled: on unless `ARBOR_WASM_NO_RECYCLE`
/// is set or [`set_recycling`] turned it off.
pub fn recycling() -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    match RECYCLING.load(Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let on = std::env::var_os("ARBOR_WASM_NO_RECYCLE").is_none();
            RECYCLING.store(if on { 1 } else { 2 }, Relaxed);
            on
        }
    }
}

/// Turn recycling of dropped sandboxes' memory on or off for this process
/// (off also frees the regions kept so far). For measurements.
pub fn set_recycling(on: bool) {
    RECYCLING.store(if on { 1 } else { 2 }, std::sync::atomic::Ordering::Relaxed);
    if !on {
        let spare = std::mem::take(&mut *SPARE_REGIONS.lock().unwrap_or_else(|p| p.into_inner()));
        for mut r in spare {
            r.unmap();
        }
    }
}

impl Region {
    /// Reserve `reserved + guard` bytes and map `image` at the start.
    pub(super) fn new(
        image: &Arc<MemoryImage>,
        size: usize,
        reserved: usize,
        guard: usize,
    ) -> Result<Region> {
        if let Some(region) = Region::take_spare(image, size, reserved, guard) {
            return Ok(region);
        }
        let total = reserved + guard;
        let base =
            map_anonymous(total, libc::PROT_NONE).ok_or_else(|| os_err("reserve linear memory"))?;
        let mut region = Region {
            base,
            reserved,
            guard,
            size,
            mapped: 0,
            image: None,
        };
        region.map_image(image)?;
        if size > region.mapped {
            region.protect_rw(region.mapped, size)?;
        }
        Ok(region)
    }

    /// Map every segment of `image` over `[0, image size)`, replacing what
    /// is there, and make everything past it `PROT_NONE` again.
    pub fn map_image(&mut self, image: &Arc<MemoryImage>) -> Result<()> {
        self.image = None;
        let len = image.pages * PAGE;
        if len > self.reserved {
            return Err(WasmError::Memory {
                what: "map image larger than the reservation",
                source: std::io::Error::from_raw_os_error(libc::ENOMEM),
            });
        }
        for seg in &image.segments {
            self.map_segment(seg)?;
        }
        self.unmap_past(len)?;
        self.image = Some(image.clone());
        Ok(())
    }

    /// Make everything mapped past `len` bytes inaccessible again
    /// (`PROT_NONE`, contents dropped); afterwards `mapped <= len`.
    fn unmap_past(&mut self, len: usize) -> Result<()> {
        if self.mapped > len {
            // SAFETY: `[len, mapped)` is inside this region's reservation;
            // MAP_FIXED replaces only those pages.
            let p = unsafe {
                libc::mmap(
                    (self.base + len) as *mut libc::c_void,
                    self.mapped - len,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(os_err("unmap past image"));
            }
        }
        self.mapped = len;
        Ok(())
    }

    /// A spare region holding `image`'s content (any image with the same
    /// memory hash), resized to `size`.
    fn take_spare(
        image: &Arc<MemoryImage>,
        size: usize,
        reserved: usize,
        guard: usize,
    ) -> Option<Region> {
        if !recycling() {
            return None;
        }
        let hash = image.memory_hash();
        let mut spare = {
            let mut pool = SPARE_REGIONS.lock().unwrap_or_else(|p| p.into_inner());
            let at = pool.iter().rposition(|r| {
                r.reserved == reserved
                    && r.guard == guard
                    && r.image
                        .as_ref()
                        .is_some_and(|i| i.pages == image.pages && i.memory_hash() == hash)
            })?;
            pool.swap_remove(at)
        };
        if size > spare.mapped && spare.protect_rw(spare.mapped, size).is_err() {
            return None;
        }
        spare.size = size;
        Some(spare)
    }

    /// Reset this region to its image's content so that a later fork can
    /// take it instead of mapping the image afresh: every page written
    /// since the image was mapped (found with `PAGEMAP_SCAN`) is copied
    /// back from the image, and whatever lies past the image is made
    /// inaccessible again. The written pages stay private and resident, so
    /// the next fork's first steps take no copy-on-write faults on them:
    /// on this kind of machine a fault costs 1.5-2.5 µs and a first step
    /// writes about a hundred pages. `None` when it cannot be reset
    /// cheaply (the caller then unmaps it).
    fn reset(&mut self) -> Option<()> {
        let image = self.image.clone()?;
        let len = image.pages * PAGE;
        if !recycling() || self.mapped < len {
            return None;
        }
        let view = image.view()?;
        let written = self.written_ranges(len)?;
        let total: usize = written.iter().map(|(a, b)| b - a).sum();
        if total > MAX_RESET_BYTES {
            return None;
        }
        for (from, to) in written {
            // SAFETY: `[from, to)` lies inside both the region's mapped
            // image range and the view (same length); no guest runs (the
            // instance is gone) and nothing else refers to the region.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (view.base + from) as *const u8,
                    (self.base + from) as *mut u8,
                    to - from,
                );
            }
        }
        self.unmap_past(len).ok()?;
        self.size = len;
        Some(())
    }

    /// Byte ranges of `[0, len)` holding pages the process wrote (private
    /// anonymous pages), through `PAGEMAP_SCAN`; `None` where it is
    /// unavailable.
    pub(super) fn written_ranges(&self, len: usize) -> Option<Vec<(usize, usize)>> {
        let pm = pagemap()?;
        let mut out = Vec::new();
        self.scan_written(pm, len, |from, to| out.push((from, to)))?;
        Some(out)
    }

    /// Map the pages `dirty` (sorted page indices, all below the image's
    /// size) again from `image`, which must hold the memory's current
    /// content for every page: afterwards they count as clean. Pages not in
    /// `dirty` must be unchanged since the last mapping and equal in
    /// `image`. Consecutive pages with contiguous sources share one `mmap`.
    pub fn remap_pages(&mut self, image: &Arc<MemoryImage>, dirty: &[usize]) -> Result<()> {
        let len = image.pages * PAGE;
        if len > self.reserved || len < self.size {
            return Err(WasmError::Memory {
                what: "remap pages from an image of another size",
                source: std::io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        let mut seg = 0;
        let mut i = 0;
        while i < dirty.len() {
            let first = dirty[i];
            while image.segments[seg].end() <= first {
                seg += 1;
            }
            let s = &image.segments[seg];
            let mut last = first;
            while i + 1 < dirty.len() && dirty[i + 1] == last + 1 && dirty[i + 1] < s.end() {
                i += 1;
                last += 1;
            }
            i += 1;
            let run = Segment {
                start: first,
                pages: last + 1 - first,
                source: s
                    .source
                    .as_ref()
                    .map(|(f, off)| (f.clone(), off + (first - s.start))),
            };
            self.map_segment(&run)?;
        }
        self.image = Some(image.clone());
        Ok(())
    }

    fn map_segment(&self, seg: &Segment) -> Result<()> {
        let addr = self.base + seg.start * PAGE;
        let bytes = seg.pages * PAGE;
        let (flags, fd, off) = match &seg.source {
            Some((file, off)) => (libc::MAP_PRIVATE, file.fd.as_raw_fd(), off * PAGE),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0),
        };
        if seg.end() * PAGE > self.reserved {
            return Err(WasmError::Memory {
                what: "map image segment past the reservation",
                source: std::io::Error::from_raw_os_error(libc::ENOMEM),
            });
        }
        // SAFETY: the target range lies inside this region's own
        // reservation (checked above), which no Rust reference points into
        // while the guest is not running; MAP_FIXED replaces only those
        // pages.
        let p = unsafe {
            libc::mmap(
                addr as *mut libc::c_void,
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                flags | libc::MAP_FIXED,
                fd,
                off as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os_err("map image segment"));
        }
        Ok(())
    }

    pub(super) fn protect_rw(&mut self, from: usize, to: usize) -> Result<()> {
        let page = os_page();
        let from = from & !(page - 1);
        let to = (to + page - 1) & !(page - 1);
        // SAFETY: `[from, to)` is inside the reservation (callers check
        // `to <= reserved`); making it accessible changes no existing data.
        let rc = unsafe {
            libc::mprotect(
                (self.base + from) as *mut libc::c_void,
                to - from,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if rc != 0 {
            return Err(os_err("grow linear memory"));
        }
        self.mapped = self.mapped.max(to);
        Ok(())
    }

    /// The accessible bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The memory's current content.
    ///
    /// # Safety
    ///
    /// The guest must not run while the slice is alive (no store call on
    /// the instance owning this memory).
    pub unsafe fn bytes(&self) -> &[u8] {
        // SAFETY: `[base, base + size)` is mapped read-write (invariant) and
        // the caller guarantees nobody writes it meanwhile.
        unsafe { std::slice::from_raw_parts(self.base as *const u8, self.size) }
    }

    /// Pages (wasm pages) that may differ from the image this region was
    /// last mapped from: those with an OS page the process wrote. `None`
    /// when pagemap cannot be read (then every page may differ).
    pub fn dirty_pages(&self) -> Option<Vec<usize>> {
        let pm = pagemap()?;
        if let Some(pages) = self.dirty_pages_scan(pm) {
            return Some(pages);
        }
        self.dirty_pages_read(pm)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if self.base == 0 {
            return;
        }
        if self.image.is_some() && self.reset().is_some() {
            let clean = std::mem::replace(self, Region::EMPTY);
            let evicted = {
                let mut pool = SPARE_REGIONS.lock().unwrap_or_else(|p| p.into_inner());
                pool.push(clean);
                (pool.len() > MAX_SPARE_REGIONS).then(|| pool.remove(0))
            };
            if let Some(mut old) = evicted {
                old.unmap();
            }
            return;
        }
        self.unmap();
    }
}

impl Region {
    /// A region that holds nothing (dropping it does nothing).
    const EMPTY: Region = Region {
        base: 0,
        reserved: 0,
        guard: 0,
        size: 0,
        mapped: 0,
        image: None,
    };

    /// Give the reservation back (once); the region then holds nothing.
    fn unmap(&mut self) {
        let (base, len) = (self.base, self.reserved + self.guard);
        // Field by field: assigning the whole region would drop it.
        self.image = None;
        self.base = 0;
        self.mapped = 0;
        self.size = 0;
        if base != 0 {
            // SAFETY: the whole reservation belonged to this region and
            // nothing refers to it any more (wasmtime dropped the memory).
            unsafe {
                libc::munmap(base as *mut libc::c_void, len);
            }
        }
    }
}

/// A live region shared between wasmtime's memory object and the sandbox.
#[derive(Debug, Clone)]
pub struct SharedRegion(pub(super) Arc<Mutex<Region>>);

// SAFETY: `Region` holds addresses as integers, not references; every
// access to the mapped bytes goes through the mutex or happens while the
// owning store is exclusively borrowed by one thread.
unsafe impl Send for SharedRegion {}
// SAFETY: as above.
unsafe impl Sync for SharedRegion {}

impl SharedRegion {
    /// Lock the region.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Region> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
