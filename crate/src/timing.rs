//! Timing shared by `cotangent bench` (native) and the page's engine measured in wasm
//! (`web/src/timing.rs`): the best of several runs, each after its own untimed set-up. The clock is a
//! parameter because `std::time::Instant` does not exist in the browser (there it is
//! `performance.now()`).

/// The best of `repeat` timings of `f`, in the clock's unit, each after its own untimed `setup`; the
/// last set-up and result are kept. A run that fails (a budget stop) is not repeated: it would only
/// stop again, as late.
pub fn best_of<S, T, E>(
    repeat: usize,
    clock: &dyn Fn() -> f64,
    mut setup: impl FnMut() -> S,
    mut f: impl FnMut(&mut S) -> Result<T, E>,
) -> Option<(f64, S, Result<T, E>)> {
    let mut best: Option<(f64, S, Result<T, E>)> = None;
    for _ in 0..repeat.max(1) {
        let mut s = setup();
        let t0 = clock();
        let r = f(&mut s);
        let took = clock() - t0;
        let took = best.as_ref().map_or(took, |b| b.0.min(took));
        let failed = r.is_err();
        best = Some((took, s, r));
        if failed {
            break;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::best_of;
    use std::cell::Cell;

    #[test]
    fn keeps_the_best_time_and_stops_at_a_failure() {
        // a clock that advances by the run's number each time it is read twice: runs take 3, 1, 2
        let ticks = Cell::new(0.0);
        let lengths = [3.0, 1.0, 2.0];
        let run = Cell::new(0usize);
        let clock = || ticks.get();
        let got = best_of(3, &clock, || (), |_| {
            ticks.set(ticks.get() + lengths[run.get()]);
            run.set(run.get() + 1);
            Ok::<_, ()>(run.get())
        });
        let (best, _, last) = got.unwrap();
        assert_eq!((best, last), (1.0, Ok(3)));
        let tries = Cell::new(0);
        let failed = best_of(5, &clock, || (), |_| {
            tries.set(tries.get() + 1);
            Err::<(), _>("stopped")
        });
        assert_eq!((tries.get(), failed.map(|x| x.2)), (1, Some(Err("stopped"))));
    }
}
