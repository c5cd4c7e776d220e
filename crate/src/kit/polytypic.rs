//! Walkers over the shape of a type: one type translation that says what a real (and a function's
//! result) becomes, and generators of code that follow a first-order value's shape (destructure
//! tuples and sums, act at the leaves, rebuild). Every stage's `D[τ]` and every wrapper helper
//! (`zip_S`, `dot_T`, `interleave`, `initVars_S`, ...) is one of these with its own leaf; adding a type
//! constructor (arrays) means adding its case here.

use crate::build::*;
use crate::ir::{Expr, Name, Pat, Type};

/// What the type translation does at the two places the papers' `D[τ]` differ.
pub struct TypeRule<'a> {
    /// `D[R]`: `(R, R)` in forward mode, `(R, Delta)` in Krawiec, `(R, Z)` on a tape, ...
    pub real: &'a dyn Fn() -> Type,
    /// `D[τ → σ] = D[τ] → result(D[σ])`: `M D[σ]` in monadic translations, `D[σ]` otherwise.
    pub result: &'a dyn Fn(Type) -> Type,
}

/// `D[τ]`: the homomorphic type translation that changes reals (and functions' results) only.
/// Linear arrows stay linear; named constructors translate their arguments.
pub fn map_reals(t: &Type, rule: &TypeRule) -> Type {
    let go = |t: &Type| map_reals(t, rule);
    match t {
        Type::Real => (rule.real)(),
        Type::Tuple(ts) => Type::Tuple(ts.iter().map(go).collect()),
        Type::Sum(a, b) => Type::sum(go(a), go(b)),
        Type::Fun(a, b) => Type::fun(go(a), (rule.result)(go(b))),
        Type::Lin(a, b) => Type::lin(go(a), (rule.result)(go(b))),
        Type::Con(n, ts) => Type::Con(n.clone(), ts.iter().map(go).collect()),
        t => t.clone(),
    }
}

/// `D[τ]` with `D[R] = real` and functions' results unchanged.
pub fn with_real(t: &Type, real: &Type) -> Type {
    map_reals(t, &TypeRule { real: &|| real.clone(), result: &|t| t })
}

/// The number of real leaves of a first-order type (both sides of a sum).
pub fn count_reals(t: &Type) -> usize {
    match t {
        Type::Real => 1,
        Type::Tuple(ts) => ts.iter().map(count_reals).sum(),
        Type::Sum(a, b) => count_reals(a) + count_reals(b),
        _ => 0,
    }
}

/// Whether a first-order type has a real leaf anywhere.
pub fn has_real(t: &Type) -> bool {
    count_reals(t) > 0
}

/// `R^a`: a real, or a (nested) tuple of them.
pub fn is_real_tuple(t: &Type) -> bool {
    match t {
        Type::Real => true,
        Type::Tuple(ts) => ts.iter().all(is_real_tuple),
        _ => false,
    }
}

/// Code that destructures `x : ty` (tuples and sums), applies `leaf` at each leaf (reals, integers,
/// booleans, units, named types) and rebuilds the same shape.
pub fn map_shape(ty: &Type, x: Expr, fr: &mut Fresh, leaf: &dyn Fn(&Type, Expr, &mut Fresh) -> Expr) -> Expr {
    match ty {
        Type::Tuple(ts) => {
            let ns: Vec<Name> = ts.iter().map(|_| fr.name("v")).collect();
            let parts = ts.iter().zip(&ns).map(|(t, n)| map_shape(t, var(n), fr, leaf)).collect();
            let_(ptuple(ns.iter().map(pvar).collect()), x, tuple(parts))
        }
        Type::Sum(a, b) => {
            let (na, nb) = (fr.name("l"), fr.name("r"));
            let ea = inl(map_shape(a, var(&na), fr, leaf));
            let eb = inr(map_shape(b, var(&nb), fr, leaf));
            case(x, pvar(&na), ea, pvar(&nb), eb)
        }
        t => leaf(t, x, fr),
    }
}

/// `a ⊙_T b` (Krawiec et al. §11.2) as source code: × on reals, + over components, 0 at integer
/// leaves and where sum tags differ (the paper leaves mismatched tags undefined; ours contributes
/// nothing).
pub fn dot(ty: &Type, a: Expr, b: Expr, fr: &mut Fresh) -> Expr {
    match ty {
        Type::Real => mul(a, b),
        Type::Tuple(ts) => {
            let na: Vec<Name> = ts.iter().map(|_| fr.name("a")).collect();
            let nb: Vec<Name> = ts.iter().map(|_| fr.name("b")).collect();
            let terms: Vec<Expr> =
                ts.iter().zip(na.iter().zip(&nb)).filter(|(t, _)| has_real(t)).map(|(t, (x, y))| dot(t, var(x), var(y), fr)).collect();
            let sum = terms.into_iter().reduce(add).unwrap_or_else(|| real(0.0));
            let_(ptuple(na.iter().map(pvar).collect()), a, let_(ptuple(nb.iter().map(pvar).collect()), b, sum))
        }
        Type::Sum(l, r) => {
            let (xa, xb, ya, yb) = (fr.name("a"), fr.name("a"), fr.name("b"), fr.name("b"));
            let left = case(b.clone(), pvar(&ya), dot(l, var(&xa), var(&ya), fr), pwild(), real(0.0));
            let right = case(b, pwild(), real(0.0), pvar(&yb), dot(r, var(&xb), var(&yb), fr));
            case(a, pvar(&xa), left, pvar(&xb), right)
        }
        _ => real(0.0),
    }
}

/// The pattern `((s1, s2), s3)` of an `R^a` type, naming its reals left to right.
pub fn ra_pat(t: &Type, names: &mut impl Iterator<Item = Name>) -> Pat {
    match t {
        Type::Tuple(ts) => ptuple(ts.iter().map(|t| ra_pat(t, names)).collect()),
        _ => pvar(&names.next().expect("one name per real")),
    }
}

/// An expression in the shape of an `R^a` type, with `leaf(i)` (1-based, left to right) at each real.
pub fn ra_expr(t: &Type, i: &mut i64, leaf: &mut dyn FnMut(i64) -> Expr) -> Expr {
    match t {
        Type::Tuple(ts) => tuple(ts.iter().map(|t| ra_expr(t, i, leaf)).collect()),
        _ => {
            *i += 1;
            leaf(*i)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_translation_changes_reals_and_results_only() {
        let t = Type::fun(Type::Tuple(vec![Type::Real, Type::Int]), Type::sum(Type::Real, Type::Bool));
        let m = |t: Type| Type::con("M", vec![t]);
        let d = map_reals(&t, &TypeRule { real: &|| Type::con("Delta", vec![]), result: &m });
        let delta = Type::con("Delta", vec![]);
        assert_eq!(d, Type::fun(Type::Tuple(vec![delta.clone(), Type::Int]), m(Type::sum(delta, Type::Bool))));
        assert_eq!(count_reals(&t), 0, "a function type has no real leaves");
        assert_eq!(count_reals(&Type::Tuple(vec![Type::Real, Type::sum(Type::Real, Type::Real), Type::Int])), 3);
        assert!(is_real_tuple(&Type::Tuple(vec![Type::Real, Type::Tuple(vec![Type::Real, Type::Real])])));
        assert!(!is_real_tuple(&Type::Tuple(vec![Type::Real, Type::Int])));
    }
}
