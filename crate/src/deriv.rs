//! The one table of primitive derivatives, shared by every stage (Krawiec et al. Fig. 14's `df_ij`),
//! so that all stages differentiate each primitive the same way and agree to rounding.

use crate::build::*;
use crate::ir::{Expr, Prim};

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
/// (comparisons, integer operations): stages pass those through on primals.
pub fn rule(op: Prim, xs: &[Expr], y: &Expr) -> Option<Rule> {
    use Partial::*;
    let x = |i: usize| xs[i].clone();
    let (uses_result, partials) = match op {
        Prim::Add => (false, vec![One, One]),
        Prim::Sub => (false, vec![One, MinusOne]),
        Prim::Mul => (false, vec![Times(x(1)), Times(x(0))]),
        // d(a/b) = da / b - (a / b^2) db
        Prim::Div => (false, vec![Times(div(real(1.0), x(1))), Times(neg(div(x(0), mul(x(1), x(1)))))]),
        Prim::Neg => (false, vec![MinusOne]),
        Prim::Sin => (false, vec![Times(prim(Prim::Cos, vec![x(0)]))]),
        // Fig. 14 / §10.1: Drev{cos} scales by negateR (sin x)
        Prim::Cos => (false, vec![Times(neg(prim(Prim::Sin, vec![x(0)])))]),
        Prim::Tan => (true, vec![Times(add(real(1.0), mul(y.clone(), y.clone())))]),
        Prim::Exp => (true, vec![Times(y.clone())]),
        Prim::Log => (false, vec![Times(div(real(1.0), x(0)))]),
        Prim::Sqrt => (true, vec![Times(div(real(0.5), y.clone()))]),
        Prim::Tanh => (true, vec![Times(sub(real(1.0), mul(y.clone(), y.clone())))]),
        // atan2 y x: d = (x dy - y dx) / (x^2 + y^2)
        Prim::Atan2 => {
            let r2 = || add(mul(x(0), x(0)), mul(x(1), x(1)));
            (false, vec![Times(div(x(1), r2())), Times(neg(div(x(0), r2())))])
        }
        // abs' is the sign, taking 1 at 0 (the right derivative), in every stage alike.
        Prim::Abs => (false, vec![Times(if_(prim(Prim::Lt, vec![x(0), real(0.0)]), real(-1.0), real(1.0)))]),
        _ => return None,
    };
    Some(Rule { uses_result, partials })
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

/// Whether `op` applied to arguments of these types is a real operation that AD differentiates.
pub fn is_real_op(op: Prim, arg_is_real: bool) -> bool {
    arg_is_real && !matches!(op, Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne)
}
