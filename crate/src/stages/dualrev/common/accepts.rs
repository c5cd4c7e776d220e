//! The chain's one check of the source: the scalar language, no target constructs.

use crate::diag::Diagnostic;
use crate::ir::*;
use crate::stage::Source;
use crate::kit::monadic::strip_ann;

/// The source must be the scalar language: no target constructs.
pub fn accepts_source(src: &Source) -> Result<(), Diagnostic> {
    fn go(e: &Expr) -> Result<(), Diagnostic> {
        match &e.kind {
            ExprKind::Builtin(n) => return Err(Diagnostic::error(e.span, format!("`{n}` is a target construct, not source language"))),
            ExprKind::Bind(..) | ExprKind::Pure(_) => {
                return Err(Diagnostic::error(e.span, "monadic `do`/`pure` are target constructs, not source language"))
            }
            ExprKind::LetRec(fs_x) => {
                let (fs, _) = &**fs_x;
                for f in fs.iter() {
                    if !matches!(strip_ann(&f.body).kind, ExprKind::Lam(..)) {
                        return Err(Diagnostic::error(f.span, "a local recursive definition must be a function"));
                    }
                }
            }
            _ => {}
        }
        let mut r = Ok(());
        each_child(e, &mut |c| {
            if r.is_ok() {
                r = go(c)
            }
        });
        r
    }
    for d in &src.program.defs {
        go(&d.body)?;
    }
    Ok(())
}
