//! Part B of the array dual-numbers chain (Smeding et al. §4): arrays of dual numbers, dual arrays
//! with Build1, and the one-hot transpose of Index. E7 (the dot product) and the counts the paper and
//! the notes give: 5n+1 scalar Delta constructors (footnote 18), and the O(n²) one-hot work (§4.4).

use cotangent::limits::run_with_stack;
use cotangent::interp::{Graph, TraceStep};
use cotangent::pipeline::{analyse, Options};
use std::collections::BTreeMap;

/// What a test looks at of a trace step (a `TraceStep` may hold texts made when read, which stay on
/// the analysing thread).
#[derive(Clone, Debug)]
struct Step {
    kind: String,
    note: String,
}

impl Step {
    fn of(t: &TraceStep) -> Step {
        Step { kind: t.kind.clone(), note: t.note.clone() }
    }
}

/// What a test looks at of a stage's result (values stay on the analysing thread).
#[derive(Clone)]
struct StageResult {
    id: String,
    ok: bool,
    refused: bool,
    agrees: Option<bool>,
    error: Option<String>,
    has_span: bool,
    primal: Option<String>,
    gradient: Vec<f64>,
    counters: BTreeMap<String, u64>,
    graph: Option<Graph>,
    trace: Vec<Step>,
    program: String,
}

const STAGES: [&str; 3] = ["arrays/dual-numbers", "arrays/build1", "arrays/onehot"];

fn run(src: &str, stages: &[&str], trace: bool) -> Vec<StageResult> {
    let src = src.to_string();
    let stages: Vec<String> = stages.iter().map(|s| s.to_string()).collect();
    run_with_stack(move || {
        let a = analyse(&src, &Options { trace, stages: stages.clone(), ..Options::default() }).unwrap_or_else(|d| panic!("{d:?}\n{src}"));
        stages
            .iter()
            .map(|id| {
                let r = a.stages.iter().find(|r| &r.id == id).unwrap_or_else(|| panic!("{id} did not run"));
                StageResult {
                    id: r.id.clone(),
                    ok: r.ok,
                    refused: r.refused,
                    agrees: r.agrees,
                    error: r.error.clone(),
                    has_span: r.error_span.is_some(),
                    primal: r.primal.as_ref().map(|v| v.to_string()),
                    gradient: r.gradient.clone(),
                    counters: r.cost.counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                    graph: r.graph.clone(),
                    trace: r.trace.iter().map(Step::of).collect(),
                    program: r.program.clone(),
                }
            })
            .collect()
    })
}

/// t_dot (§4.1) at length n.
fn t_dot(n: usize) -> String {
    let a: Vec<String> = (0..n).map(|i| format!("{:?}", 1.0 + i as f64)).collect();
    let b: Vec<String> = (0..n).map(|i| format!("{:?}", 0.5 * i as f64 - 1.0)).collect();
    format!("input ([{}], [{}])\ndef main (a, b) = sum (build (length a) (\\i -> a ! i * b ! i))\n", a.join(", "), b.join(", "))
}

fn counter(r: &StageResult, name: &str) -> u64 {
    r.counters.get(name).copied().unwrap_or_else(|| panic!("{}: no counter {name}: {:?}", r.id, r.counters))
}

#[test]
fn e7_dot_product_value_and_gradient_on_every_part_b_stage() {
    let src = "input ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])\ndef main (a, b) = sum (build (length a) (\\i -> a ! i * b ! i))\n";
    for r in run(src, &STAGES, false) {
        assert!(r.ok && r.agrees == Some(true), "{}: {:?}", r.id, r.error);
        assert_eq!(r.primal.clone(), Some("32.0".into()), "{}", r.id);
        assert_eq!(r.gradient, vec![4.0, 5.0, 6.0, 1.0, 2.0, 3.0], "{}", r.id);
    }
}

#[test]
fn dual_numbers_builds_5n_plus_1_delta_constructors_on_t_dot() {
    for n in [1, 2, 3, 5, 10, 40] {
        let r = &run(&t_dot(n), &["arrays/dual-numbers"], false)[0];
        assert_eq!(r.agrees, Some(true), "{:?}", r.error);
        assert_eq!(counter(r, "inner_nodes"), 5 * n as u64 + 1, "n = {n}");
        // the reverse pass visits each node once: the output's Share, then DsumOuter's n Adds, its Zero and
        // the elements' n Shares, then per element Add, two Scales and two Inputs: 1 + (2n + 1) + 5n
        assert_eq!(counter(r, "eval_visits"), 7 * n as u64 + 2, "n = {n}");
    }
}

#[test]
fn build1_builds_as_many_delta_nodes_as_arrays_of_dual_numbers() {
    // 4n from the lambda as before, an Index per element read (2n, where arrays of dual numbers had the
    // elements' own Inputs), and Share (Build1 …), Share (SumOuter …): no gain (§4.3)
    for n in [1, 2, 3, 5, 10, 40] {
        let rs = run(&t_dot(n), &["arrays/dual-numbers", "arrays/build1"], false);
        assert_eq!(rs[1].agrees, Some(true), "{:?}", rs[1].error);
        let n = n as u64;
        assert_eq!(counter(&rs[1], "inner_nodes"), 6 * n + 4, "n = {n}");
        // the lambda's 4n are the same nodes in both
        assert_eq!(counter(&rs[1], "inner_nodes") - 2 * n - 4, counter(&rs[0], "inner_nodes") - n - 1, "n = {n}");
        // its reverse pass adds an Index's cotangent in place: linear cotangent work, 9n + 1 cells
        assert_eq!(counter(&rs[1], "ct_cells"), 9 * n + 1, "n = {n}");
    }
}

#[test]
fn onehot_cotangent_work_is_quadratic_on_t_dot() {
    // Backward on t_dot: the seed (1 cell), SumOuter's replicate (n) stored in the Build1's accumulator
    // (n), one cell per element's Share (n), and per element two Scales (1 each) whose Index makes a
    // one-hot of n cells added into grad a or grad b (n): 1 + 3n + n·(4n + 2) = 4n² + 5n + 1.
    let cells = |n: u64| 4 * n * n + 5 * n + 1;
    for n in [4usize, 8] {
        let r = &run(&t_dot(n), &["arrays/onehot"], false)[0];
        assert_eq!(r.agrees, Some(true), "{:?}", r.error);
        assert_eq!(counter(r, "ct_cells"), cells(n as u64), "n = {n}");
    }
    assert_eq!((cells(4), cells(8)), (85, 297));
    // sumOuter (build1 n (λi. index a [i])) of §4.4: n one-hots of n cells
    let src = "input [1.0, 2.0, 3.0, 4.0, 5.0]\ndef main a = sum (build (length a) (\\i -> a ! i))\n";
    let r = &run(src, &["arrays/onehot"], false)[0];
    assert_eq!(r.gradient, vec![1.0; 5]);
    // seed 1, replicate 5, store 5, then per element: a one-hot of 5 added into grad a (5 + 5): 11 + 50
    assert_eq!(counter(r, "ct_cells"), 61);
}

#[test]
fn the_graphs_show_the_scalar_dag_and_the_array_delta() {
    let rs = run(&t_dot(3), &STAGES, true);
    let g = rs[0].graph.as_ref().expect("a graph");
    // every constructor counted, plus the 2n Input leaves and DsumOuter's Zero
    assert_eq!(g.nodes.len(), 16 + 6 + 1);
    assert_eq!(g.nodes.iter().filter(|n| n.ctor == "Share").count(), 4);
    let g = rs[1].graph.as_ref().expect("a graph");
    assert_eq!(g.nodes.iter().filter(|n| n.ctor == "Build1").count(), 1);
    assert_eq!(g.nodes.iter().filter(|n| n.ctor == "Index").count(), 6);
    assert!(g.nodes.iter().any(|n| n.ctor == "Input" && n.shared), "the inputs are indexed at every element");
    // the backprop pops IDs largest first: SumOuter's Share, Build1's, then the elements'
    let pops: Vec<&str> = rs[2].trace.iter().filter(|s| s.kind == "backprop").map(|s| s.note.as_str()).collect();
    assert!(pops[0].starts_with("pop ID 5") && pops[1].starts_with("pop ID 4") && pops[4].starts_with("pop ID 1"), "{pops:?}");
}

#[test]
fn every_surface_array_operation_runs_on_the_naive_stages() {
    let srcs = [
        "input [1.0, -2.0, 3.0]\ndef main a = sum (map (\\x -> x * x) a)\n",
        "input ([1.0, 2.0], [3.0, 4.0])\ndef main (a, b) = sum (map2 (\\x y -> sin x * y) a b)\n",
        "input [2.0, -3.0, 0.5]\ndef main a = fold (\\acc x -> acc * x + 1.0) 0.5 a\n",
        "input [2.0, -3.0, 0.5]\ndef main a = reduce (\\x y -> x * y) 1.0 a\n",
        "input [1.0, 2.0, 3.0]\ndef main a = sum (scanl (\\p x -> p * x) 1.0 a) + sum (scanr (\\x p -> x + p * x) 0.5 a)\n",
        "input [1.0, 2.0, 3.0]\ndef main a = sum (map2 (\\l r -> l * r) (shift1L a) (shift1R a))\n",
        "input (1.5, 3)\ndef main (x, n) = sum (replicate n (x * x)) + sum [x, 2.0 * x]\n",
        "input [[1.0, 2.0], [3.0, 4.0]]\ndef main m = sum (map (\\r -> let s = sum r in s * s) m)\n",
        "input ([1.0, 2.0, 3.0], 1)\ndef main (a, k) = let b = map (\\x -> x * x) a in if length a > 2 then b ! k * a ! 0 else 0.0\n",
        "input 0.5\ndef main x = map (\\i -> real i * x) (build 3 (\\i -> i))\n",
    ];
    for src in srcs {
        for r in run(src, &STAGES, false) {
            assert!(r.ok, "{}: {:?}\n{src}", r.id, r.error);
            assert_eq!(r.agrees, Some(true), "{} disagrees\n{src}\n{}", r.id, r.program);
        }
    }
}

/// Issue 12, Part B: under arrays of dual numbers `replicate 0 x` of a dual number is an empty
/// array that keeps its element (value.rs `EmptyArray`); `DsumOuter` and the other stage builtins
/// read it through `elems()` as `[]` (it matched `Value::Array` alone: "DsumOuter expects an array").
#[test]
fn an_empty_array_of_dual_numbers_sums_to_zero_on_every_part_b_stage() {
    let srcs = [
        "input (1.5, -0.5)\ndef main (x0, h) = sum (map (\\x4 -> sum (replicate 0 x4) + sum (map (\\z -> z * h) (build 0 (\\i -> x4)))) [x0, h]) + h\n",
        "input (1.5, -0.5)\ndef main (x0, h) = sum (map (\\x4 -> (let p = build 0 (\\i -> x4) in sum (map (\\z -> let w = z * 2.0 in h) p))) [x0, h])\n",
    ];
    for (src, (primal, grad)) in srcs.iter().zip([("-0.5", [0.0, 1.0]), ("0.0", [0.0, 0.0])]) {
        for r in run(src, &STAGES, false) {
            assert!(r.ok, "{}: {:?}\n{src}", r.id, r.error);
            assert_eq!(r.agrees, Some(true), "{} disagrees\n{src}\n{}", r.id, r.program);
            assert_eq!(r.primal.as_deref(), Some(primal), "{}", r.id);
            assert_eq!(r.gradient, grad, "{}", r.id);
        }
    }
}

#[test]
fn dual_arrays_refuse_arrays_of_tuples_with_a_located_message() {
    let src = "input [(1.0, 2.0)]\ndef main a = fst (a ! 0) * snd (a ! 0)\n";
    let rs = run(src, &STAGES, false);
    assert_eq!(rs[0].agrees, Some(true), "arrays of dual numbers take any array: {:?}", rs[0].error);
    for r in &rs[1..] {
        assert!(r.refused, "{}", r.id);
        let e = r.error.as_deref().unwrap_or("");
        assert!(e.contains("dual arrays") && e.contains("(R, R)"), "{}: {e}", r.id);
        assert!(r.has_span, "{}: unlocated", r.id);
    }
}

#[test]
fn the_lowering_specialises_polymorphic_functions_and_keeps_main_s_fitted_type() {
    // a top-level function used at two types (Array R and Array Z) is copied per type for dual arrays
    let src = "input [1.0, 2.0]\n\
               def m f xs = map f xs\n\
               def main a = sum (m (\\x -> x * x) a) + real (length (m (\\i -> i + 1) (build 2 (\\i -> i))))\n";
    for r in run(src, &STAGES, false) {
        assert_eq!(r.agrees, Some(true), "{}: {:?}", r.id, r.error);
        assert_eq!(r.gradient, vec![2.0, 4.0], "{}", r.id);
    }
    // a local used at two types cannot be: dual arrays refuse it, located; arrays of dual numbers run it
    let src = "input [1.0, 2.0]\n\
               def main a = let m f xs = map f xs in sum (m (\\x -> x * x) a) + real (length (m (\\i -> i + 1) (build 2 (\\i -> i))))\n";
    let rs = run(src, &STAGES, false);
    assert_eq!(rs[0].agrees, Some(true), "{:?}", rs[0].error);
    for r in &rs[1..] {
        assert!(r.refused && r.has_span, "{}: {:?}", r.id, r.error);
    }
    let src = "input ([1.0, 2.0], [3.0])\ndef main (a, b) = 2.0 * a ! 0\n";
    for r in run(src, &STAGES, false) {
        assert_eq!(r.agrees, Some(true), "{}: {:?}", r.id, r.error);
    }
}
