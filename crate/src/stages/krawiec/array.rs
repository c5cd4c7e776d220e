//! `krawiec/array`: Krawiec et al. §7.3. The same monadic translation and wrapper as
//! `krawiec/monadic`, but eval uses its DeltaMap linearly, so the map becomes one mutable array
//! indexed by DeltaId, sized by the last id runDelta allocated: addDelta, lookup and delete are O(1).
//! (The monad's state was already a growable array of bindings: M runs in direct style.)

use crate::kit::delta::{delta_arg, delta_type, int_arg, real_arg, STATE_ROWS};
use crate::kit::delta::drev::m_type;
use super::common::eval::{eval_loop, graph_of_state, map_type, record_eval, Adjoints};
use crate::kit::delta::graph::Visits;
use super::common::monad::{b_run_delta_last, monad_builtins};
use super::common::wrapper::{ra_stated_types, ra_transform, require_ra_to_r};
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Graph, Machine, RunError};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};
use crate::value::{show_real, ExtValue, Value};
use std::any::Any;
use std::cell::RefCell;
use std::collections::BTreeSet;
use rustc_hash::{FxHashSet as HashSet};
use std::rc::Rc;

pub struct Array;

static INFO: StageInfo = StageInfo {
    id: "krawiec/array",
    paper: "Krawiec et al. 2022",
    section: "§7.3",
    title: "eval over a mutable array indexed by DeltaId",
    explanation: "Nothing changes in the translation or the wrapper: eval takes its DeltaMap and returns it, using it \
linearly (DeltaMap ⊸ DeltaMap), so nobody can observe the old map and it can be updated in place. The persistent \
map of krawiec/monadic becomes a mutable array of cotangents indexed by DeltaId, zero-initialised by emptyMap with \
the size runDelta reports as the last DeltaId it allocated (the little point whose code the paper omits): addDelta \
is an in-place add, lookup an index, delete a reset. The array also keeps a touched bit per id, so that a binding \
whose id was never used is still skipped exactly as the map's Nothing is (rather than evaluated with 0). This is \
tape-based backpropagation; the paper notes it essentially reconstructs Kmett, Pearlmutter and Siskind's ad library.",
    complexity: "forward pass O(T); eval O(T): O(1) per node, a constant factor of the primal.",
    accepts: "the whole scalar language inside main; main itself must have type R^a → R (Fig. 11)",
};

struct Inner {
    adj: Vec<f64>,
    /// `Just` (present) versus `Nothing`: eval skips a Let whose id was never added to.
    touched: Vec<bool>,
    /// The present ids, kept only while a trace wants the array's rows.
    live: Option<BTreeSet<i64>>,
}

/// `type DeltaMap = Array R -- Mutable` (§7.3).
pub struct ArrayMap(RefCell<Inner>);

impl std::fmt::Debug for ArrayMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.show())
    }
}

impl ExtValue for ArrayMap {
    fn type_name(&self) -> &'static str {
        "DeltaMap"
    }
    fn show(&self) -> String {
        let i = self.0.borrow();
        let items: Vec<String> =
            (0..i.adj.len()).filter(|&k| i.touched[k]).take(12).map(|k| format!("{k} ↦ {}", show_real(i.adj[k]))).collect();
        format!("[{}] (array of {})", items.join(", "), i.adj.len())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

// add and take inlined into eval's loop, the traced rows and the error out of line (issue 13: as
// calls they were ~40 instructions each, twice a round's nodes' share of an eval)
impl Adjoints for Inner {
    #[inline]
    fn add(&mut self, id: i64, x: f64) -> Result<(), String> {
        let Some((a, t)) = usize::try_from(id).ok().and_then(|k| Some((self.adj.get_mut(k)?, self.touched.get_mut(k)?))) else {
            return Err(self.outside(id));
        };
        *a += x;
        *t = true;
        if self.live.is_some() {
            self.live_add(id);
        }
        Ok(())
    }
    #[inline]
    fn take(&mut self, id: i64) -> Result<Option<f64>, String> {
        let Some((a, t)) = usize::try_from(id).ok().and_then(|k| Some((self.adj.get_mut(k)?, self.touched.get_mut(k)?))) else {
            return Err(self.outside(id));
        };
        if !*t {
            return Ok(None);
        }
        let v = std::mem::take(a);
        *t = false;
        if self.live.is_some() {
            self.live_remove(id);
        }
        Ok(Some(v))
    }
    fn rows(&self) -> Vec<(String, f64)> {
        match &self.live {
            Some(l) => l.iter().take(STATE_ROWS).map(|&k| (k.to_string(), self.adj[k as usize])).collect(),
            None => vec![],
        }
    }
    fn stop_rows(&mut self) {
        self.live = None;
    }
}

impl Inner {
    #[cold]
    #[inline(never)]
    fn outside(&self, id: i64) -> String {
        format!("DeltaId {id} is outside the array of {} (emptyMap was given too small a size)", self.adj.len())
    }
    #[inline(never)]
    fn live_add(&mut self, id: i64) {
        if let Some(l) = &mut self.live {
            l.insert(id);
        }
    }
    #[inline(never)]
    fn live_remove(&mut self, id: i64) {
        if let Some(l) = &mut self.live {
            l.remove(&id);
        }
    }
}

fn array_arg(v: &Value, span: Span, what: &str) -> Result<Rc<dyn ExtValue>, RunError> {
    match v {
        Value::Ext(e) if e.as_any().is::<ArrayMap>() => Ok(e.clone()),
        other => Err(RunError::runtime(span, format!("{what} expects a DeltaMap array, got {other}"))),
    }
}

fn inner(e: &Rc<dyn ExtValue>) -> &RefCell<Inner> {
    &e.as_any().downcast_ref::<ArrayMap>().expect("checked").0
}

/// `emptyMap n`: a zero array for ids 0..=n.
fn b_empty(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let n = int_arg(&args[0], span, "emptyMap")?.max(0) as usize + 1;
    m.alloc(1)?;
    m.tick(n as u64)?;
    let live = m.tracing().then(BTreeSet::new);
    Ok(Value::Ext(Rc::new(ArrayMap(RefCell::new(Inner { adj: vec![0.0; n], touched: vec![false; n], live })))))
}

/// `eval x u arr`: Fig. 10's eval, updating the array in place and returning it.
fn b_eval(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let x = real_arg(&args[0], span, "eval")?;
    let root = delta_arg(&args[1], span, "eval")?;
    let arr = array_arg(&args[2], span, "eval")?;
    let (mut visits, mut skipped) = (Visits::of(m), HashSet::default());
    let mut res = {
        let mut um = inner(&arr).borrow_mut();
        eval_loop(m, x, &root, &mut *um, &mut visits, &mut skipped, span)
    };
    record_eval(m, &root, visits, skipped, &mut res);
    res?;
    Ok(Value::Ext(arr))
}

fn b_lookup_or_zero(_m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let id = int_arg(&args[0], span, "lookupOrZero")?;
    let arr = array_arg(&args[1], span, "lookupOrZero")?;
    let i = inner(&arr).borrow();
    Ok(Value::Real(if id >= 0 && (id as usize) < i.adj.len() { i.adj[id as usize] } else { 0.0 }))
}

impl Stage for Array {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        // runDelta : DeltaId → M (a × Delta) → a × Delta × DeltaId (the last id allocated).
        let a = Type::Var(0);
        let pair_ty = Type::tup(vec![a.clone(), delta_type()]);
        let scheme = Scheme {
            vars: vec![0],
            ty: Type::fun(Type::Int, Type::fun(m_type(pair_ty), Type::tup(vec![a, delta_type(), Type::Int]))),
        };
        let mut bs = monad_builtins(scheme, b_run_delta_last);
        let (d, um, r, z) = (delta_type(), map_type(), Type::Real, Type::Int);
        bs.push(Builtin {
            name: "eval",
            scheme: Scheme::mono(Type::fun(r.clone(), Type::fun(d, Type::lin(um.clone(), um.clone())))),
            arity: 3,
            lazy_last: false,
            run: b_eval,
        });
        bs.push(Builtin { name: "emptyMap", scheme: Scheme::mono(Type::fun(z.clone(), um.clone())), arity: 1, lazy_last: false, run: b_empty });
        bs.push(Builtin {
            name: "lookupOrZero",
            scheme: Scheme::mono(Type::fun(z, Type::fun(um, r))),
            arity: 2,
            lazy_last: false,
            run: b_lookup_or_zero,
        });
        bs
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        require_ra_to_r(src, "krawiec/array", "Fig. 11 (R{e})")
    }

    fn round_calls(&self) -> Option<&'static crate::interp::RoundCalls> {
        Some(&super::common::monad::ROUND_CALLS)
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        ra_transform(src, true)
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        ra_stated_types(src)
    }

    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        graph_of_state(m)
    }
}
