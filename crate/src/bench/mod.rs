//! `cotangent bench`: each stage's counters and run time on program families at growing sizes, with the
//! ratio of gradient time to primal time measured in the same run (machines are shared and noisy, so
//! ratios, not absolute times, are the figures to compare). Not a test: nothing here asserts speed.
//!
//! What is timed: the primal is the source's `main`, the gradient a stage's prepared output, each run
//! on a fresh machine over code lowered once before the clock starts (`again`). Each
//! is the best of `repeat` runs. Each case may grow the process's live memory by at most `max_bytes`
//! (the counting allocator of `alloc.rs`); past it the case stops with a `memory` budget error. Rows are
//! handed to `emit` as each finishes, so a long run prints as it goes.

mod families;
mod output;

pub use families::{families, parse_size, Family, PEERS};
pub use output::{exponent_lines, header, json_line, table_line};

use crate::alloc;
use cotangent::interp::{Budget, Builtins, Machine, RunError};
use cotangent::ir::Program;
use cotangent::pipeline::{self, Options};
use cotangent::stage::{Contract, RunCtx, Source, Stage};
use cotangent::stages;
use cotangent::value::Value;
use cotangent::timing::{best_of, best_per_run, MAX_RUNS_A_SAMPLE};
use std::time::Instant;

pub struct Settings {
    pub budget: Budget,
    /// Runs per timing; the best is kept.
    pub repeat: usize,
    /// How many bytes one case (one primal or one stage at one size) may add to the live heap.
    pub max_bytes: u64,
    /// Time with the thread's CPU clock, not the wall clock (`--cpu`).
    pub cpu: bool,
    /// A run shorter than this, in seconds, is timed many to a sample (`per_run`; `--sample-ms`).
    pub min_sample: f64,
}

impl Settings {
    fn clock(&self) -> fn() -> f64 {
        if self.cpu {
            cpu_secs
        } else {
            secs
        }
    }
}

#[derive(Clone)]
pub struct Row {
    pub family: String,
    pub n: usize,
    pub stage: String,
    pub outcome: String,
    pub counters: Vec<(String, u64)>,
    /// Primal operations: the peers' count for their programs, else the source's `real_ops`.
    pub ops: u64,
    pub primal_secs: f64,
    pub grad_secs: f64,
    /// The growth of the live heap during the gradient run, at its peak (the tape, the Delta, ...).
    pub bytes: Option<u64>,
}

impl Row {
    pub fn ratio(&self) -> f64 {
        self.grad_secs / self.primal_secs
    }
    pub fn per_op(&self, x: f64) -> f64 {
        x / self.ops.max(1) as f64
    }
}

/// The chosen families: by name, `peers` standing for the peers' four; all when none is named.
pub fn chosen_families(names: &[String]) -> Vec<Family> {
    families()
        .into_iter()
        .filter(|f| names.is_empty() || names.iter().any(|n| n == f.name || (n == "peers" && PEERS.contains(&f.name))))
        .collect()
}

/// Runs `stage_ids` (all when empty) on each family at each size (`sizes`, or each family's
/// defaults), handing every row to `emit` as it finishes.
pub fn run(family_names: &[String], sizes: Option<&[usize]>, stage_ids: &[String], set: &Settings, emit: &mut dyn FnMut(&Row)) {
    let chosen: Vec<&'static dyn Stage> = stages::all().into_iter().filter(|s| stage_ids.is_empty() || stage_ids.iter().any(|id| id == s.info().id)).collect();
    for fam in chosen_families(family_names) {
        let sizes = if fam.fixed() { vec![1] } else { sizes.map(<[usize]>::to_vec).unwrap_or_else(|| fam.default_sizes()) };
        for n in sizes {
            if n > fam.max {
                eprintln!("{} n={n}: skipped (this family runs up to n = {})", fam.name, fam.max);
                continue;
            }
            let text = (fam.make)(n);
            if fam.name == "program-size" {
                output::program_size(&text, n, &chosen, &set.budget, set.clock(), emit);
                continue;
            }
            run_case(&fam, n, &text, &chosen, set, emit);
        }
    }
}

/// Seconds since the first call: `cotangent::timing::best_of`'s clock natively.
fn secs() -> f64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// The running thread's CPU time in seconds (`--cpu`): on a machine shared with other work the wall
/// clock also counts the time a run waits for a core (measured: 2.1 s of wall clock for 0.3 s of CPU
/// at a load of 7.7 on 2 cores), so CPU time is what compares engines there. Linux's
/// `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`; the wall clock elsewhere.
fn cpu_secs() -> f64 {
    #[cfg(target_os = "linux")]
    {
        #[repr(C)]
        struct Timespec {
            sec: i64,
            nsec: i64,
        }
        extern "C" {
            fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
        }
        const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
        let mut ts = Timespec { sec: 0, nsec: 0 };
        // SAFETY: `clock_gettime` writes one `timespec` (two 64-bit fields on 64-bit Linux).
        if unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return ts.sec as f64 + ts.nsec as f64 * 1e-9;
        }
    }
    secs()
}

/// `program` lowered, for `again`.
fn machine<'p>(program: &'p Program, builtins: &Builtins, set: &Settings) -> Result<Machine<'p>, RunError> {
    Machine::new(program, builtins, set.budget.clone())
}

/// A fresh machine (no globals, states or counts) on `base`'s lowered code, whose run stops past
/// `max_bytes` more live heap than now. Every timed run, primal and gradient, starts so: its code
/// lowered once before the clock, as a compiled program runs again (issue 13: a taping loop's round
/// program, kept with the code, was built again in every run, ~20 % of a 40-operation gradient).
fn again<'p>(base: &Result<Machine<'p>, RunError>, set: &Settings) -> Result<Machine<'p>, RunError> {
    let mut m = base.as_ref().map_err(|e| e.clone())?.rerun();
    m.set_tracing(false);
    // bench draws no graph: the Delta evaluators keep no visits per node (issue 13, bytes per op)
    m.set_draws_graph(false);
    m.set_memory_limit(alloc::live, set.max_bytes);
    Ok(m)
}

/// What the set-ups of one sample of short runs may hold at once, in bytes (`per_run`).
const SAMPLE_BYTES: u64 = 64 << 20;

/// `secs`, the best of single runs, or for a run shorter than `set.min_sample` (`--sample-ms`) the
/// best of samples of many runs divided (`best_per_run`, as the page's engine is timed in wasm, where
/// a clock reading costs about a microsecond: for `scripts/bench-wasm.mjs`, so that both sides are
/// timed alike). The runs of a sample start on machines made before it, their memory no longer in
/// the caches: a 22-operation run then takes about twice as long as alone, just after its set-up.
/// As many machines as `SAMPLE_BYTES` holds; `secs` when a run fails.
fn per_run<S>(secs: f64, set: &Settings, mut setup: impl FnMut() -> S, f: impl FnMut(&mut S) -> Result<(), RunError>) -> f64 {
    if !(secs < set.min_sample) {
        return secs;
    }
    let before = alloc::live();
    let one = setup();
    let each = alloc::live().saturating_sub(before).max(1);
    drop(one);
    let most = (SAMPLE_BYTES / each).clamp(1, MAX_RUNS_A_SAMPLE as u64) as usize;
    best_per_run(&set.clock(), set.repeat, set.min_sample, most, setup, f).unwrap_or(secs)
}

fn stopped(e: &RunError, set: &Settings) -> String {
    match e {
        RunError::Budget { budget, .. } => match budget {
            cotangent::interp::BudgetKind::Memory => format!("stopped by the memory budget ({} MB per case)", set.max_bytes >> 20),
            b => format!("stopped by the {} budget", b.name()),
        },
        other => format!("error: {}", other.message()),
    }
}

/// One family at one size: the primal, then every chosen stage.
fn run_case(fam: &Family, n: usize, text: &str, chosen: &[&'static dyn Stage], set: &Settings, emit: &mut dyn FnMut(&Row)) {
    let (program, s, t) = match pipeline::front_end(text, &[]) {
        Ok(x) => x,
        Err(ds) => {
            eprintln!("{} n={n}: {}", fam.name, ds.iter().map(|d| d.message.clone()).collect::<Vec<_>>().join("; "));
            return;
        }
    };
    let input = program.input.as_ref().and_then(|e| cotangent::syntax::value_of(e).ok()).unwrap_or(Value::Unit);
    let no_builtins = Builtins::new();
    // the primal, measured in the same run as the stages below: the denominator of every ratio
    let primal_code = machine(&program, &no_builtins, set);
    let timed = best_of(set.repeat, &set.clock(), || again(&primal_code, set), |m| match m {
        Ok(m) => m.call("main", vec![input.clone()]),
        Err(e) => Err(e.clone()),
    });
    let Some((primal_secs, pm, primal)) = timed else { return };
    let primal = match primal {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{} n={n}: the primal {}", fam.name, stopped(&e, set));
            return;
        }
    };
    let primal_secs = per_run(primal_secs, set, || again(&primal_code, set), |m| match m {
        Ok(m) => m.call("main", vec![input.clone()]).map(|_| ()),
        Err(e) => Err(e.clone()),
    });
    let ops = fam.peer_ops(n).unwrap_or_else(|| pm.map(|m| m.cost().real_ops).unwrap_or(0));
    let seed = primal.with_reals(&mut std::iter::repeat(1.0));
    let src = Source { program: &program, input_type: &s, output_type: &t, builtins: &no_builtins };
    let opts = Options { trace: false, budget: set.budget.clone(), ..Options::default() };
    let outputs = pipeline::Outputs::new(&src, &opts);
    for st in chosen {
        let row = |outcome: String, counters, grad_secs, bytes| Row {
            family: fam.name.into(),
            n,
            stage: st.info().id.into(),
            outcome,
            counters,
            ops,
            primal_secs,
            grad_secs,
            bytes,
        };
        let out = match outputs.get(*st) {
            Ok(x) => x,
            Err(d) => {
                emit(&row(format!("refused: {}", d.message.lines().next().unwrap_or("")), vec![], f64::NAN, None));
                continue;
            }
        };
        let lookup = |_: &str| None;
        let mut bytes = None;
        let timed = outputs.with_input(*st, |src| {
            let cx = RunCtx { src, origin: outputs.source(), input: &input, seed: &seed, outputs: &lookup };
            // each run on a fresh machine: a stage's runtime state must start empty
            let code = machine(&out.program, &out.builtins, set);
            let mut got = best_of(
                set.repeat,
                &set.clock(),
                || {
                    let m = again(&code, set);
                    alloc::reset_peak();
                    (m, alloc::live())
                },
                |(m, _)| {
                    let m = m.as_mut().map_err(|e| e.clone())?;
                    // a same-function stage's output is timed as it runs main
                    match st.contract() {
                        Contract::Gradient => pipeline::run_output(*st, m, &cx).map(|_| ()),
                        Contract::SameFunction => pipeline::run_main(*st, m, &cx).map(|_| ()),
                    }
                },
            )?;
            let (m, before) = &mut got.1;
            bytes = Some(alloc::peak().saturating_sub(*before));
            if got.2.is_ok() {
                got.0 = per_run(got.0, set, || again(&code, set), |m| {
                    let m = m.as_mut().map_err(|e| e.clone())?;
                    match st.contract() {
                        Contract::Gradient => pipeline::run_output(*st, m, &cx).map(|_| ()),
                        Contract::SameFunction => pipeline::run_main(*st, m, &cx).map(|_| ()),
                    }
                });
            }
            // the chain's report (a cost model's bound) is not timed
            if let (Ok(m), Ok(_)) = (m, &got.2) {
                if let Some(chain) = stages::chain_of(st.info().id) {
                    (chain.after_run)(m, &cx);
                }
            }
            Some(got)
        });
        let (grad_secs, (m, _), res) = match timed {
            Ok(Some(x)) => x,
            Ok(None) => continue,
            Err(d) => {
                emit(&row(format!("refused: {}", d.message.lines().next().unwrap_or("")), vec![], f64::NAN, None));
                continue;
            }
        };
        let c = match &m {
            Ok(m) => m.cost(),
            Err(_) => Default::default(),
        };
        let mut counters = vec![("steps".to_string(), c.steps), ("real_ops".to_string(), c.real_ops)];
        counters.extend(c.counters.iter().map(|(k, v)| (k.clone(), *v)));
        let outcome = match res {
            Ok(()) => "ok".to_string(),
            Err(e) => stopped(&e, set),
        };
        emit(&row(outcome, counters, grad_secs, bytes));
    }
}
