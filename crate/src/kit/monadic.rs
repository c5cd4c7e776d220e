//! The one call-by-value monadic lifting of the project: Smeding & Vákár's dual-numbers reverse AD
//! Fig. 8 ("etc." filled in with the standard left-to-right lifting), Krawiec et al.'s Drev (§7.1,
//! Fig. 9; Fig. 14 for any primitive), and the array paper's Fig. 3 (D with IdGen and Share, §2.5) with
//! its §4 extensions to arrays are the same translation rule for rule except for reals. So the
//! structural rules are written once here, and a stage supplies only what a real becomes (`RealRule`:
//! D[R], a constant's rule, a primitive's rule); a rule may also take over the array operations (the
//! array paper's dual arrays, §4.2–4.4) and `D[τ]`. How operands are bound (`Operands`) is the one
//! difference in how the papers print the rules: Fig. 8 uses a value in place, Fig. 9 binds every
//! operand (`x ← Drev{e}`) and leaves the rest to the monad laws (kit/monad_laws.rs).

use crate::build::*;
use crate::deriv::{self, Partial};
use crate::diag::Span;
use crate::ir::*;
use rustc_hash::FxHashSet as HashSet;

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
    /// How the lifting binds operands (and prints the rules).
    fn operands(&self) -> Operands {
        Operands::Values
    }
    /// Names of the arguments' (primal, derivative component) and of a primitive's result in printed rules.
    fn names(&self, arity: usize) -> (&'static [(&'static str, &'static str)], &'static str) {
        (if arity == 1 { &[("x", "d")] } else { &[("x1", "d1"), ("x2", "d2")] }, "y")
    }
    /// `D[r]`: an `M D[R]` for a constant whose primal is `r`.
    fn constant(&self, fr: &mut Fresh, r: Expr) -> Expr;
    /// `D[op(t1..tn)]` once the arguments are bound: the primal `y`, each argument's derivative
    /// component `ds[k]` (the second half of its D[R]), the partials of deriv.rs.
    fn op(&self, fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial]) -> Expr;
    /// `op` for the primitive at `span` (a rule that locates what it builds overrides this).
    fn op_at(&self, fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial], _span: Span) -> Expr {
        self.op(fr, y, ds, partials)
    }
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

/// How the lifting binds an operand (of an application, a tuple, a primitive ...).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Operands {
    /// Smeding & Vákár Fig. 8: a value (variable, literal, λ, annotated value) is used in place, a `let`
    /// of a value stays a `let`, and `do x ← pure v; k` is written `let x = v in k`.
    Values,
    /// Krawiec Fig. 9 (and the array paper's Fig. 3): every operand is bound, `x ← D[e]`, and a `let`
    /// is `do`; the monad laws then substitute what is an atom. A primitive without derivative
    /// (a comparison) binds its companions as `_`.
    Bound,
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
        ExprKind::Ann(x_x) => { let (x, _) = &**x_x; strip_ann(x) },
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
    operands: Operands,
}

impl<'a> Monadic<'a> {
    /// `D[τ]` of an annotation's type. The cotangent type c is a type variable there: the type
    /// checker reads each annotation's variables as fresh unknowns.
    fn dtype(&self, t: &Type) -> Type {
        self.rule.dtype(t)
    }

    pub fn new(p: &Program, rule: &'a dyn RealRule) -> Monadic<'a> {
        let operands = rule.operands();
        let lam_globals = p
            .defs
            .iter()
            .filter(|d| is_function(&d.body, operands))
            .map(|d| d.name.text.to_string())
            .chain(p.params.iter().map(|q| q.name.text.to_string()))
            .collect();
        Monadic { fr: Fresh::new(p), rule, lam_globals, fork: false, operands }
    }

    /// Translates every definition: a function `def f = λp. e` becomes the value `λp. D[e]` (D[f] =
    /// pure f at its uses, as Krawiec §7.5's separate compilation has it); any other definition
    /// becomes the computation `D[e] : M D[τ]`.
    pub fn program(&mut self, p: &Program) -> Program {
        let mut out = p.clone();
        for d in &mut out.defs {
            d.body = match is_function(&d.body, self.operands).then(|| self.value(&d.body)).flatten() {
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

    /// The value form V[e] of a trivial expression (variables, non-real literals, lambdas, and with
    /// `Operands::Values` annotated values).
    fn value(&mut self, e: &Expr) -> Option<Expr> {
        use ExprKind::*;
        let kind = match &e.kind {
            Var(n) if n.is_global() && !self.lam_globals.contains(&*n.text) => return None,
            Var(_) | Int(_) | Bool(_) | Unit | Builtin(_) => e.kind.clone(),
            // D[λx. t] = pure (λx. D[t])  (Fig. 8; Fig. 9: Drev{λx. e} = pure λx. Drev{e})
            Lam(k, p_b) => { let (p, b) = &**p_b; Lam(*k, Box::new((p.clone(), self.tr(b)))) },
            // an annotation keeps its type, translated (it may be what makes `-k` an integer)
            Ann(x_t) if self.operands == Operands::Values => { let (x, t) = &**x_t; Ann(Box::new((self.value(x)?, self.dtype(t)))) },
            _ => return None,
        };
        Some(Expr { kind, span: e.span, ty: Type::Unknown })
    }

    /// `e`'s value when it is used in place as an operand: any value (Fig. 8), or only an atom (Fig. 9
    /// binds the others).
    fn operand(&mut self, e: &Expr) -> Option<Expr> {
        match self.operands {
            Operands::Values => self.value(e),
            Operands::Bound => matches!(e.kind, ExprKind::Var(_) | ExprKind::Int(_) | ExprKind::Bool(_) | ExprKind::Unit)
                .then(|| self.value(e))
                .flatten(),
        }
    }

    /// `let p = v in k` (Fig. 8), or `do p ← pure v; k` (Fig. 9).
    fn let_value(&self, p: Pat, v: Expr, k: Expr) -> Expr {
        match self.operands {
            Operands::Values => let_(p, v, k),
            Operands::Bound => bind(p, pure(v), k),
        }
    }

    /// `do p ← m; k`, with `let_value` when m is `pure v`.
    fn bind_m(&self, p: Pat, m: Expr, k: Expr) -> Expr {
        match m.kind {
            ExprKind::Pure(v) => self.let_value(p, *v, k),
            _ => bind(p, m, k),
        }
    }

    /// Binds the value of `e` (in place when it is an operand, with `do` otherwise, named `hint` in
    /// Fig. 9's printing) and continues with `k`.
    fn with_value(&mut self, e: &Expr, hint: &str, k: &mut dyn FnMut(&mut Self, Expr) -> Expr) -> Expr {
        match self.operand(e) {
            Some(v) => k(self, v),
            None => {
                let m = self.tr(e);
                let n = self.fr.name(if self.operands == Operands::Values { "v" } else { hint });
                let rest = k(self, var(&n));
                self.bind_m(pvar(&n), m, rest)
            }
        }
    }

    fn with_values(&mut self, es: &[Expr], acc: Vec<Expr>, k: &mut dyn FnMut(&mut Self, Vec<Expr>) -> Expr) -> Expr {
        match es.split_first() {
            None => k(self, acc),
            Some((e, rest)) => self.with_value(e, "x", &mut |cx, v| {
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
            // D[x] = pure x (Fig. 8: λi. (x, i); Fig. 9: Drev{x} = pure x, Drev{k} = pure k)
            return at(pure(v), e.span);
        }
        let out = match &e.kind {
            // a non-function global is a computation: run it
            Var(_) => e.clone(),
            // D[r] = genID >>= λi. pure (r, (i, linλz. 0))  (Fig. 8); Drev{r} = pure (r, Zero)  (Fig. 9)
            Real(r) => self.rule.constant(&mut self.fr, real(*r)),
            // D[s t] = do f ← D[s]; a ← D[t]; f a
            App(f_a) => { let (f, a) = &**f_a; self.with_value(f, "f", &mut |cx, fv| cx.with_value(a, "x", &mut |_, av| app(fv.clone(), av))) },
            // D[let x = s in t] = do x ← D[s]; D[t]  (Figs. 8, 9), along a chain of lets in a loop
            Let(..) => return self.lets(e),
            // letrec is treated like let (S–V §11; Krawiec §10.3): the functions are values
            LetRec(fs_body) => {
                let (fs, body) = &**fs_body;
                let fs2 = fs.iter().map(|f| FunDef { name: f.name.clone(), body: self.function(&f.body), span: f.span }).collect::<Vec<_>>();
                Expr::gen(LetRec(Box::new((fs2, self.tr(body)))))
            }
            // D[(s, t)] = do x ← D[s]; y ← D[t]; pure (x, y)  (Figs. 8, 9)
            Tuple(es) => self.with_values(es, vec![], &mut |_, vs| pure(tuple(vs))),
            // arrays of dual numbers (the array paper §4.1), lifted like tuples
            Array(es) => self.with_values(es, vec![], &mut |cx, vs| match cx.rule.array_lit(&mut cx.fr, &e.ty, vs.clone()) {
                Some(m) => m,
                None => pure(Expr::gen(Array(vs.into()))),
            }),
            // D⁵[t ⋆ s] = D⁵[t] ⋆' D⁵[s]  (§12.3: the only use of ⋆')
            Par(a_b) if self.fork => {
                let (a, b) = &**a_b;
                let (ta, tb) = (self.tr(a), self.tr(b));
                apps(builtin("fork"), [lam(Pat::Unit(Span::NONE), ta), lam(Pat::Unit(Span::NONE), tb)])
            }
            Par(a_b) => { let (a, b) = &**a_b; self.with_values(&[a.clone(), b.clone()], vec![], &mut |_, vs| pure(tuple(vs))) },
            // D[fst e] = do x ← D[e]; pure (fst x), and likewise snd, inl, inr
            Fst(x) => self.with_value(x, "x", &mut |_, v| pure(fst(v))),
            Snd(x) => self.with_value(x, "x", &mut |_, v| pure(snd(v))),
            Inl(x) => self.with_value(x, "x", &mut |_, v| pure(inl(v))),
            Inr(x) => self.with_value(x, "x", &mut |_, v| pure(inr(v))),
            // D[case e0 of inl x1 → e1, inr x2 → e2] = do x ← D[e0]; case x of inl x1 → D[e1], inr x2 → D[e2]
            Case(c) => self.with_value(&c.0, "x", &mut |cx, v| {
                let (_, p1, e1, p2, e2) = &**c;
                let a = cx.tr(e1);
                let b = cx.tr(e2);
                case(v, p1.clone(), a, p2.clone(), b)
            }),
            // Booleans are the leaf () + (): if is the case on them.
            ExprKind::If(c_a_b) => { let (c, a_b) = &**c_a_b; self.with_value(c, "c", &mut |cx, v| {
                let (a, b) = a_b;
                let x = cx.tr(a);
                let y = cx.tr(b);
                if_(v, x, y)
            }) },
            Prim(op, args) => self.prim(*op, args, e.span),
            Ann(x_t) => { let (x, t) = &**x_t; Expr::gen(Ann(Box::new((self.tr(x), m_ty(self.dtype(t)))))) },
            // do and pure appear only in AD's output: the stages refuse them in a source
            Bind(..) | Pure(_) => e.clone(),
            Int(_) | Bool(_) | Unit | Lam(..) | Builtin(_) => at(pure(e.clone()), e.span),
        };
        at(out, e.span)
    }

    /// A chain of lets, link by link without recursion along it (a long straight-line program is one
    /// deep chain): `let p = v` stays a let of the value (`let_value`), `let p = e` becomes `p ← D[e]`.
    fn lets(&mut self, e: &Expr) -> Expr {
        let mut links = vec![];
        let mut cur = e;
        while let ExprKind::Let(p_rhs_body) = &cur.kind {
            let (p, rhs_body) = &**p_rhs_body;
            let (rhs, body) = rhs_body;
            let rhs = match self.value(rhs) {
                Some(v) => Ok(v),
                None => Err(self.tr(rhs)),
            };
            links.push((p.clone(), rhs, cur.span));
            cur = body;
        }
        let mut acc = self.tr(cur);
        for (p, rhs, span) in links.into_iter().rev() {
            acc = at(
                match rhs {
                    Ok(v) => self.let_value(p, v, acc),
                    Err(m) => self.bind_m(p, m, acc),
                },
                span,
            );
        }
        acc
    }

    /// The λ a recursive binding or a function definition binds, translated: `λx. D[e]`.
    fn function(&mut self, e: &Expr) -> Expr {
        self.value(e).unwrap_or_else(|| self.tr(e))
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
            return self.with_value(&args[0], "k", &mut |cx, v| cx.rule.constant(&mut cx.fr, prim(Prim::ToReal, vec![v])));
        }
        if !real_args {
            // integer and boolean operations are untouched (Fig. 9: Drev{+Z} = pure λ(x, y). pure (x +Z y));
            // && and || stay short-circuiting, so the right operand's effects happen only when it runs
            return match op {
                Prim::And => self.with_value(&args[0], "x", &mut |cx, v| {
                    let b = cx.tr(&args[1]);
                    if_(v, b, pure(Expr::gen(ExprKind::Bool(false))))
                }),
                Prim::Or => self.with_value(&args[0], "x", &mut |cx, v| {
                    let b = cx.tr(&args[1]);
                    if_(v, pure(Expr::gen(ExprKind::Bool(true))), b)
                }),
                _ => self.with_values(args, vec![], &mut |_, vs| pure(prim(op, vs))),
            };
        }
        // D[op(t1..tn)] = do (x1, d1) ← D[t1]; …; (xn, dn) ← D[tn]; <the stage's rule>  (Fig. 8; Fig. 9's
        // Drev{op} applied to its arguments, β-reduced: our primitives are saturated)
        let (texts, result) = self.rule.names(args.len());
        let names: Vec<(Name, Name)> = texts.iter().take(args.len()).map(|(x, d)| (self.fr.name(x), self.fr.name(d))).collect();
        let xs: Vec<Expr> = names.iter().map(|(x, _)| var(x)).collect();
        let ds: Vec<Expr> = names.iter().map(|(_, d)| var(d)).collect();
        let y = self.fr.name(result);
        let rule = deriv::rule(op, &xs, &var(&y));
        let body = match &rule {
            // comparisons look at primals only (S–V §11)
            None => pure(prim(op, xs.clone())),
            // Fig. 14: let y = f xs in <the rule with y>
            Some(rule) if rule.uses_result => {
                let r = self.rule.op_at(&mut self.fr, var(&y), &ds, &rule.partials, span);
                self.let_value(pvar(&y), prim(op, xs.clone()), r)
            }
            Some(rule) => self.rule.op_at(&mut self.fr, prim(op, xs.clone()), &ds, &rule.partials, span),
        };
        let wild = rule.is_none() && self.operands == Operands::Bound;
        let mut acc = locate_gen_id(body, span);
        for ((x, d), a) in names.iter().zip(args).rev() {
            let p = ppair(pvar(x), if wild { pwild() } else { pvar(d) });
            acc = match self.value(a) {
                Some(v) => self.let_value(p, v, acc),
                None => {
                    let m = self.tr(a);
                    self.bind_m(p, m, acc)
                }
            };
        }
        acc
    }
}

/// Whether a definition is a function (a value) rather than a computation: a λ (under annotations
/// with `Operands::Values`, where an annotated value is a value).
fn is_function(body: &Expr, operands: Operands) -> bool {
    let b = if operands == Operands::Values { strip_ann(body) } else { body };
    matches!(b.kind, ExprKind::Lam(..))
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
        if let ExprKind::Bind(m_pair_x) = &mut e.kind {
            let (_, m_pair) = &mut **m_pair_x;
            let (m, _) = m_pair;
            let makes_id = match &m.kind {
                ExprKind::Builtin(n) => n == "genID",
                ExprKind::App(f_x) => { let (f, _) = &**f_x; matches!(&f.kind, ExprKind::Builtin(n) if n == "record") },
                _ => false,
            };
            if makes_id {
                m.span = span;
            }
        }
    }
    match &mut e.kind {
        ExprKind::Let(body_pair_x) => { let (_, body_pair) = &mut **body_pair_x; at_bind(&mut body_pair.1, span) },
        _ => at_bind(&mut e, span),
    }
    e
}
