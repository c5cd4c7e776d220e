//! The sequential fold in Part C: beyond the paper, which has no fold (§2.3: "we do not consider
//! general loops"), following its reference implementation horde-ad, whose Delta has fold and scan
//! constructors that keep the primal accumulators and carry the body's derivative and transpose
//! as functions. Here the core's one loop is `scanl (λacc c. t) z xs` (lower.rs: a fold is its last
//! accumulator, `scanr` the reversed scanl of the reversed array); its accumulator is a real or an
//! array of reals.
//!
//! - D[scanl f z xs] (§6.3's rule shape): the primal accumulators `accs = scanl D′[f] z xs`, and ONE
//!   Delta node for the whole loop, `Share id (ScanL vjp ctx accs xs dz dxs [dv1 .. dvk])`, where
//!   v1..vk are the body's free dual variables (their primals `ctx`, their Deltas dv).
//! - `vjp ((acc, c, v1, .., vk), ct) = (ct_acc, ct_c, ct_v1, .., ct_vk)` is the body's
//!   vector–Jacobian product, obtained by running the body, as a function of (acc, c, v…), through
//!   this same pipeline: D (dual.rs), Delta extraction (§7.1), the symbolic reverse pass with share
//!   (§7.3) and shareToLet (§7.4). A fold nested in the body gets its own vjp the same way.
//! - The transpose of ScanL (a reverse fold, horde-ad's right-to-left scan over the primal
//!   accumulators): with c the cotangent of the n + 1 accumulators, ca_n = c_n and
//!   ca_i = c_i + (vjp ((acc_i, x_i, v), ca_{i+1})).acc; x_i's cotangent is the vjp's `c` part at
//!   ca_{i+1}, and each v's the sum of its parts. dz gets ca_0.
//!
//! Cost: the forward pass keeps the n + 1 accumulators (O(n) memory, as horde-ad); the reverse pass
//! runs the body's vjp once per element (dual-arrays), twice in the gradient program (once in the
//! `scanr` of the accumulator cotangents, once for the elements' and free variables' parts).

use super::dual::{is_r, wrapper, Dx};
use super::lang::{index, iota};
use super::symbolic::{extract, share_to_let, vjp_program, Reverse};
use crate::build::*;
use crate::diag::Diagnostic;
use crate::ir::*;
use crate::kit::passes::freshen;
use rustc_hash::FxHashSet as HashSet;

fn refuse(e: &Expr, what: &str) -> Diagnostic {
    Diagnostic::error(e.span, format!("the sequential fold (beyond the paper, §2.3; as horde-ad) has no rule for {what}")).refused()
}

/// `\acc -> \c -> body`: the two parameters and the body.
pub fn scan_fun(f: &Expr) -> Option<(&Name, &Name, &Expr)> {
    let ExprKind::Lam(_, pat_inner) = &f.kind else { return None };
    let (pat, inner) = &**pat_inner;
    let Pat::Var(acc, _) = pat else { return None };
    let ExprKind::Lam(_, pat_body) = &inner.kind else { return None };
    let (pat, body) = &**pat_body;
    let Pat::Var(c, _) = pat else { return None };
    Some((acc, c, body))
}

/// The body's free variables that are dual (bound to (primal, Delta) pairs), in order of first use.
fn free_duals(body: &Expr, dual: &HashSet<u32>) -> Vec<Name> {
    let mut out: Vec<Name> = vec![];
    let mut stack = vec![body];
    while let Some(x) = stack.pop() {
        if let ExprKind::Var(n) = &x.kind {
            if dual.contains(&n.id) && !out.iter().any(|o| o.id == n.id) {
                out.push(n.clone());
            }
        }
        // left to right
        let mut cs = children(x);
        cs.reverse();
        stack.extend(cs);
    }
    out
}

/// The type of each free variable `v`, read from its occurrences in `body`.
fn type_of(body: &Expr, v: &Name) -> Type {
    let mut stack = vec![body];
    while let Some(x) = stack.pop() {
        if matches!(&x.kind, ExprKind::Var(n) if n.id == v.id) {
            return x.ty.clone();
        }
        each_child(x, &mut |c| stack.push(c));
    }
    Type::Unknown
}

/// The body's vjp: `\((acc, c, v1, .., vk), ct) -> (ct_acc, ct_c, ct_v1, .., ct_vk)`, by this
/// pipeline (D, extraction, the symbolic reverse pass with share, shareToLet) on
/// `\(acc, c, v1, .., vk) -> body`.
fn body_vjp(acc: &Name, c: &Name, body: &Expr, frees: &[Name], tys: (&Type, &Type), fresh: &mut Fresh) -> Result<Expr, Diagnostic> {
    let params: Vec<Name> = [acc.clone(), c.clone()].into_iter().chain(frees.iter().cloned()).collect();
    let mut ptys = vec![tys.0.clone(), tys.1.clone()];
    ptys.extend(frees.iter().map(|v| type_of(body, v)));
    let mut main = lam(ptuple(params.iter().map(pvar).collect()), body.clone()).with_ty(Type::fun(Type::tuple(ptys), tys.0.clone()));
    // its own binders: the vjp sits beside the primal scanl in one program
    freshen(&mut main, fresh);
    let grad = wrapper(&main, tys.0, fresh)?;
    let ex = extract(&grad, fresh)?;
    let mut rev = Reverse::new(true);
    let grads = rev.run(&ex.roots, ex.params.len(), fresh)?;
    let grads = rev.expand_all(grads);
    // shareToLet over the gradient tuple (Fig. 20): a vjp is a plain program
    // (`shared i` read as the share i written out before it, as gradient.rs's shareToLet does)
    let present: Vec<Expr> = grads
        .iter()
        .flatten()
        .map(|g| {
            let mut g = g.clone();
            super::gradient::resolve_shared(&mut g);
            g
        })
        .collect();
    let (binds, mut terms) = share_to_let(present, fresh);
    let grads = grads.into_iter().map(|g| g.map(|_| terms.remove(0))).collect();
    Ok(vjp_program(&ex, binds.into_iter().map(|(_, x, t)| (x, t)).collect(), grads))
}

impl Dx<'_> {
    /// D[scanl f z xs] = do (z', dz) ← D[z]; (xs', dxs) ← D[xs]; let accs = scanl D′[f] z' xs';
    /// id ← genID; pure (accs, Share id (ScanL vjp (v1', .., vk') accs xs' dz dxs [dv1, .., dvk])).
    pub fn d_scanl(&mut self, e: &Expr, f: &Expr, z: &Expr, xs: &Expr) -> Result<Expr, Diagnostic> {
        let Some((acc, c, body)) = scan_fun(f) else { return Err(refuse(f, "a function that is not `\\acc c -> t`")) };
        let (acc_ty, c_ty) = match &f.ty {
            Type::Fun(ar) => match &ar.1 {
                Type::Fun(cr) => (ar.0.clone(), cr.0.clone()),
                _ => return Err(refuse(f, "this function's type")),
            },
            _ => return Err(refuse(f, "this function's type")),
        };
        if !is_r(&acc_ty) {
            return Err(refuse(e, "an accumulator that is not a real or an array of reals"));
        }
        let frees = free_duals(body, &self.dual);
        let vjp = body_vjp(acc, c, body, &frees, (&acc_ty, &c_ty), self.fresh)?;
        let (z1, dz, xs1, dxs, accs, id) =
            (self.fresh.name("z"), self.fresh.name("dz"), self.fresh.name("xs"), self.fresh.name("dxs"), self.fresh.name("accs"), self.fresh.name("id"));
        let mz = self.d(z)?;
        // an array of discrete elements (Int) has a Zero Delta: its cotangent is dropped
        let mxs = if is_r(&xs.ty) {
            self.d(xs)?
        } else {
            let p = self.d_prime(xs);
            pure(pair(p.clone(), app(builtin("Zero"), p)))
        };
        let f1 = self.d_prime(f);
        let ctx = tuple(frees.iter().map(|v| fst(var(v))).collect());
        let dvs = Expr::gen(ExprKind::Array(frees.iter().map(|v| snd(var(v))).collect()));
        let delta = apps(builtin("ScanL"), [vjp, ctx, var(&accs), var(&xs1), var(&dz), var(&dxs), dvs]);
        let k = bind(pvar(&id), app(builtin("genID"), unit()), pure(pair(var(&accs), apps(builtin("Share"), [var(&id), delta]))));
        let k = let_(pvar(&accs), prim(Prim::Scanl, vec![f1, var(&z1), var(&xs1)]), k);
        Ok(bind(ppair(pvar(&z1), pvar(&dz)), mz, bind(ppair(pvar(&xs1), pvar(&dxs)), mxs, k)))
    }
}

/// `vjp ((index accs i, index xs i, v1, .., vk), k)`, with a copy of `vjp` of its own binders.
fn step(vjp: &Expr, ctx: &[Expr], accs: &Expr, xs: &Expr, i: Expr, k: Expr, fresh: &mut Fresh) -> Expr {
    let mut f = vjp.clone();
    freshen(&mut f, fresh);
    let args: Vec<Expr> = [index(accs.clone(), i.clone()), index(xs.clone(), i)].into_iter().chain(ctx.iter().cloned()).collect();
    app(f, pair(tuple(args), k))
}

/// The cotangents of the n + 1 accumulators, from `c` (theirs as the scan's output): ca_n = c_n,
/// ca_i = c_i + vjp_acc(i, ca_{i+1}), i.e. `scanr (\i k -> plus (index c i) (vjp …).0) (index c n) (iota n)`.
pub fn acc_cotangents(vjp: &Expr, ctx: &[Expr], accs: &Expr, xs: &Expr, c: Expr, fresh: &mut Fresh) -> Expr {
    let (i, k, ga) = (fresh.name("i"), fresh.name("k"), fresh.name("ga"));
    let n = prim(Prim::Length, vec![xs.clone()]);
    let pat = ptuple(std::iter::once(pvar(&ga)).chain((0..1 + ctx.len()).map(|_| pwild())).collect());
    // c named outside the lambda: a shared cotangent is computed where it first occurs when the
    // program runs, and a lambda's body runs later than its argument beside it
    let cv = fresh.name("ct");
    let body = let_(pat, step(vjp, ctx, accs, xs, var(&i), var(&k), fresh), apps(builtin("plus"), [index(var(&cv), var(&i)), var(&ga)]));
    let_(pvar(&cv), c, prim(Prim::Scanr, vec![lam(pvar(&i), lam(pvar(&k), body)), index(var(&cv), n.clone()), iota(n)]))
}

/// Every element's vjp at its accumulator cotangent: `build n (\i -> vjp ((acc_i, x_i, v…), index cas (i + 1)))`.
pub fn vjps(vjp: &Expr, ctx: &[Expr], accs: &Expr, xs: &Expr, cas: Expr, fresh: &mut Fresh) -> Expr {
    let (i, cv) = (fresh.name("i"), fresh.name("cas"));
    let next = index(var(&cv), prim(Prim::Add, vec![var(&i), int(1)]));
    let body = step(vjp, ctx, accs, xs, var(&i), next, fresh);
    let_(pvar(&cv), cas, prim(Prim::Build, vec![prim(Prim::Length, vec![xs.clone()]), lam(pvar(&i), body)]))
}

/// Part `j` of each of the vjps `gs` (of `width` parts): the array of them (the elements'
/// cotangent), or, for a free variable, their sum from `zerosLike v` (its shape even when empty).
pub fn part(gs: Expr, j: usize, width: usize, sum_from: Option<Expr>, fresh: &mut Fresh) -> Expr {
    let g = fresh.name("g");
    let pat = ptuple((0..width).map(|q| if q == j { pvar(&g) } else { pwild() }).collect());
    match sum_from {
        None => prim(Prim::Map, vec![lam(pat, var(&g)), gs]),
        Some(v) => {
            let a = fresh.name("a");
            let f = lam(pvar(&a), lam(pat, apps(builtin("plus"), [var(&a), var(&g)])));
            prim(Prim::Fold, vec![f, app(builtin("zerosLike"), v), gs])
        }
    }
}
