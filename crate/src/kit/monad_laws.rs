//! Administrative simplification by the monad laws (not in the papers; note §8.13), so that a
//! monadic lifting's printed program reads like the figures rather than a thicket of
//! `do { x ← pure x; … }`. Three named rules on the rewrite engine's `blocks` strategy:
//! - left identity: `do { x ← pure v; m }` = `m[v/x]` for a variable or literal v, or a tuple of them
//!   if x is used once (a tuple only allocates, so moving it under a λ repeats no work and no effect);
//! - associativity: `do { p ← do { q ← m1; m2 }; m }` = `do { q ← m1; p ← m2; m }`, likewise through a `let`;
//! - right identity: `do { x ← m; pure x }` = `m`.
//!
//! A statement `p ← pure e` that no law removes stays a statement rather than becoming
//! `let p = e in …`: a let inside a do would nest the rest of the block one level deeper each time,
//! and the printed program of a long run would grow quadratically.

use crate::build::Fresh;
use crate::diag::Diagnostic;
use crate::ir::{Expr, ExprKind, Pat};
use crate::kit::rewrite::{Blocks, Budget, LinkRule, Linked, RewriteCx, Site, Stmt, Trace};

/// The three laws, in the order they are tried.
pub const MONAD_LAWS: [LinkRule; 3] = [
    LinkRule { name: "left identity", site: Site::Link, matches: left_identity_matches, apply: left_identity },
    LinkRule { name: "associativity", site: Site::Link, matches: associativity_matches, apply: associativity },
    LinkRule { name: "right identity", site: Site::End, matches: right_identity_matches, apply: right_identity },
];

/// The name of the simplification's trace as a stage's view (the stepper keeps the run's own steps:
/// a long program's laws would bury the backward pass).
pub const VIEW: &str = "monad laws";

/// Steps of the simplification the trace keeps with their text (the rest are counted).
const TRACE_STEPS: usize = 400;

/// A simplification of a program's definitions, one after another, with one trace.
pub struct Simplifier<'f>(Blocks<'static, 'f>);

impl<'f> Simplifier<'f> {
    pub fn new(fresh: &'f mut Fresh) -> Simplifier<'f> {
        // linear in the program, so no budget but the trace's is needed
        let budget = Budget { steps: u64::MAX, visits: u64::MAX, trace_steps: TRACE_STEPS, program_after: false };
        Simplifier(Blocks::new(&MONAD_LAWS, fresh, budget))
    }

    /// The definition `name = e` simplified.
    pub fn def(&mut self, name: &str, e: Expr) -> Result<Expr, Diagnostic> {
        self.0.def(name, e)
    }

    /// Node visits so far (an outcome a test can count: linear in the program).
    pub fn visits(&self) -> u64 {
        self.0.visits()
    }

    pub fn finish(self) -> Trace {
        self.0.finish()
    }
}

fn is_atom(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Var(_) | ExprKind::Int(_) | ExprKind::Real(_) | ExprKind::Bool(_) | ExprKind::Unit)
}

fn is_atom_tuple(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Tuple(es) if es.iter().all(is_atom))
}

/// `x ← pure v` with v an atom, or a tuple of atoms and x used at most once.
fn left_identity_matches(e: &Expr, cx: &RewriteCx) -> bool {
    match &e.kind {
        ExprKind::Bind(Pat::Var(x, _), m, _) => match &m.kind {
            ExprKind::Pure(v) => is_atom(v) || (is_atom_tuple(v) && cx.uses.get(&x.id).copied().unwrap_or(0) <= 1),
            _ => false,
        },
        _ => false,
    }
}

fn left_identity(e: Expr) -> Linked {
    match Stmt::split(e) {
        Ok((Stmt { pat: Pat::Var(x, _), rhs: Expr { kind: ExprKind::Pure(v), .. }, .. }, rest)) => Linked::Under { x, v: *v, rest },
        Ok((stmt, rest)) => Linked::To(stmt.then(rest)),
        Err(e) => Linked::To(e),
    }
}

/// `p ← m` where m's head is itself a statement (`q ← m1; m2` or `let q = m1 in m2`).
fn associativity_matches(e: &Expr, _: &RewriteCx) -> bool {
    matches!(&e.kind, ExprKind::Bind(_, m, _) if matches!(m.kind, ExprKind::Bind(..) | ExprKind::Let(..)))
}

fn associativity(e: Expr) -> Linked {
    let (stmt, rest) = match Stmt::split(e) {
        Ok(s) => s,
        Err(e) => return Linked::To(e),
    };
    match Stmt::split(stmt.rhs) {
        // q ← m1 moves out; p ← m2 continues
        Ok((head, m2)) => Linked::Hoist { stmt: head, rest: Stmt { rhs: m2, ..stmt }.then(rest) },
        Err(m) => Linked::To(Stmt { rhs: m, ..stmt }.then(rest)),
    }
}

/// `x ← m; pure x`.
fn right_identity_matches(e: &Expr, _: &RewriteCx) -> bool {
    match &e.kind {
        ExprKind::Bind(Pat::Var(x, _), _, k) => matches!(&k.kind, ExprKind::Pure(v) if matches!(&v.kind, ExprKind::Var(y) if y == x)),
        _ => false,
    }
}

fn right_identity(e: Expr) -> Linked {
    match e.kind {
        ExprKind::Bind(_, m, _) => Linked::To(*m),
        kind => Linked::To(Expr { kind, span: e.span, ty: e.ty }),
    }
}
