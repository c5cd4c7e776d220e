//! A persistent ordered map: an AVL tree whose nodes are shared by `Rc` (the papers' `Map`, O(log n)
//! an operation). `clone` is O(1); an update copies a node only where it is shared (`Rc::make_mut`),
//! so a map held by one value is changed in place and one held by two is copied along the path, the
//! old version unchanged.
//!
//! Why not rpds's red-black tree (used before, session 46): its `make_mut` on every node of every
//! descent, its rebalancing and its entry held in a second allocation were 30–45 % of a Krawiec or
//! sparse gradient (issue 13); this tree does one allocation an insert and the same O(log n) work.
//! It keeps the few operations the stages use, and iterates in key order as the old one did.

use std::cmp::Ordering;
use std::fmt;
use std::rc::Rc;

type Link<K, V> = Option<Rc<Node<K, V>>>;

struct Node<K, V> {
    key: K,
    val: V,
    /// The subtree's height (a leaf's is 1): an AVL tree is at most 1.44 log₂ n high.
    h: u8,
    left: Link<K, V>,
    right: Link<K, V>,
}

impl<K: Clone, V: Clone> Clone for Node<K, V> {
    /// A node copied because it is shared (`Rc::make_mut`, `own`).
    fn clone(&self) -> Self {
        #[cfg(test)]
        COPIES.with(|c| c.set(c.get() + 1));
        Node { key: self.key.clone(), val: self.val.clone(), h: self.h, left: self.left.clone(), right: self.right.clone() }
    }
}

#[cfg(test)]
thread_local! {
    static COPIES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The nodes this thread has copied so far (tests: whether an update was in place).
#[cfg(test)]
pub(crate) fn copies() -> u64 {
    COPIES.with(|c| c.get())
}

fn height<K, V>(l: &Link<K, V>) -> u8 {
    l.as_ref().map_or(0, |n| n.h)
}

impl<K, V> Node<K, V> {
    fn fix(&mut self) {
        self.h = 1 + height(&self.left).max(height(&self.right));
    }
}

/// The left child raised over `top`.
fn rot_right<K: Clone, V: Clone>(mut top: Rc<Node<K, V>>) -> Rc<Node<K, V>> {
    let t = Rc::make_mut(&mut top);
    let Some(mut l) = t.left.take() else { return top };
    let lm = Rc::make_mut(&mut l);
    t.left = lm.right.take();
    t.fix();
    lm.right = Some(top);
    lm.fix();
    l
}

/// The right child raised over `top`.
fn rot_left<K: Clone, V: Clone>(mut top: Rc<Node<K, V>>) -> Rc<Node<K, V>> {
    let t = Rc::make_mut(&mut top);
    let Some(mut r) = t.right.take() else { return top };
    let rm = Rc::make_mut(&mut r);
    t.right = rm.left.take();
    t.fix();
    rm.left = Some(top);
    rm.fix();
    r
}

/// Restores the AVL invariant at a node whose subtrees differ in height by 2 (after one insert or
/// delete below it): one rotation or two.
fn rotate<K: Clone, V: Clone>(mut n: Rc<Node<K, V>>) -> Rc<Node<K, V>> {
    if height(&n.left) > height(&n.right) {
        let nm = Rc::make_mut(&mut n);
        if let Some(l) = nm.left.take() {
            nm.left = Some(if height(&l.right) > height(&l.left) { rot_left(l) } else { l });
        }
        rot_right(n)
    } else {
        let nm = Rc::make_mut(&mut n);
        if let Some(r) = nm.right.take() {
            nm.right = Some(if height(&r.left) > height(&r.right) { rot_right(r) } else { r });
        }
        rot_left(n)
    }
}

/// A node's height fixed after one of its subtrees changed height by one: whether it changed, or
/// None when the two sides now differ by 2 (then `rotated`).
fn refit<K, V>(n: &mut Node<K, V>) -> Option<bool> {
    let (hl, hr) = (height(&n.left), height(&n.right));
    if hl.abs_diff(hr) > 1 {
        return None;
    }
    let h = 1 + hl.max(hr);
    let changed = h != n.h;
    n.h = h;
    Some(changed)
}

/// `link`'s node, `old` high, rotated into balance: whether the subtree's height changed.
fn rotated<K: Clone, V: Clone>(link: &mut Link<K, V>, old: u8) -> bool {
    if let Some(n) = link.take() {
        *link = Some(rotate(n));
    }
    height(link) != old
}

/// What an insert did below a link.
#[derive(PartialEq)]
enum Ins {
    /// the key was there: its value updated
    Updated,
    /// a node added, the subtree as high as before
    Added,
    /// a node added, the subtree one higher
    Grew,
}

/// Inserts `v` at `k` when absent, else `f(old, v)`.
fn ins<K: Ord + Clone, V: Clone, F: FnOnce(&mut V, V)>(link: &mut Link<K, V>, k: K, v: V, f: F) -> Ins {
    let Some(rc) = link.as_mut() else {
        *link = Some(Rc::new(Node { key: k, val: v, h: 1, left: None, right: None }));
        return Ins::Grew;
    };
    let n = Rc::make_mut(rc);
    let r = match k.cmp(&n.key) {
        Ordering::Less => ins(&mut n.left, k, v, f),
        Ordering::Greater => ins(&mut n.right, k, v, f),
        Ordering::Equal => {
            f(&mut n.val, v);
            return Ins::Updated;
        }
    };
    // the path above a subtree that did not grow is unchanged
    if r != Ins::Grew {
        return r;
    }
    let old = n.h;
    let grew = match refit(n) {
        Some(grew) => grew,
        None => rotated(link, old),
    };
    if grew { Ins::Grew } else { Ins::Added }
}

/// The node out of its `Rc`, moved when no one else holds it, else copied.
fn own<K: Clone, V: Clone>(rc: Rc<Node<K, V>>) -> Node<K, V> {
    Rc::try_unwrap(rc).unwrap_or_else(|rc| (*rc).clone())
}

/// Removes the least entry of a non-empty subtree: it, and whether the subtree shrank.
fn pop_min<K: Clone, V: Clone>(link: &mut Link<K, V>) -> Option<(K, V, bool)> {
    let n = Rc::make_mut(link.as_mut()?);
    if n.left.is_none() {
        let n = own(link.take()?);
        *link = n.right;
        return Some((n.key, n.val, true));
    }
    let (k, v, shrank) = pop_min(&mut n.left)?;
    let old = n.h;
    let shrank = shrank
        && match refit(n) {
            Some(shrank) => shrank,
            None => rotated(link, old),
        };
    Some((k, v, shrank))
}

/// Removes `k`: its value, and whether the subtree shrank.
fn del<K: Ord + Clone, V: Clone>(link: &mut Link<K, V>, k: &K) -> Option<(V, bool)> {
    let n = Rc::make_mut(link.as_mut()?);
    let (v, shrank) = match k.cmp(&n.key) {
        Ordering::Less => del(&mut n.left, k)?,
        Ordering::Greater => del(&mut n.right, k)?,
        Ordering::Equal if n.right.is_none() => {
            // its left child (a leaf, or none) takes its place
            let n = own(link.take()?);
            *link = n.left;
            return Some((n.val, true));
        }
        Ordering::Equal => {
            // the successor's entry moves into this node, which stays
            let (sk, sv, shrank) = pop_min(&mut n.right)?;
            n.key = sk;
            (std::mem::replace(&mut n.val, sv), shrank)
        }
    };
    let old = n.h;
    let shrank = shrank
        && match refit(n) {
            Some(shrank) => shrank,
            None => rotated(link, old),
        };
    Some((v, shrank))
}

fn get_mut<'a, K: Ord + Clone, V: Clone>(link: &'a mut Link<K, V>, k: &K) -> Option<&'a mut V> {
    let n = Rc::make_mut(link.as_mut()?);
    match k.cmp(&n.key) {
        Ordering::Less => get_mut(&mut n.left, k),
        Ordering::Greater => get_mut(&mut n.right, k),
        Ordering::Equal => Some(&mut n.val),
    }
}

pub struct PMap<K, V> {
    root: Link<K, V>,
    size: usize,
}

impl<K, V> Clone for PMap<K, V> {
    fn clone(&self) -> Self {
        PMap { root: self.root.clone(), size: self.size }
    }
}

impl<K, V> Default for PMap<K, V> {
    fn default() -> Self {
        PMap { root: None, size: 0 }
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for PMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K, V> PMap<K, V> {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn size(&self) -> usize {
        self.size
    }
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
    /// The entries in key order.
    pub fn iter(&self) -> Iter<'_, K, V> {
        let mut it = Iter { stack: Vec::new() };
        it.push_left(&self.root);
        it
    }
    /// The greatest key's entry.
    pub fn last(&self) -> Option<(&K, &V)> {
        let mut n = self.root.as_ref()?;
        while let Some(r) = n.right.as_ref() {
            n = r;
        }
        Some((&n.key, &n.val))
    }
}

impl<K: Ord, V> PMap<K, V> {
    pub fn get(&self, k: &K) -> Option<&V> {
        let mut l = &self.root;
        while let Some(n) = l {
            match k.cmp(&n.key) {
                Ordering::Less => l = &n.left,
                Ordering::Greater => l = &n.right,
                Ordering::Equal => return Some(&n.val),
            }
        }
        None
    }
}

impl<K: Ord + Clone, V: Clone> PMap<K, V> {
    /// The value at `k` to update (the path to it copied where shared).
    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        get_mut(&mut self.root, k)
    }
    pub fn insert_mut(&mut self, k: K, v: V) {
        self.insert_with(k, v, |old, v| *old = v);
    }
    /// `insertWith`: `v` at `k` when absent, else `f(old, v)` updates the old value; one descent.
    pub fn insert_with(&mut self, k: K, v: V, f: impl FnOnce(&mut V, V)) {
        if ins(&mut self.root, k, v, f) != Ins::Updated {
            self.size += 1;
        }
    }
    /// Removes `k`, returning its value (lookup and delete in one descent).
    pub fn remove_mut(&mut self, k: &K) -> Option<V> {
        let v = del(&mut self.root, k)?.0;
        self.size -= 1;
        Some(v)
    }
}

impl<K: Ord + Clone, V: Clone> FromIterator<(K, V)> for PMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(it: I) -> Self {
        let mut m = PMap::new();
        for (k, v) in it {
            m.insert_mut(k, v);
        }
        m
    }
}

pub struct Iter<'a, K, V> {
    stack: Vec<&'a Node<K, V>>,
}

impl<'a, K, V> Iter<'a, K, V> {
    fn push_left(&mut self, mut l: &'a Link<K, V>) {
        while let Some(n) = l {
            self.stack.push(n);
            l = &n.left;
        }
    }
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);
    fn next(&mut self) -> Option<Self::Item> {
        let n = self.stack.pop()?;
        self.push_left(&n.right);
        Some((&n.key, &n.val))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn check<K: Ord, V>(l: &Link<K, V>, lo: Option<&K>, hi: Option<&K>) -> (u8, usize) {
        let Some(n) = l else { return (0, 0) };
        assert!(lo.map_or(true, |lo| *lo < n.key) && hi.map_or(true, |hi| n.key < *hi), "keys out of order");
        let (hl, cl) = check(&n.left, lo, Some(&n.key));
        let (hr, cr) = check(&n.right, Some(&n.key), hi);
        assert!(hl.abs_diff(hr) <= 1, "unbalanced");
        assert_eq!(n.h, 1 + hl.max(hr), "stale height");
        (n.h, 1 + cl + cr)
    }

    /// Random inserts, updates and removes agree with std's BTreeMap, the tree stays an AVL tree.
    #[test]
    fn pmap_agrees_with_btreemap() {
        let (mut m, mut r) = (PMap::new(), BTreeMap::new());
        let mut s: u64 = 7;
        for i in 0..20_000 {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let k = ((s >> 33) % 500) as i64;
            match (s >> 20) % 4 {
                0 | 1 => {
                    m.insert_with(k, i as f64, |a, b| *a += b);
                    *r.entry(k).or_insert(0.0) += i as f64;
                }
                2 => assert_eq!(m.remove_mut(&k), r.remove(&k)),
                _ => {
                    if let Some(v) = m.get_mut(&k) {
                        *v *= 2.0;
                    }
                    if let Some(v) = r.get_mut(&k) {
                        *v *= 2.0;
                    }
                }
            }
            assert_eq!(m.get(&k), r.get(&k));
            assert_eq!(m.size(), r.len());
        }
        assert_eq!(check(&m.root, None, None).1, r.len());
        assert!(m.iter().map(|(k, v)| (*k, *v)).eq(r.iter().map(|(k, v)| (*k, *v))));
        assert_eq!(m.last().map(|(k, v)| (*k, *v)), r.iter().next_back().map(|(k, v)| (*k, *v)));
    }

    /// A map shared by two values: an update through one leaves the other as it was.
    #[test]
    fn pmap_update_leaves_a_shared_version_unchanged() {
        let old: PMap<i64, f64> = (0..100).map(|k| (k, k as f64)).collect();
        let mut new = old.clone();
        new.insert_with(5, 1.0, |a, b| *a += b);
        new.insert_mut(1000, 1.0);
        assert_eq!(new.remove_mut(&50), Some(50.0));
        *new.get_mut(&7).unwrap() = -1.0;
        assert!(old.iter().map(|(k, v)| (*k, *v)).eq((0..100).map(|k| (k, k as f64))));
        assert_eq!((old.size(), new.size()), (100, 100));
        assert_eq!((new.get(&5), new.get(&50), new.get(&7), new.get(&1000)), (Some(&6.0), None, Some(&-1.0), Some(&1.0)));
        check(&old.root, None, None);
        check(&new.root, None, None);
    }

    /// A map no one else holds is updated in place: no node copied (the root the same allocation);
    /// one that is shared has the nodes on the path copied, the other version keeping its own.
    #[test]
    fn pmap_updates_an_unshared_map_in_place() {
        let mut m: PMap<i64, f64> = (0..100).map(|k| (k, k as f64)).collect();
        let root = m.root.as_ref().map(Rc::as_ptr);
        m.insert_with(5, 1.0, |a, b| *a += b);
        *m.get_mut(&7).unwrap() = -1.0;
        assert_eq!(m.root.as_ref().map(Rc::as_ptr), root);
        m.insert_mut(100, 1.0);
        assert_eq!(m.remove_mut(&60), Some(60.0));
        assert_eq!(copies(), 0);
        let root = m.root.as_ref().map(Rc::as_ptr);
        let keep = m.clone();
        m.insert_with(5, 1.0, |a, b| *a += b);
        assert!(copies() > 0);
        assert_ne!(m.root.as_ref().map(Rc::as_ptr), root);
        assert!(keep.root.as_ref().map(Rc::as_ptr) == root && keep.get(&5) == Some(&6.0) && m.get(&5) == Some(&7.0));
    }
}
