//! The Krawiec et al. chain (issue 3): krawiec/dense, krawiec/delta, krawiec/monadic, krawiec/array
//! and krawiec/general agree with forward mode, eval2's exponential walk and eval's linear one are
//! counted exactly, budgets stop runs cleanly, and the printed programs are pinned by snapshots.

#[path = "../../tests/gen/mod.rs"]
#[allow(dead_code)]
mod gen;

use cotangent::build::*;
use cotangent::interp::{Budget, BudgetKind, Builtins, Machine, RunError};
use cotangent::ir::*;
use cotangent::pipeline::{self, analyse, check_expects, run_stage, Options, StageResult};
use cotangent::stage::{RunCtx, Source, Stage};
use cotangent::value::Value;
use cotangent::{limits, stages, types};

/// The chain's stages, from the registry.
fn krawiec() -> Vec<&'static str> {
    stages::krawiec::CHAIN.stages.iter().map(|s| s.info().id).collect()
}
/// The stages whose wrapper the paper gives for main : R^a → R only.
const RA_ONLY: [&str; 4] = ["krawiec/dense", "krawiec/delta", "krawiec/monadic", "krawiec/array"];

fn stage(id: &str) -> &'static dyn Stage {
    stages::find(id).unwrap_or_else(|| panic!("stage {id} is registered"))
}

// ----- programs built as IR (independent of the parser) -----

fn program(body: Expr, next_id: u32) -> Program {
    Program { params: vec![], input: None, seed: None, defs: vec![def("main", body)], expects: vec![], next_id }
}

/// `λx0. let x1 = x0 + x0 in ... in xn + xn` (note §4.3).
fn doubling_chain(n: u32) -> Program {
    let xs: Vec<Name> = (0..=n).map(|i| Name::new(&format!("x{i}"), i + 1)).collect();
    let mut body = add(var(&xs[n as usize]), var(&xs[n as usize]));
    for i in (1..=n as usize).rev() {
        body = let_(pvar(&xs[i]), add(var(&xs[i - 1]), var(&xs[i - 1])), body);
    }
    program(lam(pvar(&xs[0]), body), n + 2)
}

/// `λ(x, y). let x1 = x0 * y + x0 ... ` a long straight line: x_i = x_{i-1} * c + y with c = 0.5.
fn long_line(n: u32) -> Program {
    let (x0, y) = (Name::new("x", 1), Name::new("y", 2));
    let xs: Vec<Name> = std::iter::once(x0.clone()).chain((1..=n).map(|i| Name::new("x", i + 2))).collect();
    let mut body = var(&xs[n as usize]);
    for i in (1..=n as usize).rev() {
        body = let_(pvar(&xs[i]), add(mul(var(&xs[i - 1]), real(0.5)), var(&y)), body);
    }
    program(lam(ppair(pvar(&x0), pvar(&y)), body), n + 3)
}

struct Typed {
    p: Program,
    s: Type,
    t: Type,
}

fn typed(mut p: Program) -> Typed {
    types::check_program(&mut p, &Builtins::new()).expect("the test program type-checks");
    let Type::Fun(st) = p.def("main").unwrap().scheme.clone().unwrap().ty else { panic!("main is a function") };
    let (s, t) = st.as_ref().clone();
    Typed { p, s, t }
}

fn run_one(tp: &Typed, id: &str, input: &Value, opts: &Options) -> StageResult {
    let b = Builtins::new();
    let src = Source { program: &tp.p, input_type: &tp.s, output_type: &tp.t, builtins: &b };
    let seed = Value::Real(1.0);
    let outputs = pipeline::Outputs::new(&src, opts);
    run_stage(stage(id), &outputs, input, &seed, opts)
}

fn quiet() -> Options {
    Options { trace: false, ..Options::default() }
}

#[test]
fn eval2_visits_on_the_doubling_chain_are_exactly_2_to_the_n_plus_2_minus_1() {
    limits::run_with_stack(|| {
        for n in [0u32, 1, 2, 3, 5, 10, 15] {
            let tp = typed(doubling_chain(n));
            let r = run_one(&tp, "krawiec/delta", &Value::Real(3.0), &quiet());
            assert!(r.ok, "n = {n}: {:?}", r.error);
            assert_eq!(r.cost.counter("eval_visits"), (1u64 << (n + 2)) - 1, "n = {n}");
            assert_eq!(r.gradient, vec![(1u64 << (n + 1)) as f64], "n = {n}");
            // The DAG has n + 2 physical nodes (OneHot 1 and n + 1 Adds); eval2 visits the OneHot 2^(n+1) times.
            let g = r.graph.expect("a graph");
            assert_eq!(g.nodes.len() as u32, n + 2, "n = {n}");
            let onehot = g.nodes.iter().find(|v| v.ctor == "OneHot").unwrap();
            assert_eq!(onehot.visits, Some(1u64 << (n + 1)));
            assert_eq!(onehot.delta_id, Some(1));
            assert_eq!(g.nodes.iter().filter(|v| v.shared).count() as u32, n + 1, "every node but the root is shared");
        }
    });
}

#[test]
fn monadic_and_array_eval_visits_are_linear_on_the_doubling_chain() {
    limits::run_with_stack(|| {
        for n in [5u32, 10, 15, 100, 1000] {
            let tp = typed(doubling_chain(n));
            for id in ["krawiec/monadic", "krawiec/array", "krawiec/general"] {
                let r = run_one(&tp, id, &Value::Real(3.0), &quiet());
                assert!(r.ok, "{id} n = {n}: {:?}", r.error);
                assert_eq!(r.gradient, vec![2f64.powi(n as i32 + 1)], "{id} n = {n}");
                // n + 1 bindings: per binding its Let, its Add and two Vars; plus the result's Var.
                // krawiec/general's dot product with dt adds one binding (Let, Add, two Scales, Var, Zero).
                let extra = if id == "krawiec/general" { 6 } else { 0 };
                assert_eq!(r.cost.counter("eval_visits"), 4 * (n as u64 + 1) + 1 + extra, "{id} n = {n}");
                assert_eq!(r.cost.counter("ids_allocated"), n as u64 + 1 + if extra > 0 { 1 } else { 0 }, "{id} n = {n}");
            }
        }
    });
}

#[test]
fn eval2_is_stopped_by_the_steps_budget_with_the_counts_reached() {
    limits::run_with_stack(|| {
        let tp = typed(doubling_chain(40));
        let st = stage("krawiec/delta");
        let b0 = Builtins::new();
        let src = Source { program: &tp.p, input_type: &tp.s, output_type: &tp.t, builtins: &b0 };
        let mut out = st.transform(&src).unwrap().program;
        let mut bs = Builtins::new();
        bs.extend(st.builtins());
        types::check_program(&mut out, &bs).unwrap();
        let budget = Budget { steps: 100_000, ..Budget::default() };
        let mut m = Machine::new(&out, &bs, budget).unwrap();
        m.set_tracing(false);
        let none = |_: &str| None;
        let cx = RunCtx { src: &src, origin: &src, input: &Value::Real(1.0), seed: &Value::Real(1.0), outputs: &none };
        match st.run(&mut m, &cx) {
            Err(RunError::Budget { budget: BudgetKind::Steps, limit, cost, .. }) => {
                assert_eq!(limit, 100_000);
                let visits = cost.counter("eval_visits");
                assert!(visits > 50_000 && visits <= 100_000, "eval_visits reached: {visits}");
                assert_eq!(cost.counter("delta_nodes"), 42);
            }
            other => panic!("expected the steps budget to stop eval2, got {:?}", other.map(|(p, g)| (p.to_string(), g.to_string()))),
        }
        // Through the pipeline: a located, readable failure with the counts, and the graph still there.
        let opts = Options { budget: Budget { steps: 100_000, ..Budget::default() }, ..quiet() };
        let r = run_one(&tp, "krawiec/delta", &Value::Real(1.0), &opts);
        assert!(!r.ok);
        let msg = r.error.unwrap();
        assert!(msg.contains("steps budget") && msg.contains("eval_visits"), "{msg}");
        assert!(r.cost.counter("eval_visits") > 0);
        assert_eq!(r.graph.unwrap().nodes.len(), 42);
    });
}

#[test]
fn the_dense_vectors_are_stopped_by_the_steps_budget() {
    limits::run_with_stack(|| {
        // main : R^200 → R summing its inputs: each ⊕S costs 200 element operations.
        let n = 200u32;
        let xs: Vec<Name> = (0..n).map(|i| Name::new("x", i + 1)).collect();
        let body = xs.iter().skip(1).fold(var(&xs[0]), |acc, x| add(acc, var(x)));
        let tp = typed(program(lam(ptuple(xs.iter().map(pvar).collect()), body), n + 1));
        let input = Value::tuple((0..n).map(|i| Value::Real(i as f64)).collect());
        let ok = run_one(&tp, "krawiec/dense", &input, &quiet());
        assert!(ok.ok, "{:?}", ok.error);
        assert_eq!(ok.gradient, vec![1.0; n as usize]);
        // zero_S is never needed here; the seeds cost n·n (onehot and scaleS), the n − 1 additions n each
        assert_eq!(ok.cost.counter("vector_elem_ops"), (2 * n * n + (n - 1) * n) as u64);
        let opts = Options { budget: Budget { steps: 20_000, ..Budget::default() }, ..quiet() };
        let r = run_one(&tp, "krawiec/dense", &input, &opts);
        assert!(!r.ok);
        assert!(r.error.unwrap().contains("vector_elem_ops"));
    });
}

#[test]
fn a_long_straight_line_runs_in_every_stage_without_overflowing() {
    limits::run_with_stack(|| {
        let n = 5_000;
        let tp = typed(long_line(n));
        let input = Value::pair(Value::Real(1.0), Value::Real(2.0));
        // x_n = x 0.5^n + y (2 − 0.5^(n−1)): gradient (0.5^n, 2 − 2·0.5^n) ≈ (0, 2)
        let want_y = (0..n).fold(0.0, |acc, _| acc * 0.5 + 1.0);
        for id in krawiec() {
            let r = run_one(&tp, id, &input, &quiet());
            assert!(r.ok, "{id}: {:?}", r.error);
            assert!((r.gradient[1] - want_y).abs() < 1e-12, "{id}: {:?}", r.gradient);
            if id != "krawiec/dense" {
                let v = r.cost.counter("eval_visits");
                assert!(v < 20 * n as u64, "{id}: eval_visits {v} should be linear in {n}");
            }
        }
    });
}

// ----- programs in the Cotangent language (examples/) -----

fn examples() -> Vec<(String, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir)
        .expect("examples/")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("krawiec-") && p.extension().is_some_and(|x| x == "cot"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    out.sort();
    assert!(out.len() >= 10, "the krawiec examples are there");
    out
}

fn analyse_ok(name: &str, text: &str, opts: &Options) -> cotangent::pipeline::Analysis {
    analyse(text, opts).unwrap_or_else(|ds| panic!("{name}: {:?}", ds.iter().map(|d| &d.message).collect::<Vec<_>>()))
}

#[test]
fn every_stage_agrees_with_forward_on_the_examples() {
    limits::run_with_stack(|| {
        for (name, text) in examples() {
            let a = analyse_ok(&name, &text, &Options::default());
            let rf = a.reference.as_ref().unwrap_or_else(|| panic!("{name}: forward ran"));
            assert!(rf.fd_agrees, "{name}: forward {:?} vs finite differences {:?}", rf.gradient, rf.fd);
            let ra = matches!(&a.input_type, t if is_ra(t)) && a.output_type == Type::Real;
            for id in krawiec() {
                let r = a.stages.iter().find(|r| r.id == id).unwrap_or_else(|| panic!("{name}: {id} ran"));
                if !ra && RA_ONLY.contains(&id) {
                    assert!(!r.ok, "{name}: {id} should refuse a main that is not R^a → R");
                    let msg = r.error.as_deref().unwrap();
                    assert!(msg.contains("krawiec/general"), "{name}: {id}: {msg}");
                    assert!(r.error_span.is_some(), "{name}: {id}: the refusal is located");
                    continue;
                }
                assert!(r.ok, "{name}: {id}: {:?}", r.error);
                assert_eq!(r.agrees, Some(true), "{name}: {id}: {:?} vs forward {:?}", r.gradient, rf.gradient);
            }
            let fails = check_expects(&a);
            assert!(fails.is_empty(), "{name}: {fails:?}");
        }
    });
}

fn is_ra(t: &Type) -> bool {
    match t {
        Type::Real => true,
        Type::Tuple(ts) => ts.iter().all(is_ra),
        _ => false,
    }
}

fn example(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../examples/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn figure_12_quaternion_rotation() {
    limits::run_with_stack(|| {
        let a = analyse_ok("fig12", &example("krawiec-fig12-quaternion.cot"), &Options::default());
        let want = [91.96, 58.08, -77.44, 38.72, 4.84, -24.2, 26.62];
        for id in krawiec() {
            let r = a.stages.iter().find(|r| r.id == id).unwrap();
            assert!(r.ok, "{id}: {:?}", r.error);
            let p = r.primal.as_ref().unwrap().as_real().unwrap();
            assert!((p - 71.874).abs() < 1e-9, "{id}: primal {p}");
            assert_eq!(r.gradient.len(), 7);
            for (g, w) in r.gradient.iter().zip(want) {
                assert!((g - w).abs() < 1e-9, "{id}: gradient {:?}", r.gradient);
            }
        }
        // Fig. 9 semantics (left to right, literals make no binding): 38 bindings (the paper's OCaml run
        // shows 40, two of them `Zero` for from_float), of which eval skips the 16 dead for the x component.
        let m = a.stages.iter().find(|r| r.id == "krawiec/monadic").unwrap();
        assert_eq!(m.cost.counter("ids_allocated"), 38);
        let skips = m.trace.iter().filter(|s| s.kind == "skip").count();
        assert_eq!(skips, 16);
    });
}

#[test]
fn running_example_traces_and_graphs() {
    limits::run_with_stack(|| {
        let a = analyse_ok("running", &example("krawiec-running.cot"), &Options::default());
        let m = a.stages.iter().find(|r| r.id == "krawiec/monadic").unwrap();
        // eval's steps: every node once, Lets looked up; the map after the last step holds the gradient.
        let last = m.trace.last().unwrap();
        assert_eq!(last.state, vec![("1".to_string(), 37.0.into()), ("2".to_string(), 12.0.into())]);
        let lets: Vec<f64> = m.trace.iter().filter(|s| s.kind == "let").map(|s| s.factor.as_ref().and_then(|f| f.num).unwrap()).collect();
        assert_eq!(lets, vec![1.0, 12.0], "Let 4 is found with cotangent 1, Let 3 (z) with 12");
        let g = m.graph.as_ref().unwrap();
        let ids: Vec<Option<i64>> = g.nodes.iter().filter(|n| n.ctor == "Let").map(|n| n.delta_id).collect();
        assert_eq!(ids, vec![Some(3), Some(4)]);
        assert!(g.nodes.iter().any(|n| n.ctor == "input" && n.delta_id == Some(1) && n.shared), "x is used twice");
        for s in &m.trace {
            let node = s.node.unwrap();
            assert!(g.nodes.iter().any(|n| n.id == node), "trace node {node} is in the graph");
        }
        let d = a.stages.iter().find(|r| r.id == "krawiec/delta").unwrap();
        assert_eq!(d.cost.counter("eval_visits"), 7);
    });
}

#[test]
fn dead_bindings_are_skipped() {
    limits::run_with_stack(|| {
        let a = analyse_ok("dead", &example("krawiec-dead-code.cot"), &Options::default());
        for id in ["krawiec/monadic", "krawiec/array", "krawiec/general"] {
            let r = a.stages.iter().find(|r| r.id == id).unwrap();
            assert!(r.trace.iter().any(|s| s.kind == "skip"), "{id}: z's Let is skipped");
            assert!(r.graph.as_ref().unwrap().nodes.iter().any(|n| n.label.contains("skipped")));
        }
    });
}

#[test]
fn r_a_stages_refuse_other_types_with_a_located_message() {
    limits::run_with_stack(|| {
        let text = example("krawiec-int-input.cot");
        let a = analyse_ok("int-input", &text, &Options::default());
        let main_at = text.find("def main").unwrap() as u32;
        for id in RA_ONLY {
            let r = a.stages.iter().find(|r| r.id == id).unwrap();
            assert!(!r.ok);
            let span = r.error_span.unwrap();
            assert!(span.start >= main_at, "{id}: the message points at main");
            assert!(r.error.as_deref().unwrap().contains("R^a → R"));
        }
        let g = a.stages.iter().find(|r| r.id == "krawiec/general").unwrap();
        assert_eq!(g.gradient_value.as_ref().unwrap().to_string(), "(4.0, (7, 3.0))");
    });
}

/// Random bodies (tests/gen) inside a main with an integer leaf and a sum in its input and its
/// output, S = R × (Z × (R + R)) and T = R × (R + Z): krawiec/general agrees with forward, keeps
/// the input's tag and integer in the gradient, and the R^a → R stages refuse.
#[test]
fn general_agrees_with_forward_on_random_programs_with_sums_and_integers() {
    limits::run_with_stack(|| {
        for seed in 0..40u64 {
            let mut g = gen::Gen::new(seed);
            let (env, ienv) = (vec!["x0".to_string(), "x1".to_string()], vec!["k".to_string()]);
            let (e1, e2, e3) = (g.real(&env, &ienv, 3), g.real(&env, &ienv, 3), g.real(&env, &ienv, 3));
            let tag = if seed % 2 == 0 { "inl" } else { "inr" };
            let x0 = 0.3 + seed as f64 * 0.07;
            let src = format!(
                "input ({x0:?}, (3, {tag} 0.45))\n\
                 def main (x0, (k, s)) =\n  case s of\n    inl x1 -> ({e1}, inl {e2})\n    | inr x1 -> ({e3}, inr (k + 1))\n"
            );
            let a = analyse(&src, &quiet()).unwrap_or_else(|d| panic!("{d:?}\n{src}"));
            for r in &a.stages {
                let handles_sums = cotangent::stages::find(&r.id).is_some_and(|s| s.supports().has(cotangent::features::Feature::Sums));
                if RA_ONLY.contains(&r.id.as_str()) || !handles_sums {
                    assert!(r.refused, "{}: should refuse\n{src}", r.id);
                } else if r.refused && !r.id.starts_with("krawiec/") {
                    // another chain's stage may refuse another construct of the random body (the
                    // chad stages: local recursion, outside Efficient CHAD's language, §2)
                    continue;
                } else {
                    assert!(r.ok, "{}: {:?}\n{src}", r.id, r.error);
                    assert_eq!(r.agrees, Some(true), "{}: {:?} vs {:?}\n{src}", r.id, r.gradient, a.reference.as_ref().map(|f| &f.gradient));
                }
            }
            let g = a.stages.iter().find(|r| r.id == "krawiec/general").unwrap();
            let shown = g.gradient_value.as_ref().unwrap().to_string();
            assert!(shown.contains(&format!("(3, {tag} ")), "{shown}");
        }
    });
}

/// A source definition named like one the stage generates (`grad`, `dot_T`, `zero_S`, ...) is
/// renamed in the output (`grad_1`), with its uses, rather than clashing.
#[test]
fn source_definitions_named_like_generated_ones_are_renamed() {
    limits::run_with_stack(|| {
        let src = "input 2.0\ndef grad x = x * x\ndef dot_T x = x\ndef zero_S x = x\ndef main x = grad x + dot_T x + zero_S 1.0\n";
        let a = analyse(src, &quiet()).unwrap();
        for id in krawiec() {
            let r = a.stages.iter().find(|r| r.id == id).unwrap();
            assert!(r.ok, "{id}: {:?}", r.error);
            assert_eq!(r.gradient, vec![5.0], "{id}");
            assert!(r.program.contains("def grad_1 x"), "{id}:\n{}", r.program);
        }
    });
}

/// A `main` that is not a λ (Drev{main} : M (Drev{S} → M Drev{T})): the wrappers run the outer
/// monad first (note §8.2), and the homomorphic stages need nothing special.
#[test]
fn a_main_that_is_not_a_lambda() {
    limits::run_with_stack(|| {
        let src = "input 1.5\ndef sq x = x * x\ndef compose f g x = f (g x)\ndef main = compose sq sq\n";
        let a = analyse(src, &quiet()).unwrap();
        for id in krawiec() {
            let r = a.stages.iter().find(|r| r.id == id).unwrap();
            assert!(r.ok, "{id}: {:?}", r.error);
            assert_eq!(r.agrees, Some(true), "{id}");
            assert!((r.gradient[0] - 13.5).abs() < 1e-12, "{id}: {:?}", r.gradient);
        }
    });
}

/// The Delta DAG of a program with shared nodes (`x * x` scales x's Var twice, `z + z` adds z's Var
/// to itself), as `krawiec/monadic` and `krawiec/array` draw it: every node (serial, label, shared,
/// visits) and edge. Pins what the kit's Delta must keep when its representation changes (issue 13,
/// session 22: a node is its own interpreter value).
#[test]
fn shared_delta_graph_is_drawn_exactly() {
    let text = "input (3.0, 2.0)\ndef main (x, y) = let z = x * x in let w = z + z in w * y\n";
    let opts = Options { stages: vec!["krawiec/monadic".into(), "krawiec/array".into()], ..Options::default() };
    let a = analyse(text, &opts).unwrap_or_else(|e| panic!("{e:?}"));
    for r in &a.stages {
        assert!(r.ok, "{}: {:?}", r.id, r.error);
        assert_eq!(r.gradient, vec![24.0, 18.0], "{}", r.id);
        assert_eq!((r.cost.counter("delta_nodes"), r.cost.counter("eval_visits")), (15, 17), "{}", r.id);
        let g = r.graph.as_ref().expect("a graph");
        let nodes: Vec<(u64, &str, bool, Option<u64>)> = g.nodes.iter().map(|n| (n.id, n.label.as_str(), n.shared, n.visits)).collect();
        assert_eq!(
            nodes,
            vec![
                (15, "Let 3", true, Some(1)),
                (5, "Add", false, Some(1)),
                (3, "Scale 3.0", false, Some(1)),
                (1, "Var 1", true, Some(2)),
                (4, "Scale 3.0", false, Some(1)),
                (14, "Let 4", false, Some(1)),
                (7, "Add", false, Some(1)),
                (6, "Var 3", true, Some(2)),
                (13, "Let 5", false, Some(1)),
                (11, "Add", false, Some(1)),
                (9, "Scale 2.0", false, Some(1)),
                (8, "Var 4", false, Some(1)),
                (10, "Scale 18.0", false, Some(1)),
                (2, "Var 2", false, Some(1)),
                (12, "Var 5", false, Some(1)),
                (17, "input 1", true, None),
                (18, "input 2", false, None),
            ],
            "{}",
            r.id
        );
        let edges: Vec<(u64, u64, &str)> = g.edges.iter().map(|e| (e.from, e.to, e.label.as_str())).collect();
        assert_eq!(
            edges,
            vec![
                (15, 5, "rhs"),
                (5, 3, "u1"),
                (5, 4, "u2"),
                (3, 1, "u"),
                (1, 17, "refers to"),
                (4, 1, "u"),
                (14, 7, "rhs"),
                (7, 6, "u1"),
                (7, 6, "u2"),
                (6, 15, "refers to"),
                (13, 11, "rhs"),
                (11, 9, "u1"),
                (11, 10, "u2"),
                (9, 8, "u"),
                (8, 14, "refers to"),
                (10, 2, "u"),
                (2, 18, "refers to"),
                (12, 13, "refers to"),
            ],
            "{}",
            r.id
        );
    }
}
