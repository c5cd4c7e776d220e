//! `dualrev/sparse`: keep just the scalars of the gradient, in a sparse `Map Z dR`. Smeding &
//! Vákár §8 (no figure: the wrapper follows Fig. 10's shape, as in the note's reconstruction).
//! The term translation is Fig. 9's; the collector becomes a persistent map (`kit::pmap`, imbl's B+tree) from input IDs
//! to cotangents, and Interleave returns a rebuild function instead of passing setters down.

use super::common::*;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Graph, Machine, RunError};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};
use crate::value::{ExtValue, Value};
use crate::kit::pmap::PMap;
use std::any::Any;
use std::rc::Rc;

pub struct Sparse;

static INFO: StageInfo = StageInfo {
    id: "dualrev/sparse",
    paper: PAPER,
    section: "§8",
    title: "Sparse gradient collector: Map Z dR",
    explanation: "After the Cayley transform the one-hot updaters still walk the input structure, O(I) each for a \
right-nested input (problem B). But the collector only ever receives scalars for input reals, so keep just those: \
Staged c becomes (Map Z dR, Map Z (backpropagator, dR)). Interleave numbers each input real with an ID and its \
backpropagator SOneHot i adds its argument under key i in O(log I); Interleave also returns a rebuild function that \
puts the gradient back into the input's shape (integers and sum tags from the input) once the resolve is done.",
    complexity: "O(T · max(log T, log I) + I log I) (footnote 31): the remaining log factors are the persistent maps'.",
    accepts: ACCEPTS,
};

fn gmap() -> Type {
    Type::con("Map", vec![Type::Int, Type::Real])
}

// The term translation is Fig. 9's (`CAYLEY_RULE`, common).

impl Stage for Sparse {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let c = tv(1);
        let bp = Type::lin(Type::Real, upd_ty(&c));
        let mut v = common_builtins();
        v.extend([
            // SOneHot : Z → dR ⊸ (Staged c → Staged c): insertWith (+) i z into the collector
            Builtin { name: "SOneHot", scheme: scheme(&[1], Type::fun(Type::Int, bp.clone())), arity: 3, lazy_last: false, run: b_onehot },
            Builtin {
                name: "SCall",
                scheme: scheme(&[1], Type::fun(Type::tup(vec![Type::Int, bp]), Type::lin(Type::Real, upd_ty(&c)))),
                arity: 3,
                lazy_last: false,
                run: b_scall,
            },
            // SResolve : (Staged c → Staged c) ⊸ Map Z dR
            Builtin { name: "SResolve", scheme: scheme(&[1], Type::lin(upd_ty(&c), gmap())), arity: 1, lazy_last: false, run: b_sresolve },
            // findWithDefault 0 i g
            Builtin { name: "lookup", scheme: Scheme::mono(Type::fun(gmap(), Type::fun(Type::Int, Type::Real))), arity: 2, lazy_last: false, run: b_lookup },
        ]);
        v
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut mo = Monadic::new(src.program, &CAYLEY_RULE);
        let mut out = mo.program(src.program);
        let mut fr = mo.fr;
        let (s, t) = (src.input_type, src.output_type);
        // Interleave_R = λx. genID >>= λi. pure ((x, (i, SOneHot i)), λg. lookup g i)
        let x = fr.name("x");
        let leaf = |x: Expr, fr: &mut Fresh| {
            let (i, g) = (fr.name("i"), fr.name("g"));
            let d = pair(x, pair(var(&i), app(builtin("SOneHot"), var(&i))));
            bind(pvar(&i), builtin("genID"), pure(pair(d, lam(pvar(&g), apps(builtin("lookup"), [var(&g), var(&i)])))))
        };
        let il = interleave_up(s, var(&x), &mut fr, &leaf);
        out.defs.push(def("interleave", lam(pvar(&x), il)));
        let y = fr.name("y");
        let dl = deinterleave(t, var(&y), &mut fr, &leaf_ignore_id, &combine_cayley);
        out.defs.push(def("deinterleave", lam(pvar(&y), dl)));
        // grad (x, dy) = let (y, d, rebuild) = runIDs (do (x', rebuild) ← interleave x; y' ← main x';
        //                    let (y, d) = deinterleave y' in pure (y, d, rebuild))
        //                in (y, rebuild (SResolve (d dy)))
        let (x, dy, yv, dv, rb, x2, y2) = (fr.name("x"), fr.name("dy"), fr.name("y"), fr.name("d"), fr.name("rebuild"), fr.name("x'"), fr.name("y'"));
        let m = bind(
            ppair(pvar(&x2), pvar(&rb)),
            app(global("interleave"), var(&x)),
            bind(
                pvar(&y2),
                run_main(&out, var(&x2), &mut fr),
                let_(ppair(pvar(&yv), pvar(&dv)), app(global("deinterleave"), var(&y2)), pure(tuple(vec![var(&yv), var(&dv), var(&rb)]))),
            ),
        );
        let body = let_(
            ptuple(vec![pvar(&yv), pvar(&dv), pvar(&rb)]),
            app(builtin("runIDs"), m),
            pair(var(&yv), app(var(&rb), app(builtin("SResolve"), app(var(&dv), var(&dy))))),
        );
        out.defs.push(def(WRAPPER, lam(ppair(pvar(&x), pvar(&dy)), body)));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        let c = cvar();
        let (s, t) = (src.input_type, src.output_type);
        vec![
            main_type(src, &real_ty_cayley(&c), true),
            ("interleave".into(), Type::fun(s.clone(), m_ty(Type::tup(vec![dtype(s, &real_ty_cayley(&c), true), Type::fun(gmap(), s.clone())])))),
            ("deinterleave".into(), Type::fun(dtype(t, &real_ty_cayley(&c), true), Type::tup(vec![t.clone(), Type::lin(t.clone(), upd_ty(&c))]))),
            grad_type(src),
        ]
    }


    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        graph(m, "backprop")
    }
}

// ---------------------------------------------------------------------------------------------
// Runtime

/// `Staged c = (Map Z dR, Map Z (dR ⊸ (Staged c → Staged c), dR))`
#[derive(Clone, Debug)]
pub struct SparseStaged {
    pub g: PMap<i64, f64>,
    pub m: PMap<i64, (Value, f64)>,
}

impl ExtValue for SparseStaged {
    fn type_name(&self) -> &'static str {
        "Staged"
    }
    fn show(&self) -> String {
        let g: Vec<String> = self.g.iter().map(|(k, a)| format!("{k} ↦ {}", crate::value::show_real(*a))).collect();
        let m: Vec<String> = self.m.iter().map(|(k, (_, a))| format!("{k} ↦ {}", crate::value::show_real(*a))).collect();
        format!("({{{}}}, {{{}}})", g.join(", "), m.join(", "))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The frozen collector `Map Z dR`.
#[derive(Debug)]
pub struct GMap(pub PMap<i64, f64>);

impl ExtValue for GMap {
    fn type_name(&self) -> &'static str {
        "Map"
    }
    fn show(&self) -> String {
        let g: Vec<String> = self.0.iter().map(|(k, a)| format!("{k} ↦ {}", crate::value::show_real(*a))).collect();
        format!("{{{}}}", g.join(", "))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn st(v: &Value, span: Span) -> Result<SparseStaged, RunError> {
    v.ext::<SparseStaged>().cloned().ok_or_else(|| err(span, format!("expected a Staged value, got {v}")))
}

/// The staged state an updater is given, taken to be updated in place: the value holding it is let
/// go first, so where nothing else holds the maps `insert_mut`/`remove_mut` change them without
/// copying a path (the same maps `insert`/`remove` would give; a map held elsewhere is copied as before).
fn take_st(v: Value, span: Span) -> Result<SparseStaged, RunError> {
    let s = st(&v, span)?;
    drop(v);
    Ok(s)
}

fn mk(s: SparseStaged) -> Value {
    Value::Ext(Rc::new(s))
}

/// SOneHot i z (g, m) = (insertWith (+) i z g, m): the input's backpropagator.
fn b_onehot(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    m.count("backprop_calls", 1);
    let mut s = take_st(args.pop().unwrap_or(Value::Unit), span)?;
    let z = want_real(&args[1], span, "SOneHot")?;
    let i = want_int(&args[0], span, "SOneHot")?;
    m.tick(1)?;
    m.count("map_ops", 1);
    m.alloc(1)?;
    // insertWith (+) in one descent (an absent i gets 0 + z, as before)
    s.g.insert_with(i, 0.0 + z, |a, _| *a += z);
    Ok(mk(s))
}

fn b_scall(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let mut s = take_st(args.pop().unwrap_or(Value::Unit), span)?;
    let x = want_real(&args[1], span, "SCall")?;
    let (i, f) = want_pair(&args[0], span, "SCall")?;
    let i = want_int(&i, span, "SCall")?;
    record_edge(m, i, x);
    m.tick(1)?;
    m.count("map_ops", 1);
    m.alloc(1)?;
    // in one descent: an absent i gets (f, x + 0), a present one (f, x + its sum)
    s.m.insert_with(i, (f, x + 0.0), |old, (f, _)| *old = (f, x + old.1));
    Ok(mk(s))
}

fn b_sresolve(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let u = args.pop().unwrap_or(Value::Unit);
    let r = m.apply(u, mk(SparseStaged { g: PMap::new(), m: PMap::new() }))?;
    let mut s = take_st(r, span)?;
    if m.tracing() {
        let mut rows: Vec<(String, f64)> = s.g.iter().take(64).map(|(k, x)| (format!("g[{k}]"), *x)).collect();
        rows.extend(s.m.iter().take(64).map(|(k, (_, x))| (format!("m[{k}]"), *x)));
        trace_start(m, rows);
    }
    loop {
        m.tick(1)?;
        let Some(i) = s.m.last().map(|(i, _)| *i) else { break };
        let Some((f, a)) = s.m.remove_mut(&i) else { break };
        m.count("map_ops", 2);
        record_resolved(m, i, a);
        rt(m).current = Some(i);
        let upd = m.apply(f, Value::Real(a))?;
        let r = m.apply(upd, mk(s))?;
        rt(m).current = None;
        s = take_st(r, span)?;
        if m.tracing() {
            let mut rows: Vec<(String, f64)> = s.g.iter().take(64).map(|(k, x)| (format!("g[{k}]"), *x)).collect();
            rows.extend(s.m.iter().take(64).map(|(k, (_, x))| (format!("m[{k}]"), *x)));
            let note = format!("resolve ID {i}: apply its backpropagator at {} to the staged state", crate::value::show_real(a));
            trace_resolve(m, i, a, note, rows);
        }
    }
    Ok(Value::Ext(Rc::new(GMap(s.g))))
}

fn b_lookup(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    m.tick(1)?;
    let g = args[0].ext::<GMap>().ok_or_else(|| err(span, format!("lookup: expected a map, got {}", args[0])))?;
    let i = want_int(&args[1], span, "lookup")?;
    Ok(Value::Real(g.0.get(&i).copied().unwrap_or(0.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{Budget, Builtins};

    fn staged(g: &[(i64, f64)]) -> Value {
        mk(SparseStaged { g: g.iter().copied().collect(), m: PMap::new() })
    }
    fn collector(v: &Value) -> Vec<(i64, f64)> {
        v.ext::<SparseStaged>().map(|s| s.g.iter().map(|(k, x)| (*k, *x)).collect()).unwrap_or_default()
    }

    /// `SOneHot i z` adds into the collector it is given (in place where that state is held once,
    /// which the values cannot show), and leaves a state held elsewhere as it was: fails if the
    /// in-place addition reached a map another value still holds.
    #[test]
    fn a_one_hot_adds_into_a_collector_held_once_and_leaves_a_shared_one_alone() {
        let program = Program::default();
        let mut m = Machine::new(&program, &Builtins::new(), Budget::default()).expect("a machine");
        let span = Span::default();
        let r = b_onehot(&mut m, &mut vec![Value::Int(2), Value::Real(1.5), staged(&[(1, 1.0), (2, 0.5)])], span).expect("SOneHot");
        assert_eq!(collector(&r), vec![(1, 1.0), (2, 2.0)]);
        let r = b_onehot(&mut m, &mut vec![Value::Int(3), Value::Real(4.0), r], span).expect("SOneHot");
        assert_eq!(collector(&r), vec![(1, 1.0), (2, 2.0), (3, 4.0)]);
        let shared = staged(&[(1, 1.0)]);
        let r = b_onehot(&mut m, &mut vec![Value::Int(1), Value::Real(2.0), shared.clone()], span).expect("SOneHot");
        assert_eq!(collector(&r), vec![(1, 3.0)]);
        assert_eq!(collector(&shared), vec![(1, 1.0)]);
        assert_eq!(m.cost().counter("map_ops"), 3);
    }
}
