//! `unf/opt`: the optimisations of Huot & Shaikhha §5.4, Fig. 12 (as the note §3.8 recovers it, R4–R15),
//! with the extra rewrites Appendix A.6 uses to derive the closed forms of Ex. 1.2/5.5 (X1–X7), on
//! `unf/pe`'s output. Each is a named rule of the rewrite engine; its trace is the derivation.
//!
//! Decisions:
//! - Array lengths. Our `map2` stops with an error on arrays of different lengths. Every rule here
//!   gives the same result as its redex whenever the redex runs without that error (`map2 (x,y. y) A B`
//!   is B when |A| = |B|), and may give a value where the redex would stop (as R2 drops dead code);
//!   no rule makes a program stop that ran. So no rule needs lengths but one, X5+R13 below, which
//!   is exact for every length: `shift1L (scanr * 1 OnesLike(W)) ~> OnesLike(W)` (scanr gives n+1 ≥ 1
//!   elements, shift1L drops one). The paper's `scanr * 1 (shift1L A)` is not produced: `unf/direct`
//!   takes A3 = `shift1L (scanr * 1 A1)` (equal for n ≥ 1), because at n = 0 the paper's has length 1
//!   beside a length-0 array and prod [] would stop instead of giving the gradient [] (note §8.8).
//! - The seed: `grad (s, dt)` takes the output cotangent dt where the paper's ∇ takes 1, so the closed
//!   forms carry it: ∇ prod = `map2 (λx y → x * y * dt) (shift1R (scanl * 1 A)) (shift1L (scanr * 1 A))`,
//!   ∇ sum = `map (λv → dt) A`, ∇ dot = (`map (λ… → dt * …) B`, `… A`): the paper's at dt = 1.
//! - R4 propagates the constants 0 and 1 only (the note's reading of Fig. 12); R5 `0 * e ~> 0` is
//!   marked inexact (e may be NaN or ∞); constant folding computes what the program would.
//! - X7 (single-use lets inlined, A.6's "forward substitution" and "η") keeps the program's nesting
//!   bounded: it inlines an expression only while it stays at most `X7_DEPTH` deep, and never under a
//!   binder (`map2 (x,y. e)`), where it would run once per element.

use super::common::{lambda_body, lambda_params, PAPER};
use super::common::partial::{address, check_lemma_5_3, unchain, counts, let_typed, pe_rules, replace_tracked, rewrite, subst_tracked, trace_views};
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::ir::Prim as P;
use crate::features::{Feature, Features};
use crate::ir::*;
use crate::kit::rewrite::{charge, Changed, RewriteCx, Rule};
use crate::stage::{Input, Output, Source, Stage, StageInfo};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

pub struct Opt;

static INFO: StageInfo = StageInfo {
    id: "unf/opt",
    paper: PAPER,
    section: "§5.4, Fig. 12, Ex. 1.1, 1.2, 5.5, App. A.6",
    title: "Optimisations: ring and array laws to closed forms",
    explanation: "unf/pe's program is simplified with the optimisations of Fig. 12: constants 0 and 1 propagated, the \
ring laws of the reals (0 * e = 0, 0 + e = e, 1 * e = e) lifted to arrays (a map2 with an array of ones or zeros, \
reduce of ones or zeros), fusion of maps, and the rewrites Appendix A.6 uses (a map2 that projects one of its \
arguments is that argument, single-use lets inlined). It only improves constants, never the complexity class, and \
derives the paper's closed forms: ∇ prod A from two scans, ∇ sum = ones, ∇ dot (A, B) = (B, A). Each step is listed \
with its rule; rules that can change floating-point results (0 * e = 0 when e is NaN or ∞) are marked.",
    complexity: "O(T), as unf/pe, with smaller constants.",
    accepts: super::common::ACCEPTS,
};

/// The deepest expression X7 builds by inlining (so that nesting does not grow with program size).
const X7_DEPTH: usize = 8;

fn real_lit(e: &Expr) -> Option<f64> {
    match e.kind {
        ExprKind::Real(r) => Some(r),
        _ => None,
    }
}

fn is_lit(e: &Expr, v: f64) -> bool {
    real_lit(e) == Some(v)
}

/// A zero of a ground type: `0.0`, `map (λv → 0) A` (ZerosLike), or a tuple of zeros.
fn is_zero(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Real(r) => *r == 0.0,
        ExprKind::Unit => true,
        ExprKind::Tuple(es) => es.iter().all(is_zero),
        ExprKind::Prim(P::Map, args) => lambda_params(&args[0], 1).is_some() && is_zero(lambda_body(&args[0], 1)),
        _ => false,
    }
}

/// Whether `f` is `λp q → p +^ q` on a ground type: its body only sums components of p and q.
fn is_plus_fn(f: &Expr) -> bool {
    if lambda_params(f, 2).is_none() {
        return false;
    }
    let mut stack = vec![lambda_body(f, 2)];
    while let Some(e) = stack.pop() {
        match &e.kind {
            ExprKind::Var(_) => {}
            ExprKind::Tuple(es) => stack.extend(es),
            ExprKind::Let(rhs_b) if matches!(rhs_b.1 .0.kind, ExprKind::Var(_)) => stack.push(&rhs_b.1 .1),
            ExprKind::Prim(P::Add, xs) => stack.extend(xs),
            ExprKind::Prim(P::Map2, xs) if is_plus_fn(&xs[0]) => stack.extend(&xs[1..]),
            _ => return false,
        }
    }
    true
}

/// Whether `f` is `λx y → x * y` (either order).
fn is_times_fn(f: &Expr) -> bool {
    let Some(ps) = lambda_params(f, 2) else { return false };
    match &lambda_body(f, 2).kind {
        ExprKind::Prim(P::Mul, xs) => {
            let ids: Vec<Option<u32>> = xs.iter().map(|x| if let ExprKind::Var(n) = &x.kind { Some(n.id) } else { None }).collect();
            ids == [Some(ps[0].id), Some(ps[1].id)] || ids == [Some(ps[1].id), Some(ps[0].id)]
        }
        _ => false,
    }
}

/// `f a b` for a binder `f = λx y → e`: `let x = a in let y = b in e` (R1, the arguments let-bound).
fn apply2(f: &Expr, a: Expr, b: Expr) -> Expr {
    let ps = lambda_params(f, 2).expect("a binder");
    let_typed(pvar(&ps[0]), a, let_typed(pvar(&ps[1]), b, lambda_body(f, 2).clone()))
}

/// `λv → body` typed from the pieces it is built of.
fn lam1(v: &Name, arg_ty: Type, body: Expr) -> Expr {
    let ty = Type::fun(arg_ty, body.ty.clone());
    Expr { kind: ExprKind::Lam(LamKind::Plain, Box::new((pvar(v), body))), span: Span::NONE, ty }
}

fn elem_ty(arr: &Expr) -> Type {
    arr.ty.as_array().cloned().unwrap_or(Type::Unknown)
}

fn typed_prim(op: Prim, args: Vec<Expr>, ty: Type) -> Expr {
    Expr { kind: ExprKind::Prim(op, args.into()), span: Span::NONE, ty }
}

/// R4 `let x = c in e ~> e[c/x]` for c = 0, 1.
fn r4_constants(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(pat_rhs_b) = &mut e.kind else { return None };
    let (pat, rhs_b) = &mut **pat_rhs_b;
    let (rhs, b) = rhs_b;
    let Pat::Var(x, _) = pat else { return None };
    let c = real_lit(rhs)?;
    if c != 0.0 && c != 1.0 {
        return None;
    }
    Some(substituted(cx, b, x.id, rhs))
}

/// `b[rhs/x]`, with the rule's account of what changed (the nodes above each replaced `x`).
fn substituted(cx: &mut RewriteCx, b: &mut Expr, x: u32, rhs: &Expr) -> Expr {
    let mut dirty = vec![];
    let (out, _) = subst_tracked(cx.take(b), &HashMap::from_iter([(x, rhs.clone())]), &mut dirty);
    cx.changed = Some(Changed::Only(dirty));
    out
}

/// A part of the redex as the whole result (normal already).
fn part(cx: &mut RewriteCx, e: &mut Expr) -> Expr {
    cx.changed = Some(Changed::Nothing);
    cx.take(e)
}

/// The constant element of `map (v. c) W` (OnesLike, ZerosLike), where c is a literal or a variable
/// bound outside.
fn constant_array(e: &Expr) -> Option<&Expr> {
    let ExprKind::Prim(P::Map, m) = &e.kind else { return None };
    let v = lambda_params(&m[0], 1)?;
    let c = lambda_body(&m[0], 1);
    let simple = matches!(&c.kind, ExprKind::Real(_)) || matches!(&c.kind, ExprKind::Var(n) if n.id != v[0].id);
    simple.then_some(c)
}

/// R4 for OnesLike and ZerosLike (A.6's "forward substitution" of `OnesLike(A)`): `let Z = map (v. c) W
/// in e ~> e[map (v. c) W / Z]` when every use of Z is an array argument of a map2, which R7 then
/// turns into a map over the other array (so no pass over an array is repeated).
fn r4_constant_arrays(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(pat_rhs_b) = &mut e.kind else { return None };
    let (pat, rhs_b) = &mut **pat_rhs_b;
    let (rhs, b) = rhs_b;
    let Pat::Var(z, _) = pat else { return None };
    constant_array(rhs)?;
    let (mut all, mut in_map2) = (0, 0);
    let mut stack = vec![&*b];
    while let Some(x) = stack.pop() {
        match &x.kind {
            ExprKind::Var(n) if n.id == z.id => all += 1,
            ExprKind::Prim(P::Map2, args) => {
                in_map2 += args[1..].iter().filter(|a| matches!(&a.kind, ExprKind::Var(n) if n.id == z.id)).count();
            }
            _ => {}
        }
        each_child(x, &mut |c| stack.push(c));
    }
    (all > 0 && all == in_map2).then(|| substituted(cx, b, z.id, rhs))
}

/// R5 `0 * e ~> 0` and `e * 0 ~> 0` (inexact: not when e is NaN or ∞).
fn r5_times_zero(e: &mut Expr, _: &mut RewriteCx) -> Option<Expr> {
    match &e.kind {
        ExprKind::Prim(P::Mul, xs) if is_lit(&xs[0], 0.0) || is_lit(&xs[1], 0.0) => Some(real(0.0).with_ty(Type::Real)),
        _ => None,
    }
}

/// R6 `0 + e ~> e`, `1 * e ~> e`, and their mirror images, `e - 0 ~> e`, `0 - e ~> -e`.
fn r6_units(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Prim(op, xs) = &mut e.kind else { return None };
    match op {
        P::Add if is_lit(&xs[0], 0.0) => Some(part(cx, &mut xs[1])),
        P::Add | P::Sub if is_lit(&xs[1], 0.0) => Some(part(cx, &mut xs[0])),
        P::Sub if is_lit(&xs[0], 0.0) => {
            // a new root over a part of the redex
            cx.changed = Some(Changed::Only(vec![]));
            Some(typed_prim(P::Neg, vec![cx.take(&mut xs[1])], Type::Real))
        }
        P::Mul if is_lit(&xs[0], 1.0) => Some(part(cx, &mut xs[1])),
        P::Mul if is_lit(&xs[1], 1.0) => Some(part(cx, &mut xs[0])),
        _ => None,
    }
}

/// Constant folding of real arithmetic on literals (the same operation the program would do).
fn fold_constants(e: &mut Expr, _: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Prim(op, xs) = &e.kind else { return None };
    let r = match (op, &xs[..]) {
        (P::Neg, [a]) => -real_lit(a)?,
        (P::Add | P::Sub | P::Mul, [a, b]) => {
            let (a, b) = (real_lit(a)?, real_lit(b)?);
            match op {
                P::Add => a + b,
                P::Sub => a - b,
                _ => a * b,
            }
        }
        _ => return None,
    };
    Some(real(r).with_ty(Type::Real))
}

/// X1 `map2 (x,y. y) A B ~> B`, X2 `map2 (x,y. x) A B ~> A`, X3 `map2 (x,y. c) A B ~> map (y. c) B`
/// (c mentions neither x nor y).
fn x123_map2_projection(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Prim(P::Map2, args) = &mut e.kind else { return None };
    let ps = lambda_params(&args[0], 2)?;
    let body = lambda_body(&args[0], 2);
    if let ExprKind::Var(n) = &body.kind {
        if n.id == ps[0].id {
            return Some(part(cx, &mut args[1]));
        }
        if n.id == ps[1].id {
            return Some(part(cx, &mut args[2]));
        }
    }
    let c = counts(body, &HashSet::from_iter([ps[0].id, ps[1].id]));
    if !c.is_empty() {
        return None;
    }
    Some(typed_prim(P::Map, vec![lam1(&ps[1], elem_ty(&args[2]), body.clone()), args[2].clone()], e.ty.clone()))
}

/// R7, R8, R10 and their mirror images, for any function: `map2 f A (map (v. c) B) ~> map (a. f a c) A`
/// (c a constant of the element: OnesLike, ZerosLike), and likewise with the constant array first.
fn r7_map2_constant_array(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Prim(P::Map2, args) = &e.kind else { return None };
    let constant = |x: &Expr| -> Option<Expr> {
        let ExprKind::Prim(P::Map, m) = &x.kind else { return None };
        let v = lambda_params(&m[0], 1)?;
        let c = lambda_body(&m[0], 1);
        (counts(c, &HashSet::from_iter([v[0].id])).is_empty()).then(|| c.clone())
    };
    let f = &args[0];
    let (arr, body) = if let Some(c) = constant(&args[2]) {
        let a = cx.fresh.name("v");
        (args[1].clone(), (a.clone(), apply2(f, var(&a).with_ty(elem_ty(&args[1])), c)))
    } else if let Some(c) = constant(&args[1]) {
        let b = cx.fresh.name("v");
        (args[2].clone(), (b.clone(), apply2(f, c, var(&b).with_ty(elem_ty(&args[2])))))
    } else {
        return None;
    };
    let (v, body) = body;
    Some(typed_prim(P::Map, vec![lam1(&v, elem_ty(&arr), body), arr], e.ty.clone()))
}

/// R9 `map (x. x) A ~> A`.
fn r9_map_identity(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Prim(P::Map, args) = &mut e.kind else { return None };
    let v = lambda_params(&args[0], 1)?;
    matches!(&lambda_body(&args[0], 1).kind, ExprKind::Var(n) if n.id == v[0].id).then(|| part(cx, &mut args[1]))
}

/// R11 `reduce * 1 OnesLike(A) ~> 1`, R12 `reduce +^ 0 ZerosLike(A) ~> 0` (also on tuples of zeros: the
/// map2 rule's context share `reduce +^ 0^ G` of a body that does not use the context, the note's P7).
fn r11_r12_reduce_of_units(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Prim(P::Reduce, args) = &mut e.kind else { return None };
    let ExprKind::Prim(P::Map, m) = &args[2].kind else { return None };
    lambda_params(&m[0], 1)?;
    let c = lambda_body(&m[0], 1);
    let units = (is_zero(&args[1]) && is_zero(c) && is_plus_fn(&args[0])) || (is_lit(&args[1], 1.0) && is_lit(c, 1.0) && is_times_fn(&args[0]));
    units.then(|| part(cx, &mut args[1]))
}

/// X5 with R13: `shift1L (scanr * 1 OnesLike(W)) ~> OnesLike(W)`, exact for every length (scanr * 1 of
/// n ones is n + 1 ones, shift1L drops one).
fn x5_scan_of_ones(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Prim(P::Shift1L, a) = &mut e.kind else { return None };
    let ExprKind::Prim(P::Scanr, s) = &mut a[0].kind else { return None };
    let ExprKind::Prim(P::Map, m) = &s[2].kind else { return None };
    let ones = is_times_fn(&s[0]) && is_lit(&s[1], 1.0) && lambda_params(&m[0], 1).is_some() && is_lit(lambda_body(&m[0], 1), 1.0);
    ones.then(|| part(cx, &mut s[2]))
}

/// R15 fusion: `map (x. e1) (map2 (y1,y2. e2) A B) ~> map2 (y1,y2. let x = e2 in e1) A B`, and
/// `map (x. e1) (map (y. e2) A) ~> map (y. let x = e2 in e1) A`.
fn r15_fusion(e: &mut Expr, _: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Prim(P::Map, args) = &e.kind else { return None };
    let x = lambda_params(&args[0], 1)?;
    let e1 = lambda_body(&args[0], 1);
    let ExprKind::Prim(inner @ (P::Map | P::Map2), inner_args) = &args[1].kind else { return None };
    let arity = if *inner == P::Map { 1 } else { 2 };
    let ys = lambda_params(&inner_args[0], arity)?;
    let e2 = lambda_body(&inner_args[0], arity).clone();
    let mut f = let_typed(pvar(&x[0]), e2, e1.clone());
    for (y, arr) in ys.iter().zip(&inner_args[1..]).rev() {
        f = lam1(y, elem_ty(arr), f);
    }
    let mut out = inner_args.to_vec();
    out[0] = f;
    Some(typed_prim(*inner, out, e.ty.clone()))
}

/// The nesting depth of `e` once each variable of `depths` is replaced by an expression that deep.
fn depth_with(e: &Expr, depths: &HashMap<u32, usize>) -> usize {
    let (mut max, mut walked) = (0, 0);
    let mut stack = vec![(e, 1)];
    while let Some((x, d)) = stack.pop() {
        walked += 1;
        if let ExprKind::Var(n) = &x.kind {
            if let Some(k) = depths.get(&n.id) {
                max = max.max(d + k - 1);
                continue;
            }
        }
        max = max.max(d);
        each_child(x, &mut |c| stack.push((c, d + 1)));
    }
    charge(walked);
    max
}

/// How often each variable occurs, and how often outside any binder (`λ`).
fn uses(e: &Expr) -> HashMap<u32, (usize, usize)> {
    let mut out: HashMap<u32, (usize, usize)> = HashMap::default();
    let (mut stack, mut walked) = (vec![(e, false)], 0);
    while let Some((x, under)) = stack.pop() {
        walked += 1;
        if let ExprKind::Var(n) = &x.kind {
            let u = out.entry(n.id).or_default();
            u.0 += 1;
            u.1 += usize::from(!under);
        }
        let under = under || matches!(x.kind, ExprKind::Lam(..));
        each_child(x, &mut |c| stack.push((c, under)));
    }
    charge(walked);
    out
}

/// `e` with each variable of `map` replaced by its value, moved (each occurs once); pushes onto
/// `dirty` the nodes above a replacement and the replaced nodes whose value has a new root (the
/// bool beside it), and says whether `e`'s own root is either.
fn subst_once(e: &mut Expr, map: &mut HashMap<u32, (Expr, bool)>, dirty: &mut Vec<usize>) -> bool {
    let root = address(e);
    let (mut new_roots, mut root_new) = (vec![], false);
    let mut put = |x: &Expr| {
        let ExprKind::Var(n) = &x.kind else { return None };
        let (value, new) = map.remove(&n.id)?;
        if new {
            if address(x) == root {
                root_new = true;
            } else {
                new_roots.push(address(x));
            }
        }
        Some(value)
    };
    let above = replace_tracked(e, &mut put, &|_| true, usize::MAX, dirty);
    dirty.extend(new_roots);
    above || root_new
}

/// X7 over a lambda's body: each let of its chain whose variable occurs once, not under a binder, is
/// inlined there, while the expression stays at most `X7_DEPTH` deep (one walk of the chain to decide,
/// one to inline).
fn x7_single_use_lets(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Lam(k, p_body) = &mut e.kind else { return None };
    let (p, body) = &mut **p_body;
    let u = uses(body);
    // the lets inlined, each with its right-hand side's depth after the inlining before it
    let mut depths: HashMap<u32, usize> = HashMap::default();
    let mut cur = &*body;
    while let ExprKind::Let(q_rhs_b) = &cur.kind {
        let (q, rhs_b) = &**q_rhs_b;
        let (rhs, b) = rhs_b;
        if let Pat::Var(n, _) = q {
            if u.get(&n.id) == Some(&(1, 1)) {
                let d = depth_with(rhs, &depths);
                if d <= X7_DEPTH {
                    depths.insert(n.id, d);
                }
            }
        }
        cur = b;
    }
    if depths.is_empty() {
        return None;
    }
    let (links, mut cur) = unchain(cx.take(body));
    let (mut map, mut dirty, mut kept) = (HashMap::default(), vec![], vec![]);
    for (q, mut rhs, span) in links {
        let new = subst_once(&mut rhs, &mut map, &mut dirty);
        match &q {
            Pat::Var(n, _) if depths.contains_key(&n.id) => {
                map.insert(n.id, (rhs, new));
            }
            _ => kept.push((q, rhs, span, new)),
        }
    }
    let tail_new = subst_once(&mut cur, &mut map, &mut dirty);
    let new_rhs: Vec<bool> = kept.iter().map(|l| l.3).collect();
    let body = kept.into_iter().rev().fold(cur, |acc, (q, rhs, span, _)| at(let_typed(q, rhs, acc), span));
    let out = Expr { kind: ExprKind::Lam(*k, Box::new((p.clone(), body))), span: e.span, ty: e.ty.clone() };
    // every kept let is new (rebuilt), and so is a right-hand side or the tail whose root is
    let ExprKind::Lam(_, body_x) = &out.kind else { unreachable!("built a lambda") };
    let (_, body) = &**body_x;
    let mut cur = body;
    for new in new_rhs {
        dirty.push(address(cur));
        let ExprKind::Let(rhs_b_x) = &cur.kind else { unreachable!("built a let") };
        let (_, rhs_b) = &**rhs_b_x;
        let (rhs, b) = rhs_b;
        if new {
            dirty.push(address(rhs));
        }
        cur = b;
    }
    if tail_new {
        dirty.push(address(cur));
    }
    cx.changed = Some(Changed::Only(dirty));
    Some(out)
}

/// How many nodes a branch may have for R19 to compare it with the other (by its printed text).
const R19_NODES: usize = 64;

fn small(e: &Expr, mut left: usize) -> bool {
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        if left == 0 {
            return false;
        }
        left -= 1;
        each_child(x, &mut |c| stack.push(c));
    }
    true
}

/// Fig. 12's conditionals (§7.2): R20 `if true then e2 else e3 ~> e2`, R21 `if false … ~> e3`, and R19
/// `if e1 then e2 else e2 ~> e2` (the two branches of a gradient are often the same zeros). The
/// condition is pure (§7.2: a primal computation), so dropping it changes nothing. R22 is its own rule
/// below, applied only where the context it copies is small.
fn r19_r21_conditionals(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::If(c_a_b) = &mut e.kind else { return None };
    let (c, a_b) = &mut **c_a_b;
    let (a, b) = a_b;
    // a comparison of two constants is folded here (the condition's own constant folding)
    let known = match &c.kind {
        ExprKind::Bool(v) => Some(*v),
        _ => compare_literals(c),
    };
    match known {
        Some(true) => return Some(part(cx, a)),
        Some(false) => return Some(part(cx, b)),
        None => {}
    }
    let o = crate::print::PrintOptions::ascii();
    (small(a, R19_NODES) && small(b, R19_NODES) && crate::print::print_expr(a, &o) == crate::print::print_expr(b, &o)).then(|| part(cx, a))
}

fn atom(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Var(_) | ExprKind::Real(_) | ExprKind::Int(_) | ExprKind::Bool(_) | ExprKind::Unit)
}

/// `if c then a else b` with `f` put around each branch, typed as `e`.
fn if_around(e: &Expr, c: &Expr, a: &Expr, b: &Expr, f: impl Fn(Expr) -> Expr) -> Expr {
    Expr { kind: ExprKind::If(Box::new((c.clone(), (f(a.clone()), f(b.clone()))))), span: e.span, ty: e.ty.clone() }
}

/// R22 `f(if e1 then e2 else e3) ~> if e1 then f(e2) else f(e3)`, only where the context f it copies is
/// small (the note's caveat, §3.8): a primitive whose other arguments are atoms (`(if b then 1 else 0)
/// * z ~> if b then 1 * z else 0 * z`, which R5/R6 then finish), or a call of a variable (a
/// continuation, the final one among them). The condition is pure (§7.2), so it may move out of the
/// context. A let around an `if` (`let (s1, s2) = if … in e`) is not a small context: pushing e into
/// the branches made the examples' programs longer, not shorter, so it is left alone.
fn r22_context_into_branches(e: &mut Expr, _: &mut RewriteCx) -> Option<Expr> {
    match &e.kind {
        ExprKind::Prim(op, xs) if !matches!(op, P::Map | P::Map2 | P::Reduce | P::Fold | P::Scanl | P::Scanr | P::Build) => {
            let i = xs.iter().position(|x| matches!(x.kind, ExprKind::If(..)))?;
            if !xs.iter().enumerate().all(|(j, x)| j == i || atom(x)) {
                return None;
            }
            let ExprKind::If(c_a_b) = &xs[i].kind else { return None };
            let (c, a_b) = &**c_a_b;
            let (a, b) = a_b;
            Some(if_around(e, c, a, b, |br| {
                let mut ys = xs.clone();
                ys[i] = br;
                Expr { kind: ExprKind::Prim(*op, ys), span: e.span, ty: e.ty.clone() }
            }))
        }
        ExprKind::App(f_x) if matches!(f_x.0.kind, ExprKind::Var(_)) => {
            let (f, x) = &**f_x;
            let ExprKind::If(c_a_b) = &x.kind else { return None };
            let (c, a_b) = &**c_a_b;
            let (a, b) = a_b;
            Some(if_around(e, c, a, b, |br| Expr { kind: ExprKind::App(Box::new((f.clone(), br))), span: e.span, ty: e.ty.clone() }))
        }
        _ => None,
    }
}

/// The value of a comparison of two real literals (a closed condition's constant folding, §7.2).
fn compare_literals(c: &Expr) -> Option<bool> {
    let ExprKind::Prim(op, xs) = &c.kind else { return None };
    let [x, y] = &xs[..] else { return None };
    let (x, y) = (real_lit(x)?, real_lit(y)?);
    Some(match op {
        P::Lt => x < y,
        P::Le => x <= y,
        P::Gt => x > y,
        P::Ge => x >= y,
        P::Eq => x == y,
        P::Ne => x != y,
        _ => return None,
    })
}

/// Constant folding of a closed condition, `1.0 > 2.0 ~> false`, wherever it stands (a let-bound
/// condition too, which R4 on booleans then propagates into its `if`).
fn fold_comparisons(e: &mut Expr, _: &mut RewriteCx) -> Option<Expr> {
    let v = compare_literals(e)?;
    Some(Expr { kind: ExprKind::Bool(v), span: e.span, ty: Type::Bool })
}

/// R4 for conditions: `let b = true in e ~> e[true/b]` (and false), so that R20/R21 see the constant
/// condition of the `if` it was bound for (`let b = 1.0 > 2.0 in if b then …`).
fn r4_condition(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(pat_rhs_b) = &mut e.kind else { return None };
    let (pat, rhs_b) = &mut **pat_rhs_b;
    let (rhs, b) = rhs_b;
    let Pat::Var(x, _) = pat else { return None };
    matches!(rhs.kind, ExprKind::Bool(_)).then(|| substituted(cx, b, x.id, rhs))
}

/// Fig. 12's optimisations and A.6's extra rewrites, after the partial-evaluation rules.
pub(super) fn opt_rules() -> Vec<Rule> {
    let r = |name, apply| Rule { name, inexact: false, apply };
    let mut rules = pe_rules();
    rules.extend([
        r("R4 constant propagation (0, 1)", r4_constants),
        r("R4 OnesLike/ZerosLike into map2", r4_constant_arrays),
        Rule { name: "R5 0 * e ~> 0", inexact: true, apply: r5_times_zero },
        r("R6 0 + e ~> e, 1 * e ~> e", r6_units),
        r("constant folding", fold_constants),
        r("X1–X3 map2 projecting an argument", x123_map2_projection),
        r("R7/R8/R10 map2 with OnesLike or ZerosLike", r7_map2_constant_array),
        r("R9 map (x. x) A ~> A", r9_map_identity),
        r("R11/R12 reduce of units", r11_r12_reduce_of_units),
        r("X5+R13 shift1L (scanr * 1 OnesLike(A)) ~> OnesLike(A)", x5_scan_of_ones),
        r("R15 fusion", r15_fusion),
        r("X7 inline single-use lets", x7_single_use_lets),
        r("R19–R21 conditionals", r19_r21_conditionals),
        r("constant folding of a condition", fold_comparisons),
        r("R4 constant condition propagation", r4_condition),
        r("R22 a small context into both branches", r22_context_into_branches),
    ]);
    rules
}

impl Stage for Opt {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    /// What `unf/direct`'s output may hold: its continuations, and the conditionals and integers of
    /// the derivative table (`abs`, `max`); the source's own are refused by `unf/direct`, and so here.
    fn supports(&self) -> Features {
        Features::of(&[Feature::HigherOrder, Feature::Conditionals, Feature::Integers])
    }

    fn input(&self) -> Input {
        Input::After("unf/pe")
    }
    /// (its run reads only its own output: the input may go once transformed)
    fn run_reads_input(&self) -> bool {
        false
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let (program, trace) = rewrite(src.program, &opt_rules())?;
        check_lemma_5_3(&program).map_err(|why| Diagnostic::error(Span::NONE, format!("internal error: Lemma 5.3 does not hold after the optimisations: {why}")))?;
        Ok(Output { program, builtins: vec![], views: trace_views(&trace), steps: trace.stepper() })
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        super::common::grad_type(src)
    }
}
