//! The lowering from the surface arrays to the paper's core (§3.2; the bridge): after every
//! definition is inlined into `main` (§5.2: bot works on a single expression) and tuples are split
//! (tuples.rs, with arrays of tuples as tuples of arrays: soa.rs), `map`, `map2`, `build`, `!`,
//! `sum` become `build1`, `index`, `sumOuter` (the paper's `map f x = build (shape x)
//! (λix. f (index x ix))`, §3.3), `if` becomes the strict `cond` (§5.2: both branches are computed,
//! which is sound because every core operation is total), and `shift1L`/`shift1R` (drop the first or
//! last element) a `build1` of indexes (bot makes it a gather).
//!
//! Folds and scans: the core has `sumOuter` and no loop (§2.3). The reductions that have a
//! loop-free form in the core are lowered to it:
//! - `fold`/`reduce` whose body is `acc + t` (t free of acc): `z + sumOuter (build1 n (λi. t_i))`;
//! - one whose body is `max acc t` / `min acc t` (either order): a selection by comparisons,
//!   O(n²) comparisons where the fold does n (selection_fold);
//! - an additive `scanl`/`scanr`: a masked sumOuter per prefix/suffix, O(n²) additions (additive_scan).
//! Every other fold, reduce or scan whose accumulator is a real or an array of reals goes beyond the
//! paper, as its reference implementation horde-ad does: the core gets one loop, `scanl f z xs`
//! (`fold f z xs = index (scanl f z xs) (length xs)`, `scanr` the reversed scanl of the reversed
//! array), whose Delta is one node per loop (fold.rs); cost O(n) memory for the accumulators.
//! Recursion is unrolled before this when params and literals bound it (bot.rs, App. B's staging);
//! `a ||| b` is the pair and a sum inside the program a tag and both sides (tuples.rs: the side
//! not there is the other branch's, or the tag a constant). What is left
//! is refused, located: a tuple accumulator whose real component reads an integer one inside a term that also reads a real one other than as an index of an array of reals, a comparison or a `real` of `+`, `-`, `*` (those are real terms of the integers, pack.rs `real_int_reads`, and each term of the integers alone a column of their states, `lift_int_reads`), or the two reading each
//! other (a tuple of reals and arrays of reals is packed into an array of reals, one loop: pack.rs
//! `packed_fold`; its integers a loop of their own beside it, `int_fold`), data-dependent
//! recursion, functions as values, sums in main's input or output. Arrays of tuples in main's input
//! and output are converted at the wrapper (boundary.rs): taken apart into component arrays, the
//! gradient and the primal output zipped back; a tuple nested in main's tuple output is returned as its
//! flat tuple of leaves the same way.
use super::lang::*;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;


const FUNCTIONS: &str = "functions as values (user functions are inlined: §5.2)";

fn refuse(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error(span, format!("the core array language (§3.2) has no {what}")).refused()
}

/// `main = \p -> core term`: the inlined program's main with its body lowered.
/// main's input pattern, the boundary lets that take its arrays of tuples apart (boundary.rs: put
/// above the core term after bot) and the core term.
pub fn lower_main(p: &Program, fresh: &mut Fresh) -> Result<(Pat, Vec<(Name, Expr, Span)>, Expr), Diagnostic> {
    let main = p.def("main").ok_or_else(|| Diagnostic::error(Span::NONE, "no main"))?;
    // tuples first: scalar replacement (tuples.rs) leaves a tuple-free body
    let (pat, boundary, body) = super::tuples::split_main(&main.body, fresh)?;
    Ok((pat, boundary, lower(&body, fresh)?))
}

/// `f` applied to `args`, by substitution (`f` is a lambda of the inlined program).
fn beta(f: &Expr, args: Vec<Expr>, fresh: &mut Fresh) -> Result<Expr, Diagnostic> {
    let mut body = f;
    let mut params = vec![];
    for _ in 0..args.len() {
        let ExprKind::Lam(_, pat_b) = &body.kind else {
            return Err(refuse(f.span, "function argument that is not a lambda of scalars or arrays"));
        };
        let (pat, b) = &**pat_b;
        match pat {
            Pat::Var(x, _) => params.push(x.id),
            Pat::Wild(_) => params.push(u32::MAX),
            _ => return Err(refuse(f.span, "function argument that is not a lambda of scalars or arrays")),
        }
        body = b;
    }
    let mut out = lower(body, fresh)?;
    for (x, a) in params.into_iter().zip(args) {
        out = super::bot::subst(&out, x, &a, fresh);
    }
    Ok(out)
}

/// `let xs = a in k(xs)`, or `k(a)` for a variable.
fn named(a: Expr, fresh: &mut Fresh, k: impl FnOnce(Expr, &mut Fresh) -> Result<Expr, Diagnostic>) -> Result<Expr, Diagnostic> {
    named_as("xs", a, fresh, k)
}

fn named_as(text: &str, a: Expr, fresh: &mut Fresh, k: impl FnOnce(Expr, &mut Fresh) -> Result<Expr, Diagnostic>) -> Result<Expr, Diagnostic> {
    if let ExprKind::Var(_) = a.kind {
        return k(a, fresh);
    }
    let xs = fresh.name(text);
    let body = k(var(&xs), fresh)?;
    Ok(let_(pvar(&xs), a, body))
}

/// The body of a two-argument lambda `\x y -> body` with the accumulator the parameter at `acc_at`
/// (0 for `fold`/`reduce`/`scanl`, whose `f` takes the accumulator first; 1 for `scanr`): the
/// accumulator's id, the element's pattern and the body.
fn acc_lambda(f: &Expr, acc_at: usize) -> Option<(u32, &Pat, &Expr)> {
    let ExprKind::Lam(_, p0_inner) = &f.kind else { return None };
    let (p0, inner) = &**p0_inner;
    let ExprKind::Lam(_, p1_body) = &inner.kind else { return None };
    let (p1, body) = &**p1_body;
    let (acc, c) = if acc_at == 0 { (p0, p1) } else { (p1, p0) };
    let (Pat::Var(acc, _), c @ (Pat::Var(..) | Pat::Wild(_))) = (acc, c) else { return None };
    let mut body = body;
    while let ExprKind::Ann(x_x) = &body.kind {
        let (x, _) = &**x_x;
        body = x;
    }
    Some((acc.id, c, body))
}

/// `op acc t` or `op t acc` with `acc` not free in `t`: `t` and whether the accumulator is the left
/// operand.
fn acc_op(f: &Expr, acc_at: usize, op: Prim) -> Option<(&Pat, &Expr, bool)> {
    let (acc, c, body) = acc_lambda(f, acc_at)?;
    let ExprKind::Prim(p, ab) = &body.kind else { return None };
    if *p != op || ab.len() != 2 {
        return None;
    }
    let is_acc = |e: &Expr| matches!(&e.kind, ExprKind::Var(x) if x.id == acc);
    let (t, left) = match (is_acc(&ab[0]), is_acc(&ab[1])) {
        (true, _) => (&ab[1], true),
        (_, true) => (&ab[0], false),
        _ => return None,
    };
    (!super::bot::mentions(t, acc)).then_some((c, t, left))
}

/// `\acc c -> acc + t` (or `t + acc`) with `acc` not free in `t`: the body's element pattern and
/// `t`. Such a fold is a sum whatever the order, so it is `sumOuter` (§3.2).
fn additive(f: &Expr, acc_at: usize) -> Option<(&Pat, &Expr)> {
    acc_op(f, acc_at, Prim::Add).map(|(c, t, _)| (c, t))
}

/// `\acc c -> max acc t` (or `min`, either operand order), `acc` not free in `t`: the operation,
/// the element pattern, `t` and whether the accumulator is on the left (it wins ties: `max` and
/// `min` give a tie to their left argument).
fn selection(f: &Expr) -> Option<(Prim, &Pat, &Expr, bool)> {
    [Prim::Max, Prim::Min].into_iter().find_map(|op| acc_op(f, 0, op).map(|(c, t, left)| (op, c, t, left)))
}

/// `build1 (length xs) (\j -> t[c := index xs j])`: the fold's terms, computed once.
fn terms(c: &Pat, t: &Expr, xs: &Expr, fresh: &mut Fresh) -> Result<Expr, Diagnostic> {
    let f = Expr::gen(ExprKind::Lam(LamKind::Plain, Box::new((c.clone(), t.clone()))));
    let i = fresh.name("i");
    let body = beta(&f, vec![index(xs.clone(), var(&i))], fresh)?;
    Ok(build1(prim(Prim::Length, vec![xs.clone()]), &i, body))
}

/// `z + e`, or `e` when `z` is the literal 0.
fn plus_init(z: &Expr, e: Expr, fresh: &mut Fresh) -> Result<Expr, Diagnostic> {
    Ok(match &z.kind {
        ExprKind::Real(r) if *r == 0.0 => e,
        _ => prim(Prim::Add, vec![lower(z, fresh)?, e]),
    })
}

/// An additive scan (`scanl (\acc c -> acc + t) z xs`, or `scanr (\c acc -> t + acc) z xs`) as
/// prefix (suffix) sums: element k of `n + 1` is `z + sumOuter (build1 n (\j -> cond (j < k) t_j 0))`
/// (`j >= k` for scanr). The core has no loop and no scan (§2.3), but a masked sumOuter per element
/// is in its language; the cost is O(n²) additions where the scan does n (the terms t_j are
/// computed once, in `ts`).
fn additive_scan(e: &Expr, c: &Pat, t: &Expr, fresh: &mut Fresh) -> Result<Expr, Diagnostic> {
    let ExprKind::Prim(p, args) = &e.kind else { unreachable!() };
    let a = lower(&args[2], fresh)?;
    let z = &args[1];
    named(a, fresh, |xs, fr| {
        named(terms(c, t, &xs, fr)?, fr, |ts, fr| {
            let (k, j) = (fr.name("k"), fr.name("j"));
            let n = prim(Prim::Length, vec![xs.clone()]);
            let mask = if *p == Prim::Scanl { Prim::Lt } else { Prim::Ge };
            let term = cond(prim(mask, vec![var(&j), var(&k)]), index(ts, var(&j)), real(0.0));
            let total = prim(Prim::Sum, vec![build1(n.clone(), &j, term)]);
            Ok(build1(prim(Prim::Add, vec![n, int(1)]), &k, plus_init(z, total, fr)?))
        })
    })
}

/// A `max`/`min` fold as a selection: with `ts` the terms, the one no other term beats is
/// `m = sumOuter (build1 n (\i -> cond (beaten_i == 0) (index ts i) 0))`, where `beaten_i` counts the
/// `j` whose term is strictly better, or equal and nearer the accumulator's side (ties go to the
/// left argument, as the fold's `max acc t` gives them to the earlier element); the fold is then
/// `cond (n == 0) z (max z m)`. The derivative is the fold's (to the one selected term, or to `z`),
/// all selection being discrete `cond`s. Cost O(n²) comparisons where the fold does n; the core has
/// no max reduction (only sumOuter, §3.2) and no loop (§2.3).
fn selection_fold(e: &Expr, op: Prim, c: &Pat, t: &Expr, acc_left: bool, fresh: &mut Fresh) -> Result<Expr, Diagnostic> {
    let ExprKind::Prim(_, args) = &e.kind else { unreachable!() };
    let a = lower(&args[2], fresh)?;
    let z = lower(&args[1], fresh)?;
    let (strict, weak) = if op == Prim::Max { (Prim::Gt, Prim::Ge) } else { (Prim::Lt, Prim::Le) };
    named(a, fresh, |xs, fr| {
        named(z, fr, |z, fr| {
            named(terms(c, t, &xs, fr)?, fr, |ts, fr| {
                let (i, j) = (fr.name("i"), fr.name("j"));
                let n = prim(Prim::Length, vec![xs.clone()]);
                let (tj, ti) = (index(ts.clone(), var(&j)), index(ts.clone(), var(&i)));
                let one_if = |b: Expr| cond(b, real(1.0), real(0.0));
                // j beats i: strictly better, or as good and on the side that wins ties
                let near = prim(if acc_left { Prim::Lt } else { Prim::Gt }, vec![var(&j), var(&i)]);
                let beats = cond(near, one_if(prim(weak, vec![tj.clone(), ti.clone()])), one_if(prim(strict, vec![tj, ti.clone()])));
                let beaten = prim(Prim::Sum, vec![build1(n.clone(), &j, beats)]);
                let chosen = cond(prim(Prim::Eq, vec![beaten, real(0.0)]), ti, real(0.0));
                let m = prim(Prim::Sum, vec![build1(n.clone(), &i, chosen)]);
                let with_z = if acc_left { prim(op, vec![z.clone(), m]) } else { prim(op, vec![m, z.clone()]) };
                Ok(cond(prim(Prim::Eq, vec![n, int(0)]), z, with_z))
            })
        })
    })
}

/// `reverse xs = build1 (length xs) (\i -> index xs (length xs - 1 - i))` (bot makes it a gather).
fn reverse(xs: Expr, fresh: &mut Fresh) -> Expr {
    let i = fresh.name("i");
    let n = prim(Prim::Length, vec![xs.clone()]);
    let last = prim(Prim::Sub, vec![prim(Prim::Sub, vec![n.clone(), int(1)]), var(&i)]);
    build1(n, &i, index(xs, last))
}

/// Whether `t` is `Array^k R` or `Array^k Int` (k ≥ 0): what a sequential scan's accumulator may be
/// (an integer loop has no Delta: D′ keeps it, dual.rs; soa.rs makes one beside a tuple's reals).
fn scan_accumulator(t: &Type) -> bool {
    let mut t = t;
    while let Some(e) = t.as_array() {
        t = e;
    }
    matches!(t, Type::Real | Type::Int)
}

/// A sequential fold's core form (beyond the paper, which has no fold: §2.3; as horde-ad, fold.rs):
/// `scanl (\acc c -> t) z xs` with the body `t` lowered, the accumulator at parameter `acc_at` of `f`
/// (1: `scanr`'s `f` flipped). The accumulator is a real or an array of reals; an element the body
/// ignores gets a name (the Delta's transpose passes it to the body's derivative).
fn scanl_of(f: &Expr, acc_at: usize, z: &Expr, xs: Expr, span: Span, fresh: &mut Fresh) -> Result<Expr, Diagnostic> {
    const WHAT: &str = "sequential fold or scan with this function (it takes its accumulator, a real or an array of reals, and an element, each a variable)";
    let (acc, c, body) = acc_lambda(f, acc_at).ok_or_else(|| refuse(span, WHAT))?;
    let acc_ty = match &f.ty {
        Type::Fun(ar) if acc_at == 0 => ar.0.clone(),
        Type::Fun(ar) => match &ar.1 {
            Type::Fun(ar) => ar.0.clone(),
            _ => Type::Unknown,
        },
        _ => Type::Unknown,
    };
    if !scan_accumulator(&acc_ty) {
        return Err(refuse(span, WHAT));
    }
    let acc = Name::new(&acc_name(f, acc_at), acc);
    let c = match c {
        Pat::Var(x, _) => x.clone(),
        _ => fresh.name("c"),
    };
    let body = lower(body, fresh)?;
    Ok(at(prim(Prim::Scanl, vec![lam(pvar(&acc), lam(pvar(&c), body)), lower(z, fresh)?, xs]), span))
}

/// The text of the accumulator's name in `f`.
fn acc_name(f: &Expr, acc_at: usize) -> String {
    let mut cur = f;
    for _ in 0..acc_at {
        if let ExprKind::Lam(_, b_x) = &cur.kind {
            let (_, b) = &**b_x;
            cur = b;
        }
    }
    match &cur.kind {
        ExprKind::Lam(_, pat_x) => { let (pat, _) = &**pat_x; match pat {
            Pat::Var(x, _) => x.text.to_string(),
            _ => "acc".into(),
        } },
        _ => "acc".into(),
    }
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
            while let ExprKind::Let(p_rhs_body) = &cur.kind {
                let (p, rhs_body) = &**p_rhs_body;
                let (rhs, body) = rhs_body;
                match p {
                    Pat::Var(x, s) => links.push((Pat::Var(x.clone(), *s), lower(rhs, fresh)?, cur.span)),
                    Pat::Wild(_) => {}
                    _ => return Err(refuse(cur.span, "tuple pattern (no tuples in the core)")),
                }
                cur = body;
            }
            let mut out = lower(cur, fresh)?;
            for (p, rhs, span) in links.into_iter().rev() {
                out = at(Expr::gen(ExprKind::Let(Box::new((p, (rhs, out))))), span);
            }
            out
        }
        // An empty literal of arrays (`[] : Array (Array R)`) as `replicate 0` of its element's empty
        // literal, so that its value keeps the shape of its rows (`Value::empty_of`), as the static
        // type says: a plain `[]` has none, and the runtime took its rows for scalars where a
        // gather read them (`length (index xs 0)`, bot's shape term, failed on a scalar zero;
        // `·→` met that zero against an array: property-test cases of session 44).
        K::Array(es) if es.is_empty() && e.ty.as_array().is_some_and(|t| t.as_array().is_some()) => empty_literal(&e.ty),
        K::Array(es) => {
            let rows: Vec<Expr> = es.iter().map(|x| lower(x, fresh)).collect::<Result<_, _>>()?;
            // an array of arrays whose rows are not all literals of one shape: checked regular at run
            // time, located here (§3.2: "there are no jagged arrays"; a ragged literal was read at its
            // first row's shape: by bot's `tr`, the Delta's adds, the symbolic stages' cotangents):
            // `let regular = sameShape [] [r1, ..] in [r1, ..]`, each row a variable or a literal of
            // variables and constants (else let-bound first), so the literal stays one (I8 indexes it)
            if e.ty.as_array().is_some_and(|t| t.as_array().is_some()) && literal_shape(e).is_none() {
                let mut lets = vec![];
                let rows: Vec<Expr> = rows
                    .into_iter()
                    .map(|r| match plain(&r) {
                        true => r,
                        false => {
                            let v = fresh.name("row");
                            lets.push((v.clone(), r));
                            var(&v)
                        }
                    })
                    .collect();
                let check = at(same_shape(Expr::gen(K::Array(vec![].into())), Expr::gen(K::Array(rows.clone().into()))), e.span);
                let mut out = let_(pvar(&fresh.name("regular")), check, Expr::gen(K::Array(rows.into())));
                for (v, r) in lets.into_iter().rev() {
                    out = let_(pvar(&v), r, out);
                }
                out
            } else {
                Expr::gen(K::Array(rows.into()))
            }
        }
        ExprKind::If(c_a_b) => {
            let (c, a_b) = &**c_a_b;
            let (a, b) = a_b;
            cond(lower(c, fresh)?, lower(a, fresh)?, lower(b, fresh)?)
        }
        K::Ann(x_x) => { let (x, _) = &**x_x; lower(x, fresh)? },
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
            Prim::Fold | Prim::Reduce if e.ty == Type::Real && additive(&args[0], 0).is_some() => {
                let Some((c, term)) = additive(&args[0], 0) else { unreachable!() };
                // fold (\acc c -> acc + t) z xs = z + sumOuter (build1 (length xs) (\i -> t[c := index xs i]))
                let a = lower(&args[2], fresh)?;
                let total = named(a, fresh, |xs, fr| Ok(prim(Prim::Sum, vec![terms(c, term, &xs, fr)?])))?;
                plus_init(&args[1], total, fresh)?
            }
            Prim::Fold | Prim::Reduce if e.ty == Type::Real && selection(&args[0]).is_some() => {
                let Some((op, c, term, left)) = selection(&args[0]) else { unreachable!() };
                selection_fold(e, op, c, term, left, fresh)?
            }
            // any other fold: the last accumulator of a sequential scanl (beyond the paper, §2.3: fold.rs)
            Prim::Fold | Prim::Reduce => {
                let xs = lower(&args[2], fresh)?;
                named(xs, fresh, |xs, fr| {
                    let accs = scanl_of(&args[0], 0, &args[1], xs.clone(), e.span, fr)?;
                    named_as("accs", accs, fr, |accs, _| Ok(index(accs, prim(Prim::Length, vec![xs]))))
                })?
            }
            Prim::Scanl | Prim::Scanr => match additive(&args[0], usize::from(*p == Prim::Scanr)).filter(|_| e.ty == Type::array(Type::Real)) {
                Some((c, term)) => additive_scan(e, c, term, fresh)?,
                None if *p == Prim::Scanl => scanl_of(&args[0], 0, &args[1], lower(&args[2], fresh)?, e.span, fresh)?,
                None => {
                    // scanr f z xs = reverse (scanl (flip f) z (reverse xs)): reverses are build1s of
                    // indexes, which bot makes gathers
                    let xs = lower(&args[2], fresh)?;
                    named(xs, fresh, |xs, fr| {
                        let rev = reverse(xs, fr);
                        let accs = scanl_of(&args[0], 1, &args[1], rev, e.span, fr)?;
                        named_as("accs", accs, fr, |accs, fr| Ok(reverse(accs, fr)))
                    })?
                }
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
            _ => return Err(refuse(e.span, "such array operation")),
        },
        K::LetRec(..) => return Err(refuse(e.span, &format!("recursion{}", crate::stages::arrays::bot::RECURSION_BOUNDARY))),
        // the packed loop's length check (pack.rs): a scalar operation on integers
        K::App(..) => match spine(e) {
            Some((h, a)) if h == SAME_LENGTH && a.len() == 2 => same_length(lower(a[0], fresh)?, lower(a[1], fresh)?),
            Some((h, a)) if h == SAME_SHAPE && a.len() == 2 => same_shape(lower(a[0], fresh)?, lower(a[1], fresh)?),
            Some((h, a)) if h == PAD_SIZE && a.len() == 1 => pad_size(lower(a[0], fresh)?),
            Some((h, a)) if h == EXACT_INT && a.len() == 1 => exact_int(lower(a[0], fresh)?),
            _ => return Err(refuse(e.span, FUNCTIONS)),
        },
        K::Lam(..) => return Err(refuse(e.span, FUNCTIONS)),
        // after tuples.rs a tuple is left only as main's output, lowered per component
        K::Tuple(es) => Expr::gen(K::Tuple(es.iter().map(|x| lower(x, fresh)).collect::<Result<_, _>>()?)),
        K::Fst(_) | K::Snd(_) => return Err(refuse(e.span, "tuples inside the program (only main's input may be a tuple)")),
        K::Inl(_) | K::Inr(_) | K::Case(..) => return Err(refuse(e.span, "sums")),
        _ => return Err(refuse(e.span, "such construct")),
    };
    // the terms made for `e` (a map's build1, its index and length) point at it, as bot's rules'
    // terms then point at their redex (bot.rs): a run-time error in them gets the user's line
    let mut out = out;
    for c in children_mut(&mut out) {
        locate(c, e.span);
    }
    Ok(at(out, e.span))
}

/// The empty literal of array type `t`: `[]` when its elements are scalars, else `replicate 0` of
/// its element type's (`[] : Array (Array R)` is `replicate 0 []`).
fn empty_literal(t: &Type) -> Expr {
    match t.as_array().filter(|elem| elem.as_array().is_some()) {
        Some(elem) => replicate(int(0), empty_literal(elem)),
        None => Expr::gen(ExprKind::Array(vec![].into())),
    }
}

/// The shape of a literal whose rows are literals down to scalars, all of one shape (regular, §3.2),
/// as the lowering knows it; None when a row is not a literal (its shape is known only at run time) or
/// two rows differ.
fn literal_shape(e: &Expr) -> Option<Vec<usize>> {
    match &e.kind {
        ExprKind::Array(es) => {
            let mut rows = es.iter().map(literal_shape);
            let first = rows.next().unwrap_or(Some(vec![]))?;
            rows.all(|r| r.as_ref() == Some(&first)).then(|| std::iter::once(es.len()).chain(first).collect())
        }
        _ if e.ty.as_array().is_none() => Some(vec![]),
        _ => None,
    }
}

/// A variable, a constant, or a literal of them: copied into a literal's regularity check as it is.
fn plain(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Var(_) | ExprKind::Real(_) | ExprKind::Int(_) | ExprKind::Bool(_) => true,
        ExprKind::Array(es) => es.iter().all(plain),
        _ => false,
    }
}
