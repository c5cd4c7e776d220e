//! Administrative simplification of Drev's output by the monad laws (not in the paper; note §8.13).
//! Kept as it was written for `krawiec/monadic`; a rewrite engine is to take it over.

use crate::build::*;
use crate::diag::Span;
use crate::ir::*;
use std::collections::HashMap;


/// Administrative simplification by the monad laws (not in the paper; note §8.13), so that the
/// printed program reads like the figures rather than a thicket of `do { x ← pure x; ... }`:
/// - `do { x ← pure v; m }` = `m[v/x]` for a variable or literal v, or a tuple of them if x is used once;
/// - `do { p ← do { q ← m1; m2 }; m }` = `do { q ← m1; p ← m2; m }`, and likewise through a `let`;
/// - `do { x ← m; pure x }` = `m`.
/// Names are unique in a program, so substitution and re-association never capture. One pass, with
/// the substitution carried in an environment.
pub(crate) fn simplify_owned(e: Expr) -> Expr {
    let mut cx = Simp { env: HashMap::new(), uses: HashMap::new() };
    count_uses(&e, &mut cx.uses);
    simp(e, &mut cx)
}

struct Simp {
    /// Substitutions: local id ↦ the atom (or tuple of atoms) it stands for.
    env: HashMap<u32, Expr>,
    /// How often each local id occurs.
    uses: HashMap<u32, u32>,
}

/// Counts the occurrences of each local, iteratively (a long run is one deep do block).
fn count_uses(e: &Expr, uses: &mut HashMap<u32, u32>) {
    let mut stack: Vec<&Expr> = vec![e];
    while let Some(e) = stack.pop() {
        if let ExprKind::Var(n) = &e.kind {
            if !n.is_global() {
                *uses.entry(n.id).or_default() += 1;
            }
        }
        each_child(e, &mut |c| stack.push(c));
    }
}

fn is_atom(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Var(_) | ExprKind::Int(_) | ExprKind::Real(_) | ExprKind::Bool(_) | ExprKind::Unit)
}

/// `(a, b)` of atoms: substituted for a variable used once (it only allocates, so moving it under a
/// λ repeats no real work and no effect).
fn is_atom_tuple(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Tuple(es) if es.iter().all(is_atom))
}

/// Takes the expression by value, so that the pass is linear (no subtree is copied).
fn simp(mut e: Expr, env: &mut Simp) -> Expr {
    match e.kind {
        ExprKind::Var(ref n) if !n.is_global() => match env.env.get(&n.id) {
            Some(v) => at(v.clone(), e.span),
            None => e,
        },
        ExprKind::Bind(..) => simp_do(e, env),
        _ => {
            each_child_mut(&mut e, &mut |c| {
                let taken = std::mem::replace(c, Expr::gen(ExprKind::Unit));
                *c = simp(taken, env);
            });
            e
        }
    }
}

/// A statement of a flattened do block.
enum Stmt {
    Bind(Pat, Expr, Span),
    Let(Pat, Expr, Span),
}

/// A do block, statement by statement without recursion along it (the block of a long run is as
/// long as the run): each statement's action is simplified, its own statements are spliced in
/// (associativity), `x ← pure v` is substituted away, and the block is rebuilt from the end, where
/// `do { x ← m; pure x }` becomes `m` (right identity).
fn simp_do(e: Expr, env: &mut Simp) -> Expr {
    let mut stmts: Vec<Stmt> = vec![];
    let tail = flatten(e, env, &mut stmts);
    let mut acc = tail;
    for st in stmts.into_iter().rev() {
        acc = match st {
            Stmt::Bind(p, m, sp) => {
                let identity = matches!((&p, &acc.kind), (Pat::Var(x, _), ExprKind::Pure(v)) if matches!(&v.kind, ExprKind::Var(y) if y == x));
                if identity {
                    m
                } else {
                    at(bind(p, m, acc), sp)
                }
            }
            Stmt::Let(p, e1, sp) => at(let_(p, e1, acc), sp),
        };
    }
    acc
}

/// Pushes the simplified statements of the do block `e` onto `stmts` and returns its final action.
/// A block nested in a statement's action is flattened straight into the same list, not rebuilt and
/// then taken apart again: rebuilding at every level made `x + x + … + x` quadratic.
fn flatten(e: Expr, env: &mut Simp, stmts: &mut Vec<Stmt>) -> Expr {
    let mut cur = e;
    loop {
        let (p, m, k, span) = match cur.kind {
            ExprKind::Bind(p, m, k) => (p, m, k, cur.span),
            kind => return simp(Expr { kind, span: cur.span, ty: cur.ty }, env),
        };
        let m = action(*m, env, stmts);
        match (p, m.kind) {
            (Pat::Var(x, _), ExprKind::Pure(v)) if is_atom(&v) || (is_atom_tuple(&v) && env.uses.get(&x.id).copied().unwrap_or(0) <= 1) => {
                // Each atom now also occurs wherever x did.
                let n = env.uses.get(&x.id).copied().unwrap_or(0);
                let mut atoms = vec![];
                each_atom_var(&v, &mut atoms);
                for a in atoms {
                    *env.uses.entry(a).or_default() += n.saturating_sub(1);
                }
                env.env.insert(x.id, *v);
            }
            // Kept as a statement `p ← pure e` rather than `let p = e in ...`: a let inside a do
            // would nest the rest of the block one level deeper each time, and the printed program
            // of a long run would grow quadratically.
            (p, ExprKind::Pure(v)) => stmts.push(Stmt::Bind(p, pure(*v), span)),
            (p, kind) => stmts.push(Stmt::Bind(p, Expr { kind, span: m.span, ty: m.ty }, span)),
        }
        cur = *k;
    }
}

/// A statement's action, simplified, with the statements of its own block (and of the lets and binds
/// heading what remains) spliced onto `stmts` (associativity); returns what is left to bind.
fn action(m: Expr, env: &mut Simp, stmts: &mut Vec<Stmt>) -> Expr {
    let base = stmts.len();
    let mut m = if matches!(m.kind, ExprKind::Bind(..)) {
        let tail = flatten(m, env, stmts);
        // The inner block's own right identity, as its rebuilding would have applied it.
        let identity = stmts.len() > base
            && matches!((stmts.last(), &tail.kind), (Some(Stmt::Bind(Pat::Var(x, _), _, _)), ExprKind::Pure(v)) if matches!(&v.kind, ExprKind::Var(y) if y == x));
        match identity.then(|| stmts.pop()).flatten() {
            Some(Stmt::Bind(_, m, _)) => m,
            _ => tail,
        }
    } else {
        simp(m, env)
    };
    loop {
        match m.kind {
            ExprKind::Bind(q, m1, rest) => {
                stmts.push(Stmt::Bind(q, *m1, m.span));
                m = *rest;
            }
            ExprKind::Let(q, e1, rest) => {
                stmts.push(Stmt::Let(q, *e1, m.span));
                m = *rest;
            }
            kind => return Expr { kind, span: m.span, ty: m.ty },
        }
    }
}

fn each_atom_var(e: &Expr, out: &mut Vec<u32>) {
    match &e.kind {
        ExprKind::Var(n) if !n.is_global() => out.push(n.id),
        ExprKind::Tuple(es) => es.iter().for_each(|x| each_atom_var(x, out)),
        _ => {}
    }
}
