//! What an eval leaves for the graph: its visits per Delta node, and the Delta DAG drawn with its
//! sharing (physical, and — for Fig. 10's Deltas — through `Var id` and `Let id`).

use super::{Kind, Node};
use crate::interp::{Graph, GraphEdge, GraphNode, Machine, RunError};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::rc::Rc;

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
        if self.per_node.is_empty() {
            // the first eval's visits are the record: moved, not copied (a second array of a
            // count per node was the eval's peak; issue 13, bytes per op)
            self.per_node = other.per_node;
            return;
        }
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

/// The Delta DAG reachable from `root`, every physical node once (iteratively), with sharing
/// (in-degree > 1), visit counts, and — for the monadic stages — an edge from each `Var id` to the
/// binding (`Let id`) it refers to, and a node `input i` for each input id, so that the explicit
/// sharing shows as well as the physical one.
pub fn delta_graph(root: &Rc<Node>, visits: &Visits, skipped: &HashSet<u64>) -> Graph {
    let mut order: Vec<&Node> = vec![];
    let mut seen: HashSet<u64> = HashSet::default();
    let mut indeg: HashMap<u64, u64> = HashMap::default();
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
    let mut var_refs: HashMap<i64, u64> = HashMap::default();
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
            value: if let Kind::Scale(r, _) = n.kind { Some(r.into()) } else { None },
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
