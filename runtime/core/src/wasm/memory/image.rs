//! Memory images: page files (memfds), segments, overlays and flattening.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, OnceLock};

use super::{MAX_SEGMENTS, MIN_FLATTEN_SEGMENTS, PAGE, ZERO_PAGE, map_anonymous, memory_hash};
use crate::store::object::ObjectId;
use crate::wasm::{Result, WasmError};

/// A memfd holding page data; shared by every image that maps from it.
#[derive(Debug)]
pub struct PageFile {
    pub(super) fd: OwnedFd,
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
    pub(super) fn end(&self) -> usize {
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
    pub(super) pages: usize,
    pub(super) segments: Vec<Segment>,
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
pub(super) struct ImageView {
    pub(super) base: usize,
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
    pub(super) fn held_pages(&self) -> usize {
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
    pub(super) fn view(&self) -> Option<&ImageView> {
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
