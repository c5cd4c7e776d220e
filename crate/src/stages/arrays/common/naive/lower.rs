//! The lowering from the surface arrays to the operations §4 differentiates: `build` (the paper's
//! build1), `!` (index), `length`, `sum` (sumOuter, over reals), `replicate` and array literals, with
//! `fold` only over an array of indices (integers, which are never differentiated). Every other array
//! operation is expressed through these, as the paper's §3.3 defines `map`:
//! - `map f a`        ⇒ `let xs = a in build (length xs) (\i -> f (xs ! i))`
//! - `map2 f a b`     ⇒ `let xs = a in let ys = b in build (length xs) (\i -> f (xs ! i) (ys ! i))`
//! - `fold f z a`, `reduce f z a` ⇒ `let xs = a in fold (\acc i -> f acc (xs ! i)) z (build (length xs) (\i -> i))`
//! - `scanl f z a`    ⇒ element k is the fold of the first k elements (O(n²), documented: the naive
//!   stages have no scan of their own)
//! - `scanr f z a`    ⇒ element k is the right fold of the elements from k on (likewise)
//! - `shift1L a`, `shift1R a` ⇒ a `build` of length n − 1 reading `xs ! (i + 1)`, `xs ! i`.
//! (`map2` of arrays whose lengths differ is the one difference: the source stops with an error, the
//! lowering reads as many elements as the first array has.) The result is re-typed at main's type
//! and monomorphised.

use crate::build::*;
use crate::diag::Diagnostic;
use crate::ir::*;
use crate::stage::Source;

/// The source with its array operations lowered, typed.
pub fn lower(src: &Source) -> Result<Program, Diagnostic> {
    let mut p = src.program.clone();
    let mut fr = Fresh::new(&p);
    for d in &mut p.defs {
        let body = std::mem::replace(&mut d.body, Expr::gen(ExprKind::Unit));
        d.body = go(body, &mut fr);
        d.scheme = None;
    }
    p.next_id = fr.next_id;
    let main_ty = Type::fun(src.input_type.clone(), src.output_type.clone());
    crate::types::check_program_fitted(&mut p, &main_ty)
        .map_err(|d| Diagnostic::error(d.span, format!("internal error: the lowered program does not type-check: {}", d.message)))?;
    // D[Array a] depends on a (a dual array when a holds reals), so the translation needs every
    // definition at one type: polymorphic ones are copied per type (kit's monomorphise)
    crate::kit::passes::monomorphise::monomorphise(&p)
        .map_err(|d| Diagnostic::error(d.span, format!("dual arrays need every function at one type (D[Array a] depends on a): {}", d.message)).refused())
}

fn idx(a: &Name, i: Expr) -> Expr {
    prim(Prim::Index, vec![var(a), i])
}
fn len(a: &Name) -> Expr {
    prim(Prim::Length, vec![var(a)])
}
/// `build n (\i -> i)`: the indices 0..n-1.
fn iota(n: Expr, fr: &mut Fresh) -> Expr {
    let i = fr.name("i");
    prim(Prim::Build, vec![n, lam(pvar(&i), var(&i))])
}
fn lam2(a: &Name, b: &Name, body: Expr) -> Expr {
    lam(pvar(a), lam(pvar(b), body))
}

/// Lowers `e` in place (recursing in the nesting depth the parser bounds, as every syntax pass, and
/// along a chain of lets iteratively: a long straight-line program is one deep chain).
fn go(mut e: Expr, fr: &mut Fresh) -> Expr {
    if matches!(e.kind, ExprKind::Let(..)) {
        let mut spine: Vec<Expr> = vec![];
        while let ExprKind::Let(rhs_body_x) = &mut e.kind {
            let (_, rhs_body) = &mut **rhs_body_x;
            let (rhs, body) = rhs_body;
            let r = std::mem::replace(rhs, Expr::gen(ExprKind::Unit));
            *rhs = go(r, fr);
            let next = std::mem::replace(body, Expr::gen(ExprKind::Unit));
            e.ty = Type::Unknown;
            spine.push(e);
            e = next;
        }
        let mut acc = go(e, fr);
        while let Some(mut link) = spine.pop() {
            if let ExprKind::Let(body_pair_x) = &mut link.kind {
                let (_, body_pair) = &mut **body_pair_x;
                body_pair.1 = acc;
            }
            acc = link;
        }
        return acc;
    }
    let mut out = e;
    out.ty = Type::Unknown;
    each_child_mut(&mut out, &mut |c| {
        let child = std::mem::replace(c, Expr::gen(ExprKind::Unit));
        *c = go(child, fr);
    });
    let ExprKind::Prim(op, args) = &mut out.kind else { return out };
    let op = *op;
    if !matches!(op, Prim::Map | Prim::Map2 | Prim::Fold | Prim::Reduce | Prim::Scanl | Prim::Scanr | Prim::Shift1L | Prim::Shift1R) {
        return out;
    }
    // the arguments are moved into the lowering (cloning them at every primitive copied a nesting
    // n deep Θ(n²) times: `sin (sin (…))` 10,000 deep took 4.8 s here, issue 14)
    let mut args = std::mem::take(args);
    let mut arg = |i: usize| std::mem::replace(&mut args[i], Expr::gen(ExprKind::Unit));
    let span = out.span;
    let lowered = match op {
        Prim::Map => {
            let (f, xs, i) = (fr.name("f"), fr.name("xs"), fr.name("i"));
            let body = app(var(&f), idx(&xs, var(&i)));
            let_(pvar(&f), arg(0), let_(pvar(&xs), arg(1), prim(Prim::Build, vec![len(&xs), lam(pvar(&i), body)])))
        }
        Prim::Map2 => {
            let (f, xs, ys, i) = (fr.name("f"), fr.name("xs"), fr.name("ys"), fr.name("i"));
            let body = apps(var(&f), [idx(&xs, var(&i)), idx(&ys, var(&i))]);
            let build = prim(Prim::Build, vec![len(&xs), lam(pvar(&i), body)]);
            let_(pvar(&f), arg(0), let_(pvar(&xs), arg(1), let_(pvar(&ys), arg(2), build)))
        }
        Prim::Fold | Prim::Reduce => {
            let (f, xs, acc, i) = (fr.name("f"), fr.name("xs"), fr.name("acc"), fr.name("i"));
            let step = lam2(&acc, &i, apps(var(&f), [var(&acc), idx(&xs, var(&i))]));
            let ix = iota(len(&xs), fr);
            let_(pvar(&f), arg(0), let_(pvar(&xs), arg(2), prim(Prim::Fold, vec![step, arg(1), ix])))
        }
        Prim::Scanl => {
            // element k: fold (\acc j -> f acc (xs ! j)) z (indices 0..k-1)
            let (f, z, xs, k, acc, j) = (fr.name("f"), fr.name("z"), fr.name("xs"), fr.name("k"), fr.name("acc"), fr.name("j"));
            let step = lam2(&acc, &j, apps(var(&f), [var(&acc), idx(&xs, var(&j))]));
            let elem = prim(Prim::Fold, vec![step, var(&z), iota(var(&k), fr)]);
            let build = prim(Prim::Build, vec![add(len(&xs), int(1)), lam(pvar(&k), elem)]);
            let_(pvar(&f), arg(0), let_(pvar(&z), arg(1), let_(pvar(&xs), arg(2), build)))
        }
        Prim::Scanr => {
            // element k: fold (\acc j -> f (xs ! (n - 1 - j)) acc) z (indices 0..n-k-1)
            let (f, z, xs, n, k, acc, j) = (fr.name("f"), fr.name("z"), fr.name("xs"), fr.name("n"), fr.name("k"), fr.name("acc"), fr.name("j"));
            let from_end = sub(sub(var(&n), int(1)), var(&j));
            let step = lam2(&acc, &j, apps(var(&f), [idx(&xs, from_end), var(&acc)]));
            let elem = prim(Prim::Fold, vec![step, var(&z), iota(sub(var(&n), var(&k)), fr)]);
            let build = prim(Prim::Build, vec![add(var(&n), int(1)), lam(pvar(&k), elem)]);
            let_(
                pvar(&f),
                arg(0),
                let_(pvar(&z), arg(1), let_(pvar(&xs), arg(2), let_(pvar(&n), len(&xs), build))),
            )
        }
        Prim::Shift1L | Prim::Shift1R => {
            let (xs, n, i) = (fr.name("xs"), fr.name("n"), fr.name("i"));
            let at = if op == Prim::Shift1L { add(var(&i), int(1)) } else { var(&i) };
            let size = if_(prim(Prim::Eq, vec![var(&n), int(0)]), int(0), sub(var(&n), int(1)));
            let build = prim(Prim::Build, vec![size, lam(pvar(&i), idx(&xs, at))]);
            let_(pvar(&xs), arg(0), let_(pvar(&n), len(&xs), build))
        }
        _ => unreachable!("only the primitives above are lowered"),
    };
    at(lowered, span)
}
