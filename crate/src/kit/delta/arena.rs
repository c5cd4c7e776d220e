//! The Delta arena of a run (issue 13: bytes per primal op): every Delta node a run builds, in flat
//! arrays rather than one `Rc` allocation each. A node is its index (its serial, as the graph and the
//! trace name it): a tag byte, a 16-byte slot (the real or the id, and up to two children as
//! indices) and its span as an index into the run's table of distinct spans — 21 bytes, where an
//! `Rc<Node>` (header, serial, span, constructor) took 64. The arrays grow in fixed chunks
//! (`Chunked`: no doubling's overshoot). Nothing is freed before the run ends: every node of
//! Krawiec's Let chain and of the array paper's Delta is live until the evaluator has walked it,
//! and the arena goes as a whole (no drop of a long chain, node by node).

use super::Kind;
use crate::diag::Span;
use crate::stages::dualrev::common::Chunked;
use rustc_hash::FxHashMap as HashMap;

/// A node's index in its arena, which is also its serial (index 0 holds no node: serials start at 1).
pub type Ix = u32;

const ZERO: u8 = 0;
const ONE_HOT: u8 = 1;
const SCALE: u8 = 2;
const ADD: u8 = 3;
const VAR: u8 = 4;
const LET: u8 = 5;
const INPUT: u8 = 6;
const SHARE: u8 = 7;

/// A node's payload: the real (Scale) or the id (OneHot, Var, Let, Input, Share), and its children.
#[derive(Clone, Copy, Default)]
struct Slot {
    x: u64,
    a: Ix,
    b: Ix,
}

/// The nodes of one run, structure of arrays.
pub struct Arena {
    tags: Chunked<u8>,
    slots: Chunked<Slot>,
    spans: Chunked<u32>,
    /// The distinct spans, and their indices (nodes of one source operation share a span).
    span_table: Vec<Span>,
    span_ids: HashMap<Span, u32>,
    last_span: (Span, u32),
}

impl Default for Arena {
    fn default() -> Self {
        let mut a = Arena {
            tags: Chunked::default(),
            slots: Chunked::default(),
            spans: Chunked::default(),
            span_table: vec![Span::NONE],
            span_ids: HashMap::default(),
            last_span: (Span::NONE, 0),
        };
        a.span_ids.insert(Span::NONE, 0);
        // index 0: no node (the first node is serial 1, as when serials were counted from 1)
        a.tags.push(ZERO);
        a.slots.push(Slot::default());
        a.spans.push(0);
        a
    }
}

impl Arena {
    /// Adds a node; `None` once the indices are used up (4·10^9 nodes, far past any memory budget).
    pub fn push(&mut self, kind: Kind, span: Span) -> Option<Ix> {
        let ix = Ix::try_from(self.tags.len()).ok().filter(|&i| i < Ix::MAX)?;
        let slot = |x: u64, a: Ix, b: Ix| Slot { x, a, b };
        let (tag, slot) = match kind {
            Kind::Zero => (ZERO, Slot::default()),
            Kind::OneHot(i) => (ONE_HOT, slot(i as u64, 0, 0)),
            Kind::Scale(r, u) => (SCALE, slot(r.to_bits(), u, 0)),
            Kind::Add(u1, u2) => (ADD, slot(0, u1, u2)),
            Kind::Var(i) => (VAR, slot(i as u64, 0, 0)),
            Kind::Let(i, rhs, body) => (LET, slot(i as u64, rhs, body)),
            Kind::Input(i) => (INPUT, slot(i as u64, 0, 0)),
            Kind::Share(i, d) => (SHARE, slot(i as u64, d, 0)),
        };
        let s = self.span_id(span);
        self.tags.push(tag);
        self.slots.push(slot);
        self.spans.push(s);
        Some(ix)
    }

    fn span_id(&mut self, span: Span) -> u32 {
        if self.last_span.0 == span {
            return self.last_span.1;
        }
        let next = self.span_table.len() as u32;
        let id = *self.span_ids.entry(span).or_insert(next);
        if id == next {
            self.span_table.push(span);
        }
        self.last_span = (span, id);
        id
    }

    /// The node at `ix` (an index this arena did not give reads as Zero).
    #[inline]
    pub fn kind(&self, ix: Ix) -> Kind {
        let i = ix as usize;
        let (Some(&tag), Some(&s)) = (self.tags.get(i), self.slots.get(i)) else {
            return Kind::Zero;
        };
        let id = s.x as i64;
        match tag {
            ONE_HOT => Kind::OneHot(id),
            SCALE => Kind::Scale(f64::from_bits(s.x), s.a),
            ADD => Kind::Add(s.a, s.b),
            VAR => Kind::Var(id),
            LET => Kind::Let(id, s.a, s.b),
            INPUT => Kind::Input(id),
            SHARE => Kind::Share(id, s.a),
            _ => Kind::Zero,
        }
    }

    /// The span of the source operation that built the node (`Span::NONE` if unknown).
    pub fn span(&self, ix: Ix) -> Span {
        self.spans
            .get(ix as usize)
            .and_then(|&s| self.span_table.get(s as usize))
            .copied()
            .unwrap_or(Span::NONE)
    }

    /// The node's span as the index of a distinct span: equal spans, equal indices (0: no span).
    pub fn span_id_of(&self, ix: Ix) -> u32 {
        self.spans.get(ix as usize).copied().unwrap_or(0)
    }

    /// The number of indices given, the unused index 0 included (the largest serial + 1).
    pub fn len(&self) -> usize {
        self.tags.len()
    }

    /// Never: index 0 is taken from the start.
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
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
        // an index the arena never gave is a Zero without a span, not a panic
        assert_eq!((a.kind(99), a.span(99)), (Kind::Zero, Span::NONE));
        assert_eq!(a.len(), 6);
    }
}
