//! Primitive derivatives as every stage uses them (Krawiec et al. Fig. 14's `df_ij`), read from the
//! table of primitives (prims.rs), so that all stages differentiate each primitive the same way and
//! agree to rounding.

use crate::build::*;
use crate::ir::{Expr, Prim};
use crate::prims::At;

/// The partial derivative of a primitive with respect to one argument, as a coefficient on that
/// argument's tangent or cotangent. `One` and `MinusOne` keep generated code as the papers print it
/// (`dx + dy` rather than `1.0 * dx + 1.0 * dy`).
#[derive(Clone, Debug)]
pub enum Partial {
    One,
    MinusOne,
    Times(Expr),
}

/// A real primitive's rule: whether the partials mention the result `y` (then the stage binds
/// `let y = op xs` first), and the partials with respect to each argument, as functions of the
/// argument primals `xs` and the result `y` (all given as variable expressions).
pub struct Rule {
    pub uses_result: bool,
    pub partials: Vec<Partial>,
}

/// The rule for `op` on reals, or None for primitives whose result is not a differentiable real
/// (comparisons, integer operations): stages pass those through on primals. The partials are the
/// `jvp` of `op`'s row in the table of primitives (prims.rs).
pub fn rule(op: Prim, xs: &[Expr], y: &Expr) -> Option<Rule> {
    let jvp = op.info().jvp?;
    Some(Rule { uses_result: jvp.uses_result, partials: (jvp.partials)(&At { xs, y }) })
}

/// `Σ partial_i · d_i` over the given tangents, folded left with `+` and `-` so that simple rules
/// print as in the papers; None when there are no terms.
pub fn linear_combination(partials: &[Partial], ds: &[Expr]) -> Expr {
    let mut acc: Option<Expr> = None;
    for (p, d) in partials.iter().zip(ds) {
        acc = Some(match (acc, p) {
            (None, Partial::One) => d.clone(),
            (None, Partial::MinusOne) => neg(d.clone()),
            (None, Partial::Times(c)) => mul(c.clone(), d.clone()),
            (Some(a), Partial::One) => add(a, d.clone()),
            (Some(a), Partial::MinusOne) => sub(a, d.clone()),
            (Some(a), Partial::Times(c)) => add(a, mul(c.clone(), d.clone())),
        });
    }
    acc.unwrap_or_else(|| real(0.0))
}
