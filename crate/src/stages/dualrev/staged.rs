//! `dualrev/staged`: linear factoring by staging backpropagator calls, with IDs. Smeding & Vákár
//! §6, Fig. 8. Backpropagators return `Staged c = (c, Map Z (dR ⊸ Staged c, dR))`: instead of
//! calling their arguments' backpropagators they stage the calls under the callee's ID, and SResolve
//! runs them from the highest ID down, so each backpropagator runs at most once.

use super::common::*;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Graph, Machine, RunError};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};
use crate::value::Value;
use crate::kit::pmap::PMap;

pub struct Staged;

static INFO: StageInfo = StageInfo {
    id: "dualrev/staged",
    paper: PAPER,
    section: "§6, Fig. 8",
    title: "Linear factoring: staged backpropagator calls with IDs",
    explanation: "The naive stage calls a shared backpropagator once per path. Linear factoring (f x + f y = \
f (x + y)) fixes that, if the calls can be delayed and merged. So a backpropagator no longer calls its arguments' \
backpropagators: it returns a Staged object, a cotangent plus a map from backpropagator IDs to (backpropagator, \
accumulated argument), and SCall stages a call by adding its argument to the entry under the callee's ID. IDs come \
from a state monad (genID), in creation order, so an operation's backpropagator has a higher ID than its arguments'. \
The wrapper's SResolve repeatedly pops the highest ID and runs its backpropagator on the sum of everything staged for \
it: when an ID is resolved, nobody can still stage a call to it, so every backpropagator runs at most once — a \
reverse topological sweep of the computation graph. The output's backpropagators are still called directly by \
Deinterleave (§6.1).",
    complexity: "forward O(T); reverse: each backpropagator at most once, but each call costs O(I) (dense 0 and + on c, one-hots) plus O(log T) map operations: O(T·(I + log T)).",
    accepts: ACCEPTS,
};

/// D²_c[R] = (R, (Z, dR ⊸ Staged c))  (Fig. 8)
pub fn real_ty(c: &Type) -> Type {
    Type::tup(vec![Type::Real, Type::tup(vec![Type::Int, Type::lin(Type::Real, staged_ty(c.clone()))])])
}

/// D²[r] = λi. ((r, (i, linλz. 0_Staged)), i + 1)
/// D²[op(t1..tn)] = … ((op(x1..xn), (in, linλz. SCall d1 (∂1 op(x)(z)) +_Staged … +_Staged SCall dn (∂n op(x)(z)))), in + 1)
const RULE: SCallRule = SCallRule { real: real_ty, combine };

/// `+_Staged` and `0_Staged`.
fn combine(parts: Vec<Expr>, _: &mut Fresh) -> Expr {
    parts.into_iter().reduce(|a, b| apps(builtin("plusStaged"), [a, b])).unwrap_or_else(|| builtin("zeroStaged"))
}

impl Stage for Staged {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let c = tv(1);
        let st = staged_ty(c.clone());
        let bp = Type::lin(Type::Real, st.clone());
        let mut v = common_builtins();
        v.push(zero_of_builtin());
        v.extend([
            Builtin { name: "zeroStaged", scheme: scheme(&[1], st.clone()), arity: 0, lazy_last: false, run: b_zero },
            Builtin { name: "plusStaged", scheme: scheme(&[1], Type::fun(st.clone(), Type::fun(st.clone(), st.clone()))), arity: 2, lazy_last: false, run: b_plus },
            Builtin { name: "SCotan", scheme: scheme(&[1], Type::lin(c.clone(), st.clone())), arity: 1, lazy_last: false, run: b_scotan },
            Builtin {
                name: "SCall",
                scheme: scheme(&[1], Type::fun(Type::tup(vec![Type::Int, bp.clone()]), Type::lin(Type::Real, st.clone()))),
                arity: 2,
                lazy_last: false,
                run: b_scall,
            },
            Builtin { name: "SResolve", scheme: scheme(&[1], Type::fun(st, c)), arity: 1, lazy_last: false, run: b_sresolve },
        ]);
        v
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut mo = Monadic::new(src.program, &RULE);
        let mut out = mo.program(src.program);
        let mut fr = mo.fr;
        let (s, t) = (src.input_type, src.output_type);
        // Interleave²_σ : (σ, dσ ⊸ Staged c) → M D²_c[σ]
        let (x, d) = (fr.name("x"), fr.name("d"));
        let il = interleave_down(s, var(&x), var(&d), &mut fr, Down::Staged);
        out.defs.push(def("interleave", lam(ppair(pvar(&x), pvar(&d)), il)));
        // Deinterleave²_τ : D²_c[τ] → (τ, dτ ⊸ Staged c): ignores the IDs, uses 0_Staged and +_Staged
        let y = fr.name("y");
        let dl = deinterleave(t, var(&y), &mut fr, &leaf_ignore_id, &combine);
        out.defs.push(def("deinterleave", lam(pvar(&y), dl)));
        // Wrap²[λx. t] = λx. let (x, i) = Interleave²_σ (x, SCotan) 0
        //                    in let (y, d) = Deinterleave²_τ (fst (D²_σ[t] i)) in (y, linλz. SResolve (d z))
        // (a real input's one-hot is SCotan itself, so its call is counted here; z is named either way)
        let cot = |fr: &mut Fresh| {
            let z = fr.name("z");
            if *s == Type::Real { linlam(pvar(&z), app(builtin("counted"), app(builtin("SCotan"), var(&z)))) } else { builtin("SCotan") }
        };
        out.defs.push(def(WRAPPER, wrapper_fig8(&out, &mut fr, &cot)));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        let c = cvar();
        let (s, t) = (src.input_type, src.output_type);
        let st = staged_ty(c.clone());
        vec![
            main_type(src, &real_ty(&c), true),
            (
                "interleave".into(),
                Type::fun(Type::tup(vec![s.clone(), Type::lin(s.clone(), st.clone())]), m_ty(dtype(s, &real_ty(&c), true))),
            ),
            ("deinterleave".into(), Type::fun(dtype(t, &real_ty(&c), true), Type::tup(vec![t.clone(), Type::lin(t.clone(), st)]))),
            grad_type(src),
        ]
    }


    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        graph(m, "backprop")
    }
}

// ---------------------------------------------------------------------------------------------
// Runtime: the Staged interface of Fig. 8

fn b_zero(m: &mut Machine, _: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    m.alloc(1)?;
    let c = zero_c(m, span)?;
    Ok(staged_value(c, PMap::new()))
}

/// `m ∪ m'` with linear factoring: entries under the same ID add their arguments. The maps are taken
/// by value, so the smaller is inserted into the larger in place where nothing else holds it.
pub fn union(
    m: &mut Machine,
    a: PMap<i64, (Value, f64)>,
    b: PMap<i64, (Value, f64)>,
) -> Result<PMap<i64, (Value, f64)>, RunError> {
    let (mut big, small) = if a.size() >= b.size() { (a, b) } else { (b, a) };
    for (k, (f, x)) in small.iter() {
        m.tick(1)?;
        m.count("map_ops", 1);
        let merged = match big.get(k) {
            Some((_, y)) => (f.clone(), x + y),
            None => (f.clone(), *x),
        };
        big.insert_mut(*k, merged);
    }
    Ok(big)
}

fn b_plus(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let b = args.pop().unwrap_or(Value::Unit);
    let a = args.pop().unwrap_or(Value::Unit);
    let StagedV { c: b, m: b_map } = owned_staged(b, span)?;
    let StagedV { c: mut a, m: a_map } = owned_staged(a, span)?;
    // `a`'s cotangent added into in place (`cot_add_assign`), then charged as before
    let n = cot_add_assign(&mut a, &b).unwrap_or_else(|| size(&a));
    m.tick(n)?;
    m.count("plus_leaves", n);
    m.alloc(1)?;
    let map = union(m, a_map, b_map)?;
    Ok(staged_value(a, map))
}

fn b_scotan(m: &mut Machine, args: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    m.alloc(1)?;
    Ok(staged_value(args.pop().unwrap_or(Value::Unit), PMap::new()))
}

/// `SCall (i, f) x = (0, {i ↦ (f, x)})`
fn b_scall(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let (i, f) = want_pair(&args[0], span, "SCall")?;
    let i = want_int(&i, span, "SCall")?;
    let x = want_real(&args[1], span, "SCall")?;
    record_edge(m, i, x);
    m.alloc(1)?;
    let c = zero_c(m, span)?;
    Ok(staged_value(c, PMap::new().insert(i, (f, x))))
}

/// SResolve (grad, m) = if m is empty then grad else let i = highest key in m, (f, a) = m[i]
///                      in SResolve (f a +_Staged (grad, m \ i))      (§6; "(c', m')" read as (grad, m'))
fn b_sresolve(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let mut s = staged_of(&args.pop().unwrap_or(Value::Unit), span)?.clone();
    if m.tracing() {
        trace_start(m, staged_rows(&s));
    }
    loop {
        m.tick(1)?;
        let Some((&i, (f, a))) = s.m.last() else { break };
        let (f, a) = (f.clone(), *a);
        m.count("map_ops", 2);
        s.m.remove_mut(&i);
        record_resolved(m, i, a);
        rt(m).current = Some(i);
        let r = m.apply(f, Value::Real(a))?;
        rt(m).current = None;
        let StagedV { mut c, m: r_map } = owned_staged(r, span)?;
        // `r.c + s.c` into `r.c` in place; the paper's charge is `size(s.c)` (the same when the shapes are)
        let n = cot_add_assign(&mut c, &s.c).unwrap_or_else(|| size(&s.c));
        m.tick(n)?;
        m.count("plus_leaves", n);
        let map = union(m, r_map, s.m)?;
        s = StagedV { c, m: map };
        if m.tracing() {
            let note = format!("resolve ID {i}: call its backpropagator with {}", crate::value::show_real(a));
            trace_resolve(m, i, a, note, staged_rows(&s));
        }
    }
    Ok(s.c)
}
