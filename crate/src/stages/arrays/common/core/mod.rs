//! Part C (§5–7): the paper's core array language inside the IR (`lang`), its runtime builtins
//! (`runtime`), the lowering from the surface arrays (`lower`) and bot's rules (`bot`).

pub mod bot;
pub mod boundary;
pub mod delta;
pub mod dual;
pub mod fold;
pub mod gradient;
pub mod int_reads;
pub mod lang;
pub mod lower;
pub mod pack;
pub mod runtime;
pub mod steps;
pub mod symbolic;
pub mod soa;
pub mod tuples;
