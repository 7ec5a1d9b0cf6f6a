use std::sync::Arc;

use super::pagemap::pagemap;
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
