//! The CHAD transform `D_Γ[t] : D[τ]1 × (D[τ]2 → …)`, rule for rule. Figs. 2 and 7 are the same
//! rules but for four operations on environment vectors (§4.2's correspondence: `0_{EV Γ}` becomes
//! `return ⟨⟩`, `+_{EV Γ}` becomes `>>`, `one` becomes the monadic `one`, `split` becomes `scope`),
//! so the rules are written once here and each stage gives its `EnvApi`.
//!
//! Output shape: each rule yields bindings and a final ⟨primal, backpropagator⟩; a parent binds a
//! subterm's pair as `let ⟨x, x'⟩ = D_Γ[t]` by appending its bindings, so let chains stay one
//! spine in the output (nothing recurses along them) and only case branches nest.

use super::bags;
use super::bp_tree;
use super::ops::{self, Ctx, CtxS};
use super::source::{self, Code, FirstOrder, Term, CT, K};
use crate::build::*;
use crate::deriv::{self, Partial};
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::prims::Prim;
use crate::stage::WRAPPER;

/// The operations on environment vectors in which Fig. 2 (`EV Γ`) and Fig. 7 (`EVM Γ`) differ.
pub trait EnvApi {
    /// `0_{EV Γ}` (Fig. 2) / `return ⟨⟩` (Fig. 7): the backpropagator that adds nothing.
    fn nothing(&self, g: &CtxS) -> Expr;
    /// `a + b` (Fig. 2) / `do a; b` (Fig. 7).
    fn both(&self, a: Expr, b: Expr) -> Expr;
    /// `one_{x:τ∈Γ} d`.
    fn one(&self, g: &CtxS, pos: usize, d: Expr) -> Expr;
    /// The let and case rules' tail, after the body's backpropagator `call` ran in Γ, x:τ:
    /// `let ⟨d1, d2⟩ = split_{Γ,τ} call in d1 + k d2` (Fig. 2) /
    /// `do ⟨⟨⟩, d2⟩ ← scope_{Γ,τ} call; k d2` (Fig. 7); `x` is x's entry of Γ, x:τ.
    fn scoped(&self, g: &CtxS, x: &ops::Entry, call: Expr, k: Expr, fr: &mut Fresh) -> Expr;
    /// The wrapper's final environment as the tuple of the inputs' cotangents, from `bp d`:
    /// `EV Γ` read out (Fig. 2) / `snd (run (bp d))` (§4.2).
    fn finish(&self, g: &CtxS, call: Expr) -> Expr;
}

/// A rule's result: bindings, then `⟨primal, backpropagator⟩`.
pub struct Piece {
    pub binds: Vec<(Pat, Expr)>,
    pub primal: Expr,
    pub bp: Expr,
}

impl Piece {
    fn leaf(primal: Expr, bp: Expr) -> Piece {
        Piece { binds: vec![], primal, bp }
    }
    /// `let b1 in … in ⟨primal, bp⟩`
    fn expr(self) -> Expr {
        let body = pair(self.primal, self.bp);
        lets(self.binds, body)
    }
}

/// `let b1 in … in let bn in body`, made from the innermost binding out, the bindings' buffer
/// shrinking as it empties: a 10^5-line chain has ~6·10^5 bindings, and their buffer (~90 MB)
/// kept whole beside the finished tree made the transform's peak (issue 14).
fn lets(mut binds: Vec<(Pat, Expr)>, body: Expr) -> Expr {
    let mut acc = body;
    while let Some((p, rhs)) = binds.pop() {
        acc = let_(p, rhs, acc);
        if binds.capacity() > 1024 && binds.len() < binds.capacity() / 4 {
            binds.shrink_to(binds.len() * 2);
        }
    }
    acc
}

pub struct Chad<'a> {
    pub fr: Fresh,
    pub api: &'a dyn EnvApi,
    /// Naive higher-order CHAD (§9): functions' cotangents are invocation logs.
    pub naive: bool,
}

fn ct(t: &Type) -> CT {
    CT::of(t).unwrap_or(CT::One)
}

impl Chad<'_> {
    fn ct(&self, t: &Type) -> CT {
        if self.naive { CT::naive(t).unwrap_or(CT::One) } else { ct(t) }
    }

    fn d_name(&mut self) -> Name {
        self.fr.name("d")
    }

    /// `λd. body(d)`: the backpropagator built by `rule` for the term at `span` (named for the
    /// stage's graph, `bp_tree`, when a traced run asks).
    fn lam_d(&mut self, rule: &'static str, span: Span, label: impl FnOnce() -> String, body: impl FnOnce(&mut Self, Expr) -> Expr) -> Expr {
        let d = self.d_name();
        bp_tree::site(&d, rule, label, span);
        let b = body(self, var(&d));
        lam(pvar(&d), b)
    }

    /// `let ⟨x, x'⟩ = D_Γ[t] in …`: appends the bindings, returns x and x'.
    fn sub(&mut self, g: &CtxS, t: &Term, x: Option<&Name>, binds: &mut Vec<(Pat, Expr)>) -> Result<(Expr, Expr), Diagnostic> {
        let p = self.d(g, t)?;
        // the first subterm's bindings are taken whole, not copied (a let chain's, ~6 a line, are
        // most of the program's: two buffers of them made the transform's peak; issue 14)
        if binds.is_empty() {
            *binds = p.binds;
        } else {
            binds.extend(p.binds);
        }
        let x = x.cloned().unwrap_or_else(|| self.fr.name("v"));
        let xb = self.fr.name(&format!("{}'", x.text));
        binds.push((ppair(pvar(&x), pvar(&xb)), pair(p.primal, p.bp)));
        Ok((var(&x), var(&xb)))
    }

    /// `D_Γ[t]` (Fig. 2 / Fig. 7).
    pub fn d(&mut self, g: &CtxS, t: &Term) -> Result<Piece, Diagnostic> {
        let running_out = || crate::limits::memory_running_out("transforming the program").map(|m| Diagnostic::error(t.span, m));
        // A term's instances may be large (a pair nested n deep names types of size n at each
        // level, O(n^2) in all, as it is left): the transform stops at the term where the heap
        // runs out, not at the process's last resort (issue 14 item 4, pairs-4000).
        if let Some(d) = running_out() {
            return Err(d);
        }
        let api = self.api;
        let piece = match &t.kind {
            // D_Γ[x] := ⟨x, λd. one_{x:D[τ]2∈D[Γ]2} d⟩
            K::Var(n) => {
                let Some(pos) = g.iter().rposition(|e| e.0.id == n.id) else {
                    return Err(Diagnostic::error(t.span, format!("`{}` is not a variable of the context", n.text)));
                };
                let bp = self.lam_d("var", t.span, || format!("{}", n.text), |_, d| api.one(g, pos, d));
                Piece::leaf(var(n), bp)
            }
            // D_Γ[let x = t in s] := let ⟨x, x'⟩ = D_Γ[t] in let ⟨y, y'⟩ = D_{Γ,x}[s] in
            //   ⟨y, λd. let ⟨d1, d2⟩ = split (y' d) in d1 + x' d2⟩        (Fig. 2)
            //   ⟨y, λd. do ⟨⟨⟩, dx⟩ ← scope (y' d); x' dx⟩                 (Fig. 7)
            // for a chain of lets, one binding after the other.
            K::Lets(chain, body) => {
                let mut binds = vec![];
                let mut g2 = g.to_vec();
                let mut scopes = vec![];
                for (x, rhs) in chain {
                    let (_, xb) = self.sub(&g2, rhs, Some(x), &mut binds)?;
                    // Γ at this let is a prefix of the last one: its length, not a copy (O(n²) on a long chain)
                    scopes.push((g2.len(), x.clone(), xb, rhs.span));
                    ops::push(&mut g2, x, self.ct(&rhs.ty));
                }
                let (y, mut cur) = self.sub(&g2, body, None, &mut binds)?;
                let n = scopes.len();
                for (i, (gi, x, xb, span)) in scopes.into_iter().enumerate().rev() {
                    let bp = self.lam_d("let", span, || format!("let {}", x.text), |cx, d| api.scoped(&g2[..gi], &g2[gi], app(cur.clone(), d), xb, &mut cx.fr));
                    if i == 0 {
                        return Ok(Piece { binds, primal: y, bp });
                    }
                    let b = self.fr.name(&format!("{}'", scopes_name(n, i)));
                    binds.push((pvar(&b), bp));
                    cur = var(&b);
                }
                Piece { binds, primal: y, bp: cur }
            }
            // D_Γ[⟨t, s⟩] := let ⟨x, x'⟩ = D_Γ[t] in let ⟨y, y'⟩ = D_Γ[s] in
            //   ⟨⟨x, y⟩, λd. x' (lfst d) + y' (lsnd d)⟩, n-ary
            K::Tuple(ts) => {
                let mut binds = vec![];
                let mut xs = vec![];
                for t in ts {
                    xs.push(self.sub(g, t, None, &mut binds)?);
                }
                let cts: Vec<CT> = ts.iter().map(|t| self.ct(&t.ty)).collect();
                let bp = self.lam_d("tuple", t.span, || format!("⟨{}⟩", vec!["·"; ts.len()].join(", ")), |_, d| {
                    let calls = xs.iter().enumerate().map(|(i, (_, xb))| app(xb.clone(), app(builtin(ops::lproj(i, &cts)), d.clone())));
                    calls.reduce(|a, b| api.both(a, b)).expect("a tuple has two components")
                });
                Piece { binds, primal: tuple(xs.into_iter().map(|(x, _)| x).collect()), bp }
            }
            // D_Γ[fst t] := let ⟨x, x'⟩ = D_Γ[t] in ⟨fst x, λd. x' ⟨⟨d, 0⟩⟩⟩ (and snd, n-ary)
            K::Proj(i, s) => {
                let mut binds = vec![];
                let (x, xb) = self.sub(g, s, None, &mut binds)?;
                let Type::Tuple(tys) = &s.ty else { return Err(Diagnostic::error(t.span, "a projection of a non-tuple")) };
                let cts: Vec<CT> = tys.iter().map(|t| self.ct(t)).collect();
                let primal = match (tys.len(), i) {
                    (2, 0) => fst(x),
                    (2, _) => snd(x),
                    (n, i) => {
                        let v = self.fr.name("v");
                        let ps = (0..n).map(|j| if j == *i { pvar(&v) } else { pwild() }).collect();
                        binds.push((ptuple(ps), x));
                        var(&v)
                    }
                };
                let bp = self.lam_d("proj", t.span, || format!("proj {} of {}", i + 1, cts.len()), |_, d| {
                    let parts = cts.iter().enumerate().map(|(j, c)| if j == *i { d.clone() } else { builtin(ops::zero(c)) }).collect();
                    app(xb, app(builtin(ops::ltuple(&cts)), tuple(parts)))
                });
                Piece { binds, primal, bp }
            }
            // D_Γ[inl t] := let ⟨x, x'⟩ = D_Γ[t] in ⟨inl x, λd. x' (lcastl d)⟩ (and inr)
            K::Inl(s) | K::Inr(s) => {
                let right = matches!(t.kind, K::Inr(_));
                let Type::Sum(ab) = &t.ty else { return Err(Diagnostic::error(t.span, "an injection into a non-sum")) };
                let (a, b) = &**ab;
                let (ca, cb) = (self.ct(a), self.ct(b));
                let mut binds = vec![];
                let (x, xb) = self.sub(g, s, None, &mut binds)?;
                let primal = ann(if right { inr(x) } else { inl(x) }, source::d1_by(&t.ty, self.naive));
                let bp = self.lam_d(if right { "inr" } else { "inl" }, t.span, || (if right { "inr" } else { "inl" }).into(), |_, d| app(xb, app(builtin(ops::lcast(right, &ca, &cb)), d)));
                Piece { binds, primal, bp }
            }
            // D_Γ[case t of {inl x → s | inr y → r}] := let ⟨z, z'⟩ = D_Γ[t] in case z of
            //   inl x → let ⟨x1, x2⟩ = D_{Γ,x}[s] in ⟨x1, λd. let ⟨v1, v2⟩ = split (x2 d) in v1 + z' (linl v2)⟩
            //   | inr y → … (Fig. 2; Fig. 7 with scope)
            K::Case(s, x, b1, y, b2) => {
                let Type::Sum(tatb) = &s.ty else { return Err(Diagnostic::error(t.span, "a case on a non-sum")) };
                let (ta, tb) = &**tatb;
                let (ca, cb) = (self.ct(ta), self.ct(tb));
                let mut binds = vec![];
                let (z, zb) = self.sub(g, s, None, &mut binds)?;
                let branch = |cx: &mut Self, v: &Name, c: &CT, body: &Term, right: bool| -> Result<Expr, Diagnostic> {
                    let mut g2 = g.to_vec();
                    ops::push(&mut g2, v, c.clone());
                    let mut bb = vec![];
                    let (x1, x2) = cx.sub(&g2, body, None, &mut bb)?;
                    let k = {
                        let w = cx.fr.name("w");
                        lam(pvar(&w), app(zb.clone(), app(builtin(ops::linj(right, &ca, &cb)), var(&w))))
                    };
                    let bp = cx.lam_d("case", body.span, || format!("case → {} {}", if right { "inr" } else { "inl" }, v.text), |cx, d| api.scoped(g, &g2[g.len()], app(x2, d), k, &mut cx.fr));
                    Ok(Piece { binds: bb, primal: x1, bp }.expr())
                };
                let e1 = branch(self, x, &ca, b1, false)?;
                let e2 = branch(self, y, &cb, b2, true)?;
                let (r, rb) = (self.fr.name("r"), self.fr.name("r'"));
                binds.push((ppair(pvar(&r), pvar(&rb)), case(z, pvar(x), e1, pvar(y), e2)));
                Piece { binds, primal: var(&r), bp: var(&rb) }
            }
            // if c then s else r: the case rule on B = 1 ⊔ 1 with no variable bound, so no split
            // or scope: ⟨y, λd. y' d + z' ⟨⟩⟩ in each branch.
            K::If(c, s, r) => {
                let mut binds = vec![];
                let (z, zb) = self.sub(g, c, None, &mut binds)?;
                let branch = |cx: &mut Self, body: &Term, which: &'static str| -> Result<Expr, Diagnostic> {
                    let mut bb = vec![];
                    let (x1, x2) = cx.sub(g, body, None, &mut bb)?;
                    let bp = cx.lam_d("if", body.span, || format!("if → {which}"), |_, d| api.both(app(x2, d), app(zb.clone(), unit())));
                    Ok(Piece { binds: bb, primal: x1, bp }.expr())
                };
                let (e1, e2) = (branch(self, s, "then")?, branch(self, r, "else")?);
                let (y, yb) = (self.fr.name("r"), self.fr.name("r'"));
                binds.push((ppair(pvar(&y), pvar(&yb)), if_(z, e1, e2)));
                Piece { binds, primal: var(&y), bp: var(&yb) }
            }
            // D_Γ[f] := ⟨Df, λ_. 0⟩ for closed code f: D[τ →□ σ]2 = 1 (App. C)
            K::Global(f) => {
                let bp = self.lam_d("global", t.span, || code_name(&f.text), |_, _| api.nothing(g));
                Piece::leaf(global(&code_name(&f.text)), bp)
            }
            // D_Γ[t s] := let ⟨x, _⟩ = D_Γ[t] in let ⟨y, y'⟩ = D_Γ[s] in let ⟨z, z'⟩ = x y in
            //   ⟨z, λv. y' (z' v)⟩: the callee's body backpropagates once, its captured variables'
            //   cotangents come back in the argument's (App. C)
            K::App(f, a) if self.naive => self.naive_app(g, f, a, t.span)?,
            K::Lam(x, body) => self.naive_lam(g, t, x, body)?,
            K::App(f, a) => {
                let mut binds = vec![];
                let (x, _) = self.sub(g, f, None, &mut binds)?;
                let (y, yb) = self.sub(g, a, None, &mut binds)?;
                let (z, zb) = (self.fr.name("z"), self.fr.name("z'"));
                binds.push((ppair(pvar(&z), pvar(&zb)), app(x, y)));
                let bp = self.lam_d("app", t.span, || "app (closed code, App. C)".into(), |_, d| app(yb, app(var(&zb), d)));
                Piece { binds, primal: var(&z), bp }
            }
            K::Index(a, s) => self.index(g, a, s, t.span)?,
            K::Build(s, i, body) => self.build(g, s, i, body, t.span)?,
            K::Fold { x, y, body, init, arr, balanced } => self.fold(g, x, y, body, init, arr, *balanced, t.span)?,
            // D_Γ[r] := ⟨r, λd. 0⟩
            K::Lit(r) => {
                let bp = self.lam_d("const", t.span, || format!("const {}", crate::value::show_real(*r)), |_, _| api.nothing(g));
                Piece::leaf(real(*r), bp)
            }
            // D_Γ[sign t] := ⟨sign t, λd. 0⟩: every discrete term, evaluated as it is
            K::Discrete(e) => {
                let bp = self.lam_d("discrete", t.span, || "discrete".into(), |_, _| api.nothing(g));
                Piece::leaf(e.clone(), bp)
            }
            // D_Γ[op(t1, …, tn)] := let ⟨x1, x1'⟩ = D_Γ[t1] in … ⟨op(x1, …, xn),
            //   λd. let ⟨d1, …, dn⟩ = Dop^t(x1, …, xn; d) in x1' d1 + … + xn' dn⟩
            // (Dop^t's components written out from the primitive's partials; discrete arguments
            // get no cotangent)
            K::Op(op, args) => {
                let mut binds = vec![];
                let mut xs = vec![];
                for a in args {
                    xs.push(self.sub(g, a, None, &mut binds)?);
                }
                let vals: Vec<Expr> = xs.iter().map(|(x, _)| x.clone()).collect();
                let r = self.fr.name("r");
                // a discrete result (a comparison) has no derivative: its backpropagator adds nothing
                let rule = if source::discrete(&t.ty) { None } else { deriv::rule(*op, &vals, &var(&r)) };
                let mut primal = prim(*op, vals);
                if rule.as_ref().is_some_and(|r| r.uses_result) {
                    binds.push((pvar(&r), primal));
                    primal = var(&r);
                }
                let bp = self.lam_d("op", t.span, || op.symbol().to_string(), |_, d| {
                    let mut calls = vec![];
                    if let Some(rule) = &rule {
                        for ((a, (_, xb)), p) in args.iter().zip(&xs).zip(&rule.partials) {
                            if a.ty != Type::Real {
                                continue;
                            }
                            let di = match p {
                                Partial::One => d.clone(),
                                Partial::MinusOne => neg(d.clone()),
                                Partial::Times(c) => mul(c.clone(), d.clone()),
                            };
                            calls.push(app(xb.clone(), di));
                        }
                    }
                    calls.into_iter().reduce(|a, b| api.both(a, b)).unwrap_or_else(|| api.nothing(g))
                });
                Piece { binds, primal, bp }
            }
        };
        match running_out() {
            Some(d) => Err(d),
            None => Ok(piece),
        }
    }
}

impl Chad<'_> {
    /// D_Γ[λx. t] := ⟨λx. let ⟨y, y'⟩ = D_{Γ,x}[t] in ⟨y, λd. snd (split (y' d))⟩,
    ///   λl. fold l with ⟨x, y⟩, acc → acc + fst (split (snd D_{Γ,x}[t] y)) from 0⟩   (§9)
    /// with D_{Γ,x}[t] bound once as a function of x (`Dλ`), which both halves call: the body is
    /// differentiated once in the output, but run (and backpropagated) by each half.
    fn naive_lam(&mut self, g: &CtxS, t: &Term, x: &Name, body: &Term) -> Result<Piece, Diagnostic> {
        let Type::Fun(ab) = &t.ty else { return Err(Diagnostic::error(t.span, "a lambda of a non-function type")) };
        let cta = self.ct(&ab.0);
        let mut g2 = g.to_vec();
        ops::push(&mut g2, x, cta.clone());
        let inner = self.d(&g2, body)?.expr();
        let dl = self.fr.name("Dλ");
        let binds = vec![(pvar(&dl), lam(pvar(x), inner))];
        let split = ops::split_lam(g, &g2[g.len()]);
        let (x2, y, yb) = (self.fr.name(&x.text), self.fr.name("y"), self.fr.name("y'"));
        let arg_half = {
            let bp = self.lam_d("λ", body.span, || format!("λ{} body (argument half)", x.text), |_, d| snd(app(builtin(split), app(var(&yb), d))));
            lam(pvar(&x2), let_(ppair(pvar(&y), pvar(&yb)), app(var(&dl), var(&x2)), pair(var(&y), bp)))
        };
        let (l, xa, dy, yb2) = (self.fr.name("l"), self.fr.name(&x.text), self.fr.name("dy"), self.fr.name("y'"));
        let entry = lam(
            ppair(pvar(&xa), pvar(&dy)),
            let_(ppair(pwild(), pvar(&yb2)), app(var(&dl), var(&xa)), fst(app(builtin(split), app(var(&yb2), var(&dy))))),
        );
        bp_tree::site(&l, "λ", || format!("λ{} (context half: re-runs the body per logged call)", x.text), t.span);
        let ctx_half = lam(pvar(&l), apps(builtin(ops::FOLD_LOG), [var(&l), self.api.nothing(g), entry]));
        Ok(Piece { binds, primal: arg_half, bp: ctx_half })
    }

    /// D_Γ[t s] := let ⟨x, x'⟩ = D_Γ[t] in let ⟨y, y'⟩ = D_Γ[s] in let ⟨z, z'⟩ = x y in
    ///   ⟨z, λd. y' (z' d) + x' [⟨y, d⟩]⟩   (§9: the call is logged for the function's context half)
    fn naive_app(&mut self, g: &CtxS, f: &Term, a: &Term, span: Span) -> Result<Piece, Diagnostic> {
        let api = self.api;
        let mut binds = vec![];
        let (x, xb) = self.sub(g, f, None, &mut binds)?;
        let (y, yb) = self.sub(g, a, None, &mut binds)?;
        let (z, zb) = (self.fr.name("z"), self.fr.name("z'"));
        binds.push((ppair(pvar(&z), pvar(&zb)), app(x, y.clone())));
        let bp = self.lam_d("app", span, || "app (logs the call, §9)".into(), |_, d| api.both(app(yb, app(var(&zb), d.clone())), app(xb, app(builtin(ops::LOG_ONE), pair(y, d)))));
        Ok(Piece { binds, primal: var(&z), bp })
    }
}

/// §7, Fig. 9 (on the monadic rules of Fig. 7, as the paper builds it): build, indexing, fold.
impl Chad<'_> {
    /// D_Γ[t ! s] := let ⟨x1, x2⟩ = D_Γ[t] in let ⟨i, _⟩ = D_Γ[s] in ⟨x1 ! i, λd. x2 (BOne ⟨i, d⟩)⟩
    /// (The BOne carries the indexing's span: the graph shows which operation made it.)
    fn index(&mut self, g: &CtxS, t: &Term, s: &Term, span: Span) -> Result<Piece, Diagnostic> {
        let mut binds = vec![];
        let (x1, x2) = self.sub(g, t, None, &mut binds)?;
        let (i, _) = self.sub(g, s, None, &mut binds)?;
        let bp = self.lam_d("bp-index", span, || "index".into(), |_, d| app(x2, at(app(builtin(bags::B_ONE), pair(i.clone(), d)), span)));
        Ok(Piece { binds, primal: prim(Prim::Index, vec![x1, i]), bp })
    }

    /// D_Γ[build s (i. t)] := let ⟨n, _⟩ = D_Γ[s] in let a = build n (i. D_{Γ,i:Z}[t]) in
    ///   let ⟨a1, a2⟩ = unzip a in ⟨a1, λd. let pairs = collect d in
    ///   let d2 = scatter (build n (i. 0)) pairs in
    ///   let d3 = zipWith (f d'. scope_{Γ,1} (f d') >> return ⟨⟩) a2 d2 in sequence d3 >> return ⟨⟩⟩
    /// (the backpropagator of s is never called: Z is discrete, footnote 18)
    /// (collect carries the build's span: the graph's Bags hang from it.)
    fn build(&mut self, g: &CtxS, s: &Term, i: &Name, t: &Term, span: Span) -> Result<Piece, Diagnostic> {
        let mut binds = vec![];
        let (n, _) = self.sub(g, s, None, &mut binds)?;
        let mut g2 = g.to_vec();
        ops::push(&mut g2, i, CT::One);
        let body = self.d(&g2, t)?.expr();
        let (a, a1, a2) = (self.fr.name("a"), self.fr.name("a1"), self.fr.name("a2"));
        binds.push((pvar(&a), prim(Prim::Build, vec![n.clone(), lam(pvar(i), body)])));
        binds.push((ppair(pvar(&a1), pvar(&a2)), app(builtin(bags::UNZIP), var(&a))));
        let zero = builtin(ops::zero(&self.ct(&t.ty)));
        let (pairs, d2, d3, j, f, d_) = (self.fr.name("pairs"), self.fr.name("d2"), self.fr.name("d3"), self.fr.name("j"), self.fr.name("f"), self.fr.name("d'"));
        let api = self.api;
        let bp = self.lam_d("bp-build", span, || format!("build (one per element, i = {})", i.text), |_, d| {
            let scoped = bind(pwild(), builtin(ops::push0(i, &CT::One)), bind(pwild(), app(var(&f), var(&d_)), bind(pwild(), builtin(ops::pop(i, &CT::One)), api.nothing(g))));
            let each = lam(pvar(&f), lam(pvar(&d_), scoped));
            let_(
                pvar(&pairs),
                at(app(builtin(bags::COLLECT), d), span),
                let_(
                    pvar(&d2),
                    apps(builtin(bags::SCATTER), [prim(Prim::Build, vec![n, lam(pvar(&j), zero)]), var(&pairs)]),
                    let_(pvar(&d3), apps(builtin(bags::ZIP_WITH), [each, var(&a2), var(&d2)]), bind(pwild(), app(builtin(bags::SEQUENCE), var(&d3)), api.nothing(g))),
                ),
            )
        });
        Ok(Piece { binds, primal: var(&a1), bp })
    }

    /// D_Γ[fold (x, y. t) s] from z (footnote 16's initial value, the first leaf) :=
    ///   let ⟨z, z'⟩ = D_Γ[init] in let ⟨s1, s2⟩ = D_Γ[s] in
    ///   let tree = foldTree (λ⟨x, y⟩. D_{Γ,x,y}[t]) z s1 in   (Node l y f r at each step, Leaf at each element)
    ///   ⟨getA tree, λd. do lf ← unTree (λd' f. do ⟨⟨⟩, ⟨d1, d2⟩⟩ ← scope_{Γ,τ×τ} (f d'); return ⟨d1, d2⟩) d tree
    ///                       z' (lf ! 0); s2 (fromList (shift1L lf))⟩
    #[allow(clippy::too_many_arguments)]
    /// (foldTree, unTree and fromList carry the fold's span: its Tree and Bag in the graph.)
    fn fold(&mut self, g: &CtxS, x: &Name, y: &Name, body: &Term, init: &Term, arr: &Term, balanced: bool, span: Span) -> Result<Piece, Diagnostic> {
        let mut binds = vec![];
        let (z, zb) = self.sub(g, init, None, &mut binds)?;
        let (s1, s2) = self.sub(g, arr, None, &mut binds)?;
        let c = self.ct(&body.ty);
        let mut g2 = g.to_vec();
        ops::push(&mut g2, x, c.clone());
        ops::push(&mut g2, y, c.clone());
        let inner = self.d(&g2, body)?.expr();
        let tree = self.fr.name("tree");
        let fold = if balanced { bags::TREE_FOLD } else { bags::TREE_FOLDL };
        binds.push((pvar(&tree), at(apps(builtin(fold), [lam(ppair(pvar(x), pvar(y)), inner), z, s1]), span)));
        let (lf, d_, f, dx, dy) = (self.fr.name("lf"), self.fr.name("d'"), self.fr.name("f"), self.fr.name(&format!("d{}", x.text)), self.fr.name(&format!("d{}", y.text)));
        let api = self.api;
        let bp = self.lam_d("bp-fold", span, || "fold (one per step)".into(), |_, d| {
            // scope over x then y (Γ, x, y: y's cell is the innermost)
            let pops = bind(pvar(&dy), builtin(ops::pop(y, &c)), bind(pvar(&dx), builtin(ops::pop(x, &c)), pure(pair(var(&dx), var(&dy)))));
            let scoped = bind(pwild(), builtin(ops::push0(x, &c)), bind(pwild(), builtin(ops::push0(y, &c)), bind(pwild(), app(var(&f), var(&d_)), pops)));
            let g_ = lam(pvar(&d_), lam(pvar(&f), scoped));
            let rest = api.both(app(zb, prim(Prim::Index, vec![var(&lf), int(0)])), app(s2, at(app(builtin(bags::FROM_LIST), prim(Prim::Shift1L, vec![var(&lf)])), span)));
            bind(pvar(&lf), at(apps(builtin(bags::UN_TREE), [g_, d, var(&tree)]), span), rest)
        });
        Ok(Piece { binds, primal: app(builtin(bags::GET_A), var(&tree)), bp })
    }
}

fn scopes_name(_n: usize, i: usize) -> String {
    format!("bp{i}")
}

/// The program: `grad (s, dt) = let p = s in let ⟨y, y'⟩ = D_Γ[body] in ⟨y, the cotangents of Γ
/// from y' dt, in the input's shape⟩` (the paper's wrapper: `snd D_Γ[t] d`, or `run` of it).
pub fn program(fo: &FirstOrder, api: &dyn EnvApi, output_type: &Type) -> Result<Program, Diagnostic> {
    program_with(fo, api, output_type, false)
}

/// `program`, with naive higher-order CHAD's rules for lambdas and applications when `naive` (§9).
pub fn program_with(fo: &FirstOrder, api: &dyn EnvApi, output_type: &Type, naive: bool) -> Result<Program, Diagnostic> {
    ops::forget_ev_types();
    let mut cx = Chad { fr: Fresh { next_id: fo.fresh.next_id }, api, naive };
    let g: Ctx = ops::ctx_of(fo.inputs.iter().map(|(n, t)| (n.clone(), ct(t))));
    let mut binds = vec![];
    let (y, yb) = cx.sub(&g, &fo.body, None, &mut binds)?;
    let (s, dt) = (cx.fr.name("s"), cx.fr.name("dt"));
    let gs: Vec<Name> = g.iter().map(|e| cx.fr.name(&format!("{}'", e.0.text))).collect();
    // d = the output cotangent as a value of D[T]2
    let d = ann(app(builtin(ops::TO_LIN), var(&dt)), ct(output_type).ty());
    let call = app(yb, d);
    let rebuilt = rebuild(&fo.pattern, &mut gs.iter().map(var));
    let result = pair(y, apps(builtin(ops::FROM_LIN), [var(&s), rebuilt]));
    let body = let_(ptuple(gs.iter().map(pvar).collect()), api.finish(&g, call), result);
    let body = lets(binds, body);
    let body = let_(fo.pattern.clone(), var(&s), body);
    let mut out = fo.program.with_defs(vec![def(WRAPPER, lam(ppair(pvar(&s), pvar(&dt)), body))]);
    out.expects.clear();
    out.input = None;
    out.next_id = cx.fr.next_id;
    ops::forget_contexts();
    Ok(out)
}

/// The name of closed code `f`'s derivative `D[f]`.
pub fn code_name(f: &str) -> String {
    format!("D{f}")
}

/// CHAD of a closure-converted program (App. C) over the monadic rules: every closed code
/// `def f p = t` becomes `def Df s = let p = s in let ⟨y, y'⟩ = D_p[t] in ⟨y, λd. p̄⟩`, its body
/// differentiated in the context of its own parameter only, the backpropagator running its own
/// accumulator (`runOpen`/`runClose`: `run` written out, as `scope` is) and returning the
/// parameter's cotangent `p̄` as a linear value; `main` becomes the wrapper as in `program`.
pub fn program_cc(fo: &FirstOrder, codes: &[Code], consts: &[(Name, Term)], api: &dyn EnvApi, output_type: &Type) -> Result<Program, Diagnostic> {
    let mut defs = vec![];
    let mut fr = Fresh { next_id: fo.fresh.next_id };
    // a closed value's derivative in the empty context: its primal (its backpropagator adds nothing)
    for (name, t) in consts {
        let mut cx = Chad { fr, api, naive: false };
        let p = cx.d(&vec![], t)?;
        let body = lets(p.binds, p.primal);
        defs.push(def(&code_name(&name.text), body));
        fr = cx.fr;
    }
    for c in codes {
        let mut cx = Chad { fr, api, naive: false };
        let g: Ctx = ops::ctx_of(c.inputs.iter().map(|(n, t)| (n.clone(), ct(t))));
        let mut binds = vec![];
        let (y, yb) = cx.sub(&g, &c.body, None, &mut binds)?;
        let (s, d) = (cx.fr.name("s"), cx.fr.name("d"));
        let gs: Vec<Name> = g.iter().map(|e| cx.fr.name(&format!("{}'", e.0.text))).collect();
        let opened = bind(pwild(), builtin(ops::run_open(&g)), app(yb, var(&d)));
        let lin = rebuild_lin(&c.pattern, &c.ty, &mut gs.iter().map(var));
        bp_tree::site(&d, "code", || format!("{} (a closed code's backpropagator, its own run)", code_name(&c.name.text)), c.body.span);
        let bp = lam(pvar(&d), let_(ptuple(gs.iter().map(pvar).collect()), app(builtin(ops::run_close(&g)), opened), lin));
        let body = lets(binds, pair(y, bp));
        let body = lam(pvar(&s), let_(c.pattern.clone(), var(&s), body));
        defs.push(def(&code_name(&c.name.text), body));
        fr = cx.fr;
    }
    let fo2 = FirstOrder { program: fo.program.clone(), pattern: fo.pattern.clone(), inputs: fo.inputs.clone(), body: fo.body.clone(), fresh: fr };
    let mut out = program(&fo2, api, output_type)?;
    // the source's code stays, for the discrete terms that are evaluated as they are
    let kept: Vec<Def> = fo.program.defs.iter().filter(|d| &*d.name.text != "main").cloned().collect();
    let wrapper = std::mem::take(&mut out.defs);
    out.defs = kept.into_iter().chain(defs).chain(wrapper).collect();
    Ok(out)
}

/// A parameter's cotangent as a linear value of its pattern's shape: `⟨⟨ȳ1, …, ȳk⟩, x̄⟩`.
fn rebuild_lin(p: &Pat, ty: &Type, vals: &mut dyn Iterator<Item = Expr>) -> Expr {
    match (p, ty) {
        (Pat::Tuple(ps, _), Type::Tuple(ts)) if ps.len() == ts.len() => {
            let cts: Vec<CT> = ts.iter().map(ct).collect();
            let es = ps.iter().zip(ts.iter()).map(|(q, t)| rebuild_lin(q, t, vals)).collect();
            app(builtin(ops::ltuple(&cts)), tuple(es))
        }
        _ => vals.next().unwrap_or_else(unit),
    }
}

/// The value of a pattern's shape built from the given expressions, one per variable.
fn rebuild(p: &Pat, vals: &mut dyn Iterator<Item = Expr>) -> Expr {
    match p {
        Pat::Var(..) | Pat::Wild(_) => vals.next().unwrap_or_else(unit),
        Pat::Unit(_) => unit(),
        Pat::Tuple(ps, _) => tuple(ps.iter().map(|p| rebuild(p, vals)).collect()),
    }
}

/// The wrapper's stated type: `grad : (S, T) → (T, S)`.
pub fn stated(src: &crate::stage::Source) -> Vec<(String, Type)> {
    vec![crate::stage::wrapper_type(src)]
}
