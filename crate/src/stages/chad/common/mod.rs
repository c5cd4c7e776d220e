//! What the chain's stages share: the source language (Fig. 1) as a desugared core, the CHAD rules
//! (Figs. 2 and 7 written once, parametrised by the environment-vector API), the type-indexed
//! builtins and their runtime in three representations.

pub mod apis;
pub mod bags;
pub mod bp_tree;
pub mod chad;
pub mod criterion;
pub mod ct_tree;
pub mod graph;
pub mod monad;
pub mod ops;
pub mod runtime;
pub mod source;

pub use source::{first_order, first_order_arrays, ACCEPTS, PAPER};

use crate::diag::Diagnostic;
use crate::features::{Feature, Features};
use crate::interp::{Machine, RunError};
use crate::ir::Program;
use crate::stage::{run_wrapper, Output, RunCtx};
use crate::value::Value;

/// First-order code after inlining; sums, integers and conditionals as the paper's language allows.
pub const SUPPORTS: Features = Features::of(&[Feature::HigherOrder, Feature::Sums, Feature::Integers, Feature::Conditionals]);

/// A stage's output: `program` with the type-indexed builtins it names (`0_τ`, `one_x`, `split`, …).
/// The output of a stage whose instances are made by name (`Stage::builtin_family` is `family`):
/// none listed.
pub fn output_by_name(program: Program) -> Result<Output, Diagnostic> {
    Ok(Output { program, builtins: vec![], views: vec![], steps: vec![] })
}

/// The chain's type-indexed builtins by name (`interp::BuiltinFamily`), on its runtime.
pub fn family(name: &str, typed: bool) -> Option<crate::interp::Builtin> {
    ops::instance(name, typed, &runtime::implementation)
}

pub fn output(program: Program) -> Result<Output, Diagnostic> {
    let builtins = ops::builtins_for(&program, &runtime::implementation).map_err(|m| Diagnostic::error(crate::diag::Span::NONE, m))?;
    Ok(Output { program, builtins, views: vec![], steps: vec![] })
}

/// A stage's run: the wrapper, over the runtime in representation `repr` (cells when `mutable`).
/// A traced run records its backpropagator tree (`bp_tree`), whose sites `transform` names: the
/// transform that made the program, repeated.
pub fn run(m: &mut Machine, cx: &RunCtx, repr: runtime::Repr, mutable: bool, transform: impl FnOnce()) -> Result<(Value, Value), RunError> {
    runtime::set_up(m, repr, mutable);
    if m.tracing() {
        let sites = bp_tree::sites_of(transform);
        bp_tree::record(m, sites, 0);
    }
    run_wrapper(m, cx.input, cx.seed)
}

/// The backpropagator tree a traced run recorded, as the stage's graph.
pub fn graph(m: &mut Machine) -> Option<crate::interp::Graph> {
    bp_tree::graph(m)
}
