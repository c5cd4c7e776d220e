//! Arrays of tuples as tuples of arrays (structure of arrays), the step of scalar replacement
//! (tuples.rs) for tuples inside arrays. The core's arrays hold reals (§3.2: "no tuples and no nested
//! or jagged arrays"), but an array of tuples of a first-order program is the tuple of its component
//! arrays, so the lowering keeps one array per component:
//! - `[(a, b), (c, d)]` is `([a, c], [b, d])`; `replicate n (x, y)` is `(replicate n x, replicate n y)`;
//! - `build n (\i -> (e1, e2))` is `(build n (\i -> e1), build n (\i -> e2))`, and `map`/`map2` of a
//!   lambda are builds over indexes (`map f a = build (length a) (\i -> f (a ! i))`, §3.3) split the
//!   same way; a lambda over a tuple gets the tuple of its components' elements `(a1 ! i, a2 ! i)`;
//! - `a ! i`, `length a`, `shift1L a`, `shift1R a` act on each component;
//! - a `fold`/`reduce` over tuples (accumulator or elements) is split per component of the
//!   accumulator: a component whose body is `acc_k + t` (t free of every accumulator) is
//!   `z_k + sum (build n (\i -> t))`, as lower.rs does for reals; when a component is not a sum
//!   and every component is a real or an array of reals of any rank (and every element too), the fold is one
//!   loop over the tuple packed into an array of reals (pack.rs `packed_fold`: an array's elements are
//!   more columns, row-major, its shape checked at run time; a `scanl`/`scanr` over tuples the same); integer
//!   components are a loop of their own beside the reals' (pack.rs `int_fold`: an integer has no cotangent),
//!   boolean components ride in one of them as numbers (pack.rs `encode_bools`); else a
//!   component that is not a sum is sequential (§2.3) and refused where it is used.
//!
//! Cost: each component's build repeats the element's lets (the lambda body's) that it needs, so a
//! let both components need is computed twice; nothing else is added.

use super::tuples::{arrays_of_tuples, refuse, wrap, Binds, Shape, Sra};
use crate::build::*;
use crate::diag::Diagnostic;
use crate::ir::*;
use crate::kit::passes::freshen;

/// Whether `t` has a tuple inside an array: a term of this type is split into a tuple of arrays.
pub fn soa(t: &Type) -> bool {
    match t {
        Type::Tuple(ts) => ts.iter().any(soa),
        _ => t.as_array().is_some_and(|a| has_tuple(a)),
    }
}

fn has_tuple(t: &Type) -> bool {
    match t {
        Type::Tuple(_) => true,
        _ => t.as_array().is_some_and(has_tuple),
    }
}

/// The leaves of `s`, left to right (None if a component is refused).
pub(super) fn leaves(s: &Shape, out: &mut Vec<Expr>) -> Result<(), Diagnostic> {
    match s {
        Shape::Leaf(t) => out.push(t.clone()),
        Shape::Tuple(cs) => {
            for c in cs {
                leaves(c, out)?;
            }
        }
        Shape::Refused(d) => return Err((**d).clone()),
        a @ Shape::Absent(_) => leaves(&a.clone().present(), out)?,
    }
    Ok(())
}

/// `s` with each leaf replaced by `f(leaf)`.
pub(super) fn map_leaves(s: Shape, f: &mut impl FnMut(Expr) -> Result<Shape, Diagnostic>) -> Result<Shape, Diagnostic> {
    Ok(match s {
        Shape::Leaf(t) => f(t)?,
        Shape::Tuple(cs) => Shape::Tuple(cs.into_iter().map(|c| map_leaves(c, f)).collect::<Result<_, _>>()?),
        d @ Shape::Refused(_) => d,
        a @ Shape::Absent(_) => map_leaves(a.present(), f)?,
    })
}

/// The shapes `ss` (one structure) as one shape whose leaves are `mk` of their leaves.
fn zip(ss: Vec<Shape>, mk: &impl Fn(Vec<Expr>) -> Expr) -> Result<Shape, Diagnostic> {
    let ss: Vec<Shape> = ss.into_iter().map(Shape::present).collect();
    if let Some(Shape::Tuple(first)) = ss.first() {
        let n = first.len();
        let mut cols: Vec<Vec<Shape>> = (0..n).map(|_| vec![]).collect();
        for s in ss {
            match s {
                Shape::Tuple(cs) if cs.len() == n => cs.into_iter().zip(cols.iter_mut()).for_each(|(c, col)| col.push(c)),
                Shape::Refused(d) => return Err(*d),
                _ => return Err(refuse(crate::diag::Span::NONE, "tuples of different shapes in one array")),
            }
        }
        return Ok(Shape::Tuple(cols.into_iter().map(|col| zip(col, mk)).collect::<Result<_, _>>()?));
    }
    let mut ls = vec![];
    for s in &ss {
        leaves(s, &mut ls)?;
    }
    Ok(Shape::Leaf(mk(ls)))
}

/// An empty array of element type `t`, split.
fn empty(t: &Type) -> Shape {
    match t {
        Type::Tuple(ts) => Shape::Tuple(ts.iter().map(empty).collect()),
        _ => Shape::Leaf(Expr::gen(ExprKind::Array(vec![].into())).with_ty(Type::array(t.clone()))),
    }
}

pub(super) fn length(a: Expr) -> Expr {
    prim(Prim::Length, vec![a]).with_ty(Type::Int)
}

impl Sra<'_> {
    /// `e` split into components if it makes or reads an array of tuples, else None (tuples.rs goes on).
    pub(super) fn soa(&mut self, e: &Expr, binds: &mut Binds) -> Result<Option<Shape>, Diagnostic> {
        use ExprKind as K;
        let touches = |es: &[&Expr]| es.iter().any(|x| soa(&x.ty));
        let out = match &e.kind {
            K::Array(es) if touches(&[e]) => {
                if es.is_empty() {
                    let elem = e.ty.as_array().cloned().unwrap_or(Type::Unknown);
                    return Ok(Some(empty(&elem)));
                }
                let ss = es.iter().map(|x| self.shape(x, binds)).collect::<Result<Vec<_>, _>>()?;
                zip(ss, &|ls| Expr::gen(K::Array(ls.into())))?
            }
            K::Prim(p, args) => match p {
                Prim::Index if touches(&[&args[0]]) => {
                    let a = self.shape(&args[0], binds)?;
                    let i = self.named_leaf(&args[1], binds)?;
                    map_leaves(a, &mut |l| Ok(Shape::Leaf(prim(Prim::Index, vec![l, i.clone()]))))?
                }
                Prim::Length if touches(&[&args[0]]) => {
                    let a = self.shape(&args[0], binds)?;
                    Shape::Leaf(length(self.first(&a, e)?))
                }
                Prim::Shift1L | Prim::Shift1R if touches(&[&args[0]]) => {
                    let a = self.shape(&args[0], binds)?;
                    map_leaves(a, &mut |l| Ok(Shape::Leaf(prim(*p, vec![l]))))?
                }
                Prim::Replicate if touches(&[e]) => {
                    let n = self.named_leaf(&args[0], binds)?;
                    let x = self.shape(&args[1], binds)?;
                    let x = self.name_leaves("x", x, e.span, binds);
                    map_leaves(x, &mut |l| Ok(Shape::Leaf(prim(Prim::Replicate, vec![n.clone(), l]))))?
                }
                Prim::Build if touches(&[e]) => {
                    let n = self.named_leaf(&args[0], binds)?;
                    let (p, body) = lam1(&args[1]).ok_or_else(|| arrays_of_tuples(args[1].span))?;
                    let i = self.fresh.name("i");
                    let mut inner = vec![];
                    self.bind(p, Shape::Leaf(var(&i)), e.span, &mut inner)?;
                    let s = self.shape(body, &mut inner)?;
                    self.builds(n, &i, inner, s)?
                }
                Prim::Map | Prim::Map2 if touches(&args.iter().collect::<Vec<_>>()) || touches(&[e]) => {
                    let arrays = args[1..]
                        .iter()
                        .map(|a| {
                            let s = self.shape(a, binds)?;
                            Ok(self.name_leaves("xs", s, a.span, binds))
                        })
                        .collect::<Result<Vec<_>, Diagnostic>>()?;
                    let n = length(self.first(&arrays[0], e)?);
                    let i = self.fresh.name("i");
                    let mut inner = vec![];
                    let mut f = &args[0];
                    for a in arrays {
                        let (p, body) = lam1(f).ok_or_else(|| arrays_of_tuples(f.span))?;
                        let x = map_leaves(a, &mut |l| Ok(Shape::Leaf(prim(Prim::Index, vec![l, var(&i)]))))?;
                        self.bind(p, x, e.span, &mut inner)?;
                        f = body;
                    }
                    let s = self.shape(f, &mut inner)?;
                    self.builds(n, &i, inner, s)?
                }
                // a boolean accumulator (or an array of booleans) is a one-component tuple, ridden as a number (pack.rs `encode_bools`)
                Prim::Fold | Prim::Reduce if touches(&[&args[2]]) || matches!(args[1].ty, Type::Tuple(_)) || (*p == Prim::Fold && (args[1].ty == Type::Bool || super::pack::bits_rank(&args[1].ty).is_some())) => self.fold(e, &args[0], &args[1], &args[2], binds)?,
                // a scan over tuples: its states are an array of tuples
                Prim::Scanl | Prim::Scanr if touches(&[e, &args[2]]) || matches!(args[1].ty, Type::Tuple(_) | Type::Bool) || super::pack::bits_rank(&args[1].ty).is_some() => self.fold(e, &args[0], &args[1], &args[2], binds)?,
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        Ok(Some(out))
    }

    /// Binds the pattern `p` to the variables `s` (no lets: the body's `acc + t` then reads them).
    fn bind_vars(&mut self, p: &Pat, s: Shape) -> Option<()> {
        match (p, s) {
            (Pat::Var(x, _), s) => {
                self.env.insert(x.id, s);
            }
            (Pat::Tuple(ps, _), Shape::Tuple(cs)) if ps.len() == cs.len() => {
                for (p, c) in ps.iter().zip(cs) {
                    self.bind_vars(p, c)?;
                }
            }
            (Pat::Wild(_) | Pat::Unit(_), _) => {}
            _ => return None,
        }
        Some(())
    }

    /// `e` as a core term named by a variable (or a constant), its lets on `binds`.
    fn named_leaf(&mut self, e: &Expr, binds: &mut Binds) -> Result<Expr, Diagnostic> {
        let s = self.shape(e, binds)?;
        match self.name_leaves("n", s.present(), e.span, binds) {
            Shape::Leaf(t) => Ok(t),
            Shape::Absent(_) => unreachable!("present"),
            Shape::Refused(d) => Err(*d),
            Shape::Tuple(_) => Err(arrays_of_tuples(e.span)),
        }
    }

    /// The first component array of `a` (its length is the array's).
    fn first(&self, a: &Shape, e: &Expr) -> Result<Expr, Diagnostic> {
        let mut ls = vec![];
        leaves(a, &mut ls)?;
        ls.into_iter().next().ok_or_else(|| arrays_of_tuples(e.span))
    }

    /// `build n (\i -> let inner in c)` for each component c of `s` (each copy with fresh binders).
    fn builds(&mut self, n: Expr, i: &Name, inner: Binds, s: Shape) -> Result<Shape, Diagnostic> {
        let mut first = true;
        map_leaves(s, &mut |c| {
            let mut b = prim(Prim::Build, vec![n.clone(), lam(pvar(i), wrap(live(&inner, &c), c))]);
            if !std::mem::take(&mut first) {
                freshen(&mut b, self.fresh);
            }
            Ok(Shape::Leaf(b))
        })
    }

    /// `fold f z a` (or `reduce`) over tuples, per component of the accumulator: `acc_k + t` with t
    /// free of every accumulator is `z_k + sum (build (length a) (\i -> t))` (a sum in any order:
    /// sumOuter, §3.2); any other component has no core form (§2.3) and is refused where used.
    fn fold(&mut self, e: &Expr, f: &Expr, z: &Expr, a: &Expr, binds: &mut Binds) -> Result<Shape, Diagnostic> {
        let (mut acc_tys, mut elem_tys) = (vec![], vec![]);
        leaf_types(&z.ty, &mut acc_tys);
        leaf_types(a.ty.as_array().unwrap_or(&Type::Unknown), &mut elem_tys);
        let z = self.shape(z, binds)?;
        let z = self.name_leaves("z", z, e.span, binds);
        let a = self.shape(a, binds)?;
        let a = self.name_leaves("xs", a, e.span, binds);
        let n = length(self.first(&a, e)?);
        let mut a_leaves = vec![];
        leaves(&a, &mut a_leaves)?;
        // boolean elements ride as numbers too: `build n (\j -> if b ! j then 1.0 else 0.0)` bound
        // before the loop, a column of its elements, each read back as `> 0.5` (pack.rs `encode_bools`)
        let bool_elems: Vec<bool> = elem_tys.iter().map(|t| *t == Type::Bool).collect();
        if a_leaves.len() == elem_tys.len() {
            for (l, t) in a_leaves.iter_mut().zip(elem_tys.iter_mut()).filter(|(_, t)| **t == Type::Bool) {
                let (xb, j) = (self.fresh.name("xs"), self.fresh.name("j"));
                let bit = if_(prim(Prim::Index, vec![l.clone(), var(&j)]).with_ty(Type::Bool), real(1.0), real(0.0)).with_ty(Type::Real);
                binds.push((xb.clone(), at(prim(Prim::Build, vec![n.clone(), lam(pvar(&j), bit)]), e.span).with_ty(Type::array(Type::Real)), e.span));
                (*l, *t) = (var(&xb), Type::Real);
            }
        }
        let (p0, inner_f) = lam1(f).ok_or_else(|| arrays_of_tuples(f.span))?;
        let (p1, body) = lam1(inner_f).ok_or_else(|| arrays_of_tuples(f.span))?;
        // scanr's function takes the element first
        let op = match &e.kind {
            ExprKind::Prim(op, _) => *op,
            _ => Prim::Fold,
        };
        let (pa, px) = if op == Prim::Scanr { (p1, p0) } else { (p0, p1) };
        // the accumulator's components as variables, bound by the lambda's own pattern
        let mut accs = vec![];
        let acc = map_leaves(z.clone(), &mut |_| {
            let x = self.fresh.name("acc");
            let k = accs.len();
            accs.push(x.id);
            // a boolean component rides as a number, 1 for true (pack.rs `encode_bools`): read back
            // as `acc > 0.5` (`real acc > 0.5` if it rides with the integers)
            if acc_tys.get(k) == Some(&Type::Bool) {
                return Ok(Shape::Leaf(prim(Prim::Gt, vec![var(&x).with_ty(Type::Real), real(0.5)]).with_ty(Type::Bool)));
            }
            // an array of booleans likewise, elementwise
            if let Some(r) = acc_tys.get(k).and_then(super::pack::bits_rank) {
                let numbers = (0..r).fold(Type::Real, |t, _| Type::array(t));
                let read = |y: Expr| prim(Prim::Gt, vec![y, real(0.5)]).with_ty(Type::Bool);
                return Ok(Shape::Leaf(super::pack::elementwise(var(&x).with_ty(numbers), r, &read, self.fresh)));
            }
            Ok(Shape::Leaf(var(&x)))
        })?;
        let i = self.fresh.name("i");
        self.bind_vars(pa, acc).ok_or_else(|| arrays_of_tuples(f.span))?;
        let mut inner = vec![];
        let x = if a_leaves.len() == elem_tys.len() && bool_elems.contains(&true) {
            let mut k = 0;
            map_leaves(a, &mut |_| {
                let (l, b) = (a_leaves[k].clone(), bool_elems[k]);
                k += 1;
                let read = prim(Prim::Index, vec![l, var(&i)]);
                Ok(Shape::Leaf(if b { prim(Prim::Gt, vec![read.with_ty(Type::Real), real(0.5)]).with_ty(Type::Bool) } else { read }))
            })?
        } else {
            map_leaves(a, &mut |l| Ok(Shape::Leaf(prim(Prim::Index, vec![l, var(&i)]))))?
        };
        self.bind(px, x, e.span, &mut inner)?;
        let mut s = self.shape(body, &mut inner)?;
        let mut zs = vec![];
        leaves(&z, &mut zs)?;
        let has_bools = acc_tys.iter().any(|t| *t == Type::Bool || super::pack::bits_rank(t).is_some());
        let bools = if has_bools && acc_tys.len() == accs.len() { super::pack::encode_bools(&mut acc_tys, (&mut zs, &accs), (&mut s, &mut inner), self.fresh)? } else { vec![] };
        if acc_tys.iter().any(|t| *t == Type::Int || super::pack::int_rank(t).is_some()) && acc_tys.len() == accs.len() {
            let mut cs = vec![];
            leaves(&s, &mut cs)?;
            // the elements the packed loop of the reals may read: its array holds reals
            // (and arrays of reals, more columns)
            let (real_xs, xr): (Vec<Expr>, Vec<usize>) = a_leaves.iter().zip(&elem_tys).filter_map(|(x, t)| super::pack::elem_rank(t).map(|r| (x.clone(), r))).unzip();
            let mut out = self.int_fold(e, op, &acc_tys, (&zs, &accs, cs), (&real_xs, &xr, &i), &inner, &n, binds)?.into_iter();
            let out = map_leaves(z, &mut |_| Ok(Shape::Leaf(out.next().unwrap_or_else(unit))))?;
            return self.decode_bools(out, &bools, &acc_tys, op, e.span, binds);
        }
        // the elements' ranks (0 for a real), when every element is a real or an array of reals
        let elem_ranks: Option<Vec<usize>> = elem_tys.iter().map(super::pack::elem_rank).collect();
        if let Some(packed) = self.packed_fold(e, (&z, &zs), (&a_leaves, &i), (&accs, &inner, &s), (&acc_tys, elem_ranks.as_deref()), &n, binds)? {
            return self.decode_bools(packed, &bools, &acc_tys, op, e.span, binds);
        }
        if !bools.is_empty() {
            return Err(refuse(e.span, "fold or scan over a tuple with a boolean component whose other components or elements are not reals, arrays of reals or integers: a boolean rides in the one loop as a number (pack.rs), beside the reals, arrays of reals and integers, over elements that are reals or arrays of reals"));
        }
        if matches!(op, Prim::Scanl | Prim::Scanr) {
            // a scan's states have no loop-free form even when its components are sums
            return Err(refuse(e.span, "scan over tuples whose components are not all reals, arrays of reals and integers, or whose elements are not reals or arrays of reals (one loop over an array of reals, the tuple packed into it, takes reals and arrays of reals, and integers are a loop of their own)"));
        }
        let mut k = 0;
        let sequential = refuse(e.span, "sequential fold or reduce with this body on this component: only `acc + t` (t free of the accumulator) is a sum (sumOuter); the paper has no general fold (§2.3)");
        let mut first = true;
        map_leaves(s, &mut |c| {
            let (acc_k, z_k) = (accs.get(k).copied(), zs.get(k).cloned());
            k += 1;
            let (Some(acc_k), Some(z_k)) = (acc_k, z_k) else { return Ok(Shape::Refused(Box::new(sequential.clone()))) };
            let Some(t) = summand(&c, acc_k) else { return Ok(Shape::Refused(Box::new(sequential.clone()))) };
            let t = wrap(live(&inner, t), t.clone());
            if accs.iter().any(|&x| super::bot::mentions(&t, x)) {
                return Ok(Shape::Refused(Box::new(sequential.clone())));
            }
            let mut b = prim(Prim::Build, vec![n.clone(), lam(pvar(&i), t)]);
            if !std::mem::take(&mut first) {
                freshen(&mut b, self.fresh);
            }
            let total = prim(Prim::Sum, vec![b]).with_ty(Type::Real);
            Ok(Shape::Leaf(match z_k.kind {
                ExprKind::Real(r) if r == 0.0 => total,
                _ => prim(Prim::Add, vec![z_k, total]).with_ty(Type::Real),
            }))
        })
    }
}

/// The leaf types of `t`, left to right (tuples taken apart, as a shape's leaves are).
pub(super) fn leaf_types(t: &Type, out: &mut Vec<Type>) {
    match t {
        Type::Tuple(ts) => ts.iter().for_each(|t| leaf_types(t, out)),
        _ => out.push(t.clone()),
    }
}

/// The lets of `inner` that `c` needs (each component's build keeps only its own: the elements'
/// unused components are not read).
pub(super) fn live(inner: &Binds, c: &Expr) -> Binds {
    let mut kept: Vec<&(Name, Expr, crate::diag::Span)> = vec![];
    for b in inner.iter().rev() {
        if super::bot::mentions(c, b.0.id) || kept.iter().any(|k| super::bot::mentions(&k.1, b.0.id)) {
            kept.push(b);
        }
    }
    kept.into_iter().rev().cloned().collect()
}

/// `\p -> body`: the pattern and body.
fn lam1(f: &Expr) -> Option<(&Pat, &Expr)> {
    match &f.kind {
        ExprKind::Lam(_, p_b) => { let (p, b) = &**p_b; Some((p, b)) },
        ExprKind::Ann(x_x) => { let (x, _) = &**x_x; lam1(x) },
        _ => None,
    }
}

/// `t` of `acc + t` or `t + acc` (the variable `acc`).
pub(super) fn summand(c: &Expr, acc: u32) -> Option<&Expr> {
    let mut c = c;
    while let ExprKind::Ann(x_x) = &c.kind {
        let (x, _) = &**x_x;
        c = x;
    }
    let ExprKind::Prim(Prim::Add, ab) = &c.kind else { return None };
    let is_acc = |e: &Expr| matches!(&e.kind, ExprKind::Var(x) if x.id == acc);
    match (is_acc(&ab[0]), is_acc(&ab[1])) {
        (true, _) => Some(&ab[1]),
        (_, true) => Some(&ab[0]),
        _ => None,
    }
}
