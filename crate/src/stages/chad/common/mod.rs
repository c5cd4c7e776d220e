//! What the chain's stages share: the source language (Fig. 1) as a desugared core, the CHAD rules
//! (Figs. 2 and 7 written once, parametrised by the environment-vector API), the type-indexed
//! builtins and their runtime in three representations.

pub mod chad;
pub mod monad;
pub mod ops;
pub mod runtime;
pub mod source;

pub use source::{first_order, ACCEPTS, PAPER};
