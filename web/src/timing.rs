//! Timing in wasm, for comparing the page's engine with the native one (issue 13: wasm within 1.5×
//! of native). Measures what `cotangent bench` measures, the same way: the primal is the source's
//! `main` on an already lowered machine, a stage's gradient its prepared output on a fresh machine
//! created before the clock starts, each the best of `repeat` runs. `scripts/bench-wasm.mjs` runs it
//! in Node beside the native `cotangent bench` and prints the ratios.
use cotangent::interp::{Budget, Builtins, Machine, RunError};
use cotangent::pipeline::{self, Options};
use cotangent::stage::{Contract, RunCtx, Source};
use cotangent::stages;
use cotangent::value::Value;
use serde::Serialize;
use wasm_bindgen::prelude::*;

#[derive(Serialize)]
pub struct StageTime {
    pub id: String,
    /// Best gradient run in milliseconds; `None` when the stage refused or stopped.
    pub grad_ms: Option<f64>,
    pub outcome: String,
}

#[derive(Serialize)]
pub struct Timing {
    pub primal_ms: f64,
    /// The primal's real operations (the source's `real_ops`).
    pub real_ops: u64,
    pub stages: Vec<StageTime>,
}

/// `performance.now()` where the host has it (browsers, workers, Node), else 0. The object and its
/// method are looked up once: looking them up on every call (three crossings into JavaScript) cost
/// ~6 µs a timed run in Node, ten times a run of the quaternion's 22 operations.
fn now() -> f64 {
    #[cfg(target_arch = "wasm32")]
    {
        use wasm_bindgen::JsCast;
        thread_local! {
            static NOW: Option<(JsValue, js_sys::Function)> = {
                let perf = js_sys::Reflect::get(&js_sys::global(), &"performance".into()).unwrap_or(JsValue::UNDEFINED);
                let f = js_sys::Reflect::get(&perf, &"now".into()).ok().and_then(|f| f.dyn_into::<js_sys::Function>().ok());
                f.map(|f| (perf, f))
            };
        }
        NOW.with(|n| n.as_ref().and_then(|(perf, f)| f.call0(perf).ok()).and_then(|v| v.as_f64()).unwrap_or(0.0))
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::time::{SystemTime, UNIX_EPOCH};
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1e3)
    }
}

/// A timed sample lasts at least this long (`best_ms`).
const MIN_SAMPLE_MS: f64 = 1.0;

/// The best of `repeat` timings of `f` in milliseconds, on the host's clock, a short run timed many
/// to a sample (`cotangent::timing::best_per_run`, as `cotangent bench` does).
fn best_ms<S, T>(repeat: u32, setup: impl FnMut() -> S, f: impl FnMut(&mut S) -> Result<T, String>) -> Result<f64, String> {
    cotangent::timing::best_per_run(&now, repeat as usize, MIN_SAMPLE_MS, cotangent::timing::MAX_RUNS_A_SAMPLE, setup, f)
}

/// A fresh machine on `base`'s lowered code, as `cotangent bench`'s `again`: every timed run starts on
/// code lowered once before the clock.
fn again<'p>(base: &Result<Machine<'p>, RunError>) -> Result<Machine<'p>, RunError> {
    let mut m = base.as_ref().map_err(|e| e.clone())?.rerun();
    m.set_tracing(false);
    // as `cotangent bench`: no graph is drawn, so the Delta evaluators keep no visits per node
    m.set_draws_graph(false);
    Ok(m)
}

/// Times the primal of `source` and the gradient of each stage in `stages` (bench's step budget).
pub fn time_text(source: &str, stages_wanted: &[String], repeat: u32) -> Result<Timing, String> {
    let (program, s, t) = pipeline::front_end(source, &[]).map_err(|ds| ds.iter().map(|d| d.message.clone()).collect::<Vec<_>>().join("; "))?;
    let input = program.input.as_ref().and_then(|e| cotangent::syntax::value_of(e).ok()).unwrap_or(Value::Unit);
    // every function's regions compiled when the program is lowered, before the clock starts, as
    // `cotangent bench` does (`regions_after: 0`): the page defers them to a function's third entry,
    // which for a run as short as the quaternion's timed the compiling, not the engine
    let budget = Budget { steps: 200_000_000, regions_after: 0, ..Budget::default() };
    let no_builtins = Builtins::new();
    let primal_code = Machine::new(&program, &no_builtins, budget.clone());
    let primal_ms = best_ms(repeat, || again(&primal_code), |m| {
        let m = m.as_mut().map_err(|e| e.message())?;
        m.call("main", vec![input.clone()]).map_err(|e| e.message())
    })?;
    let mut m = again(&primal_code).map_err(|e| e.message())?;
    let primal = m.call("main", vec![input.clone()]).map_err(|e| e.message())?;
    let real_ops = m.cost().real_ops;
    let seed = primal.with_reals(&mut std::iter::repeat(1.0));
    let src = Source { program: &program, input_type: &s, output_type: &t, builtins: &no_builtins };
    let opts = Options { trace: false, budget: budget.clone(), ..Options::default() };
    let outputs = pipeline::Outputs::new(&src, &opts);
    let mut out = Timing { primal_ms, real_ops, stages: vec![] };
    for id in stages_wanted {
        let Some(st) = stages::find(id) else {
            out.stages.push(StageTime { id: id.clone(), grad_ms: None, outcome: "no such stage".into() });
            continue;
        };
        let timed = outputs.get(st).and_then(|prepared| {
            outputs.with_input(st, |src| {
                let lookup = |_: &str| None;
                let cx = RunCtx { src, origin: outputs.source(), input: &input, seed: &seed, outputs: &lookup };
                let code = Machine::new(&prepared.program, &prepared.builtins, budget.clone());
                best_ms(repeat, || again(&code), |m| {
                    let m = m.as_mut().map_err(|e| e.message())?;
                    let r = match st.contract() {
                        Contract::Gradient => pipeline::run_output(st, m, &cx),
                        Contract::SameFunction => pipeline::run_main(st, m, &cx),
                    };
                    r.map_err(|e| e.message())
                })
            })
        });
        out.stages.push(match timed {
            Ok(Ok(ms)) => StageTime { id: id.clone(), grad_ms: Some(ms), outcome: "ok".into() },
            Ok(Err(e)) => StageTime { id: id.clone(), grad_ms: None, outcome: e },
            Err(d) => StageTime { id: id.clone(), grad_ms: None, outcome: format!("refused: {}", d.message) },
        });
    }
    Ok(out)
}

/// `time_text` for JavaScript: `stages` is an array of stage ids; returns a `Timing` object or throws.
#[wasm_bindgen]
pub fn time_stages(source: &str, stages: Vec<String>, repeat: u32) -> Result<JsValue, JsValue> {
    let t = time_text(source, &stages, repeat).map_err(|e| JsValue::from_str(&e))?;
    serde_wasm_bindgen::to_value(&t).map_err(|e| JsValue::from_str(&e.to_string()))
}

#[cfg(test)]
mod tests {
    /// Natively, on the running example: the primal and every asked stage time, in order.
    #[test]
    fn times_the_primal_and_each_stage() {
        let src = "input (12.0, 13.0)\ndef main (x, y) = let z = x + y in x * z\n";
        let ids = vec!["forward".to_string(), "dualrev/tape".to_string(), "bogus".to_string()];
        let t = super::time_text(src, &ids, 2).unwrap();
        assert_eq!(t.real_ops, 2);
        assert!(t.primal_ms >= 0.0);
        let got: Vec<(&str, bool, &str)> = t.stages.iter().map(|s| (s.id.as_str(), s.grad_ms.is_some(), s.outcome.as_str())).collect();
        assert_eq!(got, [("forward", true, "ok"), ("dualrev/tape", true, "ok"), ("bogus", false, "no such stage")]);
    }
}
