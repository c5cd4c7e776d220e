//! Part A of the array paper (Smeding et al. §2): the scalar evaluators on the Delta tree and the
//! sharing-aware reverse pass, checked against the notes' worked examples E1 (the sharing chain P1),
//! E2 (Fig. 4) and E3 (the wrapper's naming).

use cotangent::limits::run_with_stack;
use cotangent::interp::{Graph, Shown, TraceStep};
use cotangent::pipeline::{analyse, Options, StageResult};
use std::collections::BTreeMap;

const TREE: [&str; 4] = ["arrays/eval0", "arrays/eval1", "arrays/eval2", "arrays/eval3"];
const ALL: [&str; 5] = ["arrays/eval0", "arrays/eval1", "arrays/eval2", "arrays/eval3", "arrays/share"];

fn example(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../examples/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// What a test looks at of a trace step (a `TraceStep` may hold texts made when read, which stay on
/// the analysing thread).
#[derive(Clone, Debug)]
struct Step {
    kind: String,
    note: String,
    factor: Option<Shown>,
    state: Vec<(String, Shown)>,
}

impl Step {
    fn of(t: &TraceStep) -> Step {
        Step { kind: t.kind.clone(), note: t.note.clone(), factor: t.factor.clone(), state: t.state.clone() }
    }
}

/// What a test looks at of a stage's result (a `StageResult` holds values, which stay on the thread
/// that made them).
struct R {
    id: String,
    ok: bool,
    refused: bool,
    agrees: Option<bool>,
    error: Option<String>,
    located: bool,
    program: String,
    primal: Option<String>,
    gradient: Vec<f64>,
    counters: BTreeMap<String, u64>,
    trace: Vec<Step>,
    graph: Option<Graph>,
}

/// Runs the given stages on `src` (with `param` overrides, none so far) and returns their results by id.
fn run(src: &str, stages: &[&str], params: &[(&str, i64)]) -> BTreeMap<String, R> {
    let src = src.to_string();
    let stages: Vec<String> = stages.iter().map(|s| s.to_string()).collect();
    let params: Vec<(String, i64)> = params.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    run_with_stack(move || {
        let a = analyse(&src, &Options { stages: stages.clone(), params, ..Options::default() }).unwrap_or_else(|d| panic!("{d:?}"));
        let keep = |r: StageResult| {
            let r = R {
                id: r.id,
                ok: r.ok,
                refused: r.refused,
                agrees: r.agrees,
                error: r.error,
                located: r.error_span.is_some(),
                program: r.program,
                primal: r.primal.map(|v| v.to_string()),
                gradient: r.gradient,
                counters: r.cost.counters.into_iter().collect(),
                trace: r.trace.iter().map(Step::of).collect(),
                graph: r.graph,
            };
            (r.id.clone(), r)
        };
        a.stages.into_iter().filter(|r| stages.contains(&r.id)).map(keep).collect()
    })
}

/// P1 (note E1): `let x1 = x + x in … in xn` at x = 1.5.
fn p1(n: i64) -> String {
    let lets: String = (1..=n).map(|i| format!("  let x{i} = x{} + x{} in\n", i - 1, i - 1)).collect();
    format!("input 1.5\ndef main x0 =\n{lets}  x{n}\n")
}

fn counter(r: &R, name: &str) -> u64 {
    r.counters.get(name).copied().unwrap_or_else(|| panic!("{}: no counter {name}: {:?}", r.id, r.counters))
}

fn ok(r: &R) {
    assert!(r.ok && !r.refused, "{}: {:?}", r.id, r.error);
    assert_eq!(r.agrees, Some(true), "{} disagrees with forward: {:?}", r.id, r.gradient);
}

#[test]
fn e1_the_sharing_chain_is_exponential_on_eval3_and_linear_with_share() {
    for n in [1i64, 2, 3, 5, 10] {
        let rs = run(&p1(n), &ALL, &[]);
        for r in rs.values() {
            ok(r);
            assert_eq!(r.gradient, vec![(1u64 << n) as f64], "{} at n = {n}", r.id);
        }
        // the Delta is a chain of n Adds, each pointing twice at the one before: 2^(n+1) − 1 visits as a tree
        let tree = (1u64 << (n + 1)) - 1;
        let e3 = &rs["arrays/eval3"];
        assert_eq!((counter(e3, "eval_visits"), counter(e3, "op_visits")), (tree, tree), "eval3 at n = {n}");
        // eval0 walks the tree once per input (one here), eval1 and eval2 once
        for id in ["arrays/eval0", "arrays/eval1", "arrays/eval2"] {
            assert_eq!(counter(&rs[id], "eval_visits"), tree, "{id} at n = {n}");
        }
        // with Share: 3n + 1 eval calls (the root's Share, then per popped ID its Add and its two
        // children), n pops and the two visits of the input x (note E1's table)
        let sh = &rs["arrays/share"];
        let n = n as u64;
        assert_eq!((counter(sh, "eval_visits"), counter(sh, "op_visits"), counter(sh, "ids_generated")), (3 * n + 1, n + 2, n), "share at n = {n}");
    }
}

#[test]
fn e1_the_example_is_p1_at_n_3() {
    let rs = run(&example("arrays-p1-sharing-chain.cot"), &["arrays/eval3", "arrays/share"], &[]);
    assert_eq!((counter(&rs["arrays/eval3"], "eval_visits"), counter(&rs["arrays/share"], "eval_visits")), (15, 10));
}

#[test]
fn e2_fig_4_eval3_makes_12_visits_and_share_7_popping_6_to_1() {
    let src = example("arrays-fig4.cot");
    let rs = run(&src, &ALL, &[]);
    for r in rs.values() {
        ok(r);
    }
    let e3 = &rs["arrays/eval3"];
    assert_eq!(counter(e3, "op_visits"), 12, "Fig. 4(c)");
    // exp and x are visited three times each (Fig. 4(c)), log twice
    let g = e3.graph.as_ref().expect("eval3 draws its Delta");
    let visits = |label_start: &str| -> Vec<u64> {
        let mut v: Vec<u64> = g.nodes.iter().filter(|n| n.label.starts_with(label_start)).map(|n| n.visits.unwrap_or(0)).collect();
        v.sort();
        v
    };
    assert_eq!(visits("Input"), vec![3]);
    assert_eq!(visits(&format!("Scale {}", cotangent::value::show_real(0.5f64.exp()))), vec![3], "exp");
    assert_eq!(visits(&format!("Scale {}", cotangent::value::show_real(1.0 / 0.5f64.exp()))), vec![2], "log");

    let sh = &rs["arrays/share"];
    assert_eq!(counter(sh, "op_visits"), 7, "Fig. 4(d)");
    assert_eq!(counter(sh, "ids_generated"), 6);
    // backprop4 pops IDs 6, 5, 4, 3, 2, 1 with the cotangents the notes list
    let pops: Vec<(String, f64)> = sh.trace.iter().filter(|s| s.kind == "pop").map(|s| (s.note.clone(), s.factor.as_ref().unwrap().num.unwrap())).collect();
    let want = [(6, 1.0), (5, 1.0), (4, -0.6225083696592805), (3, 1.139493927324549), (2, 1.2984464104095248), (1, 1.7875475579071898)];
    assert_eq!(pops.len(), want.len(), "{pops:?}");
    for ((note, c), (id, wc)) in pops.iter().zip(want) {
        assert!(note.starts_with(&format!("pop ID {id} ")), "{note}");
        assert!((c - wc).abs() < 1e-12, "ID {id}: {c} vs {wc}");
    }
    // the maps after each step: Share 6 files its fragment first; at the end only grad is left
    let row = |s: &Step, k: &str| s.state.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let first = &sh.trace[0];
    assert_eq!(row(first, "accum 6").and_then(|v| v.num), Some(1.0));
    assert!(row(first, "dfrag 6").is_some_and(|v| v.text.starts_with("Add")), "{:?}", first.state);
    let last = sh.trace.last().unwrap();
    assert_eq!(last.state.len(), 1, "accum and dfrag are empty at the end: {:?}", last.state);
    assert!((row(last, "grad 0").and_then(|v| v.num).unwrap() - 2.947167681109653).abs() < 1e-12);
    // a step per eval call and per pop
    assert_eq!(sh.trace.len() as u64, counter(sh, "eval_visits") + 6);
}

#[test]
fn e3_the_wrapper_names_the_inputs_left_to_right_and_rebuilds_the_shape() {
    let src = "input ((7.0, 3.1), 8.0)\ndef main ((a, b), c) = a * b + c\n";
    let rs = run(src, &ALL, &[]);
    for r in rs.values() {
        ok(r);
        assert_eq!(r.primal.as_deref(), Some("29.7"), "{}", r.id);
        assert_eq!(r.gradient, vec![3.1, 7.0, 1.0], "{}", r.id);
        assert!(r.program.contains("def named_S ((x, x1), n)") || r.program.contains("named_S"), "{}", r.program);
        let g = r.graph.as_ref().unwrap();
        let mut inputs: Vec<&str> = g.nodes.iter().filter(|n| n.ctor == "Input").map(|n| n.label.as_str()).collect();
        inputs.sort();
        assert_eq!(inputs, vec!["Input 0", "Input 1", "Input 2"], "{}", r.id);
    }
    // eval0 walks the Delta once per input: 3 passes
    assert_eq!(counter(&rs["arrays/eval0"], "eval_visits"), 3 * counter(&rs["arrays/eval3"], "eval_visits"));
    // eval1 works on vectors of length 3 at every node
    assert!(counter(&rs["arrays/eval1"], "vector_elem_ops") >= 3 * counter(&rs["arrays/eval1"], "eval_visits"));
}

#[test]
fn an_integer_leaf_of_the_input_is_handed_back_and_gets_no_name() {
    let src = "input (2.0, (7, 3.0))\ndef main (x, (n, y)) = x * y + real n\n";
    for r in run(src, &ALL, &[]).values() {
        ok(r);
    }
}

#[test]
fn arrays_and_non_real_results_are_refused_with_located_messages() {
    let rs = run(&example("arrays-dot.cot"), &ALL, &[]);
    for id in ALL {
        let r = &rs[id];
        assert!(r.refused, "{id} should refuse arrays");
        let msg = r.error.as_deref().unwrap_or("");
        assert!(msg.contains("no arrays") && msg.contains("§2"), "{id}: {msg}");
        assert!(r.located, "{id}: the refusal is located");
    }
    // App. A needs at least one real in the output: an integer result is refused
    let rs = run("input (1.0, 3)\ndef main (x, n) = n\n", &ALL, &[]);
    for id in ALL {
        let r = &rs[id];
        assert!(r.refused && r.error.as_deref().unwrap_or("").contains("Appendix A"), "{id}: {:?}", r.error);
    }
}

/// Appendix A: an output other than one real runs the evaluator once per real of the output,
/// seeded with that real's cotangent, and sums the gradients; every evaluator agrees with forward
/// mode.
#[test]
fn tuple_outputs_run_one_evaluation_per_real_as_appendix_a() {
    let src = "input (0.5, 1.5)\ndef main (x, y) = ((x * y, sin x), floor y)\n";
    let rs = run(src, &ALL, &[]);
    for id in ALL {
        let r = &rs[id];
        ok(r);
        assert_eq!(r.primal.as_deref(), Some("((0.75, 0.479425538604203), 1.0)"), "{id}");
        // one pass per output real: three calls of the evaluator in the wrapper, summed by map2
        let calls = if id == "arrays/share" { "reversePass" } else { "eval" };
        assert_eq!(r.program.matches(&format!("{calls} dt")).count(), 3, "{id}:\n{}", r.program);
        assert!(r.program.contains("map2"), "{id}:\n{}", r.program);
    }
    // the sharing-aware pass visits the shared x once per output real
    let visits = counter(&rs["arrays/share"], "eval_visits");
    assert!(visits > 0);
}

#[test]
fn the_tree_stages_share_one_program_text() {
    let rs = run(&example("arrays-fig4.cot"), &TREE, &[]);
    let texts: Vec<&String> = rs.values().map(|r| &r.program).collect();
    assert!(texts.windows(2).all(|w| w[0] == w[1]), "eval0 … eval3 print the same program");
    assert!(texts[0].contains("eval dt d n"));
}

#[test]
fn eval3_on_a_long_chain_stops_at_the_budget_with_its_counts() {
    let rs = run(&p1(40), &["arrays/eval3", "arrays/share"], &[]);
    let e3 = &rs["arrays/eval3"];
    assert!(!e3.ok && !e3.refused, "2^41 visits cannot finish");
    ok(&rs["arrays/share"]);
    assert_eq!(counter(&rs["arrays/share"], "eval_visits"), 121);
}

#[test]
fn a_constants_zero_is_structural_in_the_forward_evaluators() {
    // d(1/x) = Add (Scale (1/x) Zero) (Scale (−1/x²) d): at x = 0 the Zero's Scale factor is ∞, and
    // eval0–eval2 must not turn it into ∞ · 0 = NaN (eval3 and share never multiply at a Zero)
    for r in run("input 0.0\ndef main x = 1.0 / x\n", &ALL, &[]).values() {
        ok(r);
        assert_eq!(r.gradient, vec![f64::NEG_INFINITY], "{}", r.id);
    }
}
