//! Walkers over the shape of a type: one type translation that says what a real (and a function's
//! result) becomes, and generators of code that follow a first-order value's shape (destructure
//! tuples and sums, act at the leaves, rebuild). Every stage's `D[τ]` and every wrapper helper
//! (`zip_S`, `dot_T`, `interleave`, `initVars_S`, ...) is one of these with its own leaf; adding a type
//! constructor (arrays) means adding its case here.

use crate::build::*;
use crate::ir::{Expr, Name, Pat, Prim, Type};

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
        Type::Sum(ab) => Type::sum(go(&ab.0), go(&ab.1)),
        Type::Fun(ab) => Type::fun(go(&ab.0), (rule.result)(go(&ab.1))),
        Type::Lin(ab) => Type::lin(go(&ab.0), (rule.result)(go(&ab.1))),
        Type::Con(c) => Type::Con(std::rc::Rc::new(crate::ir::TyCon { name: c.name.clone(), args: c.args.iter().map(go).collect() })),
        t => t.clone(),
    }
}

/// `D[τ]` with `D[R] = real` and functions' results unchanged.
pub fn with_real(t: &Type, real: &Type) -> Type {
    map_reals(t, &TypeRule { real: &|| real.clone(), result: &|t| t })
}

/// Code that walks `x : ty` left to right threading an accumulator `n` (an expression): `leaf(t, x, n)`
/// gives the pair `(x', n')` at each leaf, and tuples and sums are rebuilt around the `x'`s; the whole
/// gives `(x', n_last)`. Fig. 15's `initVars_S`, which numbers the reals of the input, is one.
pub fn map_shape_acc(ty: &Type, x: Expr, n: Expr, fr: &mut Fresh, leaf: &dyn Fn(&Type, Expr, Expr) -> Expr) -> Expr {
    map_shape_acc_to(ty, x, n, fr, &|_| false, leaf)
}

/// `map_shape_acc` that also treats as a leaf every type where `stop` holds (not walked into).
pub fn map_shape_acc_to(ty: &Type, x: Expr, n: Expr, fr: &mut Fresh, stop: &dyn Fn(&Type) -> bool, leaf: &dyn Fn(&Type, Expr, Expr) -> Expr) -> Expr {
    match ty {
        t if stop(t) => leaf(t, x, n),
        // ((a, b), n) = let (a', n1) = go_A (a, n) in let (b', n2) = go_B (b, n1) in ((a', b'), n2)
        Type::Tuple(ts) if !ts.is_empty() => {
            let xs: Vec<Name> = ts.iter().map(|_| fr.name("x")).collect();
            let ys: Vec<Name> = ts.iter().map(|_| fr.name("y")).collect();
            let ns: Vec<Name> = ts.iter().map(|_| fr.name("n")).collect();
            let mut body = pair(tuple(ys.iter().map(var).collect()), var(&ns[ns.len() - 1]));
            for i in (0..ts.len()).rev() {
                let prev = if i == 0 { n.clone() } else { var(&ns[i - 1]) };
                body = let_(ppair(pvar(&ys[i]), pvar(&ns[i])), map_shape_acc_to(&ts[i], var(&xs[i]), prev, fr, stop, leaf), body);
            }
            let_(ptuple(xs.iter().map(pvar).collect()), x, body)
        }
        // (inl a, n) = let (a', n1) = go_A (a, n) in (inl a', n1), and likewise inr
        Type::Sum(ab) => {
            let (a, b) = &**ab;
            let (xa, xb, ya, yb, na, nb) = (fr.name("x"), fr.name("x"), fr.name("y"), fr.name("y"), fr.name("n"), fr.name("n"));
            let left = let_(ppair(pvar(&ya), pvar(&na)), map_shape_acc_to(a, var(&xa), n.clone(), fr, stop, leaf), pair(inl(var(&ya)), var(&na)));
            let right = let_(ppair(pvar(&yb), pvar(&nb)), map_shape_acc_to(b, var(&xb), n, fr, stop, leaf), pair(inr(var(&yb)), var(&nb)));
            case(x, pvar(&xa), left, pvar(&xb), right)
        }
        // arrays thread n through their elements: the accumulators before each element are a scanl,
        // then each element is walked from its own:
        // let ns = scanl (λn v. snd (go (v, n))) n xs in (build (length xs) (λi. fst (go (xs ! i, ns ! i))), ns ! length xs)
        t if t.as_array().is_some() => {
            let elem = t.as_array().expect("checked");
            let (xs, ns, go, v, m, i) = (fr.name("xs"), fr.name("ns"), fr.name("go"), fr.name("v"), fr.name("n"), fr.name("i"));
            let walk = lam(ppair(pvar(&v), pvar(&m)), map_shape_acc_to(elem, var(&v), var(&m), fr, stop, leaf));
            let (v2, m2) = (fr.name("v"), fr.name("n"));
            let step = lam(pvar(&m2), lam(pvar(&v2), snd(app(var(&go), pair(var(&v2), var(&m2))))));
            let len = prim(Prim::Length, vec![var(&xs)]);
            let at_i = |a: &Name| prim(Prim::Index, vec![var(a), var(&i)]);
            let each = lam(pvar(&i), fst(app(var(&go), pair(at_i(&xs), at_i(&ns)))));
            let body = pair(prim(Prim::Build, vec![len.clone(), each]), prim(Prim::Index, vec![var(&ns), len]));
            let_(
                pvar(&xs),
                x,
                let_(pvar(&go), walk, let_(pvar(&ns), prim(Prim::Scanl, vec![step, n, var(&xs)]), body)),
            )
        }
        t => leaf(t, x, n),
    }
}

/// How `zip_shape` walks two values of one first-order type in step.
pub struct Zip<'a> {
    /// The prefixes of the names given to the two values' components.
    pub names: [&'a str; 2],
    /// Which components of a tuple are walked; the others are dropped.
    pub keep: &'a dyn Fn(&Type) -> bool,
    /// At a leaf (reals, integers, booleans, units, named types), from its two values.
    pub leaf: &'a dyn Fn(&Type, Expr, Expr) -> Expr,
    /// A tuple's result from its kept components' results.
    pub tuple: &'a dyn Fn(Vec<Expr>) -> Expr,
    /// A sum's result from its side's result (`right` false: inl).
    pub inject: &'a dyn Fn(bool, Expr) -> Expr,
    /// Where the two values' tags differ, from the first value at its side's type.
    pub mismatch: &'a dyn Fn(&Type, Expr, &mut Fresh) -> Expr,
    /// An array's result from the array of its elements' results (`map2` over the two arrays).
    pub array: &'a dyn Fn(Expr) -> Expr,
}

/// Code that destructures `a : ty` and `b : ty` together and combines them leaf by leaf:
/// Fig. 15's `zip_S (s, ds)` and §11.2's dot product `a ⊙_T b` are two of these.
pub fn zip_shape(ty: &Type, a: Expr, b: Expr, fr: &mut Fresh, z: &Zip) -> Expr {
    let [ma, mb] = z.names;
    match ty {
        Type::Tuple(ts) => {
            let na: Vec<Name> = ts.iter().map(|_| fr.name(ma)).collect();
            let nb: Vec<Name> = ts.iter().map(|_| fr.name(mb)).collect();
            let parts: Vec<Expr> =
                ts.iter().zip(na.iter().zip(&nb)).filter(|(t, _)| (z.keep)(t)).map(|(t, (x, y))| zip_shape(t, var(x), var(y), fr, z)).collect();
            let_(ptuple(na.iter().map(pvar).collect()), a, let_(ptuple(nb.iter().map(pvar).collect()), b, (z.tuple)(parts)))
        }
        Type::Sum(lr) => {
            let (l, r) = &**lr;
            let (xa, xb, ya, yb) = (fr.name(ma), fr.name(ma), fr.name(mb), fr.name(mb));
            let both = (z.inject)(false, zip_shape(l, var(&xa), var(&ya), fr, z));
            let left = case(b.clone(), pvar(&ya), both, pwild(), (z.inject)(false, (z.mismatch)(l, var(&xa), fr)));
            let differ = (z.inject)(true, (z.mismatch)(r, var(&xb), fr));
            let right = case(b, pwild(), differ, pvar(&yb), (z.inject)(true, zip_shape(r, var(&xb), var(&yb), fr, z)));
            case(a, pvar(&xa), left, pvar(&xb), right)
        }
        // map2 (λa b. zip_elem (a, b)) a b, then the array's combination (`sum` for a dot product)
        t if t.as_array().is_some() => {
            let elem = t.as_array().expect("checked");
            let (x, y) = (fr.name(ma), fr.name(mb));
            let each = lam(pvar(&x), lam(pvar(&y), zip_shape(elem, var(&x), var(&y), fr, z)));
            (z.array)(prim(Prim::Map2, vec![each, a, b]))
        }
        t => (z.leaf)(t, a, b),
    }
}

/// The number of real leaves of a first-order type (both sides of a sum); an array's elements,
/// whose number is known only at run time, are not counted (the `R^a` stages refuse arrays).
pub fn count_reals(t: &Type) -> usize {
    match t {
        Type::Real => 1,
        Type::Tuple(ts) => ts.iter().map(count_reals).sum(),
        Type::Sum(ab) => count_reals(&ab.0) + count_reals(&ab.1),
        _ => 0,
    }
}

/// Whether a first-order type has a real leaf anywhere (also inside arrays). Transforms ask it of
/// every part at every level of a type (`dot`'s `zip_shape`, a `map_shape_to`'s `stop`, the dualrev
/// wrapper's parts), which on a tuple nested n deep walked n²/2 parts (issue 14): each compound
/// part's answer is remembered by its allocation, in a per-thread table that holds the part (so
/// the address names it while it is a key) and is emptied at 4,096 entries.
pub fn has_real(t: &Type) -> bool {
    thread_local! {
        static SEEN: std::cell::RefCell<rustc_hash::FxHashMap<usize, (Type, bool)>> = Default::default();
    }
    let at = match t {
        Type::Real => return true,
        Type::Tuple(ts) => ts.as_ptr() as usize,
        Type::Sum(ab) => std::rc::Rc::as_ptr(ab) as usize,
        Type::Con(c) => std::rc::Rc::as_ptr(c) as usize,
        _ => return false,
    };
    if let Some(r) = SEEN.with(|seen| seen.borrow().get(&at).map(|e| e.1)) {
        return r;
    }
    let r = match t {
        Type::Tuple(ts) => ts.iter().any(has_real),
        Type::Sum(ab) => has_real(&ab.0) || has_real(&ab.1),
        t => t.as_array().is_some_and(has_real),
    };
    SEEN.with(|seen| {
        let mut seen = seen.borrow_mut();
        if seen.len() >= 4096 {
            seen.clear();
        }
        seen.insert(at, (t.clone(), r));
    });
    r
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
    map_shape_to(ty, x, fr, &|_| false, leaf)
}

/// `map_shape` that also treats as a leaf every type where `stop` holds (not destructured).
pub fn map_shape_to(ty: &Type, x: Expr, fr: &mut Fresh, stop: &dyn Fn(&Type) -> bool, leaf: &dyn Fn(&Type, Expr, &mut Fresh) -> Expr) -> Expr {
    match ty {
        t if stop(t) => leaf(t, x, fr),
        Type::Tuple(ts) => {
            let ns: Vec<Name> = ts.iter().map(|_| fr.name("v")).collect();
            let parts = ts.iter().zip(&ns).map(|(t, n)| map_shape_to(t, var(n), fr, stop, leaf)).collect();
            let_(ptuple(ns.iter().map(pvar).collect()), x, tuple(parts))
        }
        Type::Sum(ab) => {
            let (a, b) = &**ab;
            let (na, nb) = (fr.name("l"), fr.name("r"));
            let ea = inl(map_shape_to(a, var(&na), fr, stop, leaf));
            let eb = inr(map_shape_to(b, var(&nb), fr, stop, leaf));
            case(x, pvar(&na), ea, pvar(&nb), eb)
        }
        // map (λv. go v) x
        t if t.as_array().is_some() => {
            let elem = t.as_array().expect("checked");
            let v = fr.name("v");
            let each = lam(pvar(&v), map_shape_to(elem, var(&v), fr, stop, leaf));
            prim(Prim::Map, vec![each, x])
        }
        t => leaf(t, x, fr),
    }
}

/// `a ⊙_T b` (Krawiec et al. §11.2) as source code: × on reals, + over components, 0 at integer
/// leaves and where sum tags differ (the paper leaves mismatched tags undefined; ours contributes
/// nothing).
pub fn dot(ty: &Type, a: Expr, b: Expr, fr: &mut Fresh) -> Expr {
    let z = Zip {
        names: ["a", "b"],
        keep: &has_real,
        leaf: &|t, a, b| if *t == Type::Real { mul(a, b) } else { real(0.0) },
        tuple: &|terms| terms.into_iter().reduce(add).unwrap_or_else(|| real(0.0)),
        inject: &|_, e| e,
        mismatch: &|_, _, _| real(0.0),
        array: &|elems| prim(Prim::Sum, vec![elems]),
    };
    zip_shape(ty, a, b, fr, &z)
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
        let t = Type::fun(Type::tup(vec![Type::Real, Type::Int]), Type::sum(Type::Real, Type::Bool));
        let m = |t: Type| Type::con("M", vec![t]);
        let d = map_reals(&t, &TypeRule { real: &|| Type::con("Delta", vec![]), result: &m });
        let delta = Type::con("Delta", vec![]);
        assert_eq!(d, Type::fun(Type::tup(vec![delta.clone(), Type::Int]), m(Type::sum(delta, Type::Bool))));
        assert_eq!(count_reals(&t), 0, "a function type has no real leaves");
        assert_eq!(count_reals(&Type::tup(vec![Type::Real, Type::sum(Type::Real, Type::Real), Type::Int])), 3);
        assert!(is_real_tuple(&Type::tup(vec![Type::Real, Type::tup(vec![Type::Real, Type::Real])])));
        assert!(!is_real_tuple(&Type::tup(vec![Type::Real, Type::Int])));
    }
}
