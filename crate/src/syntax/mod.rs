//! The surface language: lexer, parser and name resolver, producing the one IR (`crate::ir`).
//!
//! `parse_program` = lex + parse (to IR whose names are all unresolved `Name::global`s) + resolve
//! (fresh ids for binders, primitives saturated or eta-expanded, `fst`/`inl`/... turned into their
//! IR forms, unknown names reported).
//!
//! Decisions a reader may want to know:
//! - `fst snd inl inr pure not` and the named primitives are ordinary names to the parser; the
//!   resolver gives them their meaning unless a local binding shadows them. So `inl f x` is `(inl f) x`
//!   and `map fst xs` is `map (\x -> fst x) xs`. Top-level definitions may not reuse these names.
//! - In types, `A + B + C` is `A + (B + C)`, like `->` (both right-associative).
//! - `inf` and `nan` are real literals (so printed values read back); `-inf` is `Neg(inf)`.
//! - Depth: the parser recurses only where the syntax nests to the left or inside brackets; it counts
//!   that recursion, and an iterative pass afterwards measures the depth of the tree it built, so
//!   both are refused beyond `limits::max_nesting()` with a message naming the `nesting` budget.

pub mod lexer;
pub mod parser;
pub mod resolve;

#[cfg(test)]
mod tests;

use crate::diag::{Diagnostic, Span};
use crate::ir::{Expr, ExprKind, Prim, Program, Type};
use crate::value::Value;
use std::rc::Rc;

/// Parses and resolves a whole program.
pub fn parse_program(src: &str) -> Result<Program, Vec<Diagnostic>> {
    parse_program_with(src, &|_| false)
}

/// Like `parse_program`; names for which `builtins(name)` holds and which are not bound (locally or
/// at top level) become `ExprKind::Builtin(name)`.
pub fn parse_program_with(src: &str, builtins: &dyn Fn(&str) -> bool) -> Result<Program, Vec<Diagnostic>> {
    let raw = parser::parse_program_raw(src)?;
    resolve::resolve_program(raw, builtins)
}

/// Parses and resolves a closed expression (free names other than primitives are errors).
pub fn parse_expr(src: &str) -> Result<Expr, Vec<Diagnostic>> {
    let raw = parser::parse_expr_raw(src)?;
    resolve::resolve_closed_expr(raw)
}

/// Parses a type.
pub fn parse_type(src: &str) -> Result<Type, Vec<Diagnostic>> {
    parser::parse_type_raw(src).map_err(|d| vec![d])
}

/// The value of a closed constant expression: literals, `()`, tuples, `inl`/`inr`, unary minus on
/// numbers and annotations. Anything else is the located error "not a constant value".
pub fn value_of(e: &Expr) -> Result<Value, Diagnostic> {
    let not_const = |e: &Expr| {
        Diagnostic::error(
            e.span,
            "not a constant value: expected a number, `true`, `false`, `()`, a tuple, an array `[...]`, or `inl`/`inr` of a constant",
        )
    };
    Ok(match &e.kind {
        ExprKind::Real(r) => Value::Real(*r),
        ExprKind::Int(i) => Value::Int(*i),
        ExprKind::Bool(b) => Value::Bool(*b),
        ExprKind::Unit => Value::Unit,
        ExprKind::Tuple(es) => Value::tuple(es.iter().map(value_of).collect::<Result<_, _>>()?),
        ExprKind::Array(es) => Value::Array(es.iter().map(value_of).collect::<Result<_, _>>()?),
        ExprKind::Inl(x) => Value::Inl(Rc::new(value_of(x)?)),
        ExprKind::Inr(x) => Value::Inr(Rc::new(value_of(x)?)),
        ExprKind::Ann(x_x) => { let (x, _) = &**x_x; value_of(x)? },
        ExprKind::Prim(Prim::Neg, args) if args.len() == 1 => match value_of(&args[0])? {
            Value::Real(r) => Value::Real(-r),
            Value::Int(i) => Value::Int(
                i.checked_neg()
                    .ok_or_else(|| Diagnostic::error(e.span, "integer constant is out of range"))?,
            ),
            _ => return Err(not_const(e)),
        },
        _ => return Err(not_const(e)),
    })
}

/// The message of the nesting-budget error.
pub(crate) fn nesting_error(span: Span) -> Diagnostic {
    Diagnostic::error(
        span,
        format!(
            "program nested too deeply (more than {} levels; the `nesting` budget)",
            crate::limits::max_nesting()
        ),
    )
}

pub(crate) fn bracket_error(span: Span) -> Diagnostic {
    if crate::limits::max_brackets() == crate::limits::max_nesting() {
        return nesting_error(span);
    }
    Diagnostic::error(
        span,
        format!("brackets nested too deeply (more than {}; the `nesting` budget for brackets)", crate::limits::max_brackets()),
    )
}

/// Calls `f` on each direct subexpression of `e`.
pub(crate) fn for_each_child<'a>(e: &'a Expr, mut f: impl FnMut(&'a Expr)) {
    use ExprKind::*;
    match &e.kind {
        Var(_) | Real(_) | Int(_) | Bool(_) | Unit | Builtin(_) => {}
        Fst(b) | Snd(b) | Inl(b) | Inr(b) | Pure(b) => f(b),
        Lam(_, p_b) => f(&p_b.1),
        Ann(b_t) => f(&b_t.0),
        App(a_b) | Par(a_b) => {
            let (a, b) = &**a_b;
            f(a);
            f(b)
        }
        Let(ab_x) | Bind(ab_x) => {
            let (_, ab) = &**ab_x;
            f(&ab.0);
            f(&ab.1)
        }
        LetRec(defs_b) => {
            let (defs, b) = &**defs_b;
            defs.iter().for_each(|d| f(&d.body));
            f(b)
        }
        Tuple(es) | Array(es) | Prim(_, es) => es.iter().for_each(f),
        Case(c) => {
            let (s, _, a, _, b) = &**c;
            f(s);
            f(a);
            f(b)
        }
        If(c_a_b) => {
            let (c, a_b) = &**c_a_b;
            let (a, b) = a_b;
            f(c);
            f(a);
            f(b)
        }
    }
}

/// Checks, without recursion, that `e` is nested no deeper than `max` levels.
pub(crate) fn check_depth(e: &Expr, max: usize) -> Result<(), Diagnostic> {
    let mut stack = vec![(e, 1usize)];
    while let Some((e, d)) = stack.pop() {
        if d > max {
            return Err(nesting_error(e.span));
        }
        for_each_child(e, |c| stack.push((c, d + 1)));
    }
    Ok(())
}

/// Drops a possibly very deep expression without recursing on the native stack.
pub(crate) fn drop_deep(e: Expr) {
    use ExprKind::*;
    let mut stack = vec![e];
    let take = |b: &mut Expr| std::mem::replace(b, Expr::gen(Unit));
    while let Some(mut e) = stack.pop() {
        match &mut e.kind {
            Fst(b) | Snd(b) | Inl(b) | Inr(b) | Pure(b) => stack.push(take(b)),
            Lam(_, p_b) => stack.push(take(&mut p_b.1)),
            Ann(b_t) => stack.push(take(&mut b_t.0)),
            App(a_b) | Par(a_b) => {
                let (a, b) = &mut **a_b;
                stack.push(take(a));
                stack.push(take(b));
            }
            Let(ab_x) | Bind(ab_x) => {
                let (_, ab) = &mut **ab_x;
                let (a, b) = ab;
                for x in [a, b] {
                    stack.push(std::mem::replace(x, Expr::gen(Unit)));
                }
            }
            LetRec(defs_b) => {
                let (defs, b) = &mut **defs_b;
                for d in defs.iter_mut() {
                    stack.push(std::mem::replace(&mut d.body, Expr::gen(Unit)));
                }
                stack.push(take(b));
            }
            Tuple(es) | Array(es) | Prim(_, es) => stack.extend(std::mem::take(es)),
            Case(c) => {
                let (s, _, a, _, b) = &mut **c;
                for x in [s, a, b] {
                    stack.push(std::mem::replace(x, Expr::gen(Unit)));
                }
            }
            If(s_a_b) => {
                let (s, a_b) = &mut **s_a_b;
                stack.push(take(s));
                let (a, b) = a_b;
                for x in [a, b] {
                    stack.push(std::mem::replace(x, Expr::gen(Unit)));
                }
            }
            Var(_) | Real(_) | Int(_) | Bool(_) | Unit | Builtin(_) => {}
        }
        drop(e);
    }
}
