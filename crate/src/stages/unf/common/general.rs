//! Appendix A.5, Fig. 17: map2 and reduce over arrays of any ground type G (`G ::= R | G × … × G |
//! A[G]^n`), shared by both routes (unf/direct builds the body's gradients with Fig. 5's macro, the UNF
//! route with UNF, J^T and UNF⁻¹; each supplies them through [`Route`]).
//!
//! Fig. 17 writes the body's gradients as tensors, `∇_x e1 : A ⊗ A` (`R ⊗ A = A`, `(A1 × … × An) ⊗ A =
//! (A1 ⊗ A) × … × (An ⊗ A)`, `A[A1]^n ⊗ A = A[A1 ⊗ A]^n`), with two new products: `*^ : (A⊗A) × A → A`
//! (matrix–vector, map2's `(∇ e1)[a/x] *^ b`) and `*~ : (A⊗A) × (A⊗A) → A⊗A` (matrix–matrix, reduce's
//! `A3 = scanr *~ 1 A1`). Decisions (the paper leaves the representation open, "Einsum-like" future
//! work):
//! - A ⊗ A is never built as a matrix. A tensor only ever meets a cotangent through `*^`, and
//!   `(∇_x e1) *^ w` is exactly the body's reverse pass seeded with w, `π_x (π2 D(e1) (0, w))` — the
//!   `∇` of Fig. 4 with w for the paper's 1. So each `M *^ w` is printed as that seeded gradient, one
//!   reverse pass of the body per element (a matrix would cost dim(A) passes to build, and a product of
//!   dim(A)² entries each).
//! - map2: the three gradients `∇_Γ e1`, `∇_x e1`, `∇_y e1` of Fig. 17 come from the one seeded pass:
//!   `H = map2 (p, w. ∇_{Γ,x,y} e1 [p] seeded w) (zip A B) Z`, an array of (Γ', x̄, ȳ) tuples, then each
//!   array's cotangent is its column of H and Γ' gains `reduce +^ 0^` of the Γ' columns (the note's open
//!   point 5, (‡): our gradient binds both primal elements, unlike the printed `[a/x]`).
//! - reduce: `A3[k] *^ z = (A1[k+1] *~ … *~ A1[n]) *^ z` is evaluated from the right, a product of
//!   transposed Jacobians applied to z one at a time (associativity of *~ and *^): a `scanr` in the
//!   continuation whose step is the seeded pass, `S = scanr (p, s. ∇_{Γ',x,y} e1 [p] seeded π_x s)
//!   (0_Γ', z, 0_G) (zip A0 A)`, and `H = shift1R S` holds, per element, its (Γ', x̄, ȳ) shares. Same
//!   value as Fig. 17's eager A1/A3 tape, linear in n and in dim(G) (the tape of *~ products is
//!   cubic in dim(G)); the zero of reduce's init slot as in Fig. 5.
//! - arrays of reals with a real body keep the paper's own rules (Fig. 5, Fig. 13, Fig. 16): this
//!   module is used only when an element or the body's result is not a real.

use super::{plus, zero};
use crate::build::*;
use crate::diag::Diagnostic;
use crate::ir::*;

/// What a route supplies: fresh names, and the body's reverse pass as code.
pub trait Route {
    fn fresh(&mut self) -> &mut Fresh;
    /// A fresh copy of `\x1 … \xm \w. ∇_{Γ',x1,…,xm} e1` seeded with w: the tuple of the cotangents
    /// of the function's free variables Γ' (in the order given to the rule) and of its parameters,
    /// `params` their types.
    fn seeded(&mut self, params: &[Type]) -> Result<Expr, Diagnostic>;
}

/// The function's free variables Γ': each one's type and an expression for its zero's shape.
pub struct Free {
    pub tys: Vec<Type>,
    pub witnesses: Vec<Expr>,
}

/// What a rule adds to the continuation: lets before the call, each array's cotangent share, and
/// Γ''s shares (variables bound by `lets`).
pub struct Shares {
    pub lets: Vec<(Pat, Expr)>,
    pub arrays: Vec<Expr>,
    pub free: Vec<Name>,
}

/// `\x1 … \xm \w. e` peeled: its parameters, w, and e.
fn peel(f: Expr, m: usize) -> (Vec<Name>, Name, Expr) {
    let mut names = vec![];
    let mut e = f;
    for _ in 0..=m {
        match e.kind {
            ExprKind::Lam(_, p_b) => { let (p, b) = *p_b; match p {
                Pat::Var(n, _) => {
                    names.push(n);
                    e = b;
                }
                _ => unreachable!("Route::seeded returns a curried lambda of variables"),
            } },
            _ => unreachable!("Route::seeded returns a curried lambda"),
        }
    }
    let w = names.pop().expect("m + 1 parameters");
    (names, w, e)
}

/// `map (h. let (c1, …, cN) = h in pick) H`.
fn column(h: &Name, width: usize, pick: impl Fn(&[Name]) -> Expr, fr: &mut Fresh) -> Expr {
    let (t, cs): (Name, Vec<Name>) = (fr.name("h"), (0..width).map(|i| fr.name(&format!("c{}", i + 1))).collect());
    prim(Prim::Map, vec![lam(pvar(&t), let_(ptuple(cs.iter().map(pvar).collect()), var(&t), pick(&cs))), var(h)])
}

/// `zip A B = map2 (a, b. (a, b)) A B`.
fn zip(a: Expr, b: Expr, fr: &mut Fresh) -> Expr {
    let (x, y) = (fr.name("a"), fr.name("b"));
    prim(Prim::Map2, vec![lam(pvar(&x), lam(pvar(&y), pair(var(&x), var(&y)))), a, b])
}

/// Γ''s share: `(s1, …, sk) = reduce +^ 0^ (map (h. (γ1, …, γk)) H)`.
fn free_shares(h: &Name, width: usize, free: &Free, lets: &mut Vec<(Pat, Expr)>, fr: &mut Fresh) -> Vec<Name> {
    let k = free.tys.len();
    if k == 0 {
        return vec![];
    }
    let gamma = Type::tuple(free.tys.clone());
    let g = fr.name("G");
    lets.push((pvar(&g), column(h, width, |cs| tuple(cs[..k].iter().map(var).collect()), fr)));
    let (p, q) = (fr.name("p"), fr.name("q"));
    let sum_f = lam(pvar(&p), lam(pvar(&q), plus(&gamma, var(&p), var(&q), fr)));
    let zero_g = tuple(free.tys.iter().zip(&free.witnesses).map(|(t, w)| zero(t, w.clone(), fr)).collect());
    let ss: Vec<Name> = (0..k).map(|i| fr.name(&format!("s{}", i + 1))).collect();
    lets.push((ptuple(ss.iter().map(pvar).collect()), prim(Prim::Reduce, vec![sum_f, zero_g, var(&g)])));
    ss
}

/// Fig. 17's map2 (and A.3's map, `arrays` of one) in the continuation, Z the result's cotangent:
///   H = map2 (p, w. let (x, y) = p in ∇_{Γ',x,y} e1 seeded w) (zip A B) Z
///   A's share = map π_x H, B's = map π_y H, Γ' += reduce +^ 0^ (map π_Γ' H).
pub fn map2(r: &mut dyn Route, arrays: &[Expr], elems: &[Type], z: Expr, free: &Free) -> Result<Shares, Diagnostic> {
    let m = arrays.len();
    let (params, w, grad) = peel(r.seeded(elems)?, m);
    let fr = r.fresh();
    let (f, over) = if m == 1 {
        (lam(pvar(&params[0]), lam(pvar(&w), grad)), arrays[0].clone())
    } else {
        let p = fr.name("p");
        let body = let_(ptuple(params.iter().map(pvar).collect()), var(&p), grad);
        (lam(pvar(&p), lam(pvar(&w), body)), zip(arrays[0].clone(), arrays[1].clone(), fr))
    };
    let h = fr.name("H");
    let mut lets = vec![(pvar(&h), prim(Prim::Map2, vec![f, over, z]))];
    let k = free.tys.len();
    let width = k + m;
    let arrays = (0..m).map(|i| column(&h, width, |cs| var(&cs[k + i]), fr)).collect();
    let free = free_shares(&h, width, free, &mut lets, fr);
    Ok(Shares { lets, arrays, free })
}

/// Fig. 17's reduce over G, split as the route's stages need it: `pre` the forward-pass lets
/// (`A0 = shift1R (scanl f v A)` and `P = zip A0 A`, the "tape"), then the continuation's lets and
/// shares (`scanr` of seeded passes from z, see the module's decisions). `scan_f` is a fresh copy of
/// the function, `v` the initial value, `a` the array, `g` the element type.
pub struct Reduce {
    pub pre: Vec<(Pat, Expr)>,
    tape: Name,
}

pub fn reduce_pre(fr: &mut Fresh, scan_f: Expr, v: Expr, a: Expr) -> Reduce {
    let (a0, p) = (fr.name("A0"), fr.name("P"));
    let pre = vec![
        (pvar(&a0), prim(Prim::Shift1R, vec![prim(Prim::Scanl, vec![scan_f, v, a.clone()])])),
        (pvar(&p), zip(var(&a0), a, fr)),
    ];
    Reduce { pre, tape: p }
}

/// The continuation's part of Fig. 17's reduce, z the result's cotangent (of type g):
///   S = scanr (p, s. let (x, y) = p in let (…, w, _) = s in ∇_{Γ',x,y} e1 seeded w) (0_Γ', z, 0_G) P
///   H = shift1R S; A's share = map π_y H; Γ' += reduce +^ 0^ (map π_Γ' H).
pub fn reduce_cont(r: &mut dyn Route, red: &Reduce, g: &Type, z: Expr, free: &Free) -> Result<Shares, Diagnostic> {
    let (params, w, grad) = peel(r.seeded(&[g.clone(), g.clone()])?, 2);
    let fr = r.fresh();
    let k = free.tys.len();
    let width = k + 2;
    let (p, s) = (fr.name("p"), fr.name("s"));
    let ss: Vec<Name> = (0..width).map(|i| if i == k { w.clone() } else { fr.name("u") }).collect();
    let step = let_(ptuple(params.iter().map(pvar).collect()), var(&p), let_(ptuple(ss.iter().map(pvar).collect()), var(&s), grad));
    let mut seed: Vec<Expr> = free.tys.iter().zip(&free.witnesses).map(|(t, w)| zero(t, w.clone(), fr)).collect();
    seed.push(z.clone());
    seed.push(zero(g, z, fr));
    let (sname, h) = (fr.name("S"), fr.name("H"));
    let mut lets = vec![
        (pvar(&sname), prim(Prim::Scanr, vec![lam(pvar(&p), lam(pvar(&s), step)), tuple(seed), var(&red.tape)])),
        (pvar(&h), prim(Prim::Shift1R, vec![var(&sname)])),
    ];
    let arrays = vec![column(&h, width, |cs| var(&cs[k + 1]), fr)];
    let free = free_shares(&h, width, free, &mut lets, fr);
    Ok(Shares { lets, arrays, free })
}

/// Whether Fig. 17 is needed: an element or the result is not a real (arrays of reals with a real
/// body keep Fig. 5's rules).
pub fn needed(elems: &[Type], result: &Type) -> bool {
    *result != Type::Real || elems.iter().any(|t| *t != Type::Real)
}
