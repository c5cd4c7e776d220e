//! The CLI's global allocator: the system's, counting live bytes and their peak, so that `bench` can
//! report bytes per operation and stop a case at its memory limit. In the binary only: the core
//! library (and the page's wasm) allocate as usual.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub struct Counting;

static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);

fn grew(n: usize) {
    let now = LIVE.fetch_add(n as u64, Relaxed) + n as u64;
    PEAK.fetch_max(now, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size() as u64, Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, size) };
        if !q.is_null() {
            LIVE.fetch_sub(l.size() as u64, Relaxed);
            grew(size);
        }
        q
    }
}

/// Bytes allocated and not yet freed.
pub fn live() -> u64 {
    LIVE.load(Relaxed)
}

/// The most `live()` has been since the last `reset_peak`.
pub fn peak() -> u64 {
    PEAK.load(Relaxed)
}

pub fn reset_peak() {
    PEAK.store(LIVE.load(Relaxed), Relaxed);
}
