//! Lowering a run's own output lets its IR go as it goes (issue 14: at 10^5 lines the IR and its
//! lowered code were whole together, the highest point of most stages). Alone in its test binary:
//! the live bytes are counted by this binary's allocator, and no other test allocates meanwhile.

use cotangent::interp::{Budget, Builtins, Machine};
use cotangent::limits::run_with_stack;
use cotangent::pipeline::front_end;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

struct Counting;
static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size() as u64, Relaxed) + l.size() as u64;
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size() as u64, Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The most the live bytes grow above `LIVE` at the start while `f` runs.
fn growth<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let start = LIVE.load(Relaxed);
    PEAK.store(start, Relaxed);
    let out = f();
    (PEAK.load(Relaxed) - start, out)
}

/// A straight let chain of `n` links, the shape of `scripts/shapes.sh`'s `chain`.
fn chain(n: usize) -> String {
    let mut s = String::from("input 1.5\ndef main x =\n  let v0 = x * 1.01 + 0.5 in\n");
    for i in 1..n {
        s += &format!("  let v{i} = v{} * 1.01 + 0.5 in\n", i - 1);
    }
    s + &format!("  v{}\n", n - 1)
}

#[test]
fn lowering_a_runs_own_program_lets_its_ir_go_as_it_goes() {
    run_with_stack(|| {
        let (p, _, _) = front_end(&chain(5000), &[]).expect("the chain checks");
        let b = Builtins::new();
        // the lowered code's size: what `Machine::new` (which keeps the program) adds and holds
        let before = LIVE.load(Relaxed);
        let (kept_peak, kept) = growth(|| Machine::new(&p, &b, Budget::default()).expect("lowers"));
        let code = LIVE.load(Relaxed) - before;
        drop(kept);
        // `lowered` takes the program: its links go as they are lowered, so lowering adds to what was
        // live much less than the code it makes (borrowing the IR and dropping it after, it added
        // all of it: `kept_peak`)
        let ir = p.clone();
        let (peak, m) = growth(move || Machine::lowered(ir, &b, Budget::default()).expect("lowers"));
        assert!(kept_peak >= code && code > 500_000, "the code is {code} bytes, the borrowed lowering's peak {kept_peak}");
        assert!(peak < code / 2, "lowering added {peak} bytes at its peak; its code is {code} bytes");
        drop(m);
    })
}
