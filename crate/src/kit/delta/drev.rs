//! The monadic translation Drev (Krawiec et al. §7.1, Fig. 9; Fig. 14 for any primitive): a standard
//! monadic translation into the state monad M, in which each primitive binds the Delta it builds with
//! `deltaLet` and returns only `Var id`, so that Deltas are copied without losing sharing. The array
//! paper's D with IdGen (Smeding et al. §2.5, Fig. 3) is the same translation rule for rule except at
//! primitives, where the Delta is named in place: `id ← genID; return (r, Share id d)` (`Naming`).
//! The IR has one monad type constructor, `M`; for Fig. 3 it is the paper's `IdGen`. The structural
//! rules are the one monadic lifting's (kit/monadic.rs); this file gives its rule for reals.

use super::{delta_type, stamp};
use super::dual::{combine, DeltaCompanion};
use crate::build::*;
use crate::deriv::Partial;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::kit::monad_laws::Simplifier;
pub use crate::kit::monadic::m_ty as m_type;
use crate::kit::monadic::{Monadic, Operands, RealRule};
use crate::kit::rewrite::Trace;

/// `Drev{A}` (Fig. 9): R ↦ R × Delta, A → B ↦ Drev{A} → M Drev{B}, homomorphic elsewhere.
pub fn drev_type(t: &Type) -> Type {
    DrevRule(Naming::DeltaLet).dtype(t)
}

/// How a primitive names the Delta it builds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// Krawiec Fig. 9: `u ← deltaLet d; pure (r, Var u)` (a local binding).
    DeltaLet,
    /// The array paper's Fig. 3: `id ← genID; pure (r, Share id d)` (global sharing).
    Share,
}

/// Drev's rule for reals in the one monadic lifting (kit/monadic.rs): Drev{R} = R × Delta, and every
/// operand bound (`Operands::Bound`), as Fig. 9 prints it.
struct DrevRule(Naming);

impl RealRule for DrevRule {
    fn real_ty(&self, _: &Type) -> Type {
        Type::tup(vec![Type::Real, delta_type()])
    }
    fn operands(&self) -> Operands {
        Operands::Bound
    }
    fn names(&self, arity: usize) -> (&'static [(&'static str, &'static str)], &'static str) {
        (if arity == 1 { &[("x", "u1")] } else { &[("x", "u1"), ("y", "u2")] }, "r")
    }
    /// Drev{r} = pure (r, Zero)
    fn constant(&self, _: &mut Fresh, r: Expr) -> Expr {
        pure(pair(r, builtin("Zero")))
    }
    fn op(&self, fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial]) -> Expr {
        self.op_at(fr, y, ds, partials, Span::NONE)
    }
    /// Fig. 9 gives Drev{+R} = pure λ((x, u1), (y, u2)). do { u3 ← deltaLet (Add u1 u2); pure (x + y,
    /// Var u3) } and Drev{×R} likewise with Add (Scale y u1) (Scale x u2); Fig. 14 gives the rule for any
    /// primitive from its partial derivatives (deriv.rs). The array paper's Fig. 3 names the Delta in
    /// place: `id ← genID; pure (r, Share id d)`. deltaLet (genID) and the Delta carry the operation's
    /// span (for the graph and trace).
    fn op_at(&self, fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial], span: Span) -> Expr {
        let share = self.0 == Naming::Share;
        let id = fr.name(if share { "id" } else if ds.len() == 1 { "u2" } else { "u3" });
        let mut delta = combine(partials, ds, &DeltaCompanion);
        stamp(&mut delta, span);
        let (gen, named) = if share {
            (at(builtin("genID"), span), at(apps(builtin("Share"), [var(&id), delta]), span))
        } else {
            (at(app(builtin("deltaLet"), delta), span), at(app(builtin("Var"), var(&id)), span))
        };
        bind(pvar(&id), gen, pure(pair(y, named)))
    }
}

/// What Drev refuses in a source: `do` and `pure` (Fig. 1: only AD's output has them), and a
/// recursive binding of a non-function. Walked with a stack (a long program is one deep chain).
fn refuse(p: &Program) -> Result<(), Diagnostic> {
    let mut stack: Vec<&Expr> = p.defs.iter().map(|d| &d.body).collect();
    while let Some(e) = stack.pop() {
        match &e.kind {
            ExprKind::Bind(..) | ExprKind::Pure(_) => {
                return Err(Diagnostic::error(e.span, "do and pure appear only in the output of AD (Fig. 1): the source cannot use them"))
            }
            ExprKind::LetRec(fs_x) => {
                let (fs, _) = &**fs_x;
                if let Some(f) = fs.iter().find(|f| !matches!(f.body.kind, ExprKind::Lam(..))) {
                    return Err(Diagnostic::error(f.body.span, "a recursive binding must be a function"));
                }
            }
            _ => {}
        }
        each_child(e, &mut |c| stack.push(c));
    }
    Ok(())
}

/// Translates every definition: a function `f = λx. e` becomes `f = λx. Drev{e}` (Drev{f} = pure f
/// at its uses, as §7.5's separate compilation has it); any other `c = e` becomes `c = Drev{e}`.
/// Each definition is then simplified by the monad laws (kit/monad_laws.rs), whose trace is returned.
pub(crate) fn drev_program(p: &Program, fr: &mut Fresh, naming: Naming) -> Result<(Program, Trace), Diagnostic> {
    let mut out = drev_lifted(p, fr, naming)?;
    let bodies: Vec<Expr> = out.defs.iter_mut().map(|d| std::mem::replace(&mut d.body, Expr::gen(ExprKind::Unit))).collect();
    let mut laws = Simplifier::new(fr);
    for (d, body) in out.defs.iter_mut().zip(bodies) {
        d.body = laws.def(&d.name.text, body)?;
        d.scheme = None;
    }
    Ok((out, laws.finish()))
}

/// Drev of every definition, before the monad laws.
pub(crate) fn drev_lifted(p: &Program, fr: &mut Fresh, naming: Naming) -> Result<Program, Diagnostic> {
    refuse(p)?;
    let rule = DrevRule(naming);
    let mut lifting = Monadic::new(p, &rule);
    lifting.fr.next_id = fr.next_id;
    let out = lifting.program(p);
    fr.next_id = lifting.fr.next_id;
    Ok(out)
}
