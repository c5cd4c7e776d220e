//! The sharing-aware reverse pass (§2.6, Fig. 5), as the runtime of `reversePass c d n`:
//! ```text
//! reversePass4 c d = grad (backprop4 (eval4 c d (ES {} {} {})))
//! backprop4 s = case Map.maxViewWithKey (accum s) of
//!   Just ((i, c), acc') → backprop4 (eval4 c (dfrag s ! i) (s { accum = acc', dfrag = delete i (dfrag s) }))
//!   Nothing → s
//! eval4 c Zero = id ; eval4 c (Input v) = λs. s { grad = insertWith (+) v c (grad s) }
//! eval4 c (Add d1 d2) = eval4 c d2 ∘ eval4 c d1 ; eval4 c (Scale r d) = eval4 (c · r) d
//! eval4 c (Share i d) = λs. s { dfrag = insert i d (dfrag s), accum = insertWith (+) i c (accum s) }
//! ```
//! A Share'd node's cotangent is only summed and deferred ("sharing in the primal becomes addition in
//! the dual"); popping the largest pending ID (Invariant 1) evaluates each fragment once, when all its
//! cotangent has arrived. Each eval4 call and each pop is a step, showing the three maps after it.

use super::runtime::{eval_args, input_slot, record, vector_value};
use crate::diag::Span;
use crate::interp::{Machine, RunError, Shown, TraceStep};
use crate::kit::delta::graph::Visits;
use crate::kit::delta::{show_delta, Arena, Ix, Kind, STATE_ROWS};
use crate::value::{show_real, Value};
use std::collections::BTreeMap;

/// ES (Fig. 5): the input cotangents, the fragments waiting to be visited (with the Share node they
/// came from, for the graph), and the cotangents accumulated per ID.
struct Es<'a> {
    grad: BTreeMap<i64, f64>,
    dfrag: BTreeMap<i64, (Ix, Ix)>,
    accum: BTreeMap<i64, f64>,
    /// The arena the fragments are in.
    ar: &'a Arena,
}

impl Es<'_> {
    /// The three maps as rows: `accum i`, `dfrag i`, `grad v`.
    fn rows(&self) -> Vec<(String, Shown)> {
        let accum = self.accum.iter().rev().map(|(i, c)| (format!("accum {i}"), Shown::from(*c)));
        let dfrag = self.dfrag.iter().rev().map(|(i, &(_, d))| (format!("dfrag {i}"), Shown::text(show_delta(self.ar, d, 6))));
        let grad = self.grad.iter().map(|(v, c)| (format!("grad {v}"), Shown::from(*c)));
        accum.chain(dfrag).chain(grad).take(STATE_ROWS).collect()
    }
}

/// A traced step; its note is written only when the run is traced (issue 13: a bench's run is not).
fn step(m: &mut Machine, kind: &str, node: u64, span: Span, factor: f64, note: impl FnOnce() -> String, es: &Es) {
    if m.tracing() {
        let note = note();
        let span = (!span.is_none()).then_some(span);
        m.trace(TraceStep { kind: kind.into(), node: Some(node), span, factor: Some(factor.into()), note, state: es.rows(), ..TraceStep::default() });
    }
}

struct Walk<'a> {
    n: usize,
    span: Span,
    visits: &'a mut Visits,
    ops: u64,
}

impl Walk<'_> {
    /// eval4 c d, iteratively; `part` as in `runtime::is_part` (an Input is a node of Fig. 4 of its own).
    fn eval4(&mut self, m: &mut Machine, c: f64, root: Ix, es: &mut Es) -> Result<(), RunError> {
        let ar = es.ar;
        let mut stack: Vec<(f64, Ix)> = vec![(c, root)];
        while let Some((x, nd)) = stack.pop() {
            self.visits.visit(nd as u64);
            m.tick(1)?;
            let k = ar.kind(nd);
            let t = m.tracing();
            let note = match k {
                Kind::Zero => t.then(|| "Zero: nothing".to_string()),
                Kind::Input(v) => {
                    self.ops += 1;
                    input_slot(v, self.n, self.span, "eval4")?;
                    *es.grad.entry(v).or_default() += x;
                    m.real_op();
                    t.then(|| format!("Input {v}: grad {v} += {}", show_real(x)))
                }
                Kind::Add(a, b) => {
                    stack.push((x, b));
                    stack.push((x, a));
                    t.then(|| "Add: d1, then d2".to_string())
                }
                Kind::Scale(r, d) => {
                    m.real_op();
                    stack.push((x * r, d));
                    t.then(|| format!("Scale {}: cotangent becomes {}", show_real(r), show_real(x * r)))
                }
                Kind::Share(i, d) => {
                    es.dfrag.insert(i, (nd, d));
                    *es.accum.entry(i).or_default() += x;
                    m.real_op();
                    t.then(|| format!("Share {i}: accum {i} += {}, fragment deferred", show_real(x)))
                }
                _ => return Err(RunError::runtime(self.span, format!("eval4: {} is not in §2.5's Delta", k.ctor()))),
            };
            step(m, "eval4", nd as u64, ar.span(nd), x, || note.unwrap_or_default(), es);
        }
        Ok(())
    }

    /// backprop4: pop the largest pending ID, evaluate its fragment with the cotangent accumulated for it.
    fn backprop4(&mut self, m: &mut Machine, es: &mut Es) -> Result<(), RunError> {
        while let Some((i, c)) = es.accum.pop_last() {
            m.count("map_ops", 1);
            let (serial, d) = es
                .dfrag
                .remove(&i)
                .ok_or_else(|| RunError::runtime(self.span, format!("backprop4: no fragment for ID {i}")))?;
            self.ops += 1;
            m.tick(1)?;
            step(m, "pop", serial as u64, es.ar.span(d), c, || format!("pop ID {i} with cotangent {}: evaluate its fragment once", show_real(c)), es);
            self.eval4(m, c, d, es)?;
        }
        Ok(())
    }
}

/// `reversePass c d n`: reversePass4 c d, its `Map DVarName R` as a vector of the n inputs (an input no
/// Input reached gets 0).
pub fn b_reverse_pass(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let (c, root, n) = eval_args(m, &args, span, "reversePass")?;
    let mut visits = Visits::of(m);
    let ar = root.arena.try_borrow().map_err(|_| RunError::runtime(span, "reversePass: the Delta is being built"))?;
    let mut es = Es { grad: BTreeMap::new(), dfrag: BTreeMap::new(), accum: BTreeMap::new(), ar: &ar };
    let mut walk = Walk { n, span, visits: &mut visits, ops: 0 };
    let mut res = walk.eval4(m, c, root.ix, &mut es).and_then(|_| walk.backprop4(m, &mut es));
    let ops = walk.ops;
    let grad = std::mem::take(&mut es.grad);
    drop(ar);
    record(m, &root, visits, ops, &mut res);
    res?;
    let mut g = vec![0.0; n];
    for (v, x) in grad {
        g[v as usize] = x;
    }
    Ok(vector_value(g))
}
