//! Forward mode (Krawiec et al. §4, Figs. 3–4): the reference every other stage is checked against.

use crate::stage::{Chain, CounterInfo};

chain_stages! {
    forward::Forward,
}

pub static CHAIN: Chain = Chain {
    id: "forward",
    title: "Forward mode (the reference)",
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
];
