//! `krawiec/delta`: reverse mode #2, Krawiec et al. §6, Figs. 7–8. The dense δS vector of
//! `krawiec/dense` becomes a symbolic term, `Delta = Zero | OneHot N | Scale R Delta | Add Delta Delta`,
//! built in O(1) per operation and interpreted once at the end by `eval2` into one accumulator that
//! is updated in place (`updateAt`). Deltas share physically (Rc), so the forward pass stays linear,
//! but eval2 walks the DAG as a tree: on `let y = e in y + y` it walks e twice, and on the doubling
//! chain its visits grow as 2^n.
//!
//! This file also holds the Delta node type that every Krawiec stage's runtime uses (with `Var` and
//! `Let` for the monadic stages), its iterative Drop, and the Delta DAG as a `Graph`.

use super::dense::{count_reals, dual_program, dual_type, ra_expr, ra_pat, require_ra_to_r, Companion};
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Graph, GraphEdge, GraphNode, Machine, RunError, TraceStep};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};
use crate::value::{show_real, ExtValue, Value};
use std::any::Any;
use std::collections::HashMap;
use std::rc::Rc;

pub struct Delta;

static INFO: StageInfo = StageInfo {
    id: "krawiec/delta",
    paper: "Krawiec et al. 2022",
    section: "§6, Figs. 7–8",
    title: "Reverse mode #2: Delta terms, evaluated once by eval2",
    explanation: "Instead of carrying a dense δS vector with every real, carry a small symbolic description of it: \
Delta = Zero | OneHot i | Scale r u | Add u1 u2, a defunctionalised linear function. Drev2{R} = R × Delta, and the \
translation is no longer indexed by S: literals get Zero, +R builds Add u1 u2 and ×R builds \
Add (Scale y u1) (Scale x u2), each O(1). The wrapper R2{e} seeds input i with OneHot i and runs eval2 dt u z, which \
walks the Delta once, multiplying the Scale factors along each path and adding them into one accumulator with \
updateAt, in place. The O(a) cost per operation is gone, but sharing is lost: the Delta is a DAG in memory (Rc), yet \
eval2 has no way to know that two occurrences of the same sub-Delta are the same, so on `let y = e in y + y` it walks \
e twice, and on the chain `let x1 = x + x in … in xn + xn` it makes 2^(n+2) − 1 visits (counter eval_visits; the \
graph shows how often each shared node was visited).",
    complexity: "forward pass O(T); eval2 O(size of the Delta unfolded into a tree), up to O(2^T).",
    accepts: "the whole scalar language inside main; main itself must have type R^a → R (Fig. 8; OneHot needs S = R^a)",
};

// ---------------------------------------------------------------------------------------------
// Shared: Delta nodes
// ---------------------------------------------------------------------------------------------

/// The constructors of every Delta type of the paper: Fig. 7's (Zero, OneHot, Scale, Add) and
/// Fig. 10's (Zero, Scale, Add, Var, Let). Each stage's builtins make only its own.
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

fn take_children(k: &mut Kind, out: &mut Vec<Rc<Node>>) {
    match std::mem::take(k) {
        Kind::Scale(_, u) => out.push(u),
        Kind::Add(a, b) | Kind::Let(_, a, b) => {
            out.push(a);
            out.push(b);
        }
        _ => {}
    }
}

impl Node {
    pub fn children(&self) -> Vec<(&Rc<Node>, &'static str)> {
        match &self.kind {
            Kind::Scale(_, u) => vec![(u, "u")],
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
        }
    }
    pub fn label(&self) -> String {
        match &self.kind {
            Kind::OneHot(i) => format!("OneHot {i}"),
            Kind::Scale(r, _) => format!("Scale {}", show_real(*r)),
            Kind::Var(i) => format!("Var {i}"),
            Kind::Let(i, ..) => format!("Let {i}"),
            _ => self.ctor().to_string(),
        }
    }
    pub fn delta_id(&self) -> Option<i64> {
        match self.kind {
            Kind::OneHot(i) | Kind::Var(i) | Kind::Let(i, ..) => Some(i),
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
        show_delta(&self.0, 40)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
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
            Kind::Zero | Kind::OneHot(_) | Kind::Var(_) => out.push_str(&n.label()),
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
    match v.ext::<DeltaVal>() {
        Some(d) => Ok(d.0.clone()),
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
}

/// Makes a Delta node: counts it (`delta_nodes`, one allocation) and gives it a serial.
pub(crate) fn mk(m: &mut Machine, kind: Kind) -> Result<Value, RunError> {
    Ok(Value::Ext(Rc::new(DeltaVal(mk_node(m, kind)?))))
}

pub(crate) fn mk_node(m: &mut Machine, kind: Kind) -> Result<Rc<Node>, RunError> {
    let span = m.current_span();
    mk_node_at(m, kind, span)
}

pub(crate) fn mk_node_at(m: &mut Machine, kind: Kind, span: Span) -> Result<Rc<Node>, RunError> {
    m.count("delta_nodes", 1);
    m.alloc(1)?;
    let s = m.state::<Serials>();
    s.next += 1;
    Ok(Rc::new(Node { serial: s.next, kind, span }))
}

/// Gives generated code without a span the span of the source operation it comes from, so that
/// the Delta nodes it builds (and the trace steps at them) point back at that operation.
pub(crate) fn stamp(e: &mut Expr, span: Span) {
    if e.span.is_none() {
        e.span = span;
    }
    each_child_mut(e, &mut |c| stamp(c, span));
}

pub(crate) fn b_zero(m: &mut Machine, _args: Vec<Value>, _span: Span) -> Result<Value, RunError> {
    mk(m, Kind::Zero)
}

pub(crate) fn b_scale(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let r = real_arg(&args[0], span, "Scale")?;
    let u = delta_arg(&args[1], span, "Scale")?;
    mk(m, Kind::Scale(r, u))
}

pub(crate) fn b_add(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let a = delta_arg(&args[0], span, "Add")?;
    let b = delta_arg(&args[1], span, "Add")?;
    mk(m, Kind::Add(a, b))
}

fn b_onehot(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let i = int_arg(&args[0], span, "OneHot")?;
    mk(m, Kind::OneHot(i))
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

/// Visits of an eval: per node (indexed by serial, dense), and a count not yet added to the
/// machine's `eval_visits` counter (added in one go: the counter is a map by name).
#[derive(Default)]
pub struct Visits {
    per_node: Vec<u64>,
    pending: u64,
}

impl Visits {
    #[inline]
    pub fn visit(&mut self, serial: u64) {
        let i = serial as usize;
        if i >= self.per_node.len() {
            self.per_node.resize((i + 1).max(2 * self.per_node.len()), 0);
        }
        self.per_node[i] += 1;
        self.pending += 1;
    }
    pub fn get(&self, serial: u64) -> u64 {
        self.per_node.get(serial as usize).copied().unwrap_or(0)
    }
    /// Adds the pending visits to `eval_visits`, and to the counts a budget error reports.
    pub fn flush(&mut self, m: &mut Machine, res: &mut Result<(), RunError>) {
        m.count("eval_visits", self.pending);
        if let Err(RunError::Budget { cost, .. }) = res {
            *cost.counters.entry("eval_visits".to_string()).or_default() += self.pending;
        }
        self.pending = 0;
    }
    pub fn merge(&mut self, other: Visits) {
        if other.per_node.len() > self.per_node.len() {
            self.per_node.resize(other.per_node.len(), 0);
        }
        for (a, b) in self.per_node.iter_mut().zip(other.per_node) {
            *a += b;
        }
    }
}

/// Most nodes a graph carries; the rest are counted in `Graph::omitted`.
pub const GRAPH_LIMIT: usize = 2_000;

/// Most rows of a map or vector shown in one trace step.
pub const STATE_ROWS: usize = 200;

/// The Delta DAG reachable from `root`, every physical node once (iteratively), with sharing
/// (in-degree > 1), visit counts, and — for the monadic stages — an edge from each `Var id` to the
/// binding (`Let id`) it refers to, and a node `input i` for each input id, so that the explicit
/// sharing shows as well as the physical one.
pub fn delta_graph(root: &Rc<Node>, visits: &Visits, skipped: &std::collections::HashSet<u64>) -> Graph {
    use std::collections::HashSet;
    let mut order: Vec<&Node> = vec![];
    let mut seen: HashSet<u64> = HashSet::new();
    let mut indeg: HashMap<u64, u64> = HashMap::new();
    let mut stack: Vec<&Node> = vec![root];
    seen.insert(root.serial);
    while let Some(n) = stack.pop() {
        order.push(n);
        for (c, _) in n.children().into_iter().rev() {
            *indeg.entry(c.serial).or_default() += 1;
            if seen.insert(c.serial) {
                stack.push(c);
            }
        }
    }
    // Var references: to the Let binding that id, or to an input node.
    let let_of: HashMap<i64, u64> = order.iter().filter_map(|n| if let Kind::Let(i, ..) = n.kind { Some((i, n.serial)) } else { None }).collect();
    let mut var_refs: HashMap<i64, u64> = HashMap::new();
    // How often each id is referred to: by each Var node with that id, once per parent (the
    // same Var node is shared when a dual number is used twice).
    for n in &order {
        if let Kind::Var(i) = n.kind {
            *var_refs.entry(i).or_default() += indeg.get(&n.serial).copied().unwrap_or(0).max(1);
        }
    }
    let max_serial = order.iter().map(|n| n.serial).max().unwrap_or(0);
    let mut inputs: Vec<i64> = var_refs.keys().filter(|i| !let_of.contains_key(i)).copied().collect();
    inputs.sort();
    let input_node = |i: i64| max_serial + i.max(0) as u64 + 1;
    let mut g = Graph::default();
    let total = order.len() + inputs.len();
    let draw_inputs = total <= GRAPH_LIMIT;
    let mut keep: HashSet<u64> = order.iter().take(GRAPH_LIMIT).map(|n| n.serial).collect();
    if draw_inputs {
        keep.extend(inputs.iter().map(|&i| input_node(i)));
    }
    for n in order.iter().take(GRAPH_LIMIT) {
        let refs = match n.kind {
            Kind::Let(i, ..) => var_refs.get(&i).copied().unwrap_or(0),
            _ => 0,
        };
        let mut label = n.label();
        if skipped.contains(&n.serial) {
            label.push_str(" (skipped)");
        }
        g.nodes.push(GraphNode {
            span: (!n.span.is_none()).then_some(n.span),
            id: n.serial,
            ctor: n.ctor().to_string(),
            label,
            delta_id: n.delta_id(),
            value: if let Kind::Scale(r, _) = n.kind { Some(r) } else { None },
            shared: indeg.get(&n.serial).copied().unwrap_or(0) > 1 || refs > 1,
            visits: Some(visits.get(n.serial)),
            ..GraphNode::default()
        });
        for (c, label) in n.children() {
            // The Let spine's `body` edges are left out: with them, each `Var id` → `Let id` edge
            // would close a cycle. What remains is the DAG of §7: each binding points at its
            // right-hand side, whose Vars point at the bindings (or inputs) they use.
            if label != "body" && keep.contains(&c.serial) {
                g.edges.push(GraphEdge { from: n.serial, to: c.serial, label: label.to_string() });
            }
        }
        if let Kind::Var(i) = n.kind {
            let to = let_of.get(&i).copied().unwrap_or_else(|| input_node(i));
            if keep.contains(&to) {
                g.edges.push(GraphEdge { from: n.serial, to, label: "refers to".into() });
            }
        }
    }
    if draw_inputs {
        for i in inputs {
            g.nodes.push(GraphNode {
                id: input_node(i),
                ctor: "input".into(),
                label: format!("input {i}"),
                delta_id: Some(i),
                shared: var_refs.get(&i).copied().unwrap_or(0) > 1,
                ..GraphNode::default()
            });
        }
    }
    g.omitted = (total - g.nodes.len()) as u64;
    g
}

// ---------------------------------------------------------------------------------------------
// eval2 (Fig. 8)
// ---------------------------------------------------------------------------------------------

/// The runtime state of `krawiec/delta`: the Delta eval2 was given, and its visits per node.
#[derive(Default)]
pub struct Eval2State {
    pub root: Option<Rc<Node>>,
    pub visits: Visits,
}

/// `eval2 : R → Delta → R^a ⊸ R^a` (Fig. 8). The vector is any value; its reals, left to right, are
/// the slots `updateAt i` adds to (1-based), mutated in place (the vector is used linearly), and the
/// result has the vector's shape. Iterative over an explicit stack; one `tick` per visit, so that the
/// steps budget stops the exponential walk cleanly with the counts reached.
fn b_eval2(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let dt = real_arg(&args[0], span, "eval2")?;
    let root = delta_arg(&args[1], span, "eval2")?;
    let mut acc = args[2].real_leaves();
    let mut visits = Visits::default();
    let mut res = eval2_loop(m, dt, &root, &mut acc, &mut visits, span);
    visits.flush(m, &mut res);
    let st = m.state::<Eval2State>();
    st.root = Some(root);
    st.visits.merge(visits);
    res?;
    Ok(args[2].with_reals(&mut acc.into_iter()))
}

fn eval2_loop(m: &mut Machine, dt: f64, root: &Rc<Node>, acc: &mut [f64], visits: &mut Visits, span: Span) -> Result<(), RunError> {
    let mut stack: Vec<(f64, &Node)> = vec![(dt, root)];
    while let Some((x, n)) = stack.pop() {
        visits.visit(n.serial);
        m.tick(1)?;
        match &n.kind {
            // eval2 x Zero xs = xs
            Kind::Zero => {}
            // eval2 x (OneHot i) xs = updateAt i x xs
            Kind::OneHot(i) => {
                if *i < 1 || *i as usize > acc.len() {
                    return Err(RunError::runtime(span, format!("eval2: OneHot {i} is outside the input's 1..{} reals", acc.len())));
                }
                acc[*i as usize - 1] += x;
                m.real_op();
            }
            // eval2 x (Scale y u) xs = eval2 (x × y) u xs
            Kind::Scale(y, u) => {
                m.real_op();
                stack.push((x * y, u));
            }
            // eval2 x (Add u1 u2) xs = eval2 x u2 (eval2 x u1 xs): u1 first
            Kind::Add(a, b) => {
                stack.push((x, b));
                stack.push((x, a));
            }
            Kind::Var(_) | Kind::Let(..) => {
                return Err(RunError::runtime(span, "eval2: Var and Let are not in Fig. 7's Delta (they come with §7)"))
            }
        }
        if m.tracing() {
            let note = match &n.kind {
                Kind::OneHot(i) => format!("updateAt {i} ({})", show_real(x)),
                Kind::Scale(y, _) => format!("Scale {}: factor becomes {}", show_real(*y), show_real(x * y)),
                Kind::Add(..) => "Add: u1, then u2".to_string(),
                _ => "Zero: nothing to add".to_string(),
            };
            let state = acc.iter().take(STATE_ROWS).enumerate().map(|(i, v)| (format!("{}", i + 1), *v)).collect();
            let span = (!n.span.is_none()).then_some(n.span);
            m.trace(TraceStep { kind: "eval2".into(), node: Some(n.serial), span, factor: Some(x), note, state });
        }
    }
    Ok(())
}

struct DeltaCompanion;

impl Companion for DeltaCompanion {
    fn ty(&self) -> Type {
        delta_type()
    }
    fn zero(&self) -> Expr {
        builtin("Zero")
    }
    fn add(&self, a: Expr, b: Expr) -> Expr {
        apps(builtin("Add"), [a, b])
    }
    fn scale(&self, c: Expr, d: Expr) -> Expr {
        apps(builtin("Scale"), [c, d])
    }
    fn names(&self) -> [&'static str; 2] {
        ["u1", "u2"]
    }
}

impl Stage for Delta {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let mut bs = delta_ctor_builtins();
        bs.push(Builtin {
            name: "OneHot",
            scheme: Scheme::mono(Type::fun(Type::Int, delta_type())),
            arity: 1,
            lazy_last: false,
            run: b_onehot,
        });
        // eval2 : R → Delta → R^a ⊸ R^a (any shape of reals: the input's)
        let a = Type::Var(0);
        bs.push(Builtin {
            name: "eval2",
            scheme: Scheme { vars: vec![0], ty: Type::fun(Type::Real, Type::fun(delta_type(), Type::lin(a.clone(), a))) },
            arity: 3,
            lazy_last: false,
            run: b_eval2,
        });
        bs
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        require_ra_to_r(src, "krawiec/delta", "Fig. 8 (R2{e}; OneHot works only for S = R^a)")
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut fr = Fresh::new(src.program);
        let mut out = dual_program(src, &[WRAPPER], &mut fr, &DeltaCompanion);
        let s = src.input_type;
        let a = count_reals(s);
        // R2{e} = λ((..., s_i, ...), dt).
        //   let s0 = (..., (s_i, OneHot i), ...) in let z = (..., 0, ...) in
        //   let (t, u) = Drev2{e} s0 in eval2 dt u z          (returning t too)
        let names: Vec<Name> = (0..a).map(|_| fr.name("s")).collect();
        let (dt, s0, z, t, u) = (fr.name("dt"), fr.name("s0"), fr.name("z"), fr.name("t"), fr.name("u"));
        let seeds = ra_expr(s, &mut 0, &mut |i| pair(var(&names[i as usize - 1]), app(builtin("OneHot"), int(i))));
        let zeros = ra_expr(s, &mut 0, &mut |_| real(0.0));
        let body = let_(
            pvar(&s0),
            seeds,
            let_(
                pvar(&z),
                zeros,
                let_(
                    ppair(pvar(&t), pvar(&u)),
                    app(global("main"), var(&s0)),
                    pair(var(&t), apps(builtin("eval2"), [var(&dt), var(&u), var(&z)])),
                ),
            ),
        );
        let param = ppair(ra_pat(s, &mut names.iter().cloned()), pvar(&dt));
        out.defs.push(def(WRAPPER, lam(param, body)));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        let (s, t) = (src.input_type, src.output_type);
        let c = DeltaCompanion;
        vec![
            // Drev2{e} : (R × Delta)^a → (R × Delta)
            ("main".into(), Type::fun(dual_type(s, &c), dual_type(t, &c))),
            // R2{e} : (R^a × δR) → δR^a, plus the primal
            (WRAPPER.into(), Type::fun(Type::Tuple(vec![s.clone(), t.clone()]), Type::Tuple(vec![t.clone(), s.clone()]))),
        ]
    }

    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        let st = m.state::<Eval2State>();
        let root = st.root.clone()?;
        Some(delta_graph(&root, &st.visits, &Default::default()))
    }
}
