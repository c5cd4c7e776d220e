//! Smeding, Konarski, Peyton Jones & Fitzgibbon: "Dual-Numbers Reverse AD for Functional Array
//! Languages" (2024). Part A is the scalar background of §2 (four evaluators of Delta, then sharing),
//! Part B the naive array extensions of §4 (negative results), Part C the final pipeline of §5–7 (bot,
//! dual arrays, symbolic evaluation with sharing, shareToLet), each stage of Part C feeding the next.

use crate::stage::{Chain, CounterInfo};

pub mod common;

chain_stages! {
    // Part A (§2): scalar background.
    eval0::Eval0,
    eval1::Eval1,
    eval2::Eval2,
    eval3::Eval3,
    share::Share,

    // Part B (§4): naive array extensions.
    dual_numbers::DualNumbers,
    build1::Build1,
    onehot::OneHot,

    // Part C (§5–7): the final pipeline.
    bot::Bot,
    dual_arrays::DualArrays,
    symbolic::Symbolic,
    symbolic_share::SymbolicShare,
    share_to_let::ShareToLet,
}

pub static CHAIN: Chain = Chain {
    id: "arrays",
    title: "Dual-numbers reverse AD for arrays (Smeding et al.)",
    paper: common::PAPER,
    citation: "Tom Smeding, Mikołaj Konarski, Simon Peyton Jones, Andrew Fitzgibbon. Dual-Numbers Reverse AD for Functional Array Languages. arXiv:2507.12640, July 2025.",
    url: "https://arxiv.org/abs/2507.12640",
    stages: STAGES,
    accepts: crate::stage::accept_all,
    before_run: crate::stage::nothing_before_run,
    after_run: crate::stage::nothing_before_run,
    // what the runs read of their program (an empty array's scalar zero, a gradient program's
    // size) is taken before it is let go: on a 10^5-line program the output IR held through the
    // run, beside its lowered code, passed the memory budget (issue 14 item 4)
    run_reads_program: false,
    keep_from_program: common::core::runtime::keep_from_program,
    forget: crate::stage::forget_nothing,
    counters: COUNTERS,
};

/// The counters the chain's runtimes add to a run's cost.
static COUNTERS: &[CounterInfo] = &[
    // Part A
    CounterInfo { name: "delta_nodes", about: "Delta constructors built by the forward pass (Part A: Zero, Input, Scale, Add, Share; arrays/dual-arrays: array-level nodes)" },
    CounterInfo { name: "eval_visits", about: "Delta nodes visited by the evaluator or reverse pass (every eval call); a tree walk visits a shared node once per path" },
    CounterInfo { name: "op_visits", about: "visits of Fig. 4's nodes: an operation's Delta (with sharing: its fragment, popped once) and the inputs" },
    CounterInfo { name: "vector_elem_ops", about: "element operations on gradient vectors of length n (eval1 at every node, eval2 at every Scale)" },
    CounterInfo { name: "ids_generated", about: "IDs drawn from genID (one per primitive on reals, Fig. 3)" },
    CounterInfo { name: "map_ops", about: "pops of the largest pending ID from accum (backprop4)" },

    // Part B
    CounterInfo { name: "inner_nodes", about: "Delta constructors the forward pass builds, but the leaves Zero and Input (footnote 18's count: 5n+1 on the dot product); eval_visits counts the reverse pass's visits" },
    CounterInfo { name: "ct_cells", about: "reals the reverse pass writes: one-hots, additions into accumulators, scales, replicates (O(n²) on the dot product with one-hot Index, §4.4)" },

    // Part C
    CounterInfo { name: "backprop_ids", about: "IDs popped by the array reverse pass's loop (arrays/dual-arrays)" },
    CounterInfo { name: "gathered", about: "elements read by gathers (arrays/*)" },
    CounterInfo { name: "gradient_size", about: "nodes of the gradient program (arrays/symbolic, symbolic-share, share-to-let)" },
    CounterInfo { name: "shares_computed", about: "share IDs computed when the gradient program runs (arrays/symbolic-share)" },
    CounterInfo { name: "scattered", about: "elements added by scatters (arrays/*)" },
];
