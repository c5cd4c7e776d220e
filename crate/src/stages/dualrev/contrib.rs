//! `dualrev/contrib`: defunctionalised backpropagators, the Contrib lists that are this paper's
//! Delta DAG. Smeding & Vákár §10.2, Fig. 11. After §10.1 every backpropagator is either a no-op
//! (inputs, constants) or `linλz. SCall d1 (z · ∂1 op(x)(1)) ∘ … ∘ SCall dn (z · ∂n op(x)(1))`, so it is
//! described by data: `Contrib = [(R, (Z, Contrib))]`, the partials with the arguments' IDs and Contribs.

use super::common::*;
use crate::build::*;
use crate::deriv::Partial;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Graph, Machine, RoundArg, RoundCall, RoundCalls, RoundEdge, RoundItem, RoundNodeArrays, RoundNodes, RunError};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};
use crate::value::{ExtValue, Value};
use std::any::Any;
use std::cell::RefCell;
use std::collections::BTreeMap;
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


    fn round_calls(&self) -> Option<&'static RoundCalls> {
        Some(&ROUND_CALLS)
    }

    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        let cs = std::mem::take(m.state::<Contribs>());
        let r = rt(m);
        r.edges = drawn_edges(&cs, std::mem::take(&mut r.edges));
        *m.state::<Contribs>() = cs;
        graph(m, "Contrib")
    }
}

// ---------------------------------------------------------------------------------------------
// Runtime

/// `Contrib = [(R, (Z, Contrib))]`, flat (issue 13): every Contrib the run made, numbered in the
/// order made, its edges at `at[k]` in three parallel arrays (the partial, the argument's ID, the
/// argument's Contrib by number). A Contrib value names its number, so the DAG is the arrays, not
/// `Rc` nodes: one growing array per field instead of two allocations (node, edge list) per Contrib,
/// each in fixed chunks (`Chunked`: no doubling's overshoot),
/// and no drop walk at the end.
#[derive(Default)]
pub struct Contribs {
    /// Per Contrib: where its edges start; they end where the next Contrib's start (the last's at
    /// the arrays' end), as Contribs are appended in the order made: 4 bytes a Contrib, not a
    /// (start, count) pair of 8 (issue 13: bytes per op).
    starts: Chunked<u32>,
    /// Every Contrib's edges (`Edge`: the partial, the argument's ID and the argument's Contrib),
    /// one flat array (16 bytes an edge; IDs fit 32 bits, as the tape's do).
    edge: Chunked<Edge>,
    /// What the resolves did, in order, for the graph: (ID, its cell's Contrib), all of the
    /// Contrib's edges followed; then `stop`, the entry where a budget or a bad ID stopped the
    /// resolve (which ends the run), with how many were followed. The graph's edges are made from
    /// them when the graph is drawn, as the tape's are from the tape.
    resolves: Vec<(u32, u32)>,
    stop: Option<(u32, u32, u32)>,
    /// The first resolve's entries, read off its cells rather than logged (8 bytes an ID less at
    /// the run's peak; issue 13): it visits the IDs descending, and a resolved ID's cell keeps its
    /// Contrib, as every edge goes to a lower ID (an argument is made before its result). They
    /// come before `resolves`' in the resolves' order. A resolve that meets an edge to its own or
    /// a higher ID logs what it visited so far and goes on logging.
    first: Option<FirstResolve>,
}

/// A Contrib's edge: the partial, the argument's ID and the argument's Contrib (16 bytes; one
/// array of them rather than three, so a Contrib is pushed and an edge read in one place: the
/// compiled rounds' writes and the resolve's reads, issue 13 session 35).
type Edge = RoundEdge;

/// The IDs a first resolve visited: those in `lo..hi` whose cell in `cb` is not `EMPTY`, `count`
/// of them (`cb` is the staging array's, moved in once the resolve ends).
#[derive(Default)]
struct FirstResolve {
    cb: Vec<u32>,
    lo: usize,
    hi: usize,
    count: usize,
}

impl Contribs {
    /// The range of Contrib k's edges in the edge arrays (empty for an unknown k).
    fn range(&self, k: u32) -> std::ops::Range<usize> {
        let k = k as usize;
        match self.starts.get(k) {
            Some(&s) => s as usize..self.starts.get(k + 1).map_or(self.edge.len(), |&e| e as usize),
            None => 0..0,
        }
    }
    /// The edges (partial, argument ID, argument's Contrib) of Contrib k.
    fn edges(&self, k: u32) -> impl Iterator<Item = (f64, i64, u32)> + '_ {
        self.range(k).map_while(|e| self.edge.get(e).map(|e| (e.partial, e.arg as i64, e.child)))
    }
    /// How many entries the resolves have made.
    fn entries(&self) -> usize {
        self.first.as_ref().map_or(0, |f| f.count) + self.resolves.len() + self.stop.is_some() as usize
    }
    /// Appends a Contrib with edges (partial, _) of `es`, argument IDs `js` and Contribs `cs`;
    /// its number, None when the arrays are full.
    fn push(&mut self, es: &[(f64, i64)], js: &[u32], cs: &[u32]) -> Option<u32> {
        let (k, start) = (u32::try_from(self.starts.len()).ok()?, u32::try_from(self.edge.len()).ok()?);
        self.starts.push(start);
        for ((&(partial, _), &arg), &child) in es.iter().zip(js).zip(cs) {
            self.edge.push(Edge { partial, arg, child });
        }
        Some(k)
    }
    /// Appends a Contrib with edges `es` whose numbers are known to fit (`reserve_round`).
    #[inline]
    fn push_reserved(&mut self, es: &[Edge]) {
        self.starts.push(self.edge.len() as u32);
        for &e in es {
            self.edge.push(e);
        }
    }
    /// The resolves' entries: (ID, Contrib, how many of its edges were followed).
    fn resolved(&self) -> impl DoubleEndedIterator<Item = (i64, u32, u32)> + '_ {
        let first = self.first.iter().flat_map(|f| {
            (f.lo..f.hi).rev().filter_map(|v| f.cb.get(v).filter(|&&c| c != EMPTY).map(|&c| (v as u32, c)))
        });
        first
            .chain(self.resolves.iter().copied())
            .map(|(i, cb)| (i as i64, cb, u32::MAX))
            .chain(self.stop.iter().map(|&(i, cb, done)| (i as i64, cb, done)))
    }
}

/// At most two edges: `C0`, `C1` and `C2` make the Contribs.
const MAX_EDGES: usize = 2;

/// A Contrib value: its number in `Contribs`, and its (partial, ID) edges again for `show` (which
/// has no machine to look them up in).
#[derive(Debug)]
pub struct ContribV {
    k: u32,
    n: u8,
    e: [(f64, i64); MAX_EDGES],
}

fn show_contrib(es: impl Iterator<Item = (f64, i64)>) -> String {
    let es: Vec<String> = es.map(|(a, j)| format!("({}, ({j}, □))", crate::value::show_real(a))).collect();
    format!("[{}]", es.join(", "))
}

impl ExtValue for ContribV {
    fn type_name(&self) -> &'static str {
        "Contrib"
    }
    fn show(&self) -> String {
        show_contrib(self.e[..self.n as usize].iter().copied())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn contrib_of(v: &Value, span: Span) -> Result<u32, RunError> {
    v.ext::<ContribV>().map(|c| c.k).ok_or_else(|| err(span, format!("expected a Contrib, got {v}")))
}

fn dref_of(v: &Value, span: Span) -> Result<(i64, u32), RunError> {
    // read in place (the common case); the checks below give the messages
    if let Value::Tuple(vs) = v {
        if let [Value::Int(i), c] = &vs[..] {
            if let Some(c) = c.ext::<ContribV>() {
                return Ok((*i, c.k));
            }
        }
    }
    let (i, c) = want_pair(v, span, "Contrib")?;
    Ok((want_int(&i, span, "Contrib")?, contrib_of(&c, span)?))
}

/// C0, C1 a d, C2 a d b e: the Contrib lists of length 0, 1, 2, appended to `Contribs`.
fn b_c(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    m.alloc(1)?;
    let mut v = ContribV { k: 0, n: 0, e: [(0.0, 0); MAX_EDGES] };
    let mut cs = [0u32; MAX_EDGES];
    for pair in args.chunks(2) {
        let a = want_real(&pair[0], span, "Contrib")?;
        let (j, c) = dref_of(&pair[1], span)?;
        if u32::try_from(j).is_err() {
            return Err(err(span, format!("Contrib: argument ID {j} out of range")));
        }
        let k = v.n as usize;
        let (Some(e), Some(ck)) = (v.e.get_mut(k), cs.get_mut(k)) else { return Err(err(span, "Contrib: more than two edges")) };
        (*e, *ck) = ((a, j), c);
        v.n += 1;
    }
    let mut js = [0u32; MAX_EDGES];
    for (j, e) in js.iter_mut().zip(&v.e[..v.n as usize]) {
        // (each checked above to fit)
        *j = e.1 as u32;
    }
    let n = v.n as usize;
    let Some(k) = m.state::<Contribs>().push(&v.e[..n], &js[..n], &cs[..n]) else {
        return Err(err(span, "Contrib: more Contribs than fit the run's arrays"));
    };
    v.k = k;
    Ok(Value::Ext(Rc::new(v)))
}

/// The runtime's builtins as a compiled round calls them (`interp::RoundCalls`, `interp/round.rs`;
/// issue 13, session 35): a dual number (R, (Z, Contrib)) is carried as a real, an ID and a Contrib
/// handle (its number in `Contribs`). `genID` (a step: its tick; `ids_allocated`) returns the next
/// ID, sequence 0; `C0`, `C1 a (i, c)`, `C2 a (i, c) b (j, c')` (an allocation each) the next
/// Contrib's number, sequence 1, their tuple arguments given as their items. A round's IDs and
/// Contribs are written at once, in the walker's order, once the round has computed them all.
static ROUND_CALLS: RoundCalls = RoundCalls {
    calls: &[
        RoundCall { name: "genID", args: &[], seq: 0, handle: false, steps: 1, allocs: 0 },
        RoundCall { name: "C0", args: &[], seq: 1, handle: true, steps: 0, allocs: 1 },
        RoundCall { name: "C1", args: &[RoundArg::Real, RoundArg::Int, RoundArg::Handle], seq: 1, handle: true, steps: 0, allocs: 1 },
        RoundCall {
            name: "C2",
            args: &[RoundArg::Real, RoundArg::Int, RoundArg::Handle, RoundArg::Real, RoundArg::Int, RoundArg::Handle],
            seq: 1,
            handle: true,
            steps: 0,
            allocs: 1,
        },
    ],
    reserve: reserve_round,
    write: write_round,
    // a Contrib of this run's arrays (a run's values never outlive its machine; the check keeps a
    // stray number from naming edges that are not there)
    unbox: |m, v| {
        let k = v.ext::<ContribV>()?.k;
        ((k as usize) < m.state::<Contribs>().starts.len()).then_some(k as i64)
    },
    rebox: |m, h| {
        let cs = m.state::<Contribs>();
        let mut v = ContribV { k: h as u32, n: 0, e: [(0.0, 0); MAX_EDGES] };
        for (e, (a, j, _)) in v.e.iter_mut().zip(cs.edges(h as u32)) {
            *e = (a, j);
            v.n += 1;
        }
        Value::Ext(Rc::new(v))
    },
    nodes: Some(RoundNodes { take: take_round, put: put_round }),
    sink: None,
};

/// `ROUND_CALLS`' calls by their place in it, as a round's items name them (`RoundItem::call`).
const CALL_GEN_ID: u8 = 0;
const CALL_C0: u8 = 1;
const CALL_C1: u8 = 2;
const CALL_C2: u8 = 3;

/// The next ID and the next Contrib's number, when `n[1]` Contribs (of at most two edges) fit the
/// arrays (`Contribs::push`'s u32 numbers).
fn reserve_round(m: &mut Machine, n: [usize; 2]) -> Option<[i64; 2]> {
    let (r, cs) = m.states::<Rt, Contribs>()?;
    let k = cs.starts.len();
    u32::try_from(k.checked_add(n[1])?).ok()?;
    u32::try_from(cs.edge.len().checked_add(MAX_EDGES.checked_mul(n[1])?)?).ok()?;
    r.next_id.checked_add(n[0] as i64)?;
    Some([r.next_id, k as i64])
}

/// The round's IDs and Contribs as `genID` and `b_c` make each (checked first: `false`, nothing
/// written, for an argument ID `b_c` would refuse, a Contrib not yet made, or numbers not the ones
/// reserved).
fn write_round(m: &mut Machine, items: &[RoundItem]) -> bool {
    let Some((r, cs)) = m.states::<Rt, Contribs>() else { return false };
    let (mut id, mut next) = (r.next_id, cs.starts.len() as i64);
    let fits = |j: i64, c: i64, next: i64| (0..=u32::MAX as i64).contains(&j) && (0..next).contains(&c);
    for it in items {
        match it.call {
            CALL_GEN_ID if it.at == id => id += 1,
            CALL_C0 if it.at == next => next += 1,
            CALL_C1 if it.at == next && fits(it.z[0], it.z[1], next) => next += 1,
            CALL_C2 if it.at == next && fits(it.z[0], it.z[1], next) && fits(it.z[2], it.z[3], next) => next += 1,
            _ => return false,
        }
    }
    // the IDs as `genID` makes each (`Rt::fresh`: a lean run keeps no span, so its IDs are a sum)
    let ids = (id - r.next_id) as u64;
    if r.lean {
        r.next_id = id;
    } else {
        for it in items.iter().filter(|it| it.call == CALL_GEN_ID) {
            r.fresh(it.span);
        }
    }
    // the Contribs as `b_c` makes each (each ID checked above to fit; room reserved: `reserve_round`)
    let edge = |it: &RoundItem, k: usize| Edge { partial: it.x[k], arg: it.z[2 * k] as u32, child: it.z[2 * k + 1] as u32 };
    for it in items {
        match it.call {
            CALL_C0 => cs.push_reserved(&[]),
            CALL_C1 => cs.push_reserved(&[edge(it, 0)]),
            CALL_C2 => cs.push_reserved(&[edge(it, 0), edge(it, 1)]),
            _ => {}
        }
    }
    if ids > 0 {
        m.count("ids_allocated", ids);
    }
    true
}

/// The next ID and the next Contrib's number for `n[0]` IDs and `n[1]` Contribs, when they fit (as
/// `reserve_round`) and their starts and edges fit the arrays' last chunks, and those chunks, taken
/// out to be written by index (`interp::RoundNodes`, issue 13, session 39).
fn take_round(m: &mut Machine, n: [usize; 2]) -> Option<([i64; 2], RoundNodeArrays)> {
    let firsts = reserve_round(m, n)?;
    let cs = m.state::<Contribs>();
    let edge0 = u32::try_from(cs.edge.len()).ok()?;
    let starts = cs.starts.take_last(n[1])?;
    let Some(edges) = cs.edge.take_last(MAX_EDGES * n[1]) else {
        cs.starts.put_last(starts);
        return None;
    };
    Some((firsts, RoundNodeArrays { starts, edges, edge0 }))
}

/// The Contribs written and the IDs made (`ids`: their spans) as `b_c` and `genID` make each.
fn put_round(m: &mut Machine, a: RoundNodeArrays, ids: &[Span]) {
    let cs = m.state::<Contribs>();
    cs.starts.put_last(a.starts);
    cs.edge.put_last(a.edges);
    if !ids.is_empty() {
        rt(m).fresh_round(ids);
        m.count("ids_allocated", ids.len() as u64);
    }
}

/// `Staged c = Array (Contrib, dR)`: per cell the Contrib's number (`EMPTY`: no call staged yet) and
/// the accumulated cotangent, as two arrays.
#[derive(Debug, Default)]
pub struct Cells {
    cb: Vec<u32>,
    acc: Vec<f64>,
}

/// A cell no SCall has reached.
const EMPTY: u32 = u32::MAX;

impl Cells {
    /// `m[i] := (cb, snd m[i] + z)`; false outside the array.
    #[inline]
    fn stage(&mut self, i: i64, cb: u32, z: f64) -> bool {
        let Ok(i) = usize::try_from(i) else { return false };
        match (self.cb.get_mut(i), self.acc.get_mut(i)) {
            (Some(c), Some(a)) => {
                // an untouched cell's cotangent is 0 (the arrays start with 0)
                *c = cb;
                *a += z;
                true
            }
            _ => false,
        }
    }
    fn get(&self, i: usize) -> Option<(u32, f64)> {
        let c = *self.cb.get(i)?;
        (c != EMPTY).then(|| (c, self.acc[i]))
    }
    fn shown(&self) -> impl Iterator<Item = Option<f64>> + '_ {
        self.cb.iter().zip(&self.acc).map(|(c, a)| (*c != EMPTY).then_some(*a))
    }
    fn rows(&self) -> Vec<(String, f64)> {
        self.shown().take(64).enumerate().filter_map(|(k, c)| c.map(|x| (format!("m[{k}]"), x))).collect()
    }
}

#[derive(Debug, Default)]
pub struct ContribArr(pub RefCell<Cells>);

impl ExtValue for ContribArr {
    fn type_name(&self) -> &'static str {
        "Staged"
    }
    fn show(&self) -> String {
        arr_cells(self.0.borrow().shown())
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
    Ok(Value::Ext(Rc::new(ContribArr(RefCell::new(Cells { cb: vec![EMPTY; n], acc: vec![0.0; n] })))))
}

/// SCall (i, cb) z m: m[i] := (cb, snd m[i] + z)
fn b_scall(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let s = carr(&args[2], span)?;
    let z = want_real(&args[1], span, "SCall")?;
    let (i, cb) = dref_of(&args[0], span)?;
    if !s.0.borrow_mut().stage(i, cb, z) {
        return Err(err(span, format!("SCall: ID {i} outside the staging array")));
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
        let rows = s.0.borrow().rows();
        trace_start(m, rows);
    }
    let mut contribs = std::mem::take(m.state::<Contribs>());
    let res = resolve(m, s, &mut contribs, n, span);
    *m.state::<Contribs>() = contribs;
    res?;
    // frozen (§9's unsafeFreeze), as the tape's: the cotangents (0 where none was received) taken
    // rather than copied, the cells with them; the staged array is not used after its resolve
    let cells = std::mem::take(&mut *s.0.borrow_mut());
    if let Some(f) = &mut m.state::<Contribs>().first {
        if f.cb.is_empty() {
            f.cb = cells.cb;
        }
    }
    let frozen = cells.acc;
    m.tick(frozen.len() as u64)?;
    Ok(iarr(frozen))
}

/// The graph's edges: those recorded so far (`SCall`'s, from the wrapper), and (i, j) ↦ a for each
/// edge a resolve followed, a later write of a key kept. One resolve visits the IDs descending, so
/// taken backwards its edges come in key order once each ID's own are sorted: the map is built from
/// a sorted list (a map insert per edge, or a sort of them all, cost more than the resolve).
fn drawn_edges(cs: &Contribs, mut recorded: BTreeMap<(i64, i64), f64>) -> BTreeMap<(i64, i64), f64> {
    // (more than one resolve, or IDs not descending: the inserts, in order)
    let mut last = None;
    let descending = cs.resolved().all(|(i, _, _)| last.replace(i).is_none_or(|l| l > i));
    if !descending {
        for (i, cb, done) in cs.resolved() {
            for (a, j, _) in cs.edges(cb).take(done as usize) {
                recorded.insert((i, j), a);
            }
        }
        return recorded;
    }
    let mut drawn: Vec<((i64, i64), f64)> = Vec::with_capacity(cs.edge.len().min(2 * cs.entries()));
    for (i, cb, done) in cs.resolved().rev() {
        let from = drawn.len();
        drawn.extend(cs.edges(cb).take(done as usize).map(|(a, j, _)| ((i, j), a)));
        if drawn.len() - from > 1 {
            // (a stable sort, then the last of equal keys kept)
            drawn[from..].sort_by_key(|(k, _)| *k);
            let mut block = drawn.split_off(from);
            block.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    kept.1 = later.1;
                }
                same
            });
            drawn.append(&mut block);
        }
    }
    // both sorted with unique keys: merged, the resolve's weight kept where both have a key
    let mut merged = Vec::with_capacity(recorded.len() + drawn.len());
    let (mut a, mut b) = (recorded.into_iter().peekable(), drawn.into_iter().peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x.0 < y.0 => a.next(),
            (Some(x), Some(y)) if x.0 == y.0 => {
                a.next();
                b.next()
            }
            (_, Some(_)) => b.next(),
            (Some(_), None) => a.next(),
            (None, None) => break,
        };
        merged.extend(next);
    }
    merged.into_iter().collect()
}

/// What a `sweep` counted: its ticks (one an ID, one an edge), the IDs it resolved (their cells
/// not empty) and the edges it followed (a real op each).
struct Swept {
    ticks: u64,
    calls: u64,
    ops: u64,
}

/// The untraced resolve of IDs from `*i` down while their ticks fit `room` (`Machine::tick_room`),
/// as the step-by-step loop in `resolve` does each (`*i`: the ID it stopped at, for that loop to
/// take). It stops before an ID whose ticks do not all fit, an edge that leaves the staging array
/// or, while the first resolve's entries are read off its cells (`derive`), an edge to an ID not
/// below its own: the step-by-step loop gives their messages and logs.
#[allow(clippy::too_many_arguments)]
fn sweep(cells: &mut Cells, cs: &mut Contribs, resolved: &mut Resolved, i: &mut i64, room: u64, derive: bool, lo: &mut usize, count: &mut usize) -> Swept {
    let (mut left, mut calls, mut ops) = (room, 0u64, 0u64);
    let len = cells.cb.len();
    while *i >= 0 && left > 0 {
        let id = *i;
        // IDs past the staging array's end: empty cells, a tick each
        if id >= len as i64 {
            let k = (left as i64).min(id - len as i64 + 1);
            (left, *i) = (left - k as u64, id - k);
            continue;
        }
        let at = id as usize;
        let cb = cells.cb[at];
        if cb == EMPTY {
            (left, *i) = (left - 1, id - 1);
            continue;
        }
        let r = cs.range(cb);
        let Some(es) = cs.edge.slice(r.start, r.len()) else { break };
        let need = 1 + es.len() as u64;
        let Ok(at32) = u32::try_from(id) else { break };
        if need > left || es.iter().any(|e| e.arg as usize >= len || (derive && e.arg as i64 >= id)) {
            break;
        }
        left -= need;
        let d = cells.acc[at];
        calls += 1;
        resolved.add(id, d);
        if derive {
            (*lo, *count) = (at, *count + 1);
        } else {
            cs.resolves.push((at32, cb));
        }
        for e in es {
            // (each checked above to be in the array)
            let j = e.arg as usize;
            cells.cb[j] = e.child;
            cells.acc[j] += e.partial * d;
        }
        ops += es.len() as u64;
        *i = id - 1;
    }
    Swept { ticks: room - left, calls, ops }
}

/// The resolve's loop: for i descending, with cell (cb, d) at i: for each (a, (j, cb_j)) in cb: m[j] := (cb_j, snd m[j] + a · d)
fn resolve(m: &mut Machine, s: &ContribArr, cs: &mut Contribs, n: i64, span: Span) -> Result<(), RunError> {
    // interned on the first call, as `count` would: no counter where nothing was resolved
    let mut calls = None;
    let ids = usize::try_from(n).unwrap_or(0).min(s.0.borrow().cb.len());
    let mut resolved = Resolved::take(m, ids);
    // the cells borrowed once for the loop (nothing else reads them until it ends)
    let mut cells = s.0.borrow_mut();
    // the first resolve's entries are read off its cells afterwards (`FirstResolve`): the lowest
    // ID visited so far
    let mut derive = cs.first.is_none() && cs.resolves.is_empty();
    let (mut lo, mut count) = (ids, 0);
    let res = (|| {
        let mut i = n - 1;
        while i >= 0 {
            // Where no trace step is recorded, the IDs whose ticks (one an ID, one an edge) all fit
            // (`tick_room`: no budget stop, no clock check among them) are one tight loop, their
            // steps, calls and real ops counted at once, as the tape's `sweep` (issue 13, session 36);
            // the ID it stops at takes the step below.
            let room = if m.tracing() { 0 } else { m.tick_room() };
            if room > 0 {
                let from = i;
                let s = sweep(&mut cells, cs, &mut resolved, &mut i, room, derive, &mut lo, &mut count);
                m.tick_fitting(s.ticks);
                if s.calls > 0 {
                    let c = *calls.get_or_insert_with(|| m.counter_id("backprop_calls"));
                    m.count_at(c, s.calls);
                }
                m.real_ops_n(s.ops);
                if i != from {
                    continue;
                }
            }
            m.tick(1)?;
            if let Some((cb, d)) = cells.get(i as usize) {
                let c = *calls.get_or_insert_with(|| m.counter_id("backprop_calls"));
                m.count_at(c, 1);
                resolved.add(i, d);
                let Ok(at) = u32::try_from(i) else { return Err(err(span, "SResolve: more IDs than fit the run's arrays")) };
                if derive {
                    (lo, count) = (i as usize, count + 1);
                } else {
                    cs.resolves.push((at, cb));
                }
                let r = cs.range(cb);
                let start = r.start;
                for k in r {
                    let Some(&Edge { partial: a, arg: j, child: cbj }) = cs.edge.get(k) else { break };
                    if derive && j as i64 >= i {
                        // an edge to a visited cell: log the visited IDs' entries while they hold
                        for v in (lo..ids).rev() {
                            if let Some((c, _)) = cells.get(v) {
                                cs.resolves.push((v as u32, c));
                            }
                        }
                        derive = false;
                    }
                    let stopped = if let Err(stop) = m.tick(1) {
                        Some(stop)
                    } else {
                        m.real_op();
                        (!cells.stage(j as i64, cbj, a * d)).then(|| err(span, format!("SResolve: ID {j} outside the staging array")))
                    };
                    if let Some(stop) = stopped {
                        // the graph draws the edges followed before the stop
                        // (the stopped ID's entry is `stop`, not among the visited ones)
                        if derive {
                            (lo, count) = (lo + 1, count - 1);
                        } else {
                            cs.resolves.pop();
                        }
                        cs.stop = Some((at, cb, (k - start) as u32));
                        return Err(stop);
                    }
                }
                if m.tracing() {
                    let rows = cells.rows();
                    let note = format!("resolve ID {i}: add {} times each partial of its Contrib {}", crate::value::show_real(d), show_contrib(cs.edges(cb).map(|(a, j, _)| (a, j))));
                    trace_resolve(m, i, d, note, rows);
                }
            }
            i -= 1;
        }
        Ok(())
    })();
    if derive && count > 0 {
        // the cells' Contribs: moved in by `b_sresolve` when the resolve ends well (the cells are
        // frozen then), copied when it stopped (the run ends; the staged array stays as it was)
        let cb = if res.is_ok() { vec![] } else { cells.cb.clone() };
        cs.first = Some(FirstResolve { cb, lo, hi: ids, count });
    }
    drop(cells);
    resolved.put(m);
    res
}

#[cfg(test)]
mod tests {
    use super::{resolve, Cells, ContribArr, Contribs, EMPTY};
    use crate::diag::Span;
    use crate::interp::{Budget, Builtins, Machine};
    use crate::ir::Program;
    use std::cell::RefCell;

    /// The resolves' entries for the graph: the first resolve's read off its cells afterwards, a
    /// second one's logged; and a first resolve that meets an edge to an ID it visited (no
    /// generated program makes one: an argument is made before its result) logs instead, so the
    /// entries are what the resolve saw, not the cells' later Contribs.
    #[test]
    fn the_resolves_entries_are_what_each_resolve_saw() {
        let program = Program::default();
        let mut m = Machine::new(&program, &Builtins::new(), Budget::default()).expect("a machine");
        let mut cs = Contribs::default();
        let c0 = cs.push(&[], &[], &[]).unwrap();
        let c1 = cs.push(&[(2.0, 0)], &[0], &[c0]).unwrap();
        // ID 2's Contrib has an edge to ID 2 itself, staging C0 there as it is resolved
        let c2 = cs.push(&[(3.0, 2)], &[2], &[c0]).unwrap();
        let cells = |cb: Vec<u32>| ContribArr(RefCell::new(Cells { acc: vec![1.0; cb.len()], cb }));
        let entries = |cs: &Contribs| cs.resolved().collect::<Vec<_>>();
        // IDs 0..4, cell 1 empty: read off the cells (IDs 3, 2, 0; C1 staged into 0 by ID 2)
        let a = cells(vec![c0, EMPTY, c1, c0]);
        resolve(&mut m, &a, &mut cs, 4, Span::NONE).unwrap();
        assert!(cs.first.is_some() && cs.resolves.is_empty());
        cs.first.as_mut().unwrap().cb = std::mem::take(&mut a.0.borrow_mut().cb);
        assert_eq!(entries(&cs), vec![(3, c0, u32::MAX), (2, c1, u32::MAX), (0, c0, u32::MAX)]);
        // a second resolve logs, after the first's (ID 1 stages C0 into the empty cell 0)
        let b = cells(vec![EMPTY, c1]);
        resolve(&mut m, &b, &mut cs, 2, Span::NONE).unwrap();
        assert_eq!(entries(&cs)[3..], [(1, c1, u32::MAX), (0, c0, u32::MAX)]);
        // a first resolve meeting the edge 2 → 2: ID 2 with C2, as it was resolved (its cell holds C0 after)
        let mut cs2 = Contribs::default();
        for c in [c0, c1, c2] {
            let es: Vec<_> = cs.edges(c).map(|(a, j, _)| (a, j)).collect();
            let (js, ch): (Vec<u32>, Vec<u32>) = cs.edges(c).map(|(_, j, k)| (j as u32, k)).unzip();
            cs2.push(&es, &js, &ch);
        }
        let a = cells(vec![EMPTY, c0, c2]);
        resolve(&mut m, &a, &mut cs2, 3, Span::NONE).unwrap();
        assert!(cs2.first.is_none());
        assert_eq!(a.0.borrow().cb[2], c0);
        assert_eq!(entries(&cs2), vec![(2, c2, u32::MAX), (1, c0, u32::MAX)]);
    }

    /// A Contrib's edges end where the next one's start, the last's at the arrays' end; an empty
    /// Contrib between two is empty (issue 13: a start per Contrib, no count).
    #[test]
    fn each_contribs_edges_run_to_the_next_ones_start() {
        let mut cs = Contribs::default();
        assert_eq!(cs.push(&[], &[], &[]), Some(0));
        assert_eq!(cs.push(&[(2.0, 0)], &[0], &[0]), Some(1));
        assert_eq!(cs.push(&[], &[], &[]), Some(2));
        assert_eq!(cs.push(&[(3.0, 1), (4.0, 0)], &[1, 0], &[1, 0]), Some(3));
        let edges = |k| cs.edges(k).collect::<Vec<_>>();
        assert_eq!(edges(0), vec![]);
        assert_eq!(edges(1), vec![(2.0, 0, 0)]);
        assert_eq!(edges(2), vec![]);
        assert_eq!(edges(3), vec![(3.0, 1, 1), (4.0, 0, 0)]);
        assert_eq!(edges(4), vec![]);
    }
}
