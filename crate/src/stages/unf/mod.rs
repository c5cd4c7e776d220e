//! Huot & Shaikhha: "Denotationally correct, purely functional, efficient reverse-mode automatic
//! differentiation" (Unary Normal Form), §§3–5.

use crate::stage::Chain;

mod common;

chain_stages! {
    direct::Direct,
    source::UnfSource,
    target::UnfTarget,
    back::UnfBack,
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
    before_run: common::cost::before_run,
    after_run: common::cost::after_run,
    keep_from_program: crate::stage::keep_nothing,
    forget: crate::stage::forget_nothing,
    run_reads_program: true,
    counters: common::cost::COUNTERS,
};
