//! Reynolds' defunctionalisation ("Definitional interpreters for higher-order programming
//! languages", 1972): after monomorphisation, a function value becomes a tag naming its lambda with
//! the lambda's captured variables, and every application calls an `apply` dispatcher that cases on
//! the tag and runs that lambda's code. Smeding & Vákár ("Efficient CHAD", §9) obtain it as closure
//! conversion followed by deexistentialisation, which is how it is built here: the same lambda-set
//! analysis as `closure_convert`, with the code pointer dropped from each closure because the tag
//! determines it.
//!
//! Tags are nested binary sums (`inl`, `inr inl`, …, `inr … inr`), one summand per lambda of a
//! lambda set; one `apply_A_B` per lambda set of type `A -> B` (suffixed when a type has several).
//! Each lambda's body is a top-level definition `code (env, x) = …`. The output has no lambdas
//! except the parameters of top-level definitions (and no function values: only `main`, the codes
//! and the dispatchers are functions). Limits: see `closures.rs`.

use crate::diag::Diagnostic;
use crate::ir::Program;

/// Defunctionalises `p` (type-checked; monomorphised first).
pub fn defunctionalise(p: &Program) -> Result<Program, Diagnostic> {
    super::closures::convert(p, super::closures::Mode::Defunctionalise)
}
