//! The monadic translation Drev (Krawiec et al. §7.1, Fig. 9; Fig. 14 for any primitive): a standard
//! monadic translation into the state monad M, in which each primitive binds the Delta it builds with
//! `deltaLet` and returns only `Var id`, so that Deltas are copied without losing sharing. The array
//! paper's D with IdGen (Smeding et al. §2.5, Fig. 3) is the same translation rule for rule except at
//! primitives, where the Delta is named in place: `id ← genID; return (r, Share id d)` (`Naming`).
//! The IR has one monad type constructor, `M`; for Fig. 3 it is the paper's `IdGen`.

use super::{delta_type, stamp};
use super::dual::{combine, DeltaCompanion};
use crate::build::*;
use crate::deriv;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::kit::monad_laws::Simplifier;
use crate::kit::polytypic::{map_reals, TypeRule};
use crate::kit::rewrite::Trace;
use std::collections::HashSet;
use std::rc::Rc;

/// `M a`
pub fn m_type(t: Type) -> Type {
    Type::con("M", vec![t])
}

/// `Drev{A}` (Fig. 9): R ↦ R × Delta, A → B ↦ Drev{A} → M Drev{B}, homomorphic elsewhere.
pub fn drev_type(t: &Type) -> Type {
    map_reals(t, &TypeRule { real: &|| Type::Tuple(vec![Type::Real, delta_type()]), result: &m_type })
}

/// How a primitive names the Delta it builds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// Krawiec Fig. 9: `u ← deltaLet d; pure (r, Var u)` (a local binding).
    DeltaLet,
    /// The array paper's Fig. 3: `id ← genID; pure (r, Share id d)` (global sharing).
    Share,
}

/// The translation's state: the name supply, and the top-level definitions that are not functions.
pub(crate) struct Drev<'a> {
    pub fr: &'a mut Fresh,
    /// Top-level definitions that are not functions: their translation is already an `M A`.
    pub cafs: HashSet<Rc<str>>,
    pub naming: Naming,
}

impl Drev<'_> {
    /// `Drev{e} : M Drev{A}`, rule for rule (Fig. 9).
    pub fn expr(&mut self, e: &Expr) -> Result<Expr, Diagnostic> {
        use ExprKind::*;
        let out = match &e.kind {
            // A top-level non-function definition c = e was translated to c = Drev{e}, an M value.
            Var(n) if n.is_global() && self.cafs.contains(&n.text) => e.clone(),
            // Drev{x} = pure x (a top-level function f was translated to Drev{f}'s function, §7.5)
            Var(_) => pure(e.clone()),
            // Drev{k} = pure k
            Int(_) | Bool(_) | Unit | Builtin(_) => pure(e.clone()),
            // Drev{r} = pure (r, Zero)
            Real(r) => pure(pair(real(*r), builtin("Zero"))),
            // Drev{λx. e} = pure λx. Drev{e}
            Lam(..) => pure(self.function(e)?),
            // Drev{let x = e1 in e2} = do { x ← Drev{e1}; Drev{e2} }
            // (iteratively along a chain of lets: a long straight-line program is one deep chain)
            Let(..) => {
                let mut stmts = vec![];
                let mut cur = e;
                while let Let(p, e1, e2) = &cur.kind {
                    stmts.push((p.clone(), self.expr(e1)?, cur.span));
                    cur = e2;
                }
                let mut acc = self.expr(cur)?;
                for (p, m, span) in stmts.into_iter().rev() {
                    acc = at(bind(p, m, acc), span);
                }
                acc
            }
            // Drev{e1 e2} = do { f ← Drev{e1}; x ← Drev{e2}; f x }
            App(f, a) => {
                let (nf, nx) = (self.fr.name("f"), self.fr.name("x"));
                let (df, da) = (self.expr(f)?, self.expr(a)?);
                bind(pvar(&nf), df, bind(pvar(&nx), da, app(var(&nf), var(&nx))))
            }
            // Not in the paper (§10.3): local recursive functions translate like λ, homomorphically:
            // each f is bound to λx. Drev{e}, of type Drev{A → B}.
            LetRec(fs, body) => {
                let mut out = vec![];
                for f in fs {
                    out.push(FunDef { name: f.name.clone(), body: self.function(&f.body)?, span: f.span });
                }
                Expr::gen(LetRec(out, Box::new(self.expr(body)?)))
            }
            // Drev{(e1, e2)} = do { x ← Drev{e1}; y ← Drev{e2}; pure (x, y) }
            // Smeding–Vákár's fork-join pair `e1 ||| e2` is, for this sequential method, the pair (e1, e2).
            Par(a, b) => self.tuple(&[&**a, &**b])?,
            Tuple(es) => self.tuple(&es.iter().collect::<Vec<_>>())?,
            // arrays of dual numbers (the array paper §4.1): Drev{[e1, …, en]} = do { x1 ← Drev{e1}; …; pure [x1, …, xn] }
            Array(es) => {
                let ns: Vec<Name> = es.iter().map(|_| self.fr.name("x")).collect();
                let mut acc = pure(Expr::gen(Array(ns.iter().map(var).collect())));
                for (n, x) in ns.iter().zip(es).rev() {
                    acc = bind(pvar(n), self.expr(x)?, acc);
                }
                acc
            }
            // Drev{fst e} = do { x ← Drev{e}; pure (fst x) }, and likewise snd, inl, inr
            Fst(x) => self.unary(x, fst)?,
            Snd(x) => self.unary(x, snd)?,
            Inl(x) => self.unary(x, inl)?,
            Inr(x) => self.unary(x, inr)?,
            // Drev{case e0 of inl x1 → e1, inr x2 → e2} = do { x ← Drev{e0}; case x of inl x1 → Drev{e1}, inr x2 → Drev{e2} }
            Case(s, p1, e1, p2, e2) => {
                let n = self.fr.name("x");
                let ds = self.expr(s)?;
                let (d1, d2) = (self.expr(e1)?, self.expr(e2)?);
                bind(pvar(&n), ds, case(var(&n), p1.clone(), d1, p2.clone(), d2))
            }
            // Booleans are the leaf () + (): if is the case on them.
            If(c, a, b) => {
                let n = self.fr.name("c");
                let dc = self.expr(c)?;
                let (da, db) = (self.expr(a)?, self.expr(b)?);
                bind(pvar(&n), dc, if_(var(&n), da, db))
            }
            Ann(x, t) => ann(self.expr(x)?, m_type(drev_type(t))),
            Bind(..) | Pure(_) => {
                return Err(Diagnostic::error(e.span, "do and pure appear only in the output of AD (Fig. 1): the source cannot use them"))
            }
            Prim(op, args) => self.prim(*op, args, e.span)?,
        };
        Ok(at(out, e.span))
    }

    /// Drev{(e1, e2)} = do { x ← Drev{e1}; y ← Drev{e2}; pure (x, y) }, for any number of components.
    fn tuple(&mut self, es: &[&Expr]) -> Result<Expr, Diagnostic> {
        let ns: Vec<Name> = es.iter().map(|_| self.fr.name("x")).collect();
        let mut translated = vec![];
        for x in es {
            translated.push(self.expr(x)?);
        }
        let mut acc = pure(tuple(ns.iter().map(var).collect()));
        for (n, t) in ns.iter().zip(translated).rev() {
            acc = bind(pvar(n), t, acc);
        }
        Ok(acc)
    }

    fn unary(&mut self, x: &Expr, f: fn(Expr) -> Expr) -> Result<Expr, Diagnostic> {
        let n = self.fr.name("x");
        Ok(bind(pvar(&n), self.expr(x)?, pure(f(var(&n)))))
    }

    /// `λx. Drev{e}`: the function inside Drev{λx. e} = pure λx. Drev{e}, for top-level function
    /// definitions (whose outer `pure` the wrapper would run at once, note §8.2) and local recursive ones.
    pub fn function(&mut self, e: &Expr) -> Result<Expr, Diagnostic> {
        match &e.kind {
            ExprKind::Lam(k, p, b) => Ok(Expr { kind: ExprKind::Lam(*k, p.clone(), Box::new(self.expr(b)?)), span: e.span, ty: Type::Unknown }),
            _ => Err(Diagnostic::error(e.span, "a recursive binding must be a function")),
        }
    }

    /// Primitives. Fig. 9 gives Drev{+R} = pure λ((x, u1), (y, u2)). do { u3 ← deltaLet (Add u1 u2);
    /// pure (x + y, Var u3) } and Drev{×R} likewise with Add (Scale y u1) (Scale x u2); Fig. 14 gives
    /// the rule for any primitive from its partial derivatives (deriv.rs, shared by all stages). Our
    /// primitives are saturated, so Drev{op (e1, e2)} = do { f ← pure Drev{op}...; f (x, y) } is shown
    /// β-reduced: do { (x, u1) ← Drev{e1}; (y, u2) ← Drev{e2}; u3 ← deltaLet ...; pure (x op y, Var u3) }.
    fn prim(&mut self, op: Prim, args: &[Expr], span: Span) -> Result<Expr, Diagnostic> {
        let real_args = args.first().is_some_and(|a| a.ty == Type::Real);
        if op == Prim::Sum {
            // Drev{sum a} = Drev{fold (λacc x. acc + x) 0.0 a}
            let folded = crate::kit::arrays::sum_as_fold(&args[0], span, self.fr);
            return self.expr(&folded);
        }
        if op.is_array_op() {
            // Drev{map f a} = do { f' ← Drev{f}; a' ← Drev{a}; mapM f' a' } (the monadic form), and
            // Drev{a ! i} = do { a' ← Drev{a}; i' ← Drev{i}; pure (a' ! i') }
            let ns: Vec<Name> = args.iter().map(|_| self.fr.name("x")).collect();
            let vs: Vec<Expr> = ns.iter().map(var).collect();
            let body = match crate::kit::arrays::monadic(op) {
                Some(name) => apps(builtin(name), vs),
                None => pure(prim(op, vs)),
            };
            let mut acc = body;
            for (n, a) in ns.iter().zip(args).rev() {
                acc = bind(pvar(n), self.expr(a)?, acc);
            }
            return Ok(acc);
        }
        if matches!(op, Prim::And | Prim::Or) {
            // && and || evaluate their right operand only when needed, so its effects (deltaLets)
            // happen only then: do { x ← Drev{a}; if x then Drev{b} else pure false } (and dually).
            let n = self.fr.name("x");
            let (da, db) = (self.expr(&args[0])?, self.expr(&args[1])?);
            let body = if op == Prim::And { if_(var(&n), db, pure(Expr::gen(ExprKind::Bool(false)))) } else { if_(var(&n), pure(Expr::gen(ExprKind::Bool(true))), db) };
            return Ok(bind(pvar(&n), da, body));
        }
        let translated: Vec<Expr> = args.iter().map(|a| self.expr(a)).collect::<Result<_, _>>()?;
        if op == Prim::ToReal {
            // real k depends on no real input: a constant, like a literal (no binding).
            let n = self.fr.name("k");
            let t = translated.into_iter().next().expect("real has one argument");
            return Ok(bind(pvar(&n), t, pure(pair(prim(op, vec![var(&n)]), builtin("Zero")))));
        }
        if !real_args {
            // Drev{+Z} = pure λ(x, y). pure (x +Z y): integer and boolean operations are untouched.
            let ns: Vec<Name> = args.iter().map(|_| self.fr.name("x")).collect();
            let body = pure(prim(op, ns.iter().map(var).collect()));
            return Ok(ns.iter().zip(translated).rev().fold(body, |acc, (n, t)| bind(pvar(n), t, acc)));
        }
        let texts: &[(&str, &str)] = if args.len() == 1 { &[("x", "u1")] } else { &[("x", "u1"), ("y", "u2")] };
        let names: Vec<(Name, Name)> = texts.iter().map(|(x, d)| (self.fr.name(x), self.fr.name(d))).collect();
        let xs: Vec<Expr> = names.iter().map(|(x, _)| var(x)).collect();
        let us: Vec<Expr> = names.iter().map(|(_, d)| var(d)).collect();
        let result = self.fr.name("r");
        let (body, used_delta) = match deriv::rule(op, &xs, &var(&result)) {
            // comparisons look at primals only: pure (x < y)
            None => (pure(prim(op, xs.clone())), false),
            Some(rule) => {
                let share = self.naming == Naming::Share;
                let id = self.fr.name(if share { "id" } else if args.len() == 1 { "u2" } else { "u3" });
                // deltaLet and the Delta it binds carry the operation's span (for the graph and trace).
                let mut delta = combine(&rule.partials, &us, &DeltaCompanion);
                stamp(&mut delta, span);
                // Krawiec: u ← deltaLet d ... Var u ; Fig. 3: id ← genID ... Share id d
                let (gen, named) = if share {
                    (at(builtin("genID"), span), at(apps(builtin("Share"), [var(&id), delta]), span))
                } else {
                    (at(app(builtin("deltaLet"), delta), span), at(app(builtin("Var"), var(&id)), span))
                };
                let body = if rule.uses_result {
                    // Fig. 14: let (y1, ..., ym) = f xs in do { dy ← deltaLet (...); pure (y, Var dy) },
                    // with the let as the statement y ← pure (f xs), so that do blocks stay flat.
                    bind(pvar(&result), pure(prim(op, xs.clone())), bind(pvar(&id), gen, pure(pair(var(&result), named))))
                } else {
                    bind(pvar(&id), gen, pure(pair(prim(op, xs.clone()), named)))
                };
                (body, true)
            }
        };
        Ok(names.iter().zip(translated).rev().fold(body, |acc, ((x, u), t)| {
            let pu = if used_delta { pvar(u) } else { pwild() };
            bind(ppair(pvar(x), pu), t, acc)
        }))
    }
}

/// Translates every definition: a function `f = λx. e` becomes `f = λx. Drev{e}` (Drev{f} = pure f
/// at its uses, as §7.5's separate compilation has it); any other `c = e` becomes `c = Drev{e}`.
/// Each definition is then simplified by the monad laws (kit/monad_laws.rs), whose trace is returned.
pub(crate) fn drev_program(p: &Program, fr: &mut Fresh, naming: Naming) -> Result<(Program, Trace), Diagnostic> {
    let cafs: HashSet<Rc<str>> =
        p.defs.iter().filter(|d| !matches!(d.body.kind, ExprKind::Lam(..))).map(|d| d.name.text.clone()).collect();
    let mut out = p.clone();
    let mut bodies = vec![];
    let mut dr = Drev { fr, cafs, naming };
    for d in &out.defs {
        bodies.push(if matches!(d.body.kind, ExprKind::Lam(..)) { dr.function(&d.body)? } else { dr.expr(&d.body)? });
    }
    let mut laws = Simplifier::new(fr);
    for (d, body) in out.defs.iter_mut().zip(bodies) {
        d.body = laws.def(&d.name.text, body)?;
        d.scheme = None;
    }
    let trace = laws.finish();
    out.expects.clear();
    out.input = None;
    out.seed = None;
    Ok((out, trace))
}
