//! `dualrev/contrib`: defunctionalised backpropagators, the Contrib lists that are this paper's
//! Delta DAG. Smeding & Vákár §10.2, Fig. 11. After §10.1 every backpropagator is either a no-op
//! (inputs, constants) or `linλz. SCall d1 (z · ∂1 op(x)(1)) ∘ … ∘ SCall dn (z · ∂n op(x)(1))`, so it is
//! described by data: `Contrib = [(R, (Z, Contrib))]`, the partials with the arguments' IDs and Contribs.

use super::common::*;
use crate::build::*;
use crate::deriv::Partial;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Graph, Machine, RunError};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};
use crate::value::{ExtValue, Value};
use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

pub struct ContribStage;

static INFO: StageInfo = StageInfo {
    id: "dualrev/contrib",
    paper: PAPER,
    section: "§10.2, Fig. 11",
    title: "Defunctionalised backpropagators: Contrib lists (the Delta DAG)",
    explanation: "Without the collector, a backpropagator is either a no-op (inputs and constants) or stages calls of \
its arguments' backpropagators with the cotangent times each partial derivative — and since an operation returns one \
scalar, ∂ᵢop(x)(z) = z · ∂ᵢop(x)(1), a number known in the forward pass. So defunctionalise (Reynolds): represent a \
backpropagator by its Contrib, the list of (partial, (argument ID, argument's Contrib)); the no-ops are the empty list. \
A real is now (R, (Z, Contrib)), and the Contribs, pointing at their arguments', form a DAG in memory whose sharing \
the IDs make observable: the Delta DAG. SCall stores the Contrib with the accumulated cotangent at its ID, and \
SResolve, from the highest ID down, adds the cotangent times each partial into the cells of the arguments.",
    complexity: "O(T + I), with no closures in the reverse pass.",
    accepts: ACCEPTS,
};

fn contrib_ty() -> Type {
    Type::con("Contrib", vec![])
}
fn dref() -> Type {
    Type::tup(vec![Type::Int, contrib_ty()])
}

/// D[R] = (R, (Z, Contrib))  (footnote 38: the integer is the ID of the Contrib)
pub fn real_ty(_c: &Type) -> Type {
    Type::tup(vec![Type::Real, dref()])
}

struct Rule;

impl RealRule for Rule {
    fn real_ty(&self, c: &Type) -> Type {
        real_ty(c)
    }
    // forms 1 and 2 ↦ []
    fn constant(&self, fr: &mut Fresh, r: Expr) -> Expr {
        let i = fr.name("i");
        bind(pvar(&i), builtin("genID"), pure(pair(r, pair(var(&i), builtin("C0")))))
    }
    // form 3 ↦ [(∂1 op(x1..xn)(1), d1), …, (∂n op(x1..xn)(1), dn)]
    fn op(&self, fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial]) -> Expr {
        let i = fr.name("i");
        let name = if ds.len() == 1 { "C1" } else { "C2" };
        let args: Vec<Expr> = partials.iter().zip(ds).flat_map(|(p, d)| [at_one(p), d.clone()]).collect();
        bind(pvar(&i), builtin("genID"), pure(pair(y, pair(var(&i), apps(builtin(name), args)))))
    }
}

impl Stage for ContribStage {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let c = tv(1);
        let st = staged_ty(c.clone());
        let r = Type::Real;
        let mut v = common_builtins();
        v.extend(array_builtins());
        v.extend([
            Builtin { name: "C0", scheme: Scheme::mono(contrib_ty()), arity: 0, lazy_last: false, run: b_c },
            Builtin { name: "C1", scheme: Scheme::mono(Type::fun(r.clone(), Type::fun(dref(), contrib_ty()))), arity: 2, lazy_last: false, run: b_c },
            Builtin {
                name: "C2",
                scheme: Scheme::mono(Type::fun(r.clone(), Type::fun(dref(), Type::fun(r.clone(), Type::fun(dref(), contrib_ty()))))),
                arity: 4,
                lazy_last: false,
                run: b_c,
            },
            Builtin { name: "SAlloc", scheme: scheme(&[1], Type::fun(Type::Int, m_ty(st.clone()))), arity: 1, lazy_last: false, run: b_salloc },
            // SCall : (Z, Contrib) → dR ⊸ (Staged c → IO ())
            Builtin {
                name: "SCall",
                scheme: scheme(&[1], Type::fun(dref(), Type::lin(r, Type::fun(st.clone(), m_ty(Type::Unit))))),
                arity: 3,
                lazy_last: false,
                run: b_scall,
            },
            Builtin { name: "SResolve", scheme: scheme(&[1], Type::fun(Type::Int, Type::fun(st, m_ty(iarray_ty())))), arity: 2, lazy_last: false, run: b_sresolve },
        ]);
        v
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut mo = Monadic::new(src.program, &Rule);
        let mut out = mo.program(src.program);
        let mut fr = mo.fr;
        let (s, t) = (src.input_type, src.output_type);
        // Interleave_R = λx. genID >>= λi. pure ((x, (i, [])), λa. a @ i)
        let x = fr.name("x");
        let leaf = |x: Expr, fr: &mut Fresh| leaf_at(x, fr, &|_, _| builtin("C0"));
        let il = interleave_up(s, var(&x), &mut fr, &leaf);
        out.defs.push(def("interleave", lam(pvar(&x), il)));
        // Deinterleave_R (x, d) = (x, SCall d): the output's Contrib is staged with the output cotangent
        let y = fr.name("y");
        let dl = deinterleave(t, var(&y), &mut fr, &leaf_scall("d"), &combine_io);
        out.defs.push(def("deinterleave", lam(pvar(&y), dl)));
        out.defs.push(def(WRAPPER, wrapper_fig10(&out, &mut fr, false)));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        stated_io(src, &real_ty(&cvar()))
    }


    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        graph(m, "Contrib")
    }
}

// ---------------------------------------------------------------------------------------------
// Runtime

/// `Contrib = [(R, (Z, Contrib))]`. Dropped iteratively: a long chain must not recurse.
#[derive(Debug, Default)]
pub struct Contrib {
    pub edges: Vec<(f64, i64, Rc<Contrib>)>,
}

impl Drop for Contrib {
    fn drop(&mut self) {
        let mut stack = std::mem::take(&mut self.edges);
        while let Some((_, _, c)) = stack.pop() {
            if let Ok(mut inner) = Rc::try_unwrap(c) {
                stack.append(&mut inner.edges);
            }
        }
    }
}

#[derive(Debug)]
pub struct ContribV(pub Rc<Contrib>);

impl ExtValue for ContribV {
    fn type_name(&self) -> &'static str {
        "Contrib"
    }
    fn show(&self) -> String {
        let es: Vec<String> = self.0.edges.iter().map(|(a, j, _)| format!("({}, ({j}, □))", crate::value::show_real(*a))).collect();
        format!("[{}]", es.join(", "))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn contrib_of(v: &Value, span: Span) -> Result<Rc<Contrib>, RunError> {
    v.ext::<ContribV>().map(|c| c.0.clone()).ok_or_else(|| err(span, format!("expected a Contrib, got {v}")))
}

fn dref_of(v: &Value, span: Span) -> Result<(i64, Rc<Contrib>), RunError> {
    // read in place (the common case); the checks below give the messages
    if let Value::Tuple(vs) = v {
        if let [Value::Int(i), c] = &vs[..] {
            if let Some(c) = c.ext::<ContribV>() {
                return Ok((*i, c.0.clone()));
            }
        }
    }
    let (i, c) = want_pair(v, span, "Contrib")?;
    Ok((want_int(&i, span, "Contrib")?, contrib_of(&c, span)?))
}

/// C0, C1 a d, C2 a d b e: the Contrib lists of length 0, 1, 2.
fn b_c(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    m.alloc(1)?;
    let mut edges = Vec::with_capacity(args.len() / 2);
    for pair in args.chunks(2) {
        let a = want_real(&pair[0], span, "Contrib")?;
        let (j, c) = dref_of(&pair[1], span)?;
        edges.push((a, j, c));
    }
    Ok(Value::Ext(Rc::new(ContribV(Rc::new(Contrib { edges })))))
}

/// `Staged c = Array (Contrib, dR)`
#[derive(Debug, Default)]
pub struct ContribArr(pub RefCell<Vec<Option<(Rc<Contrib>, f64)>>>);

impl ExtValue for ContribArr {
    fn type_name(&self) -> &'static str {
        "Staged"
    }
    fn show(&self) -> String {
        arr_cells(self.0.borrow().iter().map(|c| c.as_ref().map(|(_, a)| *a)))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn carr<'v>(v: &'v Value, span: Span) -> Result<&'v ContribArr, RunError> {
    v.ext::<ContribArr>().ok_or_else(|| err(span, format!("expected a Staged array, got {v}")))
}

fn b_salloc(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let n = want_int(&args[0], span, "SAlloc")?.max(0) as usize;
    m.tick(n as u64 + 1)?;
    m.alloc(1)?;
    Ok(Value::Ext(Rc::new(ContribArr(RefCell::new(vec![None; n])))))
}

/// SCall (i, cb) z m: m[i] := (cb, snd m[i] + z)
fn b_scall(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let s = carr(&args[2], span)?;
    let z = want_real(&args[1], span, "SCall")?;
    let (i, cb) = dref_of(&args[0], span)?;
    {
        let mut cells = s.0.borrow_mut();
        let cell = cells.get_mut(i as usize).ok_or_else(|| err(span, format!("SCall: ID {i} outside the staging array")))?;
        let prev = cell.as_ref().map_or(0.0, |(_, a)| *a);
        *cell = Some((cb, prev + z));
    }
    m.tick(1)?;
    record_edge(m, i, z);
    Ok(Value::Unit)
}

/// SResolve: for i descending, with cell (cb, d) at i: for each (a, (j, cb_j)) in cb: m[j] := (cb_j, snd m[j] + a · d)
fn b_sresolve(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let s = carr(&args[1], span)?;
    let n = want_int(&args[0], span, "SResolve")?;
    if m.tracing() {
        let rows = s.0.borrow().iter().take(64).enumerate().filter_map(|(k, c)| c.as_ref().map(|(_, x)| (format!("m[{k}]"), *x))).collect();
        trace_start(m, rows);
    }
    // the graph's edges (i, j) ↦ a, gathered here and added to the map once at the end (also when
    // a budget stops the resolve): a B-tree insert per tape entry was a tenth of the run
    let mut drawn: Vec<((i64, i64), f64)> = vec![];
    let res = resolve(m, s, n, span, &mut drawn);
    let r = rt(m);
    let mut all: Vec<((i64, i64), f64)> = std::mem::take(&mut r.edges).into_iter().collect();
    all.append(&mut drawn);
    drop(drawn);
    // a later write of a key wins, as the inserts did (the sort is stable)
    all.sort_by_key(|(k, _)| *k);
    all.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 = later.1;
        }
        same
    });
    r.edges = all.into_iter().collect();
    res?;
    let frozen: Vec<f64> = s.0.borrow().iter().map(|c| c.as_ref().map_or(0.0, |(_, a)| *a)).collect();
    m.tick(frozen.len() as u64)?;
    Ok(iarr(frozen))
}

/// The resolve's loop: for i descending, with cell (cb, d) at i: for each (a, (j, cb_j)) in cb: m[j] := (cb_j, snd m[j] + a · d)
fn resolve(m: &mut Machine, s: &ContribArr, n: i64, span: Span, drawn: &mut Vec<((i64, i64), f64)>) -> Result<(), RunError> {
    let mut i = n - 1;
    while i >= 0 {
        m.tick(1)?;
        let cell = s.0.borrow().get(i as usize).cloned().flatten();
        if let Some((cb, d)) = cell {
            m.count("backprop_calls", 1);
            record_resolved(m, i, d);
            rt(m).current = Some(i);
            for (a, j, cbj) in &cb.edges {
                m.tick(1)?;
                m.real_op();
                {
                    let mut cells = s.0.borrow_mut();
                    let cell = cells.get_mut(*j as usize).ok_or_else(|| err(span, format!("SResolve: ID {j} outside the staging array")))?;
                    let prev = cell.as_ref().map_or(0.0, |(_, x)| *x);
                    *cell = Some((cbj.clone(), prev + a * d));
                }
                drawn.push(((i, *j), *a));
            }
            rt(m).current = None;
            if m.tracing() {
                let rows = s.0.borrow().iter().take(64).enumerate().filter_map(|(k, c)| c.as_ref().map(|(_, x)| (format!("m[{k}]"), *x))).collect();
                let note = format!("resolve ID {i}: add {} times each partial of its Contrib {}", crate::value::show_real(d), ContribV(cb.clone()).show());
                trace_resolve(m, i, d, note, rows);
            }
        }
        i -= 1;
    }
    Ok(())
}
