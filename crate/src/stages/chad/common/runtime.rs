//! The runtime of the linear types and environment vectors. One set of builtins, three
//! representations chosen per run (the program text does not change between them, §4.1, §5):
//! - dense (Fig. 4): `τ ×_L σ = τ × σ`, `τ ⊔_L σ = 1 ⊔ (τ ⊔ σ)`, `EV Γ` a left-nested tuple;
//! - sparse (§4.1, Fig. 6): `τ ×_L σ = 1 ⊔ (τ × σ)`, `EV Γ` a persistent tree map `EMap Γ`;
//! - the accumulation monad over a persistent map (§4.2) or a mutable stack of cells (§5, Table 2),
//!   in `monad.rs`.
//!
//! Values: a linear pair is a `Tuple` (dense) or `Inl ()`/`Inr (tuple)` (sparse); a linear sum is
//! `Inl ()` (zero), `Inr (Inl x)` (`linl x`) or `Inr (Inr y)`. At the top of a cotangent `Inl ()` is
//! the explicit zero; directly under a sum's `Inr` the `Inl`/`Inr` are its tags, and under a sparse
//! pair's `Inr` there is a tuple, so `+` tells them apart by position. Functions on values recurse
//! only in the depth of a type (bounded by the parser's nesting budget).

use super::bags::as_bag;
use super::ops::{lookup, Gamma, Op};
use super::source::CT;
use crate::diag::Span;
use crate::interp::{BuiltinFn, Machine, RunError, Shown, TraceStep};
use crate::value::{take_item, unshared, ExtValue, Value};
use crate::kit::pmap::PMap;
use std::rc::Rc;

/// How linear types and the environment are represented in this run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Repr {
    /// Fig. 4: dense tuples.
    #[default]
    Dense,
    /// §4.1: sparse pairs and `EMap`.
    Sparse,
}

/// The accumulator of the monadic stages.
#[derive(Clone, Debug, Default)]
pub(super) enum Acc {
    #[default]
    None,
    /// §4.2: `EVM Γ τ = EMap Γ → τ × EMap Γ`.
    Map(PMap<usize, Value>),
    /// §5: `EArr Γ`, a stack of cells.
    Cells(Vec<Value>),
}

/// The per-run state: the representation, and the accumulator with the names of its cells.
#[derive(Debug, Default)]
pub struct Rt {
    pub repr: Repr,
    /// Whether the accumulation monad uses mutable cells (§5) rather than a persistent map (§4.2).
    pub mutable: bool,
    pub(super) acc: Acc,
    pub(super) names: Vec<String>,
    /// The accumulators of the enclosing runs, set aside while a closed function's backpropagator
    /// runs its own (App. C).
    pub(super) saved: Vec<(Acc, Vec<String>)>,
    /// §8.1's switch: Bags take a BArray constructor, into which BOne's are added in place.
    pub barray: bool,
    /// BOne's the backward pass made (§7's index rule, `fromList`), and those a BArray took in.
    pub made: u64,
    pub absorbed: u64,
    /// BArrays made (§8.1).
    pub barrays: u64,
    /// What the run keeps for the stage's graph (`chad/arrays`'s own run only).
    pub record: Option<Box<super::graph::Recorded>>,
    /// Γ's of the dense vectors a traced run built, one per length (`named`).
    pub(super) dense_names: Vec<Gamma>,
    /// The backpropagator tree of a traced run (`bp_tree`).
    pub bp: Option<Box<super::bp_tree::Tree>>,
}

/// Sets up a run: the representation and the accumulator's kind.
pub fn set_up(m: &mut Machine, repr: Repr, mutable: bool) {
    *m.state::<Rt>() = Rt { repr, mutable, ..Rt::default() };
}

/// `EMap Γ` (Fig. 6): a persistent tree map from positions in Γ to cotangents; absent means 0.
/// It carries Γ (shared, O(1) to keep) only to show itself.
#[derive(Debug, Clone)]
pub struct EMap(pub PMap<usize, Value>, pub Gamma);

impl ExtValue for EMap {
    fn type_name(&self) -> &'static str {
        "EMap"
    }
    fn show(&self) -> String {
        let items: Vec<String> = self.0.iter().map(|(k, v)| format!("{}: {}", self.1.name(*k), show_ct(v))).collect();
        format!("{{{}}}", items.join(", "))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// An invocation log `List (D[τ]1 × D[σ]2)` (§9), the cotangent of a function in naive higher-order
/// CHAD: 0 is `[]`, + is `++` (linear time, footnote 25).
#[derive(Debug, Clone, Default)]
pub struct Log(pub Rc<Vec<(Value, Value)>>);

impl ExtValue for Log {
    fn type_name(&self) -> &'static str {
        "Log"
    }
    fn show(&self) -> String {
        let items: Vec<String> = self.0.iter().map(|(x, d)| format!("⟨{x}, {}⟩", show_ct(d))).collect();
        format!("[{}]", items.join(", "))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

fn log(entries: Vec<(Value, Value)>) -> Value {
    Value::Ext(Rc::new(Log(Rc::new(entries))))
}

/// ⌈log2(n + 1)⌉: the steps of one operation on a balanced tree of n entries.
pub(super) fn log_steps(n: usize) -> u64 {
    (usize::BITS - n.leading_zeros()) as u64
}

/// A tuple as the IR builds one (`build::tuple`): `()` for none, the value itself for one.
pub(super) fn ir_tuple(mut vs: Vec<Value>) -> Value {
    if vs.len() == 1 {
        vs.pop().unwrap_or(Value::Unit)
    } else {
        Value::tuple(vs)
    }
}

pub(super) fn internal(span: Span, what: &str) -> RunError {
    RunError::runtime(span, format!("internal error in the CHAD runtime: {what}"))
}

pub(super) fn unit() -> Value {
    Value::Unit
}
fn zero_tag() -> Value {
    Value::Inl(Rc::new(Value::Unit))
}
fn is_zero_tag(v: &Value) -> bool {
    matches!(v, Value::Inl(u) if matches!(**u, Value::Unit))
}

/// `0_τ`: dense builds the whole tree (Fig. 4); sparse is one node (§4.1).
pub fn zero(m: &mut Machine, ct: &CT, repr: Repr) -> Value {
    let (v, nodes) = zero_nodes(ct, repr);
    m.count("zero_nodes", nodes);
    v
}

fn zero_nodes(ct: &CT, repr: Repr) -> (Value, u64) {
    match (ct, repr) {
        (CT::R, _) => (Value::Real(0.0), 1),
        (CT::One, _) => (unit(), 1),
        (CT::Prod(ts), Repr::Dense) => {
            let (vs, n): (Vec<Value>, Vec<u64>) = ts.iter().map(|t| zero_nodes(t, repr)).unzip();
            (Value::tuple(vs), 1 + n.iter().sum::<u64>())
        }
        (CT::Prod(_) | CT::Sum(..), _) => (zero_tag(), 1),
        (CT::Log(..), _) => (log(vec![]), 1),
        (CT::Bag(..), _) => (super::bags::empty(), 1),
    }
}

/// `a + b` on every linear type and on environment vectors, visiting only where both are present
/// (§4.3, Fig. 5); each visited node counts once.
pub fn plus(m: &mut Machine, a: Value, b: Value) -> Result<Value, RunError> {
    m.count("plus_visits", 1);
    m.tick(1)?;
    let span = m.current_span();
    Ok(match (a, b) {
        (Value::Real(x), Value::Real(y)) => {
            m.real_op();
            Value::Real(x + y)
        }
        (Value::Unit, Value::Unit) => unit(),
        (a, b) if is_zero_tag(&a) => b,
        (a, b) if is_zero_tag(&b) => a,
        (Value::Tuple(mut xs), Value::Tuple(mut ys)) if xs.len() == ys.len() => {
            // Added into `a`'s tuple where nothing else holds it, `b`'s items taken where nothing else
            // holds `b` (issue 13: Fig. 4's dense environment vectors, a left-nested tuple of |Γ|
            // cells, were rebuilt whole at every `+`); the same visits in the same order either way.
            match Rc::get_mut(&mut xs) {
                Some(out) => {
                    for (i, x) in out.iter_mut().enumerate() {
                        *x = plus(m, std::mem::replace(x, Value::Unit), take_item(&mut ys, i))?;
                    }
                    Value::Tuple(xs)
                }
                None => {
                    let mut out = Vec::with_capacity(xs.len());
                    for (i, x) in xs.iter().enumerate() {
                        out.push(plus(m, x.clone(), take_item(&mut ys, i))?);
                    }
                    Value::tuple(out)
                }
            }
        }
        // (each part unwrapped where nothing else holds it, so that a tuple under it is added into in place)
        (Value::Inr(x), Value::Inr(y)) => Value::Inr(Rc::new(match (unshared(x), unshared(y)) {
            (x @ Value::Tuple(_), y @ Value::Tuple(_)) => plus(m, x, y)?,
            // a sum's tags: Fig. 4's `+` on `τ ⊔_L σ` (the note's O3: re-wrapped in linl/linr)
            (Value::Inl(p), Value::Inl(q)) => Value::Inl(Rc::new(plus(m, unshared(p), unshared(q))?)),
            (Value::Inr(p), Value::Inr(q)) => Value::Inr(Rc::new(plus(m, unshared(p), unshared(q))?)),
            _ => return Err(internal(span, "a sum tag mismatch in + (linl added to linr)")),
        })),
        // §7: Bags (BPlus, or §8.1's BArray), each Rc let go of first so a BArray can grow in place
        (a, b) if as_bag(&a).is_some() && as_bag(&b).is_some() => {
            let (x, y) = (as_bag(&a).cloned(), as_bag(&b).cloned());
            drop((a, b));
            match (x, y) {
                (Some(x), Some(y)) => super::bags::plus_bags(m, x, y)?,
                _ => return Err(internal(span, "+ on Bags")),
            }
        }
        (Value::Ext(x), Value::Ext(y)) if x.as_any().is::<Log>() => match (x.as_any().downcast_ref::<Log>(), y.as_any().downcast_ref::<Log>()) {
            // `++`: O(length), footnote 25
            (Some(p), Some(q)) => {
                m.tick((p.0.len() + q.0.len()) as u64)?;
                m.alloc((p.0.len() + q.0.len()) as u64)?;
                log(p.0.iter().chain(q.0.iter()).cloned().collect())
            }
            _ => return Err(internal(span, "+ on a log and a value that is not one")),
        },
        (Value::Ext(x), Value::Ext(y)) => match (x.as_any().downcast_ref::<EMap>().cloned(), y.as_any().downcast_ref::<EMap>().cloned()) {
            // each map's value let go of first: the larger map, where nothing else holds it, is
            // inserted into in place, not copied along every path (issue 13, session 46)
            (Some(p), Some(q)) => {
                drop((x, y));
                Value::Ext(Rc::new(union(m, p, q)?))
            }
            _ => return Err(internal(span, "+ on values that are not environment maps")),
        },
        (a, b) => return Err(internal(span, &format!("+ on {a} and {b}"))),
    })
}

/// Fig. 6's `union`, with `+` on common keys: the smaller map inserted into the larger, costed
/// m·⌈log2(n/m + 1)⌉ steps for sizes m ≤ n (Brown & Tarjan).
fn union(m: &mut Machine, p: EMap, q: EMap) -> Result<EMap, RunError> {
    let names = if p.1.len() >= q.1.len() { p.1.clone() } else { q.1.clone() };
    let (small, large) = if p.0.size() <= q.0.size() { (p, q) } else { (q, p) };
    let (sm, n) = (small.0.size(), large.0.size());
    if sm > 0 {
        m.count("map_log_steps", sm as u64 * log_steps(n / sm));
    }
    let mut out = large.0;
    for (k, v) in small.0.iter() {
        match out.get_mut(k) {
            // the old value taken out, so that a tuple in it no one else holds is added into
            Some(w) => {
                let a = std::mem::replace(w, Value::Unit);
                *w = plus(m, a, v.clone())?;
            }
            None => out.insert_mut(*k, v.clone()),
        }
    }
    m.alloc(sm as u64)?;
    Ok(EMap(out, names))
}

/// A cotangent as traces show it: zeros as `0`, linear pairs as `⟨⟨a, b⟩⟩`, sum cotangents with their tag.
pub fn show_ct(v: &Value) -> String {
    match v {
        Value::Real(x) => crate::value::show_real(*x),
        Value::Unit => "⟨⟩".into(),
        v if is_zero_tag(v) => "0".into(),
        Value::Tuple(vs) => format!("⟨⟨{}⟩⟩", vs.iter().map(show_ct).collect::<Vec<_>>().join(", ")),
        Value::Inr(x) => match &**x {
            Value::Tuple(_) => show_ct(x),
            Value::Inl(y) => format!("linl {}", show_ct(y)),
            Value::Inr(y) => format!("linr {}", show_ct(y)),
            other => other.to_string(),
        },
        other => other.to_string(),
    }
}

pub(super) fn shown(v: &Value) -> Shown {
    match v {
        Value::Real(x) => (*x).into(),
        v => Shown::text(show_ct(v)),
    }
}

pub(super) fn this_op(m: &Machine) -> Result<std::sync::Arc<Op>, RunError> {
    lookup(m.builtin_name()).ok_or_else(|| internal(m.current_span(), &format!("unknown builtin `{}`", m.builtin_name())))
}

fn repr(m: &mut Machine) -> Repr {
    m.state::<Rt>().repr
}

pub(super) fn arg(args: &mut Vec<Value>) -> Value {
    args.pop().unwrap_or(Value::Unit)
}

// ---- Fig. 3's linear API -------------------------------------------------------------------

fn b_zero(m: &mut Machine, _: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::Zero(ct) = &*this_op(m)? else { return Err(internal(span, "0")) };
    let r = repr(m);
    Ok(zero(m, ct, r))
}

/// `0_{EV Γ}`: a tuple of |Γ| zeros (Fig. 4) or the empty map (Fig. 6).
fn b_zero_env(m: &mut Machine, _: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::ZeroEnv { ctx } = &*this_op(m)? else { return Err(internal(span, "0_EV")) };
    let v = match repr(m) {
        Repr::Dense => dense_env(m, ctx, None)?,
        Repr::Sparse => {
            m.count("zero_nodes", 1);
            Value::Ext(Rc::new(EMap(PMap::new(), ctx.clone())))
        }
    };
    named(m, ctx);
    ev_event(m, "zero", || format!("0 = {}", show_ev(&v)), span, Some(&v));
    Ok(v)
}

/// `EV Γ` as Fig. 4's left-nested tuple `(((), v1), v2)…`, zeros but for `hot`.
fn dense_env(m: &mut Machine, g: &Gamma, hot: Option<(usize, Value)>) -> Result<Value, RunError> {
    // O(|Γ|) work and allocation, against the run's budgets
    m.tick(g.len() as u64)?;
    m.alloc(g.len() as u64)?;
    let mut acc = unit();
    for (i, ct) in g.cts().enumerate() {
        let v = match &hot {
            Some((j, v)) if *j == i => v.clone(),
            _ => zero(m, ct, Repr::Dense),
        };
        acc = Value::pair(acc, v);
    }
    Ok(acc)
}

/// `one_{x:τ∈Γ} v`: Fig. 4's one-hot tuple (|Γ| cells) or Fig. 6's `modify_x (v +) empty` (one).
fn b_one_hot(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::OneHot { pos, ctx } = &*this_op(m)? else { return Err(internal(span, "one")) };
    let v = arg(args);
    let note = if m.tracing() {
        super::bp_tree::write(m, &ctx.name(*pos));
        format!("one_{} {}", ctx.name(*pos), show_ct(&v))
    } else {
        String::new()
    };
    let r = match repr(m) {
        Repr::Dense => {
            m.count("onehot_cells", ctx.len() as u64);
            dense_env(m, ctx, Some((*pos, v)))?
        }
        Repr::Sparse => {
            m.count("onehot_cells", 1);
            m.count("map_log_steps", 1);
            Value::Ext(Rc::new(EMap(PMap::new().insert(*pos, v), ctx.clone())))
        }
    };
    named(m, ctx);
    ev_event(m, "one", || format!("{note} = {}", show_ev(&r)), span, Some(&r));
    Ok(r)
}

/// `split_{Γ,τ}`: the identity on Fig. 4's tuples, Fig. 6's `pop` on maps (⌈log2 n⌉ steps).
fn b_split(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::Split { ctx, ct, .. } = &*this_op(m)? else { return Err(internal(span, "split")) };
    let ev = arg(args);
    let before = if m.tracing() { show_ev(&ev) } else { String::new() };
    let r = b_split_on(m, ev, ctx.len(), ct, span)?;
    named(m, ctx);
    if let Value::Tuple(vs) = &r {
        ev_event(m, "split", || format!("split {before} = ({}, {})", show_ev(&vs[0]), show_ct(&vs[1])), span, Some(&vs[0]));
    }
    Ok(r)
}

/// The split that ends a lambda body's backpropagator (§9): one run of it.
fn b_split_lam(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::SplitLam { ctx, ct, whole } = &*this_op(m)? else { return Err(internal(span, "splitλ")) };
    m.count("body_backprops", 1);
    let ev = arg(args);
    let before = if m.tracing() { show_ev(&ev) } else { String::new() };
    let r = b_split_on(m, ev, ctx.len(), ct, span)?;
    named(m, ctx);
    if let Value::Tuple(vs) = &r {
        let x = whole.name(ctx.len());
        ev_event(m, "split", || format!("splitλ {x}: {before} = ({}, {})", show_ev(&vs[0]), show_ct(&vs[1])), span, Some(&vs[0]));
    }
    Ok(r)
}

/// `[⟨x, d⟩]`
fn b_log_one(_: &mut Machine, args: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    let Value::Tuple(xd) = arg(args) else { return Ok(log(vec![])) };
    Ok(log(vec![(xd[0].clone(), xd[1].clone())]))
}

/// `fold l with e, acc → acc + f e from z`: each logged invocation's context cotangent, summed.
fn b_fold_log(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let f = arg(args);
    let mut acc = arg(args);
    let l = arg(args);
    let Value::Ext(e) = &l else { return Err(internal(span, "foldLog of a non-log")) };
    let Some(entries) = e.as_any().downcast_ref::<Log>().map(|l| l.0.clone()) else { return Err(internal(span, "foldLog of a non-log")) };
    ev_event(m, "fold", || format!("fold over the log of {} invocation(s)", entries.len()), span, None);
    for (x, d) in entries.iter() {
        let v = m.apply(f.clone(), Value::pair(x.clone(), d.clone()))?;
        acc = plus(m, acc, v)?;
    }
    Ok(acc)
}

fn b_split_on(m: &mut Machine, ev: Value, pos: usize, ct: &CT, span: Span) -> Result<Value, RunError> {
    match ev {
        Value::Tuple(ref vs) if vs.len() == 2 => Ok(ev),
        Value::Ext(e) => {
            let Some(mut map) = e.as_any().downcast_ref::<EMap>().cloned() else { return Err(internal(span, "split of a non-map")) };
            // the value let go of first: a map no one else holds loses `pos` in place, not by a copied path
            drop(e);
            m.count("map_log_steps", log_steps(map.0.size()));
            let v = match map.0.get(&pos) {
                Some(v) => v.clone(),
                None => zero(m, ct, Repr::Sparse),
            };
            map.0.remove_mut(&pos);
            Ok(Value::pair(Value::Ext(Rc::new(map)), v))
        }
        other => Err(internal(span, &format!("split of {other}"))),
    }
}

/// `+_{EV Γ}`: in program text `plus` only ever adds environment vectors (Fig. 2); cotangents are
/// added inside the runtime.
fn b_plus(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let b = arg(args);
    let a = arg(args);
    let note = if m.tracing() { format!("{} + {}", show_ev(&a), show_ev(&b)) } else { String::new() };
    let r = plus(m, a, b)?;
    ev_event(m, "plus", || format!("{note} = {}", show_ev(&r)), span, Some(&r));
    Ok(r)
}

/// An environment vector as the note writes it: Fig. 4's left-nested tuple flat, `⟨1, 0, 1⟩`; a
/// map as `{x: 1, z: 1}`.
pub fn show_ev(v: &Value) -> String {
    let mut items = vec![];
    let mut cur = v;
    loop {
        match cur {
            Value::Unit => break,
            Value::Tuple(vs) if vs.len() == 2 => {
                items.push(show_ct(&vs[1]));
                cur = &vs[0];
            }
            Value::Ext(e) => return e.show(),
            other => return show_ct(other),
        }
    }
    items.reverse();
    format!("⟨{}⟩", items.join(", "))
}

/// A step of the environment-vector stages' trace (Fig. 2's one-hots, +, split); with §4.1's
/// sparse map `ev` after it, its entries as the step's state, each cotangent as a tree.
/// A traced run of Fig. 4's dense vectors keeps the last Γ of each length it built one for: `+`
/// adds two vectors of one Γ, and its rows are named by it (an O(1) clone, only when tracing).
fn named(m: &mut Machine, g: &Gamma) {
    if m.tracing() && m.state::<Rt>().repr == Repr::Dense {
        let rt = m.state::<Rt>();
        match rt.dense_names.iter_mut().find(|x| x.len() == g.len()) {
            Some(x) => *x = g.clone(),
            None => rt.dense_names.push(g.clone()),
        }
    }
}

/// `note` is made only when the run is traced (showing a sparse map is O(its size) per event).
fn ev_event(m: &mut Machine, kind: &str, note: impl FnOnce() -> String, span: Span, ev: Option<&Value>) {
    if m.tracing() {
        let mut state = vec![];
        // Fig. 4's left-nested tuple: each variable's cotangent, named by Γ
        if let Some(v @ Value::Tuple(_)) = ev {
            let mut items = vec![];
            let mut cur = v;
            while let Value::Tuple(vs) = cur {
                if vs.len() != 2 {
                    break;
                }
                items.push(&vs[1]);
                cur = &vs[0];
            }
            items.reverse();
            if let Some(g) = m.state::<Rt>().dense_names.iter().find(|g| g.len() == items.len()).cloned() {
                for (i, v) in items.into_iter().enumerate() {
                    super::ct_tree::ct_rows(&g.name(i), v, &mut state);
                }
            }
        }
        if let Some(Value::Ext(e)) = ev {
            if let Some(map) = e.as_any().downcast_ref::<EMap>() {
                for (k, v) in map.0.iter() {
                    let name = map.1.name(*k);
                    super::ct_tree::ct_rows(&name, v, &mut state);
                }
            }
        }
        let node = super::bp_tree::current(m);
        m.trace(TraceStep { kind: kind.into(), node, span: Some(span), factor: None, note: note(), state, ..TraceStep::default() });
    }
}

/// `⟨⟨t1, …, tn⟩⟩`: a tuple (Fig. 4) or `inr` of one (§4.1).
fn b_ltuple(m: &mut Machine, args: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    let t = arg(args);
    m.alloc(1)?;
    Ok(match repr(m) {
        Repr::Dense => t,
        Repr::Sparse => Value::Inr(Rc::new(t)),
    })
}

/// `lfst`, `lsnd`: a projection, or 0 of the component for the sparse zero (§4.1).
fn b_lproj(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::LProj(i, ts) = &*this_op(m)? else { return Err(internal(span, "lproj")) };
    let d = arg(args);
    let r = repr(m);
    let component = |vs: &[Value]| vs.get(*i).cloned().ok_or_else(|| internal(span, "lproj past the end of a pair"));
    match &d {
        v if is_zero_tag(v) => ts.get(*i).map(|t| zero(m, t, r)).ok_or_else(|| internal(span, "lproj past the end of a pair")),
        Value::Tuple(vs) => component(vs),
        Value::Inr(x) => match &**x {
            Value::Tuple(vs) => component(vs),
            _ => Err(internal(span, "lproj of a non-pair")),
        },
        _ => Err(internal(span, "lproj of a non-pair")),
    }
}

/// `linl x = inr (inl x)`, `linr y = inr (inr y)` (Fig. 4).
fn b_linj(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::LInj(right, ..) = &*this_op(m)? else { return Err(internal(span, "linj")) };
    let x = Rc::new(arg(args));
    m.alloc(2)?;
    Ok(Value::Inr(Rc::new(if *right { Value::Inr(x) } else { Value::Inl(x) })))
}

/// `lcastl`, `lcastr` (Fig. 4): 0 from 0, the payload of the matching tag, an error on the other.
fn b_lcast(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::LCast(right, ab) = &*this_op(m)? else { return Err(internal(span, "lcast")) };
    let (a, b) = (&ab.0, &ab.1);
    let d = arg(args);
    let r = repr(m);
    match (&d, right) {
        (v, _) if is_zero_tag(v) => Ok(zero(m, if *right { b } else { a }, r)),
        (Value::Inr(x), false) => match &**x {
            Value::Inl(p) => Ok((**p).clone()),
            _ => Err(internal(span, "a sum tag mismatch in lcastl")),
        },
        (Value::Inr(x), true) => match &**x {
            Value::Inr(p) => Ok((**p).clone()),
            _ => Err(internal(span, "a sum tag mismatch in lcastr")),
        },
        _ => Err(internal(span, "lcast of a non-sum")),
    }
}

/// The output cotangent given in the output's shape, as `D[T]2` (the wrapper's `d`).
fn b_seed(m: &mut Machine, args: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    let v = arg(args);
    let r = repr(m);
    to_lin(m, &v, r)
}

/// (Recursive in the depth of the value's type only; an array's elements are a loop.)
fn to_lin(m: &mut Machine, v: &Value, r: Repr) -> Result<Value, RunError> {
    Ok(match v {
        Value::Real(x) => Value::Real(*x),
        Value::Tuple(vs) => {
            let t = Value::tuple(vs.iter().map(|v| to_lin(m, v, r)).collect::<Result<_, _>>()?);
            if r == Repr::Sparse {
                Value::Inr(Rc::new(t))
            } else {
                t
            }
        }
        Value::Inl(x) => Value::Inr(Rc::new(Value::Inl(Rc::new(to_lin(m, x, r)?)))),
        Value::Inr(x) => Value::Inr(Rc::new(Value::Inr(Rc::new(to_lin(m, x, r)?)))),
        // §7: the output cotangent of an array as a Bag of its elements' (not counted as made)
        // (an empty array that keeps its element's shape, value.rs, is one too)
        v if v.elems().is_some() => {
            let ds = v.elems().unwrap_or(&[]).iter().map(|x| to_lin(m, x, r)).collect::<Result<_, _>>()?;
            super::bags::from_cells(m, ds, false)?
        }
        _ => unit(),
    })
}

/// The final environment vector as the tuple of the inputs' cotangents (absent entries are 0).
fn b_env_tuple(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Op::EnvTuple(g) = &*this_op(m)? else { return Err(internal(span, "evTuple")) };
    let ev = arg(args);
    let mut out = vec![];
    match ev {
        Value::Ext(e) => {
            let Some(map) = e.as_any().downcast_ref::<EMap>() else { return Err(internal(span, "not a map")) };
            for (i, ct) in g.iter().enumerate() {
                out.push(match map.0.get(&i) {
                    Some(v) => v.clone(),
                    None => zero(m, ct, Repr::Sparse),
                });
            }
        }
        mut v => {
            // the left-nested tuple, read from the right
            for _ in 0..g.len() {
                let Value::Tuple(vs) = v else { return Err(internal(span, "evTuple of a non-tuple")) };
                if vs.len() != 2 {
                    return Err(internal(span, "evTuple of a tuple that is not an environment vector"));
                }
                out.push(vs[1].clone());
                v = vs[0].clone();
            }
            out.reverse();
        }
    }
    Ok(ir_tuple(out))
}

/// The gradient in the input's shape: the input `s` as the witness of shape, and the cotangents
/// (rebuilt in the pattern of main's parameter) read into it; zeros become zeros of that shape.
fn b_from_lin(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let g = arg(args);
    let s = arg(args);
    from_lin(m, &s, &g)?.ok_or_else(|| internal(span, &format!("the cotangent {} does not fit the input {s}", show_ct(&g))))
}

/// (Recursive in the depth of the input's type only; an array's elements are a loop.)
fn from_lin(m: &mut Machine, s: &Value, g: &Value) -> Result<Option<Value>, RunError> {
    Ok(Some(match (s, g) {
        (Value::Real(_), Value::Real(x)) => Value::Real(*x),
        (Value::Int(_) | Value::Bool(_) | Value::Unit, _) => s.clone(),
        (_, g) if is_zero_tag(g) => s.with_reals(&mut std::iter::repeat(0.0)),
        (Value::Tuple(ss), Value::Tuple(gs)) if ss.len() == gs.len() => {
            let mut out = Vec::with_capacity(ss.len());
            for (s, g) in ss.iter().zip(gs.iter()) {
                let Some(v) = from_lin(m, s, g)? else { return Ok(None) };
                out.push(v);
            }
            Value::tuple(out)
        }
        (Value::Tuple(_), Value::Inr(x)) => return from_lin(m, s, x),
        (Value::Inl(a), Value::Inr(x)) => match &**x {
            Value::Inl(c) => match from_lin(m, a, c)? {
                Some(v) => Value::Inl(Rc::new(v)),
                None => return Ok(None),
            },
            _ => return Ok(None),
        },
        (Value::Inr(a), Value::Inr(x)) => match &**x {
            Value::Inr(c) => match from_lin(m, a, c)? {
                Some(v) => Value::Inr(Rc::new(v)),
                None => return Ok(None),
            },
            _ => return Ok(None),
        },
        // §7: an input array's cotangent Bag, collected and scattered into its length
        (s, g) if s.elems().is_some() && as_bag(g).is_some() => {
            let (Some(ss), Some(b)) = (s.elems(), as_bag(g)) else { return Ok(None) };
            if let Some(r) = super::graph::recording(m) {
                r.input(b, ss.len());
            }
            let cells = super::bags::densify(m, b, ss.len())?;
            let mut out = Vec::with_capacity(ss.len());
            for (s, c) in ss.iter().zip(cells.iter()) {
                let Some(v) = from_lin(m, s, c)? else { return Ok(None) };
                out.push(v);
            }
            Value::Array(out.into())
        }
        _ => return Ok(None),
    }))
}

/// The implementation of each kind of type-indexed builtin: function, arity, lazy last argument.
pub fn implementation(op: &Op) -> (BuiltinFn, usize, bool) {
    match op {
        Op::Zero(_) => (b_zero, 0, false),
        Op::ZeroEnv { .. } => (b_zero_env, 0, false),
        Op::OneHot { .. } => (b_one_hot, 1, false),
        Op::Split { .. } => (b_split, 1, false),
        Op::SplitLam { .. } => (b_split_lam, 1, false),
        Op::LTuple(_) => (b_ltuple, 1, false),
        Op::LProj(..) => (b_lproj, 1, false),
        Op::LInj(..) => (b_linj, 1, false),
        Op::LCast(..) => (b_lcast, 1, false),
        Op::EnvTuple(_) => (b_env_tuple, 1, false),
        Op::OneM { .. } => (super::monad::b_one_m, 1, false),
        Op::Push { .. } => (super::monad::b_push, 0, false),
        Op::Pop { .. } => (super::monad::b_pop, 0, false),
        Op::Run(_) => (super::monad::b_run, 1, true),
        Op::RunOpen(_) => (super::monad::b_run_open, 0, false),
        Op::RunClose(_) => (super::monad::b_run_close, 1, false),
    }
}

/// The generic builtins every stage of the chain has: `plus` and `fromLin`.
pub fn generic_builtins() -> Vec<crate::interp::Builtin> {
    use crate::ir::{Scheme, Type};
    let (a, b) = (Type::Var(0), Type::Var(1));
    vec![
        crate::interp::Builtin {
            name: super::ops::PLUS,
            scheme: Scheme { vars: vec![0], ty: Type::fun(a.clone(), Type::fun(a.clone(), a.clone())) },
            arity: 2,
            lazy_last: false,
            run: b_plus,
        },
        crate::interp::Builtin {
            name: super::ops::FROM_LIN,
            scheme: Scheme { vars: vec![0, 1], ty: Type::fun(a.clone(), Type::fun(b, a.clone())) },
            arity: 2,
            lazy_last: false,
            run: b_from_lin,
        },
        crate::interp::Builtin {
            name: super::ops::LOG_ONE,
            scheme: Scheme { vars: vec![0, 1], ty: Type::fun(Type::tup(vec![a.clone(), Type::Var(1)]), Type::con("Log", vec![Type::Var(1)])) },
            arity: 1,
            lazy_last: false,
            run: b_log_one,
        },
        crate::interp::Builtin {
            name: super::ops::FOLD_LOG,
            scheme: Scheme {
                vars: vec![0, 1, 2],
                ty: Type::fun(
                    Type::con("Log", vec![Type::Var(1)]),
                    Type::fun(Type::Var(2), Type::fun(Type::fun(Type::tup(vec![a.clone(), Type::Var(1)]), Type::Var(2)), Type::Var(2))),
                ),
            },
            arity: 3,
            lazy_last: false,
            run: b_fold_log,
        },
        crate::interp::Builtin {
            name: super::ops::TO_LIN,
            scheme: Scheme { vars: vec![0, 1], ty: Type::fun(Type::Var(0), Type::Var(1)) },
            arity: 1,
            lazy_last: false,
            run: b_seed,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{Budget, Builtins};
    use crate::ir::Program;

    /// `EV Γ` as Fig. 4's left-nested pairs `((((), r0), r1), r2)`.
    fn env(reals: &[f64]) -> Value {
        reals.iter().fold(Value::Unit, |acc, &r| Value::pair(acc, Value::Real(r)))
    }

    fn pointer(v: &Value) -> *const Value {
        match v {
            Value::Tuple(vs) => vs.as_ptr(),
            _ => std::ptr::null(),
        }
    }

    #[test]
    fn a_dense_vector_held_once_is_added_into_in_place_and_a_shared_one_is_left_alone() {
        let program = Program::default();
        let mut m = Machine::new(&program, &Builtins::new(), Budget::default()).expect("a machine");
        // held once: the sum is written into the first vector's own pairs
        let a = env(&[1.0, 2.0, 3.0]);
        let at = pointer(&a);
        let r = plus(&mut m, a, env(&[10.0, 20.0, 30.0])).expect("plus");
        assert_eq!(r.to_string(), "((((), 11.0), 22.0), 33.0)");
        assert_eq!(pointer(&r), at);
        // shared: the other holder still sees its own values; the result is a new vector
        let shared = env(&[1.0, 2.0, 3.0]);
        let r = plus(&mut m, shared.clone(), env(&[10.0, 20.0, 30.0])).expect("plus");
        assert_eq!(r.to_string(), "((((), 11.0), 22.0), 33.0)");
        assert_eq!(shared.to_string(), "((((), 1.0), 2.0), 3.0)");
        assert_ne!(pointer(&r), pointer(&shared));
        // the right-hand vector shared: it is read, not taken
        let b = env(&[10.0, 20.0, 30.0]);
        let r = plus(&mut m, env(&[1.0, 2.0, 3.0]), b.clone()).expect("plus");
        assert_eq!(r.to_string(), "((((), 11.0), 22.0), 33.0)");
        assert_eq!(b.to_string(), "((((), 10.0), 20.0), 30.0)");
        // the same charge each way: 7 nodes visited (3 pairs, the unit, 3 reals) and 3 real additions, three times
        let cost = m.cost();
        assert_eq!(cost.counter("plus_visits"), 3 * 7);
        assert_eq!(cost.real_ops, 3 * 3);
    }
}
