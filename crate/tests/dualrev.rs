//! Tests of the Smeding–Vákár chain (`dualrev/*`): agreement with `forward` on the examples and on
//! random programs, the worked numbers of the note (§4.1–4.3), the counters, the budget, and golden
//! printed programs.

use cotangent::build::*;
use cotangent::interp::{Budget, Builtins, Machine, TraceStep};
use cotangent::ir::*;
use cotangent::pipeline::{self, Analysis, Options, StageResult};
use cotangent::print::PrintOptions;
use cotangent::stage::Source;
use cotangent::stages::{self, dualrev::common as dualrev_common};
use cotangent::types;
use cotangent::value::Value;
use proptest::prelude::*;

/// The chain's stages, from the registry.
fn dualrev() -> Vec<&'static str> {
    stages::dualrev::CHAIN.stages.iter().map(|s| s.info().id).collect()
}

const RUNNING: &str = "-- Fig. 1\ninput (12.0, 13.0)\ndef main (x, y) = let z = x + y in x * z\n";

fn analyse_with(text: &str, params: &[(&str, i64)], budget: Budget) -> Analysis {
    let opts = Options {
        stages: dualrev().iter().map(|s| s.to_string()).collect(),
        params: params.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        budget,
        ..Options::default()
    };
    match pipeline::analyse(text, &opts) {
        Ok(a) => a,
        Err(ds) => panic!("{text}\n{:?}", ds),
    }
}

fn analyse(text: &str) -> Analysis {
    analyse_with(text, &[], Budget::default())
}

fn stage<'a>(a: &'a Analysis, id: &str) -> &'a StageResult {
    a.stages.iter().find(|r| r.id == id).unwrap_or_else(|| panic!("no result for {id}"))
}

fn ok<'a>(a: &'a Analysis, id: &str) -> &'a StageResult {
    let r = stage(a, id);
    assert!(r.ok, "{id}: {:?}\n{}", r.error, r.program);
    r
}

fn resolves(r: &StageResult) -> Vec<(u64, f64)> {
    r.trace.iter().filter(|t| t.kind == "resolve").map(|t| (t.node.unwrap(), t.factor.as_ref().and_then(|f| f.num).unwrap())).collect()
}

fn row(t: &TraceStep, key: &str) -> Option<f64> {
    t.state.iter().find(|(k, _)| k == key).and_then(|(_, v)| v.num)
}

/// A step's state rows as reals.
fn nums(t: &TraceStep) -> Vec<(String, f64)> {
    t.state.iter().map(|(k, v)| (k.clone(), v.num.unwrap_or(f64::NAN))).collect()
}

#[test]
fn running_example_every_stage() {
    let a = analyse(RUNNING);
    for st in dualrev() {
        let r = ok(&a, st);
        assert_eq!(r.primal.as_ref().unwrap().to_string(), "300.0", "{st}");
        assert_eq!(r.gradient, vec![37.0, 12.0], "{st}");
        assert_eq!(r.agrees, Some(true), "{st}");
        // x is used twice: the naive stage calls its backpropagator twice, the others once
        let calls = r.cost.counter("backprop_calls");
        if st == "dualrev/naive" {
            // out(1): d_x 25 + dz 12; dz 12: d_x 12 + d_y 12  →  out, d_x, dz, d_x, d_y
            assert_eq!(calls, 5);
        } else {
            assert_eq!(calls, 4, "{st}");
            assert_eq!(r.cost.counter("ids_allocated"), 4, "{st}");
        }
    }
}

/// Note §4.1: the Staged object passed to SResolve is (0, {0 ↦ (d_in,0, 25), 2 ↦ (bp_z, 12)});
/// resolving pops 2 (with 12), then 1 (12), then 0 (37), giving (37, 12).
#[test]
fn running_example_staged_resolve_trace() {
    let a = analyse(RUNNING);
    let r = ok(&a, "dualrev/staged");
    assert_eq!(resolves(r), vec![(2, 12.0), (1, 12.0), (0, 37.0)]);
    // the Staged object passed to SResolve: (0 + 0, {0 ↦ (d_in,0, 25), 2 ↦ (bp_z, 12)})
    let start = &r.trace[0];
    assert_eq!(start.kind, "staged");
    assert_eq!(nums(start), vec![("c[0]".to_string(), 0.0), ("c[1]".to_string(), 0.0), ("m[0]".to_string(), 25.0), ("m[2]".to_string(), 12.0)]);
    let t = &r.trace[1..];
    // after step 1: (0, {0 ↦ 37, 1 ↦ 12})
    assert_eq!((row(&t[0], "c[0]"), row(&t[0], "c[1]")), (Some(0.0), Some(0.0)));
    assert_eq!((row(&t[0], "m[0]"), row(&t[0], "m[1]"), row(&t[0], "m[2]")), (Some(37.0), Some(12.0), None));
    // after step 2: ((0, 12), {0 ↦ 37})
    assert_eq!((row(&t[1], "c[0]"), row(&t[1], "c[1]"), row(&t[1], "m[0]"), row(&t[1], "m[1]")), (Some(0.0), Some(12.0), Some(37.0), None));
    // after step 3: ((37, 12), {})
    assert_eq!((row(&t[2], "c[0]"), row(&t[2], "c[1]")), (Some(37.0), Some(12.0)));
    assert!(t[2].state.iter().all(|(k, _)| k.starts_with("c[")));
    // the graph: IDs 0..3, the output (ID 3) called directly, z (ID 2) staged with 12
    let g = r.graph.as_ref().unwrap();
    let ids: Vec<Option<i64>> = g.nodes.iter().map(|n| n.delta_id).collect();
    assert_eq!(ids, vec![Some(0), Some(1), Some(2), Some(3)]);
    let edges: Vec<(u64, u64)> = g.edges.iter().map(|e| (e.from, e.to)).collect();
    assert!(edges.contains(&(3, 0)) && edges.contains(&(3, 2)) && edges.contains(&(2, 0)) && edges.contains(&(2, 1)));
    // Cayley and sparse resolve in the same order with the same cotangents
    for st in ["dualrev/cayley", "dualrev/sparse"] {
        assert_eq!(resolves(ok(&a, st)), vec![(2, 12.0), (1, 12.0), (0, 37.0)], "{st}");
    }
}

/// Note §4.1, stage 5 trace: m[3] is untouched (the output's backpropagator was called directly),
/// i = 2 stages 12 for IDs 0 and 1, then SOneHot 1 12 and SOneHot 0 37 fill c = [37, 12].
#[test]
fn running_example_array_traces() {
    let a = analyse(RUNNING);
    let r = ok(&a, "dualrev/mutable");
    assert_eq!(resolves(r), vec![(2, 12.0), (1, 12.0), (0, 37.0)]);
    let last = r.trace.last().unwrap();
    assert_eq!((row(last, "c[0]"), row(last, "c[1]")), (Some(37.0), Some(12.0)));
    // From §10.1 on the output is staged too (at ID 3, with the seed), then swept 3, 2, 1, 0 (Fig. 11)
    assert_eq!(resolves(ok(&a, "dualrev/no-collector")), vec![(3, 1.0), (2, 12.0), (1, 12.0), (0, 37.0)]);
    for st in ["dualrev/contrib", "dualrev/tape", "dualrev/parallel"] {
        let r = ok(&a, st);
        assert_eq!(resolves(r), vec![(3, 1.0), (2, 12.0), (1, 12.0), (0, 37.0)], "{st}");
        let g = r.graph.as_ref().unwrap();
        let w = |f: u64, t: u64| g.edges.iter().find(|e| e.from == f && e.to == t).map(|e| e.label.clone());
        // Fig. 11b: z = (3, [(1.0, 1), (1.0, 2)]), x·z = (4, [(z, 1), (x, 3)]) with IDs from 1
        assert_eq!((w(2, 0), w(2, 1), w(3, 0), w(3, 2)), (Some("1.0".into()), Some("1.0".into()), Some("25.0".into()), Some("12.0".into())), "{st}");
    }
}

const FIG2: &str = "input 1.5\ndef main x0 = let x1 = x0 + x0 in let x2 = x1 + x1 in let x3 = x2 + x2 in x3\n";

/// Note §4.2: with n = 2 the naive stage makes 1 + 2 + 4 + 8 = 15 backpropagator calls, the staged
/// stages 4.
#[test]
fn fig2_doubling_counts() {
    let a = analyse(FIG2);
    for st in dualrev() {
        let r = ok(&a, st);
        assert_eq!(r.gradient, vec![8.0], "{st}");
        let want = if st == "dualrev/naive" { 15 } else { 4 };
        assert_eq!(r.cost.counter("backprop_calls"), want, "{st}");
    }
    // the naive stage's DAG shows how often each backpropagator runs: 8, 4, 2, 1 (Fig. 2)
    let g = ok(&a, "dualrev/naive").graph.as_ref().unwrap();
    let visits: Vec<Option<u64>> = g.nodes.iter().map(|n| n.visits).collect();
    assert_eq!(visits, vec![Some(8), Some(4), Some(2), Some(1)]);
    assert!(g.edges.iter().all(|e| e.label == "calls ×2"), "{:?}", g.edges);
}

const CHAIN: &str = "input 1.5\ndef double k x = if k == 0 then x else double (k - 1) (x + x)\nparam n = 2\ndef main x = double n x\n";

/// `backprop_calls` grows as 2^n for the naive stage and linearly for the others.
#[test]
fn doubling_chain_growth() {
    for n in [1i64, 2, 4, 8, 12] {
        let a = analyse_with(CHAIN, &[("n", n)], Budget::default());
        for st in dualrev() {
            let r = ok(&a, st);
            assert_eq!(r.gradient, vec![2f64.powi(n as i32)], "{st} n={n}");
            let want = if st == "dualrev/naive" { (1u64 << (n + 1)) - 1 } else { n as u64 + 1 };
            assert_eq!(r.cost.counter("backprop_calls"), want, "{st} n={n}");
        }
    }
}

/// A runaway naive stage stops at its step budget, reporting the counts it reached.
#[test]
fn naive_stops_at_budget() {
    let budget = Budget { steps: 2_000_000, ..Budget::default() };
    let a = analyse_with(CHAIN, &[("n", 40)], budget);
    let r = stage(&a, "dualrev/naive");
    assert!(!r.ok);
    let msg = r.error.clone().unwrap();
    assert!(msg.contains("steps budget"), "{msg}");
    assert!(msg.contains("backprop_calls"), "{msg}");
    assert!(r.cost.counter("backprop_calls") > 100_000, "{:?}", r.cost);
    for st in &dualrev()[1..] {
        let r = ok(&a, st);
        assert_eq!(r.cost.counter("backprop_calls"), 41, "{st}");
    }
}

/// Runs a hand-written target program (surface syntax, with a stage's builtins) and returns its
/// result, backprop_calls and trace.
fn run_target(stage_id: &str, text: &str, zero: Value) -> (Value, u64, Vec<TraceStep>) {
    let st = stages::find(stage_id).unwrap();
    let mut builtins = Builtins::new();
    builtins.extend(st.builtins());
    let mut p = cotangent::syntax::parse_program_with(text, &|n| builtins.get(n).is_some()).expect("parses");
    types::check_program(&mut p, &builtins).expect("type-checks");
    let mut m = Machine::new(&p, &builtins, Budget::default()).expect("machine");
    dualrev_common::prepare(&mut m, &zero);
    let v = m.call("grad", vec![Value::Unit]).expect("runs");
    let calls = m.cost().counter("backprop_calls");
    (v, calls, m.take_trace().0)
}

/// Note §4.3: f4 1 stages {f2 ↦ 1, f3 ↦ 2}; resolving f3 (at 2) gives {f2 ↦ 9, f1 ↦ 10}; f2 (at 9)
/// gives f1 ↦ 55; f1 gives (0, (55, 0)). Each backpropagator runs once, in descending ID order.
/// Called naively, f4 runs f2 twice and f1 five times.
#[test]
fn f1_f4_resolve_order() {
    let staged = "
def grad u =
  let f1 = (0, lin\\z -> counted (SCotan (0.0, (z, 0.0)))) in
  let f2 = (1, lin\\z -> counted (plusStaged (SCall f1 (2.0 * z)) (SCall f1 (3.0 * z)))) in
  let f3 = (2, lin\\z -> counted (plusStaged (SCall f2 (4.0 * z)) (SCall f1 (5.0 * z)))) in
  let f4 = (3, lin\\z -> counted (plusStaged (SCall f2 z) (SCall f3 (2.0 * z)))) in
  SResolve (snd f4 1.0)
";
    let zero = Value::pair(Value::Real(0.0), Value::pair(Value::Real(0.0), Value::Real(0.0)));
    let (v, calls, trace) = run_target("dualrev/staged", staged, zero.clone());
    assert_eq!(v.to_string(), "(0.0, (55.0, 0.0))");
    assert_eq!(calls, 4);
    // f4 1 = (0, {f2 ↦ 1, f3 ↦ 2})
    assert_eq!(nums(&trace[0]).into_iter().filter(|(k, _)| k.starts_with('m')).collect::<Vec<_>>(), vec![("m[1]".to_string(), 1.0), ("m[2]".to_string(), 2.0)]);
    let trace: Vec<TraceStep> = trace.into_iter().filter(|t| t.kind == "resolve").collect();
    let order: Vec<(u64, f64)> = trace.iter().map(|t| (t.node.unwrap(), t.factor.as_ref().and_then(|f| f.num).unwrap())).collect();
    assert_eq!(order, vec![(2, 2.0), (1, 9.0), (0, 55.0)]);
    assert_eq!((row(&trace[0], "m[1]"), row(&trace[0], "m[0]")), (Some(9.0), Some(10.0)));
    assert_eq!(row(&trace[1], "m[0]"), Some(55.0));

    let naive = "
def grad u =
  let f1 = lin\\z -> counted (0.0, (z, 0.0)) in
  let f2 = lin\\z -> counted (plusC (f1 (2.0 * z)) (f1 (3.0 * z))) in
  let f3 = lin\\z -> counted (plusC (f2 (4.0 * z)) (f1 (5.0 * z))) in
  let f4 = lin\\z -> counted (plusC (f2 z) (f3 (2.0 * z))) in
  f4 1.0
";
    let (v, calls, _) = run_target("dualrev/naive", naive, zero);
    assert_eq!(v.to_string(), "(0.0, (55.0, 0.0))");
    assert_eq!(calls, 1 + 1 + 2 + 5);
}

/// Every stage agrees with `forward` (and with the expectations) on every example.
#[test]
fn examples_agree_with_forward() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "cot")).collect();
    files.sort();
    assert!(files.len() >= 6);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let opts = Options { stages: dualrev().iter().map(|s| s.to_string()).collect(), ..Options::default() };
        let a = match pipeline::analyse(&text, &opts) {
            Ok(a) => a,
            Err(_) => continue, // not a program every stage takes (another paper's syntax)
        };
        for r in &a.stages {
            if let Some(e) = &r.error {
                assert!(r.id == "dualrev/naive" && e.contains("budget"), "{}: {}: {e}", f.display(), r.id);
                continue;
            }
            assert_eq!(r.agrees, Some(true), "{}: {} gives {:?}", f.display(), r.id, r.gradient);
        }
        let fails = pipeline::check_expects(&a);
        assert!(fails.is_empty(), "{}: {fails:?}", f.display());
    }
}

/// Golden printed programs of each stage for the running example.
#[test]
fn golden_programs() {
    let mut opts = Options { stages: dualrev().iter().map(|s| s.to_string()).collect(), ..Options::default() };
    opts.print = PrintOptions::unicode();
    let a = pipeline::analyse(RUNNING, &opts).unwrap();
    for r in &a.stages {
        let name = format!("running_{}", r.id.replace('/', "_").replace('-', "_"));
        insta::assert_snapshot!(name, r.program);
    }
}

/// Every stage's output type-checks at the types the paper states (checked by the pipeline), also
/// for inputs and outputs with sums, integers and nesting.
#[test]
fn stated_types_hold_for_mixed_types() {
    let text = "input (inr (2, 1.5), ((0.5, true), 3))\n\
def main (s, ((a, b), k)) = case s of inl x -> (inl (x * a), k) | inr (j, x) -> (inr (if b then x * a else real j), k + 1)\n";
    let a = analyse(text);
    for st in dualrev() {
        let r = ok(&a, st);
        assert_eq!(r.agrees, Some(true), "{st}");
        assert_eq!(r.gradient_value.as_ref().unwrap().to_string(), "(inr (2, 0.5), ((1.5, true), 3))", "{st}");
    }
}

// ---------------------------------------------------------------------------------------------
// Random programs

#[derive(Clone, Debug)]
enum Op {
    Add(usize, usize),
    Sub(usize, usize),
    Mul(usize, usize),
    Sin(usize),
    Cos(usize),
    Const(usize, i32),
    IfPos(usize, usize, usize),
    Apply(usize, usize),
    Par(usize, usize, usize),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Add(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Sub(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Mul(a, b)),
        any::<usize>().prop_map(Op::Sin),
        any::<usize>().prop_map(Op::Cos),
        (any::<usize>(), -3i32..4).prop_map(|(a, k)| Op::Const(a, k)),
        (any::<usize>(), any::<usize>(), any::<usize>()).prop_map(|(a, b, c)| Op::IfPos(a, b, c)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Apply(a, b)),
        (any::<usize>(), any::<usize>(), any::<usize>()).prop_map(|(a, b, c)| Op::Par(a, b, c)),
    ]
}

/// A random straight-line program over (x, y) with sharing, conditionals, a closure and `|||`.
fn random_program(ops: &[Op]) -> String {
    let mut lines = vec!["input (0.7, -1.3)".to_string(), "def main (x, y) =".to_string(), "  let f = \\t -> t * x + sin y in".to_string()];
    let mut vars = vec!["x".to_string(), "y".to_string()];
    for (k, op) in ops.iter().enumerate() {
        let v = |i: &usize| vars[i % vars.len()].clone();
        let rhs = match op {
            Op::Add(a, b) => format!("{} + {}", v(a), v(b)),
            Op::Sub(a, b) => format!("{} - {}", v(a), v(b)),
            Op::Mul(a, b) => format!("{} * {}", v(a), v(b)),
            Op::Sin(a) => format!("sin {}", v(a)),
            Op::Cos(a) => format!("cos {}", v(a)),
            Op::Const(a, c) => format!("{} * {}.5", v(a), c),
            Op::IfPos(a, b, c) => format!("if {} > 0.0 then {} else {} * {}", v(a), v(b), v(c), v(a)),
            Op::Apply(a, b) => format!("f ({} - {})", v(a), v(b)),
            Op::Par(a, b, c) => format!("let (p, q) = ({} * {}) ||| f (sin {}) in p + q", v(a), v(b), v(c)),
        };
        lines.push(format!("  let v{k} = {rhs} in"));
        vars.push(format!("v{k}"));
    }
    let n = vars.len();
    lines.push(format!("  ({}, {} * {})", vars[n - 1], vars[n - 2], vars[n / 2]));
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]
    #[test]
    fn random_programs_agree_with_forward(ops in prop::collection::vec(op_strategy(), 1..14)) {
        let text = random_program(&ops);
        let a = analyse(&text);
        for st in dualrev() {
            let r = stage(&a, st);
            prop_assert!(r.ok, "{}: {:?}\n{}", st, r.error, text);
            prop_assert_eq!(r.agrees, Some(true), "{}\n{}", st, text);
        }
    }
}

#[test]
fn sources_with_target_constructs_are_refused() {
    // `counted` is not a source name: the front end reports it, so no stage sees it; a stage given
    // target constructs directly refuses them with a located message.
    let mut n = 0u32;
    let mut name = |t: &str| {
        n += 1;
        Name::new(t, n)
    };
    let x = name("x");
    let body = app(builtin("genID"), var(&x));
    let mut p = Program { params: vec![], input: None, seed: None, defs: vec![def("main", lam(pvar(&x), body))], expects: vec![], next_id: 10 };
    p.defs[0].body.ty = Type::Unknown;
    let (s, t) = (Type::Real, Type::Real);
    let b = Builtins::new();
    let src = Source { program: &p, input_type: &s, output_type: &t, builtins: &b };
    for st in dualrev() {
        let e = pipeline::refusal(stages::find(st).unwrap(), &src).unwrap_err();
        assert!(e.message.contains("target construct"), "{st}: {}", e.message);
    }
}

// ---------------------------------------------------------------------------------------------
// §12: the parallel stage

const PAR: &str = "-- note §4.6\ninput (2.0, 3.0)\n\
def main (x, y) =\n  let (a, b) = (x * y) ||| (x + y) in\n  let (c, d) = (a * a) ||| sin b in\n  c + d\n";

/// Note §4.6: the job graph (Fork (Fork (Start,0,2) (Start,1,1) (Start,2,1), 3, 0) (Start,4,1) (Start,5,1), 6, 1),
/// resolved as job 6, then jobs 4 and 5 (independent), job 3, jobs 1 and 2, job 0; f = 36 + sin 5.
#[test]
fn parallel_job_graph_and_resolve() {
    let a = analyse(PAR);
    for st in dualrev() {
        let r = ok(&a, st);
        assert_eq!(r.agrees, Some(true), "{st}");
        assert_eq!(r.primal.as_ref().unwrap().to_string(), "35.04107572533686", "{st}");
    }
    let r = ok(&a, "dualrev/parallel");
    assert_eq!(r.cost.counter("forks"), 2);
    let jobs: Vec<String> = r.trace.iter().filter(|t| t.kind == "job").map(|t| t.note.split(':').next().unwrap().to_string()).collect();
    assert_eq!(jobs, vec!["job 6", "job 4", "job 5", "job 3", "job 1", "job 2", "job 0"]);
    let g = r.graph.as_ref().unwrap();
    let after = |j: u32| g.groups.iter().find(|x| x.name == format!("job {j}")).map(|x| x.after.clone()).unwrap();
    assert_eq!(g.groups.len(), 7);
    assert_eq!(after(6), vec!["job 4", "job 5"]);
    assert_eq!(after(3), vec!["job 1", "job 2"]);
    assert_eq!((after(4), after(5)), (vec!["job 3".to_string()], vec!["job 3".to_string()]));
    assert_eq!((after(1), after(2)), (vec!["job 0".to_string()], vec!["job 0".to_string()]));
    assert!(after(0).is_empty());
    // jobs 1 and 2 both add into the inputs' cells (0,0) and (0,1): the concurrent writes of §4.6
    let into_inputs: Vec<(u64, u64)> = g.edges.iter().filter(|e| e.to < 2).map(|e| (e.from, e.to)).collect();
    assert_eq!(into_inputs.len(), 4);
}

/// The threaded resolve gives the sequential one's gradient (up to rounding).
#[test]
fn parallel_threads_agree() {
    use cotangent::stages::dualrev::parallel::THREADS;
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/dualrev-parallel-tree.cot")).unwrap();
    let opts = Options { stages: vec!["dualrev/parallel".into()], trace: false, params: vec![("n".into(), 9)], ..Options::default() };
    THREADS.store(2, std::sync::atomic::Ordering::Relaxed);
    let a = pipeline::analyse(&text, &opts).unwrap();
    THREADS.store(0, std::sync::atomic::Ordering::Relaxed);
    let r = ok(&a, "dualrev/parallel");
    assert_eq!(r.agrees, Some(true));
    assert_eq!(r.cost.counter("forks"), (1 << 9) - 1);
}

/// `|||` parses at the lowest precedence, does not associate, and prints back to itself.
#[test]
fn parallel_pair_syntax() {
    use cotangent::print::print_program;
    let p = cotangent::syntax::parse_program("def main (x, y) = x * y ||| x + y").unwrap();
    match &p.defs[0].body.kind {
        ExprKind::Lam(_, b_x) => { let (_, b) = &**b_x; assert!(matches!(b.kind, ExprKind::Par(..)), "{:?}", b.kind) },
        k => panic!("{k:?}"),
    }
    let e = cotangent::syntax::parse_program("def main x = x ||| x ||| x").unwrap_err();
    assert!(e[0].message.contains("does not associate"), "{}", e[0].message);
    let text = "def main (x, y) = let (a, b) = (x ||| y) ||| (x || y) in a\n";
    let p = cotangent::syntax::parse_program(text).unwrap();
    let printed = print_program(&p, &PrintOptions::unicode());
    let again = print_program(&cotangent::syntax::parse_program(&printed).unwrap(), &PrintOptions::unicode());
    assert_eq!(printed, again);
    assert!(printed.contains("(x ||| y) ||| (x || y)"), "{printed}");
}

/// Measures the native speed-up of the parallel resolve on a wide fork-join program (a tree of
/// `|||` of depth 16), with 1 and 2 threads. Not a test of speed: run it with
/// `cargo test --release --test dualrev parallel_resolve_speedup -- --ignored --nocapture`.
#[test]
#[ignore]
fn parallel_resolve_speedup() {
    use cotangent::stages::dualrev::parallel::{LAST_RESOLVE_NANOS, THREADS};
    use std::sync::atomic::Ordering;
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/dualrev-parallel-tree.cot")).unwrap();
    let budget = Budget { steps: u64::MAX / 4, allocs: u64::MAX / 4, trace_steps: 0, ..Budget::default() };
    let opts = Options { stages: vec!["dualrev/parallel".into()], trace: false, params: vec![("n".into(), std::env::var("TREE_N").ok().and_then(|s| s.parse().ok()).unwrap_or(16))], budget, ..Options::default() };
    for threads in [1usize, 2, 1, 2] {
        THREADS.store(threads, Ordering::Relaxed);
        let a = cotangent::limits::run_with_stack({
            let (t, o) = (text.clone(), opts.clone());
            move || pipeline::analyse(&t, &o).map(|a| (a.stages[0].ok, a.stages[0].cost.counter("backprop_calls"))).unwrap()
        });
        let ns = LAST_RESOLVE_NANOS.load(Ordering::Relaxed);
        println!("threads {threads}: resolve {:.3} ms ({} backpropagator cells, ok {})", ns as f64 / 1e6, a.1, a.0);
    }
    THREADS.store(0, Ordering::Relaxed);
}

/// Times the phases of preparing a stage on a long straight-line program (to find superlinear ones).
#[test]
#[ignore]
fn prepare_phases_timing() {
    use std::time::Instant;
    for n in [1000usize, 2000] {
        let mut s = String::from("input (0.3, 0.7)\ndef main (x, y) =\n  let a0 = x in\n");
        for i in 1..=n {
            let p = i - 1;
            s.push_str(&match i % 4 {
                0 => format!("  let a{i} = a{p} * 0.999 + y in\n"),
                1 => format!("  let a{i} = sin a{p} + a{p} * 0.5 in\n"),
                2 => format!("  let a{i} = a{p} * y * 0.9 in\n"),
                _ => format!("  let a{i} = a{p} + x * 0.001 in\n"),
            });
        }
        s.push_str(&format!("  a{n}\n"));
        let s2 = s.clone();
        cotangent::limits::run_with_stack(move || {
            let (p, it, ot) = pipeline::front_end(&s2, &[]).unwrap();
            let b0 = Builtins::new();
            let src = Source { program: &p, input_type: &it, output_type: &ot, builtins: &b0 };
            let st = stages::find("dualrev/staged").unwrap();
            let t = Instant::now();
            let mut out = st.transform(&src).unwrap().program;
            let t_tr = t.elapsed();
            let t = Instant::now();
            let printed = cotangent::print::print_program(&out, &PrintOptions::unicode());
            let t_pr = t.elapsed();
            let mut b = Builtins::new();
            b.extend(st.builtins());
            let t = Instant::now();
            types::check_program(&mut out, &b).unwrap();
            let t_ty = t.elapsed();
            println!("n={n}: transform {t_tr:?} print {t_pr:?} ({} bytes) types {t_ty:?}", printed.len());
        });
    }
}

/// Top-level definitions that are not lambdas (a constant, a point-free function) are computations
/// in the monadic stages, run where they are used.
#[test]
fn globals_that_are_not_functions() {
    let text = "input 1.5\ndef k = 2.0 * 3.0\ndef twice f x = f (f x)\ndef sq x = x * x\ndef f = twice sq\ndef main x = f (k * x) + k\n";
    let a = analyse(text);
    for st in dualrev() {
        let r = ok(&a, st);
        assert_eq!(r.agrees, Some(true), "{st}");
        assert_eq!(r.gradient, vec![17496.0], "{st}");
        assert_eq!(r.primal.as_ref().unwrap().to_string(), "6567.0", "{st}");
    }
}

/// Steps of the primal program per unit of size, to compare with the stages' step counts.
#[test]
#[ignore]
fn primal_steps() {
    for n in [1000usize, 10000] {
        let mut d = String::from("input 1.0\ndef main x0 =\n");
        for i in 1..=n {
            d.push_str(&format!("  let x{i} = x{} + x{} in\n", i - 1, i - 1));
        }
        d.push_str(&format!("  x{n} + x{n}\n"));
        let mut s = String::from("input (0.3, 0.7)\ndef main (x, y) =\n  let a0 = x in\n");
        for i in 1..=n {
            let p = i - 1;
            s.push_str(&match i % 4 {
                0 => format!("  let a{i} = a{p} * 0.999 + y in\n"),
                1 => format!("  let a{i} = sin a{p} + a{p} * 0.5 in\n"),
                2 => format!("  let a{i} = a{p} * y * 0.9 in\n"),
                _ => format!("  let a{i} = a{p} + x * 0.001 in\n"),
            });
        }
        s.push_str(&format!("  a{n}\n"));
        for (name, text) in [("doubling", d), ("straight", s)] {
            let steps = cotangent::limits::run_with_stack(move || {
                let (p, _, _) = pipeline::front_end(&text, &[]).unwrap();
                let input = cotangent::syntax::value_of(p.input.as_ref().unwrap()).unwrap();
                let mut m = Machine::new(&p, &Builtins::new(), Budget::default()).unwrap();
                m.call("main", vec![input]).unwrap();
                m.cost().steps
            });
            println!("{name} n={n}: primal steps {steps} ({:.2} per unit)", steps as f64 / n as f64);
        }
    }
}

/// `dualrev/contrib` on a program whose Contribs are shared and repeat an argument (`x * x` has the
/// edge to x twice, `z + z` the edge to z twice): the resolve's order and cotangents, the counters,
/// the drawn graph (one edge per (from, to), the later write kept), and, when the step budget
/// stops the resolve inside a Contrib's edges, exactly the edges followed before the stop. Pins
/// what the flat Contrib store (issue 13, session 22) must keep from the `Rc` tree it replaced.
#[test]
fn contrib_shared_resolve_counters_and_graph() {
    const SHARED: &str = "input (3.0, 2.0)\ndef main (x, y) = let z = x * x in let w = z + z in w * y\n";
    let edges = |r: &StageResult| -> Vec<(u64, u64, String)> {
        r.graph.as_ref().expect("a graph").edges.iter().map(|e| (e.from, e.to, e.label.clone())).collect()
    };
    let e = |f: u64, t: u64, l: &str| (f, t, l.to_string());
    let a = analyse(SHARED);
    let r = ok(&a, "dualrev/contrib");
    assert_eq!(r.gradient, vec![24.0, 18.0]);
    // IDs: x 0, y 1, z 2, w 3, w * y 4; from the output down, each ID once
    assert_eq!(resolves(r), vec![(4, 1.0), (3, 2.0), (2, 4.0), (1, 18.0), (0, 24.0)]);
    assert_eq!((r.cost.counter("backprop_calls"), r.cost.counter("ids_allocated"), r.cost.real_ops), (5, 5, 9));
    // the wrapper's direct call (node 5), then key order; z's two edges to x are one edge
    assert_eq!(edges(r), vec![e(5, 4, "1.0"), e(2, 0, "3.0"), e(3, 2, "1.0"), e(4, 1, "18.0"), e(4, 3, "2.0")]);
    let g = r.graph.as_ref().unwrap();
    let values: Vec<Option<f64>> = g.nodes.iter().take(5).map(|n| n.value.as_ref().and_then(|v| v.num)).collect();
    assert_eq!(values, vec![Some(24.0), Some(18.0), Some(4.0), Some(2.0), Some(1.0)]);
    // a budget that stops the resolve at ID 4's second edge: its first edge is drawn, no resolve
    // step is traced, and ID 4, never resolved, is drawn as the output
    let stopped = |steps: u64| {
        let a = analyse_with(SHARED, &[], Budget { steps, ..Budget::default() });
        let r = stage(&a, "dualrev/contrib");
        assert!(!r.ok && r.error.as_ref().unwrap().contains("steps budget"), "{:?}", r.error);
        (edges(r), resolves(r).len())
    };
    let full = a.stages.iter().find(|r| r.id == "dualrev/contrib").unwrap().cost.steps;
    assert_eq!(stopped(full - 29), (vec![e(2, 4, "1.0"), e(4, 3, "2.0")], 0));
    assert_eq!(stopped(full - 28), (vec![e(2, 4, "1.0"), e(4, 1, "18.0"), e(4, 3, "2.0")], 1));
    assert_eq!(stopped(full - 26), (vec![e(5, 4, "1.0"), e(3, 2, "1.0"), e(4, 1, "18.0"), e(4, 3, "2.0")], 1));
}

/// `dualrev/parallel` counts one real operation per resolve entry, as `dualrev/tape` does (the same
/// real_ops), also past 2^20 entries: a count capped there undercounted longer resolves.
#[test]
fn parallel_counts_every_resolve_entry_as_a_real_op() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/peers/particle.cot")).expect("particle.cot");
    let opts = Options {
        stages: vec!["dualrev/tape".into(), "dualrev/parallel".into()],
        // 7 ops a step and ~1.4 edges an ID: 1.4 · 10^6 entries at n = 10^5, past 2^20
        params: vec![("n".to_string(), 100_000)],
        traced: Some(vec![]),
        ..Options::default()
    };
    let a = pipeline::analyse(&text, &opts).ok().expect("particle analyses");
    let (tape, par) = (ok(&a, "dualrev/tape"), ok(&a, "dualrev/parallel"));
    assert!(tape.cost.real_ops > 2_000_000, "{}", tape.cost.real_ops);
    assert_eq!(par.cost.real_ops, tape.cost.real_ops);
    let bits = |g: &[f64]| g.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&par.gradient), bits(&tape.gradient));
}

/// A stage run untraced (the page's stages not shown, `cotangent bench`) keeps its graph's shape —
/// the same nodes, edges and visits as a traced run — but not each ID's resolved cotangent and
/// span (issue 13's bytes per op: 16 of the tape's ~50 bytes an ID); the naive stage's display
/// graph, run untraced for its spans and visits, keeps them.
#[test]
fn an_untraced_run_keeps_the_graphs_shape_without_its_values() {
    let stages: Vec<String> = dualrev().iter().map(|s| s.to_string()).collect();
    let run = |traced: Option<Vec<String>>| {
        let opts = Options { stages: stages.clone(), traced, ..Options::default() };
        pipeline::analyse(RUNNING, &opts).ok().expect("the running example analyses")
    };
    let (full, lean) = (run(None), run(Some(vec![])));
    for id in ["dualrev/staged", "dualrev/contrib", "dualrev/tape"] {
        let (f, l) = (ok(&full, id).graph.as_ref().unwrap(), ok(&lean, id).graph.as_ref().unwrap());
        let shape = |g: &cotangent::interp::Graph| (g.nodes.iter().map(|n| (n.id, n.visits)).collect::<Vec<_>>(), g.edges.iter().map(|e| (e.from, e.to, e.label.clone())).collect::<Vec<_>>());
        assert_eq!(shape(f), shape(l), "{id}: the same graph");
        assert!(f.nodes.iter().any(|n| n.value.is_some()) && f.nodes.iter().any(|n| n.span.is_some()), "{id}: traced, with values and spans");
        assert!(l.nodes.iter().all(|n| n.value.is_none() && n.span.is_none()), "{id}: untraced, shape only");
    }
    // the naive stage's display graph runs dualrev/staged's program untraced, for its spans and visits
    let naive = |a: &Analysis| format!("{:?}", ok(a, "dualrev/naive").graph);
    assert_eq!(naive(&full), naive(&lean));
    assert!(ok(&full, "dualrev/naive").graph.as_ref().unwrap().nodes.iter().any(|n| n.span.is_some()));
}
