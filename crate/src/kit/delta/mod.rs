//! Delta terms, the defunctionalised linear maps of dual-numbers reverse AD, as runtime values: one
//! node type for the Delta of Krawiec et al. (Fig. 7: Zero, OneHot, Scale, Add; Fig. 10: with Var and
//! Let) and of Smeding et al.'s array paper §2 (Fig. 1(b): Zero, Input, Scale, Add; §2.5: with Share),
//! the run's arena that holds its nodes (`arena`), its rendering, and the constructor builtins both
//! chains make their Deltas with.
//! The two papers' Deltas differ in how inputs and sharing are named: Krawiec's `OneHot i` is the
//! array paper's `Input i` (both are the one-hot linear map at input i; kept apart so that each
//! prints its paper's name), and sharing is `Let id rhs body` with `Var id` (local, Krawiec Fig. 10)
//! or `Share id d` (global, the array paper §2.5). Each stage's builtins make only its own.
//!
//! - `graph`: an evaluator's visits per node and the Delta DAG as a drawn `Graph`;
//! - `dual`: the homomorphic dual-number translation with a Delta (or δS) companion (Krawiec Figs. 5,
//!   7; the array paper's Figs. 1–2);
//! - `drev`: the monadic translation (Krawiec Fig. 9 with deltaLet; the array paper's Fig. 3 with
//!   genID and Share), simplified by the monad laws (`kit::monad_laws`).

pub mod arena;
pub mod drev;
pub mod dual;
pub mod graph;

pub use arena::{round_words, Arena, Ix, Reader, RoundForm, SpanTable};

use crate::diag::Span;
use crate::interp::{Builtin, Machine, RunError};
use crate::ir::*;
use crate::value::{show_real, ExtValue, Value};
use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

/// The constructors of every Delta type of the two papers: Krawiec Fig. 7's (Zero, OneHot, Scale,
/// Add) and Fig. 10's (Zero, Scale, Add, Var, Let); the array paper's Fig. 1(b) (Zero, Input, Scale,
/// Add) and §2.5's Share. A node as read from its arena: children are indices into the same arena.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Kind {
    #[default]
    Zero,
    OneHot(i64),
    Scale(f64, Ix),
    Add(Ix, Ix),
    Var(i64),
    /// `Let id rhs body`
    Let(i64, Ix, Ix),
    /// `Input i` (the array paper, Fig. 1(b)): the input named i.
    Input(i64),
    /// `Share id d` (the array paper §2.5): d, globally named id.
    Share(i64, Ix),
}

impl Kind {
    pub fn children(&self) -> Vec<(Ix, &'static str)> {
        match *self {
            Kind::Scale(_, u) => vec![(u, "u")],
            Kind::Share(_, d) => vec![(d, "d")],
            Kind::Add(a, b) => vec![(a, "u1"), (b, "u2")],
            Kind::Let(_, r, b) => vec![(r, "rhs"), (b, "body")],
            _ => vec![],
        }
    }
    pub fn ctor(&self) -> &'static str {
        match self {
            Kind::Zero => "Zero",
            Kind::OneHot(_) => "OneHot",
            Kind::Scale(..) => "Scale",
            Kind::Add(..) => "Add",
            Kind::Var(_) => "Var",
            Kind::Let(..) => "Let",
            Kind::Input(_) => "Input",
            Kind::Share(..) => "Share",
        }
    }
    pub fn label(&self) -> String {
        match self {
            Kind::OneHot(i) => format!("OneHot {i}"),
            Kind::Scale(r, _) => format!("Scale {}", show_real(*r)),
            Kind::Var(i) => format!("Var {i}"),
            Kind::Let(i, ..) => format!("Let {i}"),
            Kind::Input(i) => format!("Input {i}"),
            Kind::Share(i, _) => format!("Share {i}"),
            _ => self.ctor().to_string(),
        }
    }
    pub fn delta_id(&self) -> Option<i64> {
        match *self {
            Kind::OneHot(i) | Kind::Var(i) | Kind::Let(i, ..) | Kind::Input(i) | Kind::Share(i, _) => Some(i),
            _ => None,
        }
    }
}

/// A Delta as a value of the interpreter: a node of its run's arena. The arena is shared by the
/// run's Delta values (and the stage's state), so that a value renders itself without the machine.
#[derive(Clone)]
pub struct DeltaRef {
    pub arena: Rc<RefCell<Arena>>,
    pub ix: Ix,
}

impl std::fmt::Debug for DeltaRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.show())
    }
}

impl ExtValue for DeltaRef {
    fn type_name(&self) -> &'static str {
        "Delta"
    }
    fn show(&self) -> String {
        match self.arena.try_borrow() {
            Ok(a) => show_delta(&a, self.ix, 40),
            Err(_) => "Delta".into(),
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The value of a Delta.
pub fn delta_value(d: DeltaRef) -> Value {
    Value::Ext(Rc::new(d))
}

/// The Delta of a value (a new reference to it), if the value is a Delta.
pub fn delta_of(v: &Value) -> Option<DeltaRef> {
    v.ext::<DeltaRef>().cloned()
}

/// A rendering of a Delta, cut after about `budget` constructors (Deltas can be huge).
pub fn show_delta(ar: &Arena, root: Ix, budget: usize) -> String {
    // iteratively (a Delta can be a chain as long as the run): a stack of what to print next
    enum Item {
        Node(Ix),
        Paren(Ix),
        Text(&'static str),
    }
    let mut out = String::new();
    let mut left = budget.max(1);
    let mut stack = vec![Item::Node(root)];
    while let Some(item) = stack.pop() {
        let n = match item {
            Item::Text(t) => {
                out.push_str(t);
                continue;
            }
            Item::Paren(n) if ar.kind(n) == Kind::Zero => {
                out.push_str("Zero");
                continue;
            }
            Item::Paren(n) => {
                out.push('(');
                stack.push(Item::Text(")"));
                n
            }
            Item::Node(n) => n,
        };
        if left == 0 {
            out.push('…');
            continue;
        }
        left -= 1;
        let k = ar.kind(n);
        match k {
            Kind::Zero | Kind::OneHot(_) | Kind::Var(_) | Kind::Input(_) => out.push_str(&k.label()),
            Kind::Share(i, d) => {
                out.push_str(&format!("Share {i} "));
                stack.push(Item::Paren(d));
            }
            Kind::Scale(r, u) => {
                out.push_str(&format!("Scale {} ", if r < 0.0 { format!("({})", show_real(r)) } else { show_real(r) }));
                stack.push(Item::Paren(u));
            }
            Kind::Add(a, b) | Kind::Let(_, a, b) => {
                if let Kind::Let(i, ..) = k {
                    out.push_str(&format!("Let {i} "));
                } else {
                    out.push_str("Add ");
                }
                stack.push(Item::Paren(b));
                stack.push(Item::Text(" "));
                stack.push(Item::Paren(a));
            }
        }
    }
    out
}

pub fn delta_type() -> Type {
    Type::con("Delta", vec![])
}

pub(crate) fn delta_arg(v: &Value, span: Span, what: &str) -> Result<DeltaRef, RunError> {
    match delta_of(v) {
        Some(d) => Ok(d),
        None => Err(RunError::runtime(span, format!("{what} expects a Delta, got {v}"))),
    }
}

pub(crate) fn real_arg(v: &Value, span: Span, what: &str) -> Result<f64, RunError> {
    v.as_real().ok_or_else(|| RunError::runtime(span, format!("{what} expects a real, got {v}")))
}

pub(crate) fn int_arg(v: &Value, span: Span, what: &str) -> Result<i64, RunError> {
    v.as_int().ok_or_else(|| RunError::runtime(span, format!("{what} expects an integer, got {v}")))
}

/// The run's Delta arena (a machine runs one program), and the index of its `delta_nodes` counter
/// once interned (counted by index: the counter named by its text was looked up again whenever
/// another counter came between two nodes).
#[derive(Default)]
pub struct DeltaArena {
    pub(crate) arena: Rc<RefCell<Arena>>,
    pub(crate) nodes_counter: Option<usize>,
}

/// The index of the run's `delta_nodes` counter, interned on its first use.
pub(crate) fn nodes_counter(m: &mut Machine) -> usize {
    match m.state::<DeltaArena>().nodes_counter {
        Some(c) => c,
        None => {
            let c = m.counter_id("delta_nodes");
            m.state::<DeltaArena>().nodes_counter = Some(c);
            c
        }
    }
}

/// The run's arena (for a stage's state that keeps a Delta without a value of it).
pub(crate) fn run_arena(m: &mut Machine) -> Rc<RefCell<Arena>> {
    m.state::<DeltaArena>().arena.clone()
}

/// Makes a Delta node: counts it (`delta_nodes`, one allocation) and gives it the next serial.
pub(crate) fn mk(m: &mut Machine, kind: Kind) -> Result<Value, RunError> {
    Ok(delta_value(mk_node(m, kind)?))
}

pub(crate) fn mk_node(m: &mut Machine, kind: Kind) -> Result<DeltaRef, RunError> {
    let span = m.current_span();
    mk_node_at(m, kind, span)
}

pub(crate) fn mk_node_at(m: &mut Machine, kind: Kind, span: Span) -> Result<DeltaRef, RunError> {
    // one lookup of the state on the common path; counted, then allocated (the allocation budget
    // may stop it), then numbered
    let st = m.state::<DeltaArena>();
    let (counter, arena) = (st.nodes_counter, st.arena.clone());
    let c = match counter {
        Some(c) => c,
        None => {
            let c = m.counter_id("delta_nodes");
            m.state::<DeltaArena>().nodes_counter = Some(c);
            c
        }
    };
    m.count_at(c, 1);
    m.alloc(1)?;
    let ix = match arena.try_borrow_mut() {
        Ok(mut a) => a.push(kind, span),
        Err(_) => None,
    };
    let ix = ix.ok_or_else(|| RunError::runtime(span, "the run's Delta arena cannot take another node"))?;
    Ok(DeltaRef { arena, ix })
}

/// The node of a Delta argument that becomes a child of a node this run builds: it must be of this
/// run's arena (a Delta is never carried from one run to another).
pub(crate) fn child_arg(m: &mut Machine, v: &Value, span: Span, what: &str) -> Result<Ix, RunError> {
    let d = v.ext::<DeltaRef>().ok_or_else(|| RunError::runtime(span, format!("{what} expects a Delta, got {v}")))?;
    if !Rc::ptr_eq(&d.arena, &m.state::<DeltaArena>().arena) {
        return Err(RunError::runtime(span, format!("{what}: the Delta belongs to another run")));
    }
    Ok(d.ix)
}

/// Gives generated code without a span the span of the source operation it comes from, so that
/// the Delta nodes it builds (and the trace steps at them) point back at that operation.
pub(crate) fn stamp(e: &mut Expr, span: Span) {
    if e.span.is_none() {
        e.span = span;
    }
    each_child_mut(e, &mut |c| stamp(c, span));
}

pub(crate) fn b_zero(m: &mut Machine, _args: &mut Vec<Value>, _span: Span) -> Result<Value, RunError> {
    mk(m, Kind::Zero)
}

pub(crate) fn b_scale(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let r = real_arg(&args[0], span, "Scale")?;
    let u = child_arg(m, &args[1], span, "Scale")?;
    mk(m, Kind::Scale(r, u))
}

pub(crate) fn b_add(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let a = child_arg(m, &args[0], span, "Add")?;
    let b = child_arg(m, &args[1], span, "Add")?;
    mk(m, Kind::Add(a, b))
}

/// The common Delta constructor builtins: `Zero : Delta`, `Scale : R → Delta → Delta`,
/// `Add : Delta → Delta → Delta`.
pub(crate) fn delta_ctor_builtins() -> Vec<Builtin> {
    let d = delta_type();
    vec![
        Builtin { name: "Zero", scheme: Scheme::mono(d.clone()), arity: 0, lazy_last: false, run: b_zero },
        Builtin {
            name: "Scale",
            scheme: Scheme::mono(Type::fun(Type::Real, Type::fun(d.clone(), d.clone()))),
            arity: 2,
            lazy_last: false,
            run: b_scale,
        },
        Builtin {
            name: "Add",
            scheme: Scheme::mono(Type::fun(d.clone(), Type::fun(d.clone(), d.clone()))),
            arity: 2,
            lazy_last: false,
            run: b_add,
        },
    ]
}

/// Most rows of a map or vector shown in one trace step.
pub const STATE_ROWS: usize = 200;

#[cfg(test)]
mod tests {
    use super::*;

    /// The rendering walks the arena with a stack: the order, the parentheses (none around Zero) and
    /// the cut after `budget` constructors are the recursive rendering's.
    #[test]
    fn a_delta_renders_from_its_arena_as_the_paper_prints_it() {
        let mut a = Arena::default();
        let v = a.push(Kind::Var(0), Span::NONE).unwrap();
        let s = a.push(Kind::Scale(-2.0, v), Span::NONE).unwrap();
        let z = a.push(Kind::Zero, Span::NONE).unwrap();
        let add = a.push(Kind::Add(s, z), Span::NONE).unwrap();
        let l = a.push(Kind::Let(3, add, v), Span::NONE).unwrap();
        assert_eq!(show_delta(&a, l, 40), "Let 3 (Add (Scale (-2.0) (Var 0)) Zero) (Var 0)");
        assert_eq!(show_delta(&a, l, 2), "Let 3 (Add (…) Zero) (…)");
        // a chain as long as a run renders without recursion, cut at the budget
        let mut d = v;
        for i in 0..200_000 {
            d = a.push(Kind::Let(i, v, d), Span::NONE).unwrap();
        }
        let shown = show_delta(&a, d, 3);
        assert_eq!(shown, "Let 199999 (Var 0) (Let 199998 (…) (…))");
    }
}
