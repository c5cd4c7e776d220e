//! The registry: every paper's stages, in order. Adding a stage is one file and one line here.

use crate::stage::Stage;

pub mod forward;
pub mod krawiec_dense;
pub mod krawiec_delta;
pub mod krawiec_monadic;
pub mod krawiec_array;
pub mod krawiec_general;
pub mod dualrev_common;
pub mod dualrev_naive;
pub mod dualrev_staged;
pub mod dualrev_cayley;
pub mod dualrev_sparse;
pub mod dualrev_mutable;
pub mod dualrev_nocollector;
pub mod dualrev_contrib;
pub mod dualrev_tape;
pub mod dualrev_parallel;

/// All stages, papers in order, each paper's stages in the paper's order.
pub fn all() -> Vec<&'static dyn Stage> {
    vec![
        &forward::Forward,
        // Krawiec et al. 2022 (krawiec/*)
        &krawiec_dense::Dense,
        &krawiec_delta::Delta,
        &krawiec_monadic::Monadic,
        &krawiec_array::Array,
        &krawiec_general::General,
        // Smeding & Vákár 2025 (dualrev/*)
        &dualrev_naive::Naive,
        &dualrev_staged::Staged,
        &dualrev_cayley::Cayley,
        &dualrev_sparse::Sparse,
        &dualrev_mutable::Mutable,
        &dualrev_nocollector::NoCollector,
        &dualrev_contrib::ContribStage,
        &dualrev_tape::Tape,
        &dualrev_parallel::Parallel,
    ]
}

pub fn find(id: &str) -> Option<&'static dyn Stage> {
    all().into_iter().find(|s| s.info().id == id)
}
