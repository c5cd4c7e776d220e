//! `chad/arrays`'s graph: the accumulation structure its run built (§7, Figs. 9–10). The run records
//! the Bags the backward pass hands to `collect` (a build's backpropagator) and to the input's
//! gradient, and the reduction `Tree` each `fold`/`reduce` recorded, with the cotangent `unTree`
//! pushed into each of its nodes. The graph has one node per Bag node (BEmpty, BOne ⟨i, d⟩, BPlus,
//! §8.1's BArray) and per Tree node (Node with its value, Leaf), shared ones once. Each node keeps
//! the source span of the array operation that made it (a BOne the indexing, a Tree node its fold,
//! a BPlus its first entry's), which the page turns into its group (`web/src/arraygroups.rs`).
//! Walked with explicit stacks: a Bag built by n `+`s is n deep, a left fold's Tree too.

use super::bags::{Bag, Tree};
use super::runtime::{shown, show_ct, Rt};
use crate::diag::Span;
use crate::interp::{Graph, GraphEdge, GraphNode, Machine};
use crate::value::Value;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::rc::Rc;

/// Most nodes the graph carries (as the other stages' graphs); the rest are counted in
/// `Graph::omitted`, which the page reports as not drawn.
pub const GRAPH_LIMIT: usize = 2_000;

/// What one run recorded for its graph (only the stage's own run records: `Rt::record`).
#[derive(Debug, Default)]
pub struct Recorded {
    roots: Vec<Root>,
    /// The output cotangent's Bags (toLin), kept so their addresses stay theirs.
    seeds: Vec<Rc<Bag>>,
    /// The serial of each Tree node made (by address: the recorded roots keep the Trees alive).
    trees: HashMap<usize, u64>,
    /// The cotangent `unTree` gave each Tree node, by serial.
    got: HashMap<u64, Value>,
    /// The last serial given: BOne's, Tree nodes and roots are numbered as they are made, so a
    /// trace step can name its node (`TraceStep::node`); the graph's other nodes come after.
    last: u64,
}

/// Where the run handed over a Bag or made a Tree, with the root's serial.
#[derive(Debug)]
enum Root {
    /// A build's backpropagator collected its array's cotangent (Fig. 9); the build's span.
    Collect(Rc<Bag>, Span, u64),
    /// An input array's gradient, densified into its length by the wrapper.
    Input(Rc<Bag>, usize),
    /// A fold's reduction Tree (Fig. 10): balanced for `reduce`, its leaf count, the fold's span.
    Tree(Rc<Tree>, bool, usize, Span, u64),
}

/// The run's record, when it keeps one.
pub fn recording<'a>(m: &'a mut Machine) -> Option<&'a mut Recorded> {
    m.state::<Rt>().record.as_deref_mut()
}

/// A new serial when the run records (0, no node, when it does not).
pub fn serial(m: &mut Machine) -> u64 {
    recording(m).map_or(0, |r| r.next())
}

impl Recorded {
    fn next(&mut self) -> u64 {
        self.last += 1;
        self.last
    }
    pub fn seed(&mut self, b: &Rc<Bag>) {
        self.seeds.push(b.clone());
    }
    /// Returns the root's serial (the collect step's node).
    pub fn collect(&mut self, b: &Rc<Bag>, span: Span) -> u64 {
        let id = self.next();
        self.roots.push(Root::Collect(b.clone(), span, id));
        id
    }
    pub fn input(&mut self, b: &Rc<Bag>, len: usize) {
        self.roots.push(Root::Input(b.clone(), len));
    }
    /// Returns the root's serial (the fold step's node).
    pub fn tree(&mut self, t: &Rc<Tree>, balanced: bool, leaves: usize, span: Span) -> u64 {
        let id = self.next();
        self.roots.push(Root::Tree(t.clone(), balanced, leaves, span, id));
        id
    }
    pub fn tree_node(&mut self, t: &Rc<Tree>) {
        let id = self.next();
        self.trees.insert(addr(&**t), id);
    }
    /// Keeps the cotangent unTree gives a Tree node; returns the node's serial.
    pub fn untree(&mut self, t: &Rc<Tree>, d: &Value) -> Option<u64> {
        let id = *self.trees.get(&addr(&**t))?;
        self.got.insert(id, d.clone());
        Some(id)
    }
}

fn addr<T>(x: &T) -> usize {
    x as *const T as usize
}

enum Item<'a> {
    Bag(&'a Rc<Bag>),
    Tree(&'a Rc<Tree>, Span),
}

/// Builds the graph: roots in the order the run met them, each one's structure depth first.
struct Builder<'a> {
    rec: &'a Recorded,
    seeds: HashSet<usize>,
    /// Each structure node met, by address, with its graph id (`None` past the limit).
    ids: HashMap<usize, Option<u64>>,
    /// Where each drawn node is in `g.nodes`.
    pos: HashMap<u64, usize>,
    g: Graph,
    /// Nodes met, drawn or not.
    total: u64,
    /// The last id given to a node without a serial.
    fresh: u64,
    indegree: HashMap<u64, u64>,
    /// Each drawn node's children, in order (a BPlus takes its span from them).
    children: HashMap<u64, Vec<u64>>,
}

impl<'a> Builder<'a> {
    /// Node `id` (`None`: a fresh one), if it is within the limit.
    fn node(&mut self, id: Option<u64>, ctor: &str, label: String, span: Span, value: Option<&Value>) -> Option<u64> {
        self.total += 1;
        if self.g.nodes.len() >= GRAPH_LIMIT {
            return None;
        }
        let id = id.filter(|&s| s > 0).unwrap_or_else(|| {
            self.fresh += 1;
            self.fresh
        });
        self.pos.insert(id, self.g.nodes.len());
        self.g.nodes.push(GraphNode {
            id,
            ctor: ctor.into(),
            label,
            value: value.map(shown),
            span: (!span.is_none()).then_some(span),
            ..GraphNode::default()
        });
        Some(id)
    }

    fn edge(&mut self, from: Option<u64>, to: Option<u64>, label: &str) {
        if let (Some(from), Some(to)) = (from, to) {
            self.g.edges.push(GraphEdge { from, to, label: label.into() });
            *self.indegree.entry(to).or_default() += 1;
            self.children.entry(from).or_default().push(to);
        }
    }

    /// The structure under `top`, below the root node `parent`, every node once (explicit stack).
    fn walk(&mut self, parent: Option<u64>, top: Item<'a>) {
        let mut stack = vec![(parent, top, "")];
        while let Some((parent, item, label)) = stack.pop() {
            let key = match &item {
                Item::Bag(b) => addr(&***b),
                Item::Tree(t, _) => addr(&***t),
            };
            if let Some(&id) = self.ids.get(&key) {
                self.edge(parent, id, label);
                continue;
            }
            let id = match item {
                Item::Bag(b) if self.seeds.contains(&key) => {
                    let n = super::bags::entries(b).len();
                    self.node(None, "seed", format!("dt: the output's cotangent ({n} entries)"), Span::NONE, None)
                }
                Item::Bag(b) => match &**b {
                    Bag::Empty => self.node(None, "BEmpty", "BEmpty".into(), Span::NONE, None),
                    Bag::One(i, d, span, serial) => self.node(Some(*serial), "BOne", format!("BOne ⟨{i}, {}⟩", show_ct(d)), *span, None),
                    Bag::Array(xs) => self.node(None, "BArray", format!("BArray (length {})", xs.borrow().len()), Span::NONE, None),
                    Bag::Plus(x, y) => {
                        let id = self.node(None, "BPlus", "BPlus".into(), Span::NONE, None);
                        stack.push((id, Item::Bag(y), "r"));
                        stack.push((id, Item::Bag(x), "l"));
                        id
                    }
                },
                Item::Tree(t, span) => {
                    let serial = self.rec.trees.get(&key).copied();
                    let got = serial.and_then(|s| self.rec.got.get(&s));
                    match &**t {
                        Tree::Leaf(x) => self.node(serial, "Leaf", format!("Leaf {x}"), span, got),
                        Tree::Node(l, y, _, r) => {
                            let id = self.node(serial, "Node", format!("Node {y}"), span, got);
                            stack.push((id, Item::Tree(r, span), "r"));
                            stack.push((id, Item::Tree(l, span), "l"));
                            id
                        }
                    }
                }
            };
            self.ids.insert(key, id);
            self.edge(parent, id, label);
        }
    }
}

/// The graph of what the run recorded, or `None` if it recorded nothing (no arrays).
pub fn graph(m: &mut Machine) -> Option<Graph> {
    let rec = m.state::<Rt>().record.take()?;
    if rec.roots.is_empty() {
        return None;
    }
    let seeds = rec.seeds.iter().map(|b| addr(&**b)).collect();
    let mut b = Builder { rec: &rec, seeds, ids: HashMap::default(), pos: HashMap::default(), g: Graph::default(), total: 0, fresh: rec.last, indegree: HashMap::default(), children: HashMap::default() };
    for root in &rec.roots {
        match root {
            Root::Collect(bag, span, serial) => {
                let id = b.node(Some(*serial), "collect", "collect (a build's backpropagator)".into(), *span, None);
                b.walk(id, Item::Bag(bag));
            }
            Root::Input(bag, len) => {
                let id = b.node(None, "gradient", format!("an input array's gradient (length {len})"), Span::NONE, None);
                b.walk(id, Item::Bag(bag));
            }
            Root::Tree(t, balanced, leaves, span, serial) => {
                let (ctor, how) = if *balanced { ("reduce", "balanced") } else { ("fold", "left to right") };
                let id = b.node(Some(*serial), ctor, format!("{ctor}: Tree of {leaves} leaves, {how}"), *span, None);
                b.walk(id, Item::Tree(t, *span));
            }
        }
    }
    // A BPlus adds what its entries' operations made: its span covers theirs, so the innermost
    // operation around both is its group (none when they come from two operations side by side).
    // Children come after their parent in the walk, so from the back every child is done first.
    for k in (0..b.g.nodes.len()).rev() {
        if b.g.nodes[k].ctor == "BPlus" {
            let spans: Option<Vec<Span>> = b.children.get(&b.g.nodes[k].id).map(|cs| cs.iter().map(|c| b.pos.get(c).and_then(|&i| b.g.nodes[i].span)).collect()).unwrap_or(None);
            b.g.nodes[k].span = spans.and_then(|ss| ss.into_iter().reduce(|x, y| Span { start: x.start.min(y.start), end: x.end.max(y.end) }));
        }
    }
    for n in &mut b.g.nodes {
        n.shared = b.indegree.get(&n.id).copied().unwrap_or(0) > 1;
    }
    b.g.omitted = b.total - b.g.nodes.len() as u64;
    Some(b.g)
}
