//! Figs. 5 and 7's rules for reals in the kit's homomorphic dual-number translation
//! (`kit::translate`, Fig. 3's shape): what a real is paired with (its companion: δS in
//! `krawiec/dense`, a Delta term in `krawiec/delta`) is a parameter.

use super::{delta_type, stamp};
use crate::build::*;
use crate::deriv::Partial;
use crate::diag::Span;
use crate::ir::*;
use crate::kit::polytypic::with_real;
use crate::kit::translate::{dual, DualRule};
use crate::stage::{Source, WRAPPER};

/// The wrappers' type `S × δT → T × δS`: the gradient, and (ours) the primal too.
pub(crate) fn wrapper_type(s: &Type, t: &Type) -> Type {
    Type::fun(Type::tup(vec![s.clone(), t.clone()]), Type::tup(vec![t.clone(), s.clone()]))
}

/// What a real is paired with, and how the primitives combine those companions.
pub(crate) trait Companion {
    /// The companion type (δS, Delta).
    fn ty(&self) -> Type;
    /// The companion of a constant (zero_S, Zero).
    fn zero(&self) -> Expr;
    /// `a ⊕ b` / `Add a b`.
    fn add(&self, a: Expr, b: Expr) -> Expr;
    /// `c ⊗ d` / `Scale c d`.
    fn scale(&self, c: Expr, d: Expr) -> Expr;
    /// Names of the first and second argument's (primal, companion) in printed rules ((x, dx), (x, u1), ...).
    fn names(&self) -> &'static [(&'static str, &'static str)];
    /// Whether a constant argument's term is left out (deriv::is_constant): needed where the
    /// companion is a number vector that ∞ · 0 would poison (δS); a `Zero` Delta term is harmless
    /// (eval never multiplies it), so Fig. 7's rules stay as printed.
    fn skips_constants(&self) -> bool {
        false
    }
}

/// `D{A}`: R ↦ R × companion, homomorphic elsewhere (Fig. 5's Drev1_S{R} = R × δS, Fig. 7's
/// Drev2{R} = R × Delta).
pub(crate) fn dual_type(t: &Type, c: &dyn Companion) -> Type {
    with_real(t, &Type::tup(vec![Type::Real, c.ty()]))
}

/// `Σ partial_i ⊗ d_i` with ⊕: One is the companion itself, MinusOne is `(-1.0) ⊗ d` (as in Fig. 12's
/// `Scale (−1.0)`), and no terms is the zero.
pub(crate) fn combine(partials: &[Partial], ds: &[Expr], c: &dyn Companion) -> Expr {
    let mut acc: Option<Expr> = None;
    for (p, d) in partials.iter().zip(ds) {
        let term = match p {
            Partial::One => d.clone(),
            Partial::MinusOne => c.scale(real(-1.0), d.clone()),
            Partial::Times(k) => c.scale(k.clone(), d.clone()),
        };
        acc = Some(match acc {
            None => term,
            Some(a) => c.add(a, term),
        });
    }
    acc.unwrap_or_else(|| c.zero())
}

/// The kit's homomorphic translation (Fig. 3's rules) with Fig. 5's (or Fig. 7's) rules for reals.
struct WithCompanion<'a>(&'a dyn Companion);

impl DualRule for WithCompanion<'_> {
    fn ty(&self, t: &Type) -> Type {
        dual_type(t, self.0)
    }
    /// Fig. 5: Drev1_S{r} = (r, zero_S) ; Fig. 7: Drev2{r} = (r, Zero)
    fn constant(&self, _: &mut Fresh, c: Expr) -> Expr {
        pair(c, self.0.zero())
    }
    fn names(&self, _: usize) -> (&'static [(&'static str, &'static str)], &'static str) {
        (self.0.names(), "r")
    }
    /// Fig. 5 / Fig. 7 for +R and ×R, and Fig. 14's general rule for the other real primitives. The
    /// companion carries the operation's span (for the graph and trace).
    fn companion(&self, _: &mut Fresh, partials: &[Partial], ds: &[Expr], span: Span) -> Expr {
        let mut companion = combine(partials, ds, self.0);
        stamp(&mut companion, span);
        companion
    }
    fn skips_constants(&self) -> bool {
        self.0.skips_constants()
    }
}

/// Translates every definition of the source with `dual`.
pub(crate) fn dual_program(src: &Source, fr: &mut Fresh, c: &dyn Companion) -> Program {
    let mut out = src.program.clone();
    for d in &mut out.defs {
        d.body = dual(&d.body, fr, &WithCompanion(c));
        d.scheme = None;
    }
    out.expects.clear();
    out.input = None;
    out.seed = None;
    out
}

/// The types Figs. 5–6 and 7–8 state: `main : D{S} → D{T}` and the wrapper `R^a × δR → δR^a`.
pub(crate) fn dual_stated_types(src: &Source, c: &dyn Companion) -> Vec<(String, Type)> {
    let (s, t) = (src.input_type, src.output_type);
    vec![("main".into(), Type::fun(dual_type(s, c), dual_type(t, c))), (WRAPPER.into(), wrapper_type(s, t))]
}

/// Fig. 7's companion, the Delta term (and, for `combine`, the Delta of Fig. 10's right-hand sides,
/// which has Fig. 7's Zero, Scale and Add).
pub(crate) struct DeltaCompanion;

impl Companion for DeltaCompanion {
    fn ty(&self) -> Type {
        delta_type()
    }
    fn zero(&self) -> Expr {
        builtin("Zero")
    }
    fn add(&self, a: Expr, b: Expr) -> Expr {
        apps(builtin("Add"), [a, b])
    }
    fn scale(&self, c: Expr, d: Expr) -> Expr {
        apps(builtin("Scale"), [c, d])
    }
    fn names(&self) -> &'static [(&'static str, &'static str)] {
        &[("x", "u1"), ("y", "u2")]
    }
}
