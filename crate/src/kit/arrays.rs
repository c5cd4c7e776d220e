//! Arrays in the dual-number translations: the array paper's §4.1 ("arrays of dual numbers"). An
//! array of reals becomes an array of the stage's dual numbers, and every array operation is
//! translated structurally (its functional arguments translated like any function), so each scalar
//! operation inside a `map` or `fold` builds its own Delta node or backpropagator. Two things need
//! help, and live here:
//! - `sum a` is not structural (it adds reals): it is translated as `fold (\acc x -> acc + x) 0.0 a`.
//! - In a monadic translation a function `a -> b` becomes `D[a] -> M D[b]`, so `map` needs its
//!   monadic form `mapM : (a -> M b) -> Array a -> M (Array b)`, and likewise for the other
//!   operations that take functions. The machine runs `M` in direct style (ir.rs, `Bind`), so each
//!   monadic form runs exactly as its plain operation does.

use crate::build::*;
use crate::interp::{arrays, Builtin, BuiltinFn};
use crate::ir::*;

/// `sum a` as `fold (\acc x -> acc + x) 0.0 a`, typed, so that a translation can take it apart.
/// The fold and its `+` carry `span`, the `sum` call's: the additions it makes (Delta nodes,
/// backpropagators) are then located at the `sum`, as the page's DAG groups them.
pub fn sum_as_fold(a: &Expr, span: crate::diag::Span, fr: &mut Fresh) -> Expr {
    let f = real_plus(["acc", "x"], span, fr);
    at(prim(Prim::Fold, vec![f, real(0.0).with_ty(Type::Real), a.clone()]).with_ty(Type::Real), span)
}

/// `\a b -> a + b` on reals, typed, its `+` at `span` (the `+` that `sum` is a fold or reduce of).
pub fn real_plus(names: [&str; 2], span: crate::diag::Span, fr: &mut Fresh) -> Expr {
    let (a, b) = (fr.name(names[0]), fr.name(names[1]));
    let r = |e: Expr| e.with_ty(Type::Real);
    let plus = at(r(prim(Prim::Add, vec![r(var(&a)), r(var(&b))])), span);
    let inner = lam(pvar(&b), plus).with_ty(Type::fun(Type::Real, Type::Real));
    lam(pvar(&a), inner).with_ty(Type::fun(Type::Real, Type::fun(Type::Real, Type::Real)))
}

/// The monadic form of an array operation that takes a function, by name.
pub fn monadic(op: Prim) -> Option<&'static str> {
    Some(match op {
        Prim::Build => "buildM",
        Prim::Map => "mapM",
        Prim::Map2 => "map2M",
        Prim::Fold | Prim::Reduce => "foldM",
        Prim::Scanl => "scanlM",
        Prim::Scanr => "scanrM",
        _ => return None,
    })
}

fn m(t: Type) -> Type {
    Type::con("M", vec![t])
}
fn f(a: Type, b: Type) -> Type {
    Type::fun(a, b)
}
fn arr(t: Type) -> Type {
    Type::array(t)
}

/// `D[a → b → c]` in a monadic translation: `a → M (b → M c)`.
fn curried(a: &Type, b: &Type, c: &Type) -> Type {
    f(a.clone(), m(f(b.clone(), m(c.clone()))))
}

/// The monadic forms as builtins (for the chains whose translation is monadic).
pub fn monadic_builtins() -> Vec<Builtin> {
    let (a, b, c) = (Type::Var(1), Type::Var(2), Type::Var(3));
    let one = |name: &'static str, vars: &[u32], ty: Type, arity: usize, run: BuiltinFn| Builtin {
        name,
        scheme: Scheme { vars: vars.to_vec(), ty },
        arity,
        lazy_last: false,
        run,
    };
    vec![
        // buildM : Z -> (Z -> M a) -> M (Array a)
        one("buildM", &[1], f(Type::Int, f(f(Type::Int, m(a.clone())), m(arr(a.clone())))), 2, arrays::build),
        // mapM : (a -> M b) -> Array a -> M (Array b)
        one("mapM", &[1, 2], f(f(a.clone(), m(b.clone())), f(arr(a.clone()), m(arr(b.clone())))), 2, arrays::map),
        // map2M : (a -> M (b -> M c)) -> Array a -> Array b -> M (Array c)
        // (a curried function's translation returns its inner function in M)
        one("map2M", &[1, 2, 3], f(curried(&a, &b, &c), f(arr(a.clone()), f(arr(b.clone()), m(arr(c.clone()))))), 3, arrays::map2),
        // foldM : (b -> M (a -> M b)) -> b -> Array a -> M b
        one("foldM", &[1, 2], f(curried(&b, &a, &b), f(b.clone(), f(arr(a.clone()), m(b.clone())))), 3, arrays::fold),
        // scanlM : (b -> M (a -> M b)) -> b -> Array a -> M (Array b)
        one("scanlM", &[1, 2], f(curried(&b, &a, &b), f(b.clone(), f(arr(a.clone()), m(arr(b.clone()))))), 3, arrays::scanl),
        // scanrM : (a -> M (b -> M b)) -> b -> Array a -> M (Array b)
        one("scanrM", &[1, 2], f(curried(&a, &b, &b), f(b.clone(), f(arr(a), m(arr(b))))), 3, arrays::scanr),
    ]
}
