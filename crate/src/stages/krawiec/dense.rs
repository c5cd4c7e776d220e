//! `krawiec/dense`: reverse mode #1, Krawiec et al. §5, Figs. 5–6. Each real is paired with a dense
//! vector of type δS (S the input type of `main`) holding the derivative of that real with respect to
//! every real of the input. Like `forward`, everything but real literals and real primitives is
//! translated homomorphically; `+R` and `×R` combine the vectors with ⊕S and ⊗S, each O(|S|).
//!
//! This file also holds the pieces the other Krawiec stages share: the homomorphic dual-number
//! translation parameterised by what a real's companion is (δS here, `Delta` in `krawiec/delta`), the
//! check that `main : R^a → R` for the wrappers of Figs. 6, 8 and 11, and structural code over R^a.

use crate::build::*;
use crate::deriv::{self, Partial};
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Machine, RunError};
use crate::ir::*;
use crate::stage::{Output, Source, Stage, StageInfo, WRAPPER};
use crate::value::{show_real, ExtValue, Value};
use std::any::Any;
use std::rc::Rc;

pub struct Dense;

static INFO: StageInfo = StageInfo {
    id: "krawiec/dense",
    paper: "Krawiec et al. 2022",
    section: "§5, Figs. 5–6",
    title: "Reverse mode #1: one pass with dense δS vectors",
    explanation: "Instead of running forward mode once per input (the Forward Plan), pair each real with a whole \
vector δS of derivatives, one entry per real of the input S: the type translation is Drev1_S{R} = R × δS, and the \
translation is indexed by S. Literals get zero_S; +R adds the vectors with ⊕S (addS) and ×R scales them with ⊗S \
(scaleS) before adding; everything else is translated homomorphically, exactly as in forward mode, so closures, \
recursion, sums and integers come for free. The wrapper R1{e} seeds input i with dt ⊗ onehot i and reads the \
gradient off the vector of the result, in one run. The catch: every ⊕S and ⊗S touches all a entries, so each \
floating-point operation of the program costs O(a) (counter vector_elem_ops), and the seeds alone are quadratic in a. \
zero_S must also be produced out of thin air; for S = R^a it is just a zeros (for sums its shape would depend on the \
input value, §6, which is why this stage, like the paper's Fig. 6, takes main : R^a → R).",
    complexity: "O(a·T) time for a program of T operations on a reals of input; O(a) memory per live real.",
    accepts: "the whole scalar language inside main; main itself must have type R^a → R (Fig. 6)",
};

// ---------------------------------------------------------------------------------------------
// Shared: R^a → R wrappers
// ---------------------------------------------------------------------------------------------

/// `R^a`: a real, or a tuple (nested any way) of reals only.
pub(crate) fn is_real_tuple(t: &Type) -> bool {
    match t {
        Type::Real => true,
        Type::Tuple(ts) => ts.iter().all(is_real_tuple),
        _ => false,
    }
}

/// Refuses a `main` that is not `R^a → R`, for the wrappers the paper gives only for that case.
pub(crate) fn require_ra_to_r(src: &Source, stage: &str, figure: &str) -> Result<(), Diagnostic> {
    let (s, t) = (src.input_type, src.output_type);
    if is_real_tuple(s) && *t == Type::Real {
        return Ok(());
    }
    let span = src.program.def("main").map_or(Span::NONE, |d| d.span);
    let why = if !is_real_tuple(s) {
        format!("its input type {} is not a tuple of reals", crate::types::show(s))
    } else {
        format!("its output type {} is not R", crate::types::show(t))
    };
    Err(Diagnostic::error(
        span,
        format!(
            "{stage} uses the wrapper of {figure}, which the paper gives only for main : R^a → R (a tuple of reals to \
one real), but {why}; krawiec/general (§11, Fig. 15) handles arbitrary first-order S and T, with sums and integer leaves"
        ),
    ))
}

/// The pattern `((s1, s2), s3)` of an R^a type, naming its reals left to right.
pub(crate) fn ra_pat(t: &Type, names: &mut impl Iterator<Item = Name>) -> Pat {
    match t {
        Type::Tuple(ts) => ptuple(ts.iter().map(|t| ra_pat(t, names)).collect()),
        _ => pvar(&names.next().expect("one name per real")),
    }
}

/// An expression in the shape of an R^a type, with `leaf(i)` (1-based, left to right) at each real.
pub(crate) fn ra_expr(t: &Type, i: &mut i64, leaf: &mut dyn FnMut(i64) -> Expr) -> Expr {
    match t {
        Type::Tuple(ts) => tuple(ts.iter().map(|t| ra_expr(t, i, leaf)).collect()),
        _ => {
            *i += 1;
            leaf(*i)
        }
    }
}

pub(crate) fn count_reals(t: &Type) -> usize {
    match t {
        Type::Real => 1,
        Type::Tuple(ts) => ts.iter().map(count_reals).sum(),
        Type::Sum(a, b) => count_reals(a) + count_reals(b),
        _ => 0,
    }
}

/// Structural code over a first-order type: destructures tuples and sums of `x : ty` and applies
/// `leaf` at each leaf (reals, integers, booleans, units), rebuilding the same shape.
pub(crate) fn map_shape(ty: &Type, x: Expr, fr: &mut Fresh, leaf: &dyn Fn(&Type, Expr, &mut Fresh) -> Expr) -> Expr {
    match ty {
        Type::Tuple(ts) => {
            let ns: Vec<Name> = ts.iter().map(|_| fr.name("v")).collect();
            let parts = ts.iter().zip(&ns).map(|(t, n)| map_shape(t, var(n), fr, leaf)).collect();
            let_(ptuple(ns.iter().map(pvar).collect()), x, tuple(parts))
        }
        Type::Sum(a, b) => {
            let (na, nb) = (fr.name("l"), fr.name("r"));
            let ea = inl(map_shape(a, var(&na), fr, leaf));
            let eb = inr(map_shape(b, var(&nb), fr, leaf));
            case(x, pvar(&na), ea, pvar(&nb), eb)
        }
        t => leaf(t, x, fr),
    }
}

pub(crate) use crate::stage::without_reserved;

// ---------------------------------------------------------------------------------------------
// Shared: the homomorphic dual-number translation (Fig. 3's shape), for Figs. 5 and 7
// ---------------------------------------------------------------------------------------------

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

/// `D{A}`: R ↦ R × companion, homomorphic elsewhere.
pub(crate) fn dual_type(t: &Type, c: &dyn Companion) -> Type {
    match t {
        Type::Real => Type::Tuple(vec![Type::Real, c.ty()]),
        Type::Tuple(ts) => Type::Tuple(ts.iter().map(|t| dual_type(t, c)).collect()),
        Type::Sum(a, b) => Type::sum(dual_type(a, c), dual_type(b, c)),
        Type::Fun(a, b) => Type::fun(dual_type(a, c), dual_type(b, c)),
        Type::Lin(a, b) => Type::lin(dual_type(a, c), dual_type(b, c)),
        Type::Con(n, ts) => Type::Con(n.clone(), ts.iter().map(|t| dual_type(t, c)).collect()),
        t => t.clone(),
    }
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
            super::delta::stamp(&mut companion, span);
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
pub(crate) fn dual_program(src: &Source, reserved: &[&str], fr: &mut Fresh, c: &dyn Companion) -> Program {
    let mut out = without_reserved(src.program, reserved);
    for d in &mut out.defs {
        d.body = dual(&d.body, fr, c);
        d.scheme = None;
    }
    out.expects.clear();
    out.input = None;
    out
}

// ---------------------------------------------------------------------------------------------
// The dense vectors δS and their builtins
// ---------------------------------------------------------------------------------------------

/// A value of δS for S = R^a: the a reals of a small change to the input, left to right.
#[derive(Debug)]
/// The entries, and the index when made by `onehot` (so that `dt ⊗ onehot i` is dt at i and exactly
/// 0 elsewhere even for dt = ∞: the other inputs' entries are structural zeros, README "Non-finite values").
pub struct DenseVec(pub Vec<f64>, pub Option<usize>);

impl ExtValue for DenseVec {
    fn type_name(&self) -> &'static str {
        "δS"
    }
    fn show(&self) -> String {
        let mut s: Vec<String> = self.0.iter().take(8).map(|r| show_real(*r)).collect();
        if self.0.len() > 8 {
            s.push(format!("… ({} entries)", self.0.len()));
        }
        format!("[{}]", s.join(", "))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The type δS (a synonym for S in the paper; a flat vector of S's reals here).
pub fn ds_type() -> Type {
    Type::con("δS", vec![])
}

fn vec_arg(v: &Value, span: Span, what: &str) -> Result<Rc<dyn ExtValue>, RunError> {
    match v {
        Value::Ext(e) if e.as_any().is::<DenseVec>() => Ok(e.clone()),
        other => Err(RunError::runtime(span, format!("{what} expects a δS vector, got {other}"))),
    }
}

fn dense(e: &Rc<dyn ExtValue>) -> &[f64] {
    &e.as_any().downcast_ref::<DenseVec>().expect("checked").0
}

/// Pays for `n` element operations: the steps budget (so an exploding run stops cleanly), the
/// `vector_elem_ops` counter, and `n` real operations.
fn pay(m: &mut Machine, n: usize, arithmetic: bool) -> Result<(), RunError> {
    m.count("vector_elem_ops", n as u64);
    if arithmetic {
        for _ in 0..n {
            m.real_op();
        }
    }
    m.tick(n as u64)?;
    m.alloc(1)
}

fn int_arg(v: &Value, span: Span, what: &str) -> Result<i64, RunError> {
    v.as_int().ok_or_else(|| RunError::runtime(span, format!("{what} expects an integer, got {v}")))
}

fn b_zeros(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let n = int_arg(&args[0], span, "zeros")?.max(0) as usize;
    pay(m, n, false)?;
    Ok(Value::Ext(Rc::new(DenseVec(vec![0.0; n], None))))
}

fn b_onehot(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let n = int_arg(&args[0], span, "onehot")?.max(0) as usize;
    let i = int_arg(&args[1], span, "onehot")?;
    if i < 1 || i as usize > n {
        return Err(RunError::runtime(span, format!("onehot {n} {i}: the index is outside 1..{n}")));
    }
    pay(m, n, false)?;
    let mut v = vec![0.0; n];
    v[i as usize - 1] = 1.0;
    Ok(Value::Ext(Rc::new(DenseVec(v, Some(i as usize - 1)))))
}

fn b_add(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let (a, b) = (vec_arg(&args[0], span, "addS (⊕S)")?, vec_arg(&args[1], span, "addS (⊕S)")?);
    let (a, b) = (dense(&a), dense(&b));
    if a.len() != b.len() {
        return Err(RunError::runtime(span, format!("addS (⊕S): vectors of lengths {} and {} differ in shape", a.len(), b.len())));
    }
    pay(m, a.len(), true)?;
    Ok(Value::Ext(Rc::new(DenseVec(a.iter().zip(b).map(|(x, y)| x + y).collect(), None))))
}

fn b_scale(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let k = args[0].as_real().ok_or_else(|| RunError::runtime(span, "scaleS (⊗S) expects a real factor"))?;
    let v = vec_arg(&args[1], span, "scaleS (⊗S)")?;
    let onehot = v.as_any().downcast_ref::<DenseVec>().and_then(|d| d.1);
    let v = dense(&v);
    pay(m, v.len(), true)?;
    let scaled = match onehot {
        Some(i) => (0..v.len()).map(|j| if j == i { k } else { 0.0 }).collect(),
        None => v.iter().map(|x| k * x).collect(),
    };
    Ok(Value::Ext(Rc::new(DenseVec(scaled, None))))
}

fn b_component(_m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let v = vec_arg(&args[0], span, "component")?;
    let v = dense(&v);
    let i = int_arg(&args[1], span, "component")?;
    if i < 1 || i as usize > v.len() {
        return Err(RunError::runtime(span, format!("component {i}: the index is outside 1..{}", v.len())));
    }
    Ok(Value::Real(v[i as usize - 1]))
}

struct DenseCompanion;

impl Companion for DenseCompanion {
    fn ty(&self) -> Type {
        ds_type()
    }
    fn zero(&self) -> Expr {
        global("zero_S")
    }
    fn add(&self, a: Expr, b: Expr) -> Expr {
        apps(builtin("addS"), [a, b])
    }
    fn scale(&self, c: Expr, d: Expr) -> Expr {
        apps(builtin("scaleS"), [c, d])
    }
    fn names(&self) -> [&'static str; 2] {
        ["dx", "dy"]
    }
    fn skips_constants(&self) -> bool {
        true
    }
}

impl Stage for Dense {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let (z, ds, r) = (Type::Int, ds_type(), Type::Real);
        let mono = |t: Type| Scheme::mono(t);
        vec![
            Builtin { name: "zeros", scheme: mono(Type::fun(z.clone(), ds.clone())), arity: 1, lazy_last: false, run: b_zeros },
            Builtin {
                name: "onehot",
                scheme: mono(Type::fun(z.clone(), Type::fun(z.clone(), ds.clone()))),
                arity: 2,
                lazy_last: false,
                run: b_onehot,
            },
            Builtin {
                name: "addS",
                scheme: mono(Type::fun(ds.clone(), Type::fun(ds.clone(), ds.clone()))),
                arity: 2,
                lazy_last: false,
                run: b_add,
            },
            Builtin {
                name: "scaleS",
                scheme: mono(Type::fun(r.clone(), Type::fun(ds.clone(), ds.clone()))),
                arity: 2,
                lazy_last: false,
                run: b_scale,
            },
            Builtin { name: "component", scheme: mono(Type::fun(ds, Type::fun(z, r))), arity: 2, lazy_last: false, run: b_component },
        ]
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        require_ra_to_r(src, "krawiec/dense", "Fig. 6 (R1{e})")
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut fr = Fresh::new(src.program);
        let mut out = dual_program(src, &[WRAPPER, "zero_S", "onehot_S"], &mut fr, &DenseCompanion);
        let s = src.input_type;
        let a = count_reals(s) as i64;
        // zero_S and onehot_S for S = R^a (Fig. 5's zero_S, Fig. 6's onehot_{R^a}); indices are 1-based.
        // §6: zero_S must be produced "out of thin air"; for S = S1 + S2 its shape (inl or inr) would
        // depend on the input value, not only on S. Fig. 6 is given for S = R^a only, and so is this
        // stage (accepts), where zero_S is simply a zeros: the shape problem cannot arise. Sums in the
        // input are handled by krawiec/general, whose Delta needs no zero of S's shape at all.
        out.defs.push(def("zero_S", app(builtin("zeros"), int(a))));
        out.defs.push(def("onehot_S", app(builtin("onehot"), int(a))));
        // R1{e} = λ((..., s_i, ...), dt). snd (Drev1{e} (..., (s_i, dt ⊗ onehot i), ...)),
        // extended to return the primal and to read the vector back into S's shape.
        let names: Vec<Name> = (1..=a).map(|_| fr.name("s")).collect();
        let (dt, t, ds) = (fr.name("dt"), fr.name("t"), fr.name("ds"));
        let s0 = ra_expr(s, &mut 0, &mut |i| {
            pair(var(&names[i as usize - 1]), apps(builtin("scaleS"), [var(&dt), app(global("onehot_S"), int(i))]))
        });
        let grad_s = ra_expr(s, &mut 0, &mut |i| apps(builtin("component"), [var(&ds), int(i)]));
        let body = let_(ppair(pvar(&t), pvar(&ds)), app(global("main"), s0), pair(var(&t), grad_s));
        let param = ppair(ra_pat(s, &mut names.iter().cloned()), pvar(&dt));
        out.defs.push(def(WRAPPER, lam(param, body)));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        let (s, t) = (src.input_type, src.output_type);
        let c = DenseCompanion;
        vec![
            // Drev1_S{e} : Drev1_S{S} → Drev1_S{T}
            ("main".into(), Type::fun(dual_type(s, &c), dual_type(t, &c))),
            // R1{e} : (R^a × δR) → δR^a, plus the primal
            (WRAPPER.into(), Type::fun(Type::Tuple(vec![s.clone(), t.clone()]), Type::Tuple(vec![t.clone(), s.clone()]))),
        ]
    }
}
