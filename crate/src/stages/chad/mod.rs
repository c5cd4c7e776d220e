//! Smeding & Vákár: "Efficient CHAD" (POPL 2024): CHAD made efficient in steps — sparsity (§4.1),
//! monadic lifting (§4.2), mutable accumulation (§5) — and higher order: naive (§9), and by closure
//! conversion first (App. C); arrays (§7, §8.1).

use crate::diag::Diagnostic;
use crate::stage::{Chain, CounterInfo, Source};

pub mod common;

chain_stages! {
    basic::Basic,
    sparse::Sparse,
    monadic::Monadic,
    mutable::Mutable,
    arrays::Arrays,
    naive_ho::NaiveHo,
    cc::Cc,
    cc_chad::CcChad,
}

pub static CHAIN: Chain = Chain {
    id: "chad",
    title: "Efficient CHAD (Smeding & Vákár)",
    paper: common::PAPER,
    citation: "Tom J. Smeding, Matthijs I. L. Vákár. Efficient CHAD. Proc. ACM Program. Lang. 8, POPL, 2024.",
    url: "https://arxiv.org/abs/2307.05738",
    stages: STAGES,
    accepts,
    before_run: crate::stage::nothing_before_run,
    after_run: common::criterion::after_run,
    // (chad/arrays' second run, with §8.1's BArray, reruns the first's lowered code: `Machine::rerun`)
    keep_from_program: crate::stage::keep_nothing,
    forget: common::ops::forget_instances,
    run_reads_program: false,
    counters: COUNTERS,
};

/// Every stage takes the paper's first-order language (Fig. 1) after inlining; a stage that runs
/// another's output (which has the chain's `plus`) takes it as already checked. A program with
/// arrays is left to each stage's `accepts` (§7's chad/arrays takes it, the others refuse it).
fn accepts(src: &Source) -> Result<(), Diagnostic> {
    if !chain_asks_first_order(src) {
        return Ok(());
    }
    common::first_order(src).map(|_| ())
}

/// Whether the chain's `accepts` asks `first_order` of `src` (a source without arrays): a stage's own
/// `accepts` runs after it (`pipeline::refusal_with`), so where it did, a stage need not ask again
/// (issue 14 item 4: inlining and desugaring a 10^5-line program, a second time, then a third in the
/// transform).
pub(crate) fn chain_asks_first_order(src: &Source) -> bool {
    src.builtins.get(common::ops::PLUS).is_none() && !common::source::mentions_arrays(src.program)
}

/// The counters the chain's runtime adds to a run's cost.
static COUNTERS: &[CounterInfo] = &[
    CounterInfo { name: "zero_nodes", about: "nodes of zero values built (0_τ and 0_{EV Γ}, and the zeros inside one-hot vectors)" },
    CounterInfo { name: "plus_visits", about: "nodes visited by + on cotangents and environment vectors" },
    CounterInfo { name: "onehot_cells", about: "cells of one-hot environment vectors built (|Γ| each when dense, 1 when sparse)" },
    CounterInfo { name: "map_log_steps", about: "steps in the persistent map EMap: ⌈log2(n+1)⌉ per get/modify/pop, m·⌈log2(n/m+1)⌉ per union" },
    CounterInfo { name: "body_backprops", about: "runs of a function body's backpropagator (§9: 2^(n−1) for the innermost of t_n when naive; App. C: once per call)" },
    CounterInfo { name: "cell_ops", about: "O(1) operations on the mutable stack of cells (push0, pop, modify; |Γ| for run)" },
    CounterInfo { name: "bag_ones", about: "BOne's the backward pass made and kept in Bags until collected (§7; the §8.1 gather: one per index)" },
    CounterInfo { name: "bag_ones_barray", about: "the same with §8.1's BArray constructor (a Bag takes further BOne's into an array in place)" },
    CounterInfo { name: "barrays_barray", about: "BArrays made in the run with §8.1's BArray constructor" },
    // the complexity criterion, measured (common/criterion.rs)
    CounterInfo { name: "eq3_cost", about: "the derivative's cost for Eq. (3): this run's steps plus the runtime's work units (zero nodes, + visits, one-hot cells, map log steps, cell operations, BOne's)" },
    CounterInfo { name: "eq3_cost_t", about: "cost(t) for Eq. (3): the interpreter steps of the user's program at the same input" },
    CounterInfo { name: "eq3_bound", about: "Eq. (3)'s bound with the Agda proof's constants: 5 + 31·cost(t) + size(d) + 4·|Γ|" },
    CounterInfo { name: "eq3_holds", about: "1 when this run's cost is within Eq. (3)'s proved bound, else 0 (the naive and sparse stages may fail it as programs grow)" },
    CounterInfo { name: "eq3_c", about: "the measured constant: the smallest integer c with cost ≤ 5 + c·cost(t) + size(d) + 4·|Γ| on this run (the proof's c is 31)" },
];

#[cfg(test)]
mod tests {
    use crate::interp::Builtins;
    use crate::pipeline::{front_end, Options, Outputs};
    use crate::stage::Source;
    use crate::stages;

    /// Issue 14 item 4: preparing a CHAD stage inlines and desugars the source (`first_order`) once
    /// for the chain's `accepts` and once in the transform, not a third time in the stage's own
    /// `accepts` (on a 10^5-line program each pass is ~1 s).
    #[test]
    fn a_stage_does_not_ask_first_order_again_after_the_chain() {
        crate::limits::run_with_stack(|| {
            let (p, s, t) = front_end("def main x = let y = x * x in let (a, b) = (sin y, y) in a * b + x", &[]).expect("the program checks");
            let b = Builtins::new();
            let src = Source { program: &p, input_type: &s, output_type: &t, builtins: &b };
            let opts = Options::default();
            for (id, asked) in [("chad/monadic", 2), ("chad/mutable", 2), ("chad/naive-ho", 1), ("chad/cc", 1)] {
                let outputs = Outputs::new(&src, &opts);
                super::common::source::FIRST_ORDER_ASKED.with(|c| c.set(0));
                outputs.get(stages::find(id).unwrap()).expect("the stage's output");
                let n = super::common::source::FIRST_ORDER_ASKED.with(|c| c.get());
                assert_eq!(n, asked, "{id} asked first_order {n} times");
            }
        })
    }
}
