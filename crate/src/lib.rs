//! Cotangent: the program transforms of reverse-mode AD from five papers, as source-to-source stages
//! over one typed IR, with one interpreter that runs the source and every stage's output.
//! See ARCHITECTURE.md for the data flow and where each part lives.

pub mod build;
pub mod deriv;
pub mod diag;
pub mod features;
pub mod interp;
pub mod kit;
pub mod ir;
pub mod limits;
pub mod pipeline;
pub mod prims;
pub mod print;
pub mod stage;
pub mod stages;
pub mod syntax;
pub mod timing;
pub mod types;
pub mod value;
