//! The registry: every paper's chain of stages, papers in order. Only this file and the pipeline know
//! stage order. Adding a stage is one file in its chain's folder and one line in the chain's `mod.rs`;
//! adding a chain is one folder and one line here.

use crate::stage::{Chain, Stage};

/// In a chain's `mod.rs`: declares its stage modules and lists their stages in the paper's order, one
/// line per stage (`dense::Dense,`), as `STAGES`.
macro_rules! chain_stages {
    ($($m:ident :: $s:ident),* $(,)?) => {
        $(pub mod $m;)*
        /// The chain's stages, in the paper's order.
        pub static STAGES: &[&dyn crate::stage::Stage] = &[$(&$m::$s),*];
    };
}

pub mod arrays;
pub mod chad;
pub mod dualrev;
pub mod forward;
pub mod krawiec;
pub mod unf;

/// Every chain, in the order the page and the CLI show them.
pub static CHAINS: &[&Chain] = &[&forward::CHAIN, &krawiec::CHAIN, &dualrev::CHAIN, &unf::CHAIN, &chad::CHAIN, &arrays::CHAIN];

/// All stages, chains in order, each chain's stages in the paper's order.
pub fn all() -> Vec<&'static dyn Stage> {
    CHAINS.iter().flat_map(|c| c.stages.iter().copied()).collect()
}

pub fn find(id: &str) -> Option<&'static dyn Stage> {
    all().into_iter().find(|s| s.info().id == id)
}

/// The chain a stage belongs to.
pub fn chain_of(id: &str) -> Option<&'static Chain> {
    CHAINS.iter().copied().find(|c| c.stages.iter().any(|s| s.info().id == id))
}
