//! Finding a region's written pages in `/proc/self/pagemap` (one entry per
//! OS page, or the `PAGEMAP_SCAN` ioctl).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

use super::region::Region;
use super::{PAGE, os_page};

impl Region {
    /// [`Region::dirty_pages`] by reading one pagemap entry per OS page.
    pub(super) fn dirty_pages_read(&self, pm: &File) -> Option<Vec<usize>> {
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

    /// [`Region::dirty_pages`] through the `PAGEMAP_SCAN` ioctl (Linux
    /// 6.7+), which returns only the ranges of written pages instead of 8
    /// bytes for every page of the memory, so the cost follows the dirty
    /// pages. `None` where the kernel lacks it.
    pub(super) fn dirty_pages_scan(&self, pm: &File) -> Option<Vec<usize>> {
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
    pub(super) fn scan_written(
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

pub(super) fn pagemap() -> Option<&'static File> {
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
