//! Limits that keep every pass inside its stack. Passes over syntax (parse, resolve, types, print,
//! transforms) recurse on the tree, so the parser refuses programs nested deeper than `max_nesting()`
//! with a located message naming this budget. Natively the pipeline runs on a thread with a
//! `NATIVE_STACK`-byte stack (reserved, not committed), which lets a 10^5-deep let chain through;
//! wasm's stack is small, so the limit there is lower. The interpreter needs none of this: it keeps
//! its control stack on the heap.

/// Stack size of the thread the native pipeline runs on (see `run_with_stack`).
pub const NATIVE_STACK: usize = 4 << 30;

/// The deepest syntax nesting the parser accepts (the `nesting` budget).
pub fn max_nesting() -> usize {
    if cfg!(target_arch = "wasm32") {
        // Measured in Node: a 500-deep let chain runs through every stage in wasm; at 600 V8's call
        // stack runs out in the front end (the resolver). Type inference and lowering walk let/bind
        // chains in loops; the shadow stack is 32 MiB (.cargo/config.toml), so V8's stack is the
        // limit. 400 leaves a margin for browsers' worker stacks (tested in Chromium too).
        400
    } else {
        250_000
    }
}

/// The deepest bracket nesting the parser accepts: brackets cost more native stack per level than
/// lets (the parser and every transform recurse on the nested expression, where let chains are
/// walked in loops). In wasm 290 nested parentheses overflowed V8's stack in Node (release build),
/// so the page allows 200, the bracket depth it ran before a bracket counted one level (issue 14,
/// item 8); natively it is the `nesting` budget itself.
pub fn max_brackets() -> usize {
    if cfg!(target_arch = "wasm32") {
        200
    } else {
        max_nesting()
    }
}

thread_local! {
    /// The address near the top of this thread's `NATIVE_STACK` stack, if `run_with_stack` made it.
    static STACK_TOP: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Gives the pages of the big stack below the current frame back to the OS (natively, on the thread
/// `run_with_stack` made; elsewhere nothing). A pass that recursed 10^5 deep left its frames' pages
/// resident for the rest of the run: on a 100,000-line let chain, 180+ MB of the process's RSS beside
/// the heap (issue 14 item 4). Called at each phase change, where the stack is shallow; the pages
/// are zero-filled again if a later pass reaches them.
pub fn release_stack() {
    #[cfg(all(unix, not(target_arch = "wasm32")))]
    {
        const MARGIN: usize = 1 << 20;
        let top = STACK_TOP.with(|t| t.get());
        if top == 0 {
            return;
        }
        let here = 0u8;
        let here = std::hint::black_box(&here) as *const u8 as usize;
        let page = 4096;
        // a margin above the guard page (and whatever sits at the top) and below the live frames
        let low = (top.saturating_sub(NATIVE_STACK) + MARGIN).next_multiple_of(page);
        let high = here.saturating_sub(MARGIN) & !(page - 1);
        if high > low {
            // SAFETY: [low, high) lies inside this thread's stack mapping, below every live frame
            // (and the red zone): no one reads it before writing it again, and MADV_DONTNEED on a
            // private anonymous mapping only makes its pages read as zero when next touched.
            unsafe {
                libc::madvise(low as *mut libc::c_void, high - low, libc::MADV_DONTNEED);
            }
        }
    }
}

/// Runs `f` on a thread with a `NATIVE_STACK` stack natively; in wasm, runs it directly.
pub fn run_with_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    if cfg!(target_arch = "wasm32") {
        return f();
    }
    std::thread::Builder::new()
        .name("cotangent".into())
        .stack_size(NATIVE_STACK)
        .spawn(move || {
            let top = 0u8;
            STACK_TOP.with(|t| t.set(std::hint::black_box(&top) as *const u8 as usize));
            f()
        })
        .expect("spawn pipeline thread")
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// The memory budget of the whole pipeline: a probe of the process's live heap bytes and the most it
/// may reach. The CLI sets it from its counting allocator (`--max-mb`, default 1 GiB); the core has
/// no allocator of its own and the page has no probe (its worker is stopped by the page's watchdog).
/// Machines check it with the clock (every few thousand steps) and the pipeline after each phase of
/// a stage, so a stage that would take more stops with a message naming the budget and the others
/// still run; the CLI's allocator stops the process at the limit itself as the last resort, for a
/// phase that grows past it between two checks.
static MEMORY: std::sync::OnceLock<(fn() -> u64, u64)> = std::sync::OnceLock::new();

/// Sets the memory budget (once per process; later calls are ignored).
pub fn set_memory_budget(live: fn() -> u64, limit: u64) {
    let _ = MEMORY.set((live, limit));
}

/// The memory budget, if one is set: the probe and its limit in bytes.
pub fn memory_budget() -> Option<(fn() -> u64, u64)> {
    MEMORY.get().copied()
}

/// The allocator's peak probe and its reset, if the CLI gave them: the trace's peak per phase.
static PEAK: std::sync::OnceLock<(fn() -> u64, fn())> = std::sync::OnceLock::new();

/// Gives the memory trace the allocator's peak of live bytes and its reset (once per process).
pub fn set_peak_probe(peak: fn() -> u64, reset: fn()) {
    let _ = PEAK.set((peak, reset));
}

/// The peak of live bytes since the last trace line, in MiB (and a new period starts).
fn peak_since_last() -> String {
    match PEAK.get() {
        Some((peak, reset)) => {
            let p = peak() >> 20;
            reset();
            format!(" (peak {p} MiB since the line before)")
        }
        None => String::new(),
    }
}

/// `COTANGENT_TRACE_MEMORY=1` prints the live heap at every phase change and budget check to stderr
/// (issue 14: where a long program's memory goes, phase by phase; bench/README.md, session 20 rel24),
/// with the peak since the line before where the CLI's allocator counts it.
fn trace_memory() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("COTANGENT_TRACE_MEMORY").is_some())
}

/// The message of a phase that stopped because the live heap passed the memory budget, if it did.
pub fn memory_exceeded(phase: &str) -> Option<String> {
    let (live, limit) = memory_budget()?;
    if trace_memory() {
        eprintln!("memory: {:>5} MiB live at a check while {phase}{}", live() >> 20, peak_since_last());
    }
    (live() > limit).then(|| {
        format!("stopped: the memory budget ({} MiB, `--max-mb`) ran out while {phase}", limit >> 20)
    })
}

/// `memory_exceeded` for a pass that checks at every step (a transform at each term): without its
/// trace line, and only once the live heap is a quarter past the budget, halfway to the CLI's last
/// resort (three quarters of `--max-mb`), so that a phase whose peak passes the budget and comes
/// back under it by its end (chad/monadic's transform on chain-100000: 574 MiB, 444 at its end)
/// still finishes as before, and one that keeps growing stops with a located message.
pub fn memory_running_out(phase: &str) -> Option<String> {
    let (live, limit) = memory_budget()?;
    (live() > limit + limit / 4).then(|| memory_exceeded(phase)).flatten()
}

/// `memory_running_out` for a phase whose heap grows by doubling (a document arena's chunks, each
/// as large as all before it): its next allocation may be as large as all it has grown since it
/// began (`since`, the live heap then), so it stops once the live heap and that growth together
/// pass the mark: where the growth alone is checked, one chunk takes it from under the mark to past
/// the allocator's last resort (pairs-4000's arrays/dual-arrays, printed: 571 MiB live, next chunk
/// 256 MiB, last resort at 768).
pub fn memory_running_out_doubling(phase: &str, since: u64) -> Option<String> {
    let (live, limit) = memory_budget()?;
    let now = live();
    (now.saturating_add(now.saturating_sub(since)) > limit + limit / 4)
        .then(|| format!("stopped: the memory budget ({} MiB, `--max-mb`) ran out while {phase}", limit >> 20))
}

/// The live heap now, where a memory budget is set (0 otherwise).
pub fn live_now() -> u64 {
    memory_budget().map_or(0, |(live, _)| live())
}

/// What the pipeline is doing (a stage id and a phase), for the allocator's last-resort message:
/// read without allocating, so it is a pair of static strings behind a lock that nobody holds
/// while allocating.
static PHASE: std::sync::Mutex<(&str, &str)> = std::sync::Mutex::new(("", ""));

pub fn set_phase(stage: &'static str, phase: &'static str) {
    release_stack();
    if let (Some((live, _)), true) = (memory_budget(), trace_memory()) {
        eprintln!("memory: {:>5} MiB live as `{stage}` starts {phase}{}", live() >> 20, peak_since_last());
    }
    if let Ok(mut p) = PHASE.lock() {
        *p = (stage, phase);
    }
}

/// The current stage id and phase ("" when none), if the lock is free.
pub fn phase() -> Option<(&'static str, &'static str)> {
    PHASE.try_lock().ok().map(|p| *p)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// This process's resident set, in KiB (Linux's /proc).
    fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
        line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
    }

    /// Touches about `depth` KiB of stack, a frame at a time.
    #[inline(never)]
    fn recurse(depth: usize) -> u64 {
        let frame = std::hint::black_box([depth as u8; 1024]);
        if depth == 0 {
            return frame[0] as u64;
        }
        recurse(depth - 1) + std::hint::black_box(frame)[1023] as u64
    }

    /// Issue 14 item 4: the pages a deep pass touched on the big stack are given back at the next
    /// phase, not kept resident for the rest of the run.
    #[test]
    fn the_big_stacks_pages_below_the_current_frame_are_given_back() {
        let (before, after) = super::run_with_stack(|| {
            std::hint::black_box(recurse(128 * 1024)); // ~128 MiB of frames
            let before = rss_kib();
            super::release_stack();
            (before, rss_kib())
        });
        assert!(before > after + 64 * 1024, "resident {before} KiB before, {after} KiB after releasing the stack");
    }
}
