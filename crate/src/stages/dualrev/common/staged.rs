//! The Staged values several stages share: Fig. 8's `(c, Map Z (backpropagator, dR))` (the staged
//! and Cayley stages), and Fig. 10's arrays `(Array dR, Array (backpropagator, dR))` with the
//! builtins over them (the mutable stage, and without the collector §10.1's).

use super::*;
use crate::diag::Span;
use crate::interp::{Builtin, Machine, RunError};
use crate::ir::*;
use crate::value::{ExtValue, Value};
use crate::kit::pmap::PMap;
use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

// ---------------------------------------------------------------------------------------------
// Fig. 8: `Staged c = (c, Map Z (dR ⊸ Staged c, dR))`

/// `Staged c = (c, Map Z (dR ⊸ Staged c, dR))`, the map persistent (`kit::pmap`).
#[derive(Clone, Debug)]
pub struct StagedV {
    pub c: Value,
    pub m: PMap<i64, (Value, f64)>,
}

impl ExtValue for StagedV {
    fn type_name(&self) -> &'static str {
        "Staged"
    }
    fn show(&self) -> String {
        let entries: Vec<String> = self.m.iter().map(|(k, (_, a))| format!("{k} ↦ {}", crate::value::show_real(*a))).collect();
        format!("({}, {{{}}})", self.c, entries.join(", "))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

pub fn staged_of(v: &Value, span: Span) -> Result<&StagedV, RunError> {
    v.ext::<StagedV>().ok_or_else(|| err(span, format!("expected a Staged value, got {v}")))
}

/// A Staged value taken by value: its parts cloned and the value let go, so that where nothing else
/// held it its cotangent is held once again, by the result, and can be added into in place.
pub fn owned_staged(v: Value, span: Span) -> Result<StagedV, RunError> {
    let s = staged_of(&v, span)?.clone();
    drop(v);
    Ok(s)
}

/// `0 : c`, the input with its reals zeroed (O(size of the input)).
pub fn zero_c(m: &mut Machine, span: Span) -> Result<Value, RunError> {
    let r = rt(m);
    let (z, n) = (r.zero.clone().ok_or_else(|| err(span, "no input zero (run through the stage)"))?, r.zero_size);
    m.tick(n)?;
    m.count("zero_leaves", n);
    Ok(z)
}

pub fn staged_value(c: Value, m: PMap<i64, (Value, f64)>) -> Value {
    Value::Ext(Rc::new(StagedV { c, m }))
}

/// Trace rows of a Staged value: its collector's reals, then its staged cotangents.
pub fn staged_rows(s: &StagedV) -> Vec<(String, f64)> {
    let mut rows = collector_rows(&s.c);
    rows.extend(s.m.iter().take(64).map(|(k, (_, x))| (format!("m[{k}]"), *x)));
    rows
}

// ---------------------------------------------------------------------------------------------
// Fig. 10: `Staged c = (Array dR, Array (dR ⊸ (Staged c → IO ()), dR))`

/// The builtins of §9 (`with_collector`) and §10.1 (without).
pub fn array_staged_builtins(with_collector: bool) -> Vec<Builtin> {
    let c = tv(1);
    let st = staged_ty(c.clone());
    let bp = Type::lin(Type::Real, io_ty(&c));
    let mut v = common_builtins();
    v.extend(array_builtins());
    v.push(Builtin {
        name: "SCall",
        scheme: scheme(&[1], Type::fun(Type::tup(vec![Type::Int, bp.clone()]), Type::lin(Type::Real, io_ty(&c)))),
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

/// Trace rows of the arrays: the collector's cells, then the staged cotangents.
fn arr_rows(s: &ArrStaged) -> Vec<(String, f64)> {
    let mut rows: Vec<(String, f64)> = s.c.borrow().iter().take(64).enumerate().map(|(k, x)| (format!("c[{k}]"), *x)).collect();
    rows.extend(s.m.borrow().iter().take(64).enumerate().filter_map(|(k, c)| c.as_ref().map(|(_, x)| (format!("m[{k}]"), *x))));
    rows
}

fn want_len(v: &Value, span: Span) -> Result<usize, RunError> {
    let n = want_int(v, span, "SAlloc")?;
    usize::try_from(n).map_err(|_| err(span, format!("SAlloc: negative size {n}")))
}

/// SAlloc i_inp i_out = alloc i_inp 0 >>= λc. alloc i_out (linλz. λ_. return (), 0) >>= λm. return (c, m)
fn b_salloc2(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let (ni, no) = (want_len(&args[0], span)?, want_len(&args[1], span)?);
    m.tick((ni + no) as u64 + 1)?;
    m.alloc(1)?;
    Ok(Value::Ext(Rc::new(ArrStaged { c: RefCell::new(vec![0.0; ni]), m: RefCell::new(vec![None; no]), with_collector: true })))
}

fn b_salloc1(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let no = want_len(&args[0], span)?;
    m.tick(no as u64 + 1)?;
    m.alloc(1)?;
    Ok(Value::Ext(Rc::new(ArrStaged { c: RefCell::new(vec![]), m: RefCell::new(vec![None; no]), with_collector: false })))
}

/// SCall (i, f) a (c, m) = modify i (λ(_, a'). (f, a + a')) m
fn b_scall(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
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
fn b_onehot(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
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
fn b_sresolve(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let sv = args[1].clone();
    let s = arr(&sv, span)?;
    let n = want_int(&args[0], span, "SResolve")?;
    if m.tracing() {
        trace_start(m, arr_rows(s));
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
                let note = format!("resolve ID {i}: call its backpropagator with {}", crate::value::show_real(a));
                trace_resolve(m, i, a, note, arr_rows(s));
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
