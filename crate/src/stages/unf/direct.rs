//! `unf/direct`: the direct reverse-mode macro `D←^ρ_{Γ;Y}` of Huot & Shaikhha §3.3, Fig. 5, with the
//! gradient wrapper `∇_Γ` of Fig. 4. A term in context Γ becomes a pair of its value and a
//! continuation `Y' : Γ̲ × A → ρ`, which adds the result's cotangent `z` into the cotangents of the
//! context (a purely functional "stack" of one cotangent slot per variable in scope) and calls the
//! continuation before it. Arguments of non-unary constructs push a dummy slot for their value
//! (`D_{Γ,x1;Y1}(e2)`), so each continuation takes one more argument than the one it calls.
//!
//! Decisions (the figure is damaged in the extraction; see the note §3.2):
//! - the `(†)` fixes of the note: π, op1 and tuples call `Y1`/`Y2`, not `Y`; the reduce rule passes `0`
//!   for the initial value's slot (as Ex. 3.1 and Fig. 16 do).
//! - let binds a pattern: `let (a, b) = e1 in e2` extends Γ with a and b, whose continuation rebuilds
//!   the pair's cotangent `(a', b')` for `Y1` (Fig. 5's let, one slot per bound variable).
//! - tuples of any arity generalise the pair rule (one dummy slot per component but the last).
//! - the nested gradients `∇_Γ e1`, `∇_x e1`, `∇_y e1` of the map2 and reduce rules are this macro
//!   applied to the body in context Γ, x, y (Fig. 4), each a copy with fresh binders.
//! - `map` by A.3's rule (Fig. 16), not Fig. 4's `map (x.e) A = map2 (x y. e) A A`, which evaluates and
//!   differentiates A twice; `sum A = reduce (x y. x + y) 0 A` (Ex. 1.2).
//! - the extensions of §7 and A.3: conditionals (§7.2, `cond`), reduce whose function has free
//!   variables (§7.1, Fig. 13) and `fold` (A.3, Fig. 16) (`reduce`), each rule's decisions at it.

use super::common::*;
use crate::build::*;
use crate::deriv::{self, Partial};
use crate::diag::Diagnostic;
use crate::features::Features;
use crate::ir::*;
use crate::ir::Prim as P;
use crate::kit::passes::freshen;
use crate::interp::{Graph, Machine, RunError};
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};
use crate::value::Value;

pub struct Direct;

static INFO: StageInfo = StageInfo {
    id: "unf/direct",
    paper: PAPER,
    section: "§3.3, Figs. 4–5",
    title: "The direct reverse-mode macro: continuations over a stack of cotangents",
    explanation: "Each subterm in context Γ becomes its value paired with a continuation Y' : Γ̲ × A → ρ. The \
continuation receives the cotangents of every variable in scope and the cotangent z of the subterm's result, adds \
z's contributions into the slots of the variables it used (Insight 2: identity except at most two slots), and calls \
the continuation before it; a let starts its variable's slot at 0 and drops it when leaving its scope. So the chain \
of continuations Y, Y1, Y2, … is a purely functional gradient store, run backwards from ∇_Γ(e) = π2 D(e) (0_Γ, 1). \
map2 and reduce are differentiated with nested gradients of their bodies and, for reduce, scans (§3.3). As printed, \
every continuation is a closure and every call copies the whole stack: partial evaluation (§5.1) is what makes it \
efficient.",
    complexity: "O(T · |Γ|): every continuation copies the stack of cotangents of all variables in scope (§5: the bound 4·3^p·Cost(e) holds only after partial evaluation).",
    accepts: ACCEPTS,
};

/// A slot of the context Γ: a variable (or the dummy slot of an argument's value), its ground type,
/// and an expression of that type in scope, from which its zero takes its shape.
#[derive(Clone)]
struct Slot {
    var: Option<u32>,
    ty: Type,
    witness: Expr,
}

struct Cx {
    fr: Fresh,
    /// Continuations are numbered Y1, Y2, … in the order they are made (the paper's Y1, Y11, Y12, …).
    conts: u32,
}

impl Cx {
    /// A fresh continuation variable `Yk`.
    fn y_name(&mut self) -> Name {
        self.conts += 1;
        self.fr.name(&format!("Y{}", self.conts))
    }

    /// `fun (y1, …, yn, z) → body(ys, z)`: a continuation for context `g` (the paper's bold x).
    fn cont(&mut self, g: &[Slot], with_z: bool, body: impl FnOnce(&mut Self, Vec<Expr>, Expr) -> Expr) -> Expr {
        let z = self.fr.name("z");
        self.cont_z(g, with_z, z, body)
    }

    /// `cont` with the cotangent variable `z` given (the conditional's gradients are built before it).
    fn cont_z(&mut self, g: &[Slot], with_z: bool, z: Name, body: impl FnOnce(&mut Self, Vec<Expr>, Expr) -> Expr) -> Expr {
        let ys: Vec<Name> = (0..g.len()).map(|i| self.fr.name(&format!("y{}", i + 1))).collect();
        let mut pats: Vec<Pat> = ys.iter().map(pvar).collect();
        if with_z {
            pats.push(pvar(&z));
        }
        let b = body(self, ys.iter().map(var).collect(), var(&z));
        lam(ptuple(pats), b)
    }

    /// `let (x, Y1) = rhs in k(x, Y1)`
    fn bind_pair(&mut self, x: &str, rhs: Expr, k: impl FnOnce(&mut Self, Name, Name) -> Result<Expr, Diagnostic>) -> Result<Expr, Diagnostic> {
        let (xv, yv) = (self.fr.name(x), self.y_name());
        let rest = k(self, xv.clone(), yv.clone())?;
        Ok(let_(ppair(pvar(&xv), pvar(&yv)), rhs, rest))
    }

    /// `D←_{Γ;Y}(e) : A × (Γ̲ × A → ρ)`, rule for rule (Fig. 5).
    fn d(&mut self, g: &[Slot], y: &Name, e: &Expr) -> Result<Expr, Diagnostic> {
        use ExprKind::*;
        let out = match &e.kind {
            // D(c) = < c, fun (x, z) → Y(x) >
            Real(_) | Unit => {
                let k = self.cont(g, true, |_, ys, _| app(var(y), tuple(ys)));
                pair(e.clone(), k)
            }
            // D(x) = < x, fun (x, z) → Y(x +^ [pos(x)] z) >
            Var(n) => {
                let Some(i) = g.iter().rposition(|s| s.var == Some(n.id)) else {
                    return Err(Diagnostic::error(e.span, format!("`{}` is not a variable of the context", n.text)));
                };
                let ty = g[i].ty.clone();
                let k = self.cont(g, true, |cx, mut ys, z| {
                    ys[i] = plus(&ty, ys[i].clone(), z, &mut cx.fr);
                    app(var(y), tuple(ys))
                });
                pair(e.clone(), k)
            }
            Ann(x_x) => { let (x, _) = &**x_x; return self.d(g, y, x) },
            // D(let x = e1 in e2) = let x, Y1 = D_{Γ;Y}(e1) in let y, Y2 = D_{Γ,x;Y1}(e2) in < y, fun (x, z) → Y2(x, 0_A, z) >
            ExprKind::Let(p_e1_e2) => {
                let (p, e1_e2) = &**p_e1_e2;
                let (e1, e2) = e1_e2;
                let d1 = self.d(g, y, e1)?;
                let (p, vars) = self.pattern(p, &e1.ty);
                let y1 = self.y_name();
                let mut g2 = g.to_vec();
                g2.extend(vars.iter().map(|(n, t)| Slot { var: Some(n.id), ty: t.clone(), witness: var(n) }));
                // a pattern's slots rebuild the value's cotangent for Y1: fun (x, a', b') → Y1(x, (a', b'))
                let (y1p, adapter) = match &p {
                    Pat::Var(..) => (y1.clone(), None),
                    _ => {
                        let y1p = self.y_name();
                        let k = self.cont(&g2, false, |_, ys, _| {
                            let (outer, inner) = ys.split_at(g.len());
                            let mut args = outer.to_vec();
                            args.push(rebuild(&p, &mut inner.iter().cloned()));
                            app(var(&y1), tuple(args))
                        });
                        (y1p.clone(), Some((y1p, k)))
                    }
                };
                let d2 = self.d(&g2, &y1p, e2)?;
                let rest = self.bind_pair("y", d2, |cx, r, y2| {
                    let k = cx.cont(g, true, |cx, mut ys, z| {
                        for (n, t) in &vars {
                            ys.push(zero(t, var(n), &mut cx.fr));
                        }
                        ys.push(z);
                        app(var(&y2), tuple(ys))
                    });
                    Ok(pair(var(&r), k))
                })?;
                let rest = match adapter {
                    Some((n, k)) => let_(pvar(&n), k, rest),
                    None => rest,
                };
                let_(ppair(p, pvar(&y1)), d1, rest)
            }
            // D(<e1, e2>) = let y1, Y1 = D_{Γ;Y}(e1) in let y2, Y2 = D_{Γ,x1;Y1}(e2) in < <y1, y2>, fun (x, z) → Y2(x, π1 z, π2 z) >
            Tuple(es) => return self.args(g, y, es, &mut |cx, ys_vals, yn| {
                let zs: Vec<Name> = (0..es.len()).map(|i| cx.fr.name(&format!("z{}", i + 1))).collect();
                let k = cx.cont(g, true, |_, mut ys, z| {
                    ys.extend(zs.iter().map(var));
                    let_(ptuple(zs.iter().map(pvar).collect()), z, app(var(&yn), tuple(ys)))
                });
                Ok(pair(tuple(ys_vals), k))
            }),
            // D(π1(e : A × B)) = let x, Y1 = D(e) in < π1 x, fun (x, z) → Y1(x, (z, 0_B)) >, and π2 likewise
            Fst(x) | Snd(x) => {
                let first = matches!(e.kind, Fst(_));
                let Type::Tuple(ts) = &x.ty else { return Err(Diagnostic::error(x.span, "a projection from a value that is not a pair")) };
                let other_ty = ts[usize::from(first)].clone();
                let dx = self.d(g, y, x)?;
                self.bind_pair("x", dx, |cx, xv, y1| {
                    let k = cx.cont(g, true, |cx, mut ys, z| {
                        let other = zero(&other_ty, if first { snd(var(&xv)) } else { fst(var(&xv)) }, &mut cx.fr);
                        ys.push(if first { pair(z, other) } else { pair(other, z) });
                        app(var(&y1), tuple(ys))
                    });
                    Ok(pair(if first { fst(var(&xv)) } else { snd(var(&xv)) }, k))
                })?
            }
            Prim(P::Map, args) => self.map2(g, y, e, args)?,
            Prim(P::Sum, args) => {
                let r = sum_as_reduce(e, &args[0], &mut self.fr);
                return self.d(g, y, &r);
            }
            ExprKind::If(c_e2_e3) => {
                let (c, e2_e3) = &**c_e2_e3;
                let (e2, e3) = e2_e3;
                self.cond(g, y, c, e2, e3)?
            }
            Prim(P::Map2, args) => self.map2(g, y, e, args)?,
            Prim(P::Reduce, args) => self.reduce(g, y, e, args, false)?,
            Prim(P::Fold, args) => self.reduce(g, y, e, args, true)?,
            // D(op1 e) = let x, Y1 = D(e) in < op1 x, fun (x, z) → Y1(x, ∂op1(x) * z) >
            // D(e1 op2 e2) = let x1, Y1 = D_{Γ;Y}(e1) in let x2, Y2 = D_{Γ,x1;Y1}(e2)
            //                in < x1 op2 x2, fun (x, z) → Y2(x, ∂1op2(x1,x2) * z, ∂2op2(x1,x2) * z) >
            Prim(op, es) => {
                let op = *op;
                return self.args(g, y, es, &mut |cx, xs, yn| {
                    let r = cx.fr.name("r");
                    let rule = deriv::rule(op, &xs, &var(&r)).expect("accepts: real primitives have partials");
                    let k = cx.cont(g, true, |_, mut ys, z| {
                        ys.extend(rule.partials.iter().map(|p| match p {
                            Partial::One => z.clone(),
                            Partial::MinusOne => neg(z.clone()),
                            Partial::Times(c) => mul(c.clone(), z.clone()),
                        }));
                        app(var(&yn), tuple(ys))
                    });
                    Ok(if rule.uses_result { let_(pvar(&r), prim(op, xs), pair(var(&r), k)) } else { pair(prim(op, xs), k) })
                });
            }
            _ => return Err(Diagnostic::error(e.span, "this construct is outside Fig. 5")),
        };
        Ok(at(out, e.span))
    }

    /// The arguments of a non-unary construct, left to right, each after a dummy slot for the ones
    /// before: `let y1, Y1 = D_{Γ;Y}(e1) in let y2, Y2 = D_{Γ,x1;Y1}(e2) in … k(y1 … yn, Yn)`.
    fn args(
        &mut self,
        g: &[Slot],
        y: &Name,
        es: &[Expr],
        k: &mut dyn FnMut(&mut Self, Vec<Expr>, Name) -> Result<Expr, Diagnostic>,
    ) -> Result<Expr, Diagnostic> {
        let mut g2 = g.to_vec();
        let mut cur = y.clone();
        let mut binds = vec![];
        let mut vals = vec![];
        for (i, a) in es.iter().enumerate() {
            let da = self.d(&g2, &cur, a)?;
            let (v, yn) = (self.fr.name(&format!("x{}", i + 1)), self.y_name());
            g2.push(Slot { var: None, ty: a.ty.clone(), witness: var(&v) });
            binds.push((ppair(pvar(&v), pvar(&yn)), da));
            vals.push(var(&v));
            cur = yn;
        }
        let body = k(self, vals, cur)?;
        Ok(binds.into_iter().rev().fold(body, |acc, (p, rhs)| let_(p, rhs, acc)))
    }

    /// `∇_{Γ,x,y}(e1)` as code, in scope of the slots `g` (Fig. 4: `π2 D_{Γ;Id}(e1) (0_Γ, 1)`): the flat
    /// tuple of the body's cotangents for every slot of `g`.
    fn gradient(&mut self, g: &[Slot], body: &Expr) -> Result<Expr, Diagnostic> {
        self.gradient_seeded(g, body, real(1.0))
    }

    /// `π2 D_{Γ;Id}(e1) (0_Γ, seed)`: `gradient` with the result's cotangent `seed` for the paper's 1.
    fn gradient_seeded(&mut self, g: &[Slot], body: &Expr, seed: Expr) -> Result<Expr, Diagnostic> {
        let id = self.fr.name("Id");
        let ident = self.cont(g, false, |_, ys, _| tuple(ys));
        let d = self.d(g, &id, body)?;
        let k = self.y_name();
        let mut args: Vec<Expr> = g.iter().map(|s| zero(&s.ty, s.witness.clone(), &mut self.fr)).collect();
        args.push(seed);
        Ok(let_(pvar(&id), ident, let_(ppair(pwild(), pvar(&k)), d, app(var(&k), tuple(args)))))
    }

    /// D(if e1 then e2 else e3) = let b = e1 in
    ///   < if b then e2 else e3, fun (x, z) → Y(x +^ (if b then ∇_Γ(e2) else ∇_Γ(e3)) * z) >
    /// §7.2's "Solution" (the continuation Y used once, linearly), the condition evaluated on the primal
    /// and never differentiated. Decisions:
    /// - the paper writes `∇_Γ(e2) * b +^ ∇_Γ(e3) * (1-b)`, b read as the real 0 or 1; we select with
    ///   `if b` instead (the note's linear variant, §3.9). Both equal when both gradients are finite,
    ///   but the paper's form multiplies the branch not taken by 0, which gives NaN where that branch's
    ///   gradient is infinite or NaN (`if x > 0 then sqrt x else 0` at x = -1), and pays for both.
    /// - `∇_Γ(e) * z` is taken as one gradient seeded with z (`π2 D_{Γ;Id}(e) (0_Γ, z)`): the branches may
    ///   be of any ground type, whose cotangent z is not a real to multiply by.
    /// - Γ is restricted to the branches' free variables (the other slots' share is 0).
    fn cond(&mut self, g: &[Slot], y: &Name, c: &Expr, e2: &Expr, e3: &Expr) -> Result<Expr, Diagnostic> {
        let free: rustc_hash::FxHashSet<u32> =
            crate::kit::passes::free_locals(e2).into_iter().chain(crate::kit::passes::free_locals(e3)).map(|n| n.id).collect();
        let (at_, sub): (Vec<usize>, Vec<Slot>) =
            g.iter().enumerate().filter(|(_, s)| s.var.is_some_and(|v| free.contains(&v))).map(|(i, s)| (i, s.clone())).unzip();
        let z = self.fr.name("z");
        let b = self.fr.name("b");
        let grads = if sub.is_empty() {
            None
        } else {
            let g2 = self.gradient_seeded(&sub, e2, var(&z))?;
            let g3 = self.gradient_seeded(&sub, e3, var(&z))?;
            Some(if_(var(&b), g2, g3))
        };
        let k = self.cont_z(g, true, z, |cx, mut ys, _| match grads {
            None => app(var(y), tuple(ys)),
            Some(sel) => {
                let ss: Vec<Name> = (0..sub.len()).map(|i| cx.fr.name(&format!("s{}", i + 1))).collect();
                for ((i, s), sv) in at_.iter().zip(&sub).zip(&ss) {
                    ys[*i] = plus(&s.ty, ys[*i].clone(), var(sv), &mut cx.fr);
                }
                let_(ptuple(ss.iter().map(pvar).collect()), sel, app(var(y), tuple(ys)))
            }
        });
        let mut parts = [c.clone(), e2.clone(), e3.clone()];
        for p in &mut parts {
            freshen(p, &mut self.fr);
        }
        let [c, e2, e3] = parts;
        Ok(let_(pvar(&b), c, pair(if_(var(&b), e2, e3), k)))
    }

    /// `map2 (a, b. P((∇ e1)[a/x, b/y])) A B`, where P projects the body's gradient (a copy with fresh
    /// binders, so that it can sit beside the others in one program); `map (a. P(…)) A` for one parameter.
    fn grads_of_body(&mut self, outer: &[Slot], params: &[Name], body: &Expr, arrays: [&Name; 2], pick: impl Fn(&[Expr]) -> Expr) -> Result<Expr, Diagnostic> {
        let mut g = outer.to_vec();
        for p in params {
            g.push(Slot { var: Some(p.id), ty: Type::Real, witness: var(p) });
        }
        let grad = self.gradient(&g, body)?;
        let gs: Vec<Name> = (0..g.len()).map(|i| self.fr.name(&format!("g{}", i + 1))).collect();
        let picked = let_(ptuple(gs.iter().map(pvar).collect()), grad, pick(&gs.iter().map(var).collect::<Vec<_>>()));
        let mut f = params.iter().rev().fold(picked, |acc, p| lam(pvar(p), acc));
        freshen(&mut f, &mut self.fr);
        Ok(if params.len() == 1 { prim(Prim::Map, vec![f, var(arrays[0])]) } else { prim(Prim::Map2, vec![f, var(arrays[0]), var(arrays[1])]) })
    }

    /// D(map2 (x,y.e1) e2 e3) = let A, Y1 = D_{Γ;Y}(e2) in let B, Y2 = D_{Γ,A;Y1}(e3) in
    ///   < map2 (x,y.e1) A B, fun (x, Z) → let G = map2 * Z (map2 (a,b. (∇_Γ e1)[a/x,b/y]) A B) in
    ///       Y2(x +^ (reduce +^ 0^ G), map2 * (map2 (a,b. (∇_x e1)[a/x,b/y]) A B) Z, map2 * (map2 (a,b. (∇_y e1)[a/x,b/y]) A B) Z) >
    ///
    /// With one array this is A.3's rule for map (Fig. 16), which replaces Fig. 4's `map (x.e) A =
    /// map2 (x y. e) A A` (that one evaluates and differentiates A twice):
    /// D(map (x.e1) e2) = let A, Y1 = D_{Γ;Y}(e2) in < map (x.e1) A, fun (x, Z) →
    ///   let G = map2 * Z (map (a.(∇_Γ e1)[a/x]) A) in Y1(x +^ (reduce +^ 0^ G), map2 (a,b.(∇_x e1)[a/x] * b) A Z) >
    fn map2(&mut self, g: &[Slot], y: &Name, e: &Expr, args: &[Expr]) -> Result<Expr, Diagnostic> {
        let arity = args.len() - 1;
        let params = lambda_params(&args[0], arity).expect("accepts: map2's function is a lambda");
        let body = lambda_body(&args[0], arity).clone();
        let elems = elem_types(&args[1..]);
        if general::needed(&elems, &body.ty) {
            return self.map2_general(g, y, e, args, params, body, elems);
        }
        // Γ is only the body's free variables (the note's open point 6 (b), as the UNF route and the
        // reduce rule take it): with all of Γ, every element's share carries a zero of each array in
        // scope, O(n) per element, and unf/pe's gradient of dot was O(n²) (Theorem 5.4 failed)
        let (at_, sub, _) = Self::free_slots(g, &args[0]);
        let g_all = g;
        let g = &sub[..];
        let n = g.len();
        let mut primal_f = args[0].clone();
        freshen(&mut primal_f, &mut self.fr);
        let gamma: Vec<(Type, Expr)> = g.iter().map(|s| (s.ty.clone(), s.witness.clone())).collect();
        let out = self.args(g_all, y, &args[1..], &mut |cx, vals, y2| {
            let name = |v: &Expr| match &v.kind {
                ExprKind::Var(a) => a.clone(),
                _ => unreachable!("args binds variables"),
            };
            let (a, b) = (name(&vals[0]), name(vals.last().expect("one array or two")));
            let grad_gamma = cx.grads_of_body(g, &params, &body, [&a, &b], |gs| tuple(gs[..n].to_vec()))?;
            let grad_x = cx.grads_of_body(g, &params, &body, [&a, &b], |gs| gs[n].clone())?;
            let grad_y = if arity == 2 { Some(cx.grads_of_body(g, &params, &body, [&a, &b], |gs| gs[n + 1].clone())?) } else { None };
            let gamma_ty = Type::tuple(gamma.iter().map(|(t, _)| t.clone()).collect());
            // map2 * Z arr: each element of arr scaled by Z's
            let times = |cx: &mut Cx, arr: Expr, zarr: Expr, ty: &Type| {
                let (s, v) = (cx.fr.name("a"), cx.fr.name("b"));
                let scaled = scale(ty, var(&s), var(&v), &mut cx.fr);
                prim(Prim::Map2, vec![lam(pvar(&s), lam(pvar(&v), scaled)), zarr, arr])
            };
            let k = cx.cont(g_all, true, |cx, ys, z| {
                let mut call: Vec<Expr> = ys.clone();
                // the context's share, when there is a context: G = map2 * Z (…), reduce +^ 0^ G, added slot by slot
                let mut share = None;
                if n > 0 {
                    let gname = cx.fr.name("G");
                    let gv = times(cx, grad_gamma.clone(), z.clone(), &gamma_ty);
                    let (p, q) = (cx.fr.name("p"), cx.fr.name("q"));
                    let sum_f = lam(pvar(&p), lam(pvar(&q), plus(&gamma_ty, var(&p), var(&q), &mut cx.fr)));
                    let zero_g = tuple(gamma.iter().map(|(t, w)| zero(t, w.clone(), &mut cx.fr)).collect());
                    let ss: Vec<Name> = (0..n).map(|i| cx.fr.name(&format!("s{}", i + 1))).collect();
                    for (i, &j) in at_.iter().enumerate() {
                        call[j] = plus(&gamma[i].0, ys[j].clone(), var(&ss[i]), &mut cx.fr);
                    }
                    let total = prim(Prim::Reduce, vec![sum_f, zero_g, var(&gname)]);
                    share = Some((gname, gv, ptuple(ss.iter().map(pvar).collect()), total));
                }
                call.push(times(cx, grad_x.clone(), z.clone(), &Type::Real));
                if let Some(gy) = &grad_y {
                    call.push(times(cx, gy.clone(), z.clone(), &Type::Real));
                }
                let call = app(var(&y2), tuple(call));
                match share {
                    Some((gname, gv, ss, total)) => let_(pvar(&gname), gv, let_(ss, total, call)),
                    None => call,
                }
            });
            let primal = if arity == 1 { prim(Prim::Map, vec![primal_f.clone(), var(&a)]) } else { prim(Prim::Map2, vec![primal_f.clone(), var(&a), var(&b)]) };
            Ok(pair(primal, k))
        })?;
        Ok(at(out, e.span))
    }

    /// D(reduce (x,y.e1) e2 e3) = let y1, Y1 = D_{Γ;Y}(e2) in let A, Y2 = D_{Γ,y1;Y1}(e3) in
    ///   let A0 = shift1R (scanl (x,y.e1) y1 A) in let A1 = shift1L (map2 (a,b. (∇_x e1)[a/x,b/y]) A0 A) in
    ///   let A2 = map2 (a,b. (∇_y e1)[a/x,b/y]) A0 A in let A3 = scanr * 1 A1 in
    ///   < reduce (x,y.e1) y1 A, fun (x, z) → Y2(x, 0, map2 (x,y. x*y*z) A2 A3) >
    /// One decision: `shift1L` is taken after the scan, `A1 = map2 (∇_x e1) A0 A`, `A3 = shift1L (scanr * 1 A1)`.
    /// For n ≥ 1 both give A3 = [Π_{j>k} ∂x f(v_{j-1}, a_j)]_{k=1..n}; for the empty array the paper's order
    /// gives `scanr * 1 (shift1L []) = [1]`, one longer than A2 = [] (our map2 wants equal lengths), and
    /// ours gives [] — the gradient [] that the paper's prod example needs.
    ///
    /// §7.1, Fig. 13 (reduce whose function has free variables Γ'): Fig. 13's body is lost in our copy;
    /// we use the note's reconstruction (§3.9), derived from the fold's chain rule: element k's share of
    /// Γ' is `∇_Γ' e1` at (v_{k-1}, a_k) times the cotangent of v_k, which is `A3[k] * z`, so the
    /// continuation adds `reduce +^ 0^ (map2 (s, g. g *^ (s * z)) A3 (map2 (∇_Γ' e1) A0 A))` to Γ'
    /// (the "arrays of tuples" of §7.1 are an array of Γ'-tuples, as the map2 rule's G is). Γ' is only
    /// the function's free variables.
    ///
    /// A.3, Fig. 16 (`fold`, the paper's foldl): the same scans, and the initial value, which is not a
    /// unit, gets the cotangent `r2 * z` with r2 = Π ∂x f(v_{k-1}, a_k). Fig. 16 reads r2 off a scanr that
    /// returns a pair; ours returns an array, so r2 is `reduce * 1 A1` (Fig. 16's A1 has no shift1L, as
    /// ours). Fig. 16's function is closed; its free variables get Fig. 13's share, as reduce's do.
    fn reduce(&mut self, g: &[Slot], y: &Name, e: &Expr, args: &[Expr], fold: bool) -> Result<Expr, Diagnostic> {
        let params = lambda_params(&args[0], 2).expect("accepts: reduce's function is a lambda");
        let body = lambda_body(&args[0], 2).clone();
        if !fold && general::needed(&[e.ty.clone()], &e.ty) {
            return self.reduce_general(g, y, e, args, params, body);
        }
        let free: rustc_hash::FxHashSet<u32> = crate::kit::passes::free_locals(&args[0]).into_iter().map(|n| n.id).collect();
        let (at_, sub): (Vec<usize>, Vec<Slot>) =
            g.iter().enumerate().filter(|(_, s)| s.var.is_some_and(|v| free.contains(&v))).map(|(i, s)| (i, s.clone())).unzip();
        let k = sub.len();
        let gamma_ty = Type::tuple(sub.iter().map(|s| s.ty.clone()).collect());
        let mut primal_f = args[0].clone();
        freshen(&mut primal_f, &mut self.fr);
        let mut scan_f = args[0].clone();
        freshen(&mut scan_f, &mut self.fr);
        let op = if fold { Prim::Fold } else { Prim::Reduce };
        let out = self.args(g, y, &args[1..], &mut |cx, vals, y2| {
            let (y1, a) = match (&vals[0].kind, &vals[1].kind) {
                (ExprKind::Var(y1), ExprKind::Var(a)) => (y1.clone(), a.clone()),
                _ => unreachable!("args binds variables"),
            };
            let (a0, a1, a2, a3) = (cx.fr.name("A0"), cx.fr.name("A1"), cx.fr.name("A2"), cx.fr.name("A3"));
            // the body's gradient in the context Γ', x, y (Γ' empty for the paper's closed function)
            let gx = cx.grads_of_body(&sub, &params, &body, [&a0, &a], |gs| gs[k].clone())?;
            let gy = cx.grads_of_body(&sub, &params, &body, [&a0, &a], |gs| gs[k + 1].clone())?;
            let g_gamma = if k > 0 { Some(cx.grads_of_body(&sub, &params, &body, [&a0, &a], |gs| tuple(gs[..k].to_vec()))?) } else { None };
            let r2 = cx.fr.name("r2");
            let (p, q, s, t) = (cx.fr.name("x"), cx.fr.name("y"), cx.fr.name("x"), cx.fr.name("y"));
            let times = lam(pvar(&p), lam(pvar(&q), mul(var(&p), var(&q))));
            let k_ = cx.cont(g, true, |cx, mut ys, z| {
                // Fig. 13: Γ' gains Σ_k (∇_Γ' e1)(v_{k-1}, a_k) * A3[k] * z
                let mut share = None;
                if let Some(gg) = &g_gamma {
                    let (u, w) = (cx.fr.name("s"), cx.fr.name("g"));
                    let scaled = scale(&gamma_ty, mul(var(&u), z.clone()), var(&w), &mut cx.fr);
                    let gv = prim(Prim::Map2, vec![lam(pvar(&u), lam(pvar(&w), scaled)), var(&a3), gg.clone()]);
                    let (pp, qq) = (cx.fr.name("p"), cx.fr.name("q"));
                    let sum_f = lam(pvar(&pp), lam(pvar(&qq), plus(&gamma_ty, var(&pp), var(&qq), &mut cx.fr)));
                    let zero_g = tuple(sub.iter().map(|sl| zero(&sl.ty, sl.witness.clone(), &mut cx.fr)).collect());
                    let ss: Vec<Name> = (0..k).map(|i| cx.fr.name(&format!("s{}", i + 1))).collect();
                    for ((i, sl), sv) in at_.iter().zip(&sub).zip(&ss) {
                        ys[*i] = plus(&sl.ty, ys[*i].clone(), var(sv), &mut cx.fr);
                    }
                    share = Some((ptuple(ss.iter().map(pvar).collect()), prim(Prim::Reduce, vec![sum_f, zero_g, gv])));
                }
                ys.push(if fold { mul(var(&r2), z.clone()) } else { real(0.0) });
                ys.push(prim(Prim::Map2, vec![lam(pvar(&s), lam(pvar(&t), mul(mul(var(&s), var(&t)), z))), var(&a2), var(&a3)]));
                let call = app(var(&y2), tuple(ys));
                match share {
                    Some((pt, total)) => let_(pt, total, call),
                    None => call,
                }
            });
            let result = pair(prim(op, vec![primal_f.clone(), var(&y1), var(&a)]), k_);
            let result = if fold {
                let (u, w) = (cx.fr.name("x"), cx.fr.name("y"));
                let times2 = lam(pvar(&u), lam(pvar(&w), mul(var(&u), var(&w))));
                let_(pvar(&r2), prim(Prim::Reduce, vec![times2, real(1.0), var(&a1)]), result)
            } else {
                result
            };
            Ok(let_(
                pvar(&a0),
                prim(Prim::Shift1R, vec![prim(Prim::Scanl, vec![scan_f.clone(), var(&y1), var(&a)])]),
                let_(
                    pvar(&a1),
                    gx,
                    let_(pvar(&a2), gy, let_(pvar(&a3), prim(Prim::Shift1L, vec![prim(Prim::Scanr, vec![times, real(1.0), var(&a1)])]), result)),
                ),
            ))
        })?;
        Ok(at(out, e.span))
    }

    /// The slots of `g` that the function `f` reads (Γ' of §7.1), with their positions.
    fn free_slots(g: &[Slot], f: &Expr) -> (Vec<usize>, Vec<Slot>, general::Free) {
        let free: rustc_hash::FxHashSet<u32> = crate::kit::passes::free_locals(f).into_iter().map(|n| n.id).collect();
        let (at_, sub): (Vec<usize>, Vec<Slot>) =
            g.iter().enumerate().filter(|(_, s)| s.var.is_some_and(|v| free.contains(&v))).map(|(i, s)| (i, s.clone())).unzip();
        let info = general::Free { tys: sub.iter().map(|s| s.ty.clone()).collect(), witnesses: sub.iter().map(|s| s.witness.clone()).collect() };
        (at_, sub, info)
    }

    /// Fig. 17's map2 (and map) over arrays of any ground type (common/general.rs gives the rule and
    /// its decisions): the body's gradients are one reverse pass per element seeded with Z's element.
    #[allow(clippy::too_many_arguments)]
    fn map2_general(&mut self, g: &[Slot], y: &Name, e: &Expr, args: &[Expr], params: Vec<Name>, body: Expr, elems: Vec<Type>) -> Result<Expr, Diagnostic> {
        let (at_, sub, free) = Self::free_slots(g, &args[0]);
        let mut primal_f = args[0].clone();
        freshen(&mut primal_f, &mut self.fr);
        let out = self.args(g, y, &args[1..], &mut |cx, vals, y2| {
            let z = cx.fr.name("Z");
            let sh = general::map2(&mut DirectRoute { cx, sub: &sub, params: &params, body: &body }, &vals, &elems, var(&z), &free)?;
            let k = cx.cont_z(g, true, z, |cx, mut ys, _| {
                for ((i, sl), sv) in at_.iter().zip(&sub).zip(&sh.free) {
                    ys[*i] = plus(&sl.ty, ys[*i].clone(), var(sv), &mut cx.fr);
                }
                ys.extend(sh.arrays.iter().cloned());
                sh.lets.iter().rev().fold(app(var(&y2), tuple(ys)), |acc, (p, r)| let_(p.clone(), r.clone(), acc))
            });
            let op = if vals.len() == 1 { Prim::Map } else { Prim::Map2 };
            let mut xs = vec![primal_f.clone()];
            xs.extend(vals);
            Ok(pair(prim(op, xs), k))
        })?;
        Ok(at(out, e.span))
    }

    /// Fig. 17's reduce over arrays of any ground type (common/general.rs): the forward pass keeps the
    /// tape `P = zip A0 A`; the continuation scans it from the right with seeded reverse passes.
    fn reduce_general(&mut self, g: &[Slot], y: &Name, e: &Expr, args: &[Expr], params: Vec<Name>, body: Expr) -> Result<Expr, Diagnostic> {
        let (at_, sub, free) = Self::free_slots(g, &args[0]);
        let mut primal_f = args[0].clone();
        freshen(&mut primal_f, &mut self.fr);
        let mut scan_f = args[0].clone();
        freshen(&mut scan_f, &mut self.fr);
        let ty = e.ty.clone();
        let out = self.args(g, y, &args[1..], &mut |cx, vals, y2| {
            let red = general::reduce_pre(&mut cx.fr, scan_f.clone(), vals[0].clone(), vals[1].clone());
            let z = cx.fr.name("z");
            let sh = general::reduce_cont(&mut DirectRoute { cx, sub: &sub, params: &params, body: &body }, &red, &ty, var(&z), &free)?;
            let k = cx.cont_z(g, true, z, |cx, mut ys, _| {
                for ((i, sl), sv) in at_.iter().zip(&sub).zip(&sh.free) {
                    ys[*i] = plus(&sl.ty, ys[*i].clone(), var(sv), &mut cx.fr);
                }
                // the initial value is the unit of the reduction: its cotangent is dropped (Fig. 5's 0)
                ys.push(zero(&ty, vals[0].clone(), &mut cx.fr));
                ys.extend(sh.arrays.iter().cloned());
                sh.lets.iter().rev().fold(app(var(&y2), tuple(ys)), |acc, (p, r)| let_(p.clone(), r.clone(), acc))
            });
            let result = pair(prim(Prim::Reduce, vec![primal_f.clone(), vals[0].clone(), vals[1].clone()]), k);
            Ok(red.pre.iter().rev().fold(result, |acc, (p, r)| let_(p.clone(), r.clone(), acc)))
        })?;
        Ok(at(out, e.span))
    }

    /// A let pattern with every `_` named (each bound value gets its slot), and its variables with types.
    fn pattern(&mut self, p: &Pat, ty: &Type) -> (Pat, Vec<(Name, Type)>) {
        name_pattern(p, ty, &mut self.fr)
    }
}

/// The element types of array arguments.
fn elem_types(arrays: &[Expr]) -> Vec<Type> {
    arrays.iter().map(|a| a.ty.as_array().cloned().unwrap_or(Type::Real)).collect()
}

/// Fig. 17's body gradients by Fig. 5's macro: `\x \y \w. π2 D_{Γ',x,y;Id}(e1) (0, w)`, a fresh copy.
struct DirectRoute<'a> {
    cx: &'a mut Cx,
    sub: &'a [Slot],
    params: &'a [Name],
    body: &'a Expr,
}

impl general::Route for DirectRoute<'_> {
    fn fresh(&mut self) -> &mut Fresh {
        &mut self.cx.fr
    }

    fn seeded(&mut self, tys: &[Type]) -> Result<Expr, Diagnostic> {
        let w = self.cx.fr.name("w");
        let mut g = self.sub.to_vec();
        g.extend(self.params.iter().zip(tys).map(|(p, t)| Slot { var: Some(p.id), ty: t.clone(), witness: var(p) }));
        let grad = self.cx.gradient_seeded(&g, self.body, var(&w))?;
        let mut f = self.params.iter().rev().fold(lam(pvar(&w), grad), |acc, p| lam(pvar(p), acc));
        freshen(&mut f, &mut self.cx.fr);
        Ok(f)
    }
}

impl Stage for Direct {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    /// Higher-order code is inlined away first (§8); the rest of Fig. 2's restrictions stand.
    fn supports(&self) -> Features {
        supports_source()
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        accepts_source(src)
    }

    /// `grad (s, dt) = let p = s in let (r, Y') = D←_{Γ;Id_Γ}(e) in (r, Y'(0_Γ, dt))` (Fig. 4's ∇_Γ, with
    /// the output cotangent dt for the paper's 1), the context's cotangents rebuilt in main's input shape.
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let p = first_order(src)?;
        let main = p.def("main").expect("first_order keeps main");
        let ExprKind::Lam(_, pat_body) = &main.body.kind else { unreachable!("first_order: main is a lambda") };
        let (pat, body) = &**pat_body;
        let mut cx = Cx { fr: Fresh::new(&p), conts: 0 };
        let (pat, vars) = cx.pattern(pat, src.input_type);
        let g: Vec<Slot> = vars.iter().map(|(n, t)| Slot { var: Some(n.id), ty: t.clone(), witness: var(n) }).collect();
        let id = cx.fr.name("Id");
        let ident = cx.cont(&g, false, |_, ys, _| tuple(ys));
        let d = cx.d(&g, &id, body)?;
        let (s, dt, r, k) = (cx.fr.name("s"), cx.fr.name("dt"), cx.fr.name("r"), cx.y_name());
        let gs: Vec<Name> = (0..g.len()).map(|i| cx.fr.name(&format!("g{}", i + 1))).collect();
        let zeros: Vec<Expr> = g.iter().map(|sl| zero(&sl.ty, sl.witness.clone(), &mut cx.fr)).collect();
        let grads = call_last(&k, zeros, &dt, &gs, var(&r), &pat);
        let body = let_(pat, var(&s), let_(pvar(&id), ident, let_(ppair(pvar(&r), pvar(&k)), d, grads)));
        Ok(Output::from(wrapper_program(&p, &s, &dt, body, cx.fr.next_id)))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        grad_type(src)
    }

    /// The wrapper, with every continuation call recorded (`line::run`).
    fn run(&self, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
        line::run(m, cx)
    }

    /// The line of continuations (Insight 2: each changes at most two slots of the stack).
    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        line::graph(m)
    }
}
