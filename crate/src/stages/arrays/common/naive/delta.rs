//! The Delta terms of §4 as runtime values: one node type for the scalar Delta of Fig. 3 (Zero, Input,
//! Add, Scale, Share) and the array constructors of §4.2–4.3 (Index, SumOuter, Build1, Replicate and
//! LitArray, the Delta of an array literal), each node with its value's shape cached (the paper's O(1)
//! `shapeDelta`, §6.4), and the constructors as builtins that count what the forward pass builds.

use crate::diag::Span;
use crate::interp::{Builtin, Machine, RunError};
use crate::ir::*;
use crate::value::{show_real, ExtValue, Value};
use std::any::Any;
use std::rc::Rc;

/// The shape of a value: a real, or an array of shapes (the language's arrays may be jagged).
#[derive(Debug)]
pub enum Shape {
    Scalar,
    /// An array's item shapes, with how many reals it holds and whether every item is a real, both
    /// cached: the one-hot reverse pass asks at every `Index` (O(1) there, not a walk of the array).
    Arr { items: Vec<Rc<Shape>>, size: u64, flat: bool },
}

impl Shape {
    /// The shape of a primal value (reals and nested arrays of reals; anything else is a scalar).
    pub fn of(v: &Value) -> Rc<Shape> {
        // through `elems`: an empty array may keep its element's shape (value.rs, `EmptyArray`)
        match v.elems() {
            Some(vs) => Shape::arr(vs.iter().map(Shape::of).collect()),
            None => scalar(),
        }
    }
    pub fn arr(items: Vec<Rc<Shape>>) -> Rc<Shape> {
        let size = items.iter().map(|s| s.size()).sum();
        let flat = items.iter().all(|s| matches!(**s, Shape::Scalar));
        Rc::new(Shape::Arr { items, size, flat })
    }
    /// How many reals a value of this shape holds.
    pub fn size(&self) -> u64 {
        match self {
            Shape::Scalar => 1,
            Shape::Arr { size, .. } => *size,
        }
    }
}

#[derive(Debug, Default)]
pub enum Kind {
    #[default]
    Zero,
    /// `Input v`: the input named v by the wrapper (§2.7's DVarName).
    Input(i64),
    Add(Rc<Node>, Rc<Node>),
    Scale(f64, Rc<Node>),
    /// `Share id d` (§2.5): the ID makes the DAG's sharing visible to the reverse pass.
    Share(i64, Rc<Node>),
    /// `Index d i` (§4.2): the derivative of `a ! i`, whose transpose is a one-hot (§4.4).
    Index(Rc<Node>, usize),
    /// `SumOuter d` (§4.2), transposed to a replicate.
    SumOuter(Rc<Node>),
    /// `Build1 [d0, …, dk-1]` (§4.3): the lambda's Delta for each index.
    Build1(Vec<Rc<Node>>),
    /// The Delta of an array literal `[e1, …, en]` (the core language's `[t1, …, tn]`).
    LitArray(Vec<Rc<Node>>),
    /// `Replicate k d`, transposed to a sum over the outer dimension.
    Replicate(usize, Rc<Node>),
}

/// A Delta node, with a serial number that names it in the graph and the trace.
#[derive(Debug)]
pub struct Node {
    pub serial: u64,
    pub kind: Kind,
    pub shape: Rc<Shape>,
    /// The source operation that built it, if known.
    pub span: Span,
}

impl Drop for Node {
    /// Iterative, so that dropping a long chain of Deltas cannot overflow the native stack.
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

fn take_children(k: &mut Kind, out: &mut Vec<Rc<Node>>) {
    match std::mem::take(k) {
        Kind::Scale(_, u) | Kind::Share(_, u) | Kind::Index(u, _) | Kind::SumOuter(u) | Kind::Replicate(_, u) => out.push(u),
        Kind::Add(a, b) => {
            out.push(a);
            out.push(b);
        }
        Kind::Build1(ds) | Kind::LitArray(ds) => out.extend(ds),
        Kind::Zero | Kind::Input(_) => {}
    }
}

impl Node {
    pub fn children(&self) -> Vec<(&Rc<Node>, String)> {
        match &self.kind {
            Kind::Scale(_, u) | Kind::Share(_, u) | Kind::Index(u, _) | Kind::SumOuter(u) | Kind::Replicate(_, u) => vec![(u, "d".into())],
            Kind::Add(a, b) => vec![(a, "d1".into()), (b, "d2".into())],
            Kind::Build1(ds) | Kind::LitArray(ds) => ds.iter().enumerate().map(|(i, d)| (d, format!("[{i}]"))).collect(),
            Kind::Zero | Kind::Input(_) => vec![],
        }
    }
    pub fn ctor(&self) -> &'static str {
        match self.kind {
            Kind::Zero => "Zero",
            Kind::Input(_) => "Input",
            Kind::Add(..) => "Add",
            Kind::Scale(..) => "Scale",
            Kind::Share(..) => "Share",
            Kind::Index(..) => "Index",
            Kind::SumOuter(_) => "SumOuter",
            Kind::Build1(_) => "Build1",
            Kind::LitArray(_) => "LitArray",
            Kind::Replicate(..) => "Replicate",
        }
    }
    pub fn label(&self) -> String {
        match &self.kind {
            Kind::Input(v) => format!("Input {v}"),
            Kind::Scale(r, _) => format!("Scale {}", show_real(*r)),
            Kind::Share(i, _) => format!("Share {i}"),
            Kind::Index(_, i) => format!("Index [{i}]"),
            Kind::Build1(ds) => format!("Build1 ({})", ds.len()),
            Kind::LitArray(ds) => format!("LitArray ({})", ds.len()),
            Kind::Replicate(k, _) => format!("Replicate {k}"),
            _ => self.ctor().to_string(),
        }
    }
    pub fn id(&self) -> Option<i64> {
        match self.kind {
            Kind::Share(i, _) | Kind::Input(i) => Some(i),
            _ => None,
        }
    }
}

/// A Delta as a value of the interpreter.
#[derive(Debug)]
pub struct DeltaVal(pub Rc<Node>);

impl ExtValue for DeltaVal {
    fn type_name(&self) -> &'static str {
        "Delta"
    }
    fn show(&self) -> String {
        show_delta(&self.0, 24)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A rendering of a Delta, cut after about `budget` constructors (iteratively: Deltas can be deep).
pub fn show_delta(n: &Node, budget: usize) -> String {
    enum Item<'a> {
        Node(&'a Node),
        Text(&'static str),
    }
    let mut out = String::new();
    let mut left = budget;
    let mut stack = vec![Item::Node(n)];
    while let Some(it) = stack.pop() {
        match it {
            Item::Text(t) => out.push_str(t),
            Item::Node(n) => {
                if left == 0 {
                    out.push('…');
                    continue;
                }
                left -= 1;
                let kids = n.children();
                if kids.is_empty() {
                    out.push_str(&n.label());
                    continue;
                }
                out.push_str(&n.label());
                for (c, _) in kids.iter().rev() {
                    stack.push(Item::Text(")"));
                    stack.push(Item::Node(c));
                    stack.push(Item::Text(" ("));
                }
            }
        }
    }
    out
}

/// The runtime state of the naive stages: the serial and ID counters, the next input name, and what
/// the reverse pass leaves for the graph (its roots and its visits per node).
#[derive(Default)]
pub struct Rt {
    pub serial: u64,
    pub next_id: i64,
    pub roots: Vec<Rc<Node>>,
    pub visits: rustc_hash::FxHashMap<u64, u64>,
}

pub fn rt<'a>(m: &'a mut Machine<'_>) -> &'a mut Rt {
    m.state::<Rt>()
}

/// A new node; every constructor but the leaves Zero and Input counts as one of `inner_nodes`
/// (footnote 18's count: the 2n inputs are "administrative data", not constructors built).
pub fn node(m: &mut Machine, kind: Kind, shape: Rc<Shape>, span: Span) -> Result<Rc<Node>, RunError> {
    m.tick(1)?;
    m.alloc(1)?;
    if !matches!(kind, Kind::Zero | Kind::Input(_)) {
        m.count("inner_nodes", 1);
    }
    let r = rt(m);
    r.serial += 1;
    Ok(Rc::new(Node { serial: r.serial, kind, shape, span }))
}

pub fn delta_type() -> Type {
    Type::con("Delta", vec![])
}
pub fn m_type(t: Type) -> Type {
    Type::con("M", vec![t])
}

pub fn delta_arg(v: &Value, span: Span, what: &str) -> Result<Rc<Node>, RunError> {
    match v {
        Value::Ext(e) => match e.as_any().downcast_ref::<DeltaVal>() {
            Some(d) => Ok(d.0.clone()),
            None => Err(RunError::runtime(span, format!("{what} expects a Delta, got {v}"))),
        },
        _ => Err(RunError::runtime(span, format!("{what} expects a Delta, got {v}"))),
    }
}
pub fn int_arg(v: &Value, span: Span, what: &str) -> Result<i64, RunError> {
    match v {
        Value::Int(i) => Ok(*i),
        _ => Err(RunError::runtime(span, format!("{what} expects an integer, got {v}"))),
    }
}
pub fn real_arg(v: &Value, span: Span, what: &str) -> Result<f64, RunError> {
    match v {
        Value::Real(r) => Ok(*r),
        _ => Err(RunError::runtime(span, format!("{what} expects a real, got {v}"))),
    }
}
fn deltas_arg(v: &Value, span: Span, what: &str) -> Result<Vec<Rc<Node>>, RunError> {
    match v.elems() {
        Some(vs) => vs.iter().map(|d| delta_arg(d, span, what)).collect(),
        None => Err(RunError::runtime(span, format!("{what} expects an array of Deltas, got {v}"))),
    }
}

pub fn dv(n: Rc<Node>) -> Value {
    Value::Ext(Rc::new(DeltaVal(n)))
}

thread_local! {
    /// The one scalar shape every real's Delta shares (a shape is never changed): an input array's
    /// shape and every Zero and Input were one allocation a real (issue 13).
    static SCALAR: Rc<Shape> = Rc::new(Shape::Scalar);
}

fn scalar() -> Rc<Shape> {
    SCALAR.with(Rc::clone)
}

fn b_zero(m: &mut Machine, _: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    Ok(dv(node(m, Kind::Zero, scalar(), span)?))
}
fn b_input(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let v = int_arg(&args[0], span, "Input")?;
    Ok(dv(node(m, Kind::Input(v), scalar(), span)?))
}
/// `InputA v a`: the Input of an array input, shaped like its primal `a`.
fn b_input_a(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let v = int_arg(&args[0], span, "InputA")?;
    let shape = Shape::of(&args[1]);
    m.tick(shape.size())?;
    Ok(dv(node(m, Kind::Input(v), shape, span)?))
}
fn b_add(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let (a, b) = (delta_arg(&args[0], span, "Add")?, delta_arg(&args[1], span, "Add")?);
    let shape = a.shape.clone();
    Ok(dv(node(m, Kind::Add(a, b), shape, span)?))
}
fn b_scale(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let r = real_arg(&args[0], span, "Scale")?;
    let d = delta_arg(&args[1], span, "Scale")?;
    let shape = d.shape.clone();
    Ok(dv(node(m, Kind::Scale(r, d), shape, span)?))
}
fn b_share(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let i = int_arg(&args[0], span, "Share")?;
    let d = delta_arg(&args[1], span, "Share")?;
    let shape = d.shape.clone();
    Ok(dv(node(m, Kind::Share(i, d), shape, span)?))
}
fn b_index(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let d = delta_arg(&args[0], span, "Index")?;
    let i = int_arg(&args[1], span, "Index")?;
    let shape = match &*d.shape {
        Shape::Arr { items, .. } if i >= 0 && (i as usize) < items.len() => items[i as usize].clone(),
        _ => return Err(RunError::runtime(span, format!("Index {i} is outside the Delta's array"))),
    };
    Ok(dv(node(m, Kind::Index(d, i as usize), shape, span)?))
}
fn b_sum_outer(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let d = delta_arg(&args[0], span, "SumOuter")?;
    let shape = match &*d.shape {
        Shape::Arr { items, .. } => items.first().cloned().unwrap_or_else(scalar),
        Shape::Scalar => return Err(RunError::runtime(span, "SumOuter expects an array's Delta")),
    };
    Ok(dv(node(m, Kind::SumOuter(d), shape, span)?))
}
fn b_build1(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let ds = deltas_arg(&args[0], span, "Build1")?;
    m.tick(ds.len() as u64)?;
    let shape = Shape::arr(ds.iter().map(|d| d.shape.clone()).collect());
    Ok(dv(node(m, Kind::Build1(ds), shape, span)?))
}
fn b_lit_array(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let ds = deltas_arg(&args[0], span, "LitArray")?;
    let shape = Shape::arr(ds.iter().map(|d| d.shape.clone()).collect());
    Ok(dv(node(m, Kind::LitArray(ds), shape, span)?))
}
fn b_replicate(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let k = int_arg(&args[0], span, "Replicate")?.max(0) as usize;
    let d = delta_arg(&args[1], span, "Replicate")?;
    m.tick(k as u64)?;
    let shape = Shape::arr(vec![d.shape.clone(); k]);
    Ok(dv(node(m, Kind::Replicate(k, d), shape, span)?))
}

/// `genID : M Z` (§2.5), monotonically increasing; remembers nothing else.
fn b_gen_id(m: &mut Machine, _: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    m.tick(1)?;
    let r = rt(m);
    r.next_id += 1;
    Ok(Value::Int(r.next_id))
}
/// `runIdGen m` (§2.7): runs the forward pass with the ID counter from 0 (IDs number from 1).
fn b_run_id_gen(m: &mut Machine, args: &mut Vec<Value>, _: Span) -> Result<Value, RunError> {
    rt(m).next_id = 0;
    let thunk = args.pop().unwrap_or(Value::Unit);
    m.apply(thunk, Value::Unit)
}

fn b(name: &'static str, vars: &[u32], ty: Type, arity: usize, run: crate::interp::BuiltinFn) -> Builtin {
    Builtin { name, scheme: Scheme { vars: vars.to_vec(), ty }, arity, lazy_last: false, run }
}

/// The constructors, `genID` and `runIdGen`.
pub fn delta_builtins() -> Vec<Builtin> {
    let (d, z, r, a) = (delta_type(), Type::Int, Type::Real, Type::Var(1));
    let f = Type::fun;
    vec![
        b("Zero", &[], d.clone(), 0, b_zero),
        b("Input", &[], f(z.clone(), d.clone()), 1, b_input),
        b("InputA", &[1], f(z.clone(), f(a.clone(), d.clone())), 2, b_input_a),
        b("Add", &[], f(d.clone(), f(d.clone(), d.clone())), 2, b_add),
        b("Scale", &[], f(r, f(d.clone(), d.clone())), 2, b_scale),
        b("Share", &[], f(z.clone(), f(d.clone(), d.clone())), 2, b_share),
        b("Index", &[], f(d.clone(), f(z.clone(), d.clone())), 2, b_index),
        b("SumOuter", &[], f(d.clone(), d.clone()), 1, b_sum_outer),
        b("Build1", &[], f(Type::array(d.clone()), d.clone()), 1, b_build1),
        b("LitArray", &[], f(Type::array(d.clone()), d.clone()), 1, b_lit_array),
        b("Replicate", &[], f(z.clone(), f(d.clone(), d.clone())), 2, b_replicate),
        b("genID", &[], m_type(z), 0, b_gen_id),
        Builtin { name: "runIdGen", scheme: Scheme { vars: vec![1], ty: f(m_type(a.clone()), a) }, arity: 1, lazy_last: true, run: b_run_id_gen },
    ]
}

/// `DsumOuter` (Eq. 3) on a one-dimensional array of dual numbers (`sum` is over reals):
/// `(x1 + … + xn, Share id (Add (… (Add Zero d1) …) dn))`, the primal added left to right as `sum`.
fn b_dsum_outer(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    // through `elems`: an empty array of dual numbers keeps its element (value.rs, `EmptyArray`)
    let Some(vs) = args[0].elems() else { return Err(RunError::runtime(span, format!("DsumOuter expects an array, got {}", args[0]))) };
    let mut total = 0.0;
    let mut acc = node(m, Kind::Zero, scalar(), span)?;
    for v in vs.iter() {
        let Value::Tuple(p) = v else { return Err(RunError::runtime(span, format!("DsumOuter expects dual numbers, got {v}"))) };
        total += real_arg(&p[0], span, "DsumOuter")?;
        let d = delta_arg(&p[1], span, "DsumOuter")?;
        m.real_op();
        acc = node(m, Kind::Add(acc, d), scalar(), span)?;
    }
    let r = rt(m);
    r.next_id += 1;
    let id = r.next_id;
    let shared = node(m, Kind::Share(id, acc), scalar(), span)?;
    Ok(Value::pair(Value::Real(total), dv(shared)))
}

pub fn dsum_outer_builtin() -> Builtin {
    let dual = Type::tup(vec![Type::Real, delta_type()]);
    b("DsumOuter", &[], Type::fun(Type::array(dual.clone()), m_type(dual)), 1, b_dsum_outer)
}
