//! The Delta arena of a run (issue 13: bytes per primal op): every Delta node a run builds, in flat
//! arrays rather than one `Rc` allocation each. A node is named by its serial (as the graph and the
//! trace name it), the order it was made in; the arena keeps a node in as many 4-byte words as its
//! constructor's payload needs, one after another in one array of words:
//! - none: `Zero`;
//! - 1: `Var i` with `0 ≤ i < 2^32` (Krawiec's Vars name the run's DeltaIds);
//! - 2: `Add u1 u2`, and a `Let id rhs body` whose body is the node made just before it (runDelta makes
//!   the Let spine at consecutive serials, Fig. 10's wrap);
//! - 3: `Scale r u`, any other `Let`, and the rest (`OneHot`, `Input`, `Share`, a wide `Var`).
//!
//! A node's word count is two bits of a bitmap over serials, in blocks of 32 with the index of the
//! block's first word (12 bytes a block, 0.4 of a byte a node), so a node's first word is its block's
//! plus the word counts of the nodes before it in the block (one sum of 2-bit fields). A constructor's tag is in
//! the top 4 bits of the node's first word, whose other 28 hold a child or an id, so serials stay
//! below 2^28 (3 GB of nodes, past any memory budget). Spans are kept by runs of serials (the nodes of
//! one source operation are made one after another), and a Let whose span is its right-hand side's
//! (runDelta's bindings) is marked by its tag instead of starting a run.
//!
//! Horner's step (5 leaves, 4 Scale, 3 Add, 3 Let) was 16 bytes a node in session 31's arena (its
//! tag, span and payload in one 16-byte slot): about 150 bytes a step against 240 (issue 13's ≤ 100
//! bytes per primal op). The price is a second look-up in `kind` (the block, then the words).
//!
//! Nothing is freed before the run ends: every node of Krawiec's Let chain and of the array paper's
//! Delta is live until the evaluator has walked it, and the arena goes as a whole.

use super::Kind;
use crate::diag::Span;
use crate::stages::dualrev::common::Chunked;
use rustc_hash::FxHashMap as HashMap;
use std::cell::Cell;

/// A node's serial in its arena (serial 0 holds no node: serials start at 1).
pub type Ix = u32;

/// A node's words, the word counts also being the classes: Zero (none), a narrow Var (1), 2 and 3.
const C_ZERO: u32 = 0;
const C_VAR: u32 = 1;
const C_2: u32 = 2;
const C_3: u32 = 3;

/// Tags of the two-word class (in the top bits of the first word).
const ADD: u32 = 0;
/// A Let whose body is the node made just before it, with a span of its own.
const LET_PREV: u32 = 1;
/// … whose span is its right-hand side's.
const LET_PREV_RHS: u32 = 2;

/// Tags of the three-word class (in the top bits of the first word).
const SCALE: u32 = 0;
const LET: u32 = 1;
const LET_RHS: u32 = 2;
/// A Let whose id is not below 2^28: the id is in `wide_ids`, at the index in the low bits.
const LET_WIDE: u32 = 3;
const VAR_WIDE: u32 = 4;
const ONE_HOT: u32 = 5;
const INPUT: u32 = 6;
const SHARE: u32 = 7;

const TAG_SHIFT: u32 = 28;
const LOW: u32 = (1 << TAG_SHIFT) - 1;

/// A compiled round's node (Zero, a Var of a `u32`, a Scale or an Add of children up to 2^28) as its
/// class (its word count) and words, for `Arena::push_round_node` and the words of a batch of rounds
/// (`Arena::append_rounds`); `None` for any other.
#[inline(always)]
pub fn round_words(kind: Kind) -> Option<(u32, [u32; 3])> {
    Some(match kind {
        Kind::Zero => (C_ZERO, [0; 3]),
        Kind::Var(i) if (0..=u32::MAX as i64).contains(&i) => (C_VAR, [i as u32, 0, 0]),
        Kind::Add(u1, u2) if u1 <= LOW => (C_2, [ADD << TAG_SHIFT | u1, u2, 0]),
        Kind::Scale(r, u) if u <= LOW => {
            let x = r.to_bits();
            (C_3, [SCALE << TAG_SHIFT | u, x as u32, (x >> 32) as u32])
        }
        _ => return None,
    })
}

/// 32 serials' word counts, 2 bits a serial (serial 32k + i at bits 2i, 2i + 1 of `lo` and `hi`
/// joined), and the index of the first one's first word.
#[derive(Clone, Copy, Default)]
struct Block {
    lo: u32,
    hi: u32,
    start: u32,
}

impl Block {
    /// The word counts of serials `32k + i`, `i < bit`, summed in 2-bit fields of one word
    /// (issue 13: two popcounts without the instruction, on wasm and baseline x86-64, were about
    /// a third of `kind`, which eval calls once or twice a node).
    #[inline]
    fn words_below(&self, bit: u32) -> u32 {
        let x = join(self.lo, self.hi) & ((1u64 << (2 * bit)) - 1);
        let y = (x & 0x3333_3333_3333_3333) + (x >> 2 & 0x3333_3333_3333_3333);
        let y = (y + (y >> 4)) & 0x0f0f_0f0f_0f0f_0f0f;
        (y.wrapping_mul(0x0101_0101_0101_0101) >> 56) as u32
    }
    #[inline]
    fn class(&self, bit: u32) -> u32 {
        (join(self.lo, self.hi) >> (2 * bit)) as u32 & 3
    }
}

/// The distinct spans of a run's Delta nodes (or of its deltaLets), each once, by index: the nodes
/// of one source operation share a span, so an index is a few bits where a span is 8 bytes.
/// Index 0 is `Span::NONE`.
pub struct SpanTable {
    spans: Vec<Span>,
    ids: HashMap<Span, u32>,
    /// Spans asked for lately, direct-mapped by their start (a round's nodes and runDelta's Lets
    /// come from a few operations in turn: the one span remembered before missed 4 times in 10 on
    /// horner, each miss a hash look-up, issue 13).
    recent: [(Span, u32); RECENT],
}

const RECENT: usize = 64;

/// A span's slot in `recent`: by both ends, since nested operations share their start
/// (`a * b` inside `a * b + c`).
#[inline(always)]
fn recent_slot(span: Span) -> usize {
    (span.start.wrapping_mul(31) ^ span.end) as usize % RECENT
}

impl Default for SpanTable {
    fn default() -> Self {
        let mut ids = HashMap::default();
        ids.insert(Span::NONE, 0);
        // every slot holds a true pair from the start: Span::NONE is index 0
        SpanTable { spans: vec![Span::NONE], ids, recent: [(Span::NONE, 0); RECENT] }
    }
}

impl SpanTable {
    /// A table holding nothing, not even `Span::NONE` (no allocation): a stand-in while a run's
    /// table is taken out (`Arena::hollow`).
    fn hollow() -> Self {
        SpanTable { spans: vec![], ids: HashMap::default(), recent: [(Span::NONE, 0); RECENT] }
    }

    /// `span`'s index, given it the first time; `None` once 2^32 distinct spans are taken.
    #[inline]
    pub fn index(&mut self, span: Span) -> Option<u32> {
        let (sp, i) = self.recent[recent_slot(span)];
        if sp == span {
            return Some(i);
        }
        self.index_new(span)
    }

    /// `index` past the spans asked for lately (the hash look-up, out of line).
    #[inline(never)]
    fn index_new(&mut self, span: Span) -> Option<u32> {
        let next = u32::try_from(self.spans.len()).ok()?;
        let id = *self.ids.entry(span).or_insert(next);
        if id == next {
            self.spans.push(span);
        }
        self.recent[recent_slot(span)] = (span, id);
        Some(id)
    }

    /// The span at index `i` (`Span::NONE` if none).
    pub fn get(&self, i: u32) -> Span {
        self.spans.get(i as usize).copied().unwrap_or(Span::NONE)
    }
}

/// The nodes of one run.
pub struct Arena {
    blocks: Chunked<Block>,
    words: Chunked<u32>,
    wide_ids: Vec<i64>,
    /// The serials given, serial 0 included.
    len: u32,
    /// Runs of serials of one span: (first serial, span index), by serial; the first at serial 0.
    runs: Chunked<[u32; 2]>,
    /// The run found last (look-ups come in runs of nearby serials: a Let spine, an Add's parts).
    run_hint: Cell<usize>,
    /// The span index of the last run (a node of another span starts a run).
    last_run: u32,
    spans: SpanTable,
}

impl Default for Arena {
    fn default() -> Self {
        let mut a = Arena {
            blocks: Chunked::default(),
            words: Chunked::default(),
            wide_ids: vec![],
            len: 1,
            runs: Chunked::default(),
            run_hint: Cell::new(0),
            last_run: 0,
            spans: SpanTable::default(),
        };
        // serial 0: no node (a Zero, no words; the first node is serial 1, as when serials were
        // counted from 1), in the first run, of no span
        a.blocks.push(Block::default());
        a.runs.push([0, 0]);
        a
    }
}

/// Where an arena ended (`Arena::mark`), to cut it back to (`Arena::truncate`).
#[derive(Clone, Copy)]
pub struct Mark {
    len: u32,
    blocks: usize,
    words: usize,
    wide_ids: usize,
    runs: usize,
    last_run: u32,
}

fn join(lo: u32, hi: u32) -> u64 {
    lo as u64 | (hi as u64) << 32
}

impl Arena {
    /// An arena of no nodes that allocates nothing: a stand-in while a run's arena is taken out of
    /// its cell (a batch of compiled rounds writes into it, issue 13). Not for pushing to.
    pub fn hollow() -> Self {
        Arena {
            blocks: Chunked::default(),
            words: Chunked::default(),
            wide_ids: vec![],
            len: 0,
            runs: Chunked::default(),
            run_hint: Cell::new(0),
            last_run: 0,
            spans: SpanTable::hollow(),
        }
    }

    /// Where the arena ends now.
    pub fn mark(&self) -> Mark {
        Mark { len: self.len, blocks: self.blocks.len(), words: self.words.len(), wide_ids: self.wide_ids.len(), runs: self.runs.len(), last_run: self.last_run }
    }

    /// The nodes made since `mark` taken away: the arena as it was then (the spans interned since
    /// stay in the table, unused by any node).
    pub fn truncate(&mut self, k: Mark) {
        if k.len >= self.len {
            return;
        }
        self.blocks.truncate(k.blocks);
        self.words.truncate(k.words);
        self.wide_ids.truncate(k.wide_ids);
        self.runs.truncate(k.runs);
        self.last_run = k.last_run;
        self.len = k.len;
        // the word counts of the serials past the end cleared in their block
        let bit = k.len % 32;
        if bit != 0 {
            if let Some(b) = self.blocks.last_mut() {
                let x = join(b.lo, b.hi) & ((1u64 << (2 * bit)) - 1);
                (b.lo, b.hi) = (x as u32, (x >> 32) as u32);
            }
        }
    }

    /// Adds a node; `None` once the serials are used up (2^28 nodes, far past any memory budget),
    /// the words (2^32), the wide ids (2^28) or the spans (2^32 distinct source operations).
    pub fn push(&mut self, kind: Kind, span: Span) -> Option<Ix> {
        if self.full() {
            return None;
        }
        let s = self.spans.index(span)?;
        self.push_span_id(kind, s)
    }

    /// No serial or words left for another node.
    #[inline]
    fn full(&self) -> bool {
        self.len >= LOW || u32::try_from(self.words.len() + 3).is_err()
    }

    /// `span`'s index in this arena's table (given it the first time), for `push_span_id`: a
    /// compiled round interns the span of a run of its nodes once (issue 13).
    #[inline]
    pub fn span_id(&mut self, span: Span) -> Option<u32> {
        self.spans.index(span)
    }

    /// `push` with the span as its index from `span_id`.
    #[inline]
    pub fn push_span_id(&mut self, kind: Kind, s: u32) -> Option<Ix> {
        self.push_known(kind, s, false)
    }

    /// `push` of a Let whose caller knows its right-hand side was made at the Let's span (`rhs_same`;
    /// else the arena looks it up, a search of its span runs): runDelta's wrap, for the bindings a
    /// compiled round made (issue 13).
    pub fn push_let(&mut self, kind: Kind, span: Span, rhs_same: bool) -> Option<Ix> {
        if self.full() {
            return None;
        }
        let s = self.spans.index(span)?;
        self.push_known(kind, s, rhs_same)
    }

    /// `push_let` with the span as its index from `span_id` (runDelta's wrap, which interns each
    /// of its bindings' few spans once rather than once a Let, issue 13).
    #[inline]
    pub fn push_let_id(&mut self, kind: Kind, s: u32, rhs_same: bool) -> Option<Ix> {
        self.push_known(kind, s, rhs_same)
    }

    /// `push_let_id` of `Let id rhs body` whose right-hand side the caller knows was made at the
    /// Let's span: runDelta's wrap of the bindings a compiled round made, a Let at a time (issue
    /// 13: `push_known`'s general path was 140 instructions a Let). The node `push_let_id` makes;
    /// any Let but a two-word one whose body is the node made just before goes through it.
    #[inline]
    pub fn push_let_prev_same(&mut self, id: i64, rhs: Ix, body: Ix, s: u32) -> Option<Ix> {
        let ix = self.len;
        match u32::try_from(id) {
            Ok(i) if body.checked_add(1) == Some(ix) && rhs < ix && !self.full() && (s as usize) < self.spans.spans.len() => {
                Some(self.put(C_2, [LET_PREV_RHS << TAG_SHIFT | rhs, i, 0], s, false))
            }
            _ => self.push_known(Kind::Let(id, rhs, body), s, true),
        }
    }

    /// `push_let_prev_same(id, rhs, body, s)` of each of `lets` in turn, each Let's body the node
    /// made just before it (`body` for the first): runDelta's wrap of a compiled round's bindings,
    /// the newest innermost. As many as take the two-word form (the first's body the arena's last
    /// node, an id of a `u32`, a right-hand side made before it, `s` the table's) are appended,
    /// their words in bulk (issue 13, session 45: a Let pushed at a time was ~100 instructions);
    /// how many (the rest go through `push_let_prev_same`).
    pub fn append_lets_prev_same(&mut self, lets: &[(i64, Ix, u32)], body: Ix) -> usize {
        if body.checked_add(1) != Some(self.len) || !self.room(lets.len()) {
            return 0;
        }
        let spans = self.spans.spans.len();
        let mut ix = self.len;
        let mut w = self.words.len() as u32;
        let mut words = Vec::with_capacity(2 * lets.len());
        let mut bits = 0u64;
        let flush = |a: &mut Arena, bits: u64| {
            if let Some(b) = a.blocks.last_mut() {
                let x = join(b.lo, b.hi) | bits;
                (b.lo, b.hi) = (x as u32, (x >> 32) as u32);
            }
        };
        for &(id, rhs, s) in lets {
            let Ok(i) = u32::try_from(id) else { break };
            if rhs >= ix || s as usize >= spans {
                break;
            }
            let bit = ix % 32;
            if bit == 0 {
                flush(self, bits);
                bits = 0;
                self.blocks.push(Block { lo: 0, hi: 0, start: w });
            }
            bits |= (C_2 as u64) << (2 * bit);
            words.extend_from_slice(&[LET_PREV_RHS << TAG_SHIFT | rhs, i]);
            w += C_2;
            ix += 1;
        }
        flush(self, bits);
        self.words.extend_bulk(&words);
        let n = (ix - self.len) as usize;
        self.len = ix;
        n
    }

    #[inline]
    fn push_known(&mut self, kind: Kind, s: u32, rhs_same: bool) -> Option<Ix> {
        let ix = self.len;
        if self.full() || s as usize >= self.spans.spans.len() {
            return None;
        }
        let child = |u: Ix| (u <= LOW).then_some(u);
        // a Let's span is kept by its tag when it is its right-hand side's (made before it)
        let rhs_span = |a: &Arena, rhs: Ix| rhs < ix && (rhs_same || a.span_id_of(rhs) == s);
        let tagged = |tag: u32, low: u32| tag << TAG_SHIFT | low;
        let three = |tag: u32, low: u32, x: u64| [tagged(tag, low), x as u32, (x >> 32) as u32];
        let (words, own_span): ([u32; 3], bool);
        let class = match kind {
            Kind::Zero => {
                (words, own_span) = ([0; 3], true);
                C_ZERO
            }
            Kind::Var(i) => match u32::try_from(i) {
                Ok(i) => {
                    (words, own_span) = ([i, 0, 0], true);
                    C_VAR
                }
                Err(_) => {
                    (words, own_span) = (three(VAR_WIDE, 0, i as u64), true);
                    C_3
                }
            },
            Kind::Add(u1, u2) => {
                (words, own_span) = ([tagged(ADD, child(u1)?), u2, 0], true);
                C_2
            }
            Kind::Let(i, rhs, body) => {
                let r = child(rhs)?;
                let same = rhs_span(self, rhs);
                match u32::try_from(i) {
                    Ok(i) if body.checked_add(1) == Some(ix) => {
                        (words, own_span) = ([tagged(if same { LET_PREV_RHS } else { LET_PREV }, r), i, 0], !same);
                        C_2
                    }
                    Ok(i) if i <= LOW => {
                        (words, own_span) = ([tagged(if same { LET_RHS } else { LET }, i), r, body], !same);
                        C_3
                    }
                    _ => {
                        let w = u32::try_from(self.wide_ids.len()).ok().filter(|&w| w <= LOW)?;
                        self.wide_ids.push(i);
                        (words, own_span) = ([tagged(LET_WIDE, w), r, body], true);
                        C_3
                    }
                }
            }
            Kind::Scale(r, u) => {
                (words, own_span) = (three(SCALE, child(u)?, r.to_bits()), true);
                C_3
            }
            Kind::OneHot(i) | Kind::Input(i) => {
                let tag = if matches!(kind, Kind::OneHot(_)) { ONE_HOT } else { INPUT };
                (words, own_span) = (three(tag, 0, i as u64), true);
                C_3
            }
            Kind::Share(i, d) => {
                (words, own_span) = (three(SHARE, child(d)?, i as u64), true);
                C_3
            }
        };
        Some(self.put(class, words, s, own_span))
    }

    /// A compiled round's node (Zero, Var, Scale or Add), its span's index from `span_id`: as
    /// `push_span_id` makes it, the room having been checked once for the round (`room`), not per
    /// node (issue 13: a node's push was ~140 instructions, a fifth of a horner round). Any other
    /// kind, or a child past the serials, goes through `push_span_id`.
    #[inline(always)]
    pub fn push_round_node(&mut self, kind: Kind, s: u32) -> Option<Ix> {
        let Some((class, words)) = round_words(kind) else { return self.push_span_id(kind, s) };
        if self.len >= LOW {
            return None;
        }
        Some(self.put(class, words, s, true))
    }

    /// The nodes of `rounds` compiled rounds of `form`, their words `words` one after another,
    /// appended as `push_round_node` would have pushed them one by one: the words in bulk, the
    /// classes into their blocks a block at a time, the span runs from the form's (issue 13,
    /// session 45: a batch's nodes staged one by one, then appended, were ~90 instructions a
    /// node). `false`, nothing appended, when they do not fit, the words are not the classes' or
    /// a span index is not the table's.
    pub fn append_rounds(&mut self, form: &RoundForm, rounds: usize, words: &[u32]) -> bool {
        let n = form.classes.len();
        let fits = n.checked_mul(rounds).is_some_and(|t| self.room(t)) && form.words.checked_mul(rounds) == Some(words.len());
        let spans = self.spans.spans.len() as u32;
        if !fits || form.spans.iter().any(|&s| s >= spans) || form.runs.iter().any(|r| r[1] >= spans) {
            return false;
        }
        let mut ix = self.len;
        let mut w = self.words.len() as u32;
        // the last block's classes gathered in `bits` and or-ed into it when the block is full
        let mut bits = 0u64;
        let flush = |a: &mut Arena, bits: u64| {
            if let Some(b) = a.blocks.last_mut() {
                let x = join(b.lo, b.hi) | bits;
                (b.lo, b.hi) = (x as u32, (x >> 32) as u32);
            }
        };
        // (a round of no nodes starts no run)
        for _ in 0..if n > 0 { rounds } else { 0 } {
            // the round's first node starts a run unless it continues the last one
            if self.last_run != form.spans[0] {
                self.runs.push([ix, form.spans[0]]);
            }
            for r in form.runs.iter() {
                self.runs.push([ix + r[0], r[1]]);
            }
            self.last_run = form.spans[1];
            for &c in form.classes.iter() {
                let bit = ix % 32;
                if bit == 0 {
                    flush(self, bits);
                    bits = 0;
                    self.blocks.push(Block { lo: 0, hi: 0, start: w });
                }
                bits |= (c as u64) << (2 * bit);
                w += c as u32;
                ix += 1;
            }
        }
        flush(self, bits);
        self.words.extend_bulk(words);
        self.len = ix;
        true
    }

    /// Appends the next serial's node: its class's words, its class in its block, its span's run.
    #[inline(always)]
    fn put(&mut self, class: u32, words: [u32; 3], s: u32, own_span: bool) -> Ix {
        let ix = self.len;
        let bit = ix % 32;
        if bit == 0 {
            self.blocks.push(Block { lo: 0, hi: 0, start: self.words.len() as u32 });
        }
        match class {
            C_ZERO => {}
            C_VAR => self.words.push(words[0]),
            C_2 => self.words.extend_from_slice(&words[..2]),
            _ => self.words.extend_from_slice(&words),
        }
        if let Some(b) = self.blocks.last_mut() {
            if bit < 16 {
                b.lo |= class << (2 * bit);
            } else {
                b.hi |= class << (2 * (bit - 16));
            }
        }
        if own_span && self.last_run != s {
            self.runs.push([ix, s]);
            self.last_run = s;
        }
        self.len = ix + 1;
        ix
    }

    /// Whether `n` more nodes of at most three words each fit (`push` then cannot fail for them: a
    /// compiled round's nodes are written only when all of them will be, `interp::RoundCalls`).
    pub fn room(&self, n: usize) -> bool {
        let ok = |x: Option<usize>, max: usize| x.is_some_and(|x| x < max);
        ok((self.len as usize).checked_add(n), LOW as usize)
            && ok(n.checked_mul(3).and_then(|w| w.checked_add(self.words.len() + 3)), u32::MAX as usize)
            && ok(self.spans.spans.len().checked_add(n), u32::MAX as usize)
    }

    /// The class (word count) of the node at `ix` and the index of its first word (`None` if not
    /// given).
    #[inline]
    fn locate(&self, ix: Ix) -> Option<(u32, usize)> {
        if ix >= self.len {
            return None;
        }
        let b = self.blocks.get((ix / 32) as usize)?;
        let bit = ix % 32;
        let class = b.class(bit);
        if class == C_ZERO {
            return Some((C_ZERO, 0));
        }
        let before = b.words_below(bit);
        Some((class, (b.start + before) as usize))
    }

    #[inline]
    fn word(&self, i: usize) -> u32 {
        self.words.get(i).copied().unwrap_or_default()
    }

    /// The node at `ix` (a serial this arena did not give reads as Zero).
    #[inline]
    pub fn kind(&self, ix: Ix) -> Kind {
        let Some((class, at)) = self.locate(ix) else { return Kind::Zero };
        self.decode(ix, class, at)
    }

    /// A reader of this arena's nodes for a pass that reads them many at a time (eval).
    pub fn reader(&self) -> Reader<'_> {
        Reader { arena: self, slots: [Slot::EMPTY; SLOTS], next: 0, last: 0 }
    }

    /// The node at `ix` of class `class` whose first word is at `at`.
    #[inline]
    fn decode(&self, ix: Ix, class: u32, at: usize) -> Kind {
        if class == C_ZERO {
            return Kind::Zero;
        }
        // the node's words at once when in one chunk (all but a node across a chunk's end)
        let ws = match self.words.slice(at, class as usize) {
            Some(&[w0]) => [w0, 0, 0],
            Some(&[w0, w1]) => [w0, w1, 0],
            Some(&[w0, w1, w2]) => [w0, w1, w2],
            _ => [self.word(at), self.word(at + 1), self.word(at + 2)],
        };
        self.decode_words(ix, class, ws)
    }

    /// The node at `ix` of class `class` (not Zero) from its words (0 past its class's).
    #[inline(always)]
    fn decode_words(&self, ix: Ix, class: u32, [w0, w1, w2]: [u32; 3]) -> Kind {
        if class == C_VAR {
            return Kind::Var(w0 as i64);
        }
        let low = w0 & LOW;
        // one match on the class and the tag together
        match (class << 4) | w0 >> TAG_SHIFT {
            c if c == C_2 << 4 | ADD => Kind::Add(low, w1),
            c if c >> 4 == C_2 => Kind::Let(w1 as i64, low, ix - 1),
            c => {
                let x = join(w1, w2);
                match c & 15 {
                    SCALE => Kind::Scale(f64::from_bits(x), low),
                    LET | LET_RHS => Kind::Let(low as i64, w1, w2),
                    LET_WIDE => Kind::Let(self.wide_ids.get(low as usize).copied().unwrap_or_default(), w1, w2),
                    VAR_WIDE => Kind::Var(x as i64),
                    ONE_HOT => Kind::OneHot(x as i64),
                    INPUT => Kind::Input(x as i64),
                    SHARE => Kind::Share(x as i64, low),
                    _ => Kind::Zero,
                }
            }
        }
    }

    /// The right-hand side of a Let whose span is that right-hand side's.
    fn span_from_rhs(&self, ix: Ix) -> Option<Ix> {
        let (class, at) = self.locate(ix)?;
        let w0 = self.word(at);
        match (class, w0 >> TAG_SHIFT) {
            (C_2, LET_PREV_RHS) => Some(w0 & LOW),
            (C_3, LET_RHS) => Some(self.word(at + 1)),
            _ => None,
        }
    }

    /// The span of the source operation that built the node (`Span::NONE` if unknown).
    pub fn span(&self, ix: Ix) -> Span {
        self.spans.get(self.span_id_of(ix))
    }

    /// The node's span as the index of a distinct span: equal spans, equal indices (0: no span).
    pub fn span_id_of(&self, mut ix: Ix) -> u32 {
        // a Let that takes its right-hand side's span: that node's (made before it, so this ends)
        while let Some(rhs) = self.span_from_rhs(ix) {
            ix = rhs;
        }
        if ix >= self.len {
            return 0;
        }
        self.run_of(ix)
    }

    /// The span index of the run holding serial `ix` (< len): galloping from the run found last,
    /// then halving.
    fn run_of(&self, ix: Ix) -> u32 {
        let n = self.runs.len();
        let start = |i: usize| self.runs.get(i).map_or(u32::MAX, |r| r[0]);
        let h = self.run_hint.get().min(n - 1);
        // lo's run starts at or before ix, hi's after it (or hi == n)
        let (mut lo, mut hi);
        let mut step = 1;
        if start(h) <= ix {
            lo = h;
            loop {
                let p = lo + step;
                if p >= n {
                    hi = n;
                    break;
                }
                if start(p) <= ix {
                    lo = p;
                    step *= 2;
                } else {
                    hi = p;
                    break;
                }
            }
        } else {
            hi = h;
            loop {
                // run 0 starts at serial 0
                if hi <= step {
                    lo = 0;
                    break;
                }
                let p = hi - step;
                if start(p) <= ix {
                    lo = p;
                    break;
                }
                hi = p;
                step *= 2;
            }
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if start(mid) <= ix {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        self.run_hint.set(lo);
        self.runs.get(lo).map_or(0, |r| r[1])
    }

    /// The number of serials given, the unused serial 0 included (the largest serial + 1).
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Never: serial 0 is taken from the start.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The nodes one compiled round makes, as a batch of rounds appends them (`Arena::append_rounds`):
/// each node's class, and its span runs (the same in every round).
pub struct RoundForm {
    classes: Box<[u8]>,
    /// The span indices of the round's first and last nodes.
    spans: [u32; 2],
    /// The nodes after the first whose span is not the node's before them: (place in the round,
    /// span index).
    runs: Box<[[u32; 2]]>,
    /// A round's words.
    words: usize,
}

impl RoundForm {
    /// A round of nodes of these kinds (any Zero, Var of a `u32`, Scale or Add: their classes) at
    /// these span indices (the arena's `span_id`); `None` if one is another kind.
    pub fn new(nodes: &[(Kind, u32)]) -> Option<RoundForm> {
        let classes = nodes.iter().map(|&(k, _)| Some(round_words(k)?.0 as u8)).collect::<Option<Box<[u8]>>>()?;
        let runs = nodes.windows(2).enumerate().filter(|(_, w)| w[0].1 != w[1].1).map(|(i, w)| [i as u32 + 1, w[1].1]).collect();
        let spans = [nodes.first().map_or(0, |n| n.1), nodes.last().map_or(0, |n| n.1)];
        Some(RoundForm { words: classes.iter().map(|&c| c as usize).sum(), classes, spans, runs })
    }

    /// The nodes a round makes.
    pub fn len(&self) -> usize {
        self.classes.len()
    }

    /// Whether a round makes none.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// The words a round's nodes take.
    pub fn words(&self) -> usize {
        self.words
    }
}

/// Blocks a `Reader` keeps decoded: eval reads the Let spine (at the end of the run) and the
/// nodes of the round a binding's right-hand side came from in turn, a few blocks at a time.
const SLOTS: usize = 4;

/// A block with the place of each of its serials' first word (its word counts summed once) and
/// its words, when in one chunk (all but a block across a chunk's end).
#[derive(Clone, Copy)]
struct Slot<'a> {
    block: u32,
    bits: u64,
    /// The first word of serial 32·block + i, from the block's first (at most 31 × 3).
    at: [u8; 32],
    words: &'a [u32],
    start: u32,
}

impl Slot<'_> {
    const EMPTY: Slot<'static> = Slot { block: u32::MAX, bits: 0, at: [0; 32], words: &[], start: 0 };
}

/// Reads an arena's nodes as `Arena::kind` does, with the blocks read lately decoded (issue 13:
/// `kind` found a node's block in the chunks, summed the word counts below it and found its words'
/// chunk on every read, half its cost; eval reads every node of a block once or twice, a Let twice,
/// going between the Let spine's blocks and those of the round a binding's right-hand side is in).
pub struct Reader<'a> {
    arena: &'a Arena,
    slots: [Slot<'a>; SLOTS],
    /// The slot the next missed block takes (in turn).
    next: usize,
    /// The slot read last.
    last: usize,
}

impl<'a> Reader<'a> {
    /// The node at `ix`, as `Arena::kind` reads it.
    #[inline(always)]
    pub fn kind(&mut self, ix: Ix) -> Kind {
        let (class, ws) = self.words(ix);
        if class == C_ZERO {
            return Kind::Zero;
        }
        self.arena.decode_words(ix, class, ws)
    }

    /// How many of the nodes `ix`, `ix − 1`, … (at most `max`) are Lets whose body is the node
    /// before them: runDelta's spine, which eval descends body first, one Let after another,
    /// taking nothing from each but that it is one (issue 13: a frame each through the dispatch).
    #[inline]
    pub fn let_spine(&mut self, mut ix: Ix, max: u64) -> u64 {
        let mut k = 0;
        while k < max {
            let (class, [w0, ..]) = self.words(ix);
            if class != C_2 || w0 >> TAG_SHIFT == ADD || ix == 0 {
                break;
            }
            k += 1;
            ix -= 1;
        }
        k
    }

    /// The class of the node at `ix` and its words (0 past its class's; class Zero for a serial
    /// not given).
    #[inline(always)]
    fn words(&mut self, ix: Ix) -> (u32, [u32; 3]) {
        let a = self.arena;
        if ix >= a.len {
            return (C_ZERO, [0; 3]);
        }
        let b = ix / 32;
        // the slot read last, else any, else the block decoded into the next
        let mut k = self.last % SLOTS;
        if self.slots[k].block != b {
            k = match self.slots.iter().position(|s| s.block == b) {
                Some(k) => k,
                None => self.load(b),
            };
            self.last = k;
        }
        let slot = &self.slots[k];
        let bit = ix % 32;
        let class = (slot.bits >> (2 * bit)) as u32 & 3;
        if class == C_ZERO {
            return (C_ZERO, [0; 3]);
        }
        let at = slot.at[bit as usize] as usize;
        let ws = match slot.words.get(at..at + class as usize) {
            Some(&[w0]) => [w0, 0, 0],
            Some(&[w0, w1]) => [w0, w1, 0],
            Some(&[w0, w1, w2]) => [w0, w1, w2],
            _ => {
                // a node across a chunk's end
                let i = slot.start as usize + at;
                let w = |k: usize| if k < class as usize { a.word(i + k) } else { 0 };
                [w(0), w(1), w(2)]
            }
        };
        (class, ws)
    }

    /// Decodes block `b` into the next slot (where its serials' words start: the word counts
    /// before each).
    #[inline(never)]
    fn load(&mut self, b: u32) -> usize {
        let k = self.next;
        self.next = (k + 1) % SLOTS;
        let a = self.arena;
        let blk = a.blocks.get(b as usize).copied().unwrap_or_default();
        let bits = join(blk.lo, blk.hi);
        let slot = &mut self.slots[k];
        let mut w = 0u32;
        for (i, at) in slot.at.iter_mut().enumerate() {
            *at = w as u8;
            w += (bits >> (2 * i)) as u32 & 3;
        }
        slot.words = a.words.slice(blk.start as usize, w as usize).unwrap_or_default();
        (slot.block, slot.bits, slot.start) = (b, bits, blk.start);
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cut back to a mark (inside a block, at a block's end) and pushed to again, an arena reads
    /// node for node and span for span as one that had only those pushes, and takes the same words:
    /// fails if `truncate` left a cut node's word count in its block (the nodes after it read from
    /// the wrong words) or a cut node's span run.
    #[test]
    fn truncated_to_a_mark_then_pushed_is_as_pushed_alone() {
        let sp = |k: u32| Span::new((k % 5) as usize, (k % 5 + 2) as usize);
        let node = |k: u32, a: &Arena| match k % 4 {
            0 => Kind::Zero,
            1 => Kind::Var(k as i64),
            2 => Kind::Scale(k as f64, (a.len() as Ix - 1).max(1)),
            _ => Kind::Add((a.len() as Ix - 1).max(1), 1),
        };
        for (before, cut) in [(40u32, 7u32), (31, 20), (64, 33), (10, 0)] {
            let (mut a, mut b) = (Arena::default(), Arena::default());
            for k in 0..before {
                let (ka, kb) = (node(k, &a), node(k, &b));
                a.push(ka, sp(k));
                b.push(kb, sp(k));
            }
            let m = a.mark();
            for k in 0..cut {
                let ka = node(k + 1, &a);
                a.push(ka, sp(k + 3));
            }
            a.truncate(m);
            for k in 0..50 {
                let (ka, kb) = (node(k + 2, &a), node(k + 2, &b));
                assert_eq!(a.push(ka, sp(k + 1)), b.push(kb, sp(k + 1)));
            }
            assert_eq!((a.len(), a.words.len(), a.runs.len()), (b.len(), b.words.len(), b.runs.len()), "{before} {cut}");
            for ix in 0..a.len() as Ix {
                assert_eq!((a.kind(ix), a.span(ix)), (b.kind(ix), b.span(ix)), "{before} {cut}: {ix}");
            }
        }
    }

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
        // a block of 32 serials is 12 bytes
        assert_eq!(std::mem::size_of::<Block>(), 12);
        // an index the arena never gave is a Zero without a span, not a panic
        assert_eq!((a.kind(99), a.span(99)), (Kind::Zero, Span::NONE));
        assert_eq!(a.len(), 9);
    }

    /// Spans that share a slot of the recent spans (one start, or starts 16 apart; 40 spans in 64
    /// slots) keep their own indices, however they alternate: fails if the slot answered for a span
    /// by its start alone or kept a stale pair. And a node pushed by its span's index reads back as one pushed by span.
    #[test]
    fn spans_sharing_a_recent_slot_keep_their_indices() {
        let mut t = SpanTable::default();
        let spans: Vec<Span> = (0..40).map(|i| Span::new(5 + 16 * (i % 4), 6 + i)).collect();
        let ids: Vec<u32> = spans.iter().map(|&s| t.index(s).unwrap()).collect();
        assert_eq!(ids, (1..=40).collect::<Vec<u32>>());
        for round in 0..3 {
            for (k, &s) in spans.iter().enumerate().rev().step_by(round + 1) {
                assert_eq!(t.index(s), Some(ids[k]));
                assert_eq!(t.get(ids[k]), s);
            }
        }
        assert_eq!(t.index(Span::NONE), Some(0));
        let (mut a, mut b) = (Arena::default(), Arena::default());
        for (k, &sp) in spans.iter().enumerate() {
            let kind = if k % 2 == 0 { Kind::Var(k as i64) } else { Kind::Scale(k as f64, k as Ix) };
            let s = b.span_id(sp).unwrap();
            assert_eq!(a.push(kind, sp), b.push_span_id(kind, s));
        }
        assert!((0..a.len() as Ix).all(|n| (a.kind(n), a.span(n)) == (b.kind(n), b.span(n))));
        // an index the table never gave is refused, not kept
        assert_eq!(b.push_span_id(Kind::Zero, 1000), None);
    }

    /// A compiled round's nodes pushed by `push_round_node` are the nodes `push_span_id` makes: the
    /// same serials, kinds and spans (runs of one span across a round's items, a span again after
    /// another), a Var past u32 and a child past the serials handed on or refused as before. Fails if
    /// the round's path put a class's words, its block bits or a span run differently.
    #[test]
    fn a_rounds_nodes_are_the_nodes_push_makes() {
        let (mut a, mut b) = (Arena::default(), Arena::default());
        let spans = [Span::new(1, 2), Span::new(3, 4), Span::NONE];
        for k in 0..5_000u32 {
            let n = a.len() as Ix;
            let kind = match k % 7 {
                0 => Kind::Zero,
                1 => Kind::Var(k as i64),
                2 => Kind::Var(if k % 3 == 0 { -(k as i64) } else { u32::MAX as i64 + 1 }),
                3 | 4 => Kind::Scale(k as f64 * 0.5, n - 1 - k % 5 % n),
                _ => Kind::Add(n - 1, n / 2),
            };
            let sp = spans[(k / 3 % 3) as usize];
            let (sa, sb) = (a.span_id(sp).unwrap(), b.span_id(sp).unwrap());
            assert_eq!(a.push_round_node(kind, sa), b.push_span_id(kind, sb));
        }
        assert_eq!(a.push_round_node(Kind::Add(LOW + 1, 1), 0), None);
        assert_eq!(a.push_round_node(Kind::Scale(1.0, LOW + 1), 0), None);
        assert_eq!(a.len(), b.len());
        assert_eq!(a.runs.len(), b.runs.len());
        assert!((0..a.len() as Ix).all(|n| (a.kind(n), a.span(n)) == (b.kind(n), b.span(n))));
    }

    /// Batches of compiled rounds appended at once (`RoundForm`, `Arena::append_rounds`) are the
    /// nodes `push_round_node` pushes one by one: the same serials, kinds, spans, words, blocks and
    /// span runs, from an arena ending inside a block, for rounds of any length (a round's first
    /// node continuing the last round's span or not, a round of one span, of none), in batches of
    /// any length, across the words' chunks. Words not the form's, or a span not the table's, are
    /// refused with nothing appended; a form of a kind a round does not make is none. Fails if
    /// `append_rounds` misplaces a class in its block (the block already begun or a new one), a
    /// block's first word, or a run.
    #[test]
    fn rounds_appended_are_the_nodes_pushed_one_by_one() {
        let (mut a, mut b) = (Arena::default(), Arena::default());
        let spans = [Span::new(1, 2), Span::new(3, 4), Span::NONE];
        for k in 0..7u32 {
            let v = Kind::Var(k as i64);
            let (sa, sb) = (a.span_id(spans[0]).unwrap(), b.span_id(spans[0]).unwrap());
            assert_eq!(a.push_round_node(v, sa), b.push_round_node(v, sb));
        }
        assert!(RoundForm::new(&[(Kind::Zero, 0), (Kind::Var(u32::MAX as i64 + 1), 0)]).is_none());
        let mut k = 0u32;
        // (round length, rounds): a round's kinds and spans are its place's
        for (len, rounds) in [(5usize, 1usize), (7, 9), (1, 40), (27, 3_000), (32, 3), (3, 2_000), (0, 4), (2, 1)] {
            let place = |i: usize| -> (u32, Span) { ((i * 7 + len) as u32, spans[(i / 2 + len) % 3]) };
            let form: Vec<(Kind, u32)> = (0..len)
                .map(|i| {
                    let (c, sp) = place(i);
                    let kind = match c % 4 {
                        0 => Kind::Zero,
                        1 => Kind::Var(5),
                        2 => Kind::Scale(0.0, 1),
                        _ => Kind::Add(1, 1),
                    };
                    (kind, a.span_id(sp).unwrap())
                })
                .collect();
            let form = RoundForm::new(&form).unwrap();
            let mut words = vec![];
            for _ in 0..rounds {
                for i in 0..len {
                    let n = b.len() as Ix;
                    let (c, sp) = place(i);
                    let kind = match c % 4 {
                        0 => Kind::Zero,
                        1 => Kind::Var(k as i64),
                        2 => Kind::Scale(k as f64 * 0.5, n - 1 - k % 5 % (n - 1)),
                        _ => Kind::Add(n - 1, n / 2),
                    };
                    let (cl, ws) = round_words(kind).unwrap();
                    words.extend_from_slice(&ws[..cl as usize]);
                    let sb = b.span_id(sp).unwrap();
                    b.push_round_node(kind, sb);
                    k += 1;
                }
            }
            if !words.is_empty() {
                assert!(!a.append_rounds(&form, rounds, &words[1..]));
            }
            assert!(a.append_rounds(&form, rounds, &words));
        }
        let bad = RoundForm::new(&[(Kind::Zero, 99)]).unwrap();
        assert!(!a.append_rounds(&bad, 1, &[]));
        assert!(a.words.len() > 2 * CHUNK_WORDS);
        assert_eq!((a.len(), a.words.len(), a.runs.len(), a.blocks.len(), a.last_run), (b.len(), b.words.len(), b.runs.len(), b.blocks.len(), b.last_run));
        assert!((0..a.len() as Ix).all(|n| (a.kind(n), a.span(n)) == (b.kind(n), b.span(n))));
        assert!((0..a.runs.len()).all(|i| a.runs.get(i) == b.runs.get(i)));
    }

    /// Words in a chunk of `Chunked` (2^16).
    const CHUNK_WORDS: usize = 1 << 16;

    /// runDelta's Lets pushed by `push_let_prev_same` are the nodes `push_let_id` makes with
    /// `rhs_same`: the same serials, kinds, spans and words, whether their body is the node made
    /// just before (two words) or not, their id narrow, wide or negative, their right-hand side
    /// made before them or not. Fails if the two-word Let's words, tag or span run differ.
    #[test]
    fn a_let_pushed_after_its_body_is_the_let_push_let_id_makes() {
        let (mut a, mut b) = (Arena::default(), Arena::default());
        let spans = [Span::new(1, 2), Span::new(3, 4)];
        for k in 0..3_000u32 {
            let n = a.len() as Ix;
            let sp = spans[(k / 5 % 2) as usize];
            let (sa, sb) = (a.span_id(sp).unwrap(), b.span_id(sp).unwrap());
            if k % 3 == 0 {
                assert_eq!(a.push_round_node(Kind::Var(k as i64), sa), b.push_round_node(Kind::Var(k as i64), sb));
                continue;
            }
            let id = match k % 11 {
                0 => -(k as i64),
                1 => (1 << 28) + k as i64,
                2 => u32::MAX as i64 + 1,
                _ => k as i64,
            };
            let rhs = match k % 7 {
                0 => n + 3,
                1 => n.saturating_sub(2).max(1),
                _ => (n / 2).max(1),
            };
            let body = if k % 5 == 0 { n / 3 } else { n - 1 };
            assert_eq!(a.push_let_prev_same(id, rhs, body, sa), b.push_let_id(Kind::Let(id, rhs, body), sb, true), "{k}");
        }
        assert_eq!(a.push_let_prev_same(1, 1, a.len() as Ix - 1, 1000), None);
        assert_eq!((a.len(), a.words.len(), a.runs.len()), (b.len(), b.words.len(), b.runs.len()));
        assert!((0..a.len() as Ix).all(|n| (a.kind(n), a.span(n)) == (b.kind(n), b.span(n))));
    }

    /// runDelta's Lets appended in runs (`append_lets_prev_same`, the rest pushed one at a time by
    /// `push_let_prev_same`, as the wrap does) are the Lets `push_let_prev_same` pushes one by one:
    /// the same serials, kinds, spans, words, blocks and runs, in runs of any length across blocks
    /// and chunks, a run stopping at a Let whose id is not a `u32`, whose right-hand side is not
    /// made or whose span is not the table's, and none appended on a body not the last node.
    /// Fails if `append_lets_prev_same` misplaces a class in its block, a word, or appends past
    /// such a Let.
    #[test]
    fn lets_appended_in_runs_are_the_lets_pushed_one_by_one() {
        let (mut a, mut b) = (Arena::default(), Arena::default());
        let sp = Span::new(1, 2);
        for k in 0..40u32 {
            let (sa, sb) = (a.span_id(sp).unwrap(), b.span_id(sp).unwrap());
            assert_eq!(a.push_round_node(Kind::Var(k as i64), sa), b.push_round_node(Kind::Var(k as i64), sb));
        }
        let s = a.span_id(sp).unwrap();
        assert_eq!(a.append_lets_prev_same(&[(1, 1, s)], a.len() as Ix - 2), 0);
        let mut k = 0i64;
        for len in [1usize, 31, 33, 64, 5_000, 70_000, 7, 3] {
            let lets: Vec<(i64, Ix, u32)> = (0..len as i64)
                .map(|j| {
                    k += 1;
                    let id = match k % 997 {
                        0 => u32::MAX as i64 + 1,
                        1 => -k,
                        _ => k,
                    };
                    let rhs = if k % 1499 == 0 { 1 << 27 } else { (k % 30 + 1) as Ix };
                    (id, rhs, if j == len as i64 / 2 && len > 60 { 99 } else { s })
                })
                .collect();
            let mut at = 0;
            while at < lets.len() {
                let n = a.append_lets_prev_same(&lets[at..], a.len() as Ix - 1);
                if n == 0 {
                    let (id, rhs, s) = lets[at];
                    a.push_let_prev_same(id, rhs, a.len() as Ix - 1, s.min(1));
                    at += 1;
                }
                at += n;
            }
            for &(id, rhs, s) in &lets {
                b.push_let_prev_same(id, rhs, b.len() as Ix - 1, s.min(1));
            }
        }
        assert!(a.words.len() > 2 * CHUNK_WORDS);
        assert_eq!((a.len(), a.words.len(), a.runs.len(), a.blocks.len(), a.wide_ids.len()), (b.len(), b.words.len(), b.runs.len(), b.blocks.len(), b.wide_ids.len()));
        assert!((0..a.len() as Ix).all(|n| (a.kind(n), a.span(n)) == (b.kind(n), b.span(n))));
    }

    /// Every node reads back as built, with its serial and span, whatever its class: the leaves (Zero,
    /// Var) that take no 12-byte slot, the Lets whose span is their right-hand side's (no run of
    /// their own), the wide ids, across many blocks and chunks. Fails if a node's class place (the
    /// rank), a leaf's serial or a span run is off by one anywhere.
    #[test]
    fn every_class_reads_back_with_its_serial_and_span_across_blocks() {
        let mut a = Arena::default();
        let mut want: Vec<(Kind, Span)> = vec![(Kind::Zero, Span::NONE)];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let spans = [Span::NONE, Span::new(1, 4), Span::new(5, 9), Span::new(10, 12)];
        for _ in 0..150_000 {
            let n = want.len() as u64;
            let (c1, c2) = (rnd(n) as Ix, rnd(n) as Ix);
            let id = match rnd(4) {
                0 => -(rnd(9) as i64) - 1,
                1 => (1 << 28) + rnd(9) as i64,
                2 => u32::MAX as i64 + rnd(3) as i64,
                _ => rnd(1000) as i64,
            };
            let k = match rnd(10) {
                0 | 1 => Kind::Zero,
                2 | 3 => Kind::Var(if rnd(5) == 0 { id } else { rnd(1 << 20) as i64 }),
                4 => Kind::Scale(rnd(1000) as f64 - 500.5, c1),
                5 => Kind::Add(c1, c2),
                6 => Kind::Let(id, c1, (n - 1) as Ix),
                7 => Kind::Let(id, c1, c2),
                8 => Kind::Share(id, c1),
                _ => if rnd(2) == 0 { Kind::OneHot(id) } else { Kind::Input(id) },
            };
            // a Let mostly takes its right-hand side's span, as runDelta's do
            let span = match k {
                Kind::Let(_, rhs, _) if rnd(3) != 0 => want[rhs as usize].1,
                _ if rnd(3) == 0 => want[n as usize - 1].1,
                _ => spans[rnd(4) as usize],
            };
            assert_eq!(a.push(k, span), Some(n as Ix));
            want.push((k, span));
        }
        assert_eq!(a.len(), want.len());
        for (s, &(k, span)) in want.iter().enumerate() {
            assert_eq!((s, a.kind(s as Ix), a.span(s as Ix)), (s, k, span));
        }
        // and backwards, and in a scattered order (the run look-up starts from the last one found)
        for s in (0..want.len()).rev().step_by(7) {
            assert_eq!((s, a.span(s as Ix)), (s, want[s].1));
        }
        for _ in 0..10_000 {
            let s = rnd(want.len() as u64) as usize;
            assert_eq!((s, a.kind(s as Ix), a.span(s as Ix)), (s, want[s].0, want[s].1));
        }
        let n = want.len() as Ix;
        assert_eq!((a.kind(n), a.span(n), a.kind(u32::MAX)), (Kind::Zero, Span::NONE, Kind::Zero));
        // a reader reads every node as `kind` does, in order, backwards, scattered, and in eval's
        // order: a Let spine (the last blocks) and far nodes in turn, more blocks than it keeps
        // decoded (fails if a block's decoded word places are stale or off by one, or a block across
        // a chunk's end is misread)
        let mut rd = a.reader();
        for s in (0..want.len()).chain((0..want.len()).rev()) {
            assert_eq!((s, rd.kind(s as Ix)), (s, want[s].0));
        }
        for k in 0..20_000 {
            let s = if k % 2 == 0 { want.len() - 1 - k / 2 % 200 } else { rnd(want.len() as u64) as usize };
            assert_eq!((s, rd.kind(s as Ix)), (s, want[s].0));
        }
        assert_eq!((rd.kind(n), rd.kind(u32::MAX)), (Kind::Zero, Kind::Zero));
    }

    /// A reader's `let_spine` counts the Lets whose body is the node before them, down from a
    /// serial, up to its cap, and stops at any other node (an Add of two words, a Let of three, a
    /// Var); across blocks. Fails if it counts past a node not of the spine or past its cap.
    #[test]
    fn a_let_spine_is_the_lets_on_their_previous_node() {
        let mut a = Arena::default();
        let sp = Span::new(1, 2);
        let v = a.push(Kind::Var(7), sp).unwrap();
        let mut acc = a.push(Kind::Add(v, v), sp).unwrap();
        // 100 Lets on the node before, an Add, 3 more, a Let of three words, 40 more
        let mut first = vec![];
        for (n, brk) in [(100, Some(Kind::Add(v, v))), (3, Some(Kind::Let(5, v, v))), (40, None)] {
            for i in 0..n {
                acc = a.push(Kind::Let(i, v, acc), sp).unwrap();
                if i == 0 {
                    first.push(acc);
                }
            }
            if let Some(k) = brk {
                acc = a.push(k, sp).unwrap();
            }
        }
        let top = a.len() as Ix - 1;
        let mut rd = a.reader();
        assert_eq!(rd.let_spine(top, u64::MAX), 40);
        assert_eq!(rd.let_spine(top, 17), 17);
        assert_eq!(rd.let_spine(first[2] - 1, u64::MAX), 0);
        assert_eq!(rd.let_spine(first[2] - 2, u64::MAX), 3);
        assert_eq!(rd.let_spine(first[1] - 2, u64::MAX), 100);
        assert_eq!(rd.let_spine(first[0] + 50, u64::MAX), 51);
        assert_eq!(rd.let_spine(v, u64::MAX), 0);
        assert_eq!(rd.let_spine(top + 5, u64::MAX), 0);
    }
}
