//! What the Krawiec stages share (Krawiec et al. POPL 2022). A stage file imports this module and the
//! kit (`crate::kit`), never a sibling stage file:
//! - `dual`: the homomorphic dual-number translation of Fig. 3's shape, parameterised by a real's
//!   companion (δS in Fig. 5, Delta in Fig. 7);
//! - `delta`: the Delta terms of Figs. 7 and 10 as runtime values, and their constructor builtins;
//! - `graph`: eval's visits per node and the Delta DAG as a `Graph`;
//! - `drev`: the monadic translation Drev of Fig. 9, with `simplify`, its administrative simplification;
//! - `monad`: the monad M's runtime of Fig. 10 (deltaLet, Var, runDelta);
//! - `eval`: Fig. 10's eval over any DeltaMap, and the persistent DeltaMap;
//! - `wrapper`: the R^a → R wrappers of Figs. 6, 8 and 11.

pub mod delta;
pub mod drev;
pub mod dual;
pub mod eval;
pub mod graph;
pub mod monad;
pub mod simplify;
pub mod wrapper;
