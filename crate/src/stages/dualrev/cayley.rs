//! `dualrev/cayley`: the Cayley-transformed cotangent collector. Smeding & Vákár §7, Fig. 9.
//! Backpropagators map into `Staged c → Staged c`: `0_Staged` becomes `id` and `+_Staged` becomes
//! `∘` (written out as `λs. SCall … (SCall … s)`), and the one-hot input backpropagators become
//! setters that update only the path to their leaf.

use super::common::*;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Graph, Machine, RunError};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};
use crate::value::Value;
use crate::kit::pmap::PMap;

pub struct Cayley;

static INFO: StageInfo = StageInfo {
    id: "dualrev/cayley",
    paper: PAPER,
    section: "§7, Fig. 9",
    title: "Cayley-transformed cotangent collector",
    explanation: "The staged stage still pays O(size of the input) for every 0, + and SCall, because each builds or \
adds a dense value of c (problem A, §6.2), and the one-hot input backpropagators build whole tuples (problem B). \
Representing a monoid element m by the function (m + –) (the Cayley transform, Hughes' difference lists) makes 0 the \
identity and + composition, both O(1): backpropagators now return updaters Staged c → Staged c, SCall inserts into or \
adds to the staging map in place of building a singleton, and SResolve applies the updater to 0_Staged once — the \
only zero of c left. Interleave passes setters down the input, so a one-hot backpropagator rebuilds only the path \
to its leaf.",
    complexity: "forward O(T); reverse O(T log T) map operations plus O(depth of the input) per one-hot update (O(I) each for right-nested inputs).",
    accepts: ACCEPTS,
};

// The term translation is `CAYLEY_RULE` (common): D³_c[R] = (R, (Z, dR ⊸ (Staged c → Staged c))),
// "as D², with id for 0_Staged and ∘ for +_Staged" (Fig. 9).

impl Stage for Cayley {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let c = tv(1);
        let bp = Type::lin(Type::Real, upd_ty(&c));
        let mut v = common_builtins();
        v.extend([
            // SCotan : (c → c) ⊸ (Staged c → Staged c)
            Builtin { name: "SCotan", scheme: scheme(&[1], Type::lin(Type::fun(c.clone(), c.clone()), upd_ty(&c))), arity: 2, lazy_last: false, run: b_scotan },
            // SCall : (Z, dR ⊸ (Staged c → Staged c)) → dR ⊸ (Staged c → Staged c)
            Builtin {
                name: "SCall",
                scheme: scheme(&[1], Type::fun(Type::tup(vec![Type::Int, bp]), Type::lin(Type::Real, upd_ty(&c)))),
                arity: 3,
                lazy_last: false,
                run: b_scall,
            },
            // SResolve : (Staged c → Staged c) ⊸ c
            Builtin { name: "SResolve", scheme: scheme(&[1], Type::lin(upd_ty(&c), c.clone())), arity: 1, lazy_last: false, run: b_sresolve },
        ]);
        v
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut mo = Monadic::new(src.program, &CAYLEY_RULE);
        let mut out = mo.program(src.program);
        let mut fr = mo.fr;
        let (s, t) = (src.input_type, src.output_type);
        // Interleave³_σ : (σ, (dσ → dσ) ⊸ (Staged c → Staged c)) → M D³_c[σ]
        let (x, d) = (fr.name("x"), fr.name("d"));
        let il = interleave_down(s, var(&x), var(&d), &mut fr, Down::Cayley);
        out.defs.push(def("interleave", lam(ppair(pvar(&x), pvar(&d)), il)));
        // Deinterleave³_τ : D³_c[τ] → (τ, dτ ⊸ (Staged c → Staged c)), with id and ∘
        let y = fr.name("y");
        let dl = deinterleave(t, var(&y), &mut fr, &leaf_ignore_id, &combine_cayley);
        out.defs.push(def("deinterleave", lam(pvar(&y), dl)));
        // Wrap³[λx. t] = λx. let (x, i) = Interleave³_σ (x, SCotan) 0
        //                    in let (y, d) = Deinterleave³_τ (fst (D³_σ[t] i)) in (y, linλz. SResolve (d z))
        out.defs.push(def(WRAPPER, wrapper_fig8(&out, &mut fr, &|_| builtin("SCotan"))));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        let c = cvar();
        let (s, t) = (src.input_type, src.output_type);
        vec![
            main_type(src, &real_ty_cayley(&c), true),
            (
                "interleave".into(),
                Type::fun(
                    Type::tup(vec![s.clone(), Type::lin(Type::fun(s.clone(), s.clone()), upd_ty(&c))]),
                    m_ty(dtype(s, &real_ty_cayley(&c), true)),
                ),
            ),
            ("deinterleave".into(), Type::fun(dtype(t, &real_ty_cayley(&c), true), Type::tup(vec![t.clone(), Type::lin(t.clone(), upd_ty(&c))]))),
            grad_type(src),
        ]
    }


    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        graph(m, "backprop")
    }
}

/// SCotan f (c, m) = (f c, m)
fn b_scotan(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let s = owned_staged(args.pop().unwrap_or(Value::Unit), span)?;
    let f = args.pop().unwrap_or(Value::Unit);
    let c = m.apply(f, s.c)?;
    m.alloc(1)?;
    Ok(staged_value(c, s.m))
}

/// SCall (i, f) x (c, m) = (c, if i ∉ m then insert i ↦ (f, x) into m else update m at i with (λ(_, x'). (f, x + x')))
fn b_scall(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let mut s = owned_staged(args.pop().unwrap_or(Value::Unit), span)?;
    let x = want_real(&args[1], span, "SCall")?;
    let (i, f) = want_pair(&args[0], span, "SCall")?;
    let i = want_int(&i, span, "SCall")?;
    record_edge(m, i, x);
    m.tick(1)?;
    m.count("map_ops", 1);
    m.alloc(1)?;
    let prev = s.m.get(&i).map_or(0.0, |(_, a)| *a);
    // in place where the map is held once (`owned_staged`): the map `insert` would give
    s.m.insert_mut(i, (f, x + prev));
    Ok(staged_value(s.c, s.m))
}

/// SResolve: apply the updater to 0_Staged once, then as in §6 with the last line
/// `SResolve (f a (grad, m'))`.
fn b_sresolve(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let u = args.pop().unwrap_or(Value::Unit);
    let z = zero_c(m, span)?;
    let r = m.apply(u, staged_value(z, PMap::new()))?;
    let mut s = owned_staged(r, span)?;
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
        let upd = m.apply(f, Value::Real(a))?;
        let r = m.apply(upd, staged_value(s.c, s.m))?;
        rt(m).current = None;
        s = owned_staged(r, span)?;
        if m.tracing() {
            let note = format!("resolve ID {i}: apply its backpropagator at {} to the staged state", crate::value::show_real(a));
            trace_resolve(m, i, a, note, staged_rows(&s));
        }
    }
    Ok(s.c)
}
