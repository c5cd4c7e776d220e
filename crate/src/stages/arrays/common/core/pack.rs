//! A fold or scan over a tuple packed into the core's one loop (soa.rs's `fold` hands it here):
//! beyond the paper, whose core has no loop (§2.3), as its reference implementation horde-ad packs a
//! tuple accumulator. The reals and arrays of reals of the tuple are one `scanl` over an array of
//! reals (`packed_fold`: one ScanL Delta, fold.rs), an array's elements more columns after the
//! reals (an array of arrays row-major), of a shape fixed by its initial value and checked each
//! step at run time (`packed_row`, `sameLength`); elements that are arrays likewise; integer components are a loop of their own beside it, primal only (`int_fold`), its arrays of integers more columns of its row;
//! boolean components ride in one of the two as numbers, 1 for true (`encode_bools`).

use super::int_reads::{binder_tables, fuse_sized_builds, lift_int_reads, masked_sizes, read_as_reals, real_int_reads, shadow_ints};
use super::lang;
use super::soa::{leaves, length, live, map_leaves, summand};
use super::tuples::{refuse, wrap, Binds, Shape, Sra};
use crate::build::*;
use crate::diag::Diagnostic;
use crate::ir::*;
use crate::kit::passes::freshen;

impl Sra<'_> {
    /// A fold over tuples with a component that is not a sum, or a scan over tuples (§2.3 has no
    /// loop; the core's one loop is `scanl`, fold.rs, whose accumulator is a real or an array of
    /// reals): when every
    /// accumulator component and every element component is a real, the tuple is packed into an
    /// array of reals, exactly (the components are the array's elements, nothing is recomputed):
    /// ```text
    /// fold (\(a1, .., am) (x1, .., xp) -> (t1, .., tm)) (z1, .., zm) (xs1, .., xsp)
    ///   = let r = fold (\acc c -> let a1 = acc ! 0 .. in [t1[c ! 0/xs1 ! i] .., tm[..]])
    ///                  [z1, .., zm] (build n (\i -> [xs1 ! i, .., xsp ! i]))
    ///     in (r ! 0, .., r ! (m-1))
    /// ```
    /// and a scan the same with `scanl`/`scanr`, its component k the column `build (length r) (\i ->
    /// r ! i ! k)`.
    /// One loop for all the components, as the fold is one loop: its Delta is one ScanL node whose
    /// vjp is the tuple body's (fold.rs). An array of reals `v` among the components (beyond the
    /// paper, §2.3, as the packing is: horde-ad packs the same way) is more columns of the row, after
    /// the reals, `[a1, .., am, v ! 0, .., v ! (len - 1)]`, its length `len` the length of its initial
    /// value, known only at run time: the row is built without concatenation (`packed_row`), the
    /// body reads `v` back as `build len (\j -> acc ! (m + j))`, and its new `v` must keep the length,
    /// checked at run time (`sameLength`, located at the fold: a loop keeps its accumulator's
    /// shape, as horde-ad's fold, whose type fixes it). An array of arrays (§3.2's multidimensional
    /// arrays, regular; horde-ad's "regular nested arrays", §8) is its k·w elements row-major, its
    /// dimensions those of its initial value's first rows (`Col::Array`); an element that is an array
    /// is more columns of the packed elements the same way. None when every component is a sum (the
    /// loop-free form) or an element is not a real or an array of reals; any other component is
    /// refused, located.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn packed_fold(&mut self, e: &Expr, (z, zs): (&Shape, &[Expr]), (xs, i): (&[Expr], &Name), (accs, inner, s): (&[u32], &Binds, &Shape), (tys, xr): (&[Type], Option<&[usize]>), n: &Expr, binds: &mut Binds) -> Result<Option<Shape>, Diagnostic> {
        let mut cs = vec![];
        if leaves(s, &mut cs).is_err() || cs.len() != accs.len() {
            return Ok(None);
        }
        let ExprKind::Prim(op, _) = &e.kind else { return Ok(None) };
        let scan = matches!(op, Prim::Scanl | Prim::Scanr);
        let sums = !scan && cs.iter().enumerate().all(|(k, c)| summand(c, accs[k]).is_some_and(|t| !accs.iter().any(|&x| super::bot::mentions(&wrap(live(inner, t), t.clone()), x))));
        let Some(xr) = xr else { return Ok(None) };
        if sums || zs.len() != accs.len() || tys.len() != accs.len() || !tys.iter().all(|t| *t == Type::Real || t.as_array().is_some()) {
            return Ok(None);
        }
        if let Some(t) = tys.iter().find(|t| **t != Type::Real && rank(t).is_none()) {
            let t = crate::print::print_type(t, &crate::print::PrintOptions::unicode());
            return Err(refuse(e.span, &format!("fold or scan over a tuple with a component of type {t}: its one loop runs over an array of reals packing the tuple's reals and arrays of reals of any rank (pack.rs), and this component is none of them")));
        }
        let arr = Type::array(Type::Real);
        let (scalars, vectors): (Vec<usize>, Vec<usize>) = (0..tys.len()).partition(|&k| tys[k] == Type::Real);
        let shapes = self.shapes(e.span, &vectors, (zs, tys), binds);
        let cols = columns(&(0..tys.len()).collect::<Vec<_>>(), &scalars, &vectors, &shapes);
        let pieces: Vec<Piece> = vectors.iter().zip(&shapes).map(|(&k, shape)| Piece { acc: accs[k], z: zs[k].clone(), c: cs[k].clone(), shape: shape.clone() }).collect();
        let pick = |ks: &[usize], from: &[Expr]| ks.iter().map(|&k| from[k].clone()).collect::<Vec<Expr>>();
        let (szs, saccs) = (pick(&scalars, zs), scalars.iter().map(|&k| accs[k]).collect::<Vec<u32>>());
        let scs = Expr::gen(ExprKind::Array((pick(&scalars, &cs)).into())).with_ty(arr);
        let Some(r) = self.packed_loop(*op, e.span, (&szs, &saccs, scs), &pieces, (xs, xr, i), inner.clone(), n, binds) else { return Ok(None) };
        // each component read back: a real's column (a scan's `build (length r) (\i -> r ! i ! k)`),
        // an array's columns (`build len (\j -> r ! (off + j))`, a scan's per state)
        let outs: Vec<Expr> = cols
            .iter()
            .map(|(_, col)| match col {
                Col::Real(q) => self.component(&r, *q, Type::Real, (scan, false), n),
                Col::Array(..) => self.array_component(&Type::Real, &r, col, (scan, false), n),
            })
            .collect();
        let mut outs = outs.into_iter();
        Ok(Some(map_leaves(z.clone(), &mut |_| Ok(Shape::Leaf(outs.next().unwrap_or_else(unit))))?))
    }

    /// The loop of `packed_fold`: `let r = op (\acc c -> let a_k = acc ! k .. in let inner in cs) [zs]
    /// (build n (\i -> [xs1 ! i, ..]))` pushed on `binds`, the elements' reads `xs_l ! i` made `c ! l`;
    /// r's name, or None when the body reads the elements otherwise.
    /// With array components (`pieces`), the row is the reals, then each array's elements (`packed_row`).
    #[allow(clippy::too_many_arguments)]
    fn packed_loop(&mut self, op: Prim, span: crate::diag::Span, (zs, accs, cs): (&[Expr], &[u32], Expr), pieces: &[Piece], (xs, xr, i): (&[Expr], &[usize], &Name), inner: Binds, n: &Expr, binds: &mut Binds) -> Option<Name> {
        let arr = Type::array(Type::Real);
        // elements that are arrays (rank > 0, a fold over a matrix's rows): more columns of the
        // packed elements after the reals, their dimensions those of the first element (regular,
        // §3.2), as `iota` bound before the loop (the body reads no length of a differentiated array)
        let (reals, arrays): (Vec<usize>, Vec<usize>) = (0..xs.len()).partition(|&l| xr.get(l).copied().unwrap_or(0) == 0);
        let x_dims: Vec<Vec<Expr>> = arrays
            .iter()
            .map(|&l| {
                let first = prim(Prim::Index, vec![xs[l].clone(), int(0)]).with_ty(nested(&Type::Real, xr[l]));
                self.shapes(span, &[0], (&[first], &[nested(&Type::Real, xr[l])]), binds).remove(0).iter().map(|s| length(var(s))).collect()
            })
            .collect();
        let x_lens: Vec<Expr> = x_dims.iter().map(|d| size(d)).collect();
        // each array of elements checked regular before the loop, `sameShape [n, d1, .., dr] xs`
        // (every element has the first one's dimensions: the packed elements read each at them), its
        // result dr the bound of the innermost dimension in the packed elements (a condition, not a
        // size: inside a map a let-bound Int is a per-row array, which a size cannot index)
        let x_bounds: Vec<Vec<Expr>> = arrays
            .iter()
            .zip(&x_dims)
            .map(|(&l, d)| {
                let ds = Expr::gen(ExprKind::Array(std::iter::once(length(xs[l].clone())).chain(d.iter().cloned()).collect())).with_ty(Type::array(Type::Int));
                let c = self.fresh.name("len");
                binds.push((c.clone(), at(lang::same_shape(ds, xs[l].clone()), span).with_ty(Type::Int), span));
                d[..d.len() - 1].iter().cloned().chain(std::iter::once(var(&c))).collect()
            })
            .collect();
        let (accv, cv) = (self.fresh.name("acc"), self.fresh.name("c"));
        let m = zs.len();
        let dims: Vec<Vec<Expr>> = pieces.iter().map(|p| p.shape.iter().map(|s| length(var(s))).collect()).collect();
        let lens: Vec<Expr> = dims.iter().map(|d| size(d)).collect();
        let cs = if pieces.is_empty() { cs } else { self.packed_row(&Type::Real, cs, pieces.iter().map(|p| p.c.clone()).collect(), &dims, Check::Step(span)) };
        // the elements' reads `xs_l ! i` become `c ! l` (an array element its columns, `read_col`)
        let mut body = wrap(inner, cs);
        let mut stack = vec![&mut body];
        while let Some(y) = stack.pop() {
            if let ExprKind::Prim(Prim::Index, ab) = &y.kind {
                let hit = matches!(&ab[1].kind, ExprKind::Var(v) if v.id == i.id);
                if let Some(l) = xs.iter().position(|x| hit && same_var(x, &ab[0])) {
                    *y = match arrays.iter().position(|&a| a == l) {
                        None => prim(Prim::Index, vec![var(&cv), int(reals.iter().position(|&q| q == l).unwrap_or(l) as i64)]).with_ty(Type::Real),
                        Some(p) => self.read_col(&Type::Real, var(&cv), &Col::Array(offset(reals.len(), &x_lens[..p]), x_dims[p].clone())),
                    };
                    continue;
                }
            }
            stack.extend(children_mut(y));
        }
        if super::bot::mentions(&body, i.id) {
            return None;
        }
        // an array component read back from its columns: `build len (\j -> acc ! (off + j))`, an
        // array of arrays row-major (`read_col`)
        for (p, piece) in pieces.iter().enumerate().rev() {
            let v = self.read_col(&Type::Real, var(&accv), &Col::Array(offset(m, &lens[..p]), dims[p].clone()));
            body = let_(pvar(&Name::new("acc", piece.acc)), v, body);
        }
        for (k, &a) in accs.iter().enumerate().rev() {
            let name = Name::new("acc", a);
            body = let_(pvar(&name), prim(Prim::Index, vec![var(&accv), int(k as i64)]).with_ty(Type::Real), body);
        }
        let (q0, q1) = if op == Prim::Scanr { (&cv, &accv) } else { (&accv, &cv) };
        let f = lam(pvar(q0), lam(pvar(q1), body)).with_ty(Type::fun(arr.clone(), Type::fun(arr.clone(), arr.clone())));
        let z0 = Expr::gen(ExprKind::Array(zs.to_vec().into())).with_ty(arr.clone());
        let z_dims: Vec<Vec<Expr>> = pieces.iter().map(|p| outer_dims(&Type::Real, &p.z, p.shape.len())).collect();
        let z0 = if pieces.is_empty() { z0 } else { self.packed_row(&Type::Real, z0, pieces.iter().map(|p| p.z.clone()).collect(), &z_dims, Check::Regular(span)) };
        let j = self.fresh.name("i");
        let row = Expr::gen(ExprKind::Array(reals.iter().map(|&l| prim(Prim::Index, vec![xs[l].clone(), var(&j)]).with_ty(Type::Real)).collect())).with_ty(arr.clone());
        let row = if arrays.is_empty() { row } else { self.packed_row(&Type::Real, row, arrays.iter().map(|&l| prim(Prim::Index, vec![xs[l].clone(), var(&j)]).with_ty(nested(&Type::Real, xr[l]))).collect(), &x_dims, Check::Bounds(x_bounds)) };
        let packed = prim(Prim::Build, vec![n.clone(), lam(pvar(&j), row)]).with_ty(Type::array(arr.clone()));
        let r = self.fresh.name("r");
        let r_ty = if matches!(op, Prim::Scanl | Prim::Scanr) { Type::array(arr.clone()) } else { arr.clone() };
        binds.push((r.clone(), at(prim(op, vec![f, z0, packed]), span).with_ty(r_ty), span));
        Some(r)
    }

    /// The packed row of the reals `scalars` (an array literal, m of them) and the arrays `vs` of
    /// dimensions `dims` (`length` terms, outermost first), without concatenation (the core has none: §3.2):
    /// `build (m + len1 + ..) (\j -> if j < m then s ! j else if j < m + len1 then v1 ! (j - m) else ..)`
    /// (the strict `cond` computes every branch, each index total: sound, §5.2). An array of arrays
    /// (a multidimensional array, §3.2: regular) is its elements row-major, `k·w` columns read
    /// `v ! (q / w) ! (q mod w)` at `q = j - off` (the paper's index terms have integer division,
    /// §3.3's `i div 2`), each divisor at least 1 (an empty dimension has no columns, and its
    /// division is computed anyway, strictly). `check` (`Check`): a body's new row, whose arrays must
    /// keep their shapes, checked at run time where the loop is: the bounds inside the lambda are the
    /// checked `sameLength len (length v)` (the size keeps the `length` terms, which bot reads at
    /// i = 0 inside a map), so the last array is bounded too; an array of arrays is checked whole,
    /// every row (`sameShape [k, w] v`, whose result `w` bounds and divides: regular, §3.2, as these
    /// total reads would read a short row as zeros), and so is an initial row's.
    fn packed_row(&mut self, elem_ty: &Type, scalars: Expr, vs: Vec<Expr>, dims: &[Vec<Expr>], check: Check) -> Expr {
        let m = match &scalars.kind {
            ExprKind::Array(es) => es.len(),
            _ => 0,
        };
        let arr = Type::array(elem_ty.clone());
        let mut lets = vec![];
        let name = |x: Expr, what: &str, ty: Type, fresh: &mut Fresh, lets: &mut Vec<(Name, Expr)>| match x.kind {
            ExprKind::Var(_) => x,
            _ => {
                let v = fresh.name(what);
                lets.push((v.clone(), x.with_ty(ty)));
                var(&v)
            }
        };
        let s = name(scalars, "s", arr.clone(), self.fresh, &mut lets);
        let vs: Vec<Expr> = vs.into_iter().zip(dims).map(|(v, d)| name(v, "v", nested(elem_ty, d.len()), self.fresh, &mut lets)).collect();
        let lens: Vec<Expr> = dims.iter().map(|d| size(d)).collect();
        // whether the last array's bound is used, always met: a checked length that nothing else
        // reads (an array of arrays' checked innermost dimension is read by its divisors)
        let checked = !matches!(check, Check::Regular(_));
        let bounds: Vec<Vec<Expr>> = match check {
            Check::Bounds(b) => b,
            Check::Regular(span) | Check::Step(span) => dims
                .iter()
                .zip(&vs)
                .map(|(d, v)| {
                    if d.len() > 1 {
                        // every row checked (`sameShape`, its result the innermost dimension), not
                        // only the first: the reads below are total (§5.2), so a short row would be
                        // read as zeros
                        let l = self.fresh.name("len");
                        let ds = Expr::gen(ExprKind::Array(d.to_vec().into())).with_ty(Type::array(Type::Int));
                        lets.push((l.clone(), at(lang::same_shape(ds, v.clone()), span).with_ty(Type::Int)));
                        return d[..d.len() - 1].iter().cloned().chain(std::iter::once(var(&l))).collect();
                    }
                    if matches!(check, Check::Regular(_)) {
                        return d.to_vec();
                    }
                    // a vector: its length
                    let l = self.fresh.name("len");
                    lets.push((l.clone(), at(lang::same_length(d[0].clone(), length(v.clone())), span).with_ty(Type::Int)));
                    vec![var(&l)]
                })
                .collect(),
        };
        let sizes: Vec<Expr> = bounds.iter().map(|d| size(d)).collect();
        let j = self.fresh.name("j");
        let lt = |b: Expr| prim(Prim::Lt, vec![var(&j), b]).with_ty(Type::Bool);
        // v's element at q = j - off: `v ! q`, or row-major `v ! (q / (w1·..)) ! (q / (w2·..) mod w1) .. ! (q mod wr)`
        let mut from = |v: &Expr, off: Expr, d: &[Expr], lets: &mut Vec<(Name, Expr)>| {
            let q = prim(Prim::Sub, vec![var(&j), off]).with_ty(Type::Int);
            if d.len() == 1 {
                return prim(Prim::Index, vec![v.clone(), q]).with_ty(elem_ty.clone());
            }
            let mut x = v.clone();
            for k in 0..d.len() {
                let below = size(&d[k + 1..]);
                let at_k = if k + 1 == d.len() { q.clone() } else { prim(Prim::Div, vec![q.clone(), name(at_least_one(below), "w", Type::Int, self.fresh, lets)]).with_ty(Type::Int) };
                let at_k = if k == 0 { at_k } else { prim(Prim::Mod, vec![at_k, name(at_least_one(d[k].clone()), "w", Type::Int, self.fresh, lets)]).with_ty(Type::Int) };
                x = prim(Prim::Index, vec![x, at_k]).with_ty(nested(elem_ty, d.len() - k - 1));
            }
            x
        };
        let mut elem = if *elem_ty == Type::Int { int(0) } else { real(0.0) };
        for p in (0..vs.len()).rev() {
            let last = p + 1 == vs.len();
            let v = from(&vs[p], offset(m, &sizes[..p]), &bounds[p], &mut lets);
            // the last array's bound, always met, is there only to use its checked length
            if !last || checked {
                elem = if_(lt(offset(m, &sizes[..=p])), v, elem).with_ty(elem_ty.clone());
            } else {
                elem = v;
            }
        }
        if m > 0 {
            elem = if_(lt(int(m as i64)), prim(Prim::Index, vec![s, var(&j)]).with_ty(elem_ty.clone()), elem).with_ty(elem_ty.clone());
        }
        let mut row = prim(Prim::Build, vec![offset(m, &lens), lam(pvar(&j), elem)]).with_ty(arr.clone());
        for (x, rhs) in lets.into_iter().rev() {
            row = let_(pvar(&x), rhs, row).with_ty(arr.clone());
        }
        row
    }

    /// A fold or scan over a tuple with integer components (beyond the paper, §2.3, as fold.rs): an
    /// integer carries no cotangent, so the integer components are a loop of their own, primal only
    /// (D′ keeps it: its accumulator `Array Int` has no Delta), and the real components stay one
    /// packed loop (`packed_loop`: one ScanL Delta, fold.rs) or, in a fold, their sums:
    /// ```text
    /// fold (\(a, m) x -> (t, u)) (z, m0) xs
    ///   = let r  = scanl (\acc c -> let a = acc ! 0 in [t[c ! 0/x]]) [z] (build k (\i -> [xs ! i]))
    ///     let ri = fold (\acc i -> let m = acc ! 0; a = r ! i ! 0; x = xs ! i in [u]) [m0] (build k (\i -> i))
    ///     in (r ! k ! 0, ri ! 0)
    /// ```
    /// The integer loop reads each element by its index, and the real components' states (`r ! i`,
    /// the accumulator element i meets; `r ! (i + 1)` in a scanr) only when it uses them: else the
    /// reals are a plain packed fold or their sums. The other way round, a real component that reads
    /// an integer one as `real m` reads it from a column of the packed elements, `real (ri ! i ! q)`
    /// of the integer loop's states, which then runs first; any other real or boolean term of the
    /// integers alone (`xs ! m`, `m > 0`) likewise, a column of its values (`lift_int_reads`). An
    /// array of reals among the components is packed with the reals (more columns, `packed_fold`),
    /// read as a real is; an array of integers (any rank) with the integers, more columns of their
    /// row after the scalars (`packed_row` over Int, its shape checked each step). The two reading each other: the integers the reals read ride in the reals' row as real copies
    /// (`shadowed`), a step or read with no real term (`div`, `mod`) made on them brought back by
    /// §2's `round`; so too when a real reads an integer inside a term that also reads a real one or
    /// a binder of the body in a form with no column (`real ((j + k) mod 2)` under a build of a size
    /// that is not fixed, an inner fold over `build k f`); an array of integers among them rides as
    /// an array of reals of its shape, more columns, brought back whole (`shadow_ints`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn int_fold(&mut self, e: &Expr, op: Prim, tys: &[Type], (zs, accs, mut cs): (&[Expr], &[u32], Vec<Expr>), (xs, xr, i): (&[Expr], &[usize], &Name), inner: &Binds, n: &Expr, binds: &mut Binds) -> Result<Vec<Expr>, Diagnostic> {
        use super::bot::mentions;
        const WHY: &str = "the integers are a loop of their own, beside one loop over an array of reals packing the real components (pack.rs)";
        // what is left when the integers the reals read cannot ride as real copies (`shadowed`)
        const COPIES: &str = "with a step or a read that has no form on their real copies (a `let rec` left in the body): the integers are a loop of their own, beside one loop over an array of reals packing the real components (pack.rs; Fig. 8: an array holds one element type), and the integers the reals read otherwise ride in that row as real copies (an array of integers an array of reals of its shape, fixed by its start and checked each step: §5's static shapes; a constant moved by conditions, its Delta zero: §5.2, a real reaches an integer only \"through the discrete, integral results\", not differentiated), brought back by §2's `round : R → Z` where a step or a read needs an integer";
        if let Some(t) = tys.iter().find(|t| !matches!(t, Type::Int | Type::Real) && rank(t).is_none() && int_rank(t).is_none()) {
            let t = crate::print::print_type(t, &crate::print::PrintOptions::unicode());
            return Err(refuse(e.span, &format!("fold or scan over a tuple with an integer component beside a component of type {t}: {WHY}, and this component is none of them")));
        }
        // `reals`: the components of the packed loop, reals and arrays of reals (more columns)
        let (ints, reals): (Vec<usize>, Vec<usize>) = (0..tys.len()).partition(|&k| tys[k] == Type::Int || int_rank(&tys[k]).is_some());
        let (scalars, vectors): (Vec<usize>, Vec<usize>) = reals.iter().partition(|&&k| tys[k] == Type::Real);
        let shapes = self.shapes(e.span, &vectors, (zs, tys), binds);
        let cols = columns(&reals, &scalars, &vectors, &shapes);
        // the integers' row likewise: its scalars, then its arrays of integers as more columns
        let (iscalars, ivectors): (Vec<usize>, Vec<usize>) = ints.iter().partition(|&&k| tys[k] == Type::Int);
        let ints: Vec<usize> = iscalars.iter().chain(&ivectors).copied().collect();
        let ishapes = self.shapes(e.span, &ivectors, (zs, tys), binds);
        let icols = columns(&ints, &iscalars, &ivectors, &ishapes);
        let arr = |cs: &[Expr], ks: &[usize], t: Type| Expr::gen(ExprKind::Array(ks.iter().map(|&k| cs[k].clone()).collect())).with_ty(Type::array(t));
        let whole = |cs: &[Expr], ks: &[usize], t: Type| wrap(live(inner, &arr(cs, ks, Type::Real)), arr(cs, ks, t));
        let reads = |x: &Expr, ks: &[usize]| ks.iter().any(|&k| mentions(x, accs[k]));
        let scan = matches!(op, Prim::Scanl | Prim::Scanr);
        let states = reads(&whole(&cs, &ints, Type::Int), &reals);
        let reals_read_ints = !reals.is_empty() && reads(&whole(&cs, &reals, Type::Real), &ints);
        if states && reals_read_ints {
            if let Some(out) = self.shadowed(e, op, tys, (zs, accs, &cs), (xs, xr, i), inner, n, (&ints, &reals), binds) {
                return out;
            }
            return Err(refuse(e.span, &format!("fold or scan over a tuple whose real and integer components read each other, {COPIES}")));
        }
        let mut out: Vec<Expr> = (0..tys.len()).map(|_| unit()).collect();
        // the originals, for the real copies when a read has no column (below)
        let (cs0, inner0, xs0, xr0, binds0) = (cs.clone(), inner, xs, xr, binds.len());
        // the reals reading the integers: the integer loop first, its states as columns of reals
        let mut inner = inner.clone();
        let (mut xs, mut xr) = (xs.to_vec(), xr.to_vec());
        if reals_read_ints {
            let ri = self.int_loop(e, op, (zs, accs, &cs), (&icols, &cols), (i, &inner), n, (None, true), binds, &mut out);
            let mut cols = vec![];
            for (q, &k) in iscalars.iter().enumerate() {
                let (col, j) = (self.fresh.name("ri"), self.fresh.name("i"));
                let state = prim(Prim::Index, vec![prim(Prim::Index, vec![var(&ri), state_met(op, &j)]).with_ty(Type::array(Type::Int)), int(q as i64)]).with_ty(Type::Int);
                let body = prim(Prim::ToReal, vec![state]).with_ty(Type::Real);
                binds.push((col.clone(), at(prim(Prim::Build, vec![n.clone(), lam(pvar(&j), body)]), e.span).with_ty(Type::array(Type::Real)), e.span));
                cols.push((accs[k], col.clone()));
                xs.push(var(&col));
                xr.push(0);
            }
            // any other read of the integers by the reals: each largest real or boolean term that reads
            // no real component, a column of its value per element computed from the integers' states
            // (a boolean 1.0 for true, read back `> 0.5`), as `real m` is (`lift_int_reads`)
            let (int_ids, real_ids): (Vec<u32>, Vec<u32>) = (ints.iter().map(|&k| accs[k]).collect(), reals.iter().map(|&k| accs[k]).collect());
            let mut lifted = vec![];
            // an integer read meeting a real component or a binder of the body (`v ! k`, `j < k`)
            // made a real term of the integers' values first (`real_int_reads`), which is lifted
            let used: Vec<u32> = live(&inner, &arr(&cs, &reals, Type::Real)).iter().map(|b| b.0.id).collect();
            // a build whose size reads the integers met by its consumer: `map`, `length` and `!` of it
            // fused (`fuse_sized_builds`), so that a sum of it is a sum of a build
            let outer = inner.clone();
            for b in inner.iter_mut().filter(|b| used.contains(&b.0.id)) {
                fuse_sized_builds(&mut b.1, &outer, &int_ids, self.fresh);
            }
            for &k in &reals {
                fuse_sized_builds(&mut cs[k], &inner, &int_ids, self.fresh);
            }
            // a sum of a build whose size reads the integers: a build of their largest size, masked
            // (`masked_sizes`), that size computed from the integers' states before the loop
            let mut sizes = vec![];
            let outer = inner.clone();
            for b in inner.iter_mut().filter(|b| used.contains(&b.0.id)) {
                masked_sizes(&mut b.1, &outer, (&int_ids, &real_ids, i.id), &mut sizes, self.fresh);
            }
            for &k in &reals {
                masked_sizes(&mut cs[k], &inner, (&int_ids, &real_ids, i.id), &mut sizes, self.fresh);
            }
            for (shape, most_of, binders) in sizes {
                // `fold (\m j -> [max (m ! 0) size_j]) [0] (iota n)`, size_j the size at the state
                // element j meets, then `shape = iota (that ! 0)`, whose length is the build's size;
                // a size reading binders j1 .. jr of builds of fixed sizes s1 .. sr the largest over
                // their ranges too, one fold over `iota (n * s1 * .. * sr)`, its index e read as
                // the element e / (s1 * .. * sr) and the binders row-major (`e / (s2 * ..) mod s1` ..)
                let (j, m, top) = (self.fresh.name("i"), self.fresh.name("acc"), self.fresh.name("top"));
                let e0 = if binders.is_empty() { j.clone() } else { self.fresh.name("e") };
                let mut u = super::bot::subst(&most_of, i.id, &var(&j).with_ty(Type::Int), self.fresh);
                let ranges: Vec<Expr> = binders.iter().map(|(_, s)| s.clone()).collect();
                for (k, icol) in icols.iter().rev() {
                    if mentions(&u, accs[*k]) {
                        let state = self.read_col(&Type::Int, prim(Prim::Index, vec![var(&ri), state_met(op, &j)]).with_ty(Type::array(Type::Int)), icol);
                        u = let_(pvar(&Name::new("acc", accs[*k])), state, u).with_ty(Type::Int);
                    }
                }
                let arr_int = Type::array(Type::Int);
                let ev = var(&e0).with_ty(Type::Int);
                let div = |a: Expr, b: Expr| prim(Prim::Div, vec![a, b]).with_ty(Type::Int);
                for (d, (x, _)) in binders.iter().enumerate() {
                    let at_d = div(ev.clone(), size(&ranges[d + 1..]));
                    let at_d = prim(Prim::Mod, vec![at_d, ranges[d].clone()]).with_ty(Type::Int);
                    u = let_(pvar(x), at_d, u).with_ty(Type::Int);
                }
                if !binders.is_empty() {
                    u = let_(pvar(&j), div(ev.clone(), size(&ranges)), u).with_ty(Type::Int);
                }
                let most = prim(Prim::Max, vec![prim(Prim::Index, vec![var(&m).with_ty(arr_int.clone()), int(0)]).with_ty(Type::Int), u]).with_ty(Type::Int);
                let f = lam(pvar(&m), lam(pvar(&e0), Expr::gen(ExprKind::Array(vec![most].into())).with_ty(arr_int.clone()))).with_ty(Type::fun(arr_int.clone(), Type::fun(Type::Int, arr_int.clone())));
                let q = self.fresh.name("i");
                let count = ranges.iter().fold(n.clone(), |c, r| prim(Prim::Mul, vec![c, r.clone()]).with_ty(Type::Int));
                let idx = prim(Prim::Build, vec![count, lam(pvar(&q), var(&q))]).with_ty(arr_int.clone());
                let z0 = Expr::gen(ExprKind::Array(vec![int(0)].into())).with_ty(arr_int.clone());
                binds.push((top.clone(), at(prim(Prim::Fold, vec![f, z0, idx]), e.span).with_ty(arr_int.clone()), e.span));
                let q = self.fresh.name("j");
                // (a padded size: inside a map, bot pads it to the largest over the map's rows, lang.rs)
                let largest = super::lang::pad_size(prim(Prim::Index, vec![var(&top), int(0)]).with_ty(Type::Int)).with_ty(Type::Int);
                let iota = prim(Prim::Build, vec![largest, lam(pvar(&q), var(&q))]).with_ty(arr_int.clone());
                binds.push((shape, at(iota, e.span).with_ty(arr_int), e.span));
            }
            let outer = inner.clone();
            for b in inner.iter_mut().filter(|b| used.contains(&b.0.id)) {
                real_int_reads(&mut b.1, &outer, (&int_ids, &real_ids), false, self.fresh);
            }
            for &k in &reals {
                real_int_reads(&mut cs[k], &inner, (&int_ids, &real_ids), false, self.fresh);
            }
            for &k in &reals {
                lift_int_reads(&mut cs[k], &inner, (&int_ids, &real_ids), i, &mut lifted, self.fresh);
            }
            let used: Vec<u32> = live(&inner, &arr(&cs, &reals, Type::Real)).iter().map(|b| b.0.id).collect();
            let outer = inner.clone();
            for b in inner.iter_mut().filter(|b| used.contains(&b.0.id)) {
                lift_int_reads(&mut b.1, &outer, (&int_ids, &real_ids), i, &mut lifted, self.fresh);
            }
            for (col, t, ty) in lifted {
                let j = self.fresh.name("i");
                let at_j = state_met(op, &j);
                let mut body = super::bot::subst(&t, i.id, &var(&j).with_ty(Type::Int), self.fresh);
                for (k, icol) in icols.iter().rev() {
                    if mentions(&body, accs[*k]) {
                        let state = self.read_col(&Type::Int, prim(Prim::Index, vec![var(&ri), at_j.clone()]).with_ty(Type::array(Type::Int)), icol);
                        body = let_(pvar(&Name::new("acc", accs[*k])), state, body).with_ty(ty.clone());
                    }
                }
                if ty == Type::Bool {
                    body = if_(body, real(1.0), real(0.0)).with_ty(Type::Real);
                }
                binds.push((col.clone(), at(prim(Prim::Build, vec![n.clone(), lam(pvar(&j), body)]), e.span).with_ty(Type::array(Type::Real)), e.span));
                xs.push(var(&col));
                xr.push(0);
            }
            // a `real` of the integers and one binder j of a build of a fixed size (`(j + k) mod 3`):
            // a table of its values per element and j, a row of the packed elements (`binder_tables`)
            let mut tables = vec![];
            let used: Vec<u32> = live(&inner, &arr(&cs, &reals, Type::Real)).iter().map(|b| b.0.id).collect();
            let outer = inner.clone();
            for b in inner.iter_mut().filter(|b| used.contains(&b.0.id)) {
                binder_tables(&mut b.1, &outer, (&int_ids, &real_ids), i, &mut tables, self.fresh);
            }
            for &k in &reals {
                binder_tables(&mut cs[k], &inner, (&int_ids, &real_ids), i, &mut tables, self.fresh);
            }
            for (col, js, t) in tables {
                // `build n (\e -> let acc_k = state e in build s1 (\j1 -> .. build sr (\jr -> t)))`
                let q = self.fresh.name("i");
                let mut body = super::bot::subst(&t, i.id, &var(&q).with_ty(Type::Int), self.fresh);
                for (k, icol) in icols.iter().rev() {
                    if mentions(&body, accs[*k]) {
                        let state = self.read_col(&Type::Int, prim(Prim::Index, vec![var(&ri), state_met(op, &q)]).with_ty(Type::array(Type::Int)), icol);
                        body = let_(pvar(&Name::new("acc", accs[*k])), state, body).with_ty(Type::Real);
                    }
                }
                let r = js.len();
                let row = js.into_iter().rev().enumerate().fold(body, |x, (d, (j, size))| prim(Prim::Build, vec![size, lam(pvar(&j), x)]).with_ty(nested(&Type::Real, d + 1)));
                binds.push((col.clone(), at(prim(Prim::Build, vec![n.clone(), lam(pvar(&q), row)]), e.span).with_ty(nested(&Type::Real, r + 1)), e.span));
                xs.push(var(&col));
                xr.push(r);
            }
            let used: Vec<u32> = live(&inner, &arr(&cs, &reals, Type::Real)).iter().map(|b| b.0.id).collect();
            let mut ok = true;
            for b in inner.iter_mut().filter(|b| used.contains(&b.0.id)) {
                ok &= read_as_reals(&mut b.1, &cols, i);
            }
            for &k in &reals {
                ok &= read_as_reals(&mut cs[k], &cols, i);
            }
            if !ok {
                // a read with no column (a `div`/`mod` of the integers and a binder of a build whose
                // size is not fixed): the integers the reals read ridden in the reals' row as real
                // copies instead, as when the two read each other, the read made on `round` of them
                binds.truncate(binds0);
                if let Some(out) = self.shadowed(e, op, tys, (zs, accs, &cs0), (xs0, xr0, i), inner0, n, (&ints, &reals), binds) {
                    return out;
                }
                return Err(refuse(e.span, &format!("fold or scan over a tuple whose real component reads an integer component inside a term that also reads a real component or a variable bound in the body (not a column of the integers' states, computed before the reals' loop), {COPIES}")));
            }
        }
        let sums: Option<Vec<Expr>> = if scan || states || reals.is_empty() || !vectors.is_empty() {
            None
        } else {
            reals.iter().map(|&k| summand(&cs[k], accs[k]).map(|t| wrap(live(&inner, t), t.clone())).filter(|t| !accs.iter().any(|&x| mentions(t, x)))).collect()
        };
        let mut r_states = None;
        if let Some(ts) = sums {
            // every real component `acc_k + t`: `z_k + sum (build n (\i -> t))` (sumOuter, §3.2)
            for (q, (&k, t)) in reals.iter().zip(ts).enumerate() {
                let mut b = prim(Prim::Build, vec![n.clone(), lam(pvar(i), t)]);
                if q > 0 {
                    freshen(&mut b, self.fresh);
                }
                let total = prim(Prim::Sum, vec![b]).with_ty(Type::Real);
                out[k] = match zs[k].kind {
                    ExprKind::Real(r) if r == 0.0 => total,
                    _ => prim(Prim::Add, vec![zs[k].clone(), total]).with_ty(Type::Real),
                };
            }
        } else if !reals.is_empty() {
            // a fold whose integers read the reals' states is the scan of them, its last row the fold's
            let loop_op = if states && !scan { Prim::Scanl } else { op };
            let rz: Vec<Expr> = scalars.iter().map(|&k| zs[k].clone()).collect();
            let racc: Vec<u32> = scalars.iter().map(|&k| accs[k]).collect();
            let rinner = live(&inner, &arr(&cs, &reals, Type::Real));
            let rcs = arr(&cs, &scalars, Type::Real);
            let pieces: Vec<Piece> = vectors.iter().zip(&shapes).map(|(&k, shape)| Piece { acc: accs[k], z: zs[k].clone(), c: cs[k].clone(), shape: shape.clone() }).collect();
            let Some(r) = self.packed_loop(loop_op, e.span, (&rz, &racc, rcs), &pieces, (&xs, &xr, i), rinner, n, binds) else {
                return Err(refuse(e.span, &format!("fold or scan over a tuple whose real component reads an element that is not a real or an array of reals: {WHY}, whose elements are reals and arrays of reals")));
            };
            for (k, col) in &cols {
                out[*k] = match col {
                    Col::Real(q) => self.component(&r, *q, Type::Real, (scan, states), n),
                    Col::Array(..) => self.array_component(&Type::Real, &r, col, (scan, states), n),
                };
            }
            r_states = states.then_some(r);
        }
        if !reals_read_ints {
            self.int_loop(e, op, (zs, accs, &cs), (&icols, &cols), (i, &inner), n, (r_states, false), binds, &mut out);
        }
        Ok(out)
    }

    /// The integers the reals read (as `real m` or otherwise: `v ! k`, `k > 0`, `j < k`,
    /// `real ((j + k) mod 2)`) ridden in the reals' row as real copies (`shadow_ints`): the reals'
    /// reads made real terms of `real k` first (`real_int_reads`, every read: the integers' states
    /// are not there before the reals' loop to make columns of), which then read the copies; only
    /// the integers are left reading the reals, their own loop after the reals'. None when a step or
    /// a read has no form on the copies (`real_step`).
    #[allow(clippy::too_many_arguments)]
    fn shadowed(&mut self, e: &Expr, op: Prim, tys: &[Type], (zs, accs, cs): (&[Expr], &[u32], &[Expr]), (xs, xr, i): (&[Expr], &[usize], &Name), inner: &Binds, n: &Expr, (ints, reals): (&[usize], &[usize]), binds: &mut Binds) -> Option<Result<Vec<Expr>, Diagnostic>> {
        let arr = |cs: &[Expr], ks: &[usize]| Expr::gen(ExprKind::Array(ks.iter().map(|&k| cs[k].clone()).collect())).with_ty(Type::array(Type::Real));
        let (int_ids, real_ids): (Vec<u32>, Vec<u32>) = (ints.iter().map(|&k| accs[k]).collect(), reals.iter().map(|&k| accs[k]).collect());
        let used: Vec<u32> = live(inner, &arr(cs, reals)).iter().map(|b| b.0.id).collect();
        let (mut rcs, mut rinner) = (cs.to_vec(), inner.clone());
        let outer = rinner.clone();
        for b in rinner.iter_mut().filter(|b| used.contains(&b.0.id)) {
            real_int_reads(&mut b.1, &outer, (&int_ids, &real_ids), true, self.fresh);
        }
        for &k in reals {
            real_int_reads(&mut rcs[k], &rinner, (&int_ids, &real_ids), true, self.fresh);
        }
        let (tys2, zs2, accs2, mut cs2, mut inner2) = shadow_ints(tys, (zs, accs, &rcs), ints, reals, &rinner, self.fresh)?;
        // the copies' `exactInt` checks (int_reads.rs `rounded`) located at this fold or scan
        for t in cs2.iter_mut().chain(inner2.iter_mut().map(|b| &mut b.1)) {
            let mut stack = vec![t];
            while let Some(y) = stack.pop() {
                if y.span.is_none() && matches!(lang::spine(y), Some((h, a)) if h == lang::EXACT_INT && a.len() == 1) {
                    y.span = e.span;
                }
                stack.extend(children_mut(y));
            }
        }
        Some(self.int_fold(e, op, &tys2, (&zs2, &accs2, cs2), (xs, xr, i), &inner2, n, binds).map(|mut out| {
            out.truncate(tys.len());
            out
        }))
    }

    /// `int_fold`'s integer loop over the elements' indexes, pushed on `binds`: its result, or its
    /// states (`states`: the reals read them; a fold's are its scan's), and `out`'s integer
    /// components read from it. `r`: the reals' states, when the integers read them.
    #[allow(clippy::too_many_arguments)]
    fn int_loop(&mut self, e: &Expr, op: Prim, (zs, accs, cs): (&[Expr], &[u32], &[Expr]), (icols, cols): (&[(usize, Col)], &[(usize, Col)]), (i, inner): (&Name, &Binds), n: &Expr, (r, states): (Option<Name>, bool), binds: &mut Binds, out: &mut [Expr]) -> Name {
        use super::bot::mentions;
        let scan = matches!(op, Prim::Scanl | Prim::Scanr);
        let loop_op = if states && !scan { Prim::Scanl } else { op };
        let (ia, arr_int) = (self.fresh.name("acc"), Type::array(Type::Int));
        // the row: the integers, then each array of integers' columns (`packed_row`, checked each step)
        let iscalars: Vec<usize> = icols.iter().filter(|c| matches!(c.1, Col::Real(_))).map(|c| c.0).collect();
        let ivectors: Vec<(usize, Vec<Expr>)> = icols.iter().filter_map(|(k, c)| if let Col::Array(_, d) = c { Some((*k, d.clone())) } else { None }).collect();
        let ics = Expr::gen(ExprKind::Array(iscalars.iter().map(|&k| cs[k].clone()).collect())).with_ty(arr_int.clone());
        let ics = if ivectors.is_empty() {
            ics
        } else {
            let dims: Vec<Vec<Expr>> = ivectors.iter().map(|v| v.1.clone()).collect();
            self.packed_row(&Type::Int, ics, ivectors.iter().map(|v| cs[v.0].clone()).collect(), &dims, Check::Step(e.span))
        };
        let mut ibody = wrap(live(inner, &ics), ics);
        if let Some(r) = &r {
            let at_i = state_met(op, i);
            for (k, col) in cols.iter().rev() {
                if mentions(&ibody, accs[*k]) {
                    let row = prim(Prim::Index, vec![var(r), at_i.clone()]).with_ty(Type::array(Type::Real));
                    let v = self.read_col(&Type::Real, row, col);
                    ibody = let_(pvar(&Name::new("acc", accs[*k])), v, ibody);
                }
            }
        }
        for (k, col) in icols.iter().rev() {
            let v = self.read_col(&Type::Int, var(&ia), col);
            ibody = let_(pvar(&Name::new("acc", accs[*k])), v, ibody);
        }
        let (q0, q1) = if op == Prim::Scanr { (i, &ia) } else { (&ia, i) };
        let (t0, t1) = if op == Prim::Scanr { (Type::Int, arr_int.clone()) } else { (arr_int.clone(), Type::Int) };
        let f = lam(pvar(q0), lam(pvar(q1), ibody)).with_ty(Type::fun(t0, Type::fun(t1, arr_int.clone())));
        let z0 = Expr::gen(ExprKind::Array(iscalars.iter().map(|&k| zs[k].clone()).collect())).with_ty(arr_int.clone());
        let z0 = if ivectors.is_empty() {
            z0
        } else {
            let z_dims: Vec<Vec<Expr>> = ivectors.iter().map(|(k, d)| outer_dims(&Type::Int, &zs[*k], d.len())).collect();
            self.packed_row(&Type::Int, z0, ivectors.iter().map(|v| zs[v.0].clone()).collect(), &z_dims, Check::Regular(e.span))
        };
        let j = self.fresh.name("i");
        let idx = prim(Prim::Build, vec![n.clone(), lam(pvar(&j), var(&j))]).with_ty(arr_int.clone());
        let ri = self.fresh.name("ri");
        let ri_ty = if scan || states { Type::array(arr_int.clone()) } else { arr_int.clone() };
        binds.push((ri.clone(), at(prim(loop_op, vec![f, z0, idx]), e.span).with_ty(ri_ty), e.span));
        for (k, col) in icols {
            out[*k] = match col {
                Col::Real(q) => self.component(&ri, *q, Type::Int, (scan, states), n),
                Col::Array(..) => self.array_component(&Type::Int, &ri, col, (scan, states), n),
            };
        }
        ri
    }

    /// For each array component `ks`, `iota (length z)` bound before the loop, one per dimension
    /// of an array of arrays (`iota (length (z ! 0))` ..: regular, §3.2): the loops read the fixed
    /// lengths from these Int arrays, not from z, which is differentiated (a free variable of the
    /// body's vjp, fold.rs). Lengths stay `length` terms, not let-bound Ints: inside a map bot reads
    /// a length at i = 0 (L0), while a let-bound size would be a per-row array (B3) that a build1's
    /// size cannot index.
    fn shapes(&mut self, span: crate::diag::Span, ks: &[usize], (zs, tys): (&[Expr], &[Type]), binds: &mut Binds) -> Vec<Vec<Name>> {
        ks.iter()
            .map(|&k| {
                let (r, t) = innermost(&tys[k]);
                let dims = outer_dims(t, &zs[k], r.max(1));
                dims.into_iter()
                    .map(|len| {
                        let (shape, j) = (self.fresh.name("shape"), self.fresh.name("j"));
                        binds.push((shape.clone(), prim(Prim::Build, vec![len, lam(pvar(&j), var(&j))]).with_ty(Type::array(Type::Int)), span));
                        shape
                    })
                    .collect()
            })
            .collect()
    }

    /// Component `col` of the packed row `row` of `elem_ty` (reals, or the integers' loop's integers):
    /// `row ! q`, or `build len (\j -> row ! (off + j))`, an array of arrays row-major
    /// `build k (\j1 -> build w (\j2 -> row ! (off + (j1 * w + j2))))`.
    fn read_col(&mut self, elem_ty: &Type, row: Expr, col: &Col) -> Expr {
        match col {
            Col::Real(q) => prim(Prim::Index, vec![row, int(*q as i64)]).with_ty(elem_ty.clone()),
            Col::Array(off, dims) => {
                let js: Vec<Name> = dims.iter().map(|_| self.fresh.name("j")).collect();
                let flat = (1..dims.len()).fold(var(&js[0]), |f, k| prim(Prim::Add, vec![prim(Prim::Mul, vec![f, dims[k].clone()]).with_ty(Type::Int), var(&js[k])]).with_ty(Type::Int));
                let mut x = prim(Prim::Index, vec![row, prim(Prim::Add, vec![off.clone(), flat]).with_ty(Type::Int)]).with_ty(elem_ty.clone());
                for (k, j) in js.iter().enumerate().rev() {
                    x = prim(Prim::Build, vec![dims[k].clone(), lam(pvar(j), x)]).with_ty(nested(elem_ty, dims.len() - k));
                }
                x
            }
        }
    }

    /// An array component `col` of a packed loop's result `r`, whose row holds `elem_ty`, as
    /// `component` reads a scalar: a scan's states of it, the last row of a fold run as a scan, or
    /// the fold's row.
    fn array_component(&mut self, elem_ty: &Type, r: &Name, col: &Col, (scan, states): (bool, bool), n: &Expr) -> Expr {
        let row_ty = Type::array(elem_ty.clone());
        if scan {
            let j = self.fresh.name("i");
            let c = self.read_col(elem_ty, prim(Prim::Index, vec![var(r), var(&j)]).with_ty(row_ty), col);
            let ty = Type::array(c.ty.clone());
            prim(Prim::Build, vec![length(var(r)), lam(pvar(&j), c)]).with_ty(ty)
        } else if states {
            self.read_col(elem_ty, prim(Prim::Index, vec![var(r), n.clone()]).with_ty(row_ty), col)
        } else {
            self.read_col(elem_ty, var(r), col)
        }
    }

    /// Component q (of type `elem`) of a packed loop's result `r`: a scan's column of it, the last
    /// row of a fold run as a scan (`states`: its row n), or the fold's packed result itself.
    fn component(&mut self, r: &Name, q: usize, elem: Type, (scan, states): (bool, bool), n: &Expr) -> Expr {
        let row_ty = Type::array(elem.clone());
        let comp = |row: Expr| prim(Prim::Index, vec![row, int(q as i64)]).with_ty(elem.clone());
        if scan {
            let j = self.fresh.name("i");
            let col = comp(prim(Prim::Index, vec![var(r), var(&j)]).with_ty(row_ty.clone()));
            prim(Prim::Build, vec![length(var(r)), lam(pvar(&j), col)]).with_ty(row_ty)
        } else if states {
            comp(prim(Prim::Index, vec![var(r), n.clone()]).with_ty(row_ty))
        } else {
            comp(var(r))
        }
    }
}

/// Boolean components of a tuple accumulator (positions in `tys`) as numbers, 1 for true and 0 for
/// false: the core's arrays hold one element type (Fig. 8: `Array sh ρ`, ρ ::= R | Int | Bool), the
/// loop's row is an array of reals (fold.rs) and the integers' an array of integers, and a boolean
/// carries no cotangent (D[Array sh Bool] = Array sh Bool, §6.1). Each rides in the
/// packed row as a real column (`packed_fold`; bound as `acc > 0.5`, its new value
/// `if c then 1.0 else 0.0`, whose Delta is zero), or, when its new value reads an integer component,
/// with the integers (`int_fold`; read as `real acc > 0.5`, which the reals read from the integers'
/// states as they read `real m`). `soa.rs`'s fold binds it as `acc > 0.5`; here its type is
/// chosen and its start and new values encoded; `decode_bools` reads the loop's results back
/// (boolean elements likewise: `soa.rs`'s fold binds `build n (\j -> if b ! j then 1.0 else 0.0)`
/// before the loop, a column of the packed elements). The positions of the booleans.
pub(super) fn encode_bools(tys: &mut [Type], (zs, accs): (&mut [Expr], &[u32]), (s, inner): (&mut Shape, &mut Binds), fresh: &mut Fresh) -> Result<Vec<usize>, Diagnostic> {
    use super::bot::mentions;
    let mut cs = vec![];
    leaves(s, &mut cs)?;
    let bools: Vec<usize> = (0..tys.len()).filter(|&k| tys[k] == Type::Bool).collect();
    if cs.len() != tys.len() || zs.len() != tys.len() {
        return Ok(vec![]);
    }
    for &k in &bools {
        tys[k] = Type::Real;
    }
    // an array of booleans (any rank) an array of such numbers, elementwise, with the reals' arrays
    let bit_arrays: Vec<(usize, usize)> = (0..tys.len()).filter_map(|k| bits_rank(&tys[k]).map(|r| (k, r))).collect();
    for &(k, r) in &bit_arrays {
        tys[k] = nested(&Type::Real, r);
        let number = |b: Expr, fresh: &mut Fresh| elementwise(b, r, &|x| if_(x, real(1.0), real(0.0)).with_ty(Type::Real), fresh);
        zs[k] = number(zs[k].clone(), fresh);
        cs[k] = number(cs[k].clone(), fresh);
    }
    // a boolean reading an integer (or a boolean riding with the integers) rides with them
    loop {
        let ints: Vec<u32> = (0..tys.len()).filter(|&k| tys[k] == Type::Int).map(|k| accs[k]).collect();
        let Some(&k) = bools.iter().find(|&&k| tys[k] == Type::Real && ints.iter().any(|&x| mentions(&wrap(live(inner, &cs[k]), cs[k].clone()), x))) else { break };
        tys[k] = Type::Int;
        let acc = accs[k];
        for c in cs.iter_mut().chain(inner.iter_mut().map(|b| &mut b.1)) {
            read_as_int(c, acc);
        }
    }
    for &k in &bools {
        let (one, zero) = if tys[k] == Type::Int { (int(1), int(0)) } else { (real(1.0), real(0.0)) };
        let number = |b: Expr| if_(b, one.clone(), zero.clone()).with_ty(tys[k].clone());
        zs[k] = number(zs[k].clone());
        cs[k] = number(cs[k].clone());
    }
    let mut cs = cs.into_iter();
    *s = map_leaves(s.clone(), &mut |_| Ok(Shape::Leaf(cs.next().unwrap_or_else(unit))))?;
    Ok(bools.into_iter().chain(bit_arrays.into_iter().map(|(k, _)| k)).collect())
}

/// The rank r ≥ 1 of `Array^r Bool`, None for any other type.
pub(super) fn bits_rank(t: &Type) -> Option<usize> {
    let (r, t) = innermost(t);
    (r > 0 && *t == Type::Bool).then_some(r)
}

/// `Array^r t` as (r, t): the rank and the innermost element type (r = 0 for a non-array).
fn innermost(t: &Type) -> (usize, &Type) {
    let (mut r, mut t) = (0, t);
    while let Some(a) = t.as_array() {
        (r, t) = (r + 1, a);
    }
    (r, t)
}

/// `f` applied to each element of `x` at depth r: `let v = x in build (length v) (\j -> .. f (v ! j ! ..))`.
pub(super) fn elementwise(x: Expr, r: usize, f: &dyn Fn(Expr) -> Expr, fresh: &mut Fresh) -> Expr {
    if r == 0 {
        return f(x);
    }
    let (v, j) = (fresh.name("v"), fresh.name("j"));
    let vt = x.ty.clone();
    let elem = prim(Prim::Index, vec![var(&v).with_ty(vt.clone()), var(&j)]).with_ty(vt.as_array().cloned().unwrap_or(Type::Unknown));
    let body = elementwise(elem, r - 1, f, fresh);
    let out_ty = Type::array(body.ty.clone());
    let b = prim(Prim::Build, vec![length(var(&v).with_ty(vt.clone())), lam(pvar(&j), body)]).with_ty(out_ty.clone());
    let_(pvar(&v), x, b).with_ty(out_ty)
}

/// `t` with each read `acc > 0.5` of the boolean `acc` made `real acc > 0.5`: it rides with the integers.
fn read_as_int(t: &mut Expr, acc: u32) {
    let mut stack = vec![t];
    while let Some(y) = stack.pop() {
        if let ExprKind::Prim(Prim::Gt, a) = &mut y.kind {
            if matches!(&a[0].kind, ExprKind::Var(v) if v.id == acc) {
                let x = std::mem::replace(&mut a[0], unit());
                a[0] = prim(Prim::ToReal, vec![x.with_ty(Type::Int)]).with_ty(Type::Real);
                continue;
            }
        }
        stack.extend(children_mut(y));
    }
}

impl Sra<'_> {
    /// The loop's results `out` with each boolean component (`bools`, encoded by `encode_bools` as
    /// numbers of type `tys[k]`) read back: `o > 0.5` (`o > 0` for an integer), a scan's states each.
    pub(super) fn decode_bools(&mut self, out: Shape, bools: &[usize], tys: &[Type], op: Prim, span: crate::diag::Span, binds: &mut Binds) -> Result<Shape, Diagnostic> {
        if bools.is_empty() {
            return Ok(out);
        }
        let scan = matches!(op, Prim::Scanl | Prim::Scanr);
        let mut k = 0;
        map_leaves(out, &mut |o| {
            let q = k;
            k += 1;
            if !bools.contains(&q) {
                return Ok(Shape::Leaf(o));
            }
            let t = tys[q].clone();
            let half = if t == Type::Int { int(0) } else { real(0.5) };
            // an array of booleans elementwise (rank r)
            let r = rank(&t).unwrap_or(0);
            let test = |x: Expr, fresh: &mut Fresh| elementwise(x, r, &|y| prim(Prim::Gt, vec![y, half.clone()]).with_ty(Type::Bool), fresh);
            if !scan {
                return Ok(Shape::Leaf(test(o, self.fresh)));
            }
            let (v, j) = (self.fresh.name("b"), self.fresh.name("j"));
            binds.push((v.clone(), at(o, span).with_ty(Type::array(t.clone())), span));
            let x = prim(Prim::Index, vec![var(&v), var(&j)]).with_ty(t);
            let x = test(x, self.fresh);
            let ty = Type::array(x.ty.clone());
            Ok(Shape::Leaf(prim(Prim::Build, vec![length(var(&v)), lam(pvar(&j), x)]).with_ty(ty)))
        })
    }
}

/// Where a component of a packed row sits: a real's column q, or an array's columns from an offset,
/// with its dimensions, outermost first (`length` terms, valid inside and outside the loop): an array
/// of arrays (§3.2's multidimensional arrays, regular: "there are no jagged arrays"; horde-ad's
/// "regular nested arrays", §8) row-major, k·w columns.
#[derive(Clone)]
enum Col {
    Real(usize),
    Array(Expr, Vec<Expr>),
}

/// Each real and array component (`ks`, in order) with its place in the row: the reals first, then
/// the arrays (of dimensions `length shape`, one shape per dimension).
fn columns(ks: &[usize], scalars: &[usize], vectors: &[usize], shapes: &[Vec<Name>]) -> Vec<(usize, Col)> {
    let dims: Vec<Vec<Expr>> = shapes.iter().map(|d| d.iter().map(|s| length(var(s))).collect()).collect();
    let lens: Vec<Expr> = dims.iter().map(|d| size(d)).collect();
    ks.iter()
        .map(|&k| match scalars.iter().position(|&q| q == k) {
            Some(q) => (k, Col::Real(q)),
            None => {
                let p = vectors.iter().position(|&q| q == k).unwrap_or(0);
                (k, Col::Array(offset(scalars.len(), &lens[..p]), dims[p].clone()))
            }
        })
        .collect()
}

/// The rank of an array of reals (`Array R` 1, `Array (Array R)` 2, ..), None for any other type.
fn rank(t: &Type) -> Option<usize> {
    let (r, t) = innermost(t);
    (r > 0 && *t == Type::Real).then_some(r)
}

/// An element's rank in a packed loop: 0 for a real, an array of reals its rank (more columns).
pub(super) fn elem_rank(t: &Type) -> Option<usize> {
    if *t == Type::Real {
        Some(0)
    } else {
        rank(t)
    }
}

/// `Array (.. (Array t))` of rank r.
pub(super) fn nested(t: &Type, r: usize) -> Type {
    (0..r).fold(t.clone(), |t, _| Type::array(t))
}

/// The rank r ≥ 1 of `Array^r Int`, None for any other type.
pub(super) fn int_rank(t: &Type) -> Option<usize> {
    let (r, t) = innermost(t);
    (r > 0 && *t == Type::Int).then_some(r)
}

/// The number of columns of dimensions `d`: `d1 * d2 * ..` (1 for none).
fn size(d: &[Expr]) -> Expr {
    d.iter().cloned().reduce(|a, b| prim(Prim::Mul, vec![a, b]).with_ty(Type::Int)).unwrap_or_else(|| int(1))
}

/// `if 0 < d then d else 1`: a divisor of a row-major index (an empty dimension has no columns).
fn at_least_one(d: Expr) -> Expr {
    if_(prim(Prim::Lt, vec![int(0), d.clone()]).with_ty(Type::Bool), d, int(1)).with_ty(Type::Int)
}

/// The r dimensions of `z`, an array of `t`, read from its first rows: `length z`, `length (z ! 0)`,
/// .. (regular, §3.2).
fn outer_dims(t: &Type, z: &Expr, r: usize) -> Vec<Expr> {
    let mut row = z.clone();
    (0..r)
        .map(|q| {
            if q > 0 {
                row = prim(Prim::Index, vec![row.clone(), int(0)]).with_ty(nested(t, r - q));
            }
            length(row.clone())
        })
        .collect()
}

/// An array component of a packed tuple accumulator (`packed_fold`): its accumulator variable,
/// its initial value, the body's new value, and `iota (length z)` (bound before the loop), whose
/// length the body reads.
struct Piece {
    acc: u32,
    z: Expr,
    c: Expr,
    shape: Vec<Name>,
}

/// The index of the state that element `j` meets in a loop's states: `j`, or `j + 1` in a scanr
/// (its states run from the right, the last one its initial value).
fn state_met(op: Prim, j: &Name) -> Expr {
    if op == Prim::Scanr {
        prim(Prim::Add, vec![var(j), int(1)]).with_ty(Type::Int)
    } else {
        var(j)
    }
}

/// Where an array of a packed row starts: `m + len_1 + .. + len_p` (the reals first, then the arrays before it).
fn offset(m: usize, lens: &[Expr]) -> Expr {
    lens.iter().fold(int(m as i64), |o, l| match o.kind {
        ExprKind::Int(0) => l.clone(),
        _ => prim(Prim::Add, vec![o, l.clone()]).with_ty(Type::Int),
    })
}

fn same_var(x: &Expr, y: &Expr) -> bool {
    matches!((&x.kind, &y.kind), (ExprKind::Var(a), ExprKind::Var(b)) if a.id == b.id)
}

/// The run-time checks of a packed row's arrays (`packed_row`): a body's new row, whose
/// arrays keep their shapes (`sameLength`, an array of arrays `sameShape`: regular too); an initial
/// row, whose arrays of arrays must be regular (`sameShape`); or bounds already checked (the
/// elements', `packed_loop`).
enum Check {
    Step(crate::diag::Span),
    Regular(crate::diag::Span),
    Bounds(Vec<Vec<Expr>>),
}
