//! Smeding & Vákár: "Parallel Dual-Numbers Reverse AD" (JFP 2025), §§5–12.

use crate::stage::Chain;
use common::ChainStage;

pub mod common;
pub mod cayley;
pub mod contrib;
pub mod mutable;
pub mod naive;
pub mod nocollector;
pub mod parallel;
pub mod sparse;
pub mod staged;
pub mod tape;

pub static CHAIN: Chain = Chain {
    id: "dualrev",
    title: "Parallel dual-numbers reverse AD (Smeding & Vákár)",
    paper: "Smeding & Vákár 2025",
    citation: "Tom J. Smeding, Matthijs I. L. Vákár. Parallel Dual-Numbers Reverse AD. Journal of Functional Programming, 2025.",
    url: "https://arxiv.org/abs/2207.03418",
    // each wrapped with the chain's check of the source and its run set-up (`common::ChainStage`)
    stages: &[
        &ChainStage(naive::Naive),
        &ChainStage(staged::Staged),
        &ChainStage(cayley::Cayley),
        &ChainStage(sparse::Sparse),
        &ChainStage(mutable::Mutable),
        &ChainStage(nocollector::NoCollector),
        &ChainStage(contrib::ContribStage),
        &ChainStage(tape::Tape),
        &ChainStage(parallel::Parallel),
    ],
};
