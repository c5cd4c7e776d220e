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
        // Measured: a 300-deep let chain runs through every stage in wasm (Node and Chromium), 400
        // exceeds V8's call stack in the type checker and lowering of the monadic stages' outputs,
        // which are about 8 times deeper than their source. The shadow stack is raised to 32 MiB in
        // .cargo/config.toml, so V8's own stack is the limit.
        250
    } else {
        250_000
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
