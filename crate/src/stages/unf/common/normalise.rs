//! Conditions before the transform (§7.2): the condition of an `if` is a primal computation, outside
//! the differentiated language, and the rules of both routes take it as given. What a condition may
//! not hold by itself is brought to that form first, instead of being refused:
//! - a let-bound condition `let b = x > 0.0 in … if b …` is propagated into its uses (a boolean is
//!   never a slot of the context: Fig. 2's ground types have no booleans), the comparison then
//!   evaluated where each `if` reads it;
//! - a condition holding lets or function-taking array operations (`if sum (map f a) > x`, `if (let u =
//!   e in u > 0)`) has them let-bound before the `if`: each such real-valued part becomes a let of the
//!   differentiated program whose variable the condition reads (its cotangent is then 0, the exact
//!   derivative of a value used only to choose a branch).
//! All walks use explicit stacks.

use super::jacobian::subst;
use crate::build::Fresh;
use crate::ir::*;
use crate::ir::Prim as P;
use rustc_hash::FxHashMap as HashMap;

fn typed(kind: ExprKind, span: crate::diag::Span, ty: Type) -> Expr {
    Expr { kind, span, ty }
}

/// Whether `e` may stand in a condition as is (no binder, no function-taking array operation).
fn plain(e: &Expr) -> bool {
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        match &x.kind {
            ExprKind::Let(..) | ExprKind::Lam(..) | ExprKind::App(..) => return false,
            ExprKind::Prim(op, _) if takes_function(*op) => return false,
            _ => {}
        }
        each_child(x, &mut |c| stack.push(c));
    }
    true
}

fn takes_function(op: Prim) -> bool {
    matches!(op, P::Map | P::Map2 | P::Reduce | P::Fold | P::Build | P::Scanl | P::Scanr)
}

/// `let b = c in e ~> e[c/b]` for a boolean c, in place.
fn propagate(e: &mut Expr) -> bool {
    let ExprKind::Let(pat_rhs_body) = &mut e.kind else { return false };
    let (pat, rhs_body) = &mut **pat_rhs_body;
    let (rhs, body) = rhs_body;
    let Pat::Var(b, _) = pat else { return false };
    if rhs.ty != Type::Bool {
        return false;
    }
    let mut out = std::mem::replace(body, typed(ExprKind::Unit, e.span, Type::Unit));
    subst(&mut out, &HashMap::from_iter([(b.id, rhs.clone())]));
    *e = out;
    true
}

/// The condition's lets and function-taking array operations, let-bound: the bindings (in order)
/// and what is left of the condition. Err with its span: a boolean such an operation computes
/// (`fold (\b x -> b || x > 0.0) false xs`), which no let may bind (a boolean is never a slot of the
/// context) and which `propagate` would put straight back into the condition, forever.
fn hoist(c: &mut Expr, fr: &mut Fresh, binds: &mut Vec<(Pat, Expr)>) -> Result<(), crate::diag::Span> {
    let mut stack = vec![c];
    while let Some(x) = stack.pop() {
        if propagate(x) {
            stack.push(x);
            continue;
        }
        match &mut x.kind {
            ExprKind::Let(..) => {
                let ExprKind::Let(p_rhs_body) = std::mem::replace(&mut x.kind, ExprKind::Unit) else { unreachable!() };
                let (p, rhs_body) = *p_rhs_body;
                let (rhs, body) = rhs_body;
                binds.push((p, rhs));
                *x = body;
                stack.push(x);
            }
            ExprKind::Prim(op, _) if takes_function(*op) && x.ty == Type::Bool => return Err(x.span),
            ExprKind::Prim(op, _) if takes_function(*op) => {
                let t = fr.name("t");
                let v = typed(ExprKind::Var(t.clone()), x.span, x.ty.clone());
                let e = std::mem::replace(x, v);
                binds.push((Pat::Var(t, e.span), e));
            }
            _ => stack.extend(children_mut(x)),
        }
    }
    Ok(())
}

/// The body with every boolean let propagated and every condition made plain (see the module); Err
/// with its span: a condition's boolean computed by a function-taking array operation (`hoist`).
pub fn conditions(body: &mut Expr, fr: &mut Fresh) -> Result<(), crate::diag::Span> {
    let mut stack = vec![body];
    while let Some(e) = stack.pop() {
        if propagate(e) {
            stack.push(e);
            continue;
        }
        if let ExprKind::If(c_x) = &mut e.kind {
            let (c, _) = &mut **c_x;
            if !plain(c) {
                let mut binds = vec![];
                hoist(c, fr, &mut binds)?;
                let inner = std::mem::replace(e, typed(ExprKind::Unit, crate::diag::Span::NONE, Type::Unit));
                let (span, ty) = (inner.span, inner.ty.clone());
                *e = binds.into_iter().rev().fold(inner, |acc, (p, rhs)| typed(ExprKind::Let(Box::new((p, (rhs, acc)))), span, ty.clone()));
                stack.push(e);
                continue;
            }
        }
        stack.extend(children_mut(e));
    }
    Ok(())
}
