//! The two translations of §4 and the wrapper of §2.7 (Fig. 6) around them:
//! - `Fig3`: arrays of dual numbers (§4.1): D with IdGen and Share of Fig. 3 (the kit's monadic
//!   translation), `D[Array sh R] = Array sh D[R]`, every array operation structural (Eq. 4) except
//!   `sum`, which is `DsumOuter` (Eq. 3);
//! - `DualArrays`: dual arrays (§4.2–4.3), `D[Array sh R] = (Array sh R, Delta sh)`, with a Delta
//!   constructor per array operation of the lowered language (lower.rs): Build1 for build (the one
//!   the paper writes down for it, §4.3; its D rule is the notes' §8.17), Index, SumOuter, Replicate,
//!   LitArray.
//!
//! Decisions (the notes' open points): IDs number from 1 in generation order (`runIdGen` starts at 0,
//! `genID` increments first); every real primitive's result gets an ID (Fig. 3, "too many IDs");
//! constants are `(r, Zero)` with no ID; `Index` has no ID (a projection, like `fst` in Fig. 3), while
//! Build1, LitArray, Replicate and SumOuter do, since every `Index` of their result points at them;
//! DsumOuter adds from Zero, `Share id (Add (… (Add Zero d1) …) dn)`, which makes footnote 18's
//! "n+1 for the Adds and the outer Share"; `inner_nodes` counts every constructor but the leaves Zero
//! and Input (the 2n inputs are "administrative data", footnote 18), so t_dot makes 5n+1.

use super::delta::{delta_type, m_type};
use crate::build::*;
use crate::deriv::Partial;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::kit::monadic::{Monadic, RealRule};
use crate::kit::polytypic::{has_real, map_reals, map_shape_acc, map_shape_acc_to, map_shape_to, TypeRule};
use crate::stage::{Output, Source, View};

/// `(R, Delta)`.
fn dual_real() -> Type {
    Type::tup(vec![Type::Real, delta_type()])
}

/// Whether a value of type `t` is a dual array's primal: an array of reals, or of such arrays.
pub fn real_array(t: &Type) -> bool {
    match t.as_array() {
        Some(Type::Real) => true,
        Some(e) => real_array(e),
        None => false,
    }
}

/// Fig. 3's companion: `Add (Scale ∂1 d1) (Scale ∂2 d2)`, a partial of 1 leaving `d` unscaled (as
/// Fig. 3's `+`), Zero when there is no term.
fn companion(ds: &[Expr], partials: &[Partial]) -> Expr {
    let terms: Vec<Expr> = partials
        .iter()
        .zip(ds)
        .map(|(p, d)| match p {
            Partial::One => d.clone(),
            Partial::MinusOne => apps(builtin("Scale"), [real(-1.0), d.clone()]),
            Partial::Times(c) => apps(builtin("Scale"), [c.clone(), d.clone()]),
        })
        .collect();
    terms.into_iter().reduce(|a, b| apps(builtin("Add"), [a, b])).unwrap_or_else(|| builtin("Zero"))
}

/// `do id ← genID; pure (primal, Share id delta)`.
fn shared(fr: &mut Fresh, primal: Expr, delta: Expr) -> Expr {
    let id = fr.name("id");
    bind(pvar(&id), builtin("genID"), pure(pair(primal, apps(builtin("Share"), [var(&id), delta]))))
}

/// Fig. 3's rules for reals, shared by both translations.
fn constant(r: Expr) -> Expr {
    // D[r] = return (r, Zero): no Share around Zero
    pure(pair(r, builtin("Zero")))
}
fn op(fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial]) -> Expr {
    // D[t1 × t2] = do …; id ← genID; return (x1 × x2, Share id (Add (Scale x2 d1) (Scale x1 d2)))
    shared(fr, y, companion(ds, partials))
}

/// Arrays of dual numbers (§4.1).
pub struct Fig3;

impl RealRule for Fig3 {
    fn real_ty(&self, _: &Type) -> Type {
        dual_real()
    }
    fn constant(&self, _: &mut Fresh, r: Expr) -> Expr {
        constant(r)
    }
    fn op(&self, fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial]) -> Expr {
        op(fr, y, ds, partials)
    }
    fn takes(&self, op: Prim) -> bool {
        op == Prim::Sum
    }
    /// D[sumOuter t] = do a ← D[t]; DsumOuter a  (Eq. 3)
    fn array_op(&self, _: &mut Fresh, _: Prim, _: &[Expr], vs: Vec<Expr>, _: Span) -> Expr {
        apps(builtin("DsumOuter"), vs)
    }
}

/// Dual arrays (§4.2–4.3).
pub struct DualArrays;

/// `D[τ]` of dual arrays: reals and arrays of reals are paired with one Delta; functions return `M`.
pub fn dual_arrays_type(t: &Type) -> Type {
    match t {
        Type::Real => dual_real(),
        t if real_array(t) => Type::tup(vec![t.clone(), delta_type()]),
        Type::Tuple(ts) => Type::Tuple(ts.iter().map(dual_arrays_type).collect()),
        Type::Sum(ab) => Type::sum(dual_arrays_type(&ab.0), dual_arrays_type(&ab.1)),
        Type::Fun(ab) => Type::fun(dual_arrays_type(&ab.0), m_type(dual_arrays_type(&ab.1))),
        Type::Lin(ab) => Type::lin(dual_arrays_type(&ab.0), m_type(dual_arrays_type(&ab.1))),
        t => t.clone(),
    }
}

impl RealRule for DualArrays {
    fn real_ty(&self, _: &Type) -> Type {
        dual_real()
    }
    fn constant(&self, _: &mut Fresh, r: Expr) -> Expr {
        constant(r)
    }
    fn op(&self, fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial]) -> Expr {
        op(fr, y, ds, partials)
    }
    fn dtype(&self, t: &Type) -> Type {
        dual_arrays_type(t)
    }
    fn takes(&self, op: Prim) -> bool {
        matches!(op, Prim::Build | Prim::Index | Prim::Length | Prim::Sum | Prim::Replicate)
    }
    fn array_op(&self, fr: &mut Fresh, op: Prim, args: &[Expr], vs: Vec<Expr>, _: Span) -> Expr {
        let dual = |t: &Type| real_array(t);
        let p = |v: &Expr| fst(v.clone());
        let d = |v: &Expr| snd(v.clone());
        match op {
            // D[build1 k (λi. t)] = do rs ← sequence (build1 k (λi. D[t])); id ← genID;
            //                       return (build1 k (λi. fst (rs ! i)), Share id (Build1 (map snd rs)))  (notes §8.17)
            Prim::Build if { let e = args[1].ty.result_of(); e == Type::Real || dual(&e) } => {
                let rs = fr.name("rs");
                let (x, y) = (fr.name("r"), fr.name("r"));
                let primal = prim(Prim::Map, vec![lam(pvar(&x), fst(var(&x))), var(&rs)]);
                let deltas = prim(Prim::Map, vec![lam(pvar(&y), snd(var(&y))), var(&rs)]);
                let body = shared(fr, primal, app(builtin("Build1"), deltas));
                bind(pvar(&rs), apps(builtin("buildM"), vs), body)
            }
            Prim::Build => apps(builtin("buildM"), vs),
            // D[index t [i]] = do (x, d) ← D[t]; i ← D[i]; return (index x [i], Index d [i])  (§4.2)
            Prim::Index if dual(&args[0].ty) => pure(pair(prim(Prim::Index, vec![p(&vs[0]), vs[1].clone()]), apps(builtin("Index"), [d(&vs[0]), vs[1].clone()]))),
            Prim::Length if dual(&args[0].ty) => pure(prim(Prim::Length, vec![p(&vs[0])])),
            // D[sumOuter t] = do (x, d) ← D[t]; id ← genID; return (sumOuter x, Share id (SumOuter d))
            Prim::Sum => shared(fr, prim(Prim::Sum, vec![p(&vs[0])]), app(builtin("SumOuter"), d(&vs[0]))),
            // D[replicate k t] = do (x, d) ← D[t]; id ← genID; return (replicate k x, Share id (Replicate k d))
            Prim::Replicate if args[1].ty == Type::Real || dual(&args[1].ty) => {
                let body = apps(builtin("Replicate"), [vs[0].clone(), d(&vs[1])]);
                shared(fr, prim(Prim::Replicate, vec![vs[0].clone(), p(&vs[1])]), body)
            }
            op => pure(prim(op, vs)),
        }
    }
    /// D[[t1, …, tn]] = do …; id ← genID; return ([x1, …, xn], Share id (LitArray [d1, …, dn]))
    fn array_lit(&self, fr: &mut Fresh, ty: &Type, vs: Vec<Expr>) -> Option<Expr> {
        if !real_array(ty) {
            return None;
        }
        let primal = Expr::gen(ExprKind::Array(vs.iter().map(|v| fst(v.clone())).collect()));
        let deltas = Expr::gen(ExprKind::Array(vs.iter().map(|v| snd(v.clone())).collect()));
        Some(shared(fr, primal, app(builtin("LitArray"), deltas)))
    }
}

trait ResultOf {
    fn result_of(&self) -> Type;
}
impl ResultOf for Type {
    /// The result type of a function type (`Unknown` otherwise).
    fn result_of(&self) -> Type {
        match self {
            Type::Fun(ab) | Type::Lin(ab) => ab.1.clone(),
            _ => Type::Unknown,
        }
    }
}

/// The leaves a wrapper walker stops at: reals, and (dual arrays) arrays of reals.
fn is_leaf(t: &Type, dual_arrays: bool) -> bool {
    *t == Type::Real || (dual_arrays && real_array(t))
}

/// Code walking `x : ty` with a counter `n`, giving `(x', n')`: `leaf(x, n)` at each real (or dual
/// array) leaf, `(x, n)` at the other leaves. (Arrays in `Fig3` go through the kit's walker.)
fn walk_acc(ty: &Type, x: Expr, n: Expr, fr: &mut Fresh, dual_arrays: bool, leaf: &dyn Fn(Expr, Expr) -> Expr) -> Expr {
    if !dual_arrays {
        return map_shape_acc(ty, x, n, fr, &|t, x, n| if *t == Type::Real { leaf(x, n) } else { pair(x, n) });
    }
    // a dual array is a leaf; other arrays are left as they are
    let stop = |t: &Type| is_leaf(t, true) || t.as_array().is_some();
    map_shape_acc_to(ty, x, n, fr, &stop, &|t, x, n| if is_leaf(t, true) { leaf(x, n) } else { pair(x, n) })
}

/// Code taking the primal out of `y : D[ty]`: `fst` at each dual leaf; parts without reals as they are.
fn primal(ty: &Type, y: Expr, fr: &mut Fresh, dual_arrays: bool) -> Expr {
    let stop = |t: &Type| is_leaf(t, dual_arrays) || !has_real(t);
    map_shape_to(ty, y, fr, &stop, &|t, x, _| if is_leaf(t, dual_arrays) { fst(x) } else { x })
}

/// Code evaluating the output's Deltas with their cotangents, `es` threaded: the wrapper's
/// `eval c d` for every real (or dual-array) leaf of `y : D[ty]` with `c : ty` (Fig. 6's one output
/// generalised to any output type, leaf by leaf, left to right).
fn seeds(ty: &Type, y: Expr, c: Expr, es: Expr, fr: &mut Fresh, dual_arrays: bool) -> Expr {
    match ty {
        t if is_leaf(t, dual_arrays) => apps(builtin("eval"), [c, snd(y), es]),
        t if !has_real(t) => es,
        Type::Tuple(ts) => {
            let ys: Vec<Name> = ts.iter().map(|_| fr.name("y")).collect();
            let cs: Vec<Name> = ts.iter().map(|_| fr.name("c")).collect();
            let mut acc = es;
            for (t, (yn, cn)) in ts.iter().zip(ys.iter().zip(&cs)) {
                acc = seeds(t, var(yn), var(cn), acc, fr, dual_arrays);
            }
            let_(ptuple(ys.iter().map(pvar).collect()), y, let_(ptuple(cs.iter().map(pvar).collect()), c, acc))
        }
        Type::Sum(ab) => {
            let (a, b) = &**ab;
            // a tag that differs from the primal's contributes nothing
            let (ya, yb, ca, cb, s) = (fr.name("y"), fr.name("y"), fr.name("c"), fr.name("c"), fr.name("s"));
            let left = case(c.clone(), pvar(&ca), seeds(a, var(&ya), var(&ca), var(&s), fr, dual_arrays), pwild(), var(&s));
            let right = case(c, pwild(), var(&s), pvar(&cb), seeds(b, var(&yb), var(&cb), var(&s), fr, dual_arrays));
            let_(pvar(&s), es, case(y, pvar(&ya), left, pvar(&yb), right))
        }
        t if t.as_array().is_some() => {
            let elem = t.as_array().expect("checked");
            // fold (λs i. seeds (y ! i) (c ! i) s) es (indices of y)
            let (ys, cs, s, i, k) = (fr.name("ys"), fr.name("cs"), fr.name("s"), fr.name("i"), fr.name("k"));
            let step = lam(pvar(&s), lam(pvar(&i), seeds(elem, prim(Prim::Index, vec![var(&ys), var(&i)]), prim(Prim::Index, vec![var(&cs), var(&i)]), var(&s), fr, dual_arrays)));
            let ix = prim(Prim::Build, vec![prim(Prim::Length, vec![var(&ys)]), lam(pvar(&k), var(&k))]);
            let_(pvar(&ys), y, let_(pvar(&cs), c, prim(Prim::Fold, vec![step, es, ix])))
        }
        _ => es,
    }
}

/// Fig. 6's wrapper, with the primal handed back and any output type:
/// `grad (x, c) = let (x', _) = named x 0 in let y = runIdGen (main x') in
///                let g = backprop (eval c (snd y) emptyES) in (primal y, reconstruct x g)`.
fn wrapper(src: &Source, out: &Program, fr: &mut Fresh, dual_arrays: bool) -> Expr {
    let (s, t) = (src.input_type, src.output_type);
    let (x, c, x2, y, g, f) = (fr.name("x"), fr.name("c"), fr.name("x'"), fr.name("y"), fr.name("g"), fr.name("f"));
    // named: reals become (r, Input n), dual arrays (a, InputA n a), numbered left to right from 0
    let named = walk_acc(s, var(&x), int(0), fr, dual_arrays, &|x, n| {
        let d = if dual_arrays { apps(builtin("InputA"), [n.clone(), x.clone()]) } else { app(builtin("Input"), n.clone()) };
        pair(pair(x, d), add(n, int(1)))
    });
    let is_lam = out.def("main").is_some_and(|d| matches!(crate::kit::monadic::strip_ann(&d.body).kind, ExprKind::Lam(..)));
    let run = if is_lam { app(global("main"), var(&x2)) } else { bind(pvar(&f), global("main"), app(var(&f), var(&x2))) };
    let es = seeds(t, var(&y), var(&c), builtin("emptyES"), fr, dual_arrays);
    let recon = walk_acc(s, var(&x), int(0), fr, dual_arrays, &|x, n| pair(apps(builtin("gradOf"), [n.clone(), x, var(&g)]), add(n, int(1))));
    let result = pair(primal(t, var(&y), fr, dual_arrays), fst(recon));
    lam(
        ppair(pvar(&x), pvar(&c)),
        let_(
            ppair(pvar(&x2), pwild()),
            named,
            let_(pvar(&y), app(builtin("runIdGen"), run), let_(pvar(&g), app(builtin("backprop"), es), result)),
        ),
    )
}

/// The stage's output: `program` translated by `rule`, with the wrapper `grad`.
pub fn output(src: &Source, program: &Program, rule: &dyn RealRule, dual_arrays: bool, views: Vec<View>) -> Result<Output, Diagnostic> {
    let mut mo = Monadic::new(program, rule);
    let mut out = mo.program(program);
    let mut fr = mo.fr;
    let w = wrapper(src, &out, &mut fr, dual_arrays);
    out.defs.push(def(crate::stage::WRAPPER, w));
    out.next_id = fr.next_id;
    Ok(Output { program: out, builtins: vec![], views, steps: vec![] })
}

/// The stated types: `main : D[S] → M D[T]` and the wrapper's.
pub fn stated_types(src: &Source, dual_arrays: bool) -> Vec<(String, Type)> {
    let f = Type::fun(src.input_type.clone(), src.output_type.clone());
    let d = if dual_arrays { dual_arrays_type(&f) } else { map_reals(&f, &TypeRule { real: &dual_real, result: &m_type }) };
    let is_lam = src.program.def("main").is_some_and(|d| matches!(crate::kit::monadic::strip_ann(&d.body).kind, ExprKind::Lam(..)));
    vec![("main".into(), if is_lam { d } else { m_type(d) }), crate::stage::wrapper_type(src)]
}
