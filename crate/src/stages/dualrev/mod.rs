//! Smeding & Vákár: "Parallel Dual-Numbers Reverse AD" (JFP 2025), §§5–12.

use crate::stage::{Chain, CounterInfo};

pub mod common;

chain_stages! {
    naive::Naive,
    staged::Staged,
    cayley::Cayley,
    sparse::Sparse,
    mutable::Mutable,
    nocollector::NoCollector,
    contrib::ContribStage,
    tape::Tape,
    parallel::Parallel,
}

pub static CHAIN: Chain = Chain {
    id: "dualrev",
    title: "Parallel dual-numbers reverse AD (Smeding & Vákár)",
    paper: "Smeding & Vákár 2025",
    citation: "Tom J. Smeding, Matthijs I. L. Vákár. Parallel Dual-Numbers Reverse AD. Journal of Functional Programming, 2025.",
    url: "https://arxiv.org/abs/2207.03418",
    stages: STAGES,
    accepts: common::accepts_source,
    before_run: common::before_run,
    after_run: crate::stage::nothing_before_run,
    keep_from_program: crate::stage::keep_nothing,
    forget: crate::stage::forget_nothing,
    run_reads_program: false,
    counters: COUNTERS,
};

/// The counters this chain's runtimes add to a run's cost.
static COUNTERS: &[CounterInfo] = &[
    CounterInfo { name: "backprop_calls", about: "calls of backpropagators (or resolve steps) during the backward pass" },
    CounterInfo { name: "ids_allocated", about: "IDs handed out by the forward pass (one per backpropagator, Contrib or tape entry)" },
    CounterInfo { name: "zero_leaves", about: "real leaves of the zero cotangent built (zeroC)" },
    CounterInfo { name: "plus_leaves", about: "real leaves added by cotangent addition (plusC)" },
    CounterInfo { name: "map_ops", about: "operations on the staged or sparse maps" },
    CounterInfo { name: "forks", about: "parallel jobs forked by |||" },
];
