//! Krawiec, Peyton Jones, Krishnaswami, Ellis, Eisenberg, Fitzgibbon: "Provably correct, asymptotically
//! efficient, higher-order reverse-mode automatic differentiation" (POPL 2022), §§5–9.

use crate::stage::Chain;

pub mod array;
mod common;
pub mod delta;
pub mod dense;
pub mod general;
pub mod monadic;

pub static CHAIN: Chain = Chain {
    id: "krawiec",
    title: "Provably correct reverse AD (Krawiec et al.)",
    paper: "Krawiec et al. 2022",
    citation: "Faustyna Krawiec, Simon Peyton Jones, Neel Krishnaswami, Tom Ellis, Richard A. Eisenberg, Andrew Fitzgibbon. Provably correct, asymptotically efficient, higher-order reverse-mode automatic differentiation. POPL 2022.",
    url: "https://doi.org/10.1145/3498710",
    stages: &[&dense::Dense, &delta::Delta, &monadic::Monadic, &array::Array, &general::General],
};
