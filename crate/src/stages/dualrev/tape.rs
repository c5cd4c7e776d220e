//! `dualrev/tape`: "Was it taping all along?" Smeding & Vákár §10.3. The Contrib of an ID is known
//! in the forward pass, so the ID-generating state monad also carries the staging array and writes
//! each Contrib at its ID as the ID is generated (growing the array as needed). A real is then just
//! its primal and its ID, and SResolve is one descending sweep over the tape: classical taping,
//! with already-differentiated operations (partials and argument IDs) on the tape.

use super::common::*;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Fused, Graph, Machine, RoundRecord, RoundTape, RunError};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};
use crate::value::{ExtValue, Value};
use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

pub struct Tape;

static INFO: StageInfo = StageInfo {
    id: "dualrev/tape",
    paper: PAPER,
    section: "§10.3",
    title: "Taping: Contribs written during the forward pass",
    explanation: "In the Contrib stage the mapping from an ID to its Contrib is already known in the forward pass — \
the partials ∂ᵢop(x)(1) are computed there — but it only reaches the staging array when SCall stores it during the \
reverse pass. So extend the ID-generating state monad to carry the array and write each Contrib at its ID as the ID \
is generated: record c returns a fresh ID with c on the tape. Contribs now refer to their arguments by ID only, a real \
is (R, Z), and the reverse pass is a single sweep down the tape adding each adjoint times each partial into the \
arguments' adjoints. This is exactly classical taping, where the tape holds already-differentiated operations.",
    complexity: "O(T + I): one tape entry per ID, one sweep.",
    accepts: ACCEPTS,
};

fn tcontrib() -> Type {
    Type::con("Contrib", vec![])
}

/// D[R] = (R, Z)
pub fn real_ty(_c: &Type) -> Type {
    Type::tup(vec![Type::Real, Type::Int])
}

/// §10.3: `record c` returns a fresh ID with `c` on the tape (`RecordRule`, shared with §12).
const RULE: RecordRule = RecordRule { real: real_ty };

impl Stage for Tape {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let c = tv(1);
        let st = staged_ty(c.clone());
        let (r, z) = (Type::Real, Type::Int);
        let mut v = common_builtins();
        v.extend(array_builtins());
        v.extend([
            Builtin { name: "C0", scheme: Scheme::mono(tcontrib()), arity: 0, lazy_last: false, run: b_c },
            Builtin { name: "C1", scheme: Scheme::mono(Type::fun(r.clone(), Type::fun(z.clone(), tcontrib()))), arity: 2, lazy_last: false, run: b_c },
            Builtin {
                name: "C2",
                scheme: Scheme::mono(Type::fun(r.clone(), Type::fun(z.clone(), Type::fun(r.clone(), Type::fun(z.clone(), tcontrib()))))),
                arity: 4,
                lazy_last: false,
                run: b_c,
            },
            // record : Contrib → M Z: the next ID, with its Contrib written on the tape
            Builtin { name: "record", scheme: Scheme::mono(Type::fun(tcontrib(), m_ty(z.clone()))), arity: 1, lazy_last: false, run: b_record },
            Builtin { name: "SAlloc", scheme: scheme(&[1], Type::fun(z.clone(), m_ty(st.clone()))), arity: 1, lazy_last: false, run: b_salloc },
            // SCall : Z → dR ⊸ (Staged c → IO ()). Here SCall i z means "adj[i] += z": §10.2 notes that
            // with backpropagators as data SCall, as a call, disappears; the name is kept so the printed
            // program (and its snapshot) reads as in the earlier stages.
            Builtin {
                name: "SCall",
                scheme: scheme(&[1], Type::fun(z.clone(), Type::lin(r, Type::fun(st.clone(), m_ty(Type::Unit))))),
                arity: 3,
                lazy_last: false,
                run: b_scall,
            },
            Builtin { name: "SResolve", scheme: scheme(&[1], Type::fun(z, Type::fun(st, m_ty(iarray_ty())))), arity: 2, lazy_last: false, run: b_sresolve },
        ]);
        v
    }

    fn fused(&self) -> Vec<Fused> {
        ["C0", "C1", "C2"].map(|inner| Fused { outer: "record", inner, run: b_record_c, scalar: Some(b_record_edges), scalar_cid: None, round: Some(ROUND) }).into()
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut mo = Monadic::new(src.program, &RULE);
        let mut out = mo.program(src.program);
        let mut fr = mo.fr;
        let (s, t) = (src.input_type, src.output_type);
        // Interleave_R = λx. record [] >>= λi. pure ((x, i), λa. a @ i)
        let x = fr.name("x");
        let leaf = |x: Expr, fr: &mut Fresh| {
            let (i, a) = (fr.name("i"), fr.name("a"));
            bind(
                pvar(&i),
                app(builtin("record"), builtin("C0")),
                pure(pair(pair(x, var(&i)), lam(pvar(&a), apps(builtin("at"), [var(&a), var(&i)])))),
            )
        };
        let il = interleave_up(s, var(&x), &mut fr, &leaf);
        out.defs.push(def("interleave", lam(pvar(&x), il)));
        // Deinterleave_R (x, i) = (x, SCall i)
        let y = fr.name("y");
        let dl = deinterleave(t, var(&y), &mut fr, &leaf_scall("i"), &combine_io);
        out.defs.push(def("deinterleave", lam(pvar(&y), dl)));
        out.defs.push(def(WRAPPER, wrapper_fig10(&out, &mut fr, false)));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        stated_io(src, &real_ty(&cvar()))
    }


    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        let tape = std::mem::take(m.state::<TapeSt>());
        {
            let r = rt(m);
            tape.each(|i, a, j| {
                r.edges.insert((i as i64, j), a);
            });
        }
        *m.state::<TapeSt>() = tape;
        graph(m, "tape")
    }
}

// ---------------------------------------------------------------------------------------------
// Runtime

/// The tape: the Contrib (partials and argument IDs) of each ID, written in the forward pass. Flat
/// (issue 13): every Contrib's edges in one array, and per ID how many are its own, so the tape is
/// three growing arrays rather than one allocation per ID.
#[derive(Default)]
pub struct TapeSt {
    /// Per ID: how many edges its Contrib has (0 for an ID with no Contrib written). One byte an
    /// ID (issue 13, session 26: a (start, count) pair was 8): the IDs' Contribs are appended in ID
    /// order, so an ID's start is the sum of the counts before it, recovered as the sweep descends.
    pub counts: Vec<u8>,
    /// Each ID's start in `partials` and `args`, kept only once an entry was written out of ID
    /// order (IDs counted from 0 again: the entry replaced, its edges appended at the end), when
    /// the counts' sums are no longer the starts; empty before (`place`).
    pub starts: Vec<u32>,
    /// Every Contrib's edges, numbered from 0 in the order written, in chunks (`EdgeChunk`).
    pub chunks: Vec<EdgeChunk>,
}

/// Edges `base..` of the tape: their partials and argument IDs, as two flat arrays (12 bytes an
/// edge rather than 16). A chunk is never grown past the room it was made with: a full one is
/// followed by a new one, so a long tape is not copied as it grows (issue 13, session 40: the 4×
/// reallocations copied a third of the tape again, onto fresh pages). An ID's edges lie in one chunk.
#[derive(Default)]
pub struct EdgeChunk {
    base: usize,
    partials: Vec<f64>,
    args: Vec<u32>,
}

/// The most edges a chunk is made with room for (unless one batch of records needs more): 768 KB.
const CHUNK: usize = 1 << 16;

impl TapeSt {
    /// How many edges the tape holds.
    pub fn edges_len(&self) -> usize {
        self.chunks.last().map_or(0, |c| c.base + c.partials.len())
    }
    /// The last chunk, with room for `n` more edges: a new one where it has not (room for `n`, or
    /// four times the tape's edges up to `CHUNK`: a short run's tape stays small).
    fn room(&mut self, n: usize) -> &mut EdgeChunk {
        let len = self.edges_len();
        let fits = self.chunks.last().is_some_and(|c| c.partials.capacity() - c.partials.len() >= n && c.args.capacity() - c.args.len() >= n);
        if !fits {
            let cap = (4 * len).clamp(256, CHUNK).max(n);
            self.chunks.push(EdgeChunk { base: len, partials: Vec::with_capacity(cap), args: Vec::with_capacity(cap) });
        }
        let last = self.chunks.len() - 1;
        &mut self.chunks[last]
    }
    /// The partials and argument IDs of edges `start..start + n`, an ID's (empty outside the tape):
    /// in the chunk holding the last of them, as an ID's edges lie in one chunk.
    fn slices(&self, start: usize, n: usize) -> (&[f64], &[u32]) {
        if n == 0 {
            return (&[], &[]);
        }
        let (base, ps, js) = self.below(start.saturating_add(n));
        let range = start.checked_sub(base).map_or(0..0, |k| k..k + n);
        (ps.get(range.clone()).unwrap_or(&[]), js.get(range).unwrap_or(&[]))
    }
    /// The edges below `end` in the chunk holding edge `end - 1`: its base and its arrays up to
    /// `end` ((0, empty) where there is none).
    #[cold]
    fn below(&self, end: usize) -> (usize, &[f64], &[u32]) {
        let k = self.chunks.partition_point(|c| c.base < end);
        match k.checked_sub(1).and_then(|k| self.chunks.get(k)) {
            Some(c) => {
                let to = end - c.base;
                (c.base, c.partials.get(..to).unwrap_or(&c.partials), c.args.get(..to).unwrap_or(&c.args))
            }
            None => (0, &[], &[]),
        }
    }
    /// Where the edges of the IDs up to `hi` end: the start of the next one.
    fn end_after(&self, hi: usize) -> usize {
        match self.counts.get(..=hi) {
            Some(cs) if hi + 1 < self.counts.len() => cs.iter().map(|&c| c as usize).sum(),
            _ => self.edges_len(),
        }
    }
    /// ID `id`'s (start, count), IDs taken in descending order: `end` is where the edges of the ID
    /// above it start (first `end_after`), and becomes this one's start.
    #[inline(always)]
    fn down(&self, id: usize, end: &mut usize) -> (usize, usize) {
        let n = self.counts.get(id).map_or(0, |&c| c as usize);
        let start = match self.starts.get(id) {
            Some(&s) => s as usize,
            None => end.saturating_sub(n),
        };
        *end = start;
        (start, n)
    }
    /// The edges of `n` from `start` (empty outside the tape).
    fn edges(&self, start: usize, n: usize) -> impl Iterator<Item = (f64, i64)> + Clone + '_ {
        let (ps, js) = self.slices(start, n);
        ps.iter().zip(js).map(|(a, j)| (*a, *j as i64))
    }
    /// Each ID's Contrib in ascending order, as (ID, its edges).
    pub fn each(&self, mut f: impl FnMut(usize, f64, i64)) {
        let mut next = 0usize;
        for (i, &c) in self.counts.iter().enumerate() {
            let start = self.starts.get(i).map_or(next, |&s| s as usize);
            next = start + c as usize;
            for (a, j) in self.edges(start, c as usize) {
                f(i, a, j);
            }
        }
    }
}

/// A Contrib: at most two (partial, argument ID) edges (`C0`, `C1`, `C2`), kept inline.
#[derive(Debug)]
pub struct TContrib {
    n: u8,
    e: [(f64, i64); 2],
}

impl TContrib {
    pub fn edges(&self) -> &[(f64, i64)] {
        &self.e[..self.n as usize]
    }
}

fn show_edges(es: impl IntoIterator<Item = (f64, i64)>) -> String {
    let es: Vec<String> = es.into_iter().map(|(a, j)| format!("({}, {j})", crate::value::show_real(a))).collect();
    format!("[{}]", es.join(", "))
}

impl ExtValue for TContrib {
    fn type_name(&self) -> &'static str {
        "Contrib"
    }
    fn show(&self) -> String {
        show_edges(self.edges().iter().copied())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `C0`, `C1 a j`, `C2 a j b k`: the Contrib of the arguments (partial, ID)*.
fn contrib(m: &mut Machine, args: &[Value], span: Span) -> Result<TContrib, RunError> {
    m.alloc(1)?;
    let mut c = TContrib { n: 0, e: [(0.0, 0); 2] };
    for pair in args.chunks(2) {
        let e = c.e.get_mut(c.n as usize).ok_or_else(|| err(span, "Contrib: more than two edges"))?;
        *e = (want_real(&pair[0], span, "Contrib")?, want_int(&pair[1], span, "Contrib")?);
        c.n += 1;
    }
    Ok(c)
}

fn b_c(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    Ok(Value::Ext(Rc::new(contrib(m, args, span)?)))
}

fn b_record(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let c = args[0].ext::<TContrib>().ok_or_else(|| err(span, format!("record: expected a Contrib, got {}", args[0])))?;
    record(m, c.edges(), span)
}

/// `record (Ck …)` in one call (`Stage::fused`): the same counts and tape, no Contrib value.
fn b_record_c(m: &mut Machine, args: &mut Vec<Value>, [inner, outer]: [Span; 2]) -> Result<Value, RunError> {
    let c = contrib(m, args, inner)?;
    m.enter_builtin("record", outer);
    record(m, c.edges(), outer)
}

/// `b_record_c` given the Contrib's (partial, ID) edges unboxed (`interp::ScalarFusedFn`, at most
/// two: the engine passes `C0`'s, `C1`'s or `C2`'s): `contrib`'s allocation, then `record`.
fn b_record_edges(m: &mut Machine, es: &[(f64, i64)], [inner, outer]: [Span; 2]) -> Result<Value, RunError> {
    m.alloc(1)?;
    if es.len() > 2 {
        return Err(err(inner, "Contrib: more than two edges"));
    }
    m.enter_builtin("record", outer);
    record(m, es, outer)
}

/// `record (Ck …)` in a compiled round (`interp/round.rs`): `b_record_edges`'s counts (the
/// Contrib's allocation, genID's tick; `ids_allocated` added by `put_round`), its records written
/// straight onto the tape's arrays, taken out of the state for the round's batch (issue 13,
/// session 39: they were staged and copied at the batch's end, ~300 instructions a particle round).
const ROUND: RoundRecord = RoundRecord { steps: 1, allocs: 1, pairs: false, take: take_round, put: put_round };

/// The next `n` IDs, when `record` would take its plain path for each (the entry at the tape's end,
/// no ID or edge start past its range), and the tape's arrays to write them on.
fn take_round(m: &mut Machine, n: usize) -> Option<(i64, i64, RoundTape)> {
    let (r, t) = m.states::<Rt, TapeSt>()?;
    let first = r.next_id;
    let end = usize::try_from(first).ok()?.checked_add(n)?;
    let fits = t.starts.is_empty() && t.counts.len() == first as usize && u32::try_from(end).is_ok();
    let edges = t.edges_len().checked_add(2 * n)?;
    if !(fits && u32::try_from(edges).is_ok()) {
        return None;
    }
    // the last chunk, with room for the batch's edges (at most two a record): the round's `grow`
    // then only writes into it
    let c = t.room(2 * n);
    let (partials, args) = (std::mem::take(&mut c.partials), std::mem::take(&mut c.args));
    let tape = RoundTape { counts: std::mem::take(&mut t.counts), partials, args, pairs: vec![] };
    Some((0, first, tape))
}

/// The tape's arrays back, with the IDs of the records written on them (one for each of `spans`)
/// generated as `record` generates each.
fn put_round(m: &mut Machine, tape: RoundTape, spans: &[Span]) {
    let Some((r, t)) = m.states::<Rt, TapeSt>() else { return };
    t.counts = tape.counts;
    // (the chunk `take_round` took is still the last: nothing writes the tape in between)
    if let Some(c) = t.chunks.last_mut() {
        (c.partials, c.args) = (tape.partials, tape.args);
    }
    if !spans.is_empty() {
        r.fresh_round(spans);
        m.count("ids_allocated", spans.len() as u64);
    }
}

/// genID with the Contrib's edges `es` (partial, argument ID) written at the new ID: genID's step
/// and count, then one lookup of the ID counter's state and the tape's together, the ID and its
/// edges appended to the flat arrays (issue 13, session 16: two lookups and `new_id`'s own call
/// before). Messages and their order are genID's then the tape's, as before.
#[inline(always)]
fn record(m: &mut Machine, es: &[(f64, i64)], span: Span) -> Result<Value, RunError> {
    let mut js = [0u32; 2];
    for (k, &(_, j)) in es.iter().enumerate().take(2) {
        js[k] = u32::try_from(j).map_err(|_| out_of_range(j, span))?;
    }
    m.tick(1)?;
    m.count("ids_allocated", 1);
    let Some((r, t)) = m.states::<Rt, TapeSt>() else { return Err(err(span, "record: internal: one state")) };
    let i = r.fresh(span);
    let (Ok(at), Ok(start)) = (usize::try_from(i), u32::try_from(t.edges_len())) else {
        return Err(full(span));
    };
    t.write(at, start, es, &js);
    Ok(Value::Int(i))
}

impl TapeSt {
    /// ID `at`'s Contrib (at most two edges of `es`, their argument IDs `js`), its edges from
    /// `start` (the end of the tape), in one chunk.
    #[inline(always)]
    fn write(&mut self, at: usize, start: u32, es: &[(f64, i64)], js: &[u32; 2]) {
        let n = es.len().min(2);
        if self.counts.len() == at && self.starts.is_empty() {
            self.counts.push(n as u8);
        } else {
            place(self, at, start, n as u8);
        }
        // (each array grown once per record, not once per edge; the IDs pushed, as a copy of at
        // most two would call `memcpy`)
        if n == 0 {
            return;
        }
        let es = es.get(..n).unwrap_or(&[]);
        let c = self.room(n);
        c.partials.extend(es.iter().map(|&(a, _)| a));
        for &j in js.iter().take(n) {
            c.args.push(j);
        }
    }
}

#[cold]
fn out_of_range(j: i64, span: Span) -> RunError {
    err(span, format!("record: argument ID {j} out of range"))
}

#[cold]
fn full(span: Span) -> RunError {
    err(span, "record: the tape is full")
}

/// An entry not at the end of the tape: past it (IDs generated without a Contrib in between: the
/// gap's entries empty, so the counts' sums are still the starts) or before it (IDs counted from 0
/// again: the entry replaced and its edges at the end, so from here on each ID keeps its start).
#[cold]
fn place(t: &mut TapeSt, i: usize, start: u32, n: u8) {
    if t.starts.is_empty() {
        if t.counts.len() <= i {
            t.counts.resize(i, 0);
            t.counts.push(n);
            return;
        }
        let mut next = 0u32;
        t.starts = t
            .counts
            .iter()
            .map(|&c| {
                let s = next;
                next += c as u32;
                s
            })
            .collect();
    }
    if t.counts.len() <= i {
        t.counts.resize(i + 1, 0);
        t.starts.resize(i + 1, 0);
    }
    if let (Some(c), Some(s)) = (t.counts.get_mut(i), t.starts.get_mut(i)) {
        (*c, *s) = (n, start);
    }
}

/// `Staged c = Array dR`: the adjoints, with a flag per cell for "received a cotangent".
#[derive(Debug, Default)]
pub struct Adjoints(pub RefCell<Cells>);

/// The adjoint array as two flat arrays, the adjoints (0 where none was received) and the flags:
/// 9 bytes a cell rather than an `Option<f64>`'s 16 (issue 13: bytes per op).
#[derive(Debug, Default)]
pub struct Cells {
    adj: Vec<f64>,
    got: Vec<bool>,
}

impl Cells {
    fn new(n: usize) -> Cells {
        Cells { adj: vec![0.0; n], got: vec![false; n] }
    }
    /// Cell `i`'s adjoint, if it received one.
    #[inline]
    pub fn get(&self, i: usize) -> Option<f64> {
        self.got.get(i).and_then(|g| g.then(|| self.adj[i]))
    }
    /// `adj[i] += z` (a cell starts at 0); false when `i` is outside the array.
    #[inline]
    fn add(&mut self, i: usize, z: f64) -> bool {
        match (self.adj.get_mut(i), self.got.get_mut(i)) {
            (Some(a), Some(g)) => {
                *a += z;
                *g = true;
                true
            }
            _ => false,
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = Option<f64>> + '_ {
        self.adj.iter().zip(&self.got).map(|(a, g)| g.then_some(*a))
    }
    /// The rows `adj[k] -> v` of the first 64 cells that received a cotangent (a trace step's state).
    fn rows(&self) -> Vec<(String, f64)> {
        self.iter().take(64).enumerate().filter_map(|(k, c)| c.map(|x| (format!("adj[{k}]"), x))).collect()
    }
}

impl ExtValue for Adjoints {
    fn type_name(&self) -> &'static str {
        "Staged"
    }
    fn show(&self) -> String {
        arr_cells(self.0.borrow().iter())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn adj<'v>(v: &'v Value, span: Span) -> Result<&'v Adjoints, RunError> {
    v.ext::<Adjoints>().ok_or_else(|| err(span, format!("expected an adjoint array, got {v}")))
}

fn b_salloc(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let n = want_int(&args[0], span, "SAlloc")?.max(0) as usize;
    m.tick(n as u64 + 1)?;
    m.alloc(1)?;
    Ok(Value::Ext(Rc::new(Adjoints(RefCell::new(Cells::new(n))))))
}

/// `SCall i z`: adj[i] += z (§10.2: no backpropagator is called any more; see `builtins`).
fn b_scall(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let s = adj(&args[2], span)?;
    let z = want_real(&args[1], span, "SCall")?;
    let i = want_int(&args[0], span, "SCall")?;
    if i < 0 || !s.0.borrow_mut().add(i as usize, z) {
        return Err(err(span, format!("SCall: ID {i} outside the adjoint array")));
    }
    m.tick(1)?;
    record_edge(m, i, z);
    Ok(Value::Unit)
}

/// IDs `hi` down to `lo` of the sweep, untraced: how many were resolved and how many edges taken
/// (`end`: where the edges of the ID above `hi` start, as `TapeSt::down` takes it).
fn sweep(tape: &TapeSt, cells: &mut Cells, resolved: &mut Resolved, lo: usize, hi: usize, end: &mut usize) -> (u64, u64) {
    let (mut nc, mut ops) = (0u64, 0u64);
    resolved.cover(hi + 1);
    // The tape in ID order (no `starts`) and a lean run: the IDs' counts, visits and edges read as
    // slices, each ID without `down`'s, `get`'s and `add`'s lookups (issue 13, session 37).
    if let (true, Some(visits)) = (tape.starts.is_empty(), resolved.lean_visits()) {
        if let (Some(cs), Some(vs), true) = (tape.counts.get(lo..=hi), visits.get_mut(lo..=hi), hi < cells.adj.len().min(cells.got.len())) {
            let Cells { adj, got } = cells;
            // the edges below the sweep in the chunk it reads (each ID's are the last `n` of them),
            // the chunk below taken when they run out (an ID's edges are in one chunk)
            let (mut base, mut cps, mut cjs) = tape.below(*end);
            for ((id, &c), v) in (lo..hi + 1).zip(cs).zip(vs).rev() {
                let n = c as usize;
                if cps.len() < n {
                    (base, cps, cjs) = tape.below(base + cps.len());
                }
                let k = cps.len().saturating_sub(n);
                let (Some((rp, ps)), Some((rj, js))) = (cps.split_at_checked(k), cjs.split_at_checked(k)) else { break };
                (cps, cjs) = (rp, rj);
                if !got[id] {
                    continue;
                }
                let d = adj[id];
                nc += 1;
                *v = v.saturating_add(1);
                if ps.len() != n || js.len() != n {
                    continue;
                }
                ops += n as u64;
                for (a, &j) in ps.iter().zip(js) {
                    if let (Some(x), Some(g)) = (adj.get_mut(j as usize), got.get_mut(j as usize)) {
                        *x += a * d;
                        *g = true;
                    }
                }
            }
            *end = base + cps.len();
            return (nc, ops);
        }
    }
    for id in (lo..=hi).rev() {
        let (start, n) = tape.down(id, end);
        let Some(d) = cells.get(id) else { continue };
        nc += 1;
        resolved.add(id as i64, d);
        for (a, j) in tape.edges(start, n) {
            ops += 1;
            cells.add(j as usize, a * d);
        }
    }
    (nc, ops)
}

/// One sweep down the tape: for i descending with adjoint d: for each (a, j) on the tape at i: adj[j] += a · d
fn b_sresolve(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let s = adj(&args[1], span)?;
    let n = want_int(&args[0], span, "SResolve")?;
    let tape = std::mem::take(m.state::<TapeSt>());
    if m.tracing() {
        let rows = s.0.borrow().rows();
        trace_start(m, rows);
    }
    let mut i = n - 1;
    let mut res = Ok(());
    // interned on the first call, as `count` would: no counter where nothing was resolved
    let mut calls = None;
    // room for the IDs the loop can resolve (those of the adjoint array)
    let ids = usize::try_from(n).unwrap_or(0).min(s.0.borrow().adj.len());
    let mut resolved = Resolved::take(m, ids);
    // the adjoints borrowed once for the sweep (nothing else reads them until it ends; a borrow per
    // ID was a fifth of the sweep, issue 13)
    let mut cells = s.0.borrow_mut();
    let mut end = if i >= 0 { tape.end_after(i as usize) } else { 0 };
    while i >= 0 {
        // Where no trace step is recorded, the IDs whose ticks all fit (`tick_room`: no budget stop,
        // no clock check among them) are one tight loop over the flat tape, their steps, calls and
        // real ops counted at once (issue 13, session 25); the ID at an edge takes the step below.
        let room = if m.tracing() { 0 } else { m.tick_room() };
        if room > 0 {
            let k = room.min(i as u64 + 1);
            let lo = i + 1 - k as i64;
            m.tick_fitting(k);
            let (nc, ops) = sweep(&tape, &mut cells, &mut resolved, lo as usize, i as usize, &mut end);
            if nc > 0 {
                let c = *calls.get_or_insert_with(|| m.counter_id("backprop_calls"));
                m.count_at(c, nc);
            }
            m.real_ops_n(ops);
            i = lo - 1;
            continue;
        }
        if let Err(e) = m.tick(1) {
            res = Err(e);
            break;
        }
        let (start, k) = tape.down(i as usize, &mut end);
        if let Some(d) = cells.get(i as usize) {
            let c = *calls.get_or_insert_with(|| m.counter_id("backprop_calls"));
            m.count_at(c, 1);
            resolved.add(i, d);
            let entry = tape.edges(start, k);
            for (a, j) in entry.clone() {
                m.real_op();
                cells.add(j as usize, a * d);
            }
            if m.tracing() {
                let rows = cells.rows();
                let note = format!("resolve ID {i}: adjoint {} through tape entry {}", crate::value::show_real(d), show_edges(entry));
                trace_resolve(m, i, d, note, rows);
            }
        }
        i -= 1;
    }
    drop(cells);
    resolved.put(m);
    *m.state::<TapeSt>() = tape;
    res?;
    // frozen (§9's unsafeFreeze): the adjoints are the frozen array (0 where none was received), so
    // they are taken rather than copied; the staged array is not used after its resolve
    let frozen = std::mem::take(&mut *s.0.borrow_mut());
    m.tick(frozen.adj.len() as u64)?;
    Ok(iarr(frozen.adj))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tape of several chunks (256, 1,024, 4,096 edges, …), resolved by the lean sweep and by the
    /// step path, each in two parts as `tick_room` splits a resolve: every adjoint as the same edges
    /// in one flat list give it, the IDs at the chunks' ends among them.
    #[test]
    fn a_resolve_crosses_the_tapes_chunks() {
        let ids = 6000usize;
        let mut t = TapeSt::default();
        let mut flat: Vec<Vec<(f64, usize)>> = vec![];
        for at in 0..ids {
            let es: Vec<(f64, i64)> = match at % 3 {
                _ if at == 0 => vec![],
                0 => vec![(0.5, at as i64 - 1)],
                _ => vec![(1.0 + (at % 7) as f64 * 0.25, at as i64 - 1), (0.75, (at / 2) as i64)],
            };
            let js = [es.first().map_or(0, |e| e.1 as u32), es.get(1).map_or(0, |e| e.1 as u32)];
            t.write(at, t.edges_len() as u32, &es, &js);
            flat.push(es.iter().map(|&(a, j)| (a, j as usize)).collect());
        }
        assert!(t.chunks.len() >= 4, "{} chunks", t.chunks.len());
        let mut want = vec![0.0; ids];
        want[ids - 1] = 1.0;
        for id in (0..ids).rev() {
            for &(a, j) in &flat[id] {
                want[j] += a * want[id];
            }
        }
        for lean in [true, false] {
            let mut cells = Cells::new(ids);
            cells.add(ids - 1, 1.0);
            let mut resolved = Resolved::new(lean);
            let mut end = t.end_after(ids - 1);
            let (c1, o1) = sweep(&t, &mut cells, &mut resolved, 2345, ids - 1, &mut end);
            let (c2, o2) = sweep(&t, &mut cells, &mut resolved, 0, 2344, &mut end);
            assert_eq!(cells.adj, want, "lean {lean}");
            assert_eq!((c1 + c2, o1 + o2), (ids as u64, flat.iter().map(|es| es.len() as u64).sum()), "lean {lean}");
        }
    }

    /// The tape as `record` writes it, in and out of ID order, read back ascending (`each`) and
    /// descending (`down`, as SResolve's sweep reads it) as the (start, count) of each ID written.
    #[test]
    fn the_tapes_counts_give_each_ids_edges_in_and_out_of_order() {
        let mut t = TapeSt::default();
        let mut want: Vec<Vec<(f64, i64)>> = vec![];
        // IDs 0..6 in order (1 and 3 without edges), 9 past a gap, then 2 and 0 again from the start
        let writes: [(usize, &[(f64, i64)]); 8] =
            [(0, &[]), (1, &[(1.0, 0)]), (2, &[(2.0, 0), (3.0, 1)]), (3, &[]), (4, &[(4.0, 2)]), (9, &[(9.0, 4)]), (2, &[(5.0, 1)]), (0, &[(6.0, 9), (7.0, 4)])];
        for (k, (at, es)) in writes.into_iter().enumerate() {
            let js = [es.first().map_or(0, |e| e.1 as u32), es.get(1).map_or(0, |e| e.1 as u32)];
            t.write(at, t.edges_len() as u32, es, &js);
            if want.len() <= at {
                want.resize(at + 1, vec![]);
            }
            want[at] = es.to_vec();
            // before the first write out of order, the starts are the counts' sums
            assert_eq!(t.starts.is_empty(), k < 6, "write {k}");
            let mut got: Vec<Vec<(f64, i64)>> = vec![vec![]; t.counts.len()];
            t.each(|i, a, j| got[i].push((a, j)));
            assert_eq!(got, want, "ascending after write {k}");
            let hi = t.counts.len() - 1;
            let mut end = t.end_after(hi);
            for id in (0..=hi).rev() {
                let (start, n) = t.down(id, &mut end);
                assert_eq!(t.edges(start, n).collect::<Vec<_>>(), want[id], "ID {id} descending after write {k}");
            }
            // a resolve of fewer IDs than the tape holds starts below its end
            if want.len() < 3 {
                continue;
            }
            let mut end = t.end_after(1);
            assert_eq!(t.edges(t.down(1, &mut end).0, want[1].len()).collect::<Vec<_>>(), want[1], "ID 1 alone after write {k}");
        }
    }
}
