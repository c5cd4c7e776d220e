//! What an eval leaves for the graph: its visits per Delta node, and the Delta DAG drawn with its
//! sharing (physical, and — for Fig. 10's Deltas — through `Var id` and `Let id`).

use super::{DeltaRef, Ix, Kind};
use crate::interp::{Graph, GraphEdge, GraphNode, Machine, RunError};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// Visits of an eval: per node (indexed by serial, dense), and a count not yet added to the
/// machine's `eval_visits` counter (added in one go: the counter is a map by name).
pub struct Visits {
    /// u32 (saturating): the per-node array is as long as the run's Delta (issue 13, bytes per op).
    /// Kept only when a graph will be drawn (`per_node_on`): only the graph reads it.
    per_node: Vec<u32>,
    per_node_on: bool,
    pending: u64,
}

impl Default for Visits {
    fn default() -> Self {
        Visits { per_node: vec![], per_node_on: true, pending: 0 }
    }
}

impl Visits {
    /// An eval's visits on `m`: per node only if its graph will be drawn (`Machine::draws_graph`;
    /// `bench` draws none, and at 10^6 the array was 30 bytes a primal op of horner, issue 13).
    pub fn of(m: &Machine) -> Self {
        Visits { per_node_on: m.draws_graph(), ..Visits::default() }
    }
    #[inline]
    pub fn visit(&mut self, serial: u64) {
        self.pending += 1;
        if !self.per_node_on {
            return;
        }
        let i = serial as usize;
        if i >= self.per_node.len() {
            self.per_node.resize((i + 1).max(2 * self.per_node.len()), 0);
        }
        self.per_node[i] = self.per_node[i].saturating_add(1);
    }
    /// `visit` of the `count` serials `last`, `last − 1`, … (the array grown as the first of
    /// them, `last`, grows it; the rest then fit).
    #[inline]
    pub fn visit_down(&mut self, last: u64, count: u64) {
        self.pending += count;
        if !self.per_node_on || count == 0 {
            return;
        }
        let i = last as usize;
        if i >= self.per_node.len() {
            self.per_node.resize((i + 1).max(2 * self.per_node.len()), 0);
        }
        for v in &mut self.per_node[(i + 1).saturating_sub(count as usize)..=i] {
            *v = v.saturating_add(1);
        }
    }
    pub fn get(&self, serial: u64) -> u64 {
        self.per_node.get(serial as usize).map_or(0, |&v| v as u64)
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
            *a = a.saturating_add(b);
        }
    }
}

/// Most nodes a graph carries; the rest are counted in `Graph::omitted`.
pub const GRAPH_LIMIT: usize = 2_000;

/// The Delta DAG reachable from `root`, every physical node once (iteratively), with sharing
/// (in-degree > 1), visit counts, and — for the monadic stages — an edge from each `Var id` to the
/// binding (`Let id`) it refers to, and a node `input i` for each input id, so that the explicit
/// sharing shows as well as the physical one.
pub fn delta_graph(root: &DeltaRef, visits: &Visits, skipped: &HashSet<u64>) -> Graph {
    let Ok(ar) = root.arena.try_borrow() else { return Graph::default() };
    let mut order: Vec<(Ix, Kind)> = vec![];
    let mut seen: HashSet<Ix> = HashSet::default();
    let mut indeg: HashMap<Ix, u64> = HashMap::default();
    let mut stack: Vec<Ix> = vec![root.ix];
    seen.insert(root.ix);
    while let Some(n) = stack.pop() {
        let k = ar.kind(n);
        order.push((n, k));
        for (c, _) in k.children().into_iter().rev() {
            *indeg.entry(c).or_default() += 1;
            if seen.insert(c) {
                stack.push(c);
            }
        }
    }
    // Var references: to the Let binding that id, or to an input node.
    let let_of: HashMap<i64, Ix> = order.iter().filter_map(|&(n, k)| if let Kind::Let(i, ..) = k { Some((i, n)) } else { None }).collect();
    let mut var_refs: HashMap<i64, u64> = HashMap::default();
    // How often each id is referred to: by each Var node with that id, once per parent (the
    // same Var node is shared when a dual number is used twice).
    for (n, k) in &order {
        if let Kind::Var(i) = *k {
            *var_refs.entry(i).or_default() += indeg.get(n).copied().unwrap_or(0).max(1);
        }
    }
    let max_serial = order.iter().map(|&(n, _)| n as u64).max().unwrap_or(0);
    let mut inputs: Vec<i64> = var_refs.keys().filter(|i| !let_of.contains_key(i)).copied().collect();
    inputs.sort();
    let input_node = |i: i64| max_serial + i.max(0) as u64 + 1;
    let mut g = Graph::default();
    let total = order.len() + inputs.len();
    let draw_inputs = total <= GRAPH_LIMIT;
    let mut keep: HashSet<u64> = order.iter().take(GRAPH_LIMIT).map(|&(n, _)| n as u64).collect();
    if draw_inputs {
        keep.extend(inputs.iter().map(|&i| input_node(i)));
    }
    for &(n, k) in order.iter().take(GRAPH_LIMIT) {
        let serial = n as u64;
        let refs = match k {
            Kind::Let(i, ..) => var_refs.get(&i).copied().unwrap_or(0),
            _ => 0,
        };
        let mut label = k.label();
        if skipped.contains(&serial) {
            label.push_str(" (skipped)");
        }
        let span = ar.span(n);
        g.nodes.push(GraphNode {
            span: (!span.is_none()).then_some(span),
            id: serial,
            ctor: k.ctor().to_string(),
            label,
            delta_id: k.delta_id(),
            value: if let Kind::Scale(r, _) = k { Some(r.into()) } else { None },
            shared: indeg.get(&n).copied().unwrap_or(0) > 1 || refs > 1,
            visits: Some(visits.get(serial)),
            ..GraphNode::default()
        });
        for (c, label) in k.children() {
            // The Let spine's `body` edges are left out: with them, each `Var id` → `Let id` edge
            // would close a cycle. What remains is the DAG of §7: each binding points at its
            // right-hand side, whose Vars point at the bindings (or inputs) they use.
            if label != "body" && keep.contains(&(c as u64)) {
                g.edges.push(GraphEdge { from: serial, to: c as u64, label: label.to_string() });
            }
        }
        if let Kind::Var(i) = k {
            let to = let_of.get(&i).map_or_else(|| input_node(i), |&l| l as u64);
            if keep.contains(&to) {
                g.edges.push(GraphEdge { from: serial, to, label: "refers to".into() });
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a graph to draw, an eval keeps its count of visits (the `eval_visits` counter) but no
    /// array of them per node; with one, both.
    #[test]
    fn visits_per_node_only_for_a_graph() {
        let (mut on, mut off) = (Visits::default(), Visits { per_node_on: false, ..Visits::default() });
        for s in [5, 2, 5] {
            on.visit(s);
            off.visit(s);
        }
        assert_eq!((on.pending, off.pending), (3, 3));
        assert_eq!((on.get(5), on.get(2), on.get(4)), (2, 1, 0));
        assert!(off.per_node.is_empty());
        assert_eq!(off.get(5), 0);
    }
}
