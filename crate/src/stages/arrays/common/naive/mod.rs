//! What the stages of Part B (§4, the naive array extensions) share:
//! - `delta`: the Delta terms (scalar, Fig. 3, and the array constructors of §4.2–4.3) as runtime
//!   values with their constructor builtins;
//! - `eval`: the reverse pass of Fig. 5 lifted to array cotangents, with Index transposed into a
//!   one-hot array (§4.4) or in place;
//! - `lower`: the surface array operations expressed through build, index, length, sum, replicate;
//! - `translate`: the two translations (arrays of dual numbers, dual arrays) and the wrapper.

pub mod delta;
pub mod eval;
pub mod lower;
pub mod translate;

use crate::diag::Diagnostic;
use crate::ir::*;
use crate::stage::Source;

/// Refuses what dual arrays cannot represent: an array whose elements are neither reals, arrays of
/// reals, nor free of reals (an array of tuples, sums or functions), named and located.
pub fn accepts_dual_arrays(src: &Source) -> Result<(), Diagnostic> {
    fn bad(t: &Type) -> Option<&Type> {
        match t {
            t if t.as_array().is_some() => {
                let e = t.as_array().expect("checked");
                if *e == Type::Real || translate::real_array(e) || !crate::kit::polytypic::has_real(e) && !matches!(e, Type::Fun(..) | Type::Lin(..)) {
                    bad(e)
                } else {
                    Some(t)
                }
            }
            Type::Tuple(ts) => ts.iter().find_map(bad),
            Type::Sum(ab) | Type::Fun(ab) | Type::Lin(ab) => bad(&ab.0).or_else(|| bad(&ab.1)),
            _ => None,
        }
    }
    // an explicit stack: a long let chain is as deep as the program is long
    let mut stack: Vec<&Expr> = src.program.defs.iter().map(|d| &d.body).collect();
    while let Some(e) = stack.pop() {
        if let Some(t) = bad(&e.ty) {
            return Err(Diagnostic::error(
                e.span,
                format!("dual arrays (§4.2) pair an array of reals with one Delta; this expression has an array of another kind, {}", crate::print::print_type(t, &crate::print::PrintOptions::ascii())),
            )
            .refused());
        }
        each_child(e, &mut |c| stack.push(c));
    }
    if let Some(t) = bad(src.input_type).or_else(|| bad(src.output_type)) {
        let span = src.program.def("main").map(|d| d.span).unwrap_or(crate::diag::Span::NONE);
        return Err(Diagnostic::error(span, format!("dual arrays (§4.2) need main's arrays to hold reals or discrete values, not {}", crate::print::print_type(t, &crate::print::PrintOptions::ascii()))));
    }
    Ok(())
}

/// The source must be the surface language: no target constructs (`do`, `pure`, builtins), and a
/// local recursive definition a function (the monadic translation makes functions values).
pub fn accepts_source(src: &Source) -> Result<(), Diagnostic> {
    let mut stack: Vec<&Expr> = src.program.defs.iter().map(|d| &d.body).collect();
    while let Some(e) = stack.pop() {
        match &e.kind {
            ExprKind::Builtin(n) => return Err(Diagnostic::error(e.span, format!("`{n}` is a target construct, not source language"))),
            ExprKind::Bind(..) | ExprKind::Pure(_) => return Err(Diagnostic::error(e.span, "monadic `do`/`pure` are target constructs, not source language")),
            ExprKind::LetRec(fs_x) => {
                let (fs, _) = &**fs_x;
                if let Some(f) = fs.iter().find(|f| !matches!(crate::kit::monadic::strip_ann(&f.body).kind, ExprKind::Lam(..))) {
                    return Err(Diagnostic::error(f.span, "a local recursive definition must be a function"));
                }
            }
            _ => {}
        }
        each_child(e, &mut |c| stack.push(c));
    }
    Ok(())
}

/// The lowered source (lower.rs) as a view beside the printed program (when the stage is shown).
pub fn lowered_views(p: &Program) -> Vec<crate::stage::View> {
    if !crate::stage::shown() {
        return vec![];
    }
    let mut shown = p.clone();
    shown.expects.clear();
    shown.input = None;
    shown.seed = None;
    let text = crate::print::print_program(&shown, &crate::print::PrintOptions::unicode());
    vec![crate::stage::View { name: "lowered source (build, !, length, sum, replicate)".into(), text, ..Default::default() }]
}
