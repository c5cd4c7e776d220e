//! What the Krawiec stages share (Krawiec et al. POPL 2022). A stage file imports this module and the
//! kit (`crate::kit`), never a sibling stage file. The Delta terms, their graph, the dual-number
//! translation with a Delta companion and the monadic translation Drev live in the kit
//! (`crate::kit::delta`), shared with the array paper's scalar stages (`stages/arrays`):
//! - `monad`: the monad M's runtime of Fig. 10 (deltaLet, Var, runDelta);
//! - `eval`: Fig. 10's eval over any DeltaMap, and the persistent DeltaMap;
//! - `wrapper`: the R^a → R wrappers of Figs. 6, 8 and 11.

pub mod eval;
pub mod monad;
pub mod wrapper;
