//! The registry: every paper's stages, in order. Adding a stage is one file and one line here.

use crate::stage::Stage;

pub mod forward;
pub mod dense;
pub mod delta;
pub mod monadic;
pub mod array;
pub mod general;

/// All stages, papers in order, each paper's stages in the paper's order.
pub fn all() -> Vec<&'static dyn Stage> {
    vec![
        &forward::Forward,
        &dense::Dense,
        &delta::Delta,
        &monadic::Monadic,
        &array::Array,
        &general::General,
    ]
}

pub fn find(id: &str) -> Option<&'static dyn Stage> {
    all().into_iter().find(|s| s.info().id == id)
}
