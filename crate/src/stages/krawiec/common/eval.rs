//! eval (Krawiec et al. §7.2, Fig. 10): the backward pass over a Let-wrapped Delta, body first, with
//! any DeltaMap (the persistent map here, §7.3's mutable array in `krawiec/array`), and the map's
//! builtins (Fig. 10's API, and Fig. 15's lookup at a dual number's Delta).

use crate::kit::delta::{delta_arg, delta_type, int_arg, real_arg, Arena, DeltaRef, Ix, Kind, Reader, STATE_ROWS};
use crate::kit::delta::graph::{delta_graph, Visits};
use super::monad::DeltaState;
use crate::diag::Span;
use crate::interp::{Builtin, Graph, Machine, RunError, TraceStep, Shown};
use crate::ir::*;
use crate::value::{show_real, ExtValue, Value};
use crate::kit::pmap::PMap;
use std::any::Any;
use rustc_hash::FxHashSet as HashSet;
use std::rc::Rc;

/// A DeltaMap: cotangents by DeltaId.
pub(crate) trait Adjoints {
    /// `addDelta id x`
    fn add(&mut self, id: i64, x: f64) -> Result<(), String>;
    /// `lookup id`, then `delete id` when present.
    fn take(&mut self, id: i64) -> Result<Option<f64>, String>;
    /// The entries, for a trace step.
    fn rows(&self) -> Vec<(String, f64)>;
    /// Called once tracing has stopped: no more rows will be asked for.
    fn stop_rows(&mut self) {}
}

enum Frame {
    Visit(f64, Ix),
    /// The Lets `next ..= last` whose bodies are being evaluated, `next` the innermost: what would be
    /// one `AfterLet` frame per Let of the spine (runDelta makes a spine's Lets at consecutive
    /// indices, innermost first), as one frame (issue 13: at 10^6 the spine's frames were 32 bytes a
    /// primal op of horner, the eval's peak).
    AfterLets { next: Ix, last: Ix },
}

/// Pushes `AfterLet n`: onto the run on top when n is just below it (the Let whose body the top
/// one is), else as a run of its own. The frames popped are the same, in the same order.
fn push_after_let(stack: &mut Vec<Frame>, n: Ix) {
    if let Some(Frame::AfterLets { next, .. }) = stack.last_mut() {
        if n.checked_add(1) == Some(*next) {
            *next = n;
            return;
        }
    }
    stack.push(Frame::AfterLets { next: n, last: n });
}

/// A frame as the plain stack of Fig. 10's eval would hold it.
#[derive(Debug, PartialEq)]
enum Popped {
    Visit(f64, Ix),
    AfterLet(Ix),
}

/// Pops the top frame: a visit, or the innermost Let of the run on top.
fn pop_frame(stack: &mut Vec<Frame>) -> Option<Popped> {
    match stack.pop()? {
        Frame::Visit(x, n) => Some(Popped::Visit(x, n)),
        Frame::AfterLets { next, last } => {
            if next < last {
                stack.push(Frame::AfterLets { next: next + 1, last });
            }
            Some(Popped::AfterLet(next))
        }
    }
}

/// `eval x u um` (Fig. 10), iteratively over an explicit stack (the Let spine is as long as the run):
/// ```text
/// eval x Zero um            = um
/// eval x (Scale y u) um     = eval (x × y) u um
/// eval x (Add u1 u2) um     = eval x u2 (eval x u1 um)
/// eval x (Var uid) um       = addDelta uid x um
/// eval x (Let uid u1 u2) um = let um2 = eval x u2 um in
///                             case lookup uid um2 of Nothing → um2
///                                                    Just x  → eval x u1 (delete uid um2)
/// ```
pub(crate) fn eval_loop<A: Adjoints + ?Sized>(
    m: &mut Machine,
    x: f64,
    root: &DeltaRef,
    um: &mut A,
    visits: &mut Visits,
    skipped: &mut HashSet<u64>,
    span: Span,
) -> Result<(), RunError> {
    let Ok(ar) = root.arena.try_borrow() else { return Err(RunError::runtime(span, "eval: the Delta is being built")) };
    let ar: &Arena = &ar;
    // the nodes read through a reader that keeps the blocks read lately decoded (issue 13)
    let mut rd = ar.reader();
    // the Lets after their bodies read through a reader of their own: they are read in a run up
    // the spine, between the nodes of their right-hand sides, which took the other's slots
    let mut lets = ar.reader();
    let mut stack: Vec<Frame> = vec![Frame::Visit(x, root.ix)];
    let mut rows = true;
    let err = |msg: String| RunError::runtime(span, format!("eval: {msg}"));
    loop {
        // untraced, the frames whose ticks all fit (`tick_room`: no budget stop, no clock check
        // among them) go through the lean loop, their steps and real ops counted at once (issue 13,
        // as dualrev/tape's resolve does); the frame at an edge takes the step below
        if !m.tracing() {
            if rows {
                rows = false;
                um.stop_rows();
            }
            let room = m.tick_room();
            if room > 0 {
                let (steps, ops, res) = eval_lean([&mut rd, &mut lets], room, &mut stack, um, visits, skipped);
                m.tick_fitting(steps);
                m.real_ops_n(ops);
                match res {
                    Ok(true) => continue,
                    Ok(false) => break,
                    Err(msg) => return Err(err(msg)),
                }
            }
        }
        let Some(f) = pop_frame(&mut stack) else { break };
        let (kind, node, k, factor) = match f {
            Popped::Visit(x, n) => {
                visits.visit(n as u64);
                m.tick(1)?;
                let k = rd.kind(n);
                match k {
                    Kind::Zero => {}
                    Kind::Scale(y, u) => {
                        m.real_op();
                        stack.push(Frame::Visit(x * y, u));
                    }
                    Kind::Add(a, b) => {
                        stack.push(Frame::Visit(x, b));
                        stack.push(Frame::Visit(x, a));
                    }
                    Kind::Var(id) => {
                        m.real_op();
                        um.add(id, x).map_err(err)?;
                    }
                    Kind::Let(_, _, body) => {
                        push_after_let(&mut stack, n);
                        stack.push(Frame::Visit(x, body));
                    }
                    Kind::OneHot(_) | Kind::Input(_) | Kind::Share(..) => {
                        return Err(err(format!("{} is not in Fig. 10's Delta (inputs are Var i)", k.ctor())))
                    }
                }
                ("eval", n, k, x)
            }
            Popped::AfterLet(n) => {
                m.tick(1)?;
                let k = lets.kind(n);
                let Kind::Let(id, rhs, _) = k else { return Err(err("a frame after a Let holds no Let".into())) };
                match um.take(id).map_err(err)? {
                    None => {
                        skipped.insert(n as u64);
                        ("skip", n, k, 0.0)
                    }
                    Some(v) => {
                        stack.push(Frame::Visit(v, rhs));
                        ("let", n, k, v)
                    }
                }
            }
        };
        if rows {
            if m.tracing() {
                let state = um.rows();
                let span = ar.span(node);
                let span = (!span.is_none()).then_some(span);
                let note = eval_note(kind, k, factor);
                m.trace(TraceStep { kind: kind.into(), node: Some(node as u64), span, factor: Some(factor.into()), note, state: Shown::rows(state), ..TraceStep::default() });
            } else {
                rows = false;
                um.stop_rows();
            }
        }
    }
    Ok(())
}

/// At most `room` frames of `eval_loop`, untraced: the frames it pops, visits and evaluates, in the
/// same order and with the same visits, adds and takes, each counted (a step each, a real op a
/// Scale and a Var) to be added at once: (steps, real ops, `Ok(more frames left)` or what failed).
/// The first child of a node is evaluated next without going through the stack (pushed back if
/// the room ends there), where `eval_loop` pushes it and pops it at once.
fn eval_lean<A: Adjoints + ?Sized>(
    [rd, lets]: [&mut Reader<'_>; 2],
    room: u64,
    stack: &mut Vec<Frame>,
    um: &mut A,
    visits: &mut Visits,
    skipped: &mut HashSet<u64>,
) -> (u64, u64, Result<bool, String>) {
    let (mut steps, mut ops) = (0u64, 0u64);
    let mut next: Option<(f64, Ix)> = None;
    while steps < room {
        let f = match next.take() {
            Some((x, n)) => Popped::Visit(x, n),
            None => match pop_frame(stack) {
                Some(f) => f,
                None => return (steps, ops, Ok(false)),
            },
        };
        steps += 1;
        match f {
            Popped::Visit(x, n) => {
                visits.visit(n as u64);
                match rd.kind(n) {
                    Kind::Zero => {}
                    Kind::Scale(y, u) => {
                        ops += 1;
                        next = Some((x * y, u));
                    }
                    Kind::Add(a, b) => {
                        stack.push(Frame::Visit(x, b));
                        next = Some((x, a));
                    }
                    Kind::Var(id) => {
                        ops += 1;
                        if let Err(e) = um.add(id, x) {
                            return (steps, ops, Err(e));
                        }
                    }
                    Kind::Let(_, _, body) => {
                        push_after_let(stack, n);
                        // runDelta's spine below it (the Lets at body, body − 1, …, each the next
                        // one's body): visited at once, their frames pushed onto the run on top,
                        // as the frames one by one would do (`Reader::let_spine`)
                        let k = if body.checked_add(1) == Some(n) { rd.let_spine(body, room - steps) } else { 0 };
                        if k > 0 {
                            visits.visit_down(body as u64, k);
                            steps += k;
                            let low = body - (k as Ix - 1);
                            for l in (low..=body).rev() {
                                push_after_let(stack, l);
                            }
                            next = Some((x, low - 1));
                        } else {
                            next = Some((x, body));
                        }
                    }
                    k @ (Kind::OneHot(_) | Kind::Input(_) | Kind::Share(..)) => {
                        return (steps, ops, Err(format!("{} is not in Fig. 10's Delta (inputs are Var i)", k.ctor())))
                    }
                }
            }
            Popped::AfterLet(n) => {
                let Kind::Let(id, rhs, _) = lets.kind(n) else { return (steps, ops, Err("a frame after a Let holds no Let".into())) };
                match um.take(id) {
                    Err(e) => return (steps, ops, Err(e)),
                    Ok(None) => {
                        skipped.insert(n as u64);
                    }
                    Ok(Some(v)) => next = Some((v, rhs)),
                }
            }
        }
    }
    if let Some((x, n)) = next {
        stack.push(Frame::Visit(x, n));
    }
    (steps, ops, Ok(!stack.is_empty()))
}

/// What an eval step did, in words (built only for traced steps).
fn eval_note(kind: &str, k: Kind, x: f64) -> String {
    match (kind, k) {
        ("skip", Kind::Let(id, ..)) => format!("lookup {id} = Nothing: the binding is dead, skip its right-hand side"),
        ("let", Kind::Let(id, ..)) => format!("lookup {id} = Just {}; delete {id}; eval its right-hand side scaled by it", show_real(x)),
        (_, Kind::Let(id, ..)) => format!("Let {id}: the body first"),
        (_, Kind::Scale(y, _)) => format!("Scale {}: factor becomes {}", show_real(y), show_real(x * y)),
        (_, Kind::Add(..)) => "Add: u1, then u2".to_string(),
        (_, Kind::Var(id)) => format!("addDelta {id} ({})", show_real(x)),
        _ => "Zero: nothing to add".to_string(),
    }
}

/// The persistent map (Fig. 10's `Map DeltaId dR`): a balanced tree, O(log n) per operation.
#[derive(Debug, Clone, Default)]
pub struct DeltaMapVal(pub PMap<i64, f64>);

impl ExtValue for DeltaMapVal {
    fn type_name(&self) -> &'static str {
        "DeltaMap"
    }
    fn show(&self) -> String {
        let mut items: Vec<String> = self.0.iter().take(12).map(|(k, v)| format!("{k} ↦ {}", show_real(*v))).collect();
        if self.0.size() > 12 {
            items.push(format!("… ({} entries)", self.0.size()));
        }
        format!("{{{}}}", items.join(", "))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Adjoints for PMap<i64, f64> {
    fn add(&mut self, id: i64, x: f64) -> Result<(), String> {
        // insertWith (+) in one descent: an id present added to, an absent one inserted as
        // 0 + x (as before: a −0 added to nothing is 0)
        self.insert_with(id, 0.0 + x, |v, _| *v += x);
        Ok(())
    }
    fn take(&mut self, id: i64) -> Result<Option<f64>, String> {
        // lookup and delete in one descent
        Ok(self.remove_mut(&id))
    }
    fn rows(&self) -> Vec<(String, f64)> {
        self.iter().take(STATE_ROWS).map(|(k, v)| (k.to_string(), *v)).collect()
    }
}

pub fn map_type() -> Type {
    Type::con("DeltaMap", vec![])
}

fn map_arg(v: &Value, span: Span, what: &str) -> Result<PMap<i64, f64>, RunError> {
    v.ext::<DeltaMapVal>().map(|m| m.0.clone()).ok_or_else(|| RunError::runtime(span, format!("{what} expects a DeltaMap, got {v}")))
}

/// Keeps what eval did for the graph.
pub(crate) fn record_eval(m: &mut Machine, root: &DeltaRef, mut visits: Visits, skipped: HashSet<u64>, res: &mut Result<(), RunError>) {
    visits.flush(m, res);
    let st = m.state::<DeltaState>();
    if st.root.is_none() {
        st.root = Some(root.clone());
    }
    st.visits.merge(visits);
    st.skipped.extend(skipped);
}

fn b_eval(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let x = real_arg(&args[0], span, "eval")?;
    let root = delta_arg(&args[1], span, "eval")?;
    let mut um = map_arg(&args[2], span, "eval")?;
    // the argument's hold let go: a map no one else holds is then updated in place, not copied
    args[2] = Value::Unit;
    let (mut visits, mut skipped) = (Visits::of(m), HashSet::default());
    let mut res = eval_loop(m, x, &root, &mut um, &mut visits, &mut skipped, span);
    record_eval(m, &root, visits, skipped, &mut res);
    res?;
    m.alloc(1)?;
    Ok(Value::Ext(Rc::new(DeltaMapVal(um))))
}

fn b_empty_map(m: &mut Machine, _args: &mut Vec<Value>, _span: Span) -> Result<Value, RunError> {
    m.alloc(1)?;
    Ok(Value::Ext(Rc::new(DeltaMapVal::default())))
}

fn b_lookup_or_zero(_m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let id = int_arg(&args[0], span, "lookupOrZero")?;
    let um = map_arg(&args[1], span, "lookupOrZero")?;
    Ok(Value::Real(um.get(&id).copied().unwrap_or(0.0)))
}

/// `lookupDelta u um`: Fig. 15's lookup_R at a dual number's Delta: `lookupOrZero uid um` for
/// `Var uid`, 0 for `Zero` (the pattern match on Delta that lookup_S does).
fn b_lookup_delta(_m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let d = delta_arg(&args[0], span, "lookupDelta")?;
    let um = map_arg(&args[1], span, "lookupDelta")?;
    let k = d.arena.try_borrow().map(|a| a.kind(d.ix)).unwrap_or_default();
    match k {
        Kind::Var(id) => Ok(Value::Real(um.get(&id).copied().unwrap_or(0.0))),
        Kind::Zero => Ok(Value::Real(0.0)),
        _ => Err(RunError::runtime(span, "lookupDelta: an input's Delta is Var id or Zero")),
    }
}

/// The map API of Fig. 10 (eval, emptyMap, lookupOrZero), and lookupDelta for Fig. 15.
pub(crate) fn map_builtins() -> Vec<Builtin> {
    let (d, um, r, z) = (delta_type(), map_type(), Type::Real, Type::Int);
    vec![
        Builtin {
            name: "eval",
            scheme: Scheme::mono(Type::fun(r.clone(), Type::fun(d.clone(), Type::lin(um.clone(), um.clone())))),
            arity: 3,
            lazy_last: false,
            run: b_eval,
        },
        Builtin { name: "emptyMap", scheme: Scheme::mono(um.clone()), arity: 0, lazy_last: false, run: b_empty_map },
        Builtin {
            name: "lookupOrZero",
            scheme: Scheme::mono(Type::fun(z, Type::fun(um.clone(), r.clone()))),
            arity: 2,
            lazy_last: false,
            run: b_lookup_or_zero,
        },
        Builtin {
            name: "lookupDelta",
            scheme: Scheme::mono(Type::fun(d, Type::fun(um, r))),
            arity: 2,
            lazy_last: false,
            run: b_lookup_delta,
        },
    ]
}

pub(crate) fn graph_of_state(m: &mut Machine) -> Option<Graph> {
    let st = m.state::<DeltaState>();
    let root = st.root.clone()?;
    Some(delta_graph(&root, &st.visits, &st.skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{Budget, Builtins};
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    /// A DeltaMap that logs every add and take, and refuses an add to id `bad`.
    #[derive(Default)]
    struct Logged {
        map: BTreeMap<i64, f64>,
        log: Vec<(bool, i64, Option<f64>)>,
        bad: i64,
    }

    impl Adjoints for Logged {
        fn add(&mut self, id: i64, x: f64) -> Result<(), String> {
            self.log.push((true, id, Some(x)));
            if id == self.bad {
                return Err(format!("no {id}"));
            }
            *self.map.entry(id).or_default() += x;
            Ok(())
        }
        fn take(&mut self, id: i64) -> Result<Option<f64>, String> {
            let v = self.map.remove(&id);
            self.log.push((false, id, v));
            Ok(v)
        }
        fn rows(&self) -> Vec<(String, f64)> {
            self.map.iter().take(3).map(|(k, v)| (k.to_string(), *v)).collect()
        }
    }

    /// A Let-wrapped Delta as runDelta makes one: `lets` bindings, each a Scale or an Add of Vars
    /// of earlier ids and earlier nodes (some ids never added to: their Lets are skipped), the
    /// spine at consecutive serials, innermost first.
    fn let_wrapped(lets: u32) -> DeltaRef {
        let mut a = Arena::default();
        let sp = Span::new(1, 2);
        let mut rhss = vec![];
        for i in 0..lets {
            let v = a.push(Kind::Var((i as i64 * 7) % (i as i64 + 1)), sp).unwrap();
            let n = match i % 4 {
                0 => a.push(Kind::Scale(0.5 + i as f64, v), sp).unwrap(),
                1 => a.push(Kind::Add(v, rhss.last().copied().unwrap_or(v)), sp).unwrap(),
                2 => a.push(Kind::Zero, sp).unwrap(),
                _ => {
                    let s = a.push(Kind::Scale(-1.5, v), sp).unwrap();
                    a.push(Kind::Add(s, v), sp).unwrap()
                }
            };
            rhss.push(n);
        }
        let mut acc = a.push(Kind::Var(lets as i64 - 1), sp).unwrap();
        for (i, &rhs) in rhss.iter().enumerate().rev() {
            acc = a.push(Kind::Let(i as i64, rhs, acc), sp).unwrap();
        }
        DeltaRef { arena: Rc::new(RefCell::new(a)), ix: acc }
    }

    /// What an eval did: the adds and takes in order, the visits, the Lets skipped, the counts,
    /// and the error's message (`traced`: every frame through the traced step, none lean).
    fn run(root: &DeltaRef, traced: bool, steps: u64, bad: i64) -> (Vec<(bool, i64, Option<f64>)>, Vec<u64>, Vec<u64>, u64, u64, Option<String>) {
        let program = Program::default();
        let budget = Budget { steps, trace_steps: if traced { usize::MAX } else { 0 }, ..Budget::default() };
        let mut m = Machine::new(&program, &Builtins::new(), budget).unwrap();
        let mut um = Logged { bad, ..Logged::default() };
        let (mut visits, mut skipped) = (Visits::of(&m), HashSet::default());
        let res = eval_loop(&mut m, 1.0, root, &mut um, &mut visits, &mut skipped, Span::NONE);
        let n = root.arena.borrow().len() as u64;
        let mut skipped: Vec<u64> = skipped.into_iter().collect();
        skipped.sort();
        assert_eq!(m.tracing(), traced);
        let cost = m.cost();
        (um.log, (0..n).map(|i| visits.get(i)).collect(), skipped, cost.steps, cost.real_ops, res.err().map(|e| format!("{e:?}")))
    }

    /// The untraced lean loop (`eval_lean`) does what the traced step does frame by frame: the
    /// same adds and takes in the same order, visits, skipped Lets, steps and real ops, across its
    /// 4096-step edges (a run of 16,000 frames), at a steps budget's stop and at a map's error
    /// part way. Fails if the lean loop drops its next frame at the room's end, reorders a node's
    /// children, or counts a frame's step or real op differently.
    #[test]
    fn the_lean_loop_evaluates_as_the_traced_step() {
        let root = let_wrapped(6000);
        let full = run(&root, true, u64::MAX, -1);
        assert!(full.3 > 3 * 4096 && full.5.is_none(), "{:?}", (full.3, &full.5));
        assert!(!full.2.is_empty() && full.2.len() < 6000);
        assert_eq!(run(&root, false, u64::MAX, -1), full);
        for steps in [1, 4095, 4096, 4097, 9001] {
            let (t, l) = (run(&root, true, steps, -1), run(&root, false, steps, -1));
            assert!(t.5.is_some() && t.3 == steps + 1, "{steps}: {:?}", (t.3, &t.5));
            assert_eq!(l, t, "{steps}");
        }
        // an id added to half way through
        let adds: Vec<i64> = full.0.iter().filter(|e| e.0).map(|e| e.1).collect();
        let bad = adds[adds.len() / 2];
        let (t, l) = (run(&root, true, u64::MAX, bad), run(&root, false, u64::MAX, bad));
        assert!(t.5.as_ref().is_some_and(|e| e.contains(&format!("no {bad}"))), "{:?}", t.5);
        assert_eq!(l, t);
    }

    /// eval on a DeltaMap another value still holds leaves that value's map as it was (the map is
    /// persistent, Fig. 10); it lets go of its argument's hold, so a map no one else holds is updated
    /// in place (`pmap_updates_an_unshared_map_in_place`), to the same result. Fails if eval changes
    /// the map behind a shared value, or keeps its argument while it updates.
    #[test]
    fn eval_keeps_a_shared_map_and_lets_go_of_its_argument() {
        use crate::kit::delta::delta_value;
        let root = let_wrapped(50);
        let program = Program::default();
        let mut m = Machine::new(&program, &Builtins::new(), Budget::default()).unwrap();
        let fresh = || Value::Ext(Rc::new(DeltaMapVal(std::iter::once((49, 1.0)).chain((1000..1100).map(|k| (k, 2.0))).collect())));
        let entries = |v: &Value| v.ext::<DeltaMapVal>().map(|m| m.0.iter().map(|(k, x)| (*k, *x)).collect::<Vec<_>>());
        let (kept, start) = (fresh(), entries(&fresh()));
        let shared = b_eval(&mut m, &mut vec![Value::Real(1.0), delta_value(root.clone()), kept.clone()], Span::NONE).unwrap();
        assert_eq!(entries(&kept), start);
        assert_ne!(entries(&shared), start);
        let mut args = vec![Value::Real(1.0), delta_value(root.clone()), fresh()];
        let alone = b_eval(&mut m, &mut args, Span::NONE).unwrap();
        assert!(matches!(args[2], Value::Unit), "eval kept its map argument: {}", args[2]);
        assert_eq!(entries(&alone), entries(&shared));
    }

    /// The stack with runs of Lets pops the frames a plain stack pops, in the same order, whatever
    /// the pushes (consecutive Lets, gaps, visits between them), and holds one frame for a spine.
    #[test]
    fn runs_of_lets_pop_as_the_plain_stack() {
        let mut seed = 7u64;
        let mut rand = move |k: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % k
        };
        for _ in 0..200 {
            let (mut runs, mut plain) = (vec![], vec![]);
            let mut n: Ix = 1000;
            for _ in 0..300 {
                match rand(4) {
                    0 | 1 => {
                        // mostly the Let just below the last one pushed, as a spine's are
                        n = if rand(3) == 0 { rand(2000) as Ix } else { n.saturating_sub(1) };
                        push_after_let(&mut runs, n);
                        plain.push(Popped::AfterLet(n));
                    }
                    2 => {
                        let x = rand(10) as f64;
                        runs.push(Frame::Visit(x, n));
                        plain.push(Popped::Visit(x, n));
                    }
                    _ => assert_eq!(pop_frame(&mut runs), plain.pop()),
                }
            }
            while let Some(p) = plain.pop() {
                assert_eq!(pop_frame(&mut runs), Some(p));
            }
            assert!(runs.is_empty());
        }
        let mut spine = vec![];
        for n in (1..=100_000).rev() {
            push_after_let(&mut spine, n);
        }
        assert_eq!(spine.len(), 1);
        assert_eq!(pop_frame(&mut spine), Some(Popped::AfterLet(1)));
    }
}
