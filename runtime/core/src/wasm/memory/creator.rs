//! wasmtime's side: the memory creator that maps the image staged on the
//! calling thread, and the linear memory it hands out.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use super::PAGE;
use super::image::MemoryImage;
use super::region::{Region, SharedRegion};

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
