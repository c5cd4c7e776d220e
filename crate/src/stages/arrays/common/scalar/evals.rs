//! The four evaluators of a Delta tree (§2.3–2.4), each the runtime of the builtin
//! `eval c d n : R → Delta → Int → Array R` (c the output's cotangent, n the number of inputs), so
//! that all four run one program text. Each walks the Delta as a tree, iteratively, one `tick` per
//! visit (the steps budget stops an exponential walk cleanly), counting every constructor visited
//! (`eval_visits`) and the visits of Fig. 4's nodes (`op_visits`, see `runtime::is_part`).

use super::runtime::{eval_args, input_slot, is_part, record, vector_value};
use crate::diag::Span;
use crate::interp::{Machine, RunError, Shown, TraceStep};
use crate::kit::delta::graph::Visits;
use crate::kit::delta::{Arena, DeltaRef, Ix, Kind, STATE_ROWS};
use crate::value::{show_real, Value};

/// Counts one visit of n (reached from a node of which it is part, or not).
#[inline]
fn visit(m: &mut Machine, visits: &mut Visits, ops: &mut u64, n: Ix, part: bool) -> Result<(), RunError> {
    visits.visit(n as u64);
    if !part {
        *ops += 1;
    }
    m.tick(1)
}

fn not_tree(k: Kind, span: Span, what: &str) -> RunError {
    RunError::runtime(span, format!("{what}: {} is not in Fig. 1(b)'s Delta", k.ctor()))
}

/// A traced step; its note is written only when the run is traced (issue 13: a bench's run is not).
fn step(m: &mut Machine, ar: &Arena, kind: &str, n: Ix, factor: f64, note: impl FnOnce() -> String, acc: &[f64]) {
    if m.tracing() {
        let note = note();
        let state = acc.iter().take(STATE_ROWS).enumerate().map(|(i, v)| (format!("{i}"), Shown::from(*v))).collect();
        let span = ar.span(n);
        let span = (!span.is_none()).then_some(span);
        m.trace(TraceStep { kind: kind.into(), node: Some(n as u64), span, factor: Some(factor.into()), note, state, ..TraceStep::default() });
    }
}

enum Frame {
    Enter(Ix, bool),
    Exit(Ix),
}

/// The Delta's arena, read for a whole evaluation (nothing is built while an evaluator walks).
fn read<'a>(d: &'a DeltaRef, span: Span, what: &str) -> Result<std::cell::Ref<'a, Arena>, RunError> {
    d.arena.try_borrow().map_err(|_| RunError::runtime(span, format!("{what}: the Delta is being built")))
}

/// eval0 d ε (§2.3), by a post-order walk with a stack of values:
/// ```text
/// eval0 Zero ε = 0 ; eval0 (Input i) ε = ε_i ; eval0 (Add d1 d2) ε = eval0 d1 ε + eval0 d2 ε ;
/// eval0 (Scale r d) ε = r · eval0 d ε
/// ```
/// Zero's 0 is structural (`None`): a Scale of it is not multiplied out, so that a constant argument's
/// infinite partial (`x * 1.0` at an overflowing x, `1.0 / x` at 0) gives no ∞ · 0 = NaN, the one rule
/// every stage follows (forward mode's, and the reverse evaluators', which never reach a Zero with a
/// product).
///
/// Every pass walks the whole tree, visit for visit; what a pass learns of a node (its constructor,
/// an Add's children's part-of tests, each a search of the span runs) is decoded once, on the node's
/// first visit, into `Eval0::nodes` (one entry per node of the DAG, not of the tree), and the walk's
/// stacks are kept from pass to pass (issue 13: the n passes decoded every node and grew their
/// stacks again each time). The first pass also writes down its walk, in order (`tape`: each visit,
/// what it pushes, each Scale's and Add's exit), when the tree is not much larger than the DAG
/// (`TAPE_PER_NODE`); the later passes run that record instead of the stacks: the same visits,
/// steps, real ops and sums in the same order, only the direction's ε_i read differently.
struct Eval0<'a> {
    ar: &'a Arena,
    rd: crate::kit::delta::arena::Reader<'a>,
    nodes: Vec<Node0>,
    stack: Vec<Walk0>,
    vals: Vec<Option<f64>>,
    /// The first pass's walk, while it is being written (`Some`) or once written (`done`); `None`
    /// when the tree outgrew its bound.
    tape: Option<Vec<Tape0>>,
    done: bool,
}

/// How many tape entries per node of the DAG (and 4096 more) a first pass may write: an exponential
/// tree (a Delta shared many times over) is walked, never written down.
const TAPE_PER_NODE: usize = 8;

/// A step of eval0's walk as the first pass took it.
#[derive(Clone, Copy)]
enum Tape0 {
    /// A visit (node, part of its parent's node) to a Zero.
    Zero(Ix, bool),
    /// A visit to a Scale or an Add (its exit follows its children's entries).
    Inner(Ix, bool),
    /// A visit to `Input i`, i's slot checked.
    Input(Ix, bool, usize),
    Scale(f64),
    Add,
}

/// A node of the Delta as eval0 reads it (`Unread` until its first visit).
#[derive(Clone, Copy)]
enum Node0 {
    Unread,
    Zero,
    Input(i64),
    Scale(f64, Ix),
    /// The children, and whether each is part of this Add's node of Fig. 4 (`is_part`).
    Add(Ix, Ix, bool, bool),
}

impl<'a> Eval0<'a> {
    /// (`taped` false: every pass walks with the stacks, as the tests' reference)
    fn new(ar: &'a Arena, taped: bool) -> Self {
        let tape = taped.then(Vec::new);
        Eval0 { ar, rd: ar.reader(), nodes: vec![Node0::Unread; ar.len()], stack: vec![], vals: vec![], tape, done: false }
    }

    /// Node `n`, decoded on its first read; a constructor eval0 does not take is its error.
    fn node(&mut self, n: Ix, span: Span) -> Result<Node0, RunError> {
        if let Some(&k) = self.nodes.get(n as usize) {
            if !matches!(k, Node0::Unread) {
                return Ok(k);
            }
        }
        let k = match self.rd.kind(n) {
            Kind::Zero => Node0::Zero,
            Kind::Input(i) => Node0::Input(i),
            Kind::Scale(r, d) => Node0::Scale(r, d),
            Kind::Add(a, b) => Node0::Add(a, b, is_part(&mut self.rd, self.ar, n, a), is_part(&mut self.rd, self.ar, n, b)),
            // (not kept: the pass stops at it)
            k => return Err(not_tree(k, span, "eval0")),
        };
        if let Some(slot) = self.nodes.get_mut(n as usize) {
            *slot = k;
        }
        Ok(k)
    }

    fn pass(&mut self, m: &mut Machine, root: Ix, dir: usize, inputs: usize, visits: &mut Visits, ops: &mut u64, span: Span) -> Result<f64, RunError> {
        if self.done {
            if let Some(tape) = &self.tape {
                return replay(m, tape, &mut self.vals, dir, visits, ops, span);
            }
        }
        let cap = self.ar.len().saturating_mul(TAPE_PER_NODE).saturating_add(4096);
        // (a pass stopped by an error leaves no tape: no pass follows it)
        let mut tape = if self.done { None } else { self.tape.take() };
        let mut note = |t: Tape0| {
            if let Some(tp) = &mut tape {
                if tp.len() < cap {
                    tp.push(t);
                } else {
                    tape = None;
                }
            }
        };
        self.stack.clear();
        self.vals.clear();
        self.stack.push(Walk0::Enter(root, false));
        while let Some(f) = self.stack.pop() {
            match f {
                Walk0::Enter(n, part) => {
                    // the visit counted before a bad constructor's error, as the walk always did
                    let k = self.node(n, span);
                    visit(m, visits, ops, n, part)?;
                    match k? {
                        Node0::Zero | Node0::Unread => {
                            note(Tape0::Zero(n, part));
                            self.vals.push(None)
                        }
                        Node0::Input(i) => {
                            let slot = input_slot(i, inputs, span, "eval0")?;
                            note(Tape0::Input(n, part, slot));
                            self.vals.push(Some(if slot == dir { 1.0 } else { 0.0 }))
                        }
                        Node0::Scale(r, d) => {
                            note(Tape0::Inner(n, part));
                            self.stack.push(Walk0::Scale(r));
                            self.stack.push(Walk0::Enter(d, false));
                        }
                        Node0::Add(a, b, pa, pb) => {
                            note(Tape0::Inner(n, part));
                            self.stack.push(Walk0::Add);
                            self.stack.push(Walk0::Enter(b, pb));
                            self.stack.push(Walk0::Enter(a, pa));
                        }
                    }
                }
                Walk0::Scale(r) => {
                    note(Tape0::Scale(r));
                    exit_scale(m, &mut self.vals, r, span)?;
                }
                Walk0::Add => {
                    note(Tape0::Add);
                    exit_add(m, &mut self.vals, span)?;
                }
            }
        }
        let v = pop0(&mut self.vals, span)?.unwrap_or(0.0);
        self.tape = tape;
        self.done = true;
        Ok(v)
    }
}

/// A pass of eval0 run from the first pass's `tape` (see `Eval0`), in direction `dir`.
fn replay(m: &mut Machine, tape: &[Tape0], vals: &mut Vec<Option<f64>>, dir: usize, visits: &mut Visits, ops: &mut u64, span: Span) -> Result<f64, RunError> {
    vals.clear();
    // `visit`'s tick(1) counted as `tick_fitting` while there is room (the same counts; the step at
    // the budget's or the clock check's edge taken by `tick`)
    let mut room = m.tick_room();
    let mut visit = |m: &mut Machine, n: Ix, part: bool| {
        visits.visit(n as u64);
        if !part {
            *ops += 1;
        }
        if room > 0 {
            room -= 1;
            m.tick_fitting(1);
            Ok(())
        } else {
            let r = m.tick(1);
            room = m.tick_room();
            r
        }
    };
    for &t in tape {
        match t {
            Tape0::Zero(n, part) => {
                visit(m, n, part)?;
                vals.push(None);
            }
            Tape0::Inner(n, part) => visit(m, n, part)?,
            Tape0::Input(n, part, slot) => {
                visit(m, n, part)?;
                vals.push(Some(if slot == dir { 1.0 } else { 0.0 }));
            }
            Tape0::Scale(r) => exit_scale(m, vals, r, span)?,
            Tape0::Add => exit_add(m, vals, span)?,
        }
    }
    Ok(pop0(vals, span)?.unwrap_or(0.0))
}

/// eval0's value stack popped (`None`: a Zero's sum so far).
fn pop0(vals: &mut Vec<Option<f64>>, span: Span) -> Result<Option<f64>, RunError> {
    vals.pop().ok_or_else(|| RunError::runtime(span, "eval0: value stack underflow"))
}

/// A Scale's exit in eval0's walk (walked or replayed): `r` times its child's value.
fn exit_scale(m: &mut Machine, vals: &mut Vec<Option<f64>>, r: f64, span: Span) -> Result<(), RunError> {
    m.real_op();
    let v = pop0(vals, span)?.map(|v| r * v);
    vals.push(v);
    Ok(())
}

/// An Add's exit in eval0's walk (walked or replayed): its children's values summed.
fn exit_add(m: &mut Machine, vals: &mut Vec<Option<f64>>, span: Span) -> Result<(), RunError> {
    m.real_op();
    let b = pop0(vals, span)?;
    let v = match (pop0(vals, span)?, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
    vals.push(v);
    Ok(())
}

/// eval0's walk: a node entered (whether it is part of the Add it is a child of), or a Scale's or
/// an Add's exit.
enum Walk0 {
    Enter(Ix, bool),
    Scale(f64),
    Add,
}

/// `eval` as Eq. 2: ∇ = c · (eval0 d (1,0..0), …, eval0 d (0..0,1)), one pass of the whole Delta per input.
pub fn b_eval0(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    eval0_all(m, args, span, true)
}

fn eval0_all(m: &mut Machine, args: &[Value], span: Span, taped: bool) -> Result<Value, RunError> {
    let (c, root, n) = eval_args(m, args, span, "eval0")?;
    let ar = read(&root, span, "eval0")?;
    let (mut visits, mut ops) = (Visits::of(m), 0);
    let mut g = vec![0.0; n];
    let mut res = Ok(());
    // (one pass has none after it to replay the record)
    let mut ev = Eval0::new(&ar, taped && n > 1);
    for (i, gi) in g.iter_mut().enumerate() {
        match ev.pass(m, root.ix, i, n, &mut visits, &mut ops, span) {
            Ok(v) => {
                *gi = c * v;
                step(m, &ar, "eval0", root.ix, c, || format!("eval0 d ε{i} = {} (pass {} of {n}), times c = {}", show_real(v), i + 1, show_real(c)), &[*gi]);
            }
            Err(e) => {
                res = Err(e);
                break;
            }
        }
    }
    drop(ev);
    drop(ar);
    record(m, &root, visits, ops, &mut res);
    res?;
    Ok(vector_value(g))
}

/// eval1 d (§2.4): all directions at once, a vector of length n at every node, post-order:
/// ```text
/// eval1 Zero = 0⃗ ; eval1 (Input i) = one-hot i ; eval1 (Add d1 d2) = eval1 d1 + eval1 d2 ;
/// eval1 (Scale r d) = r · eval1 d
/// ```
/// Every vector made, added or scaled costs n element operations (`vector_elem_ops`). Zero's vector is
/// structural (`None`, no elements), as in eval0.
pub fn b_eval1(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let (c, root, n) = eval_args(m, &args, span, "eval1")?;
    let (mut visits, mut ops, mut elems) = (Visits::of(m), 0u64, 0u64);
    let res = (|| -> Result<Vec<f64>, RunError> {
        let ar = read(&root, span, "eval1")?;
        let ar: &Arena = &ar;
        // eval reads the arena through a reader (a block's offsets decoded once, not per node)
        let mut rd = ar.reader();
        let mut stack = vec![Frame::Enter(root.ix, false)];
        let mut vals: Vec<Option<Vec<f64>>> = vec![];
        let pop = |vals: &mut Vec<Option<Vec<f64>>>| vals.pop().ok_or_else(|| RunError::runtime(span, "eval1: value stack underflow"));
        while let Some(f) = stack.pop() {
            match f {
                Frame::Enter(nd, part) => {
                    visit(m, &mut visits, &mut ops, nd, part)?;
                    match rd.kind(nd) {
                        Kind::Zero => {
                            step(m, ar, "eval1", nd, 1.0, || "Zero: the zero vector".into(), &[]);
                            vals.push(None);
                        }
                        Kind::Input(i) => {
                            m.alloc(n as u64)?;
                            elems += n as u64;
                            let mut v = vec![0.0; n];
                            v[input_slot(i, n, span, "eval1")?] = 1.0;
                            step(m, ar, "eval1", nd, 1.0, || format!("{}: a one-hot vector", rd.kind(nd).label()), &v);
                            vals.push(Some(v));
                        }
                        Kind::Scale(_, d) => {
                            stack.push(Frame::Exit(nd));
                            stack.push(Frame::Enter(d, false));
                        }
                        Kind::Add(a, b) => {
                            stack.push(Frame::Exit(nd));
                            stack.push(Frame::Enter(b, is_part(&mut rd, ar, nd, b)));
                            stack.push(Frame::Enter(a, is_part(&mut rd, ar, nd, a)));
                        }
                        k => return Err(not_tree(k, span, "eval1")),
                    }
                }
                Frame::Exit(nd) => {
                    let v = match rd.kind(nd) {
                        Kind::Scale(r, _) => pop(&mut vals)?.map(|v| v.into_iter().map(|x| r * x).collect()),
                        _ => {
                            let b = pop(&mut vals)?;
                            match (pop(&mut vals)?, b) {
                                (Some(a), Some(b)) => Some(a.into_iter().zip(b).map(|(x, y)| x + y).collect::<Vec<f64>>()),
                                (a, b) => a.or(b),
                            }
                        }
                    };
                    if v.is_some() {
                        elems += n as u64;
                    }
                    step(m, ar, "eval1", nd, 1.0, || format!("{}: the vector of its subterms", rd.kind(nd).label()), v.as_deref().unwrap_or(&[]));
                    vals.push(v);
                }
            }
        }
        elems += n as u64;
        Ok(pop(&mut vals)?.map_or_else(|| vec![0.0; n], |v| v.into_iter().map(|x| c * x).collect()))
    })();
    finish(m, &root, visits, ops, elems, res)
}

/// Adds eval1's or eval2's counts (to a budget error's too) and keeps its visits for the graph.
fn finish(m: &mut Machine, root: &DeltaRef, visits: Visits, ops: u64, elems: u64, res: Result<Vec<f64>, RunError>) -> Result<Value, RunError> {
    let (g, mut done) = match res {
        Ok(g) => (g, Ok(())),
        Err(e) => (vec![], Err(e)),
    };
    m.count("vector_elem_ops", elems);
    if let Err(RunError::Budget { cost, .. }) = &mut done {
        *cost.counters.entry("vector_elem_ops".to_string()).or_default() += elems;
    }
    record(m, root, visits, ops, &mut done);
    done?;
    Ok(vector_value(g))
}

enum Cayley {
    Visit(Ix, bool),
    /// Back from a Scale's subterm: add r times its vector into the one below.
    Scaled(Ix, f64),
}

/// eval2 d tg (§2.4), the Cayley transform of eval1: the vector is threaded through, so Zero, Input and
/// Add cost O(1); a Scale still costs O(n):
/// ```text
/// eval2 Zero = id ; eval2 (Input i) = λtg. tg with 1 added at i ; eval2 (Add d1 d2) = eval2 d2 ∘ eval2 d1
/// eval2 (Scale r d) = λtg. tg + r · eval2 d 0⃗     (the paper prints (r·) ∘ eval2 d, which also scales
///                                                  tg: right only for tg = 0⃗, erratum §8)
/// ```
/// and ∇ = c · eval2 d 0⃗.
pub fn b_eval2(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let (c, root, n) = eval_args(m, &args, span, "eval2")?;
    let (mut visits, mut ops, mut elems) = (Visits::of(m), 0u64, n as u64);
    let res = (|| -> Result<Vec<f64>, RunError> {
        let ar = read(&root, span, "eval2")?;
        let ar: &Arena = &ar;
        // eval reads the arena through a reader (a block's offsets decoded once, not per node)
        let mut rd = ar.reader();
        let mut accs: Vec<Vec<f64>> = vec![vec![0.0; n]];
        let mut stack = vec![Cayley::Visit(root.ix, false)];
        let under = || RunError::runtime(span, "eval2: accumulator stack underflow");
        while let Some(f) = stack.pop() {
            match f {
                Cayley::Visit(nd, part) => {
                    visit(m, &mut visits, &mut ops, nd, part)?;
                    match rd.kind(nd) {
                        Kind::Zero => {}
                        Kind::Input(i) => {
                            let slot = input_slot(i, n, span, "eval2")?;
                            accs.last_mut().ok_or_else(under)?[slot] += 1.0;
                            m.real_op();
                        }
                        Kind::Add(a, b) => {
                            stack.push(Cayley::Visit(b, is_part(&mut rd, ar, nd, b)));
                            stack.push(Cayley::Visit(a, is_part(&mut rd, ar, nd, a)));
                        }
                        // a constant argument's Scale r Zero adds nothing (no ∞ · 0, as in eval0)
                        Kind::Scale(_, d) if rd.kind(d) == Kind::Zero => visit(m, &mut visits, &mut ops, d, false)?,
                        Kind::Scale(r, d) => {
                            m.alloc(n as u64)?;
                            elems += n as u64;
                            accs.push(vec![0.0; n]);
                            stack.push(Cayley::Scaled(nd, r));
                            stack.push(Cayley::Visit(d, false));
                        }
                        k => return Err(not_tree(k, span, "eval2")),
                    }
                    step(m, ar, "eval2", nd, 1.0, || rd.kind(nd).label(), accs.last().ok_or_else(under)?);
                }
                Cayley::Scaled(nd, r) => {
                    let tmp = accs.pop().ok_or_else(under)?;
                    let top = accs.last_mut().ok_or_else(under)?;
                    for (t, x) in top.iter_mut().zip(tmp) {
                        *t += r * x;
                    }
                    elems += n as u64;
                    step(m, ar, "eval2", nd, r, || format!("Scale {}: tg + {} · (eval2 d 0⃗)", show_real(r), show_real(r)), accs.last().ok_or_else(under)?);
                }
            }
        }
        elems += n as u64;
        Ok(accs.pop().ok_or_else(under)?.into_iter().map(|x| c * x).collect())
    })();
    finish(m, &root, visits, ops, elems, res)
}

/// eval3 c d tg (§2.4): the scale factors pushed inwards as an accumulating cotangent, O(1) per visit,
/// but once per path to a node (exponential on a DAG):
/// ```text
/// eval3 c Zero = id ; eval3 c (Input i) = λtg. tg with c added at i ;
/// eval3 c (Add d1 d2) = eval3 c d2 ∘ eval3 c d1 ; eval3 c (Scale r d) = eval3 (c · r) d
/// ```
/// and ∇ = eval3 c d 0⃗.
pub fn b_eval3(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let (c, root, n) = eval_args(m, &args, span, "eval3")?;
    let (mut visits, mut ops) = (Visits::of(m), 0u64);
    let mut acc = vec![0.0; n];
    let mut res = (|| -> Result<(), RunError> {
        let ar = read(&root, span, "eval3")?;
        let ar: &Arena = &ar;
        // eval reads the arena through a reader (a block's offsets decoded once, not per node)
        let mut rd = ar.reader();
        let mut stack: Vec<(f64, Ix, bool)> = vec![(c, root.ix, false)];
        while let Some((x, nd, part)) = stack.pop() {
            visit(m, &mut visits, &mut ops, nd, part)?;
            let t = m.tracing();
            let note = match rd.kind(nd) {
                Kind::Zero => t.then(|| "Zero: nothing to add".to_string()),
                Kind::Input(i) => {
                    acc[input_slot(i, n, span, "eval3")?] += x;
                    m.real_op();
                    t.then(|| format!("Input {i}: add {}", show_real(x)))
                }
                Kind::Add(a, b) => {
                    stack.push((x, b, is_part(&mut rd, ar, nd, b)));
                    stack.push((x, a, is_part(&mut rd, ar, nd, a)));
                    t.then(|| "Add: d1, then d2".to_string())
                }
                Kind::Scale(r, d) => {
                    m.real_op();
                    stack.push((x * r, d, false));
                    t.then(|| format!("Scale {}: cotangent becomes {}", show_real(r), show_real(x * r)))
                }
                k => return Err(not_tree(k, span, "eval3")),
            };
            step(m, ar, "eval3", nd, x, || note.unwrap_or_default(), &acc);
        }
        Ok(())
    })();
    record(m, &root, visits, ops, &mut res);
    res?;
    Ok(vector_value(acc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{Budget, Builtins};
    use crate::ir::Program;
    use crate::kit::delta::delta_value;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// eval0 of `root` over `inputs` inputs at a steps budget, taped or walked: what it returns and
    /// every count the machine has after it.
    fn run(ar: &Rc<RefCell<Arena>>, root: Ix, inputs: i64, steps: u64, taped: bool) -> (String, crate::interp::Cost) {
        let program = Program::default();
        let mut m = Machine::new(&program, &Builtins::new(), Budget { steps, ..Budget::default() }).expect("a machine");
        let d = delta_value(DeltaRef { arena: ar.clone(), ix: root });
        let r = eval0_all(&mut m, &[Value::Real(1.5), d, Value::Int(inputs)], Span::NONE, taped);
        (format!("{r:?}"), m.cost())
    }

    /// The later passes replaying the first pass's walk (`Eval0::tape`) give what every pass walking
    /// the tree gives: the gradient, the error, and the steps, real ops, `eval_visits` and
    /// `op_visits` at every steps budget, stops inside the first pass and inside the replays alike
    /// (the batched ticks at the edge of the budget too); with Scales that are part of their Add's
    /// node and shared subtrees, a Zero, an Input outside the inputs and a constructor eval0 does
    /// not take, and a tree too large to write down. Seen failing with the replay's `*ops += 1`
    /// left out (op_visits differ) and with its tick batch one step longer (`room` not decreased:
    /// the budget's stop comes later).
    #[test]
    fn eval0s_replayed_passes_count_and_stop_as_walked_ones() {
        let sp = |k: usize| Span::new(k, k + 1);
        let mut ar = Arena::default();
        let mut push = |k: Kind, s: Span| ar.push(k, s).expect("room");
        let x: Vec<Ix> = (0..4).map(|i| push(Kind::Input(i), Span::NONE)).collect();
        let zero = push(Kind::Zero, Span::NONE);
        let mut prev = x[0];
        for k in 0..6usize {
            let s1 = push(Kind::Scale(0.5 + k as f64, prev), sp(k));
            let s2 = push(Kind::Scale(-1.25, x[(k + 1) % 4]), sp(k));
            let a = push(Kind::Add(s1, s2), sp(k));
            prev = push(Kind::Add(a, if k % 2 == 0 { prev } else { zero }), sp(100 + k));
        }
        let good = prev;
        let bad_input = push(Kind::Add(good, x[1]), sp(200));
        let outside = push(Kind::Input(7), Span::NONE);
        let bad_input = push(Kind::Add(bad_input, outside), sp(201));
        let var = push(Kind::Var(3), Span::NONE);
        let bad_kind = push(Kind::Add(good, var), sp(202));
        // 2^13 leaves: past the tape's bound (8 entries a node and 4096)
        let mut wide = x[2];
        for k in 0..13usize {
            wide = push(Kind::Add(wide, wide), sp(300 + k));
        }
        let ar = Rc::new(RefCell::new(ar));
        for (root, stride) in [(good, 1), (bad_input, 1), (bad_kind, 1), (wide, 211)] {
            let (all, cost) = run(&ar, root, 4, u64::MAX, false);
            assert_eq!(run(&ar, root, 4, u64::MAX, true), (all.clone(), cost.clone()), "root {root}");
            if root == good {
                assert!(all.starts_with("Ok(Array") && cost.counter("eval_visits") > 4 * 60, "{all} {cost:?}");
            }
            let mut stops = 0;
            for steps in (0..cost.steps + 2).step_by(stride) {
                let walked = run(&ar, root, 4, steps, false);
                assert_eq!(run(&ar, root, 4, steps, true), walked, "root {root} at {steps} steps");
                stops += walked.0.contains("Budget") as u32;
            }
            assert!(stops > 10, "root {root}: {stops}");
        }
    }
}
