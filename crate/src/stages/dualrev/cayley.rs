//! `dualrev/cayley`: the Cayley-transformed cotangent collector. Smeding & Vákár §7, Fig. 9.
//! Backpropagators map into `Staged c → Staged c`: `0_Staged` becomes `id` and `+_Staged` becomes
//! `∘` (written out as `λs. SCall … (SCall … s)`), and the one-hot input backpropagators become
//! setters that update only the path to their leaf.

use super::common::*;
use super::staged::StagedV;
use crate::build::*;
use crate::deriv::Partial;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Graph, Machine, RunError};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};
use crate::value::Value;
use rpds::RedBlackTreeMap;
use std::rc::Rc;

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

fn upd(c: &Type) -> Type {
    Type::fun(staged_ty(c.clone()), staged_ty(c.clone()))
}

/// D³_c[R] = (R, (Z, dR ⊸ (Staged c → Staged c)))  (Fig. 9)
pub fn real_ty(c: &Type) -> Type {
    Type::Tuple(vec![Type::Real, Type::Tuple(vec![Type::Int, Type::lin(Type::Real, upd(c))])])
}

/// The rule of Fig. 9 ("as D², with id for 0_Staged and ∘ for +_Staged"); shared with §8.
pub struct Rule;

impl RealRule for Rule {
    fn real_ty(&self, c: &Type) -> Type {
        real_ty(c)
    }
    // D³[r] = genID >>= λi. pure (r, (i, linλz. id))
    fn constant(&self, fr: &mut Fresh, r: Expr) -> Expr {
        let (i, z) = (fr.name("i"), fr.name("z"));
        let bp = linlam(pvar(&z), app(builtin("counted"), combine_cayley(vec![], fr)));
        bind(pvar(&i), builtin("genID"), pure(pair(r, pair(var(&i), bp))))
    }
    // D³[op(t1..tn)] = … (op(x…), (i, linλz. SCall d1 (∂1 op(x)(z)) ∘ … ∘ SCall dn (∂n op(x)(z))))
    fn op(&self, fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial]) -> Expr {
        let (i, z) = (fr.name("i"), fr.name("z"));
        let parts: Vec<Expr> = partials.iter().zip(ds).map(|(p, d)| apps(builtin("SCall"), [d.clone(), scale(p, var(&z))])).collect();
        let bp = linlam(pvar(&z), app(builtin("counted"), combine_cayley(parts, fr)));
        bind(pvar(&i), builtin("genID"), pure(pair(y, pair(var(&i), bp))))
    }
}

/// Deinterleave³'s leaf: ignore the ID.
pub fn leaf_ignore_id(e: Expr, fr: &mut Fresh) -> Expr {
    let (p, i, bp) = (fr.name("x"), fr.name("i"), fr.name("d"));
    let_(ppair(pvar(&p), ppair(pvar(&i), pvar(&bp))), e, pair(var(&p), var(&bp)))
}

impl Stage for Cayley {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let c = tv(1);
        let st = staged_ty(c.clone());
        let bp = Type::lin(Type::Real, upd(&c));
        let mut v = common_builtins();
        v.extend([
            // SCotan : (c → c) ⊸ (Staged c → Staged c)
            Builtin { name: "SCotan", scheme: scheme(&[1], Type::lin(Type::fun(c.clone(), c.clone()), upd(&c))), arity: 2, lazy_last: false, run: b_scotan },
            // SCall : (Z, dR ⊸ (Staged c → Staged c)) → dR ⊸ (Staged c → Staged c)
            Builtin {
                name: "SCall",
                scheme: scheme(&[1], Type::fun(Type::Tuple(vec![Type::Int, bp]), Type::lin(Type::Real, upd(&c)))),
                arity: 3,
                lazy_last: false,
                run: b_scall,
            },
            // SResolve : (Staged c → Staged c) ⊸ c
            Builtin { name: "SResolve", scheme: scheme(&[1], Type::lin(upd(&c), c.clone())), arity: 1, lazy_last: false, run: b_sresolve },
        ]);
        let _ = st;
        v
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        accepts_source(src)
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut mo = Monadic::new(src.program, &Rule);
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
        let (x, dy, yv, dv, x2) = (fr.name("x"), fr.name("dy"), fr.name("y"), fr.name("d"), fr.name("x'"));
        let m = bind(
            pvar(&x2),
            app(global("interleave"), pair(var(&x), builtin("SCotan"))),
            bind(pvar(&yv), run_main(&out, var(&x2), &mut fr), pure(app(global("deinterleave"), var(&yv)))),
        );
        let body = let_(
            ppair(pvar(&yv), pvar(&dv)),
            app(builtin("runIDs"), m),
            pair(var(&yv), app(builtin("SResolve"), app(var(&dv), var(&dy)))),
        );
        out.defs.push(def(WRAPPER, lam(ppair(pvar(&x), pvar(&dy)), body)));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        let c = cvar();
        let (s, t) = (src.input_type, src.output_type);
        vec![
            main_type(src, &real_ty(&c), true),
            (
                "interleave".into(),
                Type::fun(
                    Type::Tuple(vec![s.clone(), Type::lin(Type::fun(s.clone(), s.clone()), upd(&c))]),
                    m_ty(dtype(s, &real_ty(&c), true)),
                ),
            ),
            ("deinterleave".into(), Type::fun(dtype(t, &real_ty(&c), true), Type::Tuple(vec![t.clone(), Type::lin(t.clone(), upd(&c))]))),
            grad_type(src),
        ]
    }


    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        graph(m, "backprop")
    }
}

fn staged_arg(v: &Value, span: Span) -> Result<StagedV, RunError> {
    super::staged::staged_of(v, span).cloned()
}

fn mk(c: Value, m: RedBlackTreeMap<i64, (Value, f64)>) -> Value {
    Value::Ext(Rc::new(StagedV { c, m }))
}

/// SCotan f (c, m) = (f c, m)
fn b_scotan(m: &mut Machine, mut args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let s = staged_arg(&args.pop().unwrap_or(Value::Unit), span)?;
    let f = args.pop().unwrap_or(Value::Unit);
    let c = m.apply(f, s.c)?;
    m.alloc(1)?;
    Ok(mk(c, s.m))
}

/// SCall (i, f) x (c, m) = (c, if i ∉ m then insert i ↦ (f, x) into m else update m at i with (λ(_, x'). (f, x + x')))
fn b_scall(m: &mut Machine, mut args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let s = staged_arg(&args.pop().unwrap_or(Value::Unit), span)?;
    let x = want_real(&args[1], span, "SCall")?;
    let (i, f) = want_pair(&args[0], span, "SCall")?;
    let i = want_int(&i, span, "SCall")?;
    record_edge(m, i, x);
    m.tick(1)?;
    m.count("map_ops", 1);
    m.alloc(1)?;
    let prev = s.m.get(&i).map_or(0.0, |(_, a)| *a);
    Ok(mk(s.c, s.m.insert(i, (f, x + prev))))
}

/// SResolve: apply the updater to 0_Staged once, then as in §6 with the last line
/// `SResolve (f a (grad, m'))`.
fn b_sresolve(m: &mut Machine, mut args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let u = args.pop().unwrap_or(Value::Unit);
    let z = rt(m).zero.clone().ok_or_else(|| err(span, "no input zero (run through the stage)"))?;
    m.tick(size(&z))?;
    m.count("zero_leaves", size(&z));
    let r = m.apply(u, mk(z, RedBlackTreeMap::new()))?;
    let mut s = staged_arg(&r, span)?;
    if m.tracing() {
        let mut rows = collector_rows(&s.c);
        rows.extend(s.m.iter().take(64).map(|(k, (_, x))| (format!("m[{k}]"), *x)));
        trace_start(m, rows);
    }
    loop {
        m.tick(1)?;
        let Some((&i, (f, a))) = s.m.last() else { break };
        let (f, a) = (f.clone(), *a);
        m.count("map_ops", 2);
        let rest = s.m.remove(&i);
        record_resolved(m, i, a);
        rt(m).current = Some(i);
        let upd = m.apply(f, Value::Real(a))?;
        let r = m.apply(upd, mk(s.c, rest))?;
        rt(m).current = None;
        s = staged_arg(&r, span)?;
        if m.tracing() {
            let mut rows = collector_rows(&s.c);
            rows.extend(s.m.iter().take(64).map(|(k, (_, x))| (format!("m[{k}]"), *x)));
            let note = format!("resolve ID {i}: apply its backpropagator at {} to the staged state", crate::value::show_real(a));
            trace_resolve(m, i, a, note, rows);
        }
    }
    Ok(s.c)
}
