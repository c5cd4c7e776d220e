//! What the innermost strategy knows is already normal in a rule's result, so that it normalises the
//! result only where the rule changed something.
//!
//! A rule is tried at a node whose children are normal, and rules look only at the redex (they are
//! functions of the subtree, not of where it is): so every proper subtree of the redex is normal, and
//! so is any subtree of the result equal to one of them — wherever the rule put it. Re-normalising
//! the result whole (what innermost rewriting does) walks those again and tries every rule at every
//! node of them, for nothing: most of a rewrite's time on the quaternion's partial evaluation (a
//! continuation inlined, then β-reduced, then its tuple let split: its whole body walked each time).
//! Skipping them fires the same rules at the same places in the same order; only the visit count
//! drops.
//!
//! Subtrees are matched by a structural hash, then compared (a hash never decides alone). The result's
//! normal subtrees are remembered by address while the strategy normalises that result: each is
//! alive, in its box, from when it is marked until the walk reaches it (the walk only takes apart what
//! it has reached), so an address seen there is the node that was marked. Lets are walked in loops:
//! nothing here recurses along a chain.

use crate::ir::{each_child, Expr, ExprKind, Pat};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// The nodes of a tree in pre-order, with each one's structural hash and subtree size.
struct Hashed<'a> {
    nodes: Vec<&'a Expr>,
    hash: Vec<u64>,
    size: Vec<u32>,
}

impl<'a> Hashed<'a> {
    fn of(e: &'a Expr) -> Hashed<'a> {
        let mut nodes = vec![];
        let mut parent: Vec<u32> = vec![];
        let mut stack = vec![(e, u32::MAX)];
        while let Some((x, p)) = stack.pop() {
            let i = nodes.len() as u32;
            nodes.push(x);
            parent.push(p);
            let at = stack.len();
            each_child(x, &mut |c| stack.push((c, i)));
            stack[at..].reverse();
        }
        // children come after their parent in pre-order: one backward pass folds each node's
        // children (right to left) into it
        let n = nodes.len();
        let mut acc = vec![0u64; n];
        let mut hash = vec![0u64; n];
        let mut size = vec![1u32; n];
        for i in (0..n).rev() {
            let h = mix(local(nodes[i]) ^ acc[i].rotate_left(17));
            hash[i] = h;
            let p = parent[i];
            if p != u32::MAX {
                let p = p as usize;
                acc[p] = mix(acc[p] ^ h);
                size[p] += size[i];
            }
        }
        Hashed { nodes, hash, size }
    }
}

/// The proper subtrees of a redex (all normal), by structural hash.
pub(super) struct Normal<'a> {
    by_hash: HashMap<u64, &'a Expr, BuildHasherDefault<Id>>,
}

impl<'a> Normal<'a> {
    /// The proper subtrees of `redex`, whose children are normal.
    pub fn below(redex: &'a Expr) -> Normal<'a> {
        let h = Hashed::of(redex);
        let mut by_hash = HashMap::with_capacity_and_hasher(h.nodes.len(), Default::default());
        for i in 1..h.nodes.len() {
            by_hash.entry(h.hash[i]).or_insert(h.nodes[i]);
        }
        Normal { by_hash }
    }

    /// Whether the whole of `result` is one of them (None), else the addresses of its largest proper
    /// subtrees that are.
    pub fn marks(&self, result: &Expr) -> Option<Marks> {
        let h = Hashed::of(result);
        if self.by_hash.get(&h.hash[0]).is_some_and(|k| same(k, result)) {
            return None;
        }
        let mut out = Marks::default();
        let mut i = 1;
        while i < h.nodes.len() {
            if self.by_hash.get(&h.hash[i]).is_some_and(|k| same(k, h.nodes[i])) {
                out.set.insert(address(h.nodes[i]));
                i += h.size[i] as usize;
            } else {
                i += 1;
            }
        }
        Some(out)
    }
}

/// Nodes of a rule's result known to be normal, by address (see the module's comment): those in
/// `set`, or (`all_but`: as a rule said, `rewrite::Changed::Only`) all but those in it.
#[derive(Default)]
pub(super) struct Marks {
    set: HashSet<usize, BuildHasherDefault<Id>>,
    all_but: bool,
}

impl Marks {
    /// Every node of the result is known normal but these (and the root, which is always walked).
    /// The walk asks only about nodes of the result it has not reached, so a node freed and its
    /// address reused by a node made later is never asked about under these marks.
    pub fn all_but(dirty: Vec<usize>) -> Marks {
        Marks { set: dirty.into_iter().collect(), all_but: true }
    }

    pub fn has(&self, e: &Expr) -> bool {
        if self.all_but {
            !self.set.contains(&address(e))
        } else {
            !self.set.is_empty() && self.set.contains(&address(e))
        }
    }
}

/// A rule's claim about its result (`rewrite::Changed`), checked against the redex (tests only):
/// each node it says is a copy, but whose parent is new, equals one of the redex's proper subtrees.
#[cfg(test)]
pub(super) fn check_claim(rule: &str, redex: &Expr, result: &Expr, changed: &super::Changed) {
    let normal = Normal::below(redex);
    let is_copy = |x: &Expr| normal.by_hash.get(&Hashed::of(x).hash[0]).is_some_and(|k| same(k, x));
    let dirty: HashSet<usize> = match changed {
        super::Changed::Nothing => {
            assert!(is_copy(result), "{rule} said its whole result is a part of the redex");
            return;
        }
        super::Changed::Only(d) => d.iter().copied().collect(),
    };
    let mut stack = vec![result];
    while let Some(x) = stack.pop() {
        each_child(x, &mut |c| {
            if dirty.contains(&address(c)) {
                stack.push(c);
            } else {
                assert!(is_copy(c), "{rule} said a new part of its result is a copy of the redex's: {c:?}");
            }
        });
    }
}

fn address(e: &Expr) -> usize {
    e as *const Expr as usize
}

/// Whether two trees are equal (as `==`, without recursing along them).
fn same(a: &Expr, b: &Expr) -> bool {
    let mut stack = vec![(a, b)];
    while let Some((x, y)) = stack.pop() {
        if std::ptr::eq(x, y) {
            continue;
        }
        if x.span != y.span || x.ty != y.ty || !same_node(&x.kind, &y.kind) {
            return false;
        }
        let mut xs = vec![];
        each_child(x, &mut |c| xs.push(c));
        let mut k = 0;
        let mut fits = true;
        each_child(y, &mut |c| {
            match xs.get(k) {
                Some(&cx) => stack.push((cx, c)),
                None => fits = false,
            }
            k += 1;
        });
        if !fits || k != xs.len() {
            return false;
        }
    }
    true
}

/// The two nodes are equal but for their children.
fn same_node(a: &ExprKind, b: &ExprKind) -> bool {
    use ExprKind as K;
    match (a, b) {
        (K::Var(x), K::Var(y)) => x == y,
        (K::Real(x), K::Real(y)) => x == y,
        (K::Int(x), K::Int(y)) => x == y,
        (K::Bool(x), K::Bool(y)) => x == y,
        (K::Unit, K::Unit) => true,
        (K::Lam(k1, p1), K::Lam(k2, p2)) => k1 == k2 && p1.0 == p2.0,
        (K::App(..), K::App(..)) | (K::Fst(_), K::Fst(_)) | (K::Snd(_), K::Snd(_)) => true,
        (K::Inl(_), K::Inl(_)) | (K::Inr(_), K::Inr(_)) | (K::Pure(_), K::Pure(_)) | (K::Par(..), K::Par(..)) => true,
        (K::Let(p1), K::Let(p2)) | (K::Bind(p1), K::Bind(p2)) => p1.0 == p2.0,
        (K::LetRec(f1), K::LetRec(f2)) => { let (f1, f2) = (&f1.0, &f2.0);
            f1.len() == f2.len() && f1.iter().zip(f2.iter()).all(|(a, b)| a.name == b.name && a.span == b.span)
        }
        (K::Tuple(x), K::Tuple(y)) | (K::Array(x), K::Array(y)) => x.len() == y.len(),
        (K::Prim(o1, x), K::Prim(o2, y)) => o1 == o2 && x.len() == y.len(),
        (K::Case(x), K::Case(y)) => x.1 == y.1 && x.3 == y.3,
        (K::If(..), K::If(..)) => true,
        (K::Ann(t1), K::Ann(t2)) => t1.1 == t2.1,
        (K::Builtin(x), K::Builtin(y)) => x == y,
        _ => false,
    }
}

/// A node's own hash: what `same_node` compares (but types), and its span.
fn local(e: &Expr) -> u64 {
    use ExprKind as K;
    let mut h = Id::default();
    std::mem::discriminant(&e.kind).hash(&mut h);
    h.write_u64(((e.span.start as u64) << 32) | e.span.end as u64);
    match &e.kind {
        K::Var(x) => h.write_u64(x.id as u64),
        K::Real(r) => h.write_u64(r.to_bits()),
        K::Int(i) => h.write_u64(*i as u64),
        K::Bool(b) => h.write_u64(*b as u64),
        K::Lam(_, p) => pat(&p.0, &mut h), K::Let(p) | K::Bind(p) => pat(&p.0, &mut h),
        K::LetRec(fs_x) => { let (fs, _) = &**fs_x; fs.iter().for_each(|f| h.write_u64(f.name.id as u64)) },
        K::Tuple(es) | K::Array(es) => h.write_u64(es.len() as u64),
        K::Prim(op, es) => {
            op.hash(&mut h);
            h.write_u64(es.len() as u64);
        }
        K::Case(c) => {
            let (_, p, _, q, _) = &**c;
            pat(p, &mut h);
            pat(q, &mut h);
        }
        K::Builtin(name) => name.hash(&mut h),
        _ => {}
    }
    h.finish()
}

fn pat(p: &Pat, h: &mut Id) {
    let mut stack = vec![p];
    while let Some(p) = stack.pop() {
        match p {
            Pat::Var(n, _) => h.write_u64(n.id as u64 + 3),
            Pat::Wild(_) => h.write_u64(1),
            Pat::Unit(_) => h.write_u64(2),
            Pat::Tuple(ps, _) => {
                h.write_u64(ps.len() as u64 + (1 << 40));
                stack.extend(ps);
            }
        }
    }
}

fn mix(mut x: u64) -> u64 {
    // splitmix64's finaliser
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A hasher for keys that are hashes already (and for building them): each word mixed in.
#[derive(Default)]
pub(super) struct Id(u64);

impl Hasher for Id {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = mix(self.0 ^ x).wrapping_add(x);
    }
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::*;
    use crate::ir::Name;

    #[test]
    fn the_redex_parts_a_result_keeps_are_known_wherever_they_are() {
        let (x, y) = (Name::new("x", 1), Name::new("y", 2));
        let big = add(mul(var(&x), real(2.0)), var(&y));
        // redex `fst (big, y)`, result `big + 1.0`: big (a copy) is known, the new root and 1.0 are not
        let redex = fst(tuple(vec![big.clone(), var(&y)]));
        let result = add(big.clone(), real(1.0));
        let normal = Normal::below(&redex);
        let marks = normal.marks(&result).expect("the result is not one of the redex's parts");
        assert_eq!(marks.set.len(), 1);
        let ExprKind::Prim(_, args) = &result.kind else { unreachable!() };
        assert!(marks.has(&args[0]) && !marks.has(&args[1]));
        // a result that is one of the parts is normal whole; a changed copy is not known
        assert!(normal.marks(&big).is_none());
        let changed = add(mul(var(&x), real(3.0)), var(&y));
        assert!(normal.marks(&changed).is_some_and(|m| !m.has(&changed)));
    }

    #[test]
    fn long_chains_are_hashed_and_compared_without_recursion() {
        crate::limits::run_with_stack(|| {
            let n = 100_000;
            let mut e = var(&Name::new("a", 1));
            for i in 0..n {
                e = let_(pvar(&Name::new("a", i + 2)), real(i as f64), e);
            }
            let redex = fst(tuple(vec![e.clone(), real(0.0)]));
            assert!(Normal::below(&redex).marks(&e).is_none());
        });
    }
}
