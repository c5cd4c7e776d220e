//! `dualrev/mutable`: mutable arrays, the first stage with the right complexity O(T + I).
//! Smeding & Vákár §9, Fig. 10. Both maps are keyed by consecutive IDs from 0, so they become
//! arrays (sizes known when the reverse pass starts), updated in place in IO (here: the monad `M`,
//! run in direct style, with `runIO` for unsafePerformIO).

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

pub struct Mutable;

static INFO: StageInfo = StageInfo {
    id: "dualrev/mutable",
    paper: PAPER,
    section: "§9, Fig. 10",
    title: "Mutable arrays: O(T + I)",
    explanation: "The maps of the sparse stage are keyed by IDs 0, 1, 2, … in order, and their sizes are known when \
the reverse pass starts: the number of input reals (the ID after Interleave) and the number of backpropagators (the \
ID after the program). So both become mutable arrays, allocated by SAlloc and updated in place in IO — sound because \
the only effects are accumulations, which commute. Backpropagators become Staged c → IO (); SCall and SOneHot add \
into an array cell in O(1); SResolve loops from the highest ID to 0 over the staging array and calls each \
backpropagator once with its accumulated cotangent; Interleave builds a getter into the frozen collector array. \
Every step is now O(1), so the whole gradient costs O(T + I): the paper's complexity criterion.",
    complexity: "O(T + I): forward O(T), SAlloc O(T + I), each backpropagator at most once and O(1), rebuild O(I).",
    accepts: ACCEPTS,
};

fn io(c: &Type) -> Type {
    Type::fun(staged_ty(c.clone()), m_ty(Type::Unit))
}

/// D⁴_c[R] = (R, (Z, dR ⊸ (Staged c → IO ())))  (Fig. 10)
pub fn real_ty(c: &Type) -> Type {
    Type::Tuple(vec![Type::Real, Type::Tuple(vec![Type::Int, Type::lin(Type::Real, io(c))])])
}

/// Fig. 10: "same as D², with λ_. return () for 0_Staged and λf g x. f x >> g x for +_Staged" (shared with §10.1).
pub struct Rule;

impl RealRule for Rule {
    fn real_ty(&self, c: &Type) -> Type {
        real_ty(c)
    }
    fn constant(&self, fr: &mut Fresh, r: Expr) -> Expr {
        let (i, z) = (fr.name("i"), fr.name("z"));
        let bp = linlam(pvar(&z), app(builtin("counted"), combine_io(vec![], fr)));
        bind(pvar(&i), builtin("genID"), pure(pair(r, pair(var(&i), bp))))
    }
    fn op(&self, fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial]) -> Expr {
        let (i, z) = (fr.name("i"), fr.name("z"));
        let parts: Vec<Expr> = partials.iter().zip(ds).map(|(p, d)| apps(builtin("SCall"), [d.clone(), scale(p, var(&z))])).collect();
        let bp = linlam(pvar(&z), app(builtin("counted"), combine_io(parts, fr)));
        bind(pvar(&i), builtin("genID"), pure(pair(y, pair(var(&i), bp))))
    }
}

pub fn leaf_ignore_id(e: Expr, fr: &mut Fresh) -> Expr {
    super::cayley::leaf_ignore_id(e, fr)
}

/// The builtins of §9 (`with_collector`) and §10.1 (without).
pub fn builtins(with_collector: bool) -> Vec<Builtin> {
    let c = tv(1);
    let st = staged_ty(c.clone());
    let bp = Type::lin(Type::Real, io(&c));
    let mut v = common_builtins();
    v.extend(array_builtins());
    v.push(Builtin {
        name: "SCall",
        scheme: scheme(&[1], Type::fun(Type::Tuple(vec![Type::Int, bp.clone()]), Type::lin(Type::Real, io(&c)))),
        arity: 3,
        lazy_last: false,
        run: b_scall,
    });
    // SResolve : Z → Staged c → IO (IArray dR)
    v.push(Builtin { name: "SResolve", scheme: scheme(&[1], Type::fun(Type::Int, Type::fun(st.clone(), m_ty(iarray_ty())))), arity: 2, lazy_last: false, run: b_sresolve });
    if with_collector {
        // SAlloc : Z → Z → IO (Staged c) ; SOneHot : Z → dR ⊸ (Staged c → IO ())
        v.push(Builtin { name: "SAlloc", scheme: scheme(&[1], Type::fun(Type::Int, Type::fun(Type::Int, m_ty(st)))), arity: 2, lazy_last: false, run: b_salloc2 });
        v.push(Builtin { name: "SOneHot", scheme: scheme(&[1], Type::fun(Type::Int, bp)), arity: 3, lazy_last: false, run: b_onehot });
    } else {
        // SAlloc : Z → IO (Staged c)
        v.push(Builtin { name: "SAlloc", scheme: scheme(&[1], Type::fun(Type::Int, m_ty(st))), arity: 1, lazy_last: false, run: b_salloc1 });
    }
    v
}

impl Stage for Mutable {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        builtins(true)
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        accepts_source(src)
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut mo = Monadic::new(src.program, &Rule);
        let mut out = mo.program(src.program);
        let mut fr = mo.fr;
        let (s, t) = (src.input_type, src.output_type);
        // Interleave⁴_R = λx. λi. (((x, (i, SOneHot i)), λa. a @ i), i + 1)
        let x = fr.name("x");
        let leaf = |x: Expr, fr: &mut Fresh| {
            let (i, a) = (fr.name("i"), fr.name("a"));
            let d = pair(x, pair(var(&i), app(builtin("SOneHot"), var(&i))));
            bind(pvar(&i), builtin("genID"), pure(pair(d, lam(pvar(&a), apps(builtin("at"), [var(&a), var(&i)])))))
        };
        let il = interleave_up(s, var(&x), &mut fr, &leaf);
        out.defs.push(def("interleave", lam(pvar(&x), il)));
        // Deinterleave⁴_τ: program text unchanged from Deinterleave², with the IO monoid
        let y = fr.name("y");
        let dl = deinterleave(t, var(&y), &mut fr, &leaf_ignore_id, &combine_io);
        out.defs.push(def("deinterleave", lam(pvar(&y), dl)));
        // Wrap⁴ (Fig. 10)
        out.defs.push(def(WRAPPER, wrapper_fig10(&out, &mut fr, true)));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        stated(src, &real_ty(&cvar()), &io(&cvar()))
    }


    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        graph(m, "backprop")
    }
}

/// Stated types of the Fig. 10-shaped stages (`bp` is what an output cotangent maps to).
pub fn stated(src: &Source, real: &Type, bp: &Type) -> Vec<(String, Type)> {
    let (s, t) = (src.input_type, src.output_type);
    vec![
        main_type(src, real, true),
        ("interleave".into(), Type::fun(s.clone(), m_ty(Type::Tuple(vec![dtype(s, real, true), Type::fun(iarray_ty(), s.clone())])))),
        ("deinterleave".into(), Type::fun(dtype(t, real, true), Type::Tuple(vec![t.clone(), Type::lin(t.clone(), bp.clone())]))),
        grad_type(src),
    ]
}

// ---------------------------------------------------------------------------------------------
// Runtime: `Staged c = (Array dR, Array (dR ⊸ (Staged c → IO ()), dR))`

#[derive(Debug, Default)]
pub struct ArrStaged {
    /// The collector (§9); empty once it is dropped (§10.1).
    pub c: RefCell<Vec<f64>>,
    /// The staging array: None is SAlloc's zero backpropagator with cotangent 0.
    pub m: RefCell<Vec<Option<(Value, f64)>>>,
    pub with_collector: bool,
}

impl ExtValue for ArrStaged {
    fn type_name(&self) -> &'static str {
        "Staged"
    }
    fn show(&self) -> String {
        let m: Vec<String> = self
            .m
            .borrow()
            .iter()
            .take(32)
            .map(|c| c.as_ref().map_or("·".to_string(), |(_, a)| crate::value::show_real(*a)))
            .collect();
        if self.with_collector {
            let c: Vec<String> = self.c.borrow().iter().take(32).map(|x| crate::value::show_real(*x)).collect();
            format!("([{}], [{}])", c.join(", "), m.join(", "))
        } else {
            format!("[{}]", m.join(", "))
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

pub fn arr<'v>(v: &'v Value, span: Span) -> Result<&'v ArrStaged, RunError> {
    v.ext::<ArrStaged>().ok_or_else(|| err(span, format!("expected a Staged array, got {v}")))
}

fn want_len(v: &Value, span: Span) -> Result<usize, RunError> {
    let n = want_int(v, span, "SAlloc")?;
    usize::try_from(n).map_err(|_| err(span, format!("SAlloc: negative size {n}")))
}

/// SAlloc i_inp i_out = alloc i_inp 0 >>= λc. alloc i_out (linλz. λ_. return (), 0) >>= λm. return (c, m)
fn b_salloc2(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let (ni, no) = (want_len(&args[0], span)?, want_len(&args[1], span)?);
    m.tick((ni + no) as u64 + 1)?;
    m.alloc(1)?;
    Ok(Value::Ext(Rc::new(ArrStaged { c: RefCell::new(vec![0.0; ni]), m: RefCell::new(vec![None; no]), with_collector: true })))
}

fn b_salloc1(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let no = want_len(&args[0], span)?;
    m.tick(no as u64 + 1)?;
    m.alloc(1)?;
    Ok(Value::Ext(Rc::new(ArrStaged { c: RefCell::new(vec![]), m: RefCell::new(vec![None; no]), with_collector: false })))
}

/// SCall (i, f) a (c, m) = modify i (λ(_, a'). (f, a + a')) m
fn b_scall(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let s = arr(&args[2], span)?;
    let x = want_real(&args[1], span, "SCall")?;
    let (i, f) = want_pair(&args[0], span, "SCall")?;
    let i = want_int(&i, span, "SCall")?;
    {
        let mut cells = s.m.borrow_mut();
        let cell = cells.get_mut(i as usize).ok_or_else(|| err(span, format!("SCall: ID {i} outside the staging array")))?;
        let prev = cell.as_ref().map_or(0.0, |(_, a)| *a);
        *cell = Some((f, prev + x));
    }
    m.tick(1)?;
    record_edge(m, i, x);
    Ok(Value::Unit)
}

/// SOneHot i a (c, m) = modify i (λa'. a + a') c
fn b_onehot(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    m.count("backprop_calls", 1);
    let s = arr(&args[2], span)?;
    let x = want_real(&args[1], span, "SOneHot")?;
    let i = want_int(&args[0], span, "SOneHot")?;
    {
        let mut c = s.c.borrow_mut();
        let cell = c.get_mut(i as usize).ok_or_else(|| err(span, format!("SOneHot: ID {i} outside the collector")))?;
        *cell += x;
    }
    m.tick(1)?;
    Ok(Value::Unit)
}

/// SResolve i_out (c, m) = loop (i_out − 1) >> freeze c
///   where loop i = get i m >>= λ(f, a). f a (c, m) >> loop (i − 1)
/// (§10.1: without the collector, freeze the cotangents of the staging array instead)
fn b_sresolve(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let sv = args[1].clone();
    let s = arr(&sv, span)?;
    let n = want_int(&args[0], span, "SResolve")?;
    if m.tracing() {
        let mut rows: Vec<(String, f64)> = s.c.borrow().iter().take(64).enumerate().map(|(k, x)| (format!("c[{k}]"), *x)).collect();
        rows.extend(s.m.borrow().iter().take(64).enumerate().filter_map(|(k, c)| c.as_ref().map(|(_, x)| (format!("m[{k}]"), *x))));
        trace_start(m, rows);
    }
    let mut i = n - 1;
    while i >= 0 {
        m.tick(1)?;
        let cell = s.m.borrow().get(i as usize).cloned().flatten();
        if let Some((f, a)) = cell {
            record_resolved(m, i, a);
            rt(m).current = Some(i);
            let u = m.apply(f, Value::Real(a))?;
            m.apply(u, sv.clone())?;
            rt(m).current = None;
            if m.tracing() {
                let mut rows: Vec<(String, f64)> = s.c.borrow().iter().take(64).enumerate().map(|(k, x)| (format!("c[{k}]"), *x)).collect();
                rows.extend(s.m.borrow().iter().take(64).enumerate().filter_map(|(k, c)| c.as_ref().map(|(_, x)| (format!("m[{k}]"), *x))));
                let note = format!("resolve ID {i}: call its backpropagator with {}", crate::value::show_real(a));
                trace_resolve(m, i, a, note, rows);
            }
        }
        i -= 1;
    }
    let frozen = if s.with_collector {
        s.c.borrow().clone()
    } else {
        s.m.borrow().iter().map(|c| c.as_ref().map_or(0.0, |(_, a)| *a)).collect()
    };
    m.tick(frozen.len() as u64)?;
    Ok(iarr(frozen))
}

/// Stated types of the stages whose output backpropagators map into `Staged c → IO ()`.
pub fn stated_io(src: &Source, real: &Type) -> Vec<(String, Type)> {
    stated(src, real, &io(&cvar()))
}

/// Renders staging-array cells (`·` for an untouched cell).
pub fn arr_cells(cells: impl Iterator<Item = Option<f64>>) -> String {
    let v: Vec<String> = cells.take(32).map(|c| c.map_or("·".to_string(), crate::value::show_real)).collect();
    format!("[{}]", v.join(", "))
}
