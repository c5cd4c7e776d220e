//! Scalar replacement of tuples, the part of the bridge that comes before the lowering
//! (lower.rs): the core language (§3.2, Fig. 7) has no tuples, but a first-order program whose
//! tuples are all *known* (built by a tuple expression, or main's input) needs none. After the kit's
//! inlining, every tuple-typed term is replaced by its components:
//! - `let (a, b) = (e1, e2) in t` becomes `let a = e1 in let b = e2 in t`, and a tuple-typed `let p = …`
//!   names each component (`p` then stands for the tuple of those names);
//! - `fst`/`snd` of a known tuple is its component;
//! - `if c then (a, b) else (d, e)` is split per component into `(if c then a else d, if c then b else e)`,
//!   the branches' own lets hoisted above it (sound: the core's `cond` computes both branches anyway,
//!   §5.2, and every core operation is total);
//! - main's tuple-typed input is split into one parameter per leaf, so the wrapper's gradient keeps
//!   the input's shape; a tuple-typed output stays a tuple of core terms at the top.
//!
//! - an array of tuples becomes a tuple of arrays (structure of arrays, soa.rs): `map (\x -> (f x, g x)) a`
//!   is a tuple of two builds, and `fst`/`snd`/`!` of an array of tuples are projections of the components.
//!
//! - a sum inside the program is the triple (tag, left, right), the side not there `Shape::Absent`;
//!   `case` binds both sides, computes both branches and selects by the tag (beyond the paper: its
//!   core has no sums, §5.2). The absent side is never made a term a branch reads: `if c then inl u
//!   else inr v` has u and v both computed, so its sides are (u, v) whatever c; `inl u` alone has
//!   the tag `true`, and a `case` on a constant tag is its chosen branch.
//!
//! - main's input arrays of tuples are taken apart by `let c = soaGet path x` lets (boundary.rs), each
//!   component array a wrapper input, x's shape the tuple of those components.
//!
//! - main's output arrays of tuples are returned as one flat tuple of their leaves, put back into the
//!   user's shape after bot (boundary.rs).
//!
//! What is left refused: a sum in main's input or output, and a component of a fold over tuples that is not a sum (§2.3), when used and
//! the tuple is not all reals, arrays of reals and integers (a tuple of reals and arrays of reals
//! is packed into one loop's array, its integers a loop of their own: pack.rs), or a real component reads an integer one inside a term that also reads a real one other than as an index of an array of reals, a comparison or a `real` (pack.rs `real_int_reads`, `lift_int_reads`), or the two read each other.

use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use rustc_hash::FxHashMap as HashMap;

/// A term with its tuples split: a leaf is a term of the core (a scalar, Int, Bool or array).
#[derive(Clone)]
pub enum Shape {
    Leaf(Expr),
    Tuple(Vec<Shape>),
    /// A component with no core form (a fold's component that is not a sum): refused where it is
    /// used, so the other components of the same fold still lower.
    Refused(Box<Diagnostic>),
    /// The side of a sum that is not there, of this type: its tag is a constant, so a `case` on it
    /// takes the other branch only, and an `if` between it and a side that is there takes that side
    /// (`choose`), which its branch computes anyway. Made into a term (`default`) only where neither
    /// applies, as an element of an array of sums.
    Absent(Type),
}

impl Shape {
    /// `self` with every absent side made a term of its type (`default`).
    pub(super) fn present(self) -> Shape {
        match self {
            Shape::Absent(t) => default(&t),
            Shape::Tuple(cs) => Shape::Tuple(cs.into_iter().map(Shape::present).collect()),
            s => s,
        }
    }
}

pub(super) fn refuse(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error(span, format!("the core array language (§3.2) has no {what}")).refused()
}

pub(super) fn arrays_of_tuples(span: Span) -> Diagnostic {
    refuse(span, "tuples here: its arrays hold reals, and an array of tuples becomes a tuple of arrays only through literals, replicate, build, map, map2, folds, !, length and shifts (soa.rs), not a scan")
}

pub type Binds = Vec<(Name, Expr, Span)>;

pub(super) struct Sra<'a> {
    pub(super) fresh: &'a mut Fresh,
    /// Tuple-typed variables: the tuple of names (or constants) of their components.
    pub(super) env: HashMap<u32, Shape>,
    /// main's input arrays of tuples taken apart (`let c = soaGet path x`, boundary.rs): bound above
    /// the core term, outside bot's rewriting, where dual-arrays' wrapper finds them.
    pub(super) boundary: Binds,
}

/// `let binds in e`.
pub fn wrap(binds: Binds, mut e: Expr) -> Expr {
    for (x, rhs, span) in binds.into_iter().rev() {
        e = at(let_(pvar(&x), rhs, e), span);
    }
    e
}

fn trivial(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Var(_) | ExprKind::Real(_) | ExprKind::Int(_) | ExprKind::Bool(_))
}

impl Sra<'_> {
    /// `e` in a context that needs a core term (an operand, a lambda body): its lets stay inside.
    pub(super) fn leaf(&mut self, e: &Expr) -> Result<Expr, Diagnostic> {
        let mut binds = vec![];
        match self.shape(e, &mut binds)?.present() {
            Shape::Leaf(t) => Ok(wrap(binds, t)),
            Shape::Tuple(_) | Shape::Absent(_) => Err(arrays_of_tuples(e.span)),
            Shape::Refused(d) => Err(*d),
        }
    }

    /// The components of `e`, the lets they need pushed on `binds` (recursing on the nesting, which
    /// the parser bounds, and looping along let chains: limits.rs).
    pub(super) fn shape(&mut self, e: &Expr, binds: &mut Binds) -> Result<Shape, Diagnostic> {
        use ExprKind as K;
        if let Some(s) = self.soa(e, binds)? {
            return Ok(s);
        }
        Ok(match &e.kind {
            K::Var(x) => self.env.get(&x.id).cloned().unwrap_or_else(|| Shape::Leaf(e.clone())),
            K::Tuple(es) => Shape::Tuple(es.iter().map(|x| self.shape(x, binds)).collect::<Result<_, _>>()?),
            // `a ||| b` is the pair (a, b): its parallelism is an evaluation strategy the core's
            // bulk operations do not need
            K::Par(a_b) => { let (a, b) = &**a_b; Shape::Tuple(vec![self.shape(a, binds)?, self.shape(b, binds)?]) },
            K::Unit => Shape::Tuple(vec![]),
            // a sum `L + R` inside the program is the triple (tag, l, r): the tag a Bool (true for
            // inl), the other side absent (beyond the paper, whose core has no sums, §5.2; as
            // horde-ad's `ifF`, a selection on the primal tag)
            K::Inl(a) | K::Inr(a) => {
                let Type::Sum(lr) = &e.ty else { return Err(refuse(e.span, "sum of this type")) };
                let (l, r) = &**lr;
                let left = matches!(e.kind, K::Inl(_));
                let x = self.shape(a, binds)?;
                let (l, r) = if left { (x, Shape::Absent(r.clone())) } else { (Shape::Absent(l.clone()), x) };
                Shape::Tuple(vec![Shape::Leaf(Expr::gen(K::Bool(left))), l, r])
            }
            // case s of inl x -> a | inr y -> b: both branches computed on the components (as the
            // strict `cond` computes both, §5.2), selected by the tag
            K::Case(c) => {
                let (sc, px, a, py, b) = &**c;
                let Shape::Tuple(mut parts) = self.shape(sc, binds)? else { return Err(refuse(e.span, "case on this")) };
                if parts.len() != 3 {
                    return Err(refuse(e.span, "case on this"));
                }
                let (r, l, tag) = (parts.pop().unwrap(), parts.pop().unwrap(), parts.pop().unwrap());
                let Shape::Leaf(c) = tag else { return Err(refuse(e.span, "case on this")) };
                let (mut ba, mut bb) = (vec![], vec![]);
                self.bind(px, l, e.span, &mut ba)?;
                self.bind(py, r, e.span, &mut bb)?;
                let (sa, sb) = (self.shape(a, &mut ba)?, self.shape(b, &mut bb)?);
                choose(c, (sa, ba), (sb, bb), binds, e.span)?
            }
            K::Fst(x) | K::Snd(x) => match self.shape(x, binds)? {
                Shape::Tuple(mut cs) if cs.len() == 2 => cs.swap_remove(if matches!(e.kind, K::Fst(_)) { 0 } else { 1 }),
                Shape::Refused(d) => return Err(*d),
                _ => return Err(arrays_of_tuples(e.span)),
            },
            K::Ann(x_t) => self.shape(&x_t.0, binds)?,
            K::Let(..) => {
                let mut cur = e;
                while let ExprKind::Let(p_rhs_body) = &cur.kind {
                    let (p, rhs_body) = &**p_rhs_body;
                    let (rhs, body) = rhs_body;
                    let s = self.shape(rhs, binds)?;
                    self.bind(p, s, cur.span, binds)?;
                    cur = body;
                }
                self.shape(cur, binds)?
            }
            ExprKind::If(c_a_b) => {
                let (c, a_b) = &**c_a_b;
                let (a, b) = a_b;
                let c = self.leaf(c)?;
                let (mut ba, mut bb) = (vec![], vec![]);
                let (sa, sb) = (self.shape(a, &mut ba)?, self.shape(b, &mut bb)?);
                choose(c, (sa, ba), (sb, bb), binds, e.span)?
            }
            K::Lam(k, p_body) => {
                let (p, body) = &**p_body;
                // a lambda over tuples is mapped over an array of tuples
                if matches!(p, Pat::Tuple(..)) || matches!(p_ty(e), Some(Type::Tuple(_))) {
                    return Err(arrays_of_tuples(e.span));
                }
                Shape::Leaf(at(Expr::gen(K::Lam(*k, Box::new((p.clone(), self.leaf(body)?)))), e.span).with_ty(e.ty.clone()))
            }
            _ => {
                // each node copied once, its children rebuilt from `e`'s (not from a copy of them)
                let mut out = shell(e);
                for (c, orig) in children_mut(&mut out).into_iter().zip(children(e)) {
                    *c = self.leaf(orig)?;
                }
                Shape::Leaf(out)
            }
        })
    }

    /// Binds `p` to the components `s`: a leaf under its own name, a tuple's non-trivial components
    /// under fresh names (each computed once).
    pub(super) fn bind(&mut self, p: &Pat, s: Shape, span: Span, binds: &mut Binds) -> Result<(), Diagnostic> {
        match (p, s) {
            (Pat::Wild(_) | Pat::Unit(_), _) => {}
            (Pat::Var(x, _), s @ (Shape::Refused(_) | Shape::Absent(_))) => {
                self.env.insert(x.id, s);
            }
            (_, Shape::Refused(d)) => return Err(*d),
            (p, Shape::Absent(t)) => return self.bind(p, default(&t), span, binds),
            (Pat::Var(x, _), Shape::Leaf(t)) => binds.push((x.clone(), t, span)),
            (Pat::Var(x, _), s @ Shape::Tuple(_)) => {
                let named = self.name_leaves(&x.text, s, span, binds);
                self.env.insert(x.id, named);
            }
            (Pat::Tuple(ps, _), Shape::Tuple(cs)) if ps.len() == cs.len() => {
                for (p, c) in ps.iter().zip(cs) {
                    self.bind(p, c, span, binds)?;
                }
            }
            _ => return Err(arrays_of_tuples(span)),
        }
        Ok(())
    }

    pub(super) fn name_leaves(&mut self, base: &str, s: Shape, span: Span, binds: &mut Binds) -> Shape {
        match s {
            Shape::Refused(_) | Shape::Absent(_) => s,
            Shape::Leaf(t) if trivial(&t) => Shape::Leaf(t),
            Shape::Leaf(t) => {
                let x = self.fresh.name(base);
                binds.push((x.clone(), t, span));
                Shape::Leaf(var(&x))
            }
            Shape::Tuple(cs) => Shape::Tuple(cs.into_iter().map(|c| self.name_leaves(base, c, span, binds)).collect()),
        }
    }

    /// main's input pattern with every tuple-typed variable (or `_`) split into one per leaf.
    fn split_input(&mut self, p: &Pat, t: &Type) -> Pat {
        match (p, t) {
            (Pat::Tuple(ps, s), Type::Tuple(ts)) if ps.len() == ts.len() => {
                Pat::Tuple(ps.iter().zip(ts.iter()).map(|(p, t)| self.split_input(p, t)).collect(), *s)
            }
            (Pat::Var(x, s), Type::Tuple(_)) => {
                let (pat, shape) = self.leaves_of(&x.text, t, *s);
                self.env.insert(x.id, shape);
                pat
            }
            (Pat::Wild(s), Type::Tuple(ts)) => Pat::Tuple(ts.iter().map(|t| self.split_input(&Pat::Wild(*s), t)).collect(), *s),
            (Pat::Var(x, s), t) if super::soa::soa(t) => {
                let shape = self.components_of(x, t, *s);
                self.env.insert(x.id, shape);
                p.clone()
            }
            // (named: its components get zero cotangents, as a wildcard's leaves do)
            (Pat::Wild(s), t) if super::soa::soa(t) => {
                let x = self.fresh.name("_x");
                self.split_input(&Pat::Var(x, *s), t)
            }
            _ => p.clone(),
        }
    }

    /// An input `x` of type `t`, an array of tuples: one `let c = soaGet path x` per component array
    /// (boundary.rs), and x's shape made of them as soa.rs makes an array of tuples (a tuple of
    /// arrays, nested as the tuples are).
    fn components_of(&mut self, x: &Name, t: &Type, span: Span) -> Shape {
        let mut shape = Shape::Tuple(vec![]);
        for (path, _) in super::boundary::components(t) {
            let c = self.fresh.name(&format!("{}_{}", x.text, path.iter().map(|k| k.to_string()).collect::<Vec<_>>().join("_")));
            self.boundary.push((c.clone(), super::boundary::get(&path, var(x)), span));
            // the leaf at `path` in the nested tuple of components
            let mut at = &mut shape;
            for (i, k) in path.iter().enumerate() {
                let Shape::Tuple(cs) = at else { unreachable!("built as tuples") };
                while cs.len() <= *k as usize {
                    cs.push(Shape::Tuple(vec![]));
                }
                at = &mut cs[*k as usize];
                if i + 1 == path.len() {
                    *at = Shape::Leaf(var(&c));
                }
            }
        }
        shape
    }

    fn leaves_of(&mut self, base: &str, t: &Type, span: Span) -> (Pat, Shape) {
        match t {
            Type::Tuple(ts) => {
                let (ps, ss) = ts.iter().map(|t| self.leaves_of(base, t, span)).unzip();
                (Pat::Tuple(ps, span), Shape::Tuple(ss))
            }
            _ => {
                let x = self.fresh.name(base);
                if super::soa::soa(t) {
                    let shape = self.components_of(&x, t, span);
                    return (Pat::Var(x, span), shape);
                }
                (Pat::Var(x.clone(), span), Shape::Leaf(var(&x)))
            }
        }
    }
}

/// The parameter type of a lambda, read from its function type.
pub(super) fn p_ty(e: &Expr) -> Option<&Type> {
    match &e.ty {
        Type::Fun(ab) | Type::Lin(ab) => Some(&ab.0),
        _ => None,
    }
}

/// A value of type `t` standing for the side of a sum that is not there, where it must be a term
/// (`Shape::present`): an array is `[]`, so only a constant tag keeps reads out of it.
fn default(t: &Type) -> Shape {
    match t {
        Type::Int => Shape::Leaf(int(0)),
        Type::Bool => Shape::Leaf(Expr::gen(ExprKind::Bool(false))),
        Type::Unit => Shape::Tuple(vec![]),
        Type::Tuple(ts) => Shape::Tuple(ts.iter().map(default).collect()),
        Type::Sum(lr) => Shape::Tuple(vec![Shape::Leaf(Expr::gen(ExprKind::Bool(false))), default(&lr.0), default(&lr.1)]),
        _ if t.as_array().is_some() => Shape::Leaf(Expr::gen(ExprKind::Array(vec![].into())).with_ty(t.clone())),
        _ => Shape::Leaf(real(0.0)),
    }
}

/// `if c then sa else sb` per component (both shapes come from the same type).
/// The shape of a choice on `c` between two sides, each a shape and the bindings it made: one `if`
/// when both are leaves (each side's bindings inside its branch), else split component-wise
/// (`split_if`) with both sides' bindings kept outside.
fn choose(c: Expr, (sa, ba): (Shape, Binds), (sb, bb): (Shape, Binds), binds: &mut Binds, span: Span) -> Result<Shape, Diagnostic> {
    // a constant choice (a case on a sum made by `inl`/`inr`: the other branch would read its
    // absent side) is the side chosen
    if let ExprKind::Bool(left) = c.kind {
        let (s, b) = if left { (sa, ba) } else { (sb, bb) };
        binds.extend(b);
        return Ok(s);
    }
    match (sa, sb) {
        (Shape::Leaf(x), Shape::Leaf(y)) => Ok(Shape::Leaf(at(if_(c, wrap(ba, x), wrap(bb, y)), span))),
        (sa, sb) => {
            binds.extend(ba);
            binds.extend(bb);
            split_if(&c, sa, sb, span)
        }
    }
}

fn split_if(c: &Expr, sa: Shape, sb: Shape, span: Span) -> Result<Shape, Diagnostic> {
    match (sa, sb) {
        // a sum's side that is there on one branch only: that side, whatever the tag (read only
        // when the tag chooses it); an `if` on it and the `[]` of its absent side would be an
        // array of two lengths, which build1's B4 (Fig. 10) puts in one literal, not regular
        (Shape::Absent(_), s) | (s, Shape::Absent(_)) => Ok(s),
        // a sum's tags: `if c then true else false` is c
        (Shape::Leaf(x), Shape::Leaf(y)) if matches!((&x.kind, &y.kind), (ExprKind::Bool(_), ExprKind::Bool(_))) => Ok(Shape::Leaf(match (&x.kind, &y.kind) {
            (ExprKind::Bool(a), ExprKind::Bool(b)) if a == b => x,
            (ExprKind::Bool(true), _) => c.clone(),
            _ => prim(Prim::Not, vec![c.clone()]),
        })),
        (Shape::Leaf(x), Shape::Leaf(y)) => Ok(Shape::Leaf(at(if_(c.clone(), x, y), span))),
        (d @ Shape::Refused(_), _) | (_, d @ Shape::Refused(_)) => Ok(d),
        (Shape::Tuple(xs), Shape::Tuple(ys)) if xs.len() == ys.len() => {
            Ok(Shape::Tuple(xs.into_iter().zip(ys).map(|(x, y)| split_if(c, x, y, span)).collect::<Result<_, _>>()?))
        }
        _ => Err(arrays_of_tuples(span)),
    }
}

/// main (`\p -> body`, typed `S → T`) with its tuples replaced: the split input pattern and the
/// body, a core term, or for a tuple output `let … in (t1, .., tn)` with core terms t_k (nested
/// tuples for a nested output type).
pub fn split_main(main: &Expr, fresh: &mut Fresh) -> Result<(Pat, Binds, Expr), Diagnostic> {
    let ExprKind::Lam(_, pat_body) = &main.kind else {
        return Err(refuse(main.span, "main that is not a function of its input"));
    };
    let (pat, body) = &**pat_body;
    let mut sra = Sra { fresh, env: HashMap::default(), boundary: vec![] };
    let input = p_ty(main).cloned().unwrap_or(Type::Unknown);
    if let Type::Fun(st) = &main.ty {
        for (ty, which) in [(&st.0, "input"), (&st.1, "output")] {
            // The paper's wrapper (§6.5, §7.5 Fig. 21) takes one array of reals per input and gives
            // back each input's cotangent in its shape, and seeds the reverse pass with the output's
            // cotangent: a sum has neither form (its cotangent is one side's, which the input's tag
            // or the output's chooses at run time), so it stays outside, named.
            if has_sum(ty) {
                return Err(refuse(
                    main.span,
                    &format!("sums in main's {which}: a boundary of the paper's wrapper, whose inputs and gradient are arrays (§6.5: \"free variables: x1 : Array sh1 ρ1, …, xn : Array shn ρn\", Fig. 7's types Array sh ρ with ρ ::= R | Int | Bool, no sum), and a sum's cotangent is the side its run-time tag chooses; specialising the gradient program per tag would be one program per tag, as the paper re-differentiates per shape (§3.2: \"one has to re-differentiate and re-compile the program\"), not Fig. 21's one program for every point (sums inside the program are a tag and both sides)"),
                ));
            }
        }
    }
    let pat = sra.split_input(pat, &input);
    let mut binds = vec![];
    let out = sra.shape(body, &mut binds)?;
    // an output holding arrays of tuples, or tuples nested in its tuple: its leaves as one flat
    // tuple, the user's shape made of them after bot (boundary.rs `flat_output`)
    if let Type::Fun(st) = &main.ty {
        let t = &st.1;
        if super::boundary::flat_output(t) {
            let mut ls = vec![];
            super::soa::leaves(&out, &mut ls)?;
            if ls.len() != super::boundary::leaves(t).len() || ls.len() < 2 {
                return Err(refuse(body.span, &format!("output of this shape ({}) split into its component arrays", crate::print::print_type(t, &crate::print::PrintOptions::unicode()))));
            }
            return Ok((pat, sra.boundary, wrap(binds, tuple(ls))));
        }
    }
    Ok((pat, sra.boundary, wrap(binds, flatten(out)?)))
}

fn has_sum(t: &Type) -> bool {
    match t {
        Type::Sum(..) => true,
        Type::Tuple(ts) => ts.iter().any(has_sum),
        _ => t.as_array().is_some_and(has_sum),
    }
}

fn flatten(s: Shape) -> Result<Expr, Diagnostic> {
    Ok(match s.present() {
        Shape::Absent(_) => unreachable!("present"),
        Shape::Leaf(t) => t,
        Shape::Tuple(cs) => tuple(cs.into_iter().map(flatten).collect::<Result<_, _>>()?),
        Shape::Refused(d) => return Err(*d),
    })
}

/// A copy of `e`'s node with units in place of its children (in `ir::each_child` order), so that
/// `Sra::shape` copies each node once: copying the whole subtree at every level was quadratic in the
/// nesting (issue 14: sin-10000 ran out of memory in arrays/bot's transform). Other forms are copied
/// whole.
fn shell(e: &Expr) -> Expr {
    use ExprKind as K;
    let u = || Box::new(Expr::gen(K::Unit));
    let units = |n: usize| (0..n).map(|_| Expr::gen(K::Unit)).collect::<Vec<_>>();
    let kind = match &e.kind {
        K::Prim(p, xs) => K::Prim(*p, units(xs.len()).into()),
        K::Tuple(xs) => K::Tuple(units(xs.len()).into()),
        K::Array(xs) => K::Array(units(xs.len()).into()),
        K::App(..) => K::App(Box::new((*u(), *u()))),
        K::Fst(_) => K::Fst(u()),
        K::Snd(_) => K::Snd(u()),
        K::If(..) => K::If(Box::new((*u(), (*u(), *u())))),
        _ => return e.clone(),
    };
    Expr { kind, span: e.span, ty: e.ty.clone() }
}
