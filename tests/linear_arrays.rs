//! Issue 14: the array stages' transforms stay linear on a deep nesting (sin (sin (... x))). Checked by
//! the bytes the whole analysis allocates (a counting allocator, this test binary only), not by time:
//! a pass that copies each level's subtree allocates Θ(n²) bytes. One test per binary, as the count is
//! global.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use cotangent::limits::run_with_stack;
use cotangent::pipeline::{analyse, Options};

struct Counting;
static ALLOCATED: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(l.size() as u64, Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new as u64, Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Bytes allocated by analysing sin^n(x) with `stage` (and what it needs), and whether it agreed.
fn allocated(n: usize, stage: &str) -> (u64, Option<bool>) {
    let text = format!("input 0.5\ndef main x = {}x{}\n", "sin (".repeat(n), ")".repeat(n));
    let stages = vec![stage.to_string()];
    let before = ALLOCATED.load(Relaxed);
    let agrees = run_with_stack(move || analyse(&text, &Options { stages, ..Options::default() }).map(|a| a.stages[0].agrees).map_err(|d| format!("{d:?}")))
        .unwrap_or_else(|d| panic!("{d}"));
    (ALLOCATED.load(Relaxed) - before, agrees)
}

#[test]
fn the_array_stages_allocate_linearly_on_a_deep_nesting() {
    // dual-arrays: D (Fig. 15) rebuilt each op around its new operands by cloning the op whole, old
    // operands included: Θ(n²) bytes (10x the bytes for 4x the depth, 958 MB at n = 4000).
    // build1 and onehot: the lowering of §4's naive extensions cloned every primitive's arguments
    // to look at them (16x). Quadrupling n must leave the bytes under 6x.
    for stage in ["arrays/dual-arrays", "arrays/build1", "arrays/onehot"] {
        let (small, a) = allocated(1000, stage);
        let (large, b) = allocated(4000, stage);
        assert_eq!((a, b), (Some(true), Some(true)), "{stage}");
        eprintln!("{stage} on sin-1000: {small} bytes, sin-4000: {large} bytes");
        assert!(large < small * 6, "{stage}: 4x the depth allocated {:.1}x the bytes ({small} → {large})", large as f64 / small as f64);
    }
}
