//! The CLI's global allocator: mimalloc, counting live bytes and their peak, so that `bench` can
//! report bytes per operation and stop a case at its memory limit, and so that `run` and `check` stay
//! within `--max-mb` (`set_hard_limit`). In the binary only: the core library (and the page's wasm)
//! allocate as usual. Not the system's (glibc's) malloc: on programs of 10^4 lines and more, and late
//! in a long process (bench's later sizes), its free-list consolidation took a third of the CPU time
//! and grew super-linearly (bench/README.md, "The allocator").

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

pub struct Counting;

static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);
/// The most live bytes the process may hold (0: no limit); see `stop`.
static HARD: AtomicU64 = AtomicU64::new(0);
static STOPPING: AtomicBool = AtomicBool::new(false);

/// The process stops (`stop`) rather than grow past `bytes`. The pipeline stops a stage cleanly
/// below this (limits::set_memory_budget, checked by machines and after each phase); this is the
/// last resort for a phase that grows past it between two checks.
pub fn set_hard_limit(bytes: u64, max_mb: u64) {
    MAX_MB.store(max_mb, Relaxed);
    HARD.store(bytes, Relaxed);
}

/// Transparent huge pages off for this process. mimalloc reserves a 1 GiB arena and advises it
/// `MADV_HUGEPAGE`; where the kernel's THP `defrag` setting is `madvise` (Debian's default), the
/// first touch of each 2 MiB of it compacts memory synchronously to find a huge page, and mimalloc's
/// purges of freed 64 KiB pieces split them again. On chad/monadic over a 30,000-line let chain that
/// was 1.4–1.6 s of system time beside 2.2–2.8 s of user time; with them off, 0.2–0.3 s, user time
/// within noise (bench/README.md, "Session 45 (lead)"). The setting is the process's own (Linux's
/// `PR_SET_THP_DISABLE`; a child would inherit it, and the CLI starts none); elsewhere this does nothing.
pub fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_THP_DISABLE, 1) only sets a flag on this process's memory map; it reads
    // and writes no memory of ours. A kernel without it returns an error, which changes nothing.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong);
    }
}

/// The `--max-mb` the hard limit was derived from, for the message.
static MAX_MB: AtomicU64 = AtomicU64::new(0);

/// Would `n` more bytes pass the hard limit? (Then the process stops.)
#[inline]
fn check(n: usize) {
    let hard = HARD.load(Relaxed);
    if hard != 0 && LIVE.load(Relaxed).saturating_add(n as u64) > hard && !STOPPING.swap(true, Relaxed) {
        stop(MAX_MB.load(Relaxed));
    }
}

/// Says which stage and phase ran out of memory and exits with status 1 (a budget stop), without
/// allocating: the message is formatted into a buffer on the stack.
#[cold]
fn stop(max_mb: u64) -> ! {
    use std::io::Write;
    let mut buf = [0u8; 512];
    let len = {
        let mut w = &mut buf[..];
        let _ = match cotangent::limits::phase() {
            Some((stage, phase)) if !stage.is_empty() => write!(
                w,
                "cotangent: error: stopped: the memory budget ({max_mb} MiB, `--max-mb`) ran out while `{stage}` was {phase}; nothing more is printed (leave the stage out with `--stage`, or raise `--max-mb`)\n"
            ),
            _ => write!(w, "cotangent: error: stopped: the memory budget ({max_mb} MiB, `--max-mb`) ran out; nothing more is printed\n"),
        };
        512 - w.len()
    };
    let _ = std::io::stderr().write_all(&buf[..len]);
    std::process::exit(1)
}

fn grew(n: usize) {
    let now = LIVE.fetch_add(n as u64, Relaxed) + n as u64;
    PEAK.fetch_max(now, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        check(l.size());
        let p = unsafe { MiMalloc.alloc(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        check(l.size());
        let p = unsafe { MiMalloc.alloc_zeroed(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { MiMalloc.dealloc(p, l) };
        LIVE.fetch_sub(l.size() as u64, Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
        check(size.saturating_sub(l.size()));
        let q = unsafe { MiMalloc.realloc(p, l, size) };
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
