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

/// The best of `repeat` timings of one run of `f`, a run shorter than `min_sample` (in the clock's
/// unit) timed `k` times in one sample (each after its own set-up, all made before the clock starts)
/// and the sample divided by `k`, `k` growing from 1 until a sample lasts `min_sample` (at most
/// `max_runs`, itself at most `MAX_RUNS_A_SAMPLE`: the set-ups are held at once). A clock reading costs tens of nanoseconds natively, about a microsecond in
/// wasm (a crossing into JavaScript), and headless Chromium's ticks are 100 µs, each more than or
/// close to a 22-operation run (0.2–0.4 µs): native and wasm time such runs the same way, many to a
/// sample (issue 13: wasm against native on the peers' quaternion). A coarse clock reads a short
/// sample as 0 or one tick, so one run's reading alone would not say how many make it.
pub fn best_per_run<S, T, E>(
    clock: &dyn Fn() -> f64,
    repeat: usize,
    min_sample: f64,
    max_runs: usize,
    mut setup: impl FnMut() -> S,
    mut f: impl FnMut(&mut S) -> Result<T, E>,
) -> Result<f64, E> {
    let mut sample = |repeat: usize, k: usize| {
        best_of(repeat, clock, || (0..k).map(|_| setup()).collect::<Vec<S>>(), |states| states.iter_mut().try_for_each(|s| f(s).map(|_| ())))
    };
    let most = max_runs.clamp(1, MAX_RUNS_A_SAMPLE);
    let mut k = 1usize;
    loop {
        let took = match sample(1, k) {
            Some((t, _, Ok(()))) => t,
            Some((_, _, Err(e))) => return Err(e),
            None => return Ok(0.0),
        };
        if took >= min_sample || k >= most {
            break;
        }
        // near the goal where the clock read something, else eight times as many
        let next = if took > 0.0 { (min_sample / took * k as f64 * 1.25).ceil() as usize } else { k * 8 };
        k = next.max(2 * k).min(most);
    }
    match sample(repeat, k) {
        Some((t, _, Ok(()))) => Ok(t / k as f64),
        Some((_, _, Err(e))) => Err(e),
        None => Ok(0.0),
    }
}

/// The most runs `best_per_run` times in one sample.
pub const MAX_RUNS_A_SAMPLE: usize = 4096;

#[cfg(test)]
mod tests {
    use super::{best_of, best_per_run, MAX_RUNS_A_SAMPLE};
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

    /// A run shorter than a sample's minimum is timed many to a sample, each on its own set-up, and
    /// the sample divided: a clock that advances 0.01 ms a run gives 0.01, from samples of over 100
    /// runs; one that reads every run as 0 (a coarse clock) still gets a sample of a millisecond.
    #[test]
    fn short_runs_are_timed_many_to_a_sample() {
        let (clock, setups, runs) = (Cell::new(0.0), Cell::new(0), Cell::new(0));
        let ms = best_per_run(&|| clock.get(), 3, 1.0, MAX_RUNS_A_SAMPLE, || setups.set(setups.get() + 1), |_| {
            clock.set(clock.get() + 0.01);
            runs.set(runs.get() + 1);
            Ok::<_, String>(())
        });
        assert!((ms.unwrap() - 0.01).abs() < 1e-12);
        // a first run, a sample of 125 (1 ms over 0.01, with a quarter to spare), then three of 125
        assert_eq!((setups.get(), runs.get()), (1 + 125 + 3 * 125, 1 + 125 + 3 * 125));
        // a clock of 0.1 ms ticks, a run of 0.001 ms: k grows while the reading is 0 or short
        let (fine, ticks) = (Cell::new(0.0), Cell::new(0usize));
        let coarse = || (fine.get() / 0.1f64).floor() * 0.1;
        let ms = best_per_run(&coarse, 2, 1.0, MAX_RUNS_A_SAMPLE, || (), |_| {
            fine.set(fine.get() + 0.001);
            ticks.set(ticks.get() + 1);
            Ok::<_, String>(())
        });
        let ms = ms.unwrap();
        assert!((0.0008..=0.0012).contains(&ms), "{ms}");
        let long = best_per_run(&|| clock.get(), 3, 1.0, MAX_RUNS_A_SAMPLE, || (), |_| {
            clock.set(clock.get() + 1.0);
            Ok::<_, String>(())
        });
        assert_eq!(long, Ok(1.0));
        let failed = best_per_run(&|| clock.get(), 3, 1.0, MAX_RUNS_A_SAMPLE, || (), |_| Err::<(), _>("stopped".to_string()));
        assert_eq!(failed, Err("stopped".to_string()));
        // at most `max_runs` set-ups held at once
        let held = Cell::new(0usize);
        let ms = best_per_run(&|| clock.get(), 2, 1.0, 10, || held.set(held.get() + 1), |_| {
            clock.set(clock.get() + 0.01);
            Ok::<_, String>(())
        });
        assert!((ms.unwrap() - 0.01).abs() < 1e-12);
        assert_eq!(held.get(), 1 + 10 + 2 * 10, "a sample of 1, one of 10 (the most, short of 125), then two of 10");
    }
}
