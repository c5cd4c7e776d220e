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
