//! The homomorphic dual-number translation (Krawiec et al. Fig. 3's shape) shared by Figs. 5 and 7:
//! only real literals and real primitives change, and what a real is paired with (its companion: δS
//! in `krawiec/dense`, a Delta term in `krawiec/delta`) is a parameter.

use super::delta::{delta_type, stamp};
use crate::build::*;
use crate::deriv::{self, Partial};
use crate::diag::Span;
use crate::ir::*;
use crate::kit::polytypic::with_real;
use super::wrapper::wrapper_type;
use crate::stage::{Source, WRAPPER};

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
    /// Names of the companions of the first and second argument in printed rules (dx/dy, u1/u2).
    fn names(&self) -> [&'static str; 2];
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
    with_real(t, &Type::Tuple(vec![Type::Real, c.ty()]))
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

/// The homomorphic translation: Fig. 3's rules with Fig. 5's (or Fig. 7's) rules for reals.
pub(crate) fn dual(e: &Expr, fr: &mut Fresh, c: &dyn Companion) -> Expr {
    use ExprKind::*;
    let kind = match &e.kind {
        // D{x} = x ; D{k} = k ; D{+Z} = +Z
        Var(_) | Int(_) | Bool(_) | Unit | Builtin(_) => e.kind.clone(),
        // Fig. 5: Drev1_S{r} = (r, zero_S) ; Fig. 7: Drev2{r} = (r, Zero)
        Real(r) => return at(pair(real(*r), c.zero()), e.span),
        // D{λx. e} = λx. D{e}
        Lam(k, p, body) => Lam(*k, p.clone(), Box::new(dual(body, fr, c))),
        // D{e1 e2} = D{e1} D{e2}
        App(f, a) => App(Box::new(dual(f, fr, c)), Box::new(dual(a, fr, c))),
        // D{let x = e1 in e2} = let x = D{e1} in D{e2}
        Let(p, rhs, body) => Let(p.clone(), Box::new(dual(rhs, fr, c)), Box::new(dual(body, fr, c))),
        LetRec(fs, body) => LetRec(
            fs.iter().map(|f| FunDef { name: f.name.clone(), body: dual(&f.body, fr, c), span: f.span }).collect(),
            Box::new(dual(body, fr, c)),
        ),
        // pairs, projections, injections, case and if: homomorphic
        Tuple(es) => Tuple(es.iter().map(|x| dual(x, fr, c)).collect()),
        // the fork-join pair (Smeding–Vákár §12) is a pair here, translated homomorphically
        Par(x, y) => Par(Box::new(dual(x, fr, c)), Box::new(dual(y, fr, c))),
        Fst(x) => Fst(Box::new(dual(x, fr, c))),
        Snd(x) => Snd(Box::new(dual(x, fr, c))),
        Inl(x) => Inl(Box::new(dual(x, fr, c))),
        Inr(x) => Inr(Box::new(dual(x, fr, c))),
        Case(s, p1, e1, p2, e2) => Case(
            Box::new(dual(s, fr, c)),
            p1.clone(),
            Box::new(dual(e1, fr, c)),
            p2.clone(),
            Box::new(dual(e2, fr, c)),
        ),
        If(x, a, b) => If(Box::new(dual(x, fr, c)), Box::new(dual(a, fr, c)), Box::new(dual(b, fr, c))),
        Ann(x, t) => Ann(Box::new(dual(x, fr, c)), dual_type(t, c)),
        Bind(p, m, k) => Bind(p.clone(), Box::new(dual(m, fr, c)), Box::new(dual(k, fr, c))),
        Pure(x) => Pure(Box::new(dual(x, fr, c))),
        Prim(op, args) => return at(dual_prim(*op, args, e.span, fr, c), e.span),
    };
    Expr { kind, span: e.span, ty: Type::Unknown }
}

/// Fig. 5 / Fig. 7 for +R and ×R, and Fig. 14's general rule for the other real primitives, with the
/// partial derivatives from the shared table (deriv.rs). The primitive's λ((x, dx), (y, dy)). ... is
/// shown applied to its (saturated) arguments: `let (x, dx) = D{e1} in let (y, dy) = D{e2} in ...`.
fn dual_prim(op: Prim, args: &[Expr], span: Span, fr: &mut Fresh, c: &dyn Companion) -> Expr {
    let real_args = args.first().is_some_and(|a| a.ty == Type::Real);
    let translated: Vec<Expr> = args.iter().map(|a| dual(a, fr, c)).collect();
    if op == Prim::ToReal {
        // real k depends on no real input: a constant, like a literal.
        return pair(prim(op, translated), c.zero());
    }
    if !real_args {
        // integer and boolean operations are untouched (and && and || keep their short circuit)
        return prim(op, translated);
    }
    let [d1, d2] = c.names();
    let texts: &[(&str, &str)] = if args.len() == 1 { &[("x", d1)] } else { &[("x", d1), ("y", d2)] };
    let names: Vec<(Name, Name)> = texts.iter().map(|(x, d)| (fr.name(x), fr.name(d))).collect();
    let xs: Vec<Expr> = names.iter().map(|(x, _)| var(x)).collect();
    let ds: Vec<Expr> = names.iter().map(|(_, d)| var(d)).collect();
    let result = fr.name("r");
    let body = match deriv::rule(op, &xs, &var(&result)) {
        // comparisons look at primals only
        None => prim(op, xs.clone()),
        Some(rule) => {
            // a constant's zero companion adds no term (deriv::is_constant)
            let (partials, ds) =
                if c.skips_constants() { deriv::without_constants(&rule.partials, &ds, args) } else { (rule.partials, ds) };
            let mut companion = combine(&partials, &ds, c);
            stamp(&mut companion, span);
            if rule.uses_result {
                let_(pvar(&result), prim(op, xs.clone()), pair(var(&result), companion))
            } else {
                pair(prim(op, xs.clone()), companion)
            }
        }
    };
    names.iter().zip(translated).rev().fold(body, |acc, ((x, d), a)| let_(ppair(pvar(x), pvar(d)), a, acc))
}

/// Translates every definition of the source with `dual`.
pub(crate) fn dual_program(src: &Source, fr: &mut Fresh, c: &dyn Companion) -> Program {
    let mut out = src.program.clone();
    for d in &mut out.defs {
        d.body = dual(&d.body, fr, c);
        d.scheme = None;
    }
    out.expects.clear();
    out.input = None;
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
    fn names(&self) -> [&'static str; 2] {
        ["u1", "u2"]
    }
}
