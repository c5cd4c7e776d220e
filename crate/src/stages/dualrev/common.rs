//! Shared pieces of the Smeding–Vákár chain (`dualrev/*`, "Parallel Dual-Numbers Reverse AD",
//! JFP 2025): the type translation D_c[τ], the monadic term translation of Fig. 8 (shared by every
//! stage from §6 on: only the rule for reals changes from stage to stage), the polytypic wrapper
//! pieces (Deinterleave, Fig. 10-style Interleave), and the runtime state every stage's builtins
//! share (ID counter, counters, graph edges, resolve trace).
//!
//! Decisions (recorded here once, referred to from the stage files):
//! - **IDs** number from 0, inputs first, left to right (Secs. 6–9; Fig. 11 numbers from 1).
//!   Constants take an ID, as in Fig. 8 and the reference implementation.
//! - **The ID monad** Z → (–, Z) of Fig. 8 is written as the IR's monad `M` (`do`/`pure`), run in
//!   direct style, with `genID : M Z`; Sec. 12.3 writes the same translation with a black-box monad.
//!   The `IO` of Secs. 9–10 is the same `M` (its only effects are accumulations, which commute).
//! - **Cotangent types.** dτ has the shape of τ: real leaves carry cotangents; integer and boolean
//!   leaves and sum tags carry the primal's (footnote 30: the zero of c copies the input's
//!   structure; `Interleave⁴_Z`'s rebuild returns the primal integer). So c = dσ is the input type
//!   σ itself, and `0 : c` is the input with its reals zeroed.
//! - **Counting.** `backprop_calls` counts the calls of backpropagators proper (the `dR ⊸ …`
//!   functions inside D[R]): their bodies are wrapped in the identity builtin `counted`, so the
//!   printed program is what counts. From §10.2 on backpropagators are data, and the resolve counts
//!   each Contrib it processes.

use crate::build::*;
use crate::deriv::{self, Partial};
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Graph, GraphEdge, GraphNode, Machine, RunError, TraceStep};
use crate::ir::*;
use crate::stage::{Source, WRAPPER};
use crate::value::Value;
use std::collections::{BTreeMap, HashSet};

pub const PAPER: &str = "Smeding & Vákár 2025";
pub const ACCEPTS: &str = "the whole scalar language: closures, recursion, tuples, sums, if, integers";

// ---------------------------------------------------------------------------------------------
// Types

pub fn m_ty(t: Type) -> Type {
    Type::con("M", vec![t])
}
pub fn staged_ty(c: Type) -> Type {
    Type::con("Staged", vec![c])
}
/// The type variable standing for the cotangent monoid `c` in stated types.
pub fn cvar() -> Type {
    Type::Var(0)
}

/// D_c[τ]: R ↦ `real`, functions ↦ D[σ] → D[τ] (naive) or D[σ] → M D[τ] (Figs. 8–10), homomorphic
/// elsewhere; Z, Bool, () unchanged.
pub fn dtype(t: &Type, real: &Type, monadic: bool) -> Type {
    match t {
        Type::Real => real.clone(),
        Type::Tuple(ts) => Type::Tuple(ts.iter().map(|t| dtype(t, real, monadic)).collect()),
        Type::Sum(a, b) => Type::sum(dtype(a, real, monadic), dtype(b, real, monadic)),
        Type::Fun(a, b) | Type::Lin(a, b) => {
            let r = dtype(b, real, monadic);
            Type::fun(dtype(a, real, monadic), if monadic { m_ty(r) } else { r })
        }
        Type::Con(n, ts) => Type::Con(n.clone(), ts.iter().map(|t| dtype(t, real, monadic)).collect()),
        t => t.clone(),
    }
}

pub fn has_real(t: &Type) -> bool {
    crate::stages::forward::has_real(t)
}

// ---------------------------------------------------------------------------------------------
// Accepting programs

/// The source must be the scalar language: no target constructs.
pub fn accepts_source(src: &Source) -> Result<(), Diagnostic> {
    fn go(e: &Expr) -> Result<(), Diagnostic> {
        match &e.kind {
            ExprKind::Builtin(n) => return Err(Diagnostic::error(e.span, format!("`{n}` is a target construct, not source language"))),
            ExprKind::Bind(..) | ExprKind::Pure(_) => {
                return Err(Diagnostic::error(e.span, "monadic `do`/`pure` are target constructs, not source language"))
            }
            ExprKind::LetRec(fs, _) => {
                for f in fs {
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

pub fn strip_ann(e: &Expr) -> &Expr {
    match &e.kind {
        ExprKind::Ann(x, _) => strip_ann(x),
        _ => e,
    }
}

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

// ---------------------------------------------------------------------------------------------
// The monadic translation (Fig. 8, "etc." filled in with the standard left-to-right lifting)

/// What a stage does with reals: its D[R] and its rules for constants and primitive operations.
pub trait RealRule {
    /// D_c[R] at monoid `c`.
    fn real_ty(&self, c: &Type) -> Type;
    /// `D[r]`: an `M D[R]` for a constant whose primal is `r`.
    fn constant(&self, fr: &mut Fresh, r: Expr) -> Expr;
    /// `D[op(t1..tn)]` once the arguments are bound: the primal `y`, each argument's derivative
    /// component `ds[k]` (the second half of its D[R]), the partials of deriv.rs.
    fn op(&self, fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial]) -> Expr;
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
            Ann(x, _) => return self.value(x),
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
            Prim(op, args) => self.prim(*op, args),
            Ann(x, _) => self.tr(x),
            Builtin(_) | Bind(..) | Pure(_) => e.clone(), // refused by accepts_source
            Int(_) | Bool(_) | Unit | Lam(..) => unreachable!("values are handled above"),
        };
        at(out, e.span)
    }

    fn prim(&mut self, op: Prim, args: &[Expr]) -> Expr {
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
        let mut acc = body;
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

// ---------------------------------------------------------------------------------------------
// Wrapper pieces

/// `Deinterleave_τ e : (τ, dτ ⊸ X)` as inline code over the output type. `leaf` gives the pair for
/// a real's D[R]; `combine` makes the body of a backpropagator from the applied parts (their sum in
/// the stage's monoid; with no parts, its zero).
pub fn deinterleave(
    ty: &Type,
    e: Expr,
    fr: &mut Fresh,
    leaf: &dyn Fn(Expr, &mut Fresh) -> Expr,
    combine: &dyn Fn(Vec<Expr>, &mut Fresh) -> Expr,
) -> Expr {
    match ty {
        Type::Real => leaf(e, fr),
        // Deinterleave_(σ,τ) = λ(x, y). let (x1, x2) = D x in let (y1, y2) = D y
        //                      in ((x1, y1), linλz. x2 (fst z) + y2 (snd z))      (Fig. 7)
        // (components without reals have zero backpropagators and are left out of the sum)
        Type::Tuple(ts) => {
            let ys: Vec<Name> = ts.iter().map(|_| fr.name("y")).collect();
            let ps: Vec<Name> = ts.iter().map(|_| fr.name("p")).collect();
            let bs: Vec<Name> = ts.iter().map(|_| fr.name("b")).collect();
            let zs: Vec<Name> = ts.iter().map(|_| fr.name("z")).collect();
            let z = fr.name("z");
            let parts: Vec<Expr> = ts.iter().enumerate().filter(|(_, t)| has_real(t)).map(|(k, _)| app(var(&bs[k]), var(&zs[k]))).collect();
            let zpat = ptuple(ts.iter().enumerate().map(|(k, t)| if has_real(t) { pvar(&zs[k]) } else { pwild() }).collect());
            let body = if parts.is_empty() { combine(vec![], fr) } else { let_(zpat, var(&z), combine(parts, fr)) };
            let mut acc = pair(tuple(ps.iter().map(var).collect()), linlam(pvar(&z), body));
            for k in (0..ts.len()).rev() {
                let d = deinterleave(&ts[k], var(&ys[k]), fr, leaf, combine);
                acc = let_(ppair(pvar(&ps[k]), pvar(&bs[k])), d, acc);
            }
            let_(ptuple(ys.iter().map(pvar).collect()), e, acc)
        }
        Type::Sum(a, b) => {
            let side = |t: &Type, left: bool, fr: &mut Fresh| {
                let (y, p, bp, z, z1) = (fr.name("y"), fr.name("p"), fr.name("b"), fr.name("z"), fr.name("z"));
                let d = deinterleave(t, var(&y), fr, leaf, combine);
                let zero = combine(vec![], fr);
                let hit = app(var(&bp), var(&z1));
                let body = if left { case(var(&z), pvar(&z1), hit, pwild(), zero) } else { case(var(&z), pwild(), zero, pvar(&z1), hit) };
                let tagged = if left { inl(var(&p)) } else { inr(var(&p)) };
                (y, let_(ppair(pvar(&p), pvar(&bp)), d, pair(tagged, linlam(pvar(&z), body))))
            };
            let (ya, ea) = side(a, true, fr);
            let (yb, eb) = side(b, false, fr);
            case(e, pvar(&ya), ea, pvar(&yb), eb)
        }
        // Deinterleave_Z = λn. (n, linλz. 0) ; Deinterleave_() likewise
        _ => {
            let z = fr.name("z");
            pair(e, linlam(pvar(&z), combine(vec![], fr)))
        }
    }
}

/// Fig. 10's `Interleave⁴_τ : τ → M (D[τ], A → dτ)`: numbers the input's reals with IDs and builds
/// the rebuild function up. `leaf(x)` gives, for a real `x`, the `M (D[R], A → R)` pair whose
/// second half reads the gradient of that real out of the frozen collector.
pub fn interleave_up(ty: &Type, x: Expr, fr: &mut Fresh, leaf: &dyn Fn(Expr, &mut Fresh) -> Expr) -> Expr {
    match ty {
        Type::Real => leaf(x, fr),
        // Interleave_(σ,τ) = λ(x, y). do (x', f1) ← Interleave_σ x; (y', f2) ← Interleave_τ y;
        //                    pure ((x', y'), λa. (f1 a, f2 a))                       (Fig. 10)
        Type::Tuple(ts) => {
            let xs: Vec<Name> = ts.iter().map(|_| fr.name("x")).collect();
            let vs: Vec<Name> = ts.iter().map(|_| fr.name("x'")).collect();
            let fs: Vec<Name> = ts.iter().map(|_| fr.name("f")).collect();
            let ms: Vec<Expr> = ts.iter().zip(&xs).map(|(t, xn)| interleave_up(t, var(xn), fr, leaf)).collect();
            let a = fr.name("a");
            let getters = fs.iter().map(|f| app(var(f), var(&a))).collect();
            let res = pure(pair(tuple(vs.iter().map(var).collect()), lam(pvar(&a), tuple(getters))));
            let body = ms.into_iter().enumerate().rev().fold(res, |acc, (k, m)| mbind(ppair(pvar(&vs[k]), pvar(&fs[k])), m, acc));
            let_(ptuple(xs.iter().map(pvar).collect()), x, body)
        }
        Type::Sum(l, r) => {
            let side = |t: &Type, left: bool, fr: &mut Fresh| {
                let (y, y2, f, a) = (fr.name("x"), fr.name("x'"), fr.name("f"), fr.name("a"));
                let m = interleave_up(t, var(&y), fr, leaf);
                let tag = |e: Expr| if left { inl(e) } else { inr(e) };
                (y, mbind(ppair(pvar(&y2), pvar(&f)), m, pure(pair(tag(var(&y2)), lam(pvar(&a), tag(app(var(&f), var(&a))))))))
            };
            let (ya, ea) = side(l, true, fr);
            let (yb, eb) = side(r, false, fr);
            case(x, pvar(&ya), ea, pvar(&yb), eb)
        }
        // Interleave_Z = λn. pure (n, λa. n)
        _ => {
            let a = fr.name("a");
            pure(pair(x.clone(), lam(pvar(&a), x)))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Runtime shared by the stages

/// Per-run state of the chain's runtimes.
#[derive(Default)]
pub struct Rt {
    /// The next ID (`genID`).
    pub next_id: i64,
    /// `0 : c`: the input with its reals zeroed.
    pub zero: Option<Value>,
    pub n_inputs: i64,
    /// The ID whose backpropagator the resolve is running (None: the wrapper's direct calls).
    pub current: Option<i64>,
    pub edges: BTreeMap<(i64, i64), f64>,
    /// How many staged calls each edge stands for (`x + x` stages two calls of x's backpropagator).
    pub edge_calls: BTreeMap<(i64, i64), u64>,
    /// Per ID: the cotangent it was resolved with, and how often it was called by the resolve.
    pub resolved: BTreeMap<i64, (f64, u64)>,
    /// Kind of node per ID where the stage knows it (Contribs).
    pub kinds: BTreeMap<i64, String>,
}

pub fn rt<'a>(m: &'a mut Machine<'_>) -> &'a mut Rt {
    m.state::<Rt>()
}

pub fn scheme(vars: &[u32], ty: Type) -> Scheme {
    Scheme { vars: vars.to_vec(), ty }
}
pub fn tv(i: u32) -> Type {
    Type::Var(i)
}

pub fn err(span: Span, msg: impl Into<String>) -> RunError {
    RunError::runtime(span, msg)
}

pub fn want_real(v: &Value, span: Span, what: &str) -> Result<f64, RunError> {
    v.as_real().ok_or_else(|| err(span, format!("{what}: expected a real, got {v}")))
}
pub fn want_int(v: &Value, span: Span, what: &str) -> Result<i64, RunError> {
    v.as_int().ok_or_else(|| err(span, format!("{what}: expected an integer, got {v}")))
}
pub fn want_pair(v: &Value, span: Span, what: &str) -> Result<(Value, Value), RunError> {
    match v {
        Value::Tuple(vs) if vs.len() == 2 => Ok((vs[0].clone(), vs[1].clone())),
        _ => Err(err(span, format!("{what}: expected a pair, got {v}"))),
    }
}

/// Number of leaves (the cost of a dense cotangent operation).
pub fn size(v: &Value) -> u64 {
    let mut n = 0;
    v.for_each_leaf(&mut |_| n += 1);
    n.max(1)
}

/// `a + b` on cotangents of the same input (reals added; integers, booleans and tags from `a`).
pub fn cot_add(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Real(x), Value::Real(y)) => Value::Real(x + y),
        (Value::Tuple(xs), Value::Tuple(ys)) if xs.len() == ys.len() => {
            Value::Tuple(xs.iter().zip(ys.iter()).map(|(x, y)| cot_add(x, y)).collect())
        }
        (Value::Inl(x), Value::Inl(y)) => Value::Inl(std::rc::Rc::new(cot_add(x, y))),
        (Value::Inr(x), Value::Inr(y)) => Value::Inr(std::rc::Rc::new(cot_add(x, y))),
        (a, _) => a.clone(),
    }
}

pub fn zero_of(v: &Value) -> Value {
    v.with_reals(&mut std::iter::repeat(0.0))
}

/// The builtins every monadic stage uses: `genID`, `getID`, `runIDs`, `counted`.
pub fn common_builtins() -> Vec<Builtin> {
    vec![
        Builtin { name: "genID", scheme: Scheme::mono(m_ty(Type::Int)), arity: 0, lazy_last: false, run: b_gen_id },
        Builtin { name: "getID", scheme: Scheme::mono(m_ty(Type::Int)), arity: 0, lazy_last: false, run: b_get_id },
        Builtin { name: "runIDs", scheme: scheme(&[1], Type::fun(m_ty(tv(1)), tv(1))), arity: 1, lazy_last: true, run: b_run_ids },
        counted_builtin(),
    ]
}

pub fn counted_builtin() -> Builtin {
    Builtin { name: "counted", scheme: scheme(&[1], Type::fun(tv(1), tv(1))), arity: 1, lazy_last: false, run: b_counted }
}

/// `zeroOf : a → a`: the cotangent zero shaped like a value (O(size)).
pub fn zero_of_builtin() -> Builtin {
    Builtin { name: "zeroOf", scheme: scheme(&[1], Type::fun(tv(1), tv(1))), arity: 1, lazy_last: false, run: b_zero_of }
}

fn b_gen_id(m: &mut Machine, _: Vec<Value>, _: Span) -> Result<Value, RunError> {
    m.tick(1)?;
    m.count("ids_allocated", 1);
    let r = rt(m);
    let i = r.next_id;
    r.next_id += 1;
    Ok(Value::Int(i))
}
fn b_get_id(m: &mut Machine, _: Vec<Value>, _: Span) -> Result<Value, RunError> {
    Ok(Value::Int(rt(m).next_id))
}
fn b_run_ids(m: &mut Machine, mut args: Vec<Value>, _: Span) -> Result<Value, RunError> {
    rt(m).next_id = 0;
    let thunk = args.pop().unwrap_or(Value::Unit);
    m.apply(thunk, Value::Unit)
}
fn b_counted(m: &mut Machine, mut args: Vec<Value>, _: Span) -> Result<Value, RunError> {
    m.count("backprop_calls", 1);
    Ok(args.pop().unwrap_or(Value::Unit))
}
fn b_zero_of(m: &mut Machine, args: Vec<Value>, _: Span) -> Result<Value, RunError> {
    m.tick(size(&args[0]))?;
    Ok(zero_of(&args[0]))
}

/// Before a run: the zero of c and the number of input scalars.
pub fn prepare(m: &mut Machine, input: &Value) {
    let r = rt(m);
    r.zero = Some(zero_of(input));
    r.n_inputs = input.real_leaves().len() as i64;
}

/// The chain's `before_run`: `prepare` for the run's input.
pub fn before_run(m: &mut Machine, cx: &crate::stage::RunCtx) {
    prepare(m, cx.input);
}

/// Runs the wrapper after `prepare` (for runs outside the pipeline).
pub fn run_wrapper(m: &mut Machine, input: &Value, seed: &Value) -> Result<(Value, Value), RunError> {
    prepare(m, input);
    crate::stage::run_wrapper(m, input, seed)
}

/// Records an edge `current → target` (the resolve of `current` staged a call of `target`).
pub fn record_edge(m: &mut Machine, target: i64, weight: f64) {
    let r = rt(m);
    let from = r.current.unwrap_or(-1);
    *r.edges.entry((from, target)).or_insert(0.0) += weight;
    *r.edge_calls.entry((from, target)).or_insert(0) += 1;
}

pub fn record_resolved(m: &mut Machine, id: i64, a: f64) {
    let e = rt(m).resolved.entry(id).or_insert((0.0, 0));
    e.0 += a;
    e.1 += 1;
}

/// Drawing limit for graphs.
pub const GRAPH_LIMIT: i64 = 2_000;

/// The backpropagator graph: one node per ID, edges from a backpropagator to the ones it staged
/// calls of (weighted by the cotangent passed where known), and a node for the wrapper's direct
/// call of the output backpropagator(s).
pub fn graph(m: &mut Machine, ctor: &str) -> Option<Graph> {
    let r = rt(m);
    let n = r.next_id;
    if n == 0 {
        return None;
    }
    let shown = n.min(GRAPH_LIMIT);
    let mut indeg: BTreeMap<i64, u32> = BTreeMap::new();
    for &(_, to) in r.edges.keys() {
        *indeg.entry(to).or_insert(0) += 1;
    }
    // The wrapper calls the output's backpropagators directly (§6.1): when exactly one
    // non-input ID was never resolved and nothing points to it, that is the output, and the direct
    // call's edges start there; otherwise they start at a node standing for the wrapper.
    let direct: Vec<i64> = r.edges.keys().filter(|(f, _)| *f < 0).map(|(_, t)| *t).collect();
    let sources: Vec<i64> =
        (r.n_inputs..n).filter(|i| !r.resolved.contains_key(i) && !indeg.contains_key(i) && !direct.contains(i)).collect();
    let out_id: Option<i64> = if !direct.is_empty() && sources.len() == 1 { Some(sources[0]) } else { None };
    let mut nodes: Vec<GraphNode> = (0..shown)
        .map(|i| {
            let input = i < r.n_inputs;
            let (cot, visits) = r.resolved.get(&i).copied().map_or((None, None), |(a, v)| (Some(a), Some(v)));
            let kind = r.kinds.get(&i).cloned().unwrap_or_else(|| if input { "input".into() } else { ctor.to_string() });
            let label = if input {
                format!("input {i}")
            } else if Some(i) == out_id {
                format!("{kind} (output, called directly)")
            } else {
                kind.clone()
            };
            GraphNode {
                id: i as u64,
                ctor: kind,
                label,
                delta_id: Some(i),
                value: cot,
                shared: indeg.get(&i).copied().unwrap_or(0) > 1,
                visits: visits.or(if Some(i) == out_id { Some(1) } else { None }),
                group: None,
                span: None,
            }
        })
        .collect();
    let wrapper_node = n as u64;
    if !direct.is_empty() && out_id.is_none() {
        nodes.push(GraphNode { id: wrapper_node, ctor: "output".into(), label: "output cotangent".into(), ..GraphNode::default() });
    }
    let from_of = |f: i64| if f >= 0 { f as u64 } else { out_id.map_or(wrapper_node, |o| o as u64) };
    let edges = r
        .edges
        .iter()
        .filter(|((f, t), _)| *f < shown && *t < shown)
        .map(|(&(f, t), w)| GraphEdge { from: from_of(f), to: t as u64, label: crate::value::show_real(*w) })
        .collect();
    Some(Graph { nodes, edges, groups: vec![], omitted: (n - shown) as u64 })
}

/// A resolve trace step.
pub fn trace_resolve(m: &mut Machine, id: i64, a: f64, note: String, state: Vec<(String, f64)>) {
    if m.tracing() {
        m.trace(TraceStep { kind: "resolve".into(), node: Some(id as u64), span: None, factor: Some(a), note, state });
    }
}

/// The Staged object (or arrays) handed to SResolve, before its first step.
pub fn trace_start(m: &mut Machine, state: Vec<(String, f64)>) {
    if m.tracing() {
        m.trace(TraceStep { kind: "staged".into(), note: "the staged state handed to SResolve".into(), state, ..TraceStep::default() });
    }
}

/// Rows `c[k] -> v` for the real leaves of a dense collector.
pub fn collector_rows(c: &Value) -> Vec<(String, f64)> {
    c.real_leaves().into_iter().enumerate().map(|(k, v)| (format!("c[{k}]"), v)).collect()
}

/// The wrapper's stated type: `grad : (σ, τ) → (τ, σ)` (gradients in the input's shape).
pub fn grad_type(src: &Source) -> (String, Type) {
    let (s, t) = (src.input_type.clone(), src.output_type.clone());
    (WRAPPER.into(), Type::fun(Type::Tuple(vec![s.clone(), t.clone()]), Type::Tuple(vec![t, s])))
}

pub fn main_type(src: &Source, real: &Type, monadic: bool) -> (String, Type) {
    let (s, t) = (src.input_type, src.output_type);
    let r = dtype(t, real, monadic);
    let f = Type::fun(dtype(s, real, monadic), if monadic { m_ty(r) } else { r });
    // a `main` that is not a lambda (`def main = compose f g`) is a computation of the function
    let is_lam = src.program.def("main").is_some_and(|d| matches!(strip_ann(&d.body).kind, ExprKind::Lam(..)));
    ("main".into(), if monadic && !is_lam { m_ty(f) } else { f })
}

/// `main x` in the monad: `main x` when `main` is a function, `do f ← main; f x` when it is a
/// computation of one (`def main = compose f g`).
pub fn run_main(out: &Program, x: Expr, fr: &mut Fresh) -> Expr {
    let is_lam = out.def("main").is_some_and(|d| matches!(strip_ann(&d.body).kind, ExprKind::Lam(..)));
    if is_lam {
        app(global("main"), x)
    } else {
        let f = fr.name("f");
        bind(pvar(&f), global("main"), app(var(&f), x))
    }
}


/// How Interleave passes backpropagators down the input (Figs. 7–9).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Down {
    /// Fig. 7: `Interleave¹ : (τ, dτ ⊸ c) → D¹_c[τ]`, no IDs.
    Naive,
    /// Fig. 8: `Interleave² : (τ, dτ ⊸ Staged c) → M D²_c[τ]`, one ID per real.
    Staged,
    /// Fig. 9: `Interleave³ : (τ, (dτ → dτ) ⊸ (Staged c → Staged c)) → M D³_c[τ]` (setters).
    Cayley,
}

/// `Interleave_τ (x, d)` as inline code over the input type (Figs. 7, 8, 9). The backpropagators
/// of the input's reals (the one-hots) have their bodies wrapped in `counted`.
pub fn interleave_down(ty: &Type, x: Expr, d: Expr, fr: &mut Fresh, mode: Down) -> Expr {
    let ret = |e: Expr| if mode == Down::Naive { e } else { pure(e) };
    match ty {
        Type::Real => match mode {
            // Interleave¹_R = λ(x, d). (x, d)
            Down::Naive => pair(x, d),
            // Interleave²_R = λ(x, d). genID >>= λi. pure (x, (i, d))
            Down::Staged => {
                let i = fr.name("i");
                bind(pvar(&i), builtin("genID"), pure(pair(x, pair(var(&i), d))))
            }
            // Interleave³_R = λ(x, d). genID >>= λi. pure (x, (i, linλz. d (λa. z + a)))
            Down::Cayley => {
                let (i, z, a) = (fr.name("i"), fr.name("z"), fr.name("a"));
                let bp = linlam(pvar(&z), app(builtin("counted"), app(d, lam(pvar(&a), add(var(&z), var(&a))))));
                bind(pvar(&i), builtin("genID"), pure(pair(x, pair(var(&i), bp))))
            }
        },
        Type::Tuple(ts) => {
            let xs: Vec<Name> = ts.iter().map(|_| fr.name("x")).collect();
            let parts: Vec<Expr> = (0..ts.len())
                .map(|k| {
                    let dk = match mode {
                        // linλz. d (0, …, z, …, 0): the zeros are the siblings' zeros (O(size))
                        Down::Naive | Down::Staged => {
                            let z = fr.name("z");
                            let arg = tuple(
                                (0..ts.len()).map(|j| if j == k { var(&z) } else { app(builtin("zeroOf"), var(&xs[j])) }).collect(),
                            );
                            let body = app(d.clone(), arg);
                            linlam(pvar(&z), if ts[k] == Type::Real { app(builtin("counted"), body) } else { body })
                        }
                        // λf. d (λ(v1, …, vn). (v1, …, f vk, …, vn)): updates only the path to the leaf
                        Down::Cayley => {
                            let f = fr.name("f");
                            let vs: Vec<Name> = ts.iter().map(|_| fr.name("v")).collect();
                            let upd = tuple((0..ts.len()).map(|j| if j == k { app(var(&f), var(&vs[j])) } else { var(&vs[j]) }).collect());
                            lam(pvar(&f), app(d.clone(), lam(ptuple(vs.iter().map(pvar).collect()), upd)))
                        }
                    };
                    interleave_down(&ts[k], var(&xs[k]), dk, fr, mode)
                })
                .collect();
            let body = if mode == Down::Naive {
                tuple(parts)
            } else {
                let rs: Vec<Name> = ts.iter().map(|_| fr.name("x'")).collect();
                let res = pure(tuple(rs.iter().map(var).collect()));
                parts.into_iter().enumerate().rev().fold(res, |acc, (k, m)| mbind(pvar(&rs[k]), m, acc))
            };
            let_(ptuple(xs.iter().map(pvar).collect()), x, body)
        }
        Type::Sum(l, r) => {
            let side = |t: &Type, left: bool, fr: &mut Fresh| {
                let y = fr.name("x");
                let tag = |e: Expr| if left { inl(e) } else { inr(e) };
                let dk = match mode {
                    Down::Naive | Down::Staged => {
                        let z = fr.name("z");
                        let body = app(d.clone(), tag(var(&z)));
                        linlam(pvar(&z), if *t == Type::Real { app(builtin("counted"), body) } else { body })
                    }
                    Down::Cayley => {
                        let (f, v, a, b) = (fr.name("f"), fr.name("v"), fr.name("a"), fr.name("b"));
                        let upd = if left {
                            case(var(&v), pvar(&a), inl(app(var(&f), var(&a))), pvar(&b), inr(var(&b)))
                        } else {
                            case(var(&v), pvar(&a), inl(var(&a)), pvar(&b), inr(app(var(&f), var(&b))))
                        };
                        lam(pvar(&f), app(d.clone(), lam(pvar(&v), upd)))
                    }
                };
                let inner = interleave_down(t, var(&y), dk, fr, mode);
                let y2 = fr.name("x'");
                (y, if mode == Down::Naive { tag(inner) } else { mbind(pvar(&y2), inner, pure(tag(var(&y2)))) })
            };
            let (ya, ea) = side(l, true, fr);
            let (yb, eb) = side(r, false, fr);
            case(x, pvar(&ya), ea, pvar(&yb), eb)
        }
        // Interleave_Z = λ(n, d). n
        _ => ret(x),
    }
}

// ---------------------------------------------------------------------------------------------
// Arrays (§9): the frozen collector `IArray dR` and its `@`; `runIO` (unsafePerformIO)

/// A frozen array of cotangents (`IArray dR`).
#[derive(Debug)]
pub struct IArr(pub Vec<f64>);

impl crate::value::ExtValue for IArr {
    fn type_name(&self) -> &'static str {
        "IArray"
    }
    fn show(&self) -> String {
        let xs: Vec<String> = self.0.iter().take(32).map(|x| crate::value::show_real(*x)).collect();
        format!("[{}{}]", xs.join(", "), if self.0.len() > 32 { ", …" } else { "" })
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

pub fn iarray_ty() -> Type {
    Type::con("IArray", vec![Type::Real])
}

/// `at : IArray dR → Z → dR` (the paper's `a @ i`) and `runIO : M a → a` (unsafePerformIO).
pub fn array_builtins() -> Vec<Builtin> {
    vec![
        Builtin { name: "at", scheme: Scheme::mono(Type::fun(iarray_ty(), Type::fun(Type::Int, Type::Real))), arity: 2, lazy_last: false, run: b_at },
        Builtin { name: "runIO", scheme: scheme(&[1], Type::fun(m_ty(tv(1)), tv(1))), arity: 1, lazy_last: false, run: b_run_io },
    ]
}

fn b_at(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    m.tick(1)?;
    let a = args[0].ext::<IArr>().ok_or_else(|| err(span, format!("@: expected an array, got {}", args[0])))?;
    let i = want_int(&args[1], span, "@")?;
    a.0.get(i as usize).map(|x| Value::Real(*x)).ok_or_else(|| err(span, format!("@: index {i} out of bounds")))
}

fn b_run_io(_: &mut Machine, mut args: Vec<Value>, _: Span) -> Result<Value, RunError> {
    Ok(args.pop().unwrap_or(Value::Unit))
}

pub fn iarr(v: Vec<f64>) -> Value {
    Value::Ext(std::rc::Rc::new(IArr(v)))
}

/// `λs. do _ ← p1 s; …; pn s` (the monoid on `Staged c → M ()`: `f + g = λs. f s >> g s`,
/// `0 = λs. return ()`; Fig. 10).
pub fn combine_io(parts: Vec<Expr>, fr: &mut Fresh) -> Expr {
    let s = fr.name("s");
    let mut it = parts.into_iter().rev();
    let body = match it.next() {
        None => pure(unit()),
        Some(last) => it.fold(app(last, var(&s)), |acc, p| bind(pwild(), app(p, var(&s)), acc)),
    };
    lam(pvar(&s), body)
}

/// `λs. p1 (p2 (… (pn s)))` (the Cayley monoid on `Staged c → Staged c`: `+ = ∘`, `0 = id`; Fig. 9).
pub fn combine_cayley(parts: Vec<Expr>, fr: &mut Fresh) -> Expr {
    let s = fr.name("s");
    let body = parts.into_iter().rev().fold(var(&s), |acc, p| app(p, acc));
    lam(pvar(&s), body)
}

/// The Fig. 10 wrapper, shared by §§9–10:
/// `grad (x, dy) = let (y, d, rebuild, ninp, nout) = runIDs (do (x', rebuild) ← interleave x; ninp ← getID;
///                     y' ← main x'; nout ← getID; let (y, d) = deinterleave y' in pure (…))
///                 in (y, rebuild (runIO (do s ← SAlloc …; _ ← d dy s; SResolve nout s)))`
pub fn wrapper_fig10(out: &Program, fr: &mut Fresh, alloc_takes_inputs: bool) -> Expr {
    let (x, dy, y, d, rb, ni, no, x2, y2, s) = (
        fr.name("x"),
        fr.name("dy"),
        fr.name("y"),
        fr.name("d"),
        fr.name("rebuild"),
        fr.name("ninp"),
        fr.name("nout"),
        fr.name("x'"),
        fr.name("y'"),
        fr.name("s"),
    );
    let res = pure(tuple(vec![var(&y), var(&d), var(&rb), var(&ni), var(&no)]));
    let call_main = run_main(out, var(&x2), fr);
    let fwd = bind(
        ppair(pvar(&x2), pvar(&rb)),
        app(global("interleave"), var(&x)),
        bind(
            pvar(&ni),
            builtin("getID"),
            bind(
                pvar(&y2),
                call_main,
                bind(pvar(&no), builtin("getID"), let_(ppair(pvar(&y), pvar(&d)), app(global("deinterleave"), var(&y2)), res)),
            ),
        ),
    );
    let alloc = if alloc_takes_inputs { apps(builtin("SAlloc"), [var(&ni), var(&no)]) } else { app(builtin("SAlloc"), var(&no)) };
    let io = bind(
        pvar(&s),
        alloc,
        bind(pwild(), apps(var(&d), [var(&dy), var(&s)]), apps(builtin("SResolve"), [var(&no), var(&s)])),
    );
    let pat = ptuple(vec![pvar(&y), pvar(&d), pvar(&rb), if alloc_takes_inputs { pvar(&ni) } else { pwild() }, pvar(&no)]);
    let body = let_(pat, app(builtin("runIDs"), fwd), pair(var(&y), app(var(&rb), app(builtin("runIO"), io))));
    lam(ppair(pvar(&x), pvar(&dy)), body)
}
