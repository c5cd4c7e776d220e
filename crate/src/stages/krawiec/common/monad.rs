//! The state monad M of Krawiec et al. §7.2, Fig. 10, at run time: M runs in direct style, its state
//! (a supply of DeltaIds and the bindings made so far) lives in the machine, and `runDelta` wraps the
//! bindings a run made around its result's Delta as nested `Let`s.

use crate::kit::delta::{child_arg, delta_ctor_builtins, delta_type, int_arg, delta_of, delta_value, mk, run_arena, DeltaArena, DeltaRef, Ix, Kind, SpanTable};
use crate::kit::delta::drev::m_type;
use crate::kit::delta::graph::Visits;
use crate::diag::Span;
use crate::interp::{Builtin, Machine, RoundArg, RoundCall, RoundCalls, RoundItem, RunError};
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
        let c = match m.state::<DeltaArena>().nodes_counter {
            Some(c) => c,
            None => {
                let c = m.counter_id("delta_nodes");
                m.state::<DeltaArena>().nodes_counter = Some(c);
                c
            }
        };
        let mut acc = d.ix;
        for i in (0..binds.len()).rev() {
            let Some(&(rhs, s)) = binds.get(i) else { break };
            let id = start.checked_add(i as i64).ok_or_else(|| RunError::runtime(span, "runDelta: DeltaIds past the integers"))?;
            m.count_at(c, 1);
            m.alloc(1)?;
            let sp = spans.get(s & !RHS_SAME);
            let ix = arena.try_borrow_mut().ok().and_then(|mut a| a.push_let(Kind::Let(id, rhs, acc), sp, s & RHS_SAME != 0));
            acc = ix.ok_or_else(|| RunError::runtime(sp, "the run's Delta arena cannot take another node"))?;
        }
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
};

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
    let counter = da.nodes_counter;
    if nodes > 0 {
        let c = counter.unwrap_or_else(|| m.counter_id("delta_nodes"));
        m.state::<DeltaArena>().nodes_counter = Some(c);
        m.count_at(c, nodes);
    }
    if lets > 0 {
        m.count("ids_allocated", lets);
    }
    true
}
