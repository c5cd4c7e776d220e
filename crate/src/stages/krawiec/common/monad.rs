//! The state monad M of Krawiec et al. §7.2, Fig. 10, at run time: M runs in direct style, its state
//! (a supply of DeltaIds and the bindings made so far) lives in the machine, and `runDelta` wraps the
//! bindings a run made around its result's Delta as nested `Let`s.

use crate::kit::delta::{child_arg, delta_ctor_builtins, delta_type, int_arg, delta_of, delta_value, mk, nodes_counter, run_arena, Arena, DeltaArena, DeltaRef, Ix, Kind, RoundForm, SpanTable};
use crate::kit::delta::round_words;
use crate::kit::delta::drev::m_type;
use crate::kit::delta::graph::Visits;
use crate::diag::Span;
use crate::interp::{Builtin, Machine, RoundArg, RoundArgs, RoundCall, RoundCalls, RoundItem, RoundSink, RunError};
use crate::ir::*;
use crate::value::Value;
use crate::stages::dualrev::common::Chunked;
use rustc_hash::FxHashSet as HashSet;

/// DeltaState (Fig. 10) and what the backward pass leaves for the graph.
#[derive(Default)]
pub struct DeltaState {
    /// Inside runDelta.
    pub active: bool,
    /// The next fresh DeltaId.
    pub next_id: i64,
    /// The bindings so far, oldest first (Fig. 10 keeps them newest first; runDelta's foldl wraps
    /// the newest innermost either way): the Delta's node in the run's arena and the span's index in
    /// `bind_spans`. The k-th binding's id is runDelta's start + k (deltaLet takes the next id and
    /// nothing else does). 8 bytes a binding, in chunks: as long as the run, and alive beside the
    /// whole Delta while runDelta wraps it, which was horner's peak at 10^6 with (id, node, span)
    /// at 24 bytes (issue 13, bytes per op).
    pub binds: Chunked<(Ix, u32)>,
    /// The distinct spans of the bindings (a run's deltaLets are at a few source operations).
    pub bind_spans: SpanTable,
    /// The Let-wrapped Delta runDelta returned (the graph's root).
    pub root: Option<DeltaRef>,
    /// eval's visits per node, and the Lets it skipped.
    pub visits: Visits,
    pub skipped: HashSet<u64>,
}

/// In a binding's span index: its right-hand side is a node made at the binding's span (known when a
/// compiled round made both; runDelta's Let then need not look the node's span up). Indices stay
/// below it (past 2^31 distinct spans a binding keeps no span).
const RHS_SAME: u32 = 1 << 31;

/// A binding's span index (0 when past `RHS_SAME`).
fn bind_span(t: &mut SpanTable, span: Span) -> u32 {
    t.index(span).filter(|&s| s < RHS_SAME).unwrap_or(0)
}

/// `deltaLet : Delta → M DeltaId`: binds the Delta to a fresh id. (M runs in direct style.)
pub(crate) fn b_delta_let(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let d = child_arg(m, &args[0], span, "deltaLet")?;
    m.count("ids_allocated", 1);
    m.tick(1)?;
    let st = m.state::<DeltaState>();
    if !st.active {
        return Err(RunError::runtime(span, "deltaLet outside runDelta: there is no DeltaState to bind in"));
    }
    let id = st.next_id;
    st.next_id += 1;
    let s = bind_span(&mut st.bind_spans, span);
    st.binds.push((d, s));
    Ok(Value::Int(id))
}

pub(crate) fn b_var(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let i = int_arg(&args[0], span, "Var")?;
    mk(m, Kind::Var(i))
}

/// The most Lets runDelta's wrap appends at once (`Arena::append_lets_prev_same`).
const WRAP_RUN: usize = 256;

/// Runs `runDelta start m`: the computation, then `foldl wrap delta binds` (the newest binding
/// innermost). The result is the computation's value with its Delta wrapped — `(x, δ)` or
/// `(a, (x, δ))` — and the last DeltaId allocated.
fn run_delta(m: &mut Machine, args: &[Value], span: Span) -> Result<(Value, i64), RunError> {
    let start = int_arg(&args[0], span, "runDelta")?;
    {
        let st = m.state::<DeltaState>();
        if st.active {
            return Err(RunError::runtime(span, "runDelta inside runDelta"));
        }
        st.active = true;
        st.next_id = start;
        st.binds = Chunked::default();
        st.bind_spans = SpanTable::default();
    }
    let r = m.apply(args[1].clone(), Value::Unit);
    let (binds, spans, last) = {
        let st = m.state::<DeltaState>();
        st.active = false;
        (std::mem::take(&mut st.binds), std::mem::take(&mut st.bind_spans), st.next_id - 1)
    };
    let v = r?;
    // Fig. 10's `foldl wrap`, newest binding innermost: each Let as `mk` makes it (counted, then
    // allocated, so the allocation budget stops it at the same Let), with the run's arena and the
    // counter found once rather than per Let (issue 13)
    let wrap = |m: &mut Machine, d: DeltaRef| -> Result<DeltaRef, RunError> {
        if binds.is_empty() {
            return Ok(d);
        }
        let arena = run_arena(m);
        if !std::rc::Rc::ptr_eq(&d.arena, &arena) {
            return Err(RunError::runtime(span, "runDelta: the Delta belongs to another run"));
        }
        let c = nodes_counter(m);
        let mut acc = d.ix;
        // the arena borrowed once, and each binding span's index in its table found once (by the
        // binding's index in `spans`: a run's bindings are at a few spans), not a Let at a time
        let mut a = arena.try_borrow_mut().ok();
        let mut ids: Vec<Option<u32>> = vec![];
        // the Lets whose right-hand sides are at their spans, as many as are allocated with no
        // budget stop or memory probe among them (`alloc_room`), appended at once (session 45);
        // any other Let, and the one at an edge, as before (the run's list gone by then: a memory
        // probe there sees what it saw)
        let mut i = binds.len();
        while i > 0 {
            let room = m.alloc_room() as usize;
            if let Some(a) = a.as_mut() {
                // (at most `WRAP_RUN` at a time: the list and the words are live beside the whole
                // Delta and the bindings, the run's peak)
                let mut run: Vec<(i64, Ix, u32)> = Vec::with_capacity(room.min(i).min(WRAP_RUN));
                while run.len() < room.min(WRAP_RUN) && i > run.len() {
                    let j = i - 1 - run.len();
                    let Some(&(rhs, s)) = binds.get(j) else { break };
                    let Some(id) = start.checked_add(j as i64).filter(|_| s & RHS_SAME != 0) else { break };
                    let k = (s & !RHS_SAME) as usize;
                    let sid = match ids.get(k) {
                        Some(&Some(sid)) => sid,
                        _ => {
                            let Some(sid) = a.span_id(spans.get(k as u32)) else { break };
                            if ids.len() <= k {
                                ids.resize(k + 1, None);
                            }
                            ids[k] = Some(sid);
                            sid
                        }
                    };
                    run.push((id, rhs, sid));
                }
                let n = a.append_lets_prev_same(&run, acc);
                if n > 0 {
                    m.count_at(c, n as u64);
                    m.alloc_fitting(n as u64);
                    acc += n as Ix;
                    i -= n;
                    continue;
                }
            }
            i -= 1;
            let Some(&(rhs, s)) = binds.get(i) else { break };
            let id = start.checked_add(i as i64).ok_or_else(|| RunError::runtime(span, "runDelta: DeltaIds past the integers"))?;
            m.count_at(c, 1);
            m.alloc(1)?;
            let k = (s & !RHS_SAME) as usize;
            let ix = a.as_mut().and_then(|a| {
                let sid = match ids.get(k) {
                    Some(&Some(sid)) => sid,
                    _ => {
                        let sid = a.span_id(spans.get(k as u32))?;
                        if ids.len() <= k {
                            ids.resize(k + 1, None);
                        }
                        ids[k] = Some(sid);
                        sid
                    }
                };
                if s & RHS_SAME != 0 {
                    a.push_let_prev_same(id, rhs, acc, sid)
                } else {
                    a.push_let_id(Kind::Let(id, rhs, acc), sid, false)
                }
            });
            acc = ix.ok_or_else(|| RunError::runtime(spans.get(k as u32), "the run's Delta arena cannot take another node"))?;
        }
        drop(a);
        Ok(DeltaRef { arena, ix: acc })
    };
    let bad = || RunError::runtime(span, "runDelta: the computation did not return a pair ending in a Delta");
    let Value::Tuple(vs) = &v else { return Err(bad()) };
    if vs.len() != 2 {
        return Err(bad());
    }
    let out = if let Some(d) = delta_of(&vs[1]) {
        let w = wrap(m, d)?;
        m.state::<DeltaState>().root = Some(w.clone());
        Value::pair(vs[0].clone(), delta_value(w))
    } else if let Value::Tuple(inner) = &vs[1] {
        let d = inner.get(1).and_then(delta_of).ok_or_else(bad)?;
        let w = wrap(m, d)?;
        m.state::<DeltaState>().root = Some(w.clone());
        Value::pair(vs[0].clone(), Value::pair(inner[0].clone(), delta_value(w)))
    } else {
        return Err(bad());
    };
    Ok((out, last))
}

pub(crate) fn b_run_delta(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    Ok(run_delta(m, &args, span)?.0)
}

/// §7.3's runDelta, which also returns the last DeltaId allocated (the array's size, the little
/// point whose code the paper omits): `(x, δ, last)`.
pub(crate) fn b_run_delta_last(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let (v, last) = run_delta(m, &args, span)?;
    let Value::Tuple(vs) = v else { unreachable!("run_delta returns a pair") };
    Ok(Value::tuple(vec![vs[0].clone(), vs[1].clone(), Value::Int(last)]))
}

/// The builtins of the monad: Delta's constructors, Var, deltaLet and runDelta at the given type.
pub(crate) fn monad_builtins(run_delta_scheme: Scheme, run: crate::interp::BuiltinFn) -> Vec<Builtin> {
    let mut bs = delta_ctor_builtins();
    bs.push(Builtin { name: "Var", scheme: Scheme::mono(Type::fun(Type::Int, delta_type())), arity: 1, lazy_last: false, run: b_var });
    bs.push(Builtin {
        name: "deltaLet",
        scheme: Scheme::mono(Type::fun(delta_type(), m_type(Type::Int))),
        arity: 1,
        lazy_last: false,
        run: b_delta_let,
    });
    bs.push(Builtin { name: "runDelta", scheme: run_delta_scheme, arity: 2, lazy_last: true, run });
    bs
}

/// The monad's builtins as a compiled round calls them (`interp::RoundCalls`, `interp/round.rs`;
/// issue 13, session 34): the Delta constructors (`mk`: a `delta_nodes` count and an allocation
/// each), their nodes the arena's next serials, and `deltaLet` (a step: its tick; `ids_allocated`),
/// its DeltaIds the state's next ones. A round's nodes and bindings are written at once, in the
/// order the walker makes them, once the round has computed them all; a Delta is a node's serial.
/// A round's calls by their index in `ROUND_CALLS.calls` (a `RoundItem`'s `call`).
pub(crate) const CALL_ZERO: u8 = 0;
pub(crate) const CALL_SCALE: u8 = 1;
pub(crate) const CALL_ADD: u8 = 2;
pub(crate) const CALL_VAR: u8 = 3;
pub(crate) const CALL_DELTA_LET: u8 = 4;

pub(crate) static ROUND_CALLS: RoundCalls = RoundCalls {
    // in the order of the CALL_ constants
    calls: &[
        RoundCall { name: "Zero", args: &[], seq: 0, handle: true, steps: 0, allocs: 1 },
        RoundCall { name: "Scale", args: &[RoundArg::Real, RoundArg::Handle], seq: 0, handle: true, steps: 0, allocs: 1 },
        RoundCall { name: "Add", args: &[RoundArg::Handle, RoundArg::Handle], seq: 0, handle: true, steps: 0, allocs: 1 },
        RoundCall { name: "Var", args: &[RoundArg::Int], seq: 0, handle: true, steps: 0, allocs: 1 },
        RoundCall { name: "deltaLet", args: &[RoundArg::Handle], seq: 1, handle: false, steps: 1, allocs: 0 },
    ],
    reserve: reserve_round,
    write: write_round,
    unbox: |m, v| {
        let d = v.ext::<DeltaRef>()?;
        std::rc::Rc::ptr_eq(&d.arena, &m.state::<DeltaArena>().arena).then_some(d.ix as i64)
    },
    rebox: |m, h| delta_value(DeltaRef { arena: run_arena(m), ix: h as Ix }),
    nodes: None,
    sink: Some(take_sink),
};

/// A round's item as the sink writes it: the call, its span's index in the arena's table and,
/// for a `deltaLet`, in `bind_spans` (both interned once a batch).
#[derive(Clone, Copy)]
struct SinkItem {
    call: u8,
    span: u32,
    bind_span: u32,
    /// The round's nodes made before it (a node's place in the round).
    node: u32,
}

/// The run's arena and bindings taken out of the state for a batch of compiled rounds, which hand
/// it their nodes' and bindings' arguments, written at `put` (`interp::RoundSink`, issue 13,
/// session 40: `write_round` checked and copied a round's staged `RoundItem`s, a third of
/// particle's gradient; session 45: the batch at once), with the checks and the spans
/// `write_round` gives them.
struct DeltaSink {
    arena: Arena,
    /// A round's nodes, appended to the arena a batch at a time at `put` (sessions 44, 45).
    form: RoundForm,
    binds: Chunked<(Ix, u32)>,
    next_id: i64,
    items: Box<[SinkItem]>,
    /// The arena span index of a round's k-th node (`write_round`'s `made_at`, by index).
    node_spans: Box<[u32]>,
    /// Where the bindings and the ids were when taken.
    binds0: usize,
    id0: i64,
    nodes: u64,
    lets: u64,
}

/// `reserve_round`'s checks for `n` nodes and bindings, then the arena and bindings taken out of
/// the state, the round's spans interned (`None`: nothing taken, the batch runs round by round).
fn take_sink(m: &mut Machine, n: [usize; 2], items: &[RoundItem]) -> Option<Box<dyn RoundSink>> {
    let (da, st) = m.states::<DeltaArena, DeltaState>()?;
    let mut a = da.arena.try_borrow_mut().ok()?;
    if !a.room(n[0]) || (n[1] > 0 && !st.active) || items.len() > u16::MAX as usize {
        return None;
    }
    st.next_id.checked_add(n[1] as i64)?;
    let mut node_spans = Vec::with_capacity(32);
    let mut its = Vec::with_capacity(items.len());
    let mut nodes = vec![];
    for it in items {
        let span = a.span_id(it.span)?;
        let bind_span = if it.call == CALL_DELTA_LET { bind_span(&mut st.bind_spans, it.span) } else { 0 };
        its.push(SinkItem { call: it.call, span, bind_span, node: nodes.len() as u32 });
        // a node of the call's kind, for its class
        let kind = match it.call {
            CALL_ZERO => Kind::Zero,
            CALL_SCALE => Kind::Scale(0.0, 1),
            CALL_ADD => Kind::Add(1, 1),
            CALL_VAR => Kind::Var(0),
            CALL_DELTA_LET => continue,
            _ => return None,
        };
        if node_spans.len() < 32 {
            node_spans.push(span);
        }
        nodes.push((kind, span));
    }
    let form = RoundForm::new(&nodes)?;
    let arena = std::mem::replace(&mut *a, Arena::hollow());
    let binds = std::mem::take(&mut st.binds);
    Some(Box::new(DeltaSink {
        binds0: binds.len(),
        form,
        arena,
        binds,
        next_id: st.next_id,
        id0: st.next_id,
        items: its.into(),
        node_spans: node_spans.into(),
        nodes: 0,
        lets: 0,
    }))
}

impl RoundSink for DeltaSink {
    fn firsts(&self) -> [i64; 2] {
        [self.arena.len() as i64, self.next_id]
    }

    fn put(self: Box<Self>, m: &mut Machine, args: &RoundArgs, rounds: usize, keep: bool) -> bool {
        let mut s = *self;
        let kept = keep && s.write(args, rounds);
        if !kept {
            s.binds.truncate(s.binds0);
            (s.next_id, s.nodes, s.lets) = (s.id0, 0, 0);
        }
        // (found at `take_sink`, and nothing ran between but the rounds)
        let Some((da, st)) = m.states::<DeltaArena, DeltaState>() else { return false };
        st.binds = s.binds;
        st.next_id = s.next_id;
        if let Ok(mut a) = da.arena.try_borrow_mut() {
            *a = s.arena;
        }
        count_made(m, s.nodes, s.lets);
        kept
    }
}

impl DeltaSink {
    /// The calls of `rounds` rounds of `items`, their arguments from `args` in order, written and
    /// bound as `write_round` writes them: a round's nodes' words by index, then the batch's nodes
    /// appended at once (`Arena::append_rounds`); `false`, the arena as it was, at the first call
    /// `write_round` would refuse (a child not made) or a node a round's form does not take (a wide
    /// Var: the batch then runs round by round through `write_round`, as before).
    fn write(&mut self, args: &RoundArgs, rounds: usize) -> bool {
        let (mut x, mut z) = (args.x.iter().copied(), args.z.iter().copied());
        let mut words = Vec::with_capacity(self.form.words() * rounds);
        // the serial of the round's first node
        let mut first = self.arena.len() as i64;
        for _ in 0..rounds {
            for it in self.items.iter() {
                // the serial the node takes: its children are below it (a binding's, below the next)
                let next = first + it.node as i64;
                let made = |h: i64| h > 0 && h < next;
                // (a node's words as `round_words` makes them, by kind: its match folded away)
                match it.call {
                    CALL_ZERO => {}
                    CALL_SCALE => match (x.next(), z.next()) {
                        (Some(r), Some(u)) if made(u) => match round_words(Kind::Scale(r, u as Ix)) {
                            Some((_, w)) => words.extend_from_slice(&w),
                            None => return false,
                        },
                        _ => return false,
                    },
                    CALL_ADD => match (z.next(), z.next()) {
                        (Some(u1), Some(u2)) if made(u1) && made(u2) => match round_words(Kind::Add(u1 as Ix, u2 as Ix)) {
                            Some((_, w)) => words.extend_from_slice(&w[..2]),
                            None => return false,
                        },
                        _ => return false,
                    },
                    CALL_VAR => match z.next().and_then(|i| round_words(Kind::Var(i))) {
                        Some((_, w)) => words.push(w[0]),
                        None => return false,
                    },
                    CALL_DELTA_LET => {
                        let Some(h) = z.next().filter(|&h| made(h)) else { return false };
                        // its right-hand side made at its span by this round (`write_round`'s `made_at`)
                        let here = usize::try_from(h - first).ok().and_then(|k| self.node_spans.get(k));
                        let same = here.is_some_and(|&s| s == it.span && it.bind_span != 0);
                        self.binds.push((h as Ix, it.bind_span | if same { RHS_SAME } else { 0 }));
                        self.next_id += 1;
                        self.lets += 1;
                    }
                    _ => return false,
                }
            }
            first += self.form.len() as i64;
        }
        // (room found at `take_sink`: refused only if the words are not the form's)
        if !self.arena.append_rounds(&self.form, rounds, &words) {
            return false;
        }
        self.nodes = (self.form.len() * rounds) as u64;
        true
    }
}

/// Nodes and bindings written at once counted as `mk` and `deltaLet` count each (`delta_nodes`,
/// `ids_allocated`), no counter interned where none was made.
fn count_made(m: &mut Machine, nodes: u64, lets: u64) {
    if nodes > 0 {
        let c = nodes_counter(m);
        m.count_at(c, nodes);
    }
    if lets > 0 {
        m.count("ids_allocated", lets);
    }
}

/// The arena's next serial and the next DeltaId, when `n[0]` nodes fit the arena and `n[1]`
/// bindings can be made (inside runDelta, as `deltaLet` requires).
fn reserve_round(m: &mut Machine, n: [usize; 2]) -> Option<[i64; 2]> {
    let (da, st) = m.states::<DeltaArena, DeltaState>()?;
    let a = da.arena.try_borrow().ok()?;
    if !a.room(n[0]) || (n[1] > 0 && !st.active) {
        return None;
    }
    st.next_id.checked_add(n[1] as i64)?;
    Some([a.len() as i64, st.next_id])
}

/// The round's nodes and bindings as `mk` and `deltaLet` make each (checked first: `false`, nothing
/// written, for a child not yet made or numbers not the ones reserved). The nodes go in as one bulk
/// append (`Arena::push_span_id`): the room was reserved, and a round's nodes come in runs of one
/// source operation, so a span is interned once per run of items rather than looked up per node.
fn write_round(m: &mut Machine, items: &[RoundItem]) -> bool {
    let Some((da, st)) = m.states::<DeltaArena, DeltaState>() else { return false };
    let Ok(mut a) = da.arena.try_borrow_mut() else { return false };
    let (mut next, mut id) = (a.len() as i64, st.next_id);
    let made = |h: i64, next: i64| h > 0 && h < next;
    for it in items {
        let ok = match it.call {
            CALL_ZERO | CALL_VAR => true,
            CALL_SCALE => made(it.z[0], next),
            CALL_ADD => made(it.z[0], next) && made(it.z[1], next),
            CALL_DELTA_LET => made(it.z[0], next) && it.at == id && st.active,
            _ => false,
        };
        let node = it.call != CALL_DELTA_LET;
        if !ok || (node && it.at != next) {
            return false;
        }
        if node {
            next += 1;
        } else {
            id += 1;
        }
    }
    // the room reserved is checked once for the round's nodes (`Arena::push_round_node` does not)
    if !a.room((next - a.len() as i64) as usize) {
        return false;
    }
    let (mut nodes, mut lets) = (0, 0);
    // the spans of the round's first nodes, by serial from the round's first (a binding's
    // right-hand side is mostly one of them)
    let first = a.len() as i64;
    let mut made_at = [Span::NONE; 32];
    // the span interned last, for the arena (`a_span`) and for the bindings (`b_span`)
    let mut a_span: Option<(Span, u32)> = None;
    let mut b_span: Option<(Span, u32)> = None;
    for it in items {
        let kind = match it.call {
            CALL_ZERO => Kind::Zero,
            CALL_SCALE => Kind::Scale(it.x[0], it.z[0] as Ix),
            CALL_ADD => Kind::Add(it.z[0] as Ix, it.z[1] as Ix),
            CALL_VAR => Kind::Var(it.z[0]),
            _ => {
                let s = match b_span {
                    Some((sp, s)) if sp == it.span => s,
                    _ => {
                        let s = bind_span(&mut st.bind_spans, it.span);
                        b_span = Some((it.span, s));
                        s
                    }
                };
                let here = usize::try_from(it.z[0] - first).ok().and_then(|k| made_at.get(k));
                let same = here.is_some_and(|&sp| sp == it.span && s != 0);
                st.binds.push((it.z[0] as Ix, s | if same { RHS_SAME } else { 0 }));
                st.next_id += 1;
                lets += 1;
                continue;
            }
        };
        let s = match a_span {
            Some((sp, s)) if sp == it.span => Some(s),
            _ => {
                let s = a.span_id(it.span);
                a_span = s.map(|s| (it.span, s));
                s
            }
        };
        if let Some(sp) = usize::try_from(a.len() as i64 - first).ok().and_then(|k| made_at.get_mut(k)) {
            *sp = it.span;
        }
        // (room reserved: `Arena::room`, spans included)
        let _ = s.and_then(|s| a.push_round_node(kind, s));
        nodes += 1;
    }
    drop(a);
    count_made(m, nodes, lets);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{Budget, Builtins};

    /// A round's calls as `write_round` takes them: Var 0, Scale 2 of it and a deltaLet of that at
    /// one span (`RHS_SAME`), an Add of the two, a deltaLet of a node of an earlier round (no
    /// `RHS_SAME`) and a Zero at another; its nodes from serial `first`, its ids from `id`.
    fn round(first: i64, id: i64) -> Vec<RoundItem> {
        let (s1, s2) = (Span::new(1, 4), Span::new(6, 9));
        let it = |call, span, x: f64, z: [i64; 2], at| RoundItem { call, span, x: [x, 0.0], z: [z[0], z[1], 0, 0], at };
        vec![
            it(CALL_VAR, s1, 0.0, [0, 0], first),
            it(CALL_SCALE, s1, 2.0, [first, 0], first + 1),
            it(CALL_DELTA_LET, s1, 0.0, [first + 1, 0], id),
            it(CALL_ADD, s2, 0.0, [first, first + 1], first + 2),
            it(CALL_DELTA_LET, s2, 0.0, [1, 0], id + 1),
            it(CALL_ZERO, s2, 0.0, [0, 0], first + 3),
        ]
    }

    fn setup(m: &mut Machine) {
        let st = m.state::<DeltaState>();
        (st.active, st.next_id) = (true, 5);
        m.state::<DeltaArena>().arena.borrow_mut().push(Kind::Zero, Span::new(20, 30));
    }

    /// What a machine's run holds: every node with its span, the bindings, the next id, the counters.
    fn held(m: &mut Machine) -> (Vec<(Kind, Span)>, Vec<(Ix, u32)>, i64, String) {
        let cost = format!("{:?}", m.cost().counters);
        let a = m.state::<DeltaArena>().arena.clone();
        let a = a.borrow();
        let st = m.state::<DeltaState>();
        let nodes = (0..a.len() as Ix).map(|ix| (a.kind(ix), a.span(ix))).collect();
        let binds = (0..st.binds.len()).filter_map(|i| st.binds.get(i).copied()).collect();
        (nodes, binds, st.next_id, cost)
    }

    /// The arguments rounds of `items` hand a sink, as a compiled round writes them (each call's
    /// reals, then its integers and handles, as many as its `RoundCall::args`).
    fn args_of(rounds: &[&[RoundItem]]) -> RoundArgs {
        let mut a = RoundArgs::default();
        for it in rounds.iter().flat_map(|r| r.iter()) {
            let c = &ROUND_CALLS.calls[it.call as usize];
            let nx = c.args.iter().filter(|&&k| k == RoundArg::Real).count();
            a.x.extend_from_slice(&it.x[..nx]);
            a.z.extend_from_slice(&it.z[..c.args.len() - nx]);
        }
        a
    }

    /// Two rounds handed to the sink in one batch hold what `write_round` writes for them round by
    /// round: the nodes and their spans, the bindings with their span indices and `RHS_SAME`, the
    /// ids and the counters; a batch with a call `write_round` refuses (a Scale of a node not made)
    /// is put back as it was taken, counters included, and says so. With `put` keeping a refused
    /// batch's bindings (`if false && !kept`) the second half fails (a binding of the round before
    /// the refusal left); with `write` taking a Scale's child unchecked, `put` keeps the batch.
    #[test]
    fn a_sinks_batch_holds_what_write_round_writes_and_a_refused_one_nothing() {
        let program = Program::default();
        let (r0, r1) = (round(2, 5), round(6, 7));
        let mut a = Machine::new(&program, &Builtins::new(), Budget::default()).unwrap();
        setup(&mut a);
        assert!(write_round(&mut a, &r0) && write_round(&mut a, &r1));
        let mut b = Machine::new(&program, &Builtins::new(), Budget::default()).unwrap();
        setup(&mut b);
        let s = take_sink(&mut b, [8, 4], &r0).unwrap();
        assert_eq!(s.firsts(), [2, 5]);
        assert!(s.put(&mut b, &args_of(&[&r0, &r1]), 2, true));
        let want = held(&mut a);
        assert_eq!(want.0.len(), 10);
        assert_eq!(want.1.iter().map(|&(_, s)| s & RHS_SAME != 0).collect::<Vec<_>>(), [true, false, true, false]);
        assert_eq!(held(&mut b), want);
        // a batch refused in its second round (its Scale of a node not made): nothing of it stays
        let r2 = round(10, 9);
        let mut bad = round(14, 11);
        bad[1].z[0] = 999;
        let s = take_sink(&mut b, [8, 4], &r2).unwrap();
        assert_eq!(s.firsts(), [10, 9]);
        assert!(!s.put(&mut b, &args_of(&[&r2, &bad]), 2, true));
        assert_eq!(held(&mut b), want);
        // nor of one not kept
        let s = take_sink(&mut b, [8, 4], &r2).unwrap();
        assert!(!s.put(&mut b, &args_of(&[&r2, &r2]), 2, false));
        assert_eq!(held(&mut b), want);
        // and the run goes on from there as write_round's
        assert!(write_round(&mut a, &r2));
        let s = take_sink(&mut b, [4, 2], &r2).unwrap();
        assert!(s.put(&mut b, &args_of(&[&r2]), 1, true));
        assert_eq!(held(&mut b), held(&mut a));
    }
}
