//! The backpropagator closure tree, the CHAD stages' graph (issue 11, "The page"). Each rule of
//! D_Γ[t] (Figs. 2, 7, Fig. 9, §9) builds a backpropagator, the closure `λd. …` in its second
//! component; it calls its subterms', so the closures the backward pass runs form a tree that
//! mirrors the syntax tree, unrolled where the forward pass was: only the `case` branch taken built
//! one, every `build` element and `fold` step built its own.
//!
//! Recorded from the run, not the program text (printed programs do not change): the transform,
//! repeated once when a run is traced, names each backpropagator's parameter `d` (its rule and
//! source span: `Site`); the machine reports every lambda entered (`Machine::watch_lambdas`), and
//! those whose parameter is a site's are the tree's nodes, one per closure (a closure re-run, as
//! naive higher-order CHAD's context half re-runs a body, counts visits). Its parent is the
//! backpropagator running when it is entered: the innermost entry whose frame is still live (a
//! tail call reuses its caller's frame, so at equal depth the entry that captured it). The cells
//! a backpropagator writes (`one x +=`, a one-hot `one_x`) are leaf nodes, one per variable; the
//! trace's steps point at the node running them. At most `GRAPH_LIMIT` nodes; the rest counted.

use super::graph::GRAPH_LIMIT;
use super::runtime::Rt;
use crate::diag::Span;
use crate::interp::{same_fun, Entered, Graph, GraphEdge, GraphNode, Machine};
use crate::ir::Name;
use crate::value::Value;
use std::cell::RefCell;
use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

/// What a backpropagator stands for: the rule that built it, what to draw, the term's span.
#[derive(Clone, Debug)]
pub struct Site {
    pub rule: &'static str,
    pub label: String,
    pub span: Span,
}

thread_local! {
    /// The sites named while a transform runs under `sites_of`.
    static SITES: RefCell<Option<HashMap<u32, Site>>> = const { RefCell::new(None) };
}

/// Whether a transform is naming its sites (the label is only made then).
pub fn naming() -> bool {
    SITES.with(|s| s.borrow().is_some())
}

/// The backpropagator whose parameter is `d` stands for `rule` at `span`.
pub fn site(d: &Name, rule: &'static str, label: impl FnOnce() -> String, span: Span) {
    SITES.with(|s| {
        if let Some(map) = s.borrow_mut().as_mut() {
            map.insert(d.id, Site { rule, label: label(), span });
        }
    });
}

/// The sites `transform` names (it is the stage's own transform, repeated: names are fresh from the
/// same counter, so the ids are those of the program that runs).
pub fn sites_of(transform: impl FnOnce()) -> HashMap<u32, Site> {
    SITES.with(|s| *s.borrow_mut() = Some(HashMap::default()));
    transform();
    SITES.with(|s| s.borrow_mut().take()).unwrap_or_default()
}

/// One node: a backpropagator closure.
#[derive(Debug)]
struct Node {
    id: u64,
    param: u32,
    visits: u64,
    /// The closure, kept so that its address (its key in `ids`) is not reused.
    closure: Value,
}

/// What the run records for the tree (`Rt::bp`).
#[derive(Debug, Default)]
pub struct Tree {
    sites: HashMap<u32, Site>,
    nodes: Vec<Node>,
    /// Node id by closure address (drawn nodes only).
    ids: HashMap<usize, u64>,
    edges: Vec<(u64, u64, String)>,
    /// Cell leaf nodes by variable, and the (node, cell) pairs already joined.
    cells: Vec<String>,
    writes: rustc_hash::FxHashSet<(u64, usize)>,
    /// The backpropagators running: (node, frame depth, captures); node 0 past the limit.
    stack: Vec<(u64, u64, Rc<[Value]>)>,
    /// Backpropagators entered past the limit.
    omitted: u64,
    /// Ids start after this (chad/arrays draws the tree beside its Bags, whose ids come first).
    base: u64,
}

/// Ids of the tree's nodes in chad/arrays's graph start here, past any Bag's or Tree's serial.
pub const ARRAYS_BASE: u64 = 1 << 32;

/// Starts recording the tree of this run over `sites` (the run must be traced to be drawn).
pub fn record(m: &mut Machine, sites: HashMap<u32, Site>, base: u64) {
    m.state::<Rt>().bp = Some(Box::new(Tree { sites, base, ..Tree::default() }));
    m.watch_lambdas(entered);
}

fn addr(v: &Value) -> usize {
    match v {
        Value::Fun(rc) => Rc::as_ptr(rc) as *const () as usize,
        _ => 0,
    }
}

/// A lambda was entered: a node if it is a backpropagator, below the one running.
fn entered(m: &mut Machine, e: Entered) {
    let depth = m.call_depth();
    let Some(t) = m.state::<Rt>().bp.as_deref_mut() else { return };
    if !t.sites.contains_key(&e.param) {
        return;
    }
    while t.stack.last().is_some_and(|(_, d, _)| *d > depth) {
        t.stack.pop();
    }
    // at the same depth: a tail call from the entry that captured this closure, or a sibling
    while t.stack.last().is_some_and(|(_, d, caps)| *d == depth && !caps.iter().any(|c| same_fun(c, &e.closure))) {
        t.stack.pop();
    }
    let parent = t.stack.last().map(|(id, ..)| *id).filter(|&id| id > 0);
    let key = addr(&e.closure);
    let id = match t.ids.get(&key) {
        Some(&id) => {
            t.nodes[(id - t.base) as usize - 1].visits += 1;
            id
        }
        None if t.nodes.len() < GRAPH_LIMIT => {
            let id = t.base + t.nodes.len() as u64 + 1;
            t.nodes.push(Node { id, param: e.param, visits: 1, closure: e.closure });
            t.ids.insert(key, id);
            if let Some(p) = parent {
                t.edges.push((p, id, String::new()));
            }
            id
        }
        None => {
            t.omitted += 1;
            0
        }
    };
    t.stack.push((id, depth, e.captures));
}

/// The node of the backpropagator running now (for a trace step), if the run records one.
pub fn current(m: &mut Machine) -> Option<u64> {
    let depth = m.call_depth();
    let t = m.state::<Rt>().bp.as_deref_mut()?;
    while t.stack.last().is_some_and(|(_, d, _)| *d > depth) {
        t.stack.pop();
    }
    t.stack.last().map(|(id, ..)| *id).filter(|&id| id > 0)
}

/// The running backpropagator writes variable `var`'s cell (`one x += v`, `one_x v`); returns its node.
pub fn write(m: &mut Machine, var: &str) -> Option<u64> {
    let node = current(m)?;
    let t = m.state::<Rt>().bp.as_deref_mut()?;
    let cell = match t.cells.iter().position(|c| c == var) {
        Some(i) => i,
        None => {
            t.cells.push(var.to_string());
            t.cells.len() - 1
        }
    };
    t.writes.insert((node, cell));
    Some(node)
}

/// The tree as the stage's graph: backpropagators, then the cells (ids after theirs).
pub fn graph(m: &mut Machine) -> Option<Graph> {
    let t = m.state::<Rt>().bp.take()?;
    if t.nodes.is_empty() {
        return None;
    }
    let mut g = Graph::default();
    for n in &t.nodes {
        let Some(site) = t.sites.get(&n.param) else { continue };
        let _ = &n.closure;
        g.nodes.push(GraphNode {
            id: n.id,
            ctor: site.rule.into(),
            label: site.label.clone(),
            visits: (n.visits > 1).then_some(n.visits),
            span: (!site.span.is_none()).then_some(site.span),
            ..GraphNode::default()
        });
    }
    let first_cell = t.base + t.nodes.len() as u64 + 1;
    let mut cells_drawn = vec![false; t.cells.len()];
    let mut writes: Vec<&(u64, usize)> = t.writes.iter().collect();
    writes.sort();
    for &&(node, cell) in &writes {
        cells_drawn[cell] = true;
        g.edges.push(GraphEdge { from: node, to: first_cell + cell as u64, label: "+=".into() });
    }
    for (i, c) in t.cells.iter().enumerate().filter(|(i, _)| cells_drawn[*i]) {
        g.nodes.push(GraphNode { id: first_cell + i as u64, ctor: "cell".into(), label: format!("{c}̄"), ..GraphNode::default() });
    }
    let mut edges: Vec<GraphEdge> = t.edges.iter().map(|(a, b, l)| GraphEdge { from: *a, to: *b, label: l.clone() }).collect();
    edges.append(&mut g.edges);
    g.edges = edges;
    let mut indegree: HashMap<u64, u64> = HashMap::default();
    for e in &g.edges {
        *indegree.entry(e.to).or_default() += 1;
    }
    for n in &mut g.nodes {
        n.shared = indegree.get(&n.id).copied().unwrap_or(0) > 1;
    }
    g.omitted = t.omitted;
    Some(g)
}

/// chad/arrays's graph: its Bags and Trees (`graph.rs`), and beside them the backpropagator tree,
/// cut so that both together keep to `GRAPH_LIMIT` nodes.
pub fn beside(bags: Option<Graph>, tree: Option<Graph>) -> Option<Graph> {
    let (mut g, t) = match (bags, tree) {
        (Some(g), Some(t)) => (g, t),
        (g, t) => return g.or(t),
    };
    let room = GRAPH_LIMIT.saturating_sub(g.nodes.len());
    let dropped = t.nodes.len().saturating_sub(room);
    let kept: rustc_hash::FxHashSet<u64> = t.nodes.iter().take(room).map(|n| n.id).collect();
    g.nodes.extend(t.nodes.into_iter().take(room));
    g.edges.extend(t.edges.into_iter().filter(|e| kept.contains(&e.from) && kept.contains(&e.to)));
    g.omitted += t.omitted + dropped as u64;
    Some(g)
}
