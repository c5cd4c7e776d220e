//! The shared kit: what several chains need, kept apart from any one stage.

pub mod passes;
