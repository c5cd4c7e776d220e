//! A persistent ordered map (the papers' `Map`, O(log n) an operation): imbl's B+tree over `Rc`
//! nodes. `clone` is O(1); an update copies a node only where it is shared, so a map held by one
//! value is changed in place and one held by two is copied along the path, the old version unchanged.

use imbl::shared_ptr::RcK;
use imbl::GenericOrdMap;
use std::fmt;

pub struct PMap<K, V>(GenericOrdMap<K, V, RcK>);

pub type Iter<'a, K, V> = imbl::ordmap::Iter<'a, K, V, RcK>;

impl<K: Clone, V: Clone> Clone for PMap<K, V> {
    fn clone(&self) -> Self {
        PMap(self.0.clone())
    }
}

impl<K, V> Default for PMap<K, V> {
    fn default() -> Self {
        PMap(GenericOrdMap::new())
    }
}

impl<K: Ord + fmt::Debug, V: fmt::Debug> fmt::Debug for PMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K, V> PMap<K, V> {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn size(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: Ord, V> PMap<K, V> {
    /// The entries in key order.
    pub fn iter(&self) -> Iter<'_, K, V> {
        self.0.iter()
    }
    /// The greatest key's entry.
    pub fn last(&self) -> Option<(&K, &V)> {
        self.0.get_max().map(|(k, v)| (k, v))
    }
    pub fn get(&self, k: &K) -> Option<&V> {
        self.0.get(k)
    }
}

impl<K: Ord + Clone, V: Clone> PMap<K, V> {
    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.0.get_mut(k)
    }
    pub fn insert_mut(&mut self, k: K, v: V) {
        self.0.insert(k, v);
    }
    /// `insertWith`: `v` at `k` when absent, else `f(old, v)` updates the old value.
    pub fn insert_with(&mut self, k: K, v: V, f: impl FnOnce(&mut V, V)) {
        match self.0.get_mut(&k) {
            Some(old) => f(old, v),
            None => {
                self.0.insert(k, v);
            }
        }
    }
    /// Removes `k`, returning its value.
    pub fn remove_mut(&mut self, k: &K) -> Option<V> {
        self.0.remove(k)
    }
    /// The map with `v` at `k`, this one unchanged (the persistent `insert`).
    #[must_use]
    pub fn insert(&self, k: K, v: V) -> Self {
        PMap(self.0.update(k, v))
    }
    /// The map without `k`, this one unchanged (the persistent `remove`).
    #[must_use]
    pub fn remove(&self, k: &K) -> Self {
        PMap(self.0.without(k))
    }
}

impl<K: Ord + Clone, V: Clone> FromIterator<(K, V)> for PMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(it: I) -> Self {
        PMap(it.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Random inserts, updates and removes agree with std's BTreeMap, in key order.
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
        // the persistent `insert` and `remove` (the staged, Cayley and CHAD maps) give a new version
        let (added, removed) = (old.insert(3, -3.0), old.remove(&4));
        assert_eq!((added.get(&3), removed.get(&4), removed.size()), (Some(&-3.0), None, 99));
        assert!(old.iter().map(|(k, v)| (*k, *v)).eq((0..100).map(|k| (k, k as f64))));
    }

    /// A map no one else holds is updated in place: an entry stays where it was; in one that is
    /// shared the updated path is copied (the entry moves), the other version keeping its own.
    #[test]
    fn pmap_updates_an_unshared_map_in_place() {
        let mut m: PMap<i64, f64> = (0..100).map(|k| (k, k as f64)).collect();
        let at = |m: &PMap<i64, f64>, k: i64| m.get(&k).map(|v| v as *const f64);
        let five = at(&m, 5);
        m.insert_with(5, 1.0, |a, b| *a += b);
        *m.get_mut(&7).unwrap() = -1.0;
        assert_eq!(at(&m, 5), five);
        let keep = m.clone();
        m.insert_with(5, 1.0, |a, b| *a += b);
        assert_ne!(at(&m, 5), five);
        assert!(at(&keep, 5) == five && keep.get(&5) == Some(&6.0) && m.get(&5) == Some(&7.0));
    }
}
