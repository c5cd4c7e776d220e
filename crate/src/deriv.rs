//! Primitive derivatives as every stage uses them (Krawiec et al. Fig. 14's `df_ij`), read from the
//! table of primitives (prims.rs), so that all stages differentiate each primitive the same way and
//! agree to rounding.

use crate::build::*;
use crate::ir::{Expr, ExprKind, Prim};
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

/// Whether a real argument is a constant written in place (a literal, `real k`, or the negation or
/// annotation of one): it depends on no input, so its tangent is a structural zero, as JAX's symbolic
/// zeros. A shallow, syntactic check (a constant bound by `let` or passed to a function is not seen):
/// the forward-style stages use it to leave the term out, so that `x * 1.0` at x = 1e300 differentiates
/// to 1.0 and `1.0 / x` at 0 to −∞ (= −(1/0²)·dx, the reverse stages' rule), not 0 · ∞ = NaN.
pub fn is_constant(e: &Expr) -> bool {
    let mut e = e;
    loop {
        match &e.kind {
            ExprKind::Real(_) | ExprKind::Prim(Prim::ToReal, _) => return true,
            ExprKind::Ann(x_x) => { let (x, _) = &**x_x; e = x },
            ExprKind::Prim(Prim::Neg, xs) if xs.len() == 1 => e = &xs[0],
            _ => return false,
        }
    }
}

/// The terms of `Σ partial_i · d_i` whose argument is not a constant (`is_constant`): a structural
/// zero tangent is skipped rather than multiplied, so an infinite partial cannot turn it into NaN.
pub fn without_constants<T: Clone>(partials: &[Partial], ds: &[T], args: &[Expr]) -> (Vec<Partial>, Vec<T>) {
    partials.iter().zip(ds).zip(args).filter(|(_, a)| !is_constant(a)).map(|((p, d), _)| (p.clone(), d.clone())).unzip()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{neg, real, var};
    use crate::ir::Name;

    #[test]
    fn constants_are_literals_real_k_and_their_negations() {
        assert!(is_constant(&real(1.0)));
        assert!(is_constant(&neg(real(2.0))));
        assert!(is_constant(&prim(Prim::ToReal, vec![crate::build::int(3)])));
        assert!(!is_constant(&var(&Name::new("x", 1))));
        assert!(!is_constant(&neg(var(&Name::new("x", 1)))));
    }

    #[test]
    fn a_constant_argument_adds_no_term() {
        // d(x * 1.0) = dx * 1.0: the literal's zero tangent is not multiplied by x (which may be ∞)
        let (x, k) = (var(&Name::new("x", 1)), real(1.0));
        let r = rule(Prim::Mul, &[x.clone(), k.clone()], &real(0.0)).unwrap();
        let (ps, ds) = without_constants(&r.partials, &["dx", "dk"], &[x.clone(), k.clone()]);
        assert_eq!(ds, vec!["dx"]);
        assert!(matches!(&ps[0], Partial::Times(c) if *c == k));
        // 1.0 / x: only the −(1/x²) dx term remains
        let r = rule(Prim::Div, &[k.clone(), x.clone()], &real(0.0)).unwrap();
        let (ps, ds) = without_constants(&r.partials, &["dk", "dx"], &[k, x]);
        assert_eq!((ps.len(), ds), (1, vec!["dx"]));
        // no terms at all: the zero tangent
        assert_eq!(linear_combination(&[], &[]), real(0.0));
    }
}
