//! The monadic dual-numbers translation: Smeding & Vákár Fig. 8 ("etc." filled in with the standard
//! left-to-right lifting), which is also the array paper's Fig. 3 (D with IdGen and Share, §2.5) and its
//! §4 extensions to arrays. Only the rule for reals (`RealRule`) changes from stage to stage; a rule may
//! also take over the array operations (the array paper's dual arrays, §4.2–4.4) and `D[τ]`.

use crate::build::*;
use crate::deriv::{self, Partial};
use crate::diag::Span;
use crate::ir::*;
use std::collections::HashSet;

/// `p · z` for a partial derivative `p` (deriv.rs) and a cotangent `z`.
pub fn scale(p: &Partial, z: Expr) -> Expr {
    match p {
        Partial::One => z,
        Partial::MinusOne => neg(z),
        Partial::Times(c) => mul(c.clone(), z),
    }
}

/// `∂ᵢop(x)(1)`, the partial as a number (§10.2: ∂ᵢop(x)(z) = z · ∂ᵢop(x)(1)).
pub fn at_one(p: &Partial) -> Expr {
    match p {
        Partial::One => real(1.0),
        Partial::MinusOne => real(-1.0),
        Partial::Times(c) => c.clone(),
    }
}

/// What a stage does with reals: its D[R] and its rules for constants and primitive operations.
pub trait RealRule {
    /// D_c[R] at monoid `c`.
    fn real_ty(&self, c: &Type) -> Type;
    /// `D[r]`: an `M D[R]` for a constant whose primal is `r`.
    fn constant(&self, fr: &mut Fresh, r: Expr) -> Expr;
    /// `D[op(t1..tn)]` once the arguments are bound: the primal `y`, each argument's derivative
    /// component `ds[k]` (the second half of its D[R]), the partials of deriv.rs.
    fn op(&self, fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial]) -> Expr;
    /// `D[τ]` of an annotation's type (the cotangent type c a type variable there: the type checker
    /// reads each annotation's variables as fresh unknowns).
    fn dtype(&self, t: &Type) -> Type {
        dtype(t, &self.real_ty(&cvar()), true)
    }
    /// Whether the rule translates the array operation `op` itself (`array_op`); otherwise it is
    /// structural: `mapM D[f] D[a]`, `pure (a' ! i')`, and `sum` as a fold.
    fn takes(&self, _op: Prim) -> bool {
        false
    }
    /// `D[op(v1..vn)]` for an array operation the rule `takes`, once its arguments' values `vs` are
    /// bound (`args` are the source arguments, typed), as an `M D[τ]`.
    fn array_op(&self, _fr: &mut Fresh, _op: Prim, _args: &[Expr], vs: Vec<Expr>, _span: Span) -> Expr {
        pure(tuple(vs))
    }
    /// `D[[e1, …, en]]` once the elements' values are bound, as an `M D[τ]`; `None`: `pure [v1, …, vn]`.
    fn array_lit(&self, _fr: &mut Fresh, _ty: &Type, _vs: Vec<Expr>) -> Option<Expr> {
        None
    }
}

pub fn m_ty(t: Type) -> Type {
    Type::con("M", vec![t])
}
/// The type variable standing for the cotangent monoid `c` in stated types.
pub fn cvar() -> Type {
    Type::Var(0)
}

/// D_c[τ]: R ↦ `real`, functions ↦ D[σ] → D[τ] (naive, Fig. 6) or D[σ] → M D[τ] (Figs. 8–10),
/// homomorphic elsewhere; Z, Bool, () unchanged.
pub fn dtype(t: &Type, real: &Type, monadic: bool) -> Type {
    let result = |r: Type| if monadic { m_ty(r) } else { r };
    crate::kit::polytypic::map_reals(t, &crate::kit::polytypic::TypeRule { real: &|| real.clone(), result: &result })
}

pub fn strip_ann(e: &Expr) -> &Expr {
    match &e.kind {
        ExprKind::Ann(x, _) => strip_ann(x),
        _ => e,
    }
}

pub struct Monadic<'a> {
    pub fr: Fresh,
    pub rule: &'a dyn RealRule,
    /// Top-level definitions that are functions (values); the others are `M` computations.
    pub lam_globals: HashSet<String>,
    /// §12: translate `s ||| t` to `fork (λ(). D[s]) (λ(). D[t])` (the monad's ⋆'); otherwise the
    /// sequential stages evaluate it as the pair it denotes: `do x ← D[s]; y ← D[t]; pure (x, y)`.
    pub fork: bool,
}

impl<'a> Monadic<'a> {
    /// `D[τ]` of an annotation's type. The cotangent type c is a type variable there: the type
    /// checker reads each annotation's variables as fresh unknowns.
    fn dtype(&self, t: &Type) -> Type {
        self.rule.dtype(t)
    }

    pub fn new(p: &Program, rule: &'a dyn RealRule) -> Monadic<'a> {
        let lam_globals = p
            .defs
            .iter()
            .filter(|d| matches!(strip_ann(&d.body).kind, ExprKind::Lam(..)))
            .map(|d| d.name.text.to_string())
            .chain(p.params.iter().map(|q| q.name.text.to_string()))
            .collect();
        Monadic { fr: Fresh::new(p), rule, lam_globals, fork: false }
    }

    /// Translates every definition: a function `def f = λp. e` becomes the value `λp. D[e]`; any
    /// other definition becomes the computation `D[e] : M D[τ]`.
    pub fn program(&mut self, p: &Program) -> Program {
        let mut out = p.clone();
        for d in &mut out.defs {
            d.body = match self.value(&d.body) {
                Some(v) => v,
                None => self.tr(&d.body),
            };
            d.scheme = None;
        }
        out.expects.clear();
        out.input = None;
        out.seed = None;
        out
    }

    /// The value form V[e] of a trivial expression (variables, non-real literals, lambdas).
    fn value(&mut self, e: &Expr) -> Option<Expr> {
        use ExprKind::*;
        let kind = match &e.kind {
            Var(n) if n.is_global() && !self.lam_globals.contains(&*n.text) => return None,
            Var(_) | Int(_) | Bool(_) | Unit => e.kind.clone(),
            // D[λx. t] = pure (λx. D[t])
            Lam(k, p, b) => Lam(*k, p.clone(), Box::new(self.tr(b))),
            // an annotation keeps its type, translated (it may be what makes `-k` an integer)
            Ann(x, t) => Ann(Box::new(self.value(x)?), self.dtype(t)),
            _ => return None,
        };
        Some(Expr { kind, span: e.span, ty: Type::Unknown })
    }

    /// Binds the value of `e` (directly when trivial, with `do` otherwise) and continues with `k`.
    fn with_value(&mut self, e: &Expr, k: &mut dyn FnMut(&mut Self, Expr) -> Expr) -> Expr {
        match self.value(e) {
            Some(v) => k(self, v),
            None => {
                let m = self.tr(e);
                let n = self.fr.name("v");
                let rest = k(self, var(&n));
                mbind(pvar(&n), m, rest)
            }
        }
    }

    fn with_values(&mut self, es: &[Expr], acc: Vec<Expr>, k: &mut dyn FnMut(&mut Self, Vec<Expr>) -> Expr) -> Expr {
        match es.split_first() {
            None => k(self, acc),
            Some((e, rest)) => self.with_value(e, &mut |cx, v| {
                let mut acc = acc.clone();
                acc.push(v);
                cx.with_values(rest, acc, k)
            }),
        }
    }

    /// D[e] : M D[τ].
    pub fn tr(&mut self, e: &Expr) -> Expr {
        use ExprKind::*;
        if let Some(v) = self.value(e) {
            // D[x] = pure x (Fig. 8: λi. (x, i))
            return at(pure(v), e.span);
        }
        let out = match &e.kind {
            // a non-function global is a computation: run it
            Var(_) => e.clone(),
            // D[r] = genID >>= λi. pure (r, (i, linλz. 0))  (Fig. 8)
            Real(r) => self.rule.constant(&mut self.fr, real(*r)),
            // D[s t] = do f ← D[s]; a ← D[t]; f a
            App(f, a) => self.with_value(f, &mut |cx, fv| cx.with_value(a, &mut |_, av| app(fv.clone(), av))),
            // D[let x = s in t] = do x ← D[s]; D[t]  (Fig. 8)
            Let(p, rhs, body) => match self.value(rhs) {
                Some(v) => let_(p.clone(), v, self.tr(body)),
                None => {
                    let m = self.tr(rhs);
                    mbind(p.clone(), m, self.tr(body))
                }
            },
            // letrec is treated like let (Sec. 11): the functions are values
            LetRec(fs, body) => {
                let fs2 = fs
                    .iter()
                    .map(|f| FunDef { name: f.name.clone(), body: self.value(&f.body).expect("accepts: letrec binds functions"), span: f.span })
                    .collect();
                Expr::gen(LetRec(fs2, Box::new(self.tr(body))))
            }
            // D[(s, t)] = do x ← D[s]; y ← D[t]; pure (x, y)  (Fig. 8)
            Tuple(es) => self.with_values(es, vec![], &mut |_, vs| pure(tuple(vs))),
            // arrays of dual numbers (the array paper §4.1), lifted like tuples
            Array(es) => self.with_values(es, vec![], &mut |cx, vs| match cx.rule.array_lit(&mut cx.fr, &e.ty, vs.clone()) {
                Some(m) => m,
                None => pure(Expr::gen(Array(vs))),
            }),
            // D⁵[t ⋆ s] = D⁵[t] ⋆' D⁵[s]  (§12.3: the only use of ⋆')
            Par(a, b) if self.fork => {
                let (ta, tb) = (self.tr(a), self.tr(b));
                apps(builtin("fork"), [lam(Pat::Unit(Span::NONE), ta), lam(Pat::Unit(Span::NONE), tb)])
            }
            Par(a, b) => self.with_values(&[(**a).clone(), (**b).clone()], vec![], &mut |_, vs| pure(tuple(vs))),
            Fst(x) => self.with_value(x, &mut |_, v| pure(fst(v))),
            Snd(x) => self.with_value(x, &mut |_, v| pure(snd(v))),
            Inl(x) => self.with_value(x, &mut |_, v| pure(inl(v))),
            Inr(x) => self.with_value(x, &mut |_, v| pure(inr(v))),
            Case(s, p1, e1, p2, e2) => self.with_value(s, &mut |cx, v| {
                let a = cx.tr(e1);
                let b = cx.tr(e2);
                case(v, p1.clone(), a, p2.clone(), b)
            }),
            If(c, a, b) => self.with_value(c, &mut |cx, v| {
                let x = cx.tr(a);
                let y = cx.tr(b);
                if_(v, x, y)
            }),
            Prim(op, args) => self.prim(*op, args, e.span),
            Ann(x, t) => Expr::gen(Ann(Box::new(self.tr(x)), m_ty(self.dtype(t)))),
            Builtin(_) | Bind(..) | Pure(_) => e.clone(), // refused by accepts_source
            Int(_) | Bool(_) | Unit | Lam(..) => unreachable!("values are handled above"),
        };
        at(out, e.span)
    }

    fn prim(&mut self, op: Prim, args: &[Expr], span: Span) -> Expr {
        if op.is_array_op() && self.rule.takes(op) {
            return self.with_values(args, vec![], &mut |cx, vs| cx.rule.array_op(&mut cx.fr, op, args, vs, span));
        }
        if op == Prim::Sum {
            // D[sum a] = D[fold (λacc x. acc + x) 0.0 a]
            let folded = crate::kit::arrays::sum_as_fold(&args[0], span, &mut self.fr);
            return self.tr(&folded);
        }
        if op.is_array_op() {
            // D[map f a] = do f' ← D[f]; a' ← D[a]; mapM f' a' (the monadic form: f' returns M),
            // and the operations without functions on values: D[a ! i] = do …; pure (a' ! i')
            return self.with_values(args, vec![], &mut |_, vs| match crate::kit::arrays::monadic(op) {
                Some(name) => apps(builtin(name), vs),
                None => pure(prim(op, vs)),
            });
        }
        let real_args = args.first().is_some_and(|a| a.ty == Type::Real);
        if op == Prim::ToReal {
            // real k depends on no real input: a constant
            return self.with_value(&args[0], &mut |cx, v| cx.rule.constant(&mut cx.fr, prim(Prim::ToReal, vec![v])));
        }
        if !real_args {
            // integer and boolean operations are untouched; && and || stay short-circuiting
            return match op {
                Prim::And => self.with_value(&args[0], &mut |cx, v| {
                    let b = cx.tr(&args[1]);
                    if_(v, b, pure(Expr::gen(ExprKind::Bool(false))))
                }),
                Prim::Or => self.with_value(&args[0], &mut |cx, v| {
                    let b = cx.tr(&args[1]);
                    if_(v, pure(Expr::gen(ExprKind::Bool(true))), b)
                }),
                _ => self.with_values(args, vec![], &mut |_, vs| pure(prim(op, vs))),
            };
        }
        // D[op(t1..tn)] = do (x1, d1) ← D[t1]; …; (xn, dn) ← D[tn]; <the stage's rule>  (Fig. 8)
        let texts: &[(&str, &str)] = if args.len() == 1 { &[("x", "d")] } else { &[("x1", "d1"), ("x2", "d2")] };
        let names: Vec<(Name, Name)> = texts.iter().map(|(x, d)| (self.fr.name(x), self.fr.name(d))).collect();
        let xs: Vec<Expr> = names.iter().map(|(x, _)| var(x)).collect();
        let ds: Vec<Expr> = names.iter().map(|(_, d)| var(d)).collect();
        let y = self.fr.name("y");
        let body = match deriv::rule(op, &xs, &var(&y)) {
            // comparisons look at primals only (Sec. 11)
            None => pure(prim(op, xs.clone())),
            Some(rule) if rule.uses_result => {
                let r = self.rule.op(&mut self.fr, var(&y), &ds, &rule.partials);
                let_(pvar(&y), prim(op, xs.clone()), r)
            }
            Some(rule) => self.rule.op(&mut self.fr, prim(op, xs.clone()), &ds, &rule.partials),
        };
        let mut acc = locate_gen_id(body, span);
        for ((x, d), a) in names.iter().zip(args).rev() {
            let p = ppair(pvar(x), pvar(d));
            acc = match self.value(a) {
                Some(v) => let_(p, v, acc),
                None => {
                    let m = self.tr(a);
                    mbind(p, m, acc)
                }
            };
        }
        acc
    }
}

/// `do p ← m; k`, or `let p = v in k` when `m` is `pure v`.
pub fn mbind(p: Pat, m: Expr, k: Expr) -> Expr {
    match m.kind {
        ExprKind::Pure(v) => let_(p, *v, k),
        _ => bind(p, m, k),
    }
}

/// Gives the `genID` (or the tape's `record c`) that a rule's `op` binds first (under the
/// `let y = op(x…)` of a rule that uses the result) the primitive's span, so the ID it makes knows
/// where it came from (`Rt::spans`: the graph's nodes carry it, and the page groups them by array
/// operation).
fn locate_gen_id(mut e: Expr, span: Span) -> Expr {
    fn at_bind(e: &mut Expr, span: Span) {
        if let ExprKind::Bind(_, m, _) = &mut e.kind {
            let makes_id = match &m.kind {
                ExprKind::Builtin(n) => &**n == "genID",
                ExprKind::App(f, _) => matches!(&f.kind, ExprKind::Builtin(n) if &**n == "record"),
                _ => false,
            };
            if makes_id {
                m.span = span;
            }
        }
    }
    match &mut e.kind {
        ExprKind::Let(_, _, body) => at_bind(body, span),
        _ => at_bind(&mut e, span),
    }
    e
}
