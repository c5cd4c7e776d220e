//! Krawiec, Peyton Jones, Krishnaswami, Ellis, Eisenberg, Fitzgibbon: "Provably correct, asymptotically
//! efficient, higher-order reverse-mode automatic differentiation" (POPL 2022), §§5–9.

use crate::stage::{Chain, CounterInfo};

mod common;

chain_stages! {
    dense::Dense,
    delta::Delta,
    monadic::Monadic,
    array::Array,
    general::General,
}

pub static CHAIN: Chain = Chain {
    id: "krawiec",
    title: "Provably correct reverse AD (Krawiec et al.)",
    paper: "Krawiec et al. 2022",
    citation: "Faustyna Krawiec, Simon Peyton Jones, Neel Krishnaswami, Tom Ellis, Richard A. Eisenberg, Andrew Fitzgibbon. Provably correct, asymptotically efficient, higher-order reverse-mode automatic differentiation. POPL 2022.",
    url: "https://doi.org/10.1145/3498710",
    stages: STAGES,
    accepts: crate::stage::accept_all,
    before_run: crate::stage::nothing_before_run,
    after_run: crate::stage::nothing_before_run,
    keep_from_program: crate::stage::keep_nothing,
    forget: crate::stage::forget_nothing,
    run_reads_program: false,
    counters: COUNTERS,
};

/// The counters this chain's runtimes add to a run's cost.
static COUNTERS: &[CounterInfo] = &[
    CounterInfo { name: "delta_nodes", about: "Delta constructors built by the forward pass (Zero, Scale, Add, Var, Let, OneHot)" },
    CounterInfo { name: "eval_visits", about: "nodes visited by the backward pass (eval); eval2 on the Delta tree visits shared nodes once per path" },
    CounterInfo { name: "vector_elem_ops", about: "element operations on dense δS vectors (krawiec/dense pays O(size of S) per scalar operation)" },
    CounterInfo { name: "map_ops", about: "insertions and look-ups in the cotangent map (persistent map in krawiec/monadic, array in krawiec/array)" },
];
