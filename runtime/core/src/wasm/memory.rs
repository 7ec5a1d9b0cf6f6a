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

use std::cell::RefCell;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, OnceLock};

use super::{Result, WasmError};
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

/// A memfd holding page data; shared by every image that maps from it.
#[derive(Debug)]
pub struct PageFile {
    fd: OwnedFd,
    pages: usize,
}

impl PageFile {
    /// A new memfd of `pages` pages (all holes: zero, no memory used).
    pub fn new(pages: usize) -> Result<Self> {
        let fd = rustix::fs::memfd_create("arbor-wasm-pages", rustix::fs::MemfdFlags::CLOEXEC)
            .map_err(|e| WasmError::Memory {
                what: "create memfd",
                source: e.into(),
            })?;
        rustix::fs::ftruncate(&fd, (pages * PAGE) as u64).map_err(|e| WasmError::Memory {
            what: "size memfd",
            source: e.into(),
        })?;
        Ok(Self { fd, pages })
    }

    fn file(&self) -> Result<File> {
        Ok(File::from(self.fd.try_clone().map_err(|source| {
            WasmError::Memory {
                what: "duplicate memfd",
                source,
            }
        })?))
    }

    /// Write one page at page offset `at`.
    pub fn write_page(&self, at: usize, bytes: &[u8]) -> Result<()> {
        debug_assert_eq!(bytes.len(), PAGE);
        let mut done = 0;
        while done < bytes.len() {
            let n = rustix::io::pwrite(&self.fd, &bytes[done..], (at * PAGE + done) as u64)
                .map_err(|e| WasmError::Memory {
                    what: "write memfd",
                    source: e.into(),
                })?;
            if n == 0 {
                return Err(WasmError::Memory {
                    what: "write memfd",
                    source: std::io::ErrorKind::WriteZero.into(),
                });
            }
            done += n;
        }
        Ok(())
    }
}

/// A run of pages of an image.
#[derive(Clone, Debug)]
pub struct Segment {
    /// First page of the run.
    pub start: usize,
    /// Number of pages.
    pub pages: usize,
    /// Where the content is: a file and the page offset in it, or zero.
    pub source: Option<(Arc<PageFile>, usize)>,
}

impl Segment {
    fn end(&self) -> usize {
        self.start + self.pages
    }

    /// The part of this segment in `[from, to)`.
    fn clip(&self, from: usize, to: usize) -> Option<Segment> {
        let s = self.start.max(from);
        let e = self.end().min(to);
        (s < e).then(|| Segment {
            start: s,
            pages: e - s,
            source: self
                .source
                .as_ref()
                .map(|(f, off)| (f.clone(), off + (s - self.start))),
        })
    }

    /// Whether `next` continues this segment (same file, next offset, or both zero).
    fn continued_by(&self, next: &Segment) -> bool {
        if self.end() != next.start {
            return false;
        }
        match (&self.source, &next.source) {
            (None, None) => true,
            (Some((a, ao)), Some((b, bo))) => Arc::ptr_eq(a, b) && ao + self.pages == *bo,
            _ => false,
        }
    }
}

/// The content of one snapshot's linear memory, ready to be mapped.
///
/// Invariant: `segments` are sorted, do not overlap and cover exactly
/// `[0, pages)`; `hashes.len() == pages`, and `hashes[i]` is the blob
/// object id of page `i` ([`ZERO_PAGE`] for an all-zero page).
#[derive(Debug)]
pub struct MemoryImage {
    pages: usize,
    segments: Vec<Segment>,
    hashes: Arc<Vec<ObjectId>>,
    /// The same content in one segment, made on first need by
    /// [`MemoryImage::for_mapping`].
    flat: OnceLock<Arc<MemoryImage>>,
    /// [`MemoryImage::memory_hash`], computed once.
    hash: OnceLock<ObjectId>,
    /// A read-only mapping of the whole content, made on first need by
    /// [`MemoryImage::view`] (the source a recycled region is reset from).
    view: OnceLock<Option<ImageView>>,
}

/// A read-only mapping of an image's content, `len` bytes at `base`.
#[derive(Debug)]
struct ImageView {
    base: usize,
    len: usize,
}

impl Drop for ImageView {
    fn drop(&mut self) {
        // SAFETY: the mapping belongs to this view alone.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

impl MemoryImage {
    /// An image from explicit parts; checks the invariant.
    pub fn new(pages: usize, segments: Vec<Segment>, hashes: Vec<ObjectId>) -> Self {
        Self::with_hashes(pages, segments, Arc::new(hashes))
    }

    fn with_hashes(pages: usize, segments: Vec<Segment>, hashes: Arc<Vec<ObjectId>>) -> Self {
        let image = Self {
            pages,
            segments: coalesce(segments),
            hashes,
            flat: OnceLock::new(),
            hash: OnceLock::new(),
            view: OnceLock::new(),
        };
        image.check();
        image
    }

    fn check(&self) {
        let mut at = 0;
        for s in &self.segments {
            assert_eq!(s.start, at, "image segments must be contiguous");
            assert!(s.pages > 0, "empty image segment");
            at = s.end();
        }
        assert_eq!(at, self.pages, "image segments must cover the memory");
        assert_eq!(self.hashes.len(), self.pages, "one hash per page");
    }

    /// Size in wasm pages.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// Number of segments (the `mmap` calls a fork makes).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The page hashes.
    pub fn hashes(&self) -> &Arc<Vec<ObjectId>> {
        &self.hashes
    }

    /// The image a fork maps: `self` when it has at most [`MAX_SEGMENTS`]
    /// segments, else a flattened copy of it (one memfd), made on the first
    /// call and kept for later ones.
    pub fn for_mapping(self: &Arc<Self>) -> Result<Arc<MemoryImage>> {
        if self.segments.len() <= MAX_SEGMENTS {
            return Ok(self.clone());
        }
        if let Some(f) = self.flat.get() {
            return Ok(f.clone());
        }
        let flat = Arc::new(self.flattened()?);
        Ok(self.flat.get_or_init(|| flat).clone())
    }

    /// The flattened copy if one was made, else `self`.
    pub fn preferred(self: &Arc<Self>) -> Arc<MemoryImage> {
        self.flat.get().cloned().unwrap_or_else(|| self.clone())
    }

    /// Copy every file-backed segment into one new memfd (zero segments
    /// stay holes).
    fn flattened(&self) -> Result<MemoryImage> {
        let file = Arc::new(PageFile::new(self.pages)?);
        let out = file.file()?;
        let mut buf = vec![0u8; 16 * PAGE];
        for seg in &self.segments {
            let Some((src, off)) = &seg.source else {
                continue;
            };
            let input = src.file()?;
            let mut done = 0;
            while done < seg.pages {
                let n = (seg.pages - done).min(16);
                let chunk = &mut buf[..n * PAGE];
                input
                    .read_exact_at(chunk, ((off + done) * PAGE) as u64)
                    .map_err(|source| WasmError::Memory {
                        what: "read memfd",
                        source,
                    })?;
                out.write_all_at(chunk, ((seg.start + done) * PAGE) as u64)
                    .map_err(|source| WasmError::Memory {
                        what: "write memfd",
                        source,
                    })?;
                done += n;
            }
        }
        let segments = if self.pages == 0 {
            Vec::new()
        } else {
            vec![Segment {
                start: 0,
                pages: self.pages,
                source: Some((file, 0)),
            }]
        };
        Ok(MemoryImage::with_hashes(
            self.pages,
            segments,
            self.hashes.clone(),
        ))
    }

    /// Pages of the memfds this image holds (each counted once).
    fn held_pages(&self) -> usize {
        let mut seen: Vec<*const PageFile> = Vec::new();
        let mut total = 0;
        for s in &self.segments {
            if let Some((f, _)) = &s.source {
                let p = Arc::as_ptr(f);
                if !seen.contains(&p) {
                    seen.push(p);
                    total += f.pages;
                }
            }
        }
        total
    }

    /// The memory hash: blake3 of the page count and every page hash.
    pub fn memory_hash(&self) -> ObjectId {
        *self.hash.get_or_init(|| memory_hash(&self.hashes))
    }

    /// The content as one read-only mapping (made on the first call);
    /// `None` if it cannot be mapped.
    fn view(&self) -> Option<&ImageView> {
        self.view
            .get_or_init(|| {
                let len = self.pages * PAGE;
                if len == 0 {
                    return None;
                }
                // Segments are then mapped over parts of it only.
                let view = ImageView {
                    base: map_anonymous(len, libc::PROT_READ)?,
                    len,
                };
                for seg in &self.segments {
                    let Some((file, off)) = &seg.source else {
                        continue;
                    };
                    // SAFETY: the target lies inside the view's own mapping.
                    let p = unsafe {
                        libc::mmap(
                            (view.base + seg.start * PAGE) as *mut libc::c_void,
                            seg.pages * PAGE,
                            libc::PROT_READ,
                            libc::MAP_SHARED | libc::MAP_FIXED,
                            file.fd.as_raw_fd(),
                            (off * PAGE) as libc::off_t,
                        )
                    };
                    if p == libc::MAP_FAILED {
                        return None;
                    }
                }
                Some(view)
            })
            .as_ref()
    }

    /// The image of a memory after the pages in `changed` (page index, new
    /// hash, content) were written on top of `self`, grown to `pages`.
    /// Changed non-zero pages go to one new memfd. Flattens (copying the
    /// whole memory from `live`, which must hold the new content) only when
    /// the result would be wasteful: more than `max(64, pages / 4)`
    /// segments, or page files holding more than twice the memory; the
    /// second value says whether it did.
    pub fn overlay(
        &self,
        pages: usize,
        changed: &[(usize, ObjectId)],
        live: &[u8],
    ) -> Result<(MemoryImage, bool)> {
        let mut hashes: Vec<ObjectId> = self.hashes.as_ref().clone();
        hashes.resize(pages, ZERO_PAGE);
        for &(i, h) in changed {
            hashes[i] = h;
        }
        let mut segments: Vec<Segment> = self
            .segments
            .iter()
            .filter_map(|s| s.clip(0, pages))
            .collect();
        if pages > self.pages {
            segments.push(Segment {
                start: self.pages,
                pages: pages - self.pages,
                source: None,
            });
        }
        if !changed.is_empty() {
            let nonzero: Vec<usize> = changed
                .iter()
                .filter(|(_, h)| *h != ZERO_PAGE)
                .map(|(i, _)| *i)
                .collect();
            let file = if nonzero.is_empty() {
                None
            } else {
                let f = Arc::new(PageFile::new(nonzero.len())?);
                for (slot, &i) in nonzero.iter().enumerate() {
                    f.write_page(slot, &live[i * PAGE..(i + 1) * PAGE])?;
                }
                Some(f)
            };
            let mut slot = 0;
            let mut patches = Vec::with_capacity(changed.len());
            for &(i, h) in changed {
                let source = if h == ZERO_PAGE {
                    None
                } else {
                    let s = slot;
                    slot += 1;
                    file.as_ref().map(|f| (f.clone(), s))
                };
                patches.push(Segment {
                    start: i,
                    pages: 1,
                    source,
                });
            }
            segments = apply_patches(&segments, patches);
        }
        let image = MemoryImage::new(pages, segments, hashes);
        let too_many = image.segments.len() > MIN_FLATTEN_SEGMENTS.max(pages / 4);
        if too_many || image.held_pages() > 2 * pages + MIN_FLATTEN_SEGMENTS {
            return Ok((flatten(&image.hashes, live)?, true));
        }
        Ok((image, false))
    }
}

/// Replace the pages covered by `patches` (sorted by page, one page each).
fn apply_patches(base: &[Segment], patches: Vec<Segment>) -> Vec<Segment> {
    let mut out = Vec::with_capacity(base.len() + patches.len() * 2);
    let mut pi = patches.into_iter().peekable();
    for seg in base {
        let mut at = seg.start;
        while let Some(p) = pi.peek() {
            if p.start >= seg.end() {
                break;
            }
            if let Some(before) = seg.clip(at, p.start) {
                out.push(before);
            }
            at = p.end();
            out.push(pi.next().expect("peeked"));
        }
        if let Some(rest) = seg.clip(at, seg.end()) {
            out.push(rest);
        }
    }
    out
}

fn coalesce(segments: Vec<Segment>) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::with_capacity(segments.len());
    for s in segments {
        match out.last_mut() {
            Some(last) if last.continued_by(&s) => last.pages += s.pages,
            _ => out.push(s),
        }
    }
    out
}

/// One memfd with every non-zero page of `live`; a single segment.
pub fn flatten(hashes: &[ObjectId], live: &[u8]) -> Result<MemoryImage> {
    let pages = hashes.len();
    let file = Arc::new(PageFile::new(pages)?);
    for (i, h) in hashes.iter().enumerate() {
        if *h != ZERO_PAGE {
            file.write_page(i, &live[i * PAGE..(i + 1) * PAGE])?;
        }
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
    Ok(MemoryImage::new(pages, segments, hashes.to_vec()))
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

/// A reserved address range holding one linear memory.
///
/// Invariant: `[base, base + mapped)` is readable and writable, the rest of
/// `[base, base + reserved)` is `PROT_NONE`; `size <= mapped` except right
/// after creation, when `mapped` may exceed `size` until the host grows the
/// memory to the image's size (no guest code runs in between).
#[derive(Debug)]
pub struct Region {
    base: usize,
    reserved: usize,
    guard: usize,
    size: usize,
    mapped: usize,
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
    fn new(image: &Arc<MemoryImage>, size: usize, reserved: usize, guard: usize) -> Result<Region> {
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
    fn written_ranges(&self, len: usize) -> Option<Vec<(usize, usize)>> {
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

    fn protect_rw(&mut self, from: usize, to: usize) -> Result<()> {
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

    /// [`Region::dirty_pages`] by reading one pagemap entry per OS page.
    fn dirty_pages_read(&self, pm: &File) -> Option<Vec<usize>> {
        let os = os_page();
        let per = PAGE / os;
        let n = self.size / os;
        let mut entries = vec![0u8; n * 8];
        let first = (self.base / os) as u64 * 8;
        pm.read_exact_at(&mut entries, first).ok()?;
        let mut out = Vec::new();
        for page in 0..self.size / PAGE {
            let dirty = (0..per).any(|k| {
                let at = (page * per + k) * 8;
                let e = u64::from_le_bytes(entries[at..at + 8].try_into().unwrap_or([0; 8]));
                let present = e >> 63 & 1 == 1;
                let swapped = e >> 62 & 1 == 1;
                let file = e >> 61 & 1 == 1;
                swapped || (present && !file)
            });
            if dirty {
                out.push(page);
            }
        }
        Some(out)
    }
}

impl Region {
    /// [`Region::dirty_pages`] through the `PAGEMAP_SCAN` ioctl (Linux
    /// 6.7+), which returns only the ranges of written pages instead of 8
    /// bytes for every page of the memory, so the cost follows the dirty
    /// pages. `None` where the kernel lacks it.
    fn dirty_pages_scan(&self, pm: &File) -> Option<Vec<usize>> {
        let mut out: Vec<usize> = Vec::new();
        self.scan_written(pm, self.size, |from, to| {
            for page in from / PAGE..=(to - 1) / PAGE {
                if out.last() != Some(&page) {
                    out.push(page);
                }
            }
        })?;
        Some(out)
    }

    /// Call `found(from, to)` for every byte range of `[0, len)` whose OS
    /// pages were written (present or swapped, and not the file's page),
    /// in order, through `PAGEMAP_SCAN`. `None` where the kernel lacks it.
    fn scan_written(
        &self,
        pm: &File,
        len: usize,
        mut found: impl FnMut(usize, usize),
    ) -> Option<()> {
        if !SCAN_SUPPORTED.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let mut regions = vec![PageRegion::default(); 256];
        let end = (self.base + len) as u64;
        let mut start = self.base as u64;
        while start < end {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                flags: 0,
                start,
                end,
                walk_end: 0,
                vec: regions.as_mut_ptr() as u64,
                vec_len: regions.len() as u64,
                max_pages: 0,
                // Written: present or swapped, and not the file's page.
                category_inverted: PAGE_IS_FILE,
                category_mask: PAGE_IS_FILE,
                category_anyof_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
                return_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_FILE,
            };
            // SAFETY: `arg` is a valid pm_scan_arg whose `vec` points to
            // `regions.len()` writable page_region entries that outlive the
            // call; the kernel writes only those and `arg`.
            let n = unsafe {
                libc::ioctl(
                    pm.as_raw_fd(),
                    PAGEMAP_SCAN as _,
                    &mut arg as *mut PmScanArg,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error().raw_os_error();
                if matches!(e, Some(libc::ENOTTY | libc::EINVAL | libc::EOPNOTSUPP)) {
                    SCAN_SUPPORTED.store(false, std::sync::atomic::Ordering::Relaxed);
                }
                return None;
            }
            for r in &regions[..n as usize] {
                found(r.start as usize - self.base, r.end as usize - self.base);
            }
            if arg.walk_end <= start {
                return None;
            }
            start = arg.walk_end;
        }
        Some(())
    }
}

static SCAN_SUPPORTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// `struct pm_scan_arg` of `<linux/fs.h>`.
#[repr(C)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `struct page_region` of `<linux/fs.h>`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

const PAGE_IS_FILE: u64 = 1 << 2;
const PAGE_IS_PRESENT: u64 = 1 << 3;
const PAGE_IS_SWAPPED: u64 = 1 << 4;
/// `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: libc::c_ulong =
    (3 << 30) | ((std::mem::size_of::<PmScanArg>() as libc::c_ulong) << 16) | (0x66 << 8) | 16;

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

fn pagemap() -> Option<&'static File> {
    static PAGEMAP: OnceLock<Option<File>> = OnceLock::new();
    PAGEMAP
        .get_or_init(|| {
            if std::env::var_os("ARBOR_WASM_NO_PAGEMAP").is_some() {
                return None;
            }
            File::open("/proc/self/pagemap").ok()
        })
        .as_ref()
}

/// Whether dirty pages are found through `/proc/self/pagemap` (else every
/// page is hashed at snapshot time).
pub fn pagemap_available() -> bool {
    pagemap().is_some()
}

/// A live region shared between wasmtime's memory object and the sandbox.
#[derive(Debug, Clone)]
pub struct SharedRegion(Arc<Mutex<Region>>);

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

struct MappedMemory {
    region: SharedRegion,
    base: usize,
    capacity: usize,
}

// SAFETY: `as_ptr` returns the fixed base of a reservation of `reserved +
// guard` bytes that lives as long as this object; `[base, base + byte_size)`
// is mapped read-write, the guard after `reserved` stays unmapped
// (`PROT_NONE`), and growth never moves the base.
unsafe impl wasmtime::LinearMemory for MappedMemory {
    fn byte_size(&self) -> usize {
        self.region.lock().size
    }

    fn byte_capacity(&self) -> usize {
        self.capacity
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        let mut r = self.region.lock();
        if new_size > self.capacity {
            wasmtime::bail!("linear memory cannot grow past its reservation");
        }
        if new_size > r.mapped {
            let from = r.mapped;
            r.protect_rw(from, new_size)
                .map_err(|e| wasmtime::format_err!("{e}"))?;
        }
        r.size = new_size;
        Ok(())
    }

    fn as_ptr(&self) -> *mut u8 {
        self.base as *mut u8
    }
}

thread_local! {
    static STAGED: RefCell<Option<Arc<MemoryImage>>> = const { RefCell::new(None) };
    static CREATED: RefCell<Option<SharedRegion>> = const { RefCell::new(None) };
}

/// Stage the image the next memory created on this thread maps.
pub fn stage_image(image: Arc<MemoryImage>) {
    STAGED.with(|s| *s.borrow_mut() = Some(image));
    CREATED.with(|c| *c.borrow_mut() = None);
}

/// The region created for the staged image (after instantiation).
pub fn take_created() -> Option<SharedRegion> {
    STAGED.with(|s| *s.borrow_mut() = None);
    CREATED.with(|c| c.borrow_mut().take())
}

/// The engine's memory creator: maps the image staged on this thread.
#[derive(Debug, Default)]
pub struct ImageMemoryCreator;

// SAFETY: memories are `MappedMemory` values whose guarantees are stated on
// their `LinearMemory` impl; `reserved` and `guard` are honoured exactly.
unsafe impl wasmtime::MemoryCreator for ImageMemoryCreator {
    fn new_memory(
        &self,
        ty: wasmtime::MemoryType,
        minimum: usize,
        maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> std::result::Result<Box<dyn wasmtime::LinearMemory>, String> {
        if ty.is_64() || ty.is_shared() {
            return Err("only 32-bit, unshared linear memories are supported".into());
        }
        let image = STAGED
            .with(|s| s.borrow_mut().take())
            .ok_or("no memory image staged for this instantiation")?;
        let reserved = reserved_size_in_bytes.unwrap_or(1 << 32);
        let capacity = maximum.unwrap_or(reserved).min(reserved);
        if image.pages * PAGE > capacity || minimum > capacity {
            return Err(format!(
                "memory image of {} pages does not fit the memory's capacity of {capacity} bytes",
                image.pages
            ));
        }
        let region = Region::new(&image, minimum, reserved, guard_size_in_bytes)
            .map_err(|e| e.to_string())?;
        let base = region.base;
        let shared = SharedRegion(Arc::new(Mutex::new(region)));
        CREATED.with(|c| *c.borrow_mut() = Some(shared.clone()));
        Ok(Box::new(MappedMemory {
            region: shared,
            base,
            capacity,
        }))
    }
}

/// Copy an image's content into a flat buffer (tests and restore checks).
pub fn read_image(image: &MemoryImage) -> Result<Vec<u8>> {
    let mut out = vec![0u8; image.pages * PAGE];
    for seg in &image.segments {
        if let Some((file, off)) = &seg.source {
            let f = File::from(file.fd.as_fd().try_clone_to_owned().map_err(|source| {
                WasmError::Memory {
                    what: "duplicate memfd",
                    source,
                }
            })?);
            f.read_exact_at(
                &mut out[seg.start * PAGE..seg.end() * PAGE],
                (off * PAGE) as u64,
            )
            .map_err(|source| WasmError::Memory {
                what: "read memfd",
                source,
            })?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_of(b: u8) -> Vec<u8> {
        vec![b; PAGE]
    }

    #[test]
    fn overlay_writes_only_changed_pages_and_coalesces() {
        let mut live = vec![0u8; 4 * PAGE];
        live[..PAGE].copy_from_slice(&page_of(1));
        let hashes: Vec<ObjectId> = (0..4)
            .map(|i| page_hash(&live[i * PAGE..(i + 1) * PAGE]))
            .collect();
        let root = flatten(&hashes, &live).unwrap();
        assert_eq!(root.segment_count(), 1);
        live[2 * PAGE..3 * PAGE].copy_from_slice(&page_of(2));
        live.extend_from_slice(&page_of(3));
        let changed = vec![(2, page_hash(&page_of(2))), (4, page_hash(&page_of(3)))];
        let (child, flattened) = root.overlay(5, &changed, &live).unwrap();
        assert!(!flattened);
        assert_eq!(child.pages(), 5);
        assert_eq!(read_image(&child).unwrap(), live);
        assert_eq!(
            read_image(&root).unwrap(),
            live[..4 * PAGE]
                .iter()
                .enumerate()
                .map(|(i, b)| if (2 * PAGE..3 * PAGE).contains(&i) {
                    0
                } else {
                    *b
                })
                .collect::<Vec<_>>()
        );
        assert!(child.segment_count() <= 4, "{:?}", child.segments);
        assert_ne!(child.memory_hash(), root.memory_hash());
    }

    #[test]
    fn a_chain_of_small_overlays_writes_dirty_pages_and_forks_from_one_segment() {
        let pages = 256;
        let mut live = vec![0u8; pages * PAGE];
        for i in 0..pages {
            live[i * PAGE] = 1;
        }
        let hashes: Vec<ObjectId> = (0..pages)
            .map(|i| page_hash(&live[i * PAGE..(i + 1) * PAGE]))
            .collect();
        let mut image = Arc::new(flatten(&hashes, &live).unwrap());
        let mut region = Region::new(&image, pages * PAGE, 1 << 26, 1 << 16).unwrap();
        let mut flattens = 0;
        for step in 0..50usize {
            // Three scattered pages per step, as a small interpreter step does.
            let dirty: Vec<usize> = {
                let mut d: Vec<usize> = (0..3).map(|k| (step * 37 + k * 91) % pages).collect();
                d.sort();
                d.dedup();
                d
            };
            for &i in &dirty {
                // SAFETY: inside the mapped range; the test is its only user.
                unsafe { *(region.base as *mut u8).add(i * PAGE + 1 + step) = step as u8 + 1 };
                live[i * PAGE + 1 + step] = step as u8 + 1;
            }
            if pagemap_available() {
                assert_eq!(region.dirty_pages().unwrap(), dirty);
                let pm = pagemap().unwrap();
                assert_eq!(region.dirty_pages_read(pm).unwrap(), dirty);
                if let Some(scan) = region.dirty_pages_scan(pm) {
                    assert_eq!(scan, dirty);
                }
            }
            let changed: Vec<(usize, ObjectId)> = dirty
                .iter()
                .map(|&i| (i, page_hash(&live[i * PAGE..(i + 1) * PAGE])))
                .collect();
            let (next, flattened) = image.overlay(pages, &changed, &live).unwrap();
            let next = Arc::new(next);
            if flattened {
                flattens += 1;
                assert_eq!(next.segment_count(), 1);
                region.map_image(&next).unwrap();
            } else {
                // The new page file holds only the dirty pages.
                assert!(next.held_pages() <= image.held_pages() + dirty.len());
                region.remap_pages(&next, &dirty).unwrap();
            }
            if pagemap_available() {
                assert_eq!(region.dirty_pages().unwrap(), Vec::<usize>::new());
            }
            // SAFETY: no guest runs; the test is the only user of the region.
            assert!(unsafe { region.bytes() } == &live[..], "step {step}");
            image = next;
        }
        assert!(flattens <= 3, "{flattens} flattens in 50 small overlays");
        assert!(image.segment_count() > MAX_SEGMENTS);
        assert_eq!(read_image(&image).unwrap(), live);
        let flat = image.for_mapping().unwrap();
        assert_eq!(flat.segment_count(), 1);
        assert!(Arc::ptr_eq(&flat, &image.for_mapping().unwrap()));
        assert!(Arc::ptr_eq(&flat, &image.preferred()));
        assert_eq!(flat.memory_hash(), image.memory_hash());
        let fork = Region::new(&flat, pages * PAGE, 1 << 26, 1 << 16).unwrap();
        // SAFETY: as above.
        assert!(unsafe { fork.bytes() } == &live[..]);
    }

    #[test]
    fn region_maps_image_and_tracks_dirty_pages() {
        let mut live = vec![0u8; 8 * PAGE];
        live[3 * PAGE..4 * PAGE].copy_from_slice(&page_of(7));
        let hashes: Vec<ObjectId> = (0..8)
            .map(|i| page_hash(&live[i * PAGE..(i + 1) * PAGE]))
            .collect();
        let image = Arc::new(flatten(&hashes, &live).unwrap());
        let region = Region::new(&image, 8 * PAGE, 1 << 24, 1 << 16).unwrap();
        // SAFETY: no guest runs; the test is the only user of the region.
        let bytes = unsafe { region.bytes() };
        assert_eq!(bytes, &live[..]);
        if pagemap_available() {
            assert_eq!(region.dirty_pages().unwrap(), Vec::<usize>::new());
            // SAFETY: inside the mapped range; nobody else reads it.
            unsafe { *(region.base as *mut u8).add(5 * PAGE + 10) = 1 };
            assert_eq!(region.dirty_pages().unwrap(), vec![5]);
        }
    }

    #[test]
    fn a_dropped_region_is_reset_and_reused_by_the_next_fork() {
        let pages = 16;
        // Content no other test uses, so that the pool's match is ours.
        let mut live = vec![0u8; pages * PAGE];
        for (i, b) in live.iter_mut().enumerate() {
            *b = (i % 251) as u8 ^ 0x5a;
        }
        let hashes: Vec<ObjectId> = (0..pages)
            .map(|i| page_hash(&live[i * PAGE..(i + 1) * PAGE]))
            .collect();
        let image = Arc::new(flatten(&hashes, &live).unwrap());
        let mut r = Region::new(&image, pages * PAGE, 1 << 26, 1 << 16).unwrap();
        let base = r.base;
        // SAFETY: inside the mapped range; the test is its only user.
        unsafe {
            *(r.base as *mut u8).add(2 * PAGE + 7) ^= 0xff;
            *(r.base as *mut u8).add(5 * PAGE) ^= 0xff;
        }
        // The guest grew its memory and wrote past the image.
        r.protect_rw(pages * PAGE, (pages + 2) * PAGE).unwrap();
        r.size = (pages + 2) * PAGE;
        // SAFETY: as above; the grown range is mapped read-write.
        unsafe { *(r.base as *mut u8).add(pages * PAGE + 3) = 9 };
        let scan = pagemap().and_then(|pm| r.scan_written(pm, r.size, |_, _| {}));
        drop(r);
        // Another image with the same content (as a restore would build).
        let again = Arc::new(flatten(&hashes, &live).unwrap());
        let r2 = Region::new(&again, pages * PAGE, 1 << 26, 1 << 16).unwrap();
        // SAFETY: no guest runs; the test is the only user of the region.
        let reused = unsafe { r2.bytes() };
        assert!(reused == &live[..], "a reused region kept old writes");
        assert_eq!(
            r2.mapped,
            pages * PAGE,
            "past the image must be inaccessible again"
        );
        if scan.is_some() && recycling() {
            assert_eq!(r2.base, base, "the dropped region was not reused");
            // Its written pages stay private: the next writes fault no copy.
            let written = r2.written_ranges(pages * PAGE).unwrap();
            assert!(
                written
                    .iter()
                    .any(|&(a, b)| a <= 2 * PAGE + 7 && 2 * PAGE + 7 < b)
            );
        }
        // A region of other content is never handed out for this image.
        let mut other = live.clone();
        other[0] ^= 1;
        let other_hashes: Vec<ObjectId> = (0..pages)
            .map(|i| page_hash(&other[i * PAGE..(i + 1) * PAGE]))
            .collect();
        drop(r2);
        let o = Arc::new(flatten(&other_hashes, &other).unwrap());
        let r3 = Region::new(&o, pages * PAGE, 1 << 26, 1 << 16).unwrap();
        // SAFETY: as above.
        assert!(unsafe { r3.bytes() } == &other[..]);
    }
}
