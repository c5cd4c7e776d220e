//! `dualrev/naive`: naive dual-numbers reverse AD, Smeding & Vákár §5, Figs. 5–7.
//! Every real is paired with a backpropagator `dR ⊸ c` into the cotangent of the whole input; the
//! translation D¹_c is homomorphic except on constants and primitive operations (Fig. 6, rebuilt
//! from the §5.2 prose since the extracted figure is garbled — see the note §3 Stage 1).

use super::common::*;
use crate::build::*;
use crate::deriv::Partial;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Budget, Builtin, Graph, Machine, RunError};
use crate::ir::*;
use crate::kit::translate::{dual, DualRule};
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};
use crate::value::Value;

pub struct Naive;

static INFO: StageInfo = StageInfo {
    id: "dualrev/naive",
    paper: PAPER,
    section: "§5, Figs. 5–7",
    title: "Naive dual-numbers reverse AD: reals paired with backpropagators",
    explanation: "Where forward mode pairs each real with a tangent, reverse mode pairs it with a backpropagator: a \
linear function dR ⊸ c that takes a cotangent for this real and returns its contribution to the cotangent c of the \
whole input. Constants get the zero backpropagator; an operation's backpropagator calls each argument's \
backpropagator with the cotangent scaled by the partial derivative, and adds the results in c. Everything else is \
translated homomorphically, so closures, recursion and sums need no work. The wrapper Interleave hands each input \
real a one-hot backpropagator, and Deinterleave sums the output's. Correct, but calling the output's backpropagator \
walks the DAG of backpropagators as a tree: a backpropagator shared by k paths runs k times (exponential on \
sharing, Fig. 2), and every call builds and adds dense values of c.",
    complexity: "forward O(T); reverse up to exponential in T (once per path through the sharing DAG), times O(I) per + and 0 on c.",
    accepts: ACCEPTS,
};

/// D¹_c[R] = (R, dR ⊸ c)  (Fig. 6)
pub fn real_ty(c: &Type) -> Type {
    Type::tup(vec![Type::Real, Type::lin(Type::Real, c.clone())])
}

/// The zero backpropagator `linλz. 0`.
fn zero_bp(fr: &mut Fresh) -> Expr {
    let z = fr.name("z");
    linlam(pvar(&z), app(builtin("counted"), builtin("zeroC")))
}

/// D¹_c[t] (Fig. 6; Sec. 11 for sums, letrec, conditionals): the kit's homomorphic translation
/// with Fig. 6's rules for constants and primitive operations.
struct D1;

impl DualRule for D1 {
    fn ty(&self, t: &Type) -> Type {
        dtype(t, &real_ty(&Type::Var(0)), false)
    }
    /// D¹[r] = (r, linλz. 0), and likewise for real k
    fn constant(&self, fr: &mut Fresh, c: Expr) -> Expr {
        pair(c, zero_bp(fr))
    }
    fn names(&self, arity: usize) -> (&'static [(&'static str, &'static str)], &'static str) {
        if arity == 1 {
            (&[("x", "d")], "y")
        } else {
            (&[("x1", "d1"), ("x2", "d2")], "y")
        }
    }
    /// D¹[op(t1, …, tn)] = let (x1, d1) = D¹[t1] in … let (xn, dn) = D¹[tn]
    ///                     in (op(x1, …, xn), linλz. d1 (∂1 op(x…)(z)) + … + dn (∂n op(x…)(z)))   (Fig. 6)
    fn companion(&self, fr: &mut Fresh, partials: &[Partial], ds: &[Expr], _: Span) -> Expr {
        let z = fr.name("z");
        let parts: Vec<Expr> = partials.iter().zip(ds).map(|(p, d)| app(d.clone(), scale(p, var(&z)))).collect();
        let sum = parts.into_iter().reduce(|a, b| apps(builtin("plusC"), [a, b])).unwrap_or_else(|| builtin("zeroC"));
        linlam(pvar(&z), app(builtin("counted"), sum))
    }
}

/// `+` on c for Deinterleave (Fig. 7), and its zero.
fn combine(parts: Vec<Expr>, _: &mut Fresh) -> Expr {
    parts.into_iter().reduce(|a, b| apps(builtin("plusC"), [a, b])).unwrap_or_else(|| builtin("zeroC"))
}

impl Stage for Naive {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        vec![
            counted_builtin(),
            zero_of_builtin(),
            // 0 : c (the input's shape, reals zeroed) and + : c → c → c, both O(size of the input)
            Builtin { name: "zeroC", scheme: scheme(&[1], tv(1)), arity: 0, lazy_last: false, run: b_zero_c },
            Builtin { name: "plusC", scheme: scheme(&[1], Type::fun(tv(1), Type::fun(tv(1), tv(1)))), arity: 2, lazy_last: false, run: b_plus_c },
        ]
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut fr = Fresh::new(src.program);
        let mut out = src.program.clone();
        for d in &mut out.defs {
            d.body = dual(&d.body, &mut fr, &D1);
            d.scheme = None;
        }
        out.expects.clear();
        out.input = None;
        out.seed = None;
        let (s, t) = (src.input_type, src.output_type);
        // Interleave¹_σ : (σ, dσ ⊸ c) → D¹_c[σ]
        let (x, d) = (fr.name("x"), fr.name("d"));
        let il = interleave_down(s, var(&x), var(&d), &mut fr, Down::Naive);
        out.defs.push(def("interleave", lam(ppair(pvar(&x), pvar(&d)), il)));
        // Deinterleave¹_τ : D¹_c[τ] → (τ, dτ ⊸ c)
        let y = fr.name("y");
        let dl = deinterleave(t, var(&y), &mut fr, &|e, _| e, &combine);
        out.defs.push(def("deinterleave", lam(pvar(&y), dl)));
        // Wrap¹[λx. t] = λx. let x = Interleave¹_σ (x, linλz. z) in Deinterleave¹_τ (D¹_σ[t])
        // (ours takes the output cotangent too and calls the backpropagator with it)
        let (x, dy, yv, dv, z) = (fr.name("x"), fr.name("dy"), fr.name("y"), fr.name("d"), fr.name("z"));
        let id = linlam(pvar(&z), if *s == Type::Real { app(builtin("counted"), var(&z)) } else { var(&z) });
        let run = app(global("deinterleave"), app(global("main"), app(global("interleave"), pair(var(&x), id))));
        let body = let_(ppair(pvar(&yv), pvar(&dv)), run, pair(var(&yv), app(var(&dv), var(&dy))));
        out.defs.push(def(WRAPPER, lam(ppair(pvar(&x), pvar(&dy)), body)));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        let c = cvar();
        let (s, t) = (src.input_type, src.output_type);
        vec![
            main_type(src, &real_ty(&c), false),
            ("interleave".into(), Type::fun(Type::tup(vec![s.clone(), Type::lin(s.clone(), c.clone())]), dtype(s, &real_ty(&c), false))),
            ("deinterleave".into(), Type::fun(dtype(t, &real_ty(&c), false), Type::tup(vec![t.clone(), Type::lin(t.clone(), c.clone())]))),
            grad_type(src),
        ]
    }

    fn graph(&self, _m: &mut Machine, cx: &RunCtx) -> Option<Graph> {
        display_graph(cx)
    }
}

/// The backpropagator DAG for display. Naive backpropagators have no IDs, and closures cannot be
/// inspected, so the DAG is the one `dualrev/staged` builds on the same program and input (its IDs
/// are the creation order of the backpropagators, the same closures the naive program creates), run
/// separately so that it counts nothing here. Each node's `visits` is the number of times the naive
/// program calls that backpropagator: the number of call paths from the output to it, counting an
/// argument used twice (`x + x`) as two calls.
fn display_graph(cx: &RunCtx) -> Option<Graph> {
    // The pipeline's prepared output of dualrev/staged on the same source (never re-derived here).
    let staged = cx.output_of("dualrev/staged")?;
    let mut m2 = Machine::new(&staged.program, &staged.builtins, Budget { trace_steps: 0, ..Budget::default() }).ok()?;
    m2.set_tracing(false);
    run_wrapper(&mut m2, cx.input, cx.seed).ok()?;
    let mut g = graph(&mut m2, "backprop")?;
    let r = rt(&mut m2);
    // calls along paths, in descending ID order (a reverse topological order)
    let mut calls: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
    let outputs: Vec<i64> = g.nodes.iter().filter(|n| n.label.contains("output")).filter_map(|n| n.delta_id).collect();
    for o in &outputs {
        calls.insert(*o, 1);
    }
    for (&(f, t), &c) in r.edge_calls.iter().filter(|((f, _), _)| *f < 0) {
        let _ = f;
        let e = calls.entry(t).or_insert(0);
        *e = e.saturating_add(c);
    }
    let mut by_from: std::collections::BTreeMap<i64, Vec<(i64, u64)>> = std::collections::BTreeMap::new();
    for (&(f, t), &c) in r.edge_calls.iter().filter(|((f, _), _)| *f >= 0) {
        by_from.entry(f).or_default().push((t, c));
    }
    for (f, ts) in by_from.iter().rev() {
        let k = calls.get(f).copied().unwrap_or(0);
        for (t, c) in ts {
            let e = calls.entry(*t).or_insert(0);
            *e = e.saturating_add(k.saturating_mul(*c));
        }
    }
    for n in &mut g.nodes {
        n.visits = n.delta_id.and_then(|i| calls.get(&i).copied());
        n.value = None;
    }
    // edges labelled with the number of calls one call of their source makes
    for e in &mut g.edges {
        let c = r.edge_calls.get(&(e.from as i64, e.to as i64)).or_else(|| r.edge_calls.get(&(-1, e.to as i64)));
        if let Some(c) = c {
            e.label = if *c == 1 { "calls".into() } else { format!("calls ×{c}") };
        }
    }
    Some(g)
}

fn b_zero_c(m: &mut Machine, _: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let r = rt(m);
    let (z, n) = (r.zero.clone().ok_or_else(|| err(span, "zeroC: no input zero (run through the stage)"))?, r.zero_size);
    m.tick(n)?;
    m.count("zero_leaves", n);
    Ok(z)
}

fn b_plus_c(m: &mut Machine, args: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    // added in place into the first (a fresh cotangent, as `d1 z` returns one), then charged
    let b = args.pop().unwrap_or(Value::Unit);
    let mut a = args.pop().unwrap_or(Value::Unit);
    let n = cot_add_assign(&mut a, &b).unwrap_or_else(|| size(&a));
    m.tick(n)?;
    m.count("plus_leaves", n);
    Ok(a)
}
