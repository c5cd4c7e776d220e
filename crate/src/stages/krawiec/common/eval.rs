//! eval (Krawiec et al. §7.2, Fig. 10): the backward pass over a Let-wrapped Delta, body first, with
//! any DeltaMap (the persistent map here, §7.3's mutable array in `krawiec/array`), and the map's
//! builtins (Fig. 10's API, and Fig. 15's lookup at a dual number's Delta).

use crate::kit::delta::{delta_arg, delta_type, int_arg, real_arg, Arena, DeltaRef, Ix, Kind, STATE_ROWS};
use crate::kit::delta::graph::{delta_graph, Visits};
use super::monad::DeltaState;
use crate::diag::Span;
use crate::interp::{Builtin, Graph, Machine, RunError, TraceStep, Shown};
use crate::ir::*;
use crate::value::{show_real, ExtValue, Value};
use rpds::RedBlackTreeMap;
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
    let mut stack: Vec<Frame> = vec![Frame::Visit(x, root.ix)];
    let mut rows = true;
    let err = |msg: String| RunError::runtime(span, format!("eval: {msg}"));
    while let Some(f) = pop_frame(&mut stack) {
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
                let k = rd.kind(n);
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

/// The persistent map (Fig. 10's `Map DeltaId dR`): an rpds red-black tree, O(log n) per operation.
#[derive(Debug, Clone, Default)]
pub struct DeltaMapVal(pub RedBlackTreeMap<i64, f64>);

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

impl Adjoints for RedBlackTreeMap<i64, f64> {
    fn add(&mut self, id: i64, x: f64) -> Result<(), String> {
        let v = self.get(&id).copied().unwrap_or(0.0) + x;
        self.insert_mut(id, v);
        Ok(())
    }
    fn take(&mut self, id: i64) -> Result<Option<f64>, String> {
        let v = self.get(&id).copied();
        if v.is_some() {
            self.remove_mut(&id);
        }
        Ok(v)
    }
    fn rows(&self) -> Vec<(String, f64)> {
        self.iter().take(STATE_ROWS).map(|(k, v)| (k.to_string(), *v)).collect()
    }
}

pub fn map_type() -> Type {
    Type::con("DeltaMap", vec![])
}

fn map_arg(v: &Value, span: Span, what: &str) -> Result<RedBlackTreeMap<i64, f64>, RunError> {
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
