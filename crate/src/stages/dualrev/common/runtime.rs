//! The runtime every stage's builtins share: the per-run state (ID counter, counters, graph edges,
//! resolve trace), the builtins of the ID monad, dense cotangent operations on values, the frozen
//! collector of §9 (`IArray dR`), and the backpropagator graph drawn after a run.

use super::*;
use crate::diag::Span;
use crate::interp::{Builtin, Graph, GraphEdge, GraphNode, Machine, RunError, TraceStep, Shown};
use crate::ir::*;
use crate::value::Value;
use std::collections::BTreeMap;

/// Per-run state of the chain's runtimes.
#[derive(Default)]
pub struct Rt {
    /// The next ID (`genID`).
    pub next_id: i64,
    /// `0 : c`: the input with its reals zeroed.
    pub zero: Option<Value>,
    /// `size` of `zero`, the cost of each `0 : c` (counted once here rather than per use).
    pub zero_size: u64,
    pub n_inputs: i64,
    /// The ID whose backpropagator the resolve is running (None: the wrapper's direct calls).
    pub current: Option<i64>,
    pub edges: BTreeMap<(i64, i64), f64>,
    /// How many staged calls each edge stands for (`x + x` stages two calls of x's backpropagator).
    pub edge_calls: BTreeMap<(i64, i64), u64>,
    /// Per ID: the cotangent it was resolved with, and how often it was called by the resolve (0:
    /// never). Indexed by ID, as IDs count up from 0: the resolve records one per step. Two flat
    /// arrays (12 bytes an ID rather than 16).
    resolved_cot: Vec<f64>,
    resolved_visits: Vec<u32>,
    /// Kind of node per ID where the stage knows it (Contribs).
    pub kinds: BTreeMap<i64, String>,
    /// Per ID: the source span of the operation that generated it (`genID` located by the
    /// translation), for the graph's nodes and so the trace's steps.
    /// Indexed by ID (`Span::NONE` where not located): `genID` records one per ID.
    pub spans: Vec<Span>,
    /// An untraced run (`prepare`: the page's stages not shown, `cotangent bench`) keeps of the graph
    /// only its shape, which IDs were resolved and how often, not their cotangents and spans: the
    /// graph's node counts are the same, its labels come when the stage is run again shown (12 of
    /// the ~50 bytes a tape keeps per ID; issue 13's bytes per op).
    pub lean: bool,
}

impl Rt {
    /// The cotangent (None in a `lean` run) and visits of a resolved ID.
    pub fn resolved(&self, id: i64) -> Option<(Option<f64>, u64)> {
        let i = usize::try_from(id).ok()?;
        let visits = *self.resolved_visits.get(i)?;
        (visits > 0).then(|| (self.resolved_cot.get(i).copied(), visits as u64))
    }
}

/// The cell of `id` in a table indexed by ID, grown as needed (None for a negative ID).
#[inline]
fn cell<T: Clone>(v: &mut Vec<T>, id: i64, empty: T) -> Option<&mut T> {
    let i = usize::try_from(id).ok()?;
    if v.len() == i {
        // the common case: IDs count up, one new cell at a time
        v.push(empty);
    } else if v.len() < i {
        v.resize(i + 1, empty);
    }
    v.get_mut(i)
}

pub fn rt<'a>(m: &'a mut Machine<'_>) -> &'a mut Rt {
    m.state::<Rt>()
}

pub fn scheme(vars: &[u32], ty: Type) -> Scheme {
    Scheme { vars: vars.to_vec(), ty }
}
pub fn tv(i: u32) -> Type {
    Type::Var(i)
}

pub fn err(span: Span, msg: impl Into<String>) -> RunError {
    RunError::runtime(span, msg)
}

pub fn want_real(v: &Value, span: Span, what: &str) -> Result<f64, RunError> {
    v.as_real().ok_or_else(|| err(span, format!("{what}: expected a real, got {v}")))
}
pub fn want_int(v: &Value, span: Span, what: &str) -> Result<i64, RunError> {
    v.as_int().ok_or_else(|| err(span, format!("{what}: expected an integer, got {v}")))
}
pub fn want_pair(v: &Value, span: Span, what: &str) -> Result<(Value, Value), RunError> {
    match v {
        Value::Tuple(vs) if vs.len() == 2 => Ok((vs[0].clone(), vs[1].clone())),
        _ => Err(err(span, format!("{what}: expected a pair, got {v}"))),
    }
}

/// Number of leaves (the cost of a dense cotangent operation).
pub fn size(v: &Value) -> u64 {
    let mut n = 0;
    v.for_each_leaf(&mut |_| n += 1);
    n.max(1)
}

/// `a + b` on cotangents of the same input (reals added; integers, booleans and tags from `a`): the
/// reference the tests compare the in-place `cot_add_assign` with.
#[cfg(test)]
pub fn cot_add(a: &Value, b: &Value) -> Value {
    let mut a = a.clone();
    cot_add_assign(&mut a, b);
    a
}

/// `a := a + b` (`cot_add` in place): `a`'s tuples and arrays are written where nothing else holds
/// them and copied once where shared, so a chain of additions into a fresh cotangent allocates
/// nothing (issue 13: the dense cotangents of dualrev's naive and staged stages, O(n) a `+`, were
/// rebuilt whole each time). Returns `size(a)`, the count the paper charges for the addition, when
/// `a` and `b` have the same shape throughout (then also `size(b)`); None where they differ.
pub fn cot_add_assign(a: &mut Value, b: &Value) -> Option<u64> {
    add_leaves(a, b).map(|n| n.max(1))
}

/// `cot_add_assign`'s walk: the leaves of `a` as `Value::for_each_leaf` counts them.
fn add_leaves(a: &mut Value, b: &Value) -> Option<u64> {
    use std::rc::Rc;
    match (a, b) {
        (Value::Real(x), Value::Real(y)) => {
            *x += y;
            Some(1)
        }
        (Value::Tuple(xs), Value::Tuple(ys)) | (Value::Array(xs), Value::Array(ys)) if xs.len() == ys.len() => {
            let mut n = Some(0u64);
            for (x, y) in Rc::make_mut(xs).iter_mut().zip(ys.iter()) {
                // a real item in the loop itself: a dense cotangent is mostly reals
                let k = match (x, y) {
                    (Value::Real(x), Value::Real(y)) => {
                        *x += y;
                        Some(1)
                    }
                    (x, y) => add_leaves(x, y),
                };
                n = n.zip(k).map(|(n, k)| n + k);
            }
            n
        }
        (Value::Inl(x), Value::Inl(y)) | (Value::Inr(x), Value::Inr(y)) => add_leaves(Rc::make_mut(x), y),
        // shapes that differ keep `a` (as `cot_add` does)
        (Value::Real(_) | Value::Tuple(_) | Value::Array(_) | Value::Inl(_) | Value::Inr(_), _) => None,
        (_, Value::Real(_) | Value::Tuple(_) | Value::Array(_) | Value::Inl(_) | Value::Inr(_)) => None,
        // `a`'s other leaves (integers, booleans, unit) are kept, one leaf each
        _ => Some(1),
    }
}

pub fn zero_of(v: &Value) -> Value {
    v.with_reals(&mut std::iter::repeat(0.0))
}

/// The builtins every monadic stage uses: `genID`, `getID`, `runIDs`, `counted`.
pub fn common_builtins() -> Vec<Builtin> {
    vec![
        Builtin { name: "genID", scheme: Scheme::mono(m_ty(Type::Int)), arity: 0, lazy_last: false, run: b_gen_id },
        Builtin { name: "getID", scheme: Scheme::mono(m_ty(Type::Int)), arity: 0, lazy_last: false, run: b_get_id },
        Builtin { name: "runIDs", scheme: scheme(&[1], Type::fun(m_ty(tv(1)), tv(1))), arity: 1, lazy_last: true, run: b_run_ids },
        counted_builtin(),
    ]
}

pub fn counted_builtin() -> Builtin {
    Builtin { name: "counted", scheme: scheme(&[1], Type::fun(tv(1), tv(1))), arity: 1, lazy_last: false, run: b_counted }
}

/// `zeroOf : a → a`: the cotangent zero shaped like a value (O(size)).
pub fn zero_of_builtin() -> Builtin {
    Builtin { name: "zeroOf", scheme: scheme(&[1], Type::fun(tv(1), tv(1))), arity: 1, lazy_last: false, run: b_zero_of }
}

/// A fresh ID, remembering the span of the operation that made it (`genID`, the tape's `record`).
/// Always inlined: it is most of the tapes' `record`, whose call it would otherwise double.
#[inline(always)]
pub fn new_id(m: &mut Machine, span: Span) -> Result<i64, RunError> {
    m.tick(1)?;
    m.count("ids_allocated", 1);
    Ok(rt(m).fresh(span))
}

impl Rt {
    /// `genID`'s ID, its span remembered (its step and count are the caller's: `new_id`, or the
    /// tape's `record`, which holds this state and the tape's at once).
    #[inline(always)]
    pub fn fresh(&mut self, span: Span) -> i64 {
        let i = self.next_id;
        self.next_id += 1;
        if !span.is_none() && !self.lean {
            if let Some(c) = cell(&mut self.spans, i, Span::NONE) {
                *c = span;
            }
        }
        i
    }
    /// `fresh` once for each of a round's records (`spans`, in order), the IDs consecutive: the
    /// first of them (a compiled round's records, written at once: `interp/round.rs`).
    pub fn fresh_round(&mut self, spans: &[Span]) -> i64 {
        let first = self.next_id;
        self.next_id += spans.len() as i64;
        if !self.lean {
            for (i, &span) in (first..).zip(spans).filter(|(_, s)| !s.is_none()) {
                if let Some(c) = cell(&mut self.spans, i, Span::NONE) {
                    *c = span;
                }
            }
        }
        first
    }
}

fn b_gen_id(m: &mut Machine, _: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    Ok(Value::Int(new_id(m, span)?))
}
fn b_get_id(m: &mut Machine, _: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    Ok(Value::Int(rt(m).next_id))
}
fn b_run_ids(m: &mut Machine, args: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    rt(m).next_id = 0;
    let thunk = args.pop().unwrap_or(Value::Unit);
    m.apply(thunk, Value::Unit)
}
fn b_counted(m: &mut Machine, args: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    m.count("backprop_calls", 1);
    Ok(args.pop().unwrap_or(Value::Unit))
}
fn b_zero_of(m: &mut Machine, args: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    // a real's zero without walking it (`zeroOf x` per input scalar in the naive wrapper)
    if let Value::Real(_) = args[0] {
        m.tick(1)?;
        return Ok(Value::Real(0.0));
    }
    m.tick(size(&args[0]))?;
    Ok(zero_of(&args[0]))
}

/// Before a run: the zero of c and the number of input scalars.
pub fn prepare(m: &mut Machine, input: &Value) {
    let lean = !m.tracing();
    let r = rt(m);
    let zero = zero_of(input);
    r.zero_size = size(&zero);
    r.zero = Some(zero);
    r.n_inputs = input.real_leaves().len() as i64;
    r.lean = lean;
}

/// The chain's `before_run`: `prepare` for the run's input.
pub fn before_run(m: &mut Machine, cx: &crate::stage::RunCtx) {
    prepare(m, cx.input);
}

/// Runs the wrapper after `prepare` (for a machine of its own, as the naive stage's display graph uses).
pub fn run_wrapper(m: &mut Machine, input: &Value, seed: &Value) -> Result<(Value, Value), RunError> {
    prepare(m, input);
    // (untraced, but run for its graph's values)
    rt(m).lean = false;
    crate::stage::run_wrapper(m, input, seed)
}

/// Records an edge `current → target` (the resolve of `current` staged a call of `target`).
pub fn record_edge(m: &mut Machine, target: i64, weight: f64) {
    let r = rt(m);
    let from = r.current.unwrap_or(-1);
    *r.edges.entry((from, target)).or_insert(0.0) += weight;
    *r.edge_calls.entry((from, target)).or_insert(0) += 1;
}

pub fn record_resolved(m: &mut Machine, id: i64, a: f64) {
    let r = rt(m);
    if r.lean {
        if let Some(v) = cell(&mut r.resolved_visits, id, 0) {
            *v = v.saturating_add(1);
        }
    } else if let (Some(c), Some(v)) = (cell(&mut r.resolved_cot, id, 0.0), cell(&mut r.resolved_visits, id, 0)) {
        *c += a;
        *v = v.saturating_add(1);
    }
}

/// The resolved cotangents and visits taken out of the runtime for one resolve's loop, so each ID
/// records without looking its state up (`record_resolved` in a loop: a third of the tape's
/// resolve; issue 13). `put` hands them back (on every path: the graph reads them).
pub struct Resolved {
    cot: Vec<f64>,
    visits: Vec<u32>,
    /// `Rt::lean`: visits only.
    lean: bool,
}

impl Resolved {
    /// The resolved record so far, with room for IDs below `n`.
    pub fn take(m: &mut Machine, n: usize) -> Resolved {
        let r = rt(m);
        let (mut cot, mut visits) = (std::mem::take(&mut r.resolved_cot), std::mem::take(&mut r.resolved_visits));
        if !r.lean {
            cot.reserve(n.saturating_sub(cot.len()));
        }
        visits.reserve(n.saturating_sub(visits.len()));
        Resolved { cot, visits, lean: r.lean }
    }
    /// An empty record (a unit test's resolve, without a machine).
    #[cfg(test)]
    pub fn new(lean: bool) -> Resolved {
        Resolved { cot: vec![], visits: vec![], lean }
    }
    /// Room for IDs below `n` in place (their records unvisited), so `add` finds each one's cell
    /// without growing (the resolve's tight loop; a record's length is not observable).
    pub fn cover(&mut self, n: usize) {
        if !self.lean && self.cot.len() < n {
            self.cot.resize(n, 0.0);
        }
        if self.visits.len() < n {
            self.visits.resize(n, 0);
        }
    }
    /// The visits, in a lean run (no cotangent recorded): a sweep counts its IDs' visits there
    /// itself (`tape::sweep`, issue 13 session 37), `add` without its checks per ID.
    pub fn lean_visits(&mut self) -> Option<&mut [u32]> {
        self.lean.then_some(&mut self.visits[..])
    }
    /// `record_resolved`'s record of ID `id` resolved with `a`.
    #[inline]
    pub fn add(&mut self, id: i64, a: f64) {
        if self.lean {
            if let Some(v) = self.visits.get_mut(id as usize) {
                *v = v.saturating_add(1);
            } else if let Some(v) = cell(&mut self.visits, id, 0) {
                *v = v.saturating_add(1);
            }
            return;
        }
        if let (Some(c), Some(v)) = (self.cot.get_mut(id as usize), self.visits.get_mut(id as usize)) {
            *c += a;
            *v = v.saturating_add(1);
            return;
        }
        self.add_new(id, a)
    }
    #[cold]
    fn add_new(&mut self, id: i64, a: f64) {
        if let (Some(c), Some(v)) = (cell(&mut self.cot, id, 0.0), cell(&mut self.visits, id, 0)) {
            *c += a;
            *v = v.saturating_add(1);
        }
    }
    pub fn put(self, m: &mut Machine) {
        let r = rt(m);
        r.resolved_cot = self.cot;
        r.resolved_visits = self.visits;
    }
}

/// Drawing limit for graphs.
pub const GRAPH_LIMIT: i64 = 2_000;

/// The backpropagator graph: one node per ID, edges from a backpropagator to the ones it staged
/// calls of (weighted by the cotangent passed where known), and a node for the wrapper's direct
/// call of the output backpropagator(s).
pub fn graph(m: &mut Machine, ctor: &str) -> Option<Graph> {
    let r = rt(m);
    let n = r.next_id;
    if n == 0 {
        return None;
    }
    let shown = n.min(GRAPH_LIMIT);
    let mut indeg: BTreeMap<i64, u32> = BTreeMap::new();
    for &(_, to) in r.edges.keys() {
        *indeg.entry(to).or_insert(0) += 1;
    }
    // The wrapper calls the output's backpropagators directly (§6.1): when exactly one
    // non-input ID was never resolved and nothing points to it, that is the output, and the direct
    // call's edges start there; otherwise they start at a node standing for the wrapper.
    let direct: Vec<i64> = r.edges.keys().filter(|(f, _)| *f < 0).map(|(_, t)| *t).collect();
    let sources: Vec<i64> =
        (r.n_inputs..n).filter(|i| r.resolved(*i).is_none() && !indeg.contains_key(i) && !direct.contains(i)).collect();
    let out_id: Option<i64> = if !direct.is_empty() && sources.len() == 1 { Some(sources[0]) } else { None };
    let mut nodes: Vec<GraphNode> = (0..shown)
        .map(|i| {
            let input = i < r.n_inputs;
            let (cot, visits) = r.resolved(i).map_or((None, None), |(a, v)| (a, Some(v)));
            let kind = r.kinds.get(&i).cloned().unwrap_or_else(|| if input { "input".into() } else { ctor.to_string() });
            let label = if input {
                format!("input {i}")
            } else if Some(i) == out_id {
                format!("{kind} (output, called directly)")
            } else {
                kind.clone()
            };
            GraphNode {
                id: i as u64,
                ctor: kind,
                label,
                delta_id: Some(i),
                value: cot.map(Shown::from),
                shared: indeg.get(&i).copied().unwrap_or(0) > 1,
                visits: visits.or(if Some(i) == out_id { Some(1) } else { None }),
                group: None,
                span: usize::try_from(i).ok().and_then(|i| r.spans.get(i)).copied().filter(|s| !s.is_none()),
            }
        })
        .collect();
    let wrapper_node = n as u64;
    if !direct.is_empty() && out_id.is_none() {
        nodes.push(GraphNode { id: wrapper_node, ctor: "output".into(), label: "output cotangent".into(), ..GraphNode::default() });
    }
    let from_of = |f: i64| if f >= 0 { f as u64 } else { out_id.map_or(wrapper_node, |o| o as u64) };
    let edges = r
        .edges
        .iter()
        .filter(|((f, t), _)| *f < shown && *t < shown)
        .map(|(&(f, t), w)| GraphEdge { from: from_of(f), to: t as u64, label: crate::value::show_real(*w) })
        .collect();
    Some(Graph { nodes, edges, groups: vec![], omitted: (n - shown) as u64 })
}

/// A resolve trace step.
pub fn trace_resolve(m: &mut Machine, id: i64, a: f64, note: String, state: Vec<(String, f64)>) {
    if m.tracing() {
        m.trace(TraceStep { kind: "resolve".into(), node: Some(id as u64), span: None, factor: Some(a.into()), note, state: Shown::rows(state), ..TraceStep::default() });
    }
}

/// The Staged object (or arrays) handed to SResolve, before its first step.
pub fn trace_start(m: &mut Machine, state: Vec<(String, f64)>) {
    if m.tracing() {
        m.trace(TraceStep { kind: "staged".into(), note: "the staged state handed to SResolve".into(), state: Shown::rows(state), ..TraceStep::default() });
    }
}

/// Rows `c[k] -> v` for the real leaves of a dense collector.
pub fn collector_rows(c: &Value) -> Vec<(String, f64)> {
    c.real_leaves().into_iter().enumerate().map(|(k, v)| (format!("c[{k}]"), v)).collect()
}


// ---------------------------------------------------------------------------------------------
// Arrays (§9): the frozen collector `IArray dR` and its `@`; `runIO` (unsafePerformIO)

/// A frozen array of cotangents (`IArray dR`): its own reals (the tape's and contrib's cells, taken
/// at their resolve), or a view of a staging array no longer written (§9's unsafeFreeze is the
/// mutable array itself): dualrev/parallel's job 0, whose cells the graph also reads, so a copy
/// would be 8 more bytes an ID at the run's peak (issue 13, bytes per op).
pub enum IArr {
    Reals(Vec<f64>),
    /// The staging value, the reader of its cell i (0 where none was received) and its length.
    View(std::rc::Rc<dyn crate::value::ExtValue>, fn(&dyn crate::value::ExtValue, usize) -> Option<f64>, usize),
}

impl IArr {
    pub fn get(&self, i: usize) -> Option<f64> {
        match self {
            IArr::Reals(v) => v.get(i).copied(),
            IArr::View(s, read, n) => (i < *n).then(|| read(&**s, i)).flatten(),
        }
    }
    pub fn len(&self) -> usize {
        match self {
            IArr::Reals(v) => v.len(),
            IArr::View(_, _, n) => *n,
        }
    }
}

impl std::fmt::Debug for IArr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IArr({})", crate::value::ExtValue::show(self))
    }
}

impl crate::value::ExtValue for IArr {
    fn type_name(&self) -> &'static str {
        "IArray"
    }
    fn show(&self) -> String {
        let xs: Vec<String> = (0..self.len().min(32)).filter_map(|i| self.get(i)).map(crate::value::show_real).collect();
        format!("[{}{}]", xs.join(", "), if self.len() > 32 { ", …" } else { "" })
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

pub fn iarray_ty() -> Type {
    Type::con("IArray", vec![Type::Real])
}

/// `at : IArray dR → Z → dR` (the paper's `a @ i`) and `runIO : M a → a` (unsafePerformIO).
pub fn array_builtins() -> Vec<Builtin> {
    vec![
        Builtin { name: "at", scheme: Scheme::mono(Type::fun(iarray_ty(), Type::fun(Type::Int, Type::Real))), arity: 2, lazy_last: false, run: b_at },
        Builtin { name: "runIO", scheme: scheme(&[1], Type::fun(m_ty(tv(1)), tv(1))), arity: 1, lazy_last: false, run: b_run_io },
    ]
}

fn b_at(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    m.tick(1)?;
    let a = args[0].ext::<IArr>().ok_or_else(|| err(span, format!("@: expected an array, got {}", args[0])))?;
    let i = want_int(&args[1], span, "@")?;
    usize::try_from(i).ok().and_then(|i| a.get(i)).map(Value::Real).ok_or_else(|| err(span, format!("@: index {i} out of bounds")))
}

fn b_run_io(_: &mut Machine, args: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    Ok(args.pop().unwrap_or(Value::Unit))
}

pub fn iarr(v: Vec<f64>) -> Value {
    Value::Ext(std::rc::Rc::new(IArr::Reals(v)))
}

/// Renders staging-array cells (`·` for an untouched cell).
pub fn arr_cells(cells: impl Iterator<Item = Option<f64>>) -> String {
    let v: Vec<String> = cells.take(32).map(|c| c.map_or("·".to_string(), crate::value::show_real)).collect();
    format!("[{}]", v.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    fn cot(reals: &[f64]) -> Value {
        // (r0, (inl r1, [r2, …]), 7): a tuple, a tag, an array and an integer leaf
        let arr = Value::Array(reals[2..].iter().map(|&r| Value::Real(r)).collect());
        Value::tuple(vec![Value::Real(reals[0]), Value::pair(Value::Inl(Rc::new(Value::Real(reals[1]))), arr), Value::Int(7)])
    }

    #[test]
    fn a_cotangent_added_in_place_leaves_its_other_holders_alone() {
        let shared = cot(&[1.0, 2.0, 3.0, 4.0]);
        let mut a = shared.clone();
        let b = cot(&[10.0, 20.0, 30.0, 40.0]);
        assert_eq!(cot_add_assign(&mut a, &b), Some(size(&shared)));
        assert_eq!(a.to_string(), "(11.0, (inl 22.0, [33.0, 44.0]), 7)");
        assert_eq!(shared.to_string(), "(1.0, (inl 2.0, [3.0, 4.0]), 7)");
        assert!(a.same(&cot_add(&shared, &b)) && size(&a) == 5);
        // a fresh cotangent (held once) is written where it is: no tuple is copied
        let Value::Tuple(before) = &a else { panic!() };
        let before = Rc::as_ptr(before);
        cot_add_assign(&mut a, &b);
        let Value::Tuple(after) = &a else { panic!() };
        assert_eq!(Rc::as_ptr(after), before);
        assert_eq!(a.to_string(), "(21.0, (inl 42.0, [63.0, 84.0]), 7)");
    }

    #[test]
    fn cotangents_of_different_shapes_keep_the_first_and_leave_the_count_to_the_caller() {
        let mut a = cot(&[1.0, 2.0, 3.0]);
        let b = Value::tuple(vec![Value::Real(1.0), Value::Inr(Rc::new(Value::Real(5.0))), Value::Int(7)]);
        assert_eq!(cot_add_assign(&mut a, &b), None);
        assert_eq!(a.to_string(), "(2.0, (inl 2.0, [3.0]), 7)");
        assert!(a.same(&cot_add(&cot(&[1.0, 2.0, 3.0]), &b)));
        // an empty product counts as one leaf, as `size` does
        assert_eq!(cot_add_assign(&mut Value::Tuple(Rc::new([])), &Value::Tuple(Rc::new([]))), Some(1));
    }
}
