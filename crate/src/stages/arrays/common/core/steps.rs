//! The symbolic reverse pass (§7.2, Fig. 19) as stepper steps: one per eval rule application and one
//! per ID the loop pops (Fig. 17's `backprop`), each with the cotangent terms after it — the `grad`
//! and `accum` maps of Fig. 17, whose values are now programs. Terms are printed cut like a rewrite
//! step's redex (`kit::rewrite::print_cut`: a screenful of nodes), so a step costs the same however
//! big the gradient term grows (without share it doubles at each Add: E11). A map entry is printed
//! again only after it changed (`changed_accum`, `changed_grad`), and a step shows at most
//! `MAP_ROWS` entries of each map: without both, an `else if` chain of 400 printed 2,000 steps × 400
//! entries × a screenful of nodes (46 s).

use crate::interp::{Shown, TraceStep};
use crate::ir::Expr;
use crate::kit::rewrite::print_cut;
use crate::print::PrintOptions;
use std::collections::BTreeMap;

/// Steps kept with their terms (as bot's rewrite trace keeps); later ones are counted only.
pub const KEPT_STEPS: usize = 2_000;

/// Entries of each map a step shows: `accum`'s highest IDs (popped next), `grad`'s first inputs.
pub const MAP_ROWS: usize = 40;

pub struct Steps {
    pub kept: Vec<TraceStep>,
    /// Steps past `KEPT_STEPS`, counted only.
    pub untraced: u64,
    /// Each input's name (the `grad x` rows).
    pub labels: Vec<String>,
    print: PrintOptions,
    /// Whether the stage is shown (`stage::shown`): if not, steps are only counted.
    pub shown: bool,
    /// Each map entry's printed text, until the entry changes.
    accum_text: BTreeMap<i64, String>,
    grad_text: BTreeMap<usize, String>,
}

impl Default for Steps {
    fn default() -> Self {
        Steps { kept: vec![], untraced: 0, labels: vec![], print: PrintOptions::unicode(), shown: crate::stage::shown(), accum_text: BTreeMap::new(), grad_text: BTreeMap::new() }
    }
}

/// What one step did: the rule (`eval Add`, `pop ID 3`), a sentence, and the terms it received and
/// sent (already printed).
pub struct Did {
    pub kind: String,
    pub note: String,
    pub rows: Vec<(String, String)>,
}

impl Steps {
    /// Whether the next step is kept (its terms worth printing).
    pub fn keeping(&self) -> bool {
        self.shown && self.kept.len() < KEPT_STEPS
    }

    /// `e` on one line, cut to a screenful of nodes.
    pub fn show(&self, e: &mut Expr) -> String {
        one_line(e, &self.print)
    }

    /// `accum[id]` changed: its text is printed again.
    pub fn changed_accum(&mut self, id: i64) {
        self.accum_text.remove(&id);
    }

    /// `grad` of input `k` changed: its text is printed again.
    pub fn changed_grad(&mut self, k: usize) {
        self.grad_text.remove(&k);
    }

    /// Records a step with the maps after it, or counts it past `KEPT_STEPS`.
    pub fn record(&mut self, did: Did, grad: &mut BTreeMap<usize, Expr>, accum: &mut BTreeMap<i64, Expr>) {
        if !self.keeping() {
            self.untraced += 1;
            return;
        }
        let mut state: Vec<(String, Shown)> = did.rows.into_iter().map(|(k, v)| (k, Shown::text(v))).collect();
        state.extend(self.maps(grad, accum));
        self.kept.push(TraceStep { kind: did.kind, node: None, span: None, factor: None, note: did.note, state, ..TraceStep::default() });
    }

    /// After the pass: when steps went uncounted, one last step with the final maps says how many.
    pub fn finish(&mut self, grad: &mut BTreeMap<usize, Expr>, accum: &mut BTreeMap<i64, Expr>) {
        if self.untraced == 0 || !self.shown {
            return;
        }
        let note = format!("{} more rule applications were not recorded (the first {KEPT_STEPS} are); the maps after all of them", self.untraced);
        let state = self.maps(grad, accum);
        self.kept.push(TraceStep { kind: "end".into(), note, state, ..TraceStep::default() });
    }

    /// The `accum` map (cotangents waiting under their IDs) and the `grad` map (each input's gradient).
    fn maps(&mut self, grad: &mut BTreeMap<usize, Expr>, accum: &mut BTreeMap<i64, Expr>) -> Vec<(String, Shown)> {
        let print = self.print;
        let mut out = vec![];
        let (accum_len, grad_len) = (accum.len(), grad.len());
        let accum_rows = accum.iter_mut().rev().map(|(id, t)| (*id, format!("accum[{id}]"), t));
        window(accum_rows, accum_len, &mut self.accum_text, &print, &mut out, |n| ("accum …".into(), format!("{n} more entries, lower IDs")));
        let labels = &self.labels;
        let grad_rows = grad.iter_mut().map(|(k, t)| (*k, format!("grad {}", labels.get(*k).cloned().unwrap_or_else(|| format!("input {k}"))), t));
        window(grad_rows, grad_len, &mut self.grad_text, &print, &mut out, |n| ("grad …".into(), format!("{n} more inputs")));
        out
    }
}

/// The first `MAP_ROWS` of a map's `rows` (key, row name, term), each printed unless its text is
/// kept in `texts`, then one row `more(n)` counting the `n` entries left out.
fn window<'a, K: Ord + Copy>(
    rows: impl Iterator<Item = (K, String, &'a mut Expr)>,
    len: usize,
    texts: &mut BTreeMap<K, String>,
    print: &PrintOptions,
    out: &mut Vec<(String, Shown)>,
    more: impl Fn(usize) -> (String, String),
) {
    for (k, name, t) in rows.take(MAP_ROWS) {
        let text = texts.entry(k).or_insert_with(|| one_line(t, print)).clone();
        out.push((name, Shown::text(text)));
    }
    if len > MAP_ROWS {
        let (name, text) = more(len - MAP_ROWS);
        out.push((name, Shown::text(text)));
    }
}

/// `e` on one line, cut to a screenful of nodes.
fn one_line(e: &mut Expr, print: &PrintOptions) -> String {
    print_cut(e, print).split_whitespace().collect::<Vec<_>>().join(" ")
}
