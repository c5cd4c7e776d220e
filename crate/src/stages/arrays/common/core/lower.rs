//! The lowering from the surface arrays to the paper's core (§3.2; the bridge): after every
//! definition is inlined into `main` (§5.2: bot works on a single expression), `map`, `map2`,
//! `build`, `!`, `sum` become `build1`, `index`, `sumOuter` (the paper's `map f x = build (shape x)
//! (λix. f (index x ix))`, §3.3), `if` becomes the strict `cond` (§5.2: both branches are computed,
//! which is sound because every core operation is total), a `fold`/`reduce` whose body adds the
//! accumulator to a term free of it becomes a `sumOuter`, and `shift1L`/`shift1R` (drop the first or
//! last element) a `build1` of indexes (bot makes it a gather). What has no core form is refused
//! with a located message: a genuinely sequential `fold`/`reduce`/`scan` (the paper has no general
//! fold, §2.3 of the notes), recursion, functions as values, sums, and the tuples that scalar
//! replacement (tuples.rs, run first) cannot split: arrays of tuples.

use super::lang::*;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;

fn refuse(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error(span, format!("the core array language (§3.2) has no {what}")).refused()
}

/// `main = \p -> core term`: the inlined program's main with its body lowered.
pub fn lower_main(p: &Program, fresh: &mut Fresh) -> Result<(Pat, Expr), Diagnostic> {
    let main = p.def("main").ok_or_else(|| Diagnostic::error(Span::NONE, "no main"))?;
    // tuples first: scalar replacement (tuples.rs) leaves a tuple-free body
    let (pat, body) = super::tuples::split_main(&main.body, fresh)?;
    Ok((pat, lower(&body, fresh)?))
}

/// `f` applied to `args`, by substitution (`f` is a lambda of the inlined program).
fn beta(f: &Expr, args: Vec<Expr>, fresh: &mut Fresh) -> Result<Expr, Diagnostic> {
    let mut body = f;
    let mut params = vec![];
    for _ in 0..args.len() {
        match &body.kind {
            ExprKind::Lam(_, Pat::Var(x, _), b) => {
                params.push(x.id);
                body = b;
            }
            ExprKind::Lam(_, Pat::Wild(_), b) => {
                params.push(u32::MAX);
                body = b;
            }
            _ => return Err(refuse(f.span, "function argument that is not a lambda of scalars or arrays")),
        }
    }
    let mut out = lower(body, fresh)?;
    for (x, a) in params.into_iter().zip(args) {
        out = super::bot::subst(&out, x, &a, fresh);
    }
    Ok(out)
}

/// `let xs = a in k(xs)`, or `k(a)` for a variable.
fn named(a: Expr, fresh: &mut Fresh, k: impl FnOnce(Expr, &mut Fresh) -> Result<Expr, Diagnostic>) -> Result<Expr, Diagnostic> {
    if let ExprKind::Var(_) = a.kind {
        return k(a, fresh);
    }
    let xs = fresh.name("xs");
    let body = k(var(&xs), fresh)?;
    Ok(let_(pvar(&xs), a, body))
}

/// `\acc c -> acc + t` (or `t + acc`) with `acc` not free in `t`: the body's element pattern and
/// `t`. Such a fold is a sum whatever the order, so it is `sumOuter` (§3.2); any other body is
/// genuinely sequential.
fn additive(f: &Expr) -> Option<(&Pat, &Expr)> {
    let ExprKind::Lam(_, Pat::Var(acc, _), inner) = &f.kind else { return None };
    let ExprKind::Lam(_, c @ (Pat::Var(..) | Pat::Wild(_)), body) = &inner.kind else { return None };
    let mut body = &**body;
    while let ExprKind::Ann(x, _) = &body.kind {
        body = x;
    }
    let ExprKind::Prim(Prim::Add, ab) = &body.kind else { return None };
    let is_acc = |e: &Expr| matches!(&e.kind, ExprKind::Var(x) if x.id == acc.id);
    let t = match (is_acc(&ab[0]), is_acc(&ab[1])) {
        (true, _) => &ab[1],
        (_, true) => &ab[0],
        _ => return None,
    };
    (!super::bot::mentions(t, acc.id)).then_some((c, t))
}

/// Lowers a surface expression (recursing in its nesting, which the parser bounds: limits.rs).
pub fn lower(e: &Expr, fresh: &mut Fresh) -> Result<Expr, Diagnostic> {
    use ExprKind as K;
    let out = match &e.kind {
        K::Var(_) | K::Real(_) | K::Int(_) | K::Bool(_) => e.clone(),
        K::Let(..) => {
            // a let chain is walked in a loop (limits.rs: no native recursion along it)
            let mut links = vec![];
            let mut cur = e;
            while let K::Let(p, rhs, body) = &cur.kind {
                match p {
                    Pat::Var(x, s) => links.push((Pat::Var(x.clone(), *s), lower(rhs, fresh)?, cur.span)),
                    Pat::Wild(_) => {}
                    _ => return Err(refuse(cur.span, "tuple pattern (no tuples in the core)")),
                }
                cur = body;
            }
            let mut out = lower(cur, fresh)?;
            for (p, rhs, span) in links.into_iter().rev() {
                out = at(Expr::gen(K::Let(p, Box::new(rhs), Box::new(out))), span);
            }
            out
        }
        K::Array(es) => Expr::gen(K::Array(es.iter().map(|x| lower(x, fresh)).collect::<Result<_, _>>()?)),
        K::If(c, a, b) => cond(lower(c, fresh)?, lower(a, fresh)?, lower(b, fresh)?),
        K::Ann(x, _) => lower(x, fresh)?,
        K::Prim(p, args) if scalar_op(*p) => prim(*p, args.iter().map(|x| lower(x, fresh)).collect::<Result<_, _>>()?),
        K::Prim(p, args) => match p {
            Prim::Index => index(lower(&args[0], fresh)?, lower(&args[1], fresh)?),
            Prim::Length => prim(Prim::Length, vec![lower(&args[0], fresh)?]),
            Prim::Sum => prim(Prim::Sum, vec![lower(&args[0], fresh)?]),
            Prim::Replicate => replicate(lower(&args[0], fresh)?, lower(&args[1], fresh)?),
            Prim::Build => {
                let i = fresh.name("i");
                let body = beta(&args[1], vec![var(&i)], fresh)?;
                build1(lower(&args[0], fresh)?, &i, body)
            }
            Prim::Map => {
                let a = lower(&args[1], fresh)?;
                named(a, fresh, |xs, fr| {
                    let i = fr.name("i");
                    let body = beta(&args[0], vec![index(xs.clone(), var(&i))], fr)?;
                    Ok(build1(prim(Prim::Length, vec![xs]), &i, body))
                })?
            }
            Prim::Map2 => {
                let (a, b) = (lower(&args[1], fresh)?, lower(&args[2], fresh)?);
                named(a, fresh, |xs, fr| {
                    named(b, fr, |ys, fr| {
                        let i = fr.name("i");
                        let body = beta(&args[0], vec![index(xs.clone(), var(&i)), index(ys, var(&i))], fr)?;
                        Ok(build1(prim(Prim::Length, vec![xs]), &i, body))
                    })
                })?
            }
            Prim::Fold | Prim::Reduce => match additive(&args[0]).filter(|_| e.ty == Type::Real) {
                Some((c, term)) => {
                    // fold (\acc c -> acc + t) z xs = z + sumOuter (build1 (length xs) (\i -> t[c := index xs i]))
                    let a = lower(&args[2], fresh)?;
                    let f = Expr::gen(K::Lam(LamKind::Plain, c.clone(), Box::new(term.clone())));
                    let total = named(a, fresh, |xs, fr| {
                        let i = fr.name("i");
                        let body = beta(&f, vec![index(xs.clone(), var(&i))], fr)?;
                        Ok(prim(Prim::Sum, vec![build1(prim(Prim::Length, vec![xs]), &i, body)]))
                    })?;
                    match &args[1].kind {
                        K::Real(z) if *z == 0.0 => total,
                        _ => prim(Prim::Add, vec![lower(&args[1], fresh)?, total]),
                    }
                }
                None => return Err(refuse(e.span, "sequential fold or reduce with this body: only `acc + t` (t free of acc) is a sum (sumOuter); the paper has no general fold (§2.3)")),
            },
            Prim::Shift1L | Prim::Shift1R => {
                // shift1L xs drops the first element, shift1R the last: a build1 of indexes that bot
                // turns into a gather (Fig. 11), of length max (n - 1) 0
                let a = lower(&args[0], fresh)?;
                let from = if *p == Prim::Shift1L { 1 } else { 0 };
                named(a, fresh, |xs, fr| {
                    let i = fr.name("i");
                    let n = prim(Prim::Max, vec![prim(Prim::Sub, vec![prim(Prim::Length, vec![xs.clone()]), int(1)]), int(0)]);
                    let ix = if from == 0 { var(&i) } else { prim(Prim::Add, vec![var(&i), int(from)]) };
                    Ok(build1(n, &i, index(xs, ix)))
                })?
            }
            _ => return Err(refuse(e.span, "scan (a sequential prefix fold: the paper has no general fold, §2.3)")),
        },
        K::LetRec(..) => return Err(refuse(e.span, "recursion (no dynamic loops: §5.2)")),
        K::Lam(..) | K::App(..) => return Err(refuse(e.span, "functions as values (user functions are inlined: §5.2)")),
        // after tuples.rs a tuple is left only as main's output, lowered per component
        K::Tuple(es) => Expr::gen(K::Tuple(es.iter().map(|x| lower(x, fresh)).collect::<Result<_, _>>()?)),
        K::Fst(_) | K::Snd(_) => return Err(refuse(e.span, "tuples inside the program (only main's input may be a tuple)")),
        K::Inl(_) | K::Inr(_) | K::Case(..) => return Err(refuse(e.span, "sums")),
        _ => return Err(refuse(e.span, "such construct")),
    };
    Ok(at(out, e.span))
}
