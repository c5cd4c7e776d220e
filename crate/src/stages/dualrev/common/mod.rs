//! Shared pieces of the Smeding–Vákár chain (`dualrev/*`, "Parallel Dual-Numbers Reverse AD",
//! JFP 2025). A stage file imports only this module and the shared kit (`crate::kit`), never a
//! sibling stage:
//! - `accepts`: the chain's one check of the source (the chain's `Chain::accepts`); the run set-up
//!   every stage needs is `runtime::before_run` (the chain's `Chain::before_run`);
//! - `translate`: the monadic term translation of Fig. 8 (only the rule for reals changes from
//!   stage to stage), `rules`: the rules for reals that several stages share;
//! - `types`: D_c[τ] (the shared kit's type walker) and the types the paper states;
//! - `wrapper`: Interleave, Deinterleave, the monoids, the wrappers of Figs. 8–10;
//! - `chunked`: a growing array in fixed chunks (no doubling overshoot), for the runtimes' arrays;
//! - `runtime`: the state every stage's builtins share (ID counter, counters, graph edges, resolve
//!   trace), the frozen collector; `staged`: the Staged values several stages share.
//!
//! Decisions (recorded here once, referred to from the stage files):
//! - **IDs** number from 0, inputs first, left to right (Secs. 6–9; Fig. 11 numbers from 1).
//!   Constants take an ID, as in Fig. 8 and the reference implementation.
//! - **The ID monad** Z → (–, Z) of Fig. 8 is written as the IR's monad `M` (`do`/`pure`), run in
//!   direct style, with `genID : M Z`; Sec. 12.3 writes the same translation with a black-box monad.
//!   The `IO` of Secs. 9–10 is the same `M` (its only effects are accumulations, which commute).
//! - **Cotangent types.** dτ has the shape of τ: real leaves carry cotangents; integer and boolean
//!   leaves and sum tags carry the primal's (footnote 30: the zero of c copies the input's
//!   structure; `Interleave⁴_Z`'s rebuild returns the primal integer). So c = dσ is the input type
//!   σ itself, and `0 : c` is the input with its reals zeroed.
//! - **Counting.** `backprop_calls` counts the calls of backpropagators proper (the `dR ⊸ …`
//!   functions inside D[R]): their bodies are wrapped in the identity builtin `counted`, so the
//!   printed program is what counts. From §10.2 on backpropagators are data, and the resolve counts
//!   each Contrib it processes.

mod accepts;
mod chunked;
mod rules;
mod runtime;
mod staged;
mod types;
mod wrapper;

pub use accepts::*;
pub use chunked::Chunked;
pub use rules::*;
pub use runtime::*;
pub use staged::*;
pub use crate::kit::monadic::*;
pub use types::*;
pub use wrapper::*;

pub const PAPER: &str = "Smeding & Vákár 2025";
pub const ACCEPTS: &str = "the whole scalar language: closures, recursion, tuples, sums, if, integers";
