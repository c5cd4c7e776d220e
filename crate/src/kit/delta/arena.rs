//! The Delta arena of a run (issue 13: bytes per primal op): every Delta node a run builds, in a flat
//! array rather than one `Rc` allocation each. A node is its index (its serial, as the graph and the
//! trace name it): 16 bytes, the real or the id and up to two children as indices, with its tag and
//! its span (an index into the run's table of distinct spans) in one word — where an `Rc<Node>`
//! (header, serial, span, constructor) took 64, and the arena of session 29 21 (a tag byte, a
//! 16-byte slot, a span index). The array grows in fixed chunks
//! (`Chunked`: no doubling's overshoot). Nothing is freed before the run ends: every node of
//! Krawiec's Let chain and of the array paper's Delta is live until the evaluator has walked it,
//! and the arena goes as a whole (no drop of a long chain, node by node).

use super::Kind;
use crate::diag::Span;
use crate::stages::dualrev::common::Chunked;
use rustc_hash::FxHashMap as HashMap;

/// A node's index in its arena, which is also its serial (index 0 holds no node: serials start at 1).
pub type Ix = u32;

const ZERO: u32 = 0;
const ONE_HOT: u32 = 1;
const SCALE: u32 = 2;
const ADD: u32 = 3;
const VAR: u32 = 4;
const LET: u32 = 5;
const INPUT: u32 = 6;
const SHARE: u32 = 7;
/// A Let whose id is not a `u32` (ids are the run's DeltaIds, so only a program that counts them
/// from far away): the id is in `wide_ids`, at the index in `a`.
const LET_WIDE: u32 = 8;

/// The tag sits in the top 4 bits of the word that holds the span index.
const TAG_SHIFT: u32 = 28;
const SPAN_MASK: u32 = (1 << TAG_SHIFT) - 1;

/// A node: its payload and, in one word, its tag and its span's index — 16 bytes, read with one
/// chunk look-up (the tag was a separate array: two look-ups a node, which made the walks that
/// revisit shared nodes 30–60 % slower than the `Rc` nodes, session 29). The payload: the real or
/// the id in `x` (Scale, OneHot, Var, Input, Share) and the child in `a`; two children packed in
/// `x` (Add; Let, with its id in `a`).
#[derive(Clone, Copy, Default)]
struct Node {
    x: u64,
    a: u32,
    tag_span: u32,
}

/// The distinct spans of a run's Delta nodes (or of its deltaLets), each once, by index: the nodes
/// of one source operation share a span, so an index is a few bits where a span is 8 bytes.
/// Index 0 is `Span::NONE`.
pub struct SpanTable {
    spans: Vec<Span>,
    ids: HashMap<Span, u32>,
    /// The span asked for last (consecutive nodes are mostly of one operation).
    last: (Span, u32),
}

impl Default for SpanTable {
    fn default() -> Self {
        let mut ids = HashMap::default();
        ids.insert(Span::NONE, 0);
        SpanTable { spans: vec![Span::NONE], ids, last: (Span::NONE, 0) }
    }
}

impl SpanTable {
    /// `span`'s index, given it the first time; `None` once 2^32 distinct spans are taken.
    pub fn index(&mut self, span: Span) -> Option<u32> {
        if self.last.0 == span {
            return Some(self.last.1);
        }
        let next = u32::try_from(self.spans.len()).ok()?;
        let id = *self.ids.entry(span).or_insert(next);
        if id == next {
            self.spans.push(span);
        }
        self.last = (span, id);
        Some(id)
    }

    /// The span at index `i` (`Span::NONE` if none).
    pub fn get(&self, i: u32) -> Span {
        self.spans.get(i as usize).copied().unwrap_or(Span::NONE)
    }
}

/// The nodes of one run, in fixed chunks.
pub struct Arena {
    nodes: Chunked<Node>,
    wide_ids: Vec<i64>,
    spans: SpanTable,
}

impl Default for Arena {
    fn default() -> Self {
        let mut a = Arena { nodes: Chunked::default(), wide_ids: vec![], spans: SpanTable::default() };
        // index 0: no node (the first node is serial 1, as when serials were counted from 1)
        a.nodes.push(Node::default());
        a
    }
}

fn two(u1: Ix, u2: Ix) -> u64 {
    u1 as u64 | (u2 as u64) << 32
}

impl Arena {
    /// Adds a node; `None` once the indices are used up (4·10^9 nodes, far past any memory budget)
    /// or the spans (2^28 distinct source operations).
    pub fn push(&mut self, kind: Kind, span: Span) -> Option<Ix> {
        let ix = Ix::try_from(self.nodes.len()).ok().filter(|&i| i < Ix::MAX)?;
        let (tag, x, a) = match kind {
            Kind::Zero => (ZERO, 0, 0),
            Kind::OneHot(i) => (ONE_HOT, i as u64, 0),
            Kind::Scale(r, u) => (SCALE, r.to_bits(), u),
            Kind::Add(u1, u2) => (ADD, two(u1, u2), 0),
            Kind::Var(i) => (VAR, i as u64, 0),
            Kind::Let(i, rhs, body) => match u32::try_from(i) {
                Ok(i) => (LET, two(rhs, body), i),
                Err(_) => {
                    let w = u32::try_from(self.wide_ids.len()).ok()?;
                    self.wide_ids.push(i);
                    (LET_WIDE, two(rhs, body), w)
                }
            },
            Kind::Input(i) => (INPUT, i as u64, 0),
            Kind::Share(i, d) => (SHARE, i as u64, d),
        };
        let s = self.spans.index(span).filter(|&s| s <= SPAN_MASK)?;
        self.nodes.push(Node { x, a, tag_span: tag << TAG_SHIFT | s });
        Some(ix)
    }

    /// The node at `ix` (an index this arena did not give reads as Zero).
    #[inline]
    pub fn kind(&self, ix: Ix) -> Kind {
        let Some(&n) = self.nodes.get(ix as usize) else { return Kind::Zero };
        let (lo, hi) = (n.x as u32, (n.x >> 32) as u32);
        let id = n.x as i64;
        match n.tag_span >> TAG_SHIFT {
            ONE_HOT => Kind::OneHot(id),
            SCALE => Kind::Scale(f64::from_bits(n.x), n.a),
            ADD => Kind::Add(lo, hi),
            VAR => Kind::Var(id),
            LET => Kind::Let(n.a as i64, lo, hi),
            LET_WIDE => Kind::Let(self.wide_ids.get(n.a as usize).copied().unwrap_or_default(), lo, hi),
            INPUT => Kind::Input(id),
            SHARE => Kind::Share(id, n.a),
            _ => Kind::Zero,
        }
    }

    /// The span of the source operation that built the node (`Span::NONE` if unknown).
    pub fn span(&self, ix: Ix) -> Span {
        self.spans.get(self.span_id_of(ix))
    }

    /// The node's span as the index of a distinct span: equal spans, equal indices (0: no span).
    pub fn span_id_of(&self, ix: Ix) -> u32 {
        self.nodes.get(ix as usize).map_or(0, |n| n.tag_span & SPAN_MASK)
    }

    /// The number of indices given, the unused index 0 included (the largest serial + 1).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Never: index 0 is taken from the start.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_read_back_as_built_with_their_spans() {
        let mut a = Arena::default();
        let (s1, s2) = (Span::new(3, 5), Span::new(7, 9));
        let z = a.push(Kind::Zero, Span::NONE).unwrap();
        let v = a.push(Kind::Var(-4), s1).unwrap();
        let sc = a.push(Kind::Scale(-2.5, v), s2).unwrap();
        let ad = a.push(Kind::Add(sc, z), s1).unwrap();
        let l = a.push(Kind::Let(1 << 40, ad, v), s2).unwrap();
        assert_eq!((z, v, sc, ad, l), (1, 2, 3, 4, 5));
        assert_eq!(a.kind(v), Kind::Var(-4));
        assert_eq!(a.kind(sc), Kind::Scale(-2.5, v));
        assert_eq!(a.kind(ad), Kind::Add(sc, z));
        assert_eq!(a.kind(l), Kind::Let(1 << 40, ad, v));
        assert_eq!((a.span(z), a.span(v), a.span(sc), a.span(ad)), (Span::NONE, s1, s2, s1));
        assert_eq!(a.span_id_of(v), a.span_id_of(ad));
        assert_ne!(a.span_id_of(v), a.span_id_of(sc));
        // ids that are not u32s (the Let's is kept beside the node)
        let w = a.push(Kind::Let(-3, v, sc), s1).unwrap();
        let x = a.push(Kind::Let(u32::MAX as i64, sc, v), s2).unwrap();
        let sh = a.push(Kind::Share(i64::MIN, l), s1).unwrap();
        assert_eq!((a.kind(w), a.kind(x), a.kind(sh)), (Kind::Let(-3, v, sc), Kind::Let(u32::MAX as i64, sc, v), Kind::Share(i64::MIN, l)));
        assert_eq!((a.span(w), a.span(x), a.span(sh)), (s1, s2, s1));
        assert_eq!(a.kind(l), Kind::Let(1 << 40, ad, v));
        // a node is 16 bytes, its tag and span in one word: one chunk look-up
        assert_eq!(std::mem::size_of::<Node>(), 16);
        // an index the arena never gave is a Zero without a span, not a panic
        assert_eq!((a.kind(99), a.span(99)), (Kind::Zero, Span::NONE));
        assert_eq!(a.len(), 9);
    }
}
