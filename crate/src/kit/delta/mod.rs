//! Delta terms, the defunctionalised linear maps of dual-numbers reverse AD, as runtime values: one
//! node type for the Delta of Krawiec et al. (Fig. 7: Zero, OneHot, Scale, Add; Fig. 10: with Var and
//! Let) and of Smeding et al.'s array paper §2 (Fig. 1(b): Zero, Input, Scale, Add; §2.5: with Share),
//! its iterative Drop, its rendering, and the constructor builtins both chains make their Deltas with.
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

pub mod drev;
pub mod dual;
pub mod graph;

use crate::diag::Span;
use crate::interp::{Builtin, Machine, RunError};
use crate::ir::*;
use crate::value::{show_real, ExtValue, Value};
use std::any::Any;
use std::rc::Rc;

/// The constructors of every Delta type of the two papers: Krawiec Fig. 7's (Zero, OneHot, Scale,
/// Add) and Fig. 10's (Zero, Scale, Add, Var, Let); the array paper's Fig. 1(b) (Zero, Input, Scale,
/// Add) and §2.5's Share.
#[derive(Debug, Default)]
pub enum Kind {
    #[default]
    Zero,
    OneHot(i64),
    Scale(f64, Rc<Node>),
    Add(Rc<Node>, Rc<Node>),
    Var(i64),
    /// `Let id rhs body`
    Let(i64, Rc<Node>, Rc<Node>),
    /// `Input i` (the array paper, Fig. 1(b)): the input named i.
    Input(i64),
    /// `Share id d` (the array paper §2.5): d, globally named id.
    Share(i64, Rc<Node>),
}

/// A Delta node, with a serial number that names it in the graph and the trace.
#[derive(Debug)]
pub struct Node {
    pub serial: u64,
    pub kind: Kind,
    /// The source operation that built it (the span of the builtin's application), if known.
    pub span: Span,
}

impl Drop for Node {
    /// Iterative, so that dropping a long chain (10^5 nested Lets, the doubling chain) cannot
    /// overflow the native stack: children whose last reference this is are taken apart on a heap stack.
    fn drop(&mut self) {
        let mut stack: Vec<Rc<Node>> = vec![];
        take_children(&mut self.kind, &mut stack);
        while let Some(rc) = stack.pop() {
            if let Ok(mut node) = Rc::try_unwrap(rc) {
                take_children(&mut node.kind, &mut stack);
            }
        }
    }
}

/// The children whose last reference this is go on the stack; a shared child only loses a
/// reference (no stack to allocate for it: most nodes dropped during a run have shared children).
fn take_children(k: &mut Kind, out: &mut Vec<Rc<Node>>) {
    let mut put = |u: Rc<Node>| {
        if Rc::strong_count(&u) == 1 {
            out.push(u);
        }
    };
    match k {
        Kind::Zero | Kind::OneHot(_) | Kind::Var(_) | Kind::Input(_) => {}
        _ => match std::mem::take(k) {
            Kind::Scale(_, u) | Kind::Share(_, u) => put(u),
            Kind::Add(a, b) | Kind::Let(_, a, b) => {
                put(a);
                put(b);
            }
            _ => {}
        },
    }
}

impl Node {
    pub fn children(&self) -> Vec<(&Rc<Node>, &'static str)> {
        match &self.kind {
            Kind::Scale(_, u) => vec![(u, "u")],
            Kind::Share(_, d) => vec![(d, "d")],
            Kind::Add(a, b) => vec![(a, "u1"), (b, "u2")],
            Kind::Let(_, r, b) => vec![(r, "rhs"), (b, "body")],
            _ => vec![],
        }
    }
    pub fn ctor(&self) -> &'static str {
        match self.kind {
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
        match &self.kind {
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
        match self.kind {
            Kind::OneHot(i) | Kind::Var(i) | Kind::Let(i, ..) | Kind::Input(i) | Kind::Share(i, _) => Some(i),
            _ => None,
        }
    }
}

/// A Delta as a value of the interpreter: the node itself (`Value::Ext` of its `Rc`), so a node is
/// one allocation, not a node and a wrapper (issue 13).
impl ExtValue for Node {
    fn type_name(&self) -> &'static str {
        "Delta"
    }
    fn show(&self) -> String {
        show_delta(self, 40)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The value of a Delta.
pub fn delta_value(n: Rc<Node>) -> Value {
    Value::Ext(n)
}

/// The node of a Delta value (a new reference to it), if the value is a Delta.
pub fn delta_of(v: &Value) -> Option<Rc<Node>> {
    let Value::Ext(e) = v else { return None };
    e.as_any().downcast_ref::<Node>()?;
    let p = Rc::into_raw(e.clone()) as *const Node;
    // SAFETY: the value's concrete type is `Node` (checked above), and every `Value::Ext` holding a
    // `Node` is an `Rc<Node>` coerced to `Rc<dyn ExtValue>` (`delta_value`; a `Node` is not made
    // behind any other pointer), so `p` is the data pointer `Rc::<Node>::into_raw` would give for
    // the same allocation, whose reference count the `clone` above raised.
    Some(unsafe { Rc::from_raw(p) })
}

/// A rendering of a Delta, cut after about `budget` constructors (Deltas can be huge).
pub fn show_delta(n: &Node, budget: usize) -> String {
    fn go(n: &Node, out: &mut String, left: &mut usize) {
        if *left == 0 {
            out.push('…');
            return;
        }
        *left -= 1;
        let paren = |out: &mut String, n: &Node, left: &mut usize| {
            if matches!(n.kind, Kind::Zero) {
                out.push_str("Zero");
            } else {
                out.push('(');
                go(n, out, left);
                out.push(')');
            }
        };
        match &n.kind {
            Kind::Zero | Kind::OneHot(_) | Kind::Var(_) | Kind::Input(_) => out.push_str(&n.label()),
            Kind::Share(i, d) => {
                out.push_str(&format!("Share {i} "));
                paren(out, d, left);
            }
            Kind::Scale(r, u) => {
                out.push_str(&format!("Scale {} ", if *r < 0.0 { format!("({})", show_real(*r)) } else { show_real(*r) }));
                paren(out, u, left);
            }
            Kind::Add(a, b) => {
                out.push_str("Add ");
                paren(out, a, left);
                out.push(' ');
                paren(out, b, left);
            }
            Kind::Let(i, r, b) => {
                out.push_str(&format!("Let {i} "));
                paren(out, r, left);
                out.push(' ');
                paren(out, b, left);
            }
        }
    }
    let mut s = String::new();
    go(n, &mut s, &mut budget.max(1));
    s
}

pub fn delta_type() -> Type {
    Type::con("Delta", vec![])
}

pub(crate) fn delta_arg(v: &Value, span: Span, what: &str) -> Result<Rc<Node>, RunError> {
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

/// The serial numbers of Delta nodes, per run (a machine runs one program).
#[derive(Default)]
pub struct Serials {
    next: u64,
    /// The index of the `delta_nodes` counter, once interned (counted by index: the counter named
    /// by its text was looked up again whenever another counter came between two nodes).
    nodes_counter: Option<usize>,
}

/// Makes a Delta node: counts it (`delta_nodes`, one allocation) and gives it a serial.
pub(crate) fn mk(m: &mut Machine, kind: Kind) -> Result<Value, RunError> {
    Ok(delta_value(mk_node(m, kind)?))
}

pub(crate) fn mk_node(m: &mut Machine, kind: Kind) -> Result<Rc<Node>, RunError> {
    let span = m.current_span();
    mk_node_at(m, kind, span)
}

pub(crate) fn mk_node_at(m: &mut Machine, kind: Kind, span: Span) -> Result<Rc<Node>, RunError> {
    // one lookup of the state on the common path: the serial is taken first and given back if
    // the allocation budget stops the node (the counts and serials are those of counting, then
    // allocating, then numbering)
    let s = m.state::<Serials>();
    s.next += 1;
    let (serial, counter) = (s.next, s.nodes_counter);
    let c = match counter {
        Some(c) => c,
        None => {
            let c = m.counter_id("delta_nodes");
            m.state::<Serials>().nodes_counter = Some(c);
            c
        }
    };
    m.count_at(c, 1);
    if let Err(e) = m.alloc(1) {
        m.state::<Serials>().next -= 1;
        return Err(e);
    }
    Ok(Rc::new(Node { serial, kind, span }))
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
    let u = delta_arg(&args[1], span, "Scale")?;
    mk(m, Kind::Scale(r, u))
}

pub(crate) fn b_add(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let a = delta_arg(&args[0], span, "Add")?;
    let b = delta_arg(&args[1], span, "Add")?;
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
