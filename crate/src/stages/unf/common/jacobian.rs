//! What the UNF route's stages share: each Source UNF primitive's primal as code (the value it
//! pushes), its transposed Jacobian `J^T p` (Fig. 7) read as code (Fig. 10, with the note's §3.6
//! corrections), and the nested gradients `∇ e1` of map2 and reduce bodies, taken by this same route.
//!
//! Atoms: the primal context is given as one expression per slot (a variable, or a constant that
//! `c_{T;0}` pushed), so the same code serves the stages that rebind the whole context at each step
//! (`unf/source`, `unf/target`) and `unf/back`, which binds only what a primitive pushes.

use super::unf::{unf, Op, Slot, Step, Unf};
use super::{general, lambda_body, lambda_params, plus, scale, zero};
use crate::build::*;
use crate::deriv::{self, Partial};
use crate::diag::Diagnostic;
use crate::ir::*;
use crate::kit::passes::freshen;
use rustc_hash::FxHashMap as HashMap;

/// `e` with each variable of `map` replaced by its atom (atoms are closed: no capture), walked with
/// an explicit stack.
pub fn subst(e: &mut Expr, map: &HashMap<u32, Expr>) {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        if let ExprKind::Var(n) = &e.kind {
            if let Some(a) = map.get(&n.id) {
                *e = a.clone();
            }
            continue;
        }
        stack.extend(children_mut(e));
    }
}

/// A copy of `f` (a map2/reduce function or a reduce's initial value) with fresh binders, its context
/// variables `free` replaced by their atoms in `xs`.
pub fn instantiate(f: &Expr, free: &[(Name, usize)], xs: &[Expr], fr: &mut Fresh) -> Expr {
    let mut f = f.clone();
    freshen(&mut f, fr);
    let map: HashMap<u32, Expr> = free.iter().map(|(n, i)| (n.id, xs[*i].clone())).collect();
    subst(&mut f, &map);
    f
}

/// Component `i` of the `n`-tuple `p`.
pub fn component(p: Expr, i: usize, n: usize, fr: &mut Fresh) -> Expr {
    match (n, i) {
        (2, 0) => fst(p),
        (2, _) => snd(p),
        _ => {
            let vs: Vec<Name> = (0..n).map(|_| fr.name("v")).collect();
            let_(ptuple(vs.iter().map(pvar).collect()), p, var(&vs[i]))
        }
    }
}

impl Step {
    /// The value this primitive pushes, from the atoms `xs` of the context before it (the paper's
    /// `UNF^-1` of a primitive without J, Fig. 10: "additionally projects to the last element").
    pub fn primal(&self, xs: &[Expr], fr: &mut Fresh) -> Option<Expr> {
        let n = xs.len();
        Some(match &self.op {
            Op::Const(c) => c.clone(),
            Op::Var(i) => xs[*i].clone(),
            Op::Prim(p, k) => prim(*p, xs[n - k..].to_vec()),
            Op::Pair(k) => tuple(xs[n - k..].to_vec()),
            Op::Proj { .. } => return None,
            Op::Pi { i, n: m } => component(xs[n - 1].clone(), *i, *m, fr),
            Op::Map2 { f, free } => prim(Prim::Map2, vec![instantiate(f, free, xs, fr), xs[n - 2].clone(), xs[n - 1].clone()]),
            Op::Map { f, free } => prim(Prim::Map, vec![instantiate(f, free, xs, fr), xs[n - 1].clone()]),
            Op::Fold { f, free } => prim(Prim::Fold, vec![instantiate(f, free, xs, fr), xs[n - 2].clone(), xs[n - 1].clone()]),
            Op::Reduce { f, init, free } => {
                let f = instantiate(f, free, xs, fr);
                prim(Prim::Reduce, vec![f, instantiate(init, free, xs, fr), xs[n - 1].clone()])
            }
            Op::If { cond, then, els, free } => if_(instantiate(cond, free, xs, fr), instantiate(then, free, xs, fr), instantiate(els, free, xs, fr)),
        })
    }

    /// The context's atoms after this step: `xs` shaped as the stack is (pair and proj remove slots),
    /// then `pushed`.
    pub fn after<T>(&self, xs: &mut Vec<T>, pushed: Option<T>) {
        match &self.op {
            Op::Pair(k) => xs.truncate(xs.len() - k),
            Op::Proj { keep, drop } => {
                xs.drain(*keep..keep + drop);
            }
            _ => {}
        }
        xs.extend(pushed);
    }
}

/// `J^T p` as code: the lets it needs at the primal context (`pre`) and the call of the continuation
/// `y` on the cotangents of the context before p, from the cotangents `cs` of the context after it.
pub struct Jt {
    pub pre: Vec<(Pat, Expr)>,
    pub call: Expr,
}

/// `J^T p` at the primal context `xs` (atoms of the slots `before`), `pushed` the atom of p's result.
pub fn jt(step: &Step, before: &[Slot], xs: &[Expr], pushed: Option<&Expr>, y: &Name, mut cs: Vec<Expr>, fr: &mut Fresh) -> Result<Jt, Diagnostic> {
    let n = before.len();
    let mut pre = vec![];
    let mut body_lets: Vec<(Pat, Expr)> = vec![];
    match &step.op {
        // J^T c_{T;0} = (x1, …, xn): the constant's cotangent is dropped
        Op::Const(_) => {
            cs.pop();
        }
        // J^T var_{Γ;i} = (x1, …, xi + x(n+1), …, xn)
        Op::Var(i) => {
            let z = cs.pop().expect("var pushes");
            cs[*i] = plus(&before[*i].ty, cs[*i].clone(), z, fr);
        }
        // J^T op_{Γ;m} = (x1, …, xn, x(n+1) + ∂1op * x(n+m+1), …, x(n+m) + ∂m op * x(n+m+1)),
        // the partials at the primal arguments (fix (†): the paper prints op_n(x_n, …, x_{n+m}))
        Op::Prim(p, k) => {
            let z = cs.pop().expect("op pushes");
            let result = pushed.cloned().unwrap_or_else(unit);
            let rule = deriv::rule(*p, &xs[n - k..], &result).ok_or_else(|| Diagnostic::error(step.span, "a primitive without partials"))?;
            for (j, part) in rule.partials.iter().enumerate() {
                let d = match part {
                    Partial::One => z.clone(),
                    Partial::MinusOne => neg(z.clone()),
                    Partial::Times(c) => mul(c.clone(), z.clone()),
                };
                let at = n - k + j;
                cs[at] = add(cs[at].clone(), d);
            }
        }
        // J^T pair_{T;A×B} = (x1, …, x(n-1), π1 xn, π2 xn)
        Op::Pair(k) => {
            let cp = cs.pop().expect("pair pushes");
            let zs: Vec<Name> = (0..*k).map(|i| fr.name(&format!("z{}", i + 1))).collect();
            body_lets.push((ptuple(zs.iter().map(pvar).collect()), cp));
            cs.extend(zs.iter().map(var));
        }
        // J^T proj_{T1;T2;T3} = (x1, …, xk, 0, …, 0, x(k+p), …, xn): zeros for the forgotten slots
        // (this is where Fig. 5's `0_A` for a let's variable comes from)
        Op::Proj { keep, drop } => {
            let zeros: Vec<Expr> = (*keep..keep + drop).map(|j| zero(&before[j].ty, xs[j].clone(), fr)).collect();
            let tail = cs.split_off(*keep);
            cs.extend(zeros);
            cs.extend(tail);
        }
        // J^T πi: the pair's cotangent gains z in component i (Fig. 5's (z, 0_B) and (0_A, z))
        Op::Pi { i, n: m } => {
            let z = cs.pop().expect("πi pushes");
            let Type::Tuple(ts) = &before[n - 1].ty else { return Err(Diagnostic::error(step.span, "a projection from a value that is not a tuple")) };
            let parts: Vec<Expr> =
                (0..*m).map(|j| if j == *i { z.clone() } else { zero(&ts[j], component(xs[n - 1].clone(), j, *m, fr), fr) }).collect();
            cs[n - 1] = plus(&before[n - 1].ty, cs[n - 1].clone(), tuple(parts), fr);
        }
        Op::Map2 { f, free } => map2(before, xs, f, 2, free, &mut cs, &mut body_lets, fr)?,
        Op::Map { f, free } => map2(before, xs, f, 1, free, &mut cs, &mut body_lets, fr)?,
        Op::Reduce { f, init, free } => reduce(before, xs, f, Some(init), free, &mut cs, &mut pre, &mut body_lets, fr)?,
        Op::Fold { f, free } => reduce(before, xs, f, None, free, &mut cs, &mut pre, &mut body_lets, fr)?,
        Op::If { cond, then, els, free } => cond_jt(before, xs, cond, [then, els], free, &mut cs, &mut pre, &mut body_lets, fr)?,
    }
    let call = app(var(y), tuple(cs));
    Ok(Jt { pre, call: body_lets.into_iter().rev().fold(call, |acc, (p, e)| let_(p, e, acc)) })
}

/// `\x y -> pick(∇_{free,x,y} e1)`: the body's gradient in the context of its free variables and
/// parameters (Fig. 4's nested ∇, taken by this route: UNF, J^T, UNF⁻¹), a fresh copy with its free
/// variables at their atoms.
fn grad_fn(f: &Expr, free: &[(Name, usize)], before: &[Slot], xs: &[Expr], pick: impl Fn(&[Expr]) -> Expr, fr: &mut Fresh) -> Result<Expr, Diagnostic> {
    let arity = if lambda_params(f, 2).is_some() { 2 } else { 1 };
    let params = lambda_params(f, arity).ok_or_else(|| Diagnostic::error(f.span, "a function argument that is not a lambda `\\x y -> e`"))?;
    let body = lambda_body(f, arity);
    let mut ctx: Vec<Slot> = free.iter().map(|(n, i)| Slot { name: n.clone(), ty: before[*i].ty.clone() }).collect();
    ctx.extend(params.iter().map(|p| Slot { name: p.clone(), ty: Type::Real }));
    let g = gradient(ctx.clone(), body, fr)?;
    let gs: Vec<Name> = (0..ctx.len()).map(|i| fr.name(&format!("g{}", i + 1))).collect();
    let picked = let_(ptuple(gs.iter().map(pvar).collect()), g, pick(&gs.iter().map(var).collect::<Vec<_>>()));
    let lam2 = params.iter().rev().fold(picked, |acc, p| lam(pvar(p), acc));
    Ok(instantiate(&lam2, free, xs, fr))
}

/// J^T map2_{Γ;x,y.e1} (Fig. 10, with the note's fix (‡): each array's cotangent is the Fig. 5 form,
/// both primal elements bound, added to the cotangent already there):
///   let G = map2 * Z (map2 (a,b. (∇_Γ e1)[a/x,b/y]) A B) in
///   (Γ̲ +^ reduce +^ 0^ G, cA + map2 * (map2 (∇_x e1) A B) Z, cB + map2 * (map2 (∇_y e1) A B) Z)
/// Γ is only the body's free variables (the other slots' share is zero: the note's open point 6 (b)).
/// With `arity` 1 this is J^T map (A.3, Fig. 16's map rule): one array, `cA + map2 * (map (∇_x e1) A) Z`.
#[allow(clippy::too_many_arguments)]
fn map2(before: &[Slot], xs: &[Expr], f: &Expr, arity: usize, free: &[(Name, usize)], cs: &mut Vec<Expr>, lets: &mut Vec<(Pat, Expr)>, fr: &mut Fresh) -> Result<(), Diagnostic> {
    let n = before.len();
    let k = free.len();
    let elems: Vec<Type> = before[n - arity..].iter().map(|s| s.ty.as_array().cloned().unwrap_or(Type::Real)).collect();
    if general::needed(&elems, &lambda_body(f, arity).ty) {
        // A.5, Fig. 17 (common/general.rs): the arrays' cotangents and Γ''s from one seeded pass per element
        let z = cs.pop().expect("map2 pushes");
        let sh = general::map2(&mut UnfRoute { f, arity, free, before, xs, fr }, &xs[n - arity..], &elems, z, &free_info(free, before, xs))?;
        lets.extend(sh.lets);
        for (j, share) in sh.arrays.into_iter().enumerate() {
            let slot = n - arity + j;
            cs[slot] = plus(&before[slot].ty, cs[slot].clone(), share, fr);
        }
        add_shares(free, &sh.free, before, cs, fr);
        return Ok(());
    }
    let z = cs.pop().expect("map2 pushes");
    let (a, b) = (xs[n - arity].clone(), xs[n - 1].clone());
    let over = |g: Expr| if arity == 1 { prim(Prim::Map, vec![g, a.clone()]) } else { prim(Prim::Map2, vec![g, a.clone(), b.clone()]) };
    let times = |arr: Expr, fr: &mut Fresh| {
        let (s, t) = (fr.name("s"), fr.name("t"));
        prim(Prim::Map2, vec![lam(pvar(&s), lam(pvar(&t), mul(var(&s), var(&t)))), arr, z.clone()])
    };
    let arr = Type::array(Type::Real);
    for (slot, j) in [(n - 2, k), (n - 1, k + 1)].into_iter().skip(2 - arity) {
        let j = j - (2 - arity);
        let g = grad_fn(f, free, before, xs, |gs| gs[j].clone(), fr)?;
        let share = times(over(g), fr);
        cs[slot] = plus(&arr, cs[slot].clone(), share, fr);
    }
    if k > 0 {
        let gamma = Type::tuple(free.iter().map(|(_, i)| before[*i].ty.clone()).collect());
        let g = grad_fn(f, free, before, xs, |gs| tuple(gs[..k].to_vec()), fr)?;
        let (s, v) = (fr.name("s"), fr.name("v"));
        let scaled = lam(pvar(&s), lam(pvar(&v), scale(&gamma, var(&s), var(&v), fr)));
        add_free_shares(prim(Prim::Map2, vec![scaled, z.clone(), over(g)]), &gamma, free, before, xs, cs, lets, fr);
    }
    Ok(())
}

/// The free variables' shares of a map2/reduce (§7.1): `G` (an array of Γ'-tuples, one per element)
/// summed, `reduce +^ 0^ G`, and each part added to its variable's cotangent.
#[allow(clippy::too_many_arguments)]
fn add_free_shares(g: Expr, gamma: &Type, free: &[(Name, usize)], before: &[Slot], xs: &[Expr], cs: &mut [Expr], lets: &mut Vec<(Pat, Expr)>, fr: &mut Fresh) {
    let gname = fr.name("G");
    lets.push((pvar(&gname), g));
    let (p, q) = (fr.name("p"), fr.name("q"));
    let sum_f = lam(pvar(&p), lam(pvar(&q), plus(gamma, var(&p), var(&q), fr)));
    let zero_g = tuple(free.iter().map(|(_, i)| zero(&before[*i].ty, xs[*i].clone(), fr)).collect());
    let ss: Vec<Name> = (0..free.len()).map(|i| fr.name(&format!("s{}", i + 1))).collect();
    lets.push((ptuple(ss.iter().map(pvar).collect()), prim(Prim::Reduce, vec![sum_f, zero_g, var(&gname)])));
    for ((_, i), sv) in free.iter().zip(&ss) {
        cs[*i] = plus(&before[*i].ty, cs[*i].clone(), var(sv), fr);
    }
}

/// J^T reduce_{Γ;x,y.e1;e2} (Fig. 10, fix (†): the unbound `y1` is the initial value e2):
///   let A0 = shift1R (scanl (x,y.e1) e2 A) in let A1 = map2 (∇_x e1) A0 A in
///   let A2 = map2 (∇_y e1) A0 A in let A3 = shift1L (scanr * 1 A1) in
///   (x1, …, xn, cA + map2 (x,y. x*y*z) A2 A3)
/// As unf/direct (see its reduce rule), shift1L is taken after the scan, so that [] has gradient [];
/// and, as for map2, the array's cotangent is added to, not replaced (Fig. 10 drops it). The initial
/// value's cotangent is zero (it is the unit of the reduction, §3.1), as in Fig. 5.
/// With `init` None this is J^T fold (A.3, Fig. 16): the initial value is the slot below the array
/// and gains `r2 * z`, r2 = Π A1 (`reduce * 1 A1`). Both add Fig. 13's share to the function's free
/// variables (§7.1, the note's reconstruction; see unf/direct's reduce rule):
///   Γ' +^ reduce +^ 0^ (map2 (s, g. g *^ (s * z)) A3 (map2 (∇_Γ' e1) A0 A)).
#[allow(clippy::too_many_arguments)]
fn reduce(
    before: &[Slot],
    xs: &[Expr],
    f: &Expr,
    init: Option<&Expr>,
    free: &[(Name, usize)],
    cs: &mut Vec<Expr>,
    pre: &mut Vec<(Pat, Expr)>,
    lets: &mut Vec<(Pat, Expr)>,
    fr: &mut Fresh,
) -> Result<(), Diagnostic> {
    let n = before.len();
    let z = cs.pop().expect("reduce pushes");
    let a = xs[n - 1].clone();
    // the function's own free variables (reduce's `free` also lists its initial value's)
    let used: rustc_hash::FxHashSet<u32> = crate::kit::passes::free_locals(f).into_iter().map(|n| n.id).collect();
    let ffree: Vec<(Name, usize)> = free.iter().filter(|(n, _)| used.contains(&n.id)).cloned().collect();
    let g = before[n - 1].ty.as_array().cloned().unwrap_or(Type::Real);
    if let (Some(init), true) = (init, general::needed(&[g.clone()], &g)) {
        // A.5, Fig. 17 (common/general.rs): the tape in the forward pass, a right scan of seeded passes
        // in the continuation; the initial value (the unit) gets no cotangent, as above
        let scan_f = instantiate(f, free, xs, fr);
        let v0 = instantiate(init, free, xs, fr);
        let red = general::reduce_pre(fr, scan_f, v0, a);
        pre.extend(red.pre.iter().cloned());
        let sh = general::reduce_cont(&mut UnfRoute { f, arity: 2, free: &ffree, before, xs, fr }, &red, &g, z, &free_info(&ffree, before, xs))?;
        lets.extend(sh.lets);
        let share = sh.arrays.into_iter().next().expect("one array");
        cs[n - 1] = plus(&before[n - 1].ty, cs[n - 1].clone(), share, fr);
        add_shares(&ffree, &sh.free, before, cs, fr);
        return Ok(());
    }
    let k = ffree.len();
    let (a0, a1, a2, a3) = (fr.name("A0"), fr.name("A1"), fr.name("A2"), fr.name("A3"));
    let scan_f = instantiate(f, free, xs, fr);
    let fold = init.is_none();
    let v0 = match init {
        Some(e) => instantiate(e, free, xs, fr),
        None => xs[n - 2].clone(),
    };
    pre.push((pvar(&a0), prim(Prim::Shift1R, vec![prim(Prim::Scanl, vec![scan_f, v0, a.clone()])])));
    let gx = grad_fn(f, &ffree, before, xs, |gs| gs[k].clone(), fr)?;
    pre.push((pvar(&a1), prim(Prim::Map2, vec![gx, var(&a0), a.clone()])));
    let gy = grad_fn(f, &ffree, before, xs, |gs| gs[k + 1].clone(), fr)?;
    pre.push((pvar(&a2), prim(Prim::Map2, vec![gy, var(&a0), a.clone()])));
    let (p, q) = (fr.name("x"), fr.name("y"));
    let times = lam(pvar(&p), lam(pvar(&q), mul(var(&p), var(&q))));
    pre.push((pvar(&a3), prim(Prim::Shift1L, vec![prim(Prim::Scanr, vec![times, real(1.0), var(&a1)])])));
    let (s, t) = (fr.name("x"), fr.name("y"));
    let share = prim(Prim::Map2, vec![lam(pvar(&s), lam(pvar(&t), mul(mul(var(&s), var(&t)), z.clone()))), var(&a2), var(&a3)]);
    cs[n - 1] = plus(&Type::array(Type::Real), cs[n - 1].clone(), share, fr);
    if fold {
        let (u, w, r2) = (fr.name("x"), fr.name("y"), fr.name("r2"));
        let times = lam(pvar(&u), lam(pvar(&w), mul(var(&u), var(&w))));
        pre.push((pvar(&r2), prim(Prim::Reduce, vec![times, real(1.0), var(&a1)])));
        cs[n - 2] = add(cs[n - 2].clone(), mul(var(&r2), z.clone()));
    }
    if k > 0 {
        let gamma = Type::tuple(ffree.iter().map(|(_, i)| before[*i].ty.clone()).collect());
        let gg = grad_fn(f, &ffree, before, xs, |gs| tuple(gs[..k].to_vec()), fr)?;
        let (u, w) = (fr.name("s"), fr.name("g"));
        let scaled = lam(pvar(&u), lam(pvar(&w), scale(&gamma, mul(var(&u), z.clone()), var(&w), fr)));
        add_free_shares(prim(Prim::Map2, vec![scaled, var(&a3), prim(Prim::Map2, vec![gg, var(&a0), a])]), &gamma, &ffree, before, xs, cs, lets, fr);
    }
    Ok(())
}
/// Γ' as Fig. 17's rule takes it: types and atoms.
fn free_info(free: &[(Name, usize)], before: &[Slot], xs: &[Expr]) -> general::Free {
    general::Free { tys: free.iter().map(|(_, i)| before[*i].ty.clone()).collect(), witnesses: free.iter().map(|(_, i)| xs[*i].clone()).collect() }
}

/// Each free variable's cotangent plus its share `ss`.
fn add_shares(free: &[(Name, usize)], ss: &[Name], before: &[Slot], cs: &mut [Expr], fr: &mut Fresh) {
    for ((_, i), sv) in free.iter().zip(ss) {
        cs[*i] = plus(&before[*i].ty, cs[*i].clone(), var(sv), fr);
    }
}

/// Fig. 17's body gradients by this route (UNF, J^T, UNF⁻¹): `\x \y \w. ∇_{Γ',x,y} e1` seeded with
/// w, a fresh copy with Γ' at its atoms.
struct UnfRoute<'a> {
    f: &'a Expr,
    arity: usize,
    free: &'a [(Name, usize)],
    before: &'a [Slot],
    xs: &'a [Expr],
    fr: &'a mut Fresh,
}

impl general::Route for UnfRoute<'_> {
    fn fresh(&mut self) -> &mut Fresh {
        self.fr
    }

    fn seeded(&mut self, tys: &[Type]) -> Result<Expr, Diagnostic> {
        let params = lambda_params(self.f, self.arity).ok_or_else(|| Diagnostic::error(self.f.span, "a function argument that is not a lambda `\\x y -> e`"))?;
        let body = lambda_body(self.f, self.arity);
        let mut ctx: Vec<Slot> = self.free.iter().map(|(n, i)| Slot { name: n.clone(), ty: self.before[*i].ty.clone() }).collect();
        ctx.extend(params.iter().zip(tys).map(|(p, t)| Slot { name: p.clone(), ty: t.clone() }));
        let w = self.fr.name("w");
        let g = gradient_seeded(ctx, body, var(&w), self.fr)?;
        let f = params.iter().rev().fold(lam(pvar(&w), g), |acc, p| lam(pvar(p), acc));
        Ok(instantiate(&f, self.free, self.xs, self.fr))
    }
}

/// J^T if_{Γ;c;e2;e3} = let b = c in (x1, …, xn) +^ (if b then ∇_Γ(e2) else ∇_Γ(e3)) * z: §7.2's
/// "Solution" read as a transposed Jacobian (§7.3), with unf/direct's decisions (see its `cond`): the
/// taken branch's gradient selected by `if b` rather than weighted by b and 1 - b, each seeded with z,
/// Γ only the variables the branches read. The condition is computed with the primal (`pre`).
#[allow(clippy::too_many_arguments)]
fn cond_jt(
    before: &[Slot],
    xs: &[Expr],
    cond: &Expr,
    branches: [&Expr; 2],
    free: &[(Name, usize)],
    cs: &mut Vec<Expr>,
    pre: &mut Vec<(Pat, Expr)>,
    lets: &mut Vec<(Pat, Expr)>,
    fr: &mut Fresh,
) -> Result<(), Diagnostic> {
    let z = cs.pop().expect("if pushes");
    let b = fr.name("b");
    pre.push((pvar(&b), instantiate(cond, free, xs, fr)));
    let used: rustc_hash::FxHashSet<u32> =
        branches.iter().flat_map(|e| crate::kit::passes::free_locals(e)).map(|n| n.id).collect();
    let sub: Vec<(Name, usize)> = free.iter().filter(|(n, _)| used.contains(&n.id)).cloned().collect();
    if sub.is_empty() {
        return Ok(());
    }
    let ctx: Vec<Slot> = sub.iter().map(|(n, i)| Slot { name: n.clone(), ty: before[*i].ty.clone() }).collect();
    let mut gs = vec![];
    for e in branches {
        let g = gradient_seeded(ctx.clone(), e, z.clone(), fr)?;
        gs.push(instantiate(&g, &sub, xs, fr));
    }
    let g3 = gs.pop().expect("two branches");
    let g2 = gs.pop().expect("two branches");
    let ss: Vec<Name> = (0..sub.len()).map(|i| fr.name(&format!("s{}", i + 1))).collect();
    lets.push((ptuple(ss.iter().map(pvar).collect()), if_(var(&b), g2, g3)));
    for ((_, i), sv) in sub.iter().zip(&ss) {
        cs[*i] = plus(&before[*i].ty, cs[*i].clone(), var(sv), fr);
    }
    Ok(())
}

/// Fresh cotangent parameters `(y1, …, yn)` for a context of `n` slots.
pub fn cotangents(n: usize, fr: &mut Fresh) -> Vec<Name> {
    (0..n).map(|i| fr.name(&format!("y{}", i + 1))).collect()
}

/// `UNF^-1(D←_ρ(UNF(e)))` by the note's §3.6 algorithm (symbolic stack of atoms): a flat list of
/// lets — each primitive's pushed value, the lets its J^T needs at the primal context (computed in the
/// forward pass, as Fig. 5 does), and its continuation `Y' = fun (y1, …, ym) → Y(J^T …)` — starting
/// from `Id = fun (y1, …, yn) → (y1, …, yn)`.
pub fn back_chain(u: &Unf, fr: &mut Fresh) -> Result<BackChain, Diagnostic> {
    let mut binds = vec![];
    let id = fr.name("Id");
    let ys = cotangents(u.input.len(), fr);
    binds.push((pvar(&id), lam(ptuple(ys.iter().map(pvar).collect()), tuple(ys.iter().map(var).collect()))));
    let mut y = id;
    let mut stack = u.input.clone();
    let mut atoms: Vec<Expr> = u.input.iter().map(|s| var(&s.name)).collect();
    let mut conts = 0;
    for st in &u.steps {
        let before = stack.clone();
        let xs = atoms.clone();
        // a constant and a copied variable push an atom; everything else is bound to the slot's name
        let pushed = match (&st.op, st.primal(&xs, fr), &st.push) {
            (Op::Const(_) | Op::Var(_), Some(e), _) => Some(e),
            (_, Some(e), Some(s)) => {
                binds.push((pvar(&s.name), at(e, st.span)));
                Some(var(&s.name))
            }
            _ => None,
        };
        st.after(&mut atoms, pushed.clone());
        st.apply(&mut stack);
        let cs = cotangents(stack.len(), fr);
        let j = jt(st, &before, &xs, pushed.as_ref(), &y, cs.iter().map(var).collect(), fr)?;
        binds.extend(j.pre);
        conts += 1;
        let y2 = fr.name(&format!("Y{conts}"));
        binds.push((pvar(&y2), lam(ptuple(cs.iter().map(pvar).collect()), j.call)));
        y = y2;
    }
    let result = atoms.pop().unwrap_or_else(unit);
    Ok(BackChain { binds, result, y })
}

/// `back_chain`'s lets, the result's atom, and the last continuation `Y`.
pub struct BackChain {
    pub binds: Vec<(Pat, Expr)>,
    pub result: Expr,
    pub y: Name,
}

/// `∇_Γ e` (Fig. 4: `π2 D(e) (0_Γ, 1)`) by the UNF route: the tuple of `e`'s cotangents for every
/// slot of `ctx`.
pub fn gradient(ctx: Vec<Slot>, e: &Expr, fr: &mut Fresh) -> Result<Expr, Diagnostic> {
    gradient_seeded(ctx, e, real(1.0), fr)
}

/// `π2 D(e) (0_Γ, seed)`: `gradient` with the result's cotangent `seed` for the paper's 1.
pub fn gradient_seeded(ctx: Vec<Slot>, e: &Expr, seed: Expr, fr: &mut Fresh) -> Result<Expr, Diagnostic> {
    let u = unf(ctx.clone(), e, fr)?;
    let BackChain { binds, y, .. } = back_chain(&u, fr)?;
    let mut args: Vec<Expr> = ctx.iter().map(|s| zero(&s.ty, var(&s.name), fr)).collect();
    args.push(seed);
    Ok(binds.into_iter().rev().fold(app(var(&y), tuple(args)), |acc, (p, e)| let_(p, e, acc)))
}

/// The semantic reading of one primitive (Ex. 4.1): the whole context, rebound.
/// `let (x1', …, xm') = (…, p(x1, …, xn)) in`, with fresh binders named after the slots of the context
/// after it (`after`); returns the pattern, the tuple, and the new atoms (the binders).
pub fn context_step(st: &Step, xs: &[Expr], after: &[Slot], fr: &mut Fresh) -> (Pat, Expr, Vec<Expr>) {
    let mut vals = xs.to_vec();
    let pushed = st.primal(xs, fr).filter(|_| st.push.is_some());
    st.after(&mut vals, pushed.map(|e| at(e, st.span)));
    let names: Vec<Name> = after.iter().map(|s| fr.name(&s.name.text)).collect();
    // A constant's slot is still rebound, but read as the constant itself: forward mode (which checks
    // a same-function stage) sees `x * 1.0`, not `x * c` with a zero tangent that ∞ would make NaN.
    let atoms = names.iter().zip(&vals).map(|(n, v)| if matches!(v.kind, ExprKind::Real(_) | ExprKind::Unit) { v.clone() } else { var(n) }).collect();
    (ptuple(names.iter().map(pvar).collect()), tuple(vals), atoms)
}
