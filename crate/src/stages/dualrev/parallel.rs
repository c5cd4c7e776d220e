//! `dualrev/parallel`: fork-join parallelism. Smeding & Vákár §12, Figs. 12–15.
//! `s ||| t` (the paper's `s ⋆ t`) forks the running job α into jobs β and γ, which join into a new
//! job δ. IDs become compound `(job, seq)`; the ID monad records the job graph (`History = Start |
//! Fork jd0 jd1 jd2`, with the number of IDs of each job), and the resolve walks it backwards:
//! within a job from its highest ID down, and "forks in the primal become joins in the dual" — the
//! two subtasks of a fork are resolved independently (on two threads natively), then the history
//! before the fork.
//!
//! Decisions: the implementation the paper describes is §12 + §10.1 + §10.2; so that the resolve can
//! run on real threads, the Contribs are written during the forward pass into per-job tapes
//! (§10.3) — plain data, unlike closures. Inputs are numbered in the main job 0, whose IDs also hold
//! the gradient (as in the reference implementation); the job counter starts at 1 and each fork
//! takes three job IDs (j, j+1, j+2). Fig. 15's missing `resolveTask jd0` after the parallel children
//! and the final `freeze` are restored.

use super::common::*;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Fused, RoundRecord, RoundTape, Graph, GraphEdge, GraphGroup, GraphNode, Machine, RunError, TraceStep, Shown};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};
use crate::value::{ExtValue, Value};
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::rc::Rc;
use std::sync::Arc;

pub struct Parallel;

static INFO: StageInfo = StageInfo {
    id: "dualrev/parallel",
    paper: PAPER,
    section: "§12, Figs. 12–15",
    title: "Fork-join parallelism: compound IDs, the job graph, parallel resolve",
    explanation: "A parallel pair s ||| t forks the running job into two jobs that run s and t, and joins them into a \
new job that continues with the pair. Sequential IDs would order the two sides arbitrarily, so IDs become compound \
(job, seq): a job ID plus a counter within the job. The ID monad now carries a job descriptor — its history (Start, or \
Fork of the history before the fork and the two subtasks' final descriptors), its job ID, and how many IDs it made — \
and ⋆' is the only place the translation changes. The staging arrays become one array per job, sized from the \
history, and the resolve walks the job graph backwards: a job from its highest ID down, then the two subtasks of the \
fork that created it, independently (forks in the primal become joins in the dual), then the history before the \
fork. Two subtasks can add into the same earlier cell (an input, or a value shared across the fork), so those \
additions are atomic.",
    complexity: "O(T + I) work; the span follows the job graph (not analysed in the paper).",
    accepts: ACCEPTS,
};

fn cid() -> Type {
    Type::tup(vec![Type::Int, Type::Int])
}
fn contrib_ty() -> Type {
    Type::con("Contrib", vec![])
}
fn jobdescr() -> Type {
    Type::con("JobDescr", vec![])
}

/// D⁵_c[R] = (R, CID), the Contrib of the CID on the job's tape
pub fn real_ty(_c: &Type) -> Type {
    Type::tup(vec![Type::Real, cid()])
}

/// As §10.3's (`RecordRule`), with compound IDs.
const RULE: RecordRule = RecordRule { real: real_ty };

impl Stage for Parallel {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let c = tv(1);
        let st = staged_ty(c.clone());
        let r = Type::Real;
        let (a, b) = (tv(2), tv(3));
        let thunk = |t: Type| Type::fun(Type::Unit, m_ty(t));
        let mut v = vec![counted_builtin()];
        v.extend(array_builtins());
        v.extend([
            Builtin { name: "C0", scheme: Scheme::mono(contrib_ty()), arity: 0, lazy_last: false, run: b_c },
            Builtin { name: "C1", scheme: Scheme::mono(Type::fun(r.clone(), Type::fun(cid(), contrib_ty()))), arity: 2, lazy_last: false, run: b_c },
            Builtin {
                name: "C2",
                scheme: Scheme::mono(Type::fun(r.clone(), Type::fun(cid(), Type::fun(r.clone(), Type::fun(cid(), contrib_ty()))))),
                arity: 4,
                lazy_last: false,
                run: b_c,
            },
            // record : Contrib → M CID (genID, with the Contrib written at the new ID)
            Builtin { name: "record", scheme: Scheme::mono(Type::fun(contrib_ty(), m_ty(cid()))), arity: 1, lazy_last: false, run: b_record },
            // (⋆') : M a → M b → M (a, b), the sides as thunks
            Builtin {
                name: "fork",
                scheme: scheme(&[2, 3], Type::fun(thunk(a.clone()), Type::fun(thunk(b.clone()), m_ty(Type::tup(vec![a.clone(), b]))))),
                arity: 2,
                lazy_last: false,
                run: b_fork,
            },
            Builtin { name: "runJobs", scheme: scheme(&[2], Type::fun(m_ty(a.clone()), a)), arity: 1, lazy_last: true, run: b_run_jobs },
            Builtin { name: "getJob", scheme: Scheme::mono(m_ty(jobdescr())), arity: 0, lazy_last: false, run: b_get_job },
            Builtin { name: "SAlloc", scheme: scheme(&[1], Type::fun(jobdescr(), m_ty(st.clone()))), arity: 1, lazy_last: false, run: b_salloc },
            Builtin {
                name: "SCall",
                scheme: scheme(&[1], Type::fun(cid(), Type::lin(r, Type::fun(st.clone(), m_ty(Type::Unit))))),
                arity: 3,
                lazy_last: false,
                run: b_scall,
            },
            Builtin { name: "SResolve", scheme: scheme(&[1], Type::fun(jobdescr(), Type::fun(st, m_ty(iarray_ty())))), arity: 2, lazy_last: false, run: b_sresolve },
        ]);
        v
    }

    fn fused(&self) -> Vec<Fused> {
        ["C0", "C1", "C2"].map(|inner| Fused { outer: "record", inner, run: b_record_c, scalar: None, scalar_cid: Some(b_record_cids), round: Some(ROUND) }).into()
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut mo = Monadic::new(src.program, &RULE);
        mo.fork = true;
        let mut out = mo.program(src.program);
        let mut fr = mo.fr;
        let (s, t) = (src.input_type, src.output_type);
        // Interleave_R = λx. record [] >>= λi. pure ((x, i), λa. a @ snd i)   (inputs live in job 0)
        let x = fr.name("x");
        let leaf = |x: Expr, fr: &mut Fresh| {
            let (i, a) = (fr.name("i"), fr.name("a"));
            bind(
                pvar(&i),
                app(builtin("record"), builtin("C0")),
                pure(pair(pair(x, var(&i)), lam(pvar(&a), apps(builtin("at"), [var(&a), snd(var(&i))])))),
            )
        };
        let il = interleave_up(s, var(&x), &mut fr, &leaf);
        out.defs.push(def("interleave", lam(pvar(&x), il)));
        // Deinterleave_R (x, i) = (x, SCall i)
        let y = fr.name("y");
        let dl = deinterleave(t, var(&y), &mut fr, &leaf_scall("i"), &combine_io);
        out.defs.push(def("deinterleave", lam(pvar(&y), dl)));
        // grad (x, dy) = let (y, d, rebuild, jd) = runJobs (do (x', rebuild) ← interleave x; y' ← main x';
        //                    jd ← getJob; let (y, d) = deinterleave y' in pure (y, d, rebuild, jd))
        //                in (y, rebuild (runIO (do s ← SAlloc jd; _ ← d dy s; SResolve jd s)))
        let (x, dy, yv, d, rb, jd, x2, y2, sn) =
            (fr.name("x"), fr.name("dy"), fr.name("y"), fr.name("d"), fr.name("rebuild"), fr.name("jd"), fr.name("x'"), fr.name("y'"), fr.name("s"));
        let res = pure(tuple(vec![var(&yv), var(&d), var(&rb), var(&jd)]));
        let fwd = bind(
            ppair(pvar(&x2), pvar(&rb)),
            app(global("interleave"), var(&x)),
            bind(
                pvar(&y2),
                run_main(&out, var(&x2), &mut fr),
                bind(pvar(&jd), builtin("getJob"), let_(ppair(pvar(&yv), pvar(&d)), app(global("deinterleave"), var(&y2)), res)),
            ),
        );
        let io = bind(
            pvar(&sn),
            app(builtin("SAlloc"), var(&jd)),
            bind(pwild(), apps(var(&d), [var(&dy), var(&sn)]), apps(builtin("SResolve"), [var(&jd), var(&sn)])),
        );
        let body = let_(
            ptuple(vec![pvar(&yv), pvar(&d), pvar(&rb), pvar(&jd)]),
            app(builtin("runJobs"), fwd),
            pair(var(&yv), app(var(&rb), app(builtin("runIO"), io))),
        );
        out.defs.push(def(WRAPPER, lam(ppair(pvar(&x), pvar(&dy)), body)));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        stated_io(src, &real_ty(&cvar()))
    }


    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        let st = m.state::<ParSt>();
        let jd = st.last.clone()?;
        let n_inputs = rt(m).n_inputs;
        let st = m.state::<ParSt>();
        let mut offsets = vec![0u64; st.tapes.len() + 1];
        for (j, t) in st.tapes.iter().enumerate() {
            offsets[j + 1] = offsets[j] + t.len() as u64;
        }
        let total = offsets[st.tapes.len()];
        let limit = GRAPH_LIMIT as u64;
        let mut nodes = vec![];
        let mut edges = vec![];
        for (j, t) in st.tapes.iter().enumerate() {
            for (s, entry) in t.entries().enumerate() {
                let id = offsets[j] + s as u64;
                if id >= limit {
                    continue;
                }
                let input = j == 0 && (s as i64) < n_inputs;
                let adj = st.staged.as_ref().and_then(|v| v.ext::<PArr>()).and_then(|a| a.0.get(j)).and_then(|a| a.get(s)).and_then(load);
                nodes.push(GraphNode {
                    id,
                    ctor: if input { "input".into() } else { "Contrib".into() },
                    label: if input { format!("({j},{s}) input {s}") } else { format!("({j},{s})") },
                    delta_id: Some(id as i64),
                    value: adj.map(Shown::from),
                    shared: false,
                    visits: adj.map(|_| 1),
                    group: Some(format!("job {j}")),
                    span: None,
                });
                for (a, jj, ss) in entry {
                    let to = offsets[*jj as usize] + *ss as u64;
                    if to < limit {
                        edges.push(GraphEdge { from: id, to, label: crate::value::show_real(*a) });
                    }
                }
            }
        }
        // The job graph: a job after a join comes after the two subtasks' last jobs; a subtask's
        // first job comes after the job that forked.
        let mut after: std::collections::BTreeMap<u32, (u32, Vec<u32>)> = std::collections::BTreeMap::new();
        let mut stack = vec![jd];
        while let Some(job) = stack.pop() {
            after.entry(job.jid).or_default().0 = job.n;
            if let Hist::Fork(a, b, c) = &job.hist {
                after.entry(job.jid).or_default().1.extend([b.jid, c.jid]);
                for t in [b, c] {
                    after.entry(first_of(t)).or_default().1.push(a.jid);
                }
                stack.extend([a.clone(), b.clone(), c.clone()]);
            }
        }
        let groups = after
            .into_iter()
            .map(|(j, (n, aft))| {
                let label = match aft.len() {
                    0 => format!("job {j}: {n} IDs"),
                    1 => format!("job {j}: {n} IDs, forked from job {}", aft[0]),
                    _ => format!("job {j}: {n} IDs, after the join of jobs {} and {} (which can run at the same time)", aft[0], aft[1]),
                };
                GraphGroup { name: format!("job {j}"), label, after: aft.iter().map(|a| format!("job {a}")).collect() }
            })
            .collect();
        Some(Graph { nodes, edges, groups, omitted: total.saturating_sub(limit) })
    }
}

/// The first job of the task whose last job is `jd` (follow the histories back to a Start).
fn first_of(jd: &Arc<Job>) -> u32 {
    let mut cur = jd.clone();
    loop {
        let next = match &cur.hist {
            Hist::Start => return cur.jid,
            Hist::Fork(a, _, _) => a.clone(),
        };
        cur = next;
    }
}

// ---------------------------------------------------------------------------------------------
// Runtime

/// `JobDescr = (History, JID, Z)`
#[derive(Debug)]
pub struct Job {
    pub hist: Hist,
    pub jid: u32,
    pub n: u32,
}

#[derive(Debug)]
pub enum Hist {
    Start,
    /// (A) the history up to the fork in this task, (B), (C) the two subtasks' final descriptors
    Fork(Arc<Job>, Arc<Job>, Arc<Job>),
}

impl ExtValue for JobV {
    fn type_name(&self) -> &'static str {
        "JobDescr"
    }
    fn show(&self) -> String {
        show_job(&self.0)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[derive(Debug)]
pub struct JobV(pub Arc<Job>);

fn show_job(j: &Job) -> String {
    match &j.hist {
        Hist::Start => format!("(Start, {}, {})", j.jid, j.n),
        Hist::Fork(a, b, c) => format!("(Fork {} {} {}, {}, {})", show_job(a), show_job(b), show_job(c), j.jid, j.n),
    }
}

/// Per-run state: the running job (its history, ID and count), the job counter, the per-job tapes.
#[derive(Default)]
pub struct ParSt {
    pub hist: Option<Hist>,
    pub jid: u32,
    pub n: u32,
    pub next_job: u32,
    /// tapes[job] holds the Contrib of each (job, seq): (partial, argument job, argument seq) edges
    pub tapes: Vec<JobTape>,
    /// After the resolve: the staging arrays it filled (`PArr`), for the graph (kept, not copied:
    /// a copy was 16 bytes an ID at the run's peak).
    pub staged: Option<Value>,
    pub last: Option<Arc<Job>>,
}

impl ParSt {
    fn current(&mut self) -> Arc<Job> {
        Arc::new(Job { hist: self.hist.take().unwrap_or(Hist::Start), jid: self.jid, n: self.n })
    }
}

/// One job's tape, flat (issue 13): every Contrib's edges in one array, and per seq how many are its
/// own (one byte: its start is the sum of the counts before it, recovered as the resolve descends
/// and the graph ascends; issue 13, session 26: a (start, count) pair was 8 bytes), so a job's tape
/// is two growing arrays rather than one allocation per ID.
#[derive(Default, Clone)]
pub struct JobTape {
    counts: Vec<u8>,
    edges: Vec<(f64, u32, u32)>,
}

impl JobTape {
    /// How many IDs the job has written.
    pub fn len(&self) -> usize {
        self.counts.len()
    }
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
    /// Each seq's Contrib, ascending.
    pub fn entries(&self) -> impl Iterator<Item = &[(f64, u32, u32)]> + '_ {
        let mut next = 0usize;
        self.counts.iter().map(move |&c| {
            let start = next;
            next += c as usize;
            self.edges.get(start..next).unwrap_or(&[])
        })
    }
    /// Each seq's Contrib, descending (the resolve's order), as (seq, its edges).
    pub fn entries_down(&self) -> impl Iterator<Item = (usize, &[(f64, u32, u32)])> + '_ {
        let mut end = self.edges.len();
        self.counts.iter().enumerate().rev().map(move |(s, &c)| {
            let start = end.saturating_sub(c as usize);
            let es = self.edges.get(start..end).unwrap_or(&[]);
            end = start;
            (s, es)
        })
    }
    fn push(&mut self, es: &[(f64, u32, u32)]) -> Option<()> {
        u32::try_from(self.edges.len()).ok()?;
        self.counts.push(es.len() as u8);
        self.edges.extend_from_slice(es);
        Some(())
    }
}

/// A Contrib: at most two (partial, argument job, argument seq) edges (`C0`, `C1`, `C2`), kept inline.
#[derive(Debug)]
pub struct PContrib {
    n: u8,
    e: [(f64, u32, u32); 2],
}

fn show_pedges(es: &[(f64, u32, u32)]) -> String {
    let es: Vec<String> = es.iter().map(|(a, j, s)| format!("({}, ({j}, {s}))", crate::value::show_real(*a))).collect();
    format!("[{}]", es.join(", "))
}

impl ExtValue for PContrib {
    fn type_name(&self) -> &'static str {
        "Contrib"
    }
    fn show(&self) -> String {
        show_pedges(&self.e[..self.n as usize])
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn want_cid(v: &Value, span: Span) -> Result<(u32, u32), RunError> {
    // a pair of integers read in place (`want_pair` copies the items: 7 % of a gradient); anything
    // else takes the general path below for its message
    if let Value::Tuple(vs) = v {
        if let [Value::Int(j), Value::Int(s)] = &vs[..] {
            return Ok((*j as u32, *s as u32));
        }
    }
    let (j, s) = want_pair(v, span, "CID")?;
    let (j, s) = (want_int(&j, span, "CID")?, want_int(&s, span, "CID")?);
    Ok((j as u32, s as u32))
}

/// `C0`, `C1 a j`, `C2 a j b k`: the Contrib of the arguments (partial, CID)*.
fn contrib(m: &mut Machine, args: &[Value], span: Span) -> Result<PContrib, RunError> {
    m.alloc(1)?;
    let mut c = PContrib { n: 0, e: [(0.0, 0, 0); 2] };
    for pair in args.chunks(2) {
        let a = want_real(&pair[0], span, "Contrib")?;
        let (j, s) = want_cid(&pair[1], span)?;
        *c.e.get_mut(c.n as usize).ok_or_else(|| err(span, "Contrib: more than two edges"))? = (a, j, s);
        c.n += 1;
    }
    Ok(c)
}

fn b_c(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    Ok(Value::Ext(std::rc::Rc::new(contrib(m, args, span)?)))
}

fn b_record(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let Some(c) = args[0].ext::<PContrib>() else {
        return Err(err(span, format!("record: expected a Contrib, got {}", args[0])));
    };
    record(m, c, span)
}

/// `record (Ck …)` in one call (`Stage::fused`): the same counts and tape, no Contrib value.
fn b_record_c(m: &mut Machine, args: &mut Vec<Value>, [inner, outer]: [Span; 2]) -> Result<Value, RunError> {
    let c = contrib(m, args, inner)?;
    m.enter_builtin("record", outer);
    record(m, &c, outer)
}

/// `b_record_c` given the Contrib's (partial, CID) edges unboxed (`interp::ScalarFusedFn`, the CIDs
/// read in place from their slots): `contrib`'s allocation and IDs (`want_cid`'s), then `record`.
fn b_record_cids(m: &mut Machine, es: &[(f64, (i64, i64))], [inner, outer]: [Span; 2]) -> Result<Value, RunError> {
    m.alloc(1)?;
    let mut c = PContrib { n: 0, e: [(0.0, 0, 0); 2] };
    for &(a, (j, s)) in es {
        *c.e.get_mut(c.n as usize).ok_or_else(|| err(inner, "Contrib: more than two edges"))? = (a, j as u32, s as u32);
        c.n += 1;
    }
    m.enter_builtin("record", outer);
    record(m, &c, outer)
}

/// `record (Ck …)` in a compiled round (`interp/round.rs`): `b_record_cids`'s counts (the
/// Contrib's allocation, genID's tick; `ids_allocated` added by `put_round`), the round's records
/// written straight onto the running job's tape, taken out of the state for the round's batch
/// (issue 13, session 39: they were staged and copied at the batch's end).
const ROUND: RoundRecord = RoundRecord { steps: 1, allocs: 1, pairs: true, take: take_round, put: put_round };

/// The running job and its next seq, when the job's tape and seqs have room for `n` more records,
/// and the job's tape to write them on.
fn take_round(m: &mut Machine, n: usize) -> Option<(i64, i64, RoundTape)> {
    let st = m.state::<ParSt>();
    let tape = st.tapes.get_mut(st.jid as usize)?;
    let end = (st.n as usize).checked_add(n)?;
    let fits = tape.len() == st.n as usize && u32::try_from(end).is_ok() && u32::try_from(tape.edges.len().checked_add(2 * n)?).is_ok();
    if !fits {
        return None;
    }
    let taken = RoundTape { counts: std::mem::take(&mut tape.counts), pairs: std::mem::take(&mut tape.edges), ..RoundTape::default() };
    Some((st.jid as i64, st.n as i64, taken))
}

/// The job's tape back, with the records written on it (one for each of `spans`) counted as
/// `record` counts each.
fn put_round(m: &mut Machine, taken: RoundTape, spans: &[Span]) {
    let st = m.state::<ParSt>();
    let Some(tape) = st.tapes.get_mut(st.jid as usize) else { return };
    (tape.counts, tape.edges) = (taken.counts, taken.pairs);
    if !spans.is_empty() {
        st.n += spans.len() as u32;
        m.count("ids_allocated", spans.len() as u64);
    }
}

/// genID with the Contrib written on the running job's tape: returns (job, seq) and increments seq.
fn record(m: &mut Machine, c: &PContrib, span: Span) -> Result<Value, RunError> {
    let (n, e) = (c.n as usize, c.e);
    m.tick(1)?;
    m.count("ids_allocated", 1);
    let st = m.state::<ParSt>();
    let (j, s) = (st.jid, st.n);
    st.n += 1;
    let tape = &mut st.tapes[j as usize];
    debug_assert_eq!(tape.len(), s as usize);
    tape.push(&e[..n]).ok_or_else(|| err(span, "record: the tape is full"))?;
    Ok(Value::pair(Value::Int(j as i64), Value::Int(s as i64)))
}

/// f ⋆' g = λref jd0. do (j1, j2, j3) ← atomicModifyIORef' ref (λj. (j + 3, (j, j + 1, j + 2)))
///                       ((jd1, x), (jd2, y)) ← inParallel (f ref (Start, j1, 0)) (g ref (Start, j2, 0))
///                       return ((Fork jd0 jd1 jd2, j3, 0), (x, y))          (Fig. 14)
/// The interpreter is sequential: f runs, then g.
fn b_fork(m: &mut Machine, args: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    m.tick(1)?;
    m.count("forks", 1);
    let (f, g) = (args[0].clone(), args[1].clone());
    let st = m.state::<ParSt>();
    let (j1, j2, j3) = (st.next_job, st.next_job + 1, st.next_job + 2);
    st.next_job += 3;
    st.tapes.resize(j3 as usize + 1, JobTape::default());
    let jd0 = st.current();
    st.jid = j1;
    st.n = 0;
    let x = m.apply(f, Value::Unit)?;
    let st = m.state::<ParSt>();
    let jd1 = st.current();
    st.jid = j2;
    st.n = 0;
    let y = m.apply(g, Value::Unit)?;
    let st = m.state::<ParSt>();
    let jd2 = st.current();
    st.hist = Some(Hist::Fork(jd0, jd1, jd2));
    st.jid = j3;
    st.n = 0;
    Ok(Value::pair(x, y))
}

fn b_run_jobs(m: &mut Machine, args: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    {
        let st = m.state::<ParSt>();
        *st = ParSt { next_job: 1, tapes: vec![JobTape::default()], ..ParSt::default() };
    }
    let thunk = args.pop().unwrap_or(Value::Unit);
    m.apply(thunk, Value::Unit)
}

fn b_get_job(m: &mut Machine, _: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    let st = m.state::<ParSt>();
    let jd = st.current();
    // the job goes on: keep its history for later IDs
    st.hist = match &jd.hist {
        Hist::Start => None,
        Hist::Fork(a, b, c) => Some(Hist::Fork(a.clone(), b.clone(), c.clone())),
    };
    Ok(Value::Ext(std::rc::Rc::new(JobV(jd))))
}

/// `Staged c = Array (Array dR)`: one adjoint array per job (a flag per cell for "received a cotangent")
#[derive(Debug)]
pub struct PArr(pub Vec<Vec<AtomicU64>>);

const UNSET: u64 = u64::MAX; // a NaN pattern no addition produces

/// Job 0's cell i of a `PArr` (the frozen gradient's reader), 0 where none was received.
fn job0_cell(s: &dyn ExtValue, i: usize) -> Option<f64> {
    let a = s.as_any().downcast_ref::<PArr>()?.0.first()?;
    a.get(i).map(|x| load(x).unwrap_or(0.0))
}

impl ExtValue for PArr {
    fn type_name(&self) -> &'static str {
        "Staged"
    }
    fn show(&self) -> String {
        let jobs: Vec<String> = self.0.iter().take(16).map(|a| arr_cells(a.iter().map(load))).collect();
        format!("[{}]", jobs.join(", "))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn load(c: &AtomicU64) -> Option<f64> {
    let b = c.load(Ordering::Relaxed);
    (b != UNSET).then(|| f64::from_bits(b))
}

/// `cell += x` where no other thread touches the cells (the same sum as `atomic_add`'s).
#[inline]
fn add_alone(c: &AtomicU64, x: f64) {
    let cur = c.load(Ordering::Relaxed);
    let old = if cur == UNSET { 0.0 } else { f64::from_bits(cur) };
    c.store((old + x).to_bits(), Ordering::Relaxed);
}

/// Atomic `cell += x` (compare-and-swap on the bits).
fn atomic_add(c: &AtomicU64, x: f64) {
    let mut cur = c.load(Ordering::Relaxed);
    loop {
        let old = if cur == UNSET { 0.0 } else { f64::from_bits(cur) };
        match c.compare_exchange_weak(cur, (old + x).to_bits(), Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return,
            Err(now) => cur = now,
        }
    }
}

fn jobv(v: &Value, span: Span) -> Result<Arc<Job>, RunError> {
    v.ext::<JobV>().map(|j| j.0.clone()).ok_or_else(|| err(span, format!("expected a job descriptor, got {v}")))
}

fn parr<'v>(v: &'v Value, span: Span) -> Result<&'v PArr, RunError> {
    v.ext::<PArr>().ok_or_else(|| err(span, format!("expected the per-job staging arrays, got {v}")))
}

/// SAlloc jd: one array per job, of its n_α cells (read off the history).
fn b_salloc(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let jd = jobv(&args[0], span)?;
    let njobs = m.state::<ParSt>().tapes.len();
    let mut sizes = vec![0usize; njobs];
    let mut stack = vec![jd];
    while let Some(j) = stack.pop() {
        sizes[j.jid as usize] = j.n as usize;
        if let Hist::Fork(a, b, c) = &j.hist {
            stack.extend([a.clone(), b.clone(), c.clone()]);
        }
    }
    m.tick(sizes.iter().sum::<usize>() as u64 + njobs as u64)?;
    m.alloc(njobs as u64)?;
    let arrs = sizes.into_iter().map(|n| (0..n).map(|_| AtomicU64::new(UNSET)).collect()).collect();
    Ok(Value::Ext(std::rc::Rc::new(PArr(arrs))))
}

fn b_scall(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let s = parr(&args[2], span)?;
    let z = want_real(&args[1], span, "SCall")?;
    let (j, i) = want_cid(&args[0], span)?;
    let cell = s.0.get(j as usize).and_then(|a| a.get(i as usize)).ok_or_else(|| err(span, format!("SCall: ({j}, {i}) outside the staging arrays")))?;
    atomic_add(cell, z);
    m.tick(1)?;
    Ok(Value::Unit)
}

/// Work done by a resolve: cells resolved (backpropagator calls) and tape entries visited.
#[derive(Default, Clone, Copy)]
struct Work {
    calls: u64,
    entries: u64,
}

/// resolveJob (i − 1) arr: the job's cells from the highest seq down. `alone`: no other thread
/// resolves at the same time (the sequential resolve), so a cell's `+=` is a plain load and store
/// rather than a compare-and-swap (issue 13, session 25: a locked instruction per edge).
fn resolve_job(job: u32, tapes: &[JobTape], adj: &PArr, w: &mut Work, trace: &mut Option<&mut Vec<TraceStep>>, offsets: &[u64], alone: bool) {
    let Some(tape) = tapes.get(job as usize) else { return };
    for (s, entry) in tape.entries_down() {
        let Some(d) = load(&adj.0[job as usize][s]) else { continue };
        w.calls += 1;
        for (a, jj, ss) in entry {
            w.entries += 1;
            let c = &adj.0[*jj as usize][*ss as usize];
            if alone {
                add_alone(c, a * d);
            } else {
                atomic_add(c, a * d);
            }
        }
        if let Some(t) = trace.as_deref_mut() {
            t.push(TraceStep {
                kind: "resolve".into(),
                node: offsets.get(job as usize).map(|o| o + s as u64),
                span: None,
                factor: Some(d.into()),
                note: format!("resolve ({job}, {s}): adjoint {} through {}", crate::value::show_real(d), show_pedges(entry)),
                state: vec![(format!("({job},{s})"), d.into())],
                ..TraceStep::default()
            });
        }
    }
}

/// resolveTask (history, jid, i) = resolveJob (i − 1) (m @ jid) >> case history of
///   Start → return () ; Fork jd0 jd1 jd2 → inParallel (resolveTask jd1) (resolveTask jd2) >> resolveTask jd0   (Fig. 15)
/// Sequential and deterministic (left subtask first), with an explicit stack.
fn resolve_seq(jd: &Arc<Job>, tapes: &[JobTape], adj: &PArr, trace: &mut Option<&mut Vec<TraceStep>>, offsets: &[u64], alone: bool) -> Work {
    let mut w = Work::default();
    let mut stack = vec![jd.clone()];
    while let Some(j) = stack.pop() {
        if let Some(t) = trace.as_deref_mut() {
            let note = match &j.hist {
                Hist::Fork(_, b, c) => format!("job {}: {} IDs; then jobs {} and {} can run at the same time, then job {}", j.jid, j.n, b.jid, c.jid, hist_last(&j.hist)),
                Hist::Start => format!("job {}: {} IDs (the start of its task)", j.jid, j.n),
            };
            t.push(TraceStep { kind: "job".into(), note, ..TraceStep::default() });
        }
        resolve_job(j.jid, tapes, adj, &mut w, trace, offsets, alone);
        if let Hist::Fork(a, b, c) = &j.hist {
            stack.push(a.clone());
            stack.push(c.clone());
            stack.push(b.clone());
        }
    }
    w
}

fn hist_last(h: &Hist) -> u32 {
    match h {
        Hist::Fork(a, _, _) => a.jid,
        Hist::Start => 0,
    }
}

/// The same walk with the two subtasks of a fork on two threads, while threads remain.
#[cfg(not(target_arch = "wasm32"))]
fn resolve_par(jd: &Arc<Job>, tapes: &[JobTape], adj: &PArr, threads: usize) -> Work {
    let mut w = Work::default();
    let mut cur = jd.clone();
    loop {
        resolve_job(cur.jid, tapes, adj, &mut w, &mut None, &[], false);
        let next = match &cur.hist {
            Hist::Start => break,
            Hist::Fork(a, b, c) => {
                if threads > 1 {
                    let (wb, wc) = std::thread::scope(|sc| {
                        let h = std::thread::Builder::new()
                            .stack_size(64 << 20)
                            .spawn_scoped(sc, || resolve_par(b, tapes, adj, threads / 2))
                            .expect("spawn a resolve thread");
                        let wc = resolve_par(c, tapes, adj, threads - threads / 2);
                        (h.join().unwrap_or_default(), wc)
                    });
                    w.calls += wb.calls + wc.calls;
                    w.entries += wb.entries + wc.entries;
                } else {
                    let (wb, wc) = (resolve_seq(b, tapes, adj, &mut None, &[], false), resolve_seq(c, tapes, adj, &mut None, &[], false));
                    w.calls += wb.calls + wc.calls;
                    w.entries += wb.entries + wc.entries;
                }
                a.clone()
            }
        };
        cur = next;
    }
    w
}

/// Wall-clock time of the last resolve, natively (for measuring the parallel speed-up).
pub static LAST_RESOLVE_NANOS: AtomicU64 = AtomicU64::new(0);

/// Overrides `COTANGENT_THREADS` when nonzero (for tests and benchmarks).
pub static THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many threads the native resolve may use: `THREADS`, else `COTANGENT_THREADS`, else 1. With
/// one thread, or while a trace is recorded, the resolve is sequential and deterministic (the left
/// subtask first), as in wasm.
pub fn threads() -> usize {
    if cfg!(target_arch = "wasm32") {
        return 1;
    }
    match THREADS.load(Ordering::Relaxed) {
        0 => std::env::var("COTANGENT_THREADS").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1),
        n => n,
    }
}

/// SResolve jd (c, m) = resolveTask jd >> freeze (m @ 0): the gradient is job 0's adjoints.
fn b_sresolve(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let jd = jobv(&args[0], span)?;
    let s = parr(&args[1], span)?;
    let tapes = std::mem::take(&mut m.state::<ParSt>().tapes);
    let n_threads = threads();
    let tracing = m.tracing();
    let mut steps = vec![];
    #[cfg(not(target_arch = "wasm32"))]
    let t0 = std::time::Instant::now();
    let w = if n_threads > 1 && !tracing {
        #[cfg(not(target_arch = "wasm32"))]
        {
            resolve_par(&jd, &tapes, s, n_threads)
        }
        #[cfg(target_arch = "wasm32")]
        {
            resolve_seq(&jd, &tapes, s, &mut None, &[], true)
        }
    } else {
        let mut offsets = vec![0u64; tapes.len() + 1];
        for (j, t) in tapes.iter().enumerate() {
            offsets[j + 1] = offsets[j] + t.len() as u64;
        }
        resolve_seq(&jd, &tapes, s, &mut if tracing { Some(&mut steps) } else { None }, &offsets, true)
    };
    #[cfg(not(target_arch = "wasm32"))]
    LAST_RESOLVE_NANOS.store(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    for t in steps {
        m.trace(t);
    }
    m.count("backprop_calls", w.calls);
    // one real operation per entry followed, all of them (a loop of `real_op` capped at 2^20 undercounted
    // longer resolves)
    m.real_ops_n(w.entries);
    m.tick(w.calls + w.entries + 1)?;
    // freeze (m @ 0), §9's unsafeFreeze: job 0's cells themselves, viewed (0 where none was received)
    let n0 = s.0.first().map_or(0, |a| a.len());
    let Value::Ext(staged) = args[1].clone() else { return Err(err(span, "SResolve: expected the staging arrays")) };
    let frozen = IArr::View(staged.clone(), job0_cell, n0);
    let st = m.state::<ParSt>();
    st.tapes = tapes;
    st.staged = Some(Value::Ext(staged));
    st.last = Some(jd);
    Ok(Value::Ext(Rc::new(frozen)))
}

#[cfg(test)]
mod tests {
    use super::JobTape;

    /// A job's tape keeps an edge count per seq: read back ascending (the graph) and descending (the
    /// resolve), each seq gets the edges pushed for it.
    #[test]
    fn a_job_tapes_counts_give_each_seqs_edges_both_ways() {
        let pushed: [&[(f64, u32, u32)]; 5] = [&[], &[(1.0, 0, 0)], &[(2.0, 0, 1), (3.0, 0, 0)], &[], &[(4.0, 0, 2)]];
        let mut t = JobTape::default();
        for es in pushed {
            t.push(es).expect("room");
        }
        assert_eq!(t.len(), 5);
        assert_eq!(t.entries().collect::<Vec<_>>(), pushed.to_vec());
        let down: Vec<(usize, &[(f64, u32, u32)])> = t.entries_down().collect();
        assert_eq!(down, pushed.iter().copied().enumerate().rev().collect::<Vec<_>>());
    }
}
