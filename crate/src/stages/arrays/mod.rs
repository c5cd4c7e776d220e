//! Smeding, Konarski, Peyton Jones & Fitzgibbon: "Dual-Numbers Reverse AD for Functional Array
//! Languages" (2024). Part A is the scalar background of §2 (four evaluators of Delta, then sharing),
//! Part B the naive array extensions of §4 (negative results), Part C the final pipeline of §5–7 (bot,
//! dual arrays, symbolic evaluation with sharing, shareToLet), each stage of Part C feeding the next.

use crate::stage::{Chain, CounterInfo};

pub mod common;

chain_stages! {
    // Part A (§2): scalar background.

    // Part B (§4): naive array extensions.

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
    citation: "Tom Smeding, Mikołaj Konarski, Simon Peyton Jones, Andrew Fitzgibbon. Dual-Numbers Reverse AD for Functional Array Languages. 2024.",
    url: "https://arxiv.org/abs/2207.03418",
    stages: STAGES,
    accepts: crate::stage::accept_all,
    before_run: crate::stage::nothing_before_run,
    after_run: crate::stage::nothing_before_run,
    counters: COUNTERS,
};

/// The counters the chain's runtimes add to a run's cost.
static COUNTERS: &[CounterInfo] = &[
    // Part A

    // Part B

    // Part C
    CounterInfo { name: "delta_nodes", about: "array-level Delta nodes built by the forward pass (arrays/dual-arrays)" },
    CounterInfo { name: "backprop_ids", about: "IDs popped by the array reverse pass's loop (arrays/dual-arrays)" },
    CounterInfo { name: "eval_visits", about: "Delta nodes visited by the array reverse pass's eval (arrays/dual-arrays)" },
    CounterInfo { name: "gathered", about: "elements read by gathers (arrays/*)" },
    CounterInfo { name: "gradient_size", about: "nodes of the gradient program (arrays/symbolic, symbolic-share, share-to-let)" },
    CounterInfo { name: "shares_computed", about: "share IDs computed when the gradient program runs (arrays/symbolic-share)" },
    CounterInfo { name: "scattered", about: "elements added by scatters (arrays/*)" },
];
