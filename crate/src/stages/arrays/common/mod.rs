//! What the chain's stages share, one folder per part of the paper so that each part reads on its own:
//! `scalar` (Part A, §2), `naive` (Part B, §4), `core` (Part C, §5–7: the core array language and its
//! lowering from the surface arrays).

pub mod core;
pub mod naive;
pub mod scalar;

/// Short citation shown beside the chain.
pub const PAPER: &str = "Smeding et al. 2025";
