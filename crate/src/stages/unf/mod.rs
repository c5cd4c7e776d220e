//! Huot & Shaikhha: "Denotationally correct, purely functional, efficient reverse-mode automatic
//! differentiation" (Unary Normal Form), §§3–5.

use crate::stage::{Chain, CounterInfo};

mod common;

chain_stages! {
    direct::Direct,
    pe::Pe,
    opt::Opt,
}

pub static CHAIN: Chain = Chain {
    id: "unf",
    title: "Purely functional reverse AD in Unary Normal Form (Huot & Shaikhha)",
    paper: common::PAPER,
    citation: "Mathieu Huot, Amir Shaikhha. Denotationally correct, purely functional, efficient reverse-mode automatic differentiation. arXiv:2212.09801.",
    url: "https://arxiv.org/abs/2212.09801",
    stages: STAGES,
    accepts: crate::stage::accept_all,
    before_run: crate::stage::nothing_before_run,
    counters: COUNTERS,
};

/// The counters this chain's runtimes add to a run's cost (Fig. 11's cost model comes with the later stages).
static COUNTERS: &[CounterInfo] = &[];
