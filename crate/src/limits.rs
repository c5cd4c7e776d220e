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

/// Runs `f` on a thread with a `NATIVE_STACK` stack natively; in wasm, runs it directly.
pub fn run_with_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    if cfg!(target_arch = "wasm32") {
        return f();
    }
    std::thread::Builder::new()
        .name("cotangent".into())
        .stack_size(NATIVE_STACK)
        .spawn(f)
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

/// What the pipeline is doing (a stage id and a phase), for the allocator's last-resort message:
/// read without allocating, so it is a pair of static strings behind a lock that nobody holds
/// while allocating.
static PHASE: std::sync::Mutex<(&str, &str)> = std::sync::Mutex::new(("", ""));

pub fn set_phase(stage: &'static str, phase: &'static str) {
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
