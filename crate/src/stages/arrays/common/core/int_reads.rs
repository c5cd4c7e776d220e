//! The reals of a packed fold reading its integer components (pack.rs `int_fold`): each read made a
//! real term of the integers' states (`real_int_reads`: masked reads, comparisons of reals), a build
//! of their size fused with its consumer and masked to its largest size (`fuse_sized_builds`,
//! `masked_sizes`), a `real` of them and binders of builds of fixed sizes a table (`binder_tables`),
//! what is left a column of its values per element (`lift_int_reads`), read back as reals
//! (`read_as_reals`); and, the two reading each other, the integers the reals read as real copies in
//! the reals' row (`shadow_ints`), where any read with no real term (`div`, `mod`, a let of the
//! body) is made on the copies brought back by §2's `round : R → Z` (`rounded`, exact within 2^53,
//! checked). The core's arrays hold one element type (Fig. 8), so each is a real term of the
//! integers' primal values, as §5.2's gather functions keep theirs.

use super::pack::{elem_rank, nested};
use super::soa::{length, live};
use super::tuples::{wrap, Binds};
use crate::build::*;
use crate::ir::*;

/// `t` with each `real m` of an integer accumulator m (`cols`: its id and the column of its states
/// as reals) read from the column at `i`; false if m is used otherwise.
pub(super) fn read_as_reals(t: &mut Expr, cols: &[(u32, Name)], i: &Name) -> bool {
    let mut stack = vec![t];
    while let Some(y) = stack.pop() {
        if let ExprKind::Prim(Prim::ToReal, a) = &y.kind {
            if let ExprKind::Var(v) = &a[0].kind {
                if let Some((_, col)) = cols.iter().find(|c| c.0 == v.id) {
                    *y = prim(Prim::Index, vec![var(col), var(i)]).with_ty(Type::Real);
                    continue;
                }
            }
        }
        if matches!(&y.kind, ExprKind::Var(v) if cols.iter().any(|c| c.0 == v.id)) {
            return false;
        }
        stack.extend(children_mut(y));
    }
    true
}

/// In `t`, a real component's new value or a let it reads, each largest real or boolean term that
/// reads an integer component (`ints`) other than as `real m`, and no real component (`reals`) nor
/// a variable bound inside `t`, replaced by `col ! i` (a boolean `col ! i > 0.5`): `lifted` gets
/// `col` and the term (with the lets of `inner` it reads), which the integers' states give a value
/// per element (`int_fold`): a term of the integers alone is primal, as the integers are (no Delta).
pub(super) fn lift_int_reads(t: &mut Expr, inner: &Binds, (ints, reals): (&[u32], &[u32]), i: &Name, lifted: &mut Vec<(Name, Expr, Type)>, fresh: &mut Fresh) {
    use super::bot::mentions;
    let Some(local) = bound_in(t) else { return };
    let mut stack = vec![t];
    while let Some(y) = stack.pop() {
        if matches!(y.ty, Type::Real | Type::Bool) {
            let whole = wrap(live(inner, y), y.clone());
            if !bare_int_use(&whole, ints) {
                continue;
            }
            if !reals.iter().chain(&local).any(|&x| mentions(&whole, x)) {
                let col = fresh.name("ri");
                let read = prim(Prim::Index, vec![var(&col).with_ty(Type::array(Type::Real)), var(i).with_ty(Type::Int)]).with_ty(Type::Real);
                *y = match y.ty {
                    Type::Bool => prim(Prim::Gt, vec![read, real(0.5)]).with_ty(Type::Bool),
                    _ => read,
                };
                lifted.push((col, whole, y.ty.clone()));
                continue;
            }
        }
        stack.extend(children_mut(y));
    }
}

/// A `build s (\j -> ..)` whose size s (with the lets it reads: `whole`) passes `fixed`: its binder
/// and that size, a range the nodes below it may be tabled or sized over (`binder_tables`,
/// `masked_sizes`).
fn fixed_build(y: &Expr, whole: impl Fn(&Expr) -> Expr, fixed: impl Fn(&Expr) -> bool) -> Option<(Name, Expr)> {
    let ExprKind::Prim(Prim::Build, b) = &y.kind else { return None };
    let [s, f] = &b[..] else { return None };
    let ExprKind::Lam(_, p_x) = &f.kind else { return None };
    let (p, _) = &**p_x;
    let Pat::Var(j, _) = p else { return None };
    let size = whole(s);
    fixed(&size).then(|| (j.clone(), size))
}

/// In `t` (a real component's new value or a let it reads, after `real_int_reads`), each `real u` whose
/// u reads an integer component (`ints`) and, of the variables bound in `t`, only binders j1 .. jr of
/// enclosing `build s (\j -> ..)`s whose sizes read none of them nor the integers (fixed ranges:
/// `(j + k) mod 3`, `(i + j + k) mod 2`, `div`/`mod` having no real term; other sizes: the integers
/// as real copies, `round`ed, pack.rs `shadowed`), replaced by
/// `col ! i ! j1 .. ! jr`: `tables` gets `col`, the binders with their sizes and `real u` (with the
/// lets of `inner` it reads), which `int_fold` makes a table of u's values per element and binders
/// from the integers' states, a row of the packed elements (an array of rank r: more columns,
/// row-major; primal: a term of the integers, as `lift_int_reads`'s columns).
pub(super) fn binder_tables(t: &mut Expr, inner: &Binds, (ints, reals): (&[u32], &[u32]), i: &Name, tables: &mut Vec<Table>, fresh: &mut Fresh) {
    use super::bot::mentions;
    let Some(local) = bound_in(t) else { return };
    let whole = |x: &Expr| wrap(live(inner, x), x.clone());
    // each node with the builds of a fixed size around it: (binder, size)
    let mut stack: Vec<(&mut Expr, Vec<(Name, Expr)>)> = vec![(t, vec![])];
    while let Some((y, around)) = stack.pop() {
        if let ExprKind::Prim(Prim::ToReal, a) = &y.kind {
            let u = whole(&a[0]);
            let js: Vec<&(Name, Expr)> = around.iter().filter(|(j, _)| mentions(&u, j.id)).collect();
            let others = reals.iter().chain(local.iter().filter(|&&x| js.iter().all(|(j, _)| j.id != x))).any(|&x| mentions(&u, x));
            if bare_int_use(&u, ints) && !js.is_empty() && !others {
                // outermost binder first, as the table's dimensions
                let js: Vec<(Name, Expr)> = js.into_iter().cloned().collect();
                let col = fresh.name("rt");
                let r = js.len();
                let at_i = prim(Prim::Index, vec![var(&col).with_ty(nested(&Type::Real, r + 1)), var(i).with_ty(Type::Int)]).with_ty(nested(&Type::Real, r));
                let read = js.iter().enumerate().fold(at_i, |x, (d, (j, _))| prim(Prim::Index, vec![x, var(j).with_ty(Type::Int)]).with_ty(nested(&Type::Real, r - d - 1)));
                tables.push((col, js, wrap(live(inner, y), y.clone())));
                *y = read;
                continue;
            }
        }
        let fixed = fixed_build(y, whole, |size| !bare_int_use(size, ints) && !reals.iter().chain(&local).any(|&x| mentions(size, x)));
        let mut inside = around.clone();
        inside.extend(fixed);
        for c in children_mut(y) {
            stack.push((c, inside.clone()));
        }
    }
}

/// A `binder_tables` entry: the table's name, the binders it reads with their builds' fixed sizes
/// (outermost first: the table's dimensions after the element's), and the `real` term tabulated.
pub(super) type Table = (Name, Vec<(Name, Expr)>, Expr);

/// A tuple accumulator whose real and integer components read each other (`int_fold`), with each
/// integer component m that the reals read (and those its step reads) ridden in the reals' row as a
/// real copy m′: its start `real z`, its step the integer step in reals (`real` pushed through `+`,
/// `-`, `*`, literals, conditions: `if x > s then m + 1 else m` is `if x > s then m′ + 1.0 else m′`),
/// and the reals' `real m` read as m′ (`real (m - j)` as `m′ - j′`). Its Delta is zero (a constant moved by conditions: §5.2, a
/// real reaches an integer only "through the discrete, integral results", not differentiated), and
/// the integers, which now alone read the reals, are their own loop after the reals' (their states).
/// A step or a read with no such form (`k / 2`, `k mod 3`, `real j` of a let `j = k / 2`) is made on
/// the copies brought back by §2's `round` (`rounded`). An array of integers (rank r) is copied as
/// an array of reals of its shape (more columns of the row: `packed_fold`'s arrays, its shape fixed
/// by its start and checked each step, §5's static shapes; the paper's arrays hold one element
/// type, Fig. 8), its step made on the integers brought back and `real` elementwise; the reals
/// read it back whole, a let `iv` of `exactInt (round ..)` elementwise. None when a step has no
/// form on the copies.
#[allow(clippy::type_complexity)]
pub(super) fn shadow_ints(tys: &[Type], (zs, accs, cs): (&[Expr], &[u32], &[Expr]), ints: &[usize], reals: &[usize], inner: &Binds, fresh: &mut Fresh) -> Option<(Vec<Type>, Vec<Expr>, Vec<u32>, Vec<Expr>, Binds)> {
    use super::bot::mentions;
    // the lets of the body that read an integer (a copy's step may read the others)
    let local: Vec<u32> = inner.iter().filter(|b| ints.iter().any(|&k| mentions(&wrap(live(inner, &b.1), b.1.clone()), accs[k]))).map(|b| b.0.id).collect();
    let whole = |x: &Expr| wrap(live(inner, x), x.clone());
    // the integers to copy: read by the reals, then by the copies' steps
    let mut copied: Vec<usize> = ints.iter().copied().filter(|&k| reals.iter().any(|&r| mentions(&whole(&cs[r]), accs[k]))).collect();
    let mut q = 0;
    while q < copied.len() {
        let w = whole(&cs[copied[q]]);
        for &k in ints {
            if !copied.contains(&k) && mentions(&w, accs[k]) {
                copied.push(k);
            }
        }
        q += 1;
    }
    // an array of integers (rank r) rides as an array of reals of its shape, more columns of the
    // row (pack.rs `packed_fold`, its shape fixed by its start and checked each step: §5's static
    // shapes), read back whole as `iv = build .. (\j -> exactInt (round (acc′ ! j)))`, a let of
    // the body (`rounded` reads `iv` for it); a scalar is read back where it is read
    let ranks: Vec<usize> = copied.iter().map(|&k| super::pack::int_rank(&tys[k]).unwrap_or(0)).collect();
    let copies: Vec<u32> = copied.iter().map(|_| fresh.name("acc").id).collect();
    let map: Vec<RealCopy> = copied.iter().zip(&ranks).zip(&copies).map(|((&k, &r), &c)| (accs[k], if r == 0 { c } else { fresh.name("iv").id }, r)).collect();
    let int_ids: Vec<u32> = ints.iter().map(|&k| accs[k]).collect();
    let (mut tys2, mut zs2, mut accs2, mut cs2) = (tys.to_vec(), zs.to_vec(), accs.to_vec(), cs.to_vec());
    let mut backs: Binds = vec![];
    for ((&k, &(_, iv, r)), &c) in copied.iter().zip(&map).zip(&copies) {
        accs2.push(c);
        if r == 0 {
            tys2.push(Type::Real);
            zs2.push(prim(Prim::ToReal, vec![zs[k].clone()]).with_ty(Type::Real));
            cs2.push(real_step(&cs[k], &map, (&int_ids, &local), fresh)?);
            continue;
        }
        // its step computed on the integers brought back (`rounded`), made reals elementwise
        let to_real = |x: Expr| prim(Prim::ToReal, vec![x]).with_ty(Type::Real);
        tys2.push(nested(&Type::Real, r));
        zs2.push(super::pack::elementwise(zs[k].clone(), r, &to_real, fresh));
        cs2.push(super::pack::elementwise(rounded(&cs[k], &map, &int_ids)?, r, &to_real, fresh));
        let back = |x: Expr| super::lang::exact_int(prim(Prim::Round, vec![x]).with_ty(Type::Int)).with_ty(Type::Int);
        let acc = var(&Name::new("acc", c)).with_ty(nested(&Type::Real, r));
        backs.push((Name::new("iv", iv), super::pack::elementwise(acc, r, &back, fresh), crate::diag::Span::NONE));
    }
    // the reals' `real m` read as m′, in their new values and the lets they read
    let used: Vec<u32> = live(inner, &Expr::gen(ExprKind::Array(reals.iter().map(|&k| cs[k].clone()).collect()))).iter().map(|b| b.0.id).collect();
    let mut inner2: Binds = backs.into_iter().chain(inner.iter().cloned()).collect();
    let targets = cs2.iter_mut().enumerate().filter(|(k, _)| reals.contains(k)).map(|(_, c)| c);
    for t in targets.chain(inner2.iter_mut().filter(|b| used.contains(&b.0.id)).map(|b| &mut b.1)) {
        let mut stack = vec![t];
        while let Some(y) = stack.pop() {
            if let ExprKind::Prim(Prim::ToReal, a) = &y.kind {
                if let Some(r) = real_step(&a[0], &map, (&int_ids, &local), fresh) {
                    *y = r;
                    continue;
                }
            }
            stack.extend(children_mut(y));
        }
    }
    // the reals and the copies: what the reals' loop computes
    let row: Vec<usize> = reals.iter().copied().chain(tys.len()..tys2.len()).collect();
    let reads_ints = |cs2: &[Expr], inner2: &Binds| row.iter().any(|&r| int_ids.iter().any(|&x| mentions(&wrap(live(inner2, &cs2[r]), cs2[r].clone()), x)));
    if reads_ints(&cs2, &inner2) {
        // any other read of an integer there (`real j` of a let `j = k / 2`, a step reading such a
        // let): made on its copy brought back by §2's `round` (`rounded`), in the reals' terms and
        // the lets they read (the integers' loop, reading those lets, then reads the copies too)
        let used: Vec<u32> = live(&inner2, &Expr::gen(ExprKind::Array(row.iter().map(|&k| cs2[k].clone()).collect()))).iter().map(|b| b.0.id).collect();
        let targets = cs2.iter_mut().enumerate().filter(|(k, _)| row.contains(k)).map(|(_, c)| c);
        for t in targets.chain(inner2.iter_mut().filter(|b| used.contains(&b.0.id)).map(|b| &mut b.1)) {
            *t = rounded(t, &map, &[])?;
        }
    }
    (!reads_ints(&cs2, &inner2)).then_some((tys2, zs2, accs2, cs2, inner2))
}

/// An integer step `u` in reals, its integer components (`map`) their real copies: `real` pushed
/// through literals, `+`, `-`, `*`, negation and `if`, a condition's integer comparisons compared as
/// reals; a term of no integer component nor a let of the body reading one (`local`) `real u`. None otherwise.
pub(super) fn real_step(u: &Expr, map: &[RealCopy], (ints, local): (&[u32], &[u32]), fresh: &mut Fresh) -> Option<Expr> {
    use super::bot::mentions;
    let free = |x: &Expr| !ints.iter().chain(local).any(|&v| mentions(x, v));
    Some(match &u.kind {
        ExprKind::Int(k) => real(*k as f64).with_ty(Type::Real),
        ExprKind::Var(v) if map.iter().any(|m| m.0 == v.id && m.2 == 0) => var(&Name::new("acc", map.iter().find(|m| m.0 == v.id)?.1)).with_ty(Type::Real),
        ExprKind::Prim(op @ (Prim::Add | Prim::Sub | Prim::Mul | Prim::Neg), a) => prim(*op, a.iter().map(|x| real_step(x, map, (ints, local), fresh)).collect::<Option<Vec<_>>>()?).with_ty(Type::Real),
        ExprKind::If(c_ab) => { let (c, ab) = &**c_ab; if_(real_test(c, map, (ints, local), fresh)?, real_step(&ab.0, map, (ints, local), fresh)?, real_step(&ab.1, map, (ints, local), fresh)?).with_ty(Type::Real) },
        _ if free(u) => prim(Prim::ToReal, vec![u.clone()]).with_ty(Type::Real),
        ExprKind::Prim(Prim::Index, a) if a.len() == 2 && free(&a[0]) => {
            let u = real_step(&a[1], map, (ints, local), fresh)?;
            masked_read(&a[0], u, &|x| prim(Prim::ToReal, vec![x]).with_ty(Type::Real), fresh)
        }
        // any other integer term (`div`, `mod`, `min`, an index of an array reading the integers ..)
        // computed on the integers themselves, each copy brought back by §2's `round : R → Z`
        // (`rounded`), and made a real again
        // (a let of the body it reads is itself made on the copies: `shadow_ints`)
        _ if integer(u, ints) => prim(Prim::ToReal, vec![rounded(u, map, ints)?]).with_ty(Type::Real),
        _ => return None,
    })
}

/// An integer component's real copy (`shadow_ints`): the component's id, its copy's id, and its
/// rank r; for an array of integers (r ≥ 1) the id of `iv`, the copy brought back whole.
pub(super) type RealCopy = (u32, u32, usize);

/// The integer term `u` with each integer component m read as `exactInt (round m′)` of its real
/// copy (`map`), §2's `round : R → Z` (ties to even, prims.rs). Exact: a copy is made of integers
/// by `real`, `+`, `-`, `*` (`real_step`), each exact on integers when its result is within 2^53
/// (f64's 53-bit significand holds every integer up to 2^53), and `round` of an integral real is
/// that integer; so u, computed on integers, is the source's own `div`, `mod` (truncating, the
/// dividend's sign: prims.rs `z_div`, `z_mod`) or index, with the source's errors (division by zero,
/// an index out of range). A copy past 2^53 may have rounded: `exactInt` (lang.rs) stops the run
/// there, located at the fold (`shadowed` in pack.rs gives it the span), rather than bring back
/// another integer. (A copy that passed 2^53 inside one step and came back below it, `k·k − k·k`,
/// is not seen: each `real m` of the source rounds as its copy does.) None if u reads an integer
/// component that has no copy.
fn rounded(u: &Expr, map: &[RealCopy], ints: &[u32]) -> Option<Expr> {
    use super::bot::mentions;
    let mut t = u.clone();
    let mut stack = vec![&mut t];
    while let Some(y) = stack.pop() {
        if let ExprKind::Var(v) = &y.kind {
            if let Some(&(_, c, r)) = map.iter().find(|m| m.0 == v.id) {
                *y = match r {
                    0 => super::lang::exact_int(prim(Prim::Round, vec![var(&Name::new("acc", c)).with_ty(Type::Real)]).with_ty(Type::Int)).with_ty(Type::Int),
                    // an array of integers: its copy brought back whole (`shadow_ints`'s `iv`)
                    _ => var(&Name::new("iv", c)).with_ty(nested(&Type::Int, r)),
                };
                continue;
            }
        }
        stack.extend(children_mut(y));
    }
    (!ints.iter().any(|&v| mentions(&t, v))).then_some(t)
}

/// A read `e ! u` at an index known only as a real ⟨u⟩ (an integer's real copy: `shadow_ints`), `f`
/// of it: `sum (build (length e) (\q -> f (e ! q) * (if real q == ⟨u⟩ then 1.0 else 0.0)))`, the
/// one-hot selection of §4.4's Index (as `real_int_reads`'s), O(length e); 0.0 out of range, where the
/// source stops. `e` a variable or a term of neither the integers nor the body's lets (read twice).
pub(super) fn masked_read(e: &Expr, u: Expr, f: &dyn Fn(Expr) -> Expr, fresh: &mut Fresh) -> Expr {
    let q = fresh.name("q");
    let elem = e.ty.as_array().cloned().unwrap_or(Type::Unknown);
    let at_q = f(prim(Prim::Index, vec![e.clone(), var(&q).with_ty(Type::Int)]).with_ty(elem));
    let hit = prim(Prim::Eq, vec![prim(Prim::ToReal, vec![var(&q).with_ty(Type::Int)]).with_ty(Type::Real), u]).with_ty(Type::Bool);
    let mask = if_(hit, real(1.0).with_ty(Type::Real), real(0.0).with_ty(Type::Real)).with_ty(Type::Real);
    let pick = prim(Prim::Mul, vec![at_q, mask]).with_ty(Type::Real);
    prim(Prim::Sum, vec![prim(Prim::Build, vec![length(e.clone()), lam(pvar(&q), pick)]).with_ty(Type::array(Type::Real))]).with_ty(Type::Real)
}

/// A condition of an integer step with its integer comparisons made comparisons of reals (`real_step`).
pub(super) fn real_test(c: &Expr, map: &[RealCopy], (ints, local): (&[u32], &[u32]), fresh: &mut Fresh) -> Option<Expr> {
    use super::bot::mentions;
    if !ints.iter().chain(local).any(|&v| mentions(c, v)) {
        return Some(c.clone());
    }
    match &c.kind {
        ExprKind::Prim(op @ (Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne), a) if a.len() == 2 && a.iter().all(|x| integer(x, ints)) => {
            Some(prim(*op, a.iter().map(|x| real_step(x, map, (ints, local), fresh)).collect::<Option<Vec<_>>>()?).with_ty(Type::Bool))
        }
        ExprKind::Prim(op @ (Prim::And | Prim::Or | Prim::Not), a) => Some(prim(*op, a.iter().map(|x| real_test(x, map, (ints, local), fresh)).collect::<Option<Vec<_>>>()?).with_ty(Type::Bool)),
        // a comparison of reals reading the integers (`xs ! i > s`)
        ExprKind::Prim(op @ (Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne), a) if a.len() == 2 && !a.iter().any(|x| integer(x, ints)) => Some(prim(*op, a.iter().map(|x| real_term(x, map, (ints, local), fresh)).collect::<Option<Vec<_>>>()?).with_ty(Type::Bool)),
        // any other test: on the copies brought back by §2's `round` (`rounded`)
        _ => rounded(c, map, ints),
    }
}

/// A real term of an integer step's condition with its integer reads made reads of the real copies
/// (`real_step`): `real u` as ⟨u⟩, `xs ! u` of an array of reals the masked read at ⟨u⟩.
pub(super) fn real_term(x: &Expr, map: &[RealCopy], (ints, local): (&[u32], &[u32]), fresh: &mut Fresh) -> Option<Expr> {
    use super::bot::mentions;
    let free = |x: &Expr| !ints.iter().chain(local).any(|&v| mentions(x, v));
    Some(match &x.kind {
        _ if free(x) => x.clone(),
        ExprKind::Prim(Prim::ToReal, a) => real_step(&a[0], map, (ints, local), fresh)?,
        ExprKind::Prim(Prim::Index, a) if a.len() == 2 && free(&a[0]) && a[0].ty.as_array() == Some(&Type::Real) => {
            let u = real_step(&a[1], map, (ints, local), fresh)?;
            masked_read(&a[0], u, &|y| y, fresh)
        }
        ExprKind::Prim(op @ (Prim::Add | Prim::Sub | Prim::Mul | Prim::Div | Prim::Neg), a) if x.ty == Type::Real => prim(*op, a.iter().map(|y| real_term(y, map, (ints, local), fresh)).collect::<Option<Vec<_>>>()?).with_ty(Type::Real),
        // any other real term: on the copies brought back by §2's `round` (`rounded`)
        _ => rounded(x, map, ints)?,
    })
}

/// The variables bound inside `t` (by a lambda, a let, a case); None when it has a `let rec`.
pub(super) fn bound_in(t: &Expr) -> Option<Vec<u32>> {
    let mut local = vec![];
    let mut stack = vec![t];
    while let Some(y) = stack.pop() {
        match &y.kind {
            ExprKind::Lam(_, p_x) => local.extend(p_x.0.names().into_iter().map(|x| x.id)), ExprKind::Let(p_x) => local.extend(p_x.0.names().into_iter().map(|x| x.id)),
            ExprKind::Case(c) => local.extend(c.1.names().into_iter().chain(c.3.names()).map(|x| x.id)),
            ExprKind::LetRec(..) => return None,
            _ => {}
        }
        each_child(y, &mut |c| stack.push(c));
    }
    Some(local)
}

/// In `t` (a real component's new value or a let it reads), each read of an integer component
/// (`ints`) that also meets a real component (`reals`) or a variable bound in `t` made a real term
/// of the integers' values, which `lift_int_reads` then lifts as a column of the integers' states
/// (its parts of the integers alone: `real k`, `real (k * k)`), since the reals' row holds reals
/// only (Fig. 8) and no real comes back to an integer:
/// - `e ! u` (a real read of e at an index u reading the integers): the masked sum
///   `let w = e in sum (build (length w) (\q -> w ! q * (if ⟨q⟩ == ⟨u⟩ then 1.0 else 0.0)))`, the one-hot
///   selection of §4.4's Index (its cotangent `oneHot`, the same), the integer primal in its
///   condition as §5.2's gather functions keep theirs ("it can only influence said result through
///   the discrete, integral results of that function", so it is not differentiated); O(length e)
///   per read, §4.4's cost, where a gather is O(1);
/// - `m ! u` of an array of arrays of reals (a row, rank r ≥ 1; met by a real component or a binder,
///   or not: an array is no column of `lift_int_reads`): each entry of the row the masked sum of
///   that entry of every row, `let w = m in build (length (w ! 0)) (\p -> sum (build (length w)
///   (\q -> w ! q ! p * mask q)))`, the dimensions those of the first row (regular, §3.2);
///   O(size m) per read;
/// - an integer comparison (`j < k`, `==`, ..): the same comparison of ⟨j⟩ and ⟨k⟩;
/// - `real u`: ⟨u⟩.
/// ⟨u⟩ (`as_real`) is `real` pushed through `+`, `-`, `*` and negation, exact on integers below
/// 2^53. An index out of range reads 0.0 here, where the source stops (its `!` is partial).
pub(super) fn real_int_reads(t: &mut Expr, inner: &Binds, (ints, reals): (&[u32], &[u32]), all: bool, fresh: &mut Fresh) {
    use super::bot::mentions;
    let Some(local) = bound_in(t) else { return };
    let whole = |x: &Expr| wrap(live(inner, x), x.clone());
    // a node reading the integers and a real component or a binder: not a term of the integers alone
    // (`all`: any node reading the integers, whose states are not there to make columns of)
    let mixed = |xs: &[&Expr]| {
        let ws: Vec<Expr> = xs.iter().map(|x| whole(x)).collect();
        ws.iter().any(|w| bare_int_use(w, ints)) && (all || ws.iter().any(|w| reals.iter().chain(&local).any(|&x| mentions(w, x))))
    };
    let mut stack = vec![t];
    while let Some(y) = stack.pop() {
        match &y.kind {
            // (an accumulator's variable is not typed here: the read's own type says it is a real)
            // a real or boolean term of the integers alone: `lift_int_reads` makes it a column
            _ if !all && matches!(y.ty, Type::Real | Type::Bool) && bare_int_use(&whole(y), ints) && !reals.iter().chain(&local).any(|&x| mentions(&whole(y), x)) => continue,
            // a row of an array of arrays is masked whatever it meets: an array is no column
            ExprKind::Prim(Prim::Index, a) if elem_rank(&y.ty).is_some() && bare_int_use(&whole(&a[1]), ints) && (y.ty != Type::Real || mixed(&[&a[0], &a[1]])) => {
                let r = elem_rank(&y.ty).unwrap_or(0);
                let ExprKind::Prim(_, a) = std::mem::replace(&mut y.kind, ExprKind::Int(0)) else { unreachable!() };
                let [e, u]: [Expr; 2] = a.into_iter().collect::<Vec<_>>().try_into().unwrap_or_else(|_| unreachable!());
                let (w, q) = (fresh.name("w"), fresh.name("q"));
                let wv = var(&w).with_ty(nested(&Type::Real, r + 1));
                let hit = prim(Prim::Eq, vec![as_real(var(&q).with_ty(Type::Int)), as_real(u)]).with_ty(Type::Bool);
                // the mask a constant 1.0 or 0.0 (its Delta zero) scaling the read: a cond between
                // the read and 0.0 would stack both (bot's B4) and carry both rows' Delta
                let one = if_(hit, real(1.0).with_ty(Type::Real), real(0.0).with_ty(Type::Real)).with_ty(Type::Real);
                // a row of an array of arrays (rank r ≥ 1): each of its entries (at p1 .. pr, its
                // dimensions those of the first row's first rows: regular, §3.2) the masked sum of
                // that entry of every row, `build d1 (\p1 -> .. sum (build (length w) (\q -> w ! q ! p1 .. * mask)))`
                let ps: Vec<Name> = (0..r).map(|_| fresh.name("p")).collect();
                let entry = ps.iter().enumerate().fold(prim(Prim::Index, vec![wv.clone(), var(&q).with_ty(Type::Int)]).with_ty(nested(&Type::Real, r)), |x, (d, p)| prim(Prim::Index, vec![x, var(p).with_ty(Type::Int)]).with_ty(nested(&Type::Real, r - d - 1)));
                let pick = prim(Prim::Mul, vec![entry, one]).with_ty(Type::Real);
                let mask = prim(Prim::Build, vec![length(wv.clone()), lam(pvar(&q), pick)]).with_ty(Type::array(Type::Real));
                let mut x = prim(Prim::Sum, vec![mask]).with_ty(Type::Real);
                for d in (0..r).rev() {
                    let first = (0..=d).fold(wv.clone(), |f, k| prim(Prim::Index, vec![f, int(0)]).with_ty(nested(&Type::Real, r - k)));
                    x = prim(Prim::Build, vec![length(first), lam(pvar(&ps[d]), x)]).with_ty(nested(&Type::Real, r - d));
                }
                *y = let_(pvar(&w), e, x).with_ty(nested(&Type::Real, r));
                continue;
            }
            ExprKind::Prim(Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne, a) if a.len() == 2 && a.iter().any(|x| integer(x, ints)) && mixed(&[&a[0], &a[1]]) => {
                let ExprKind::Prim(op, a) = std::mem::replace(&mut y.kind, ExprKind::Int(0)) else { unreachable!() };
                y.kind = ExprKind::Prim(op, a.into_iter().collect::<Vec<_>>().into_iter().map(as_real).collect());
                continue;
            }
            ExprKind::Prim(Prim::ToReal, a) if mixed(&[&a[0]]) => {
                let ExprKind::Prim(_, a) = std::mem::replace(&mut y.kind, ExprKind::Int(0)) else { unreachable!() };
                *y = as_real(a.into_iter().collect::<Vec<_>>().remove(0));
                continue;
            }
            _ => {}
        }
        stack.extend(children_mut(y));
    }
}

/// In `t` (a real component's new value or a let it reads), each `sum (build u (\j -> b))` of reals
/// whose size u reads an integer component (`ints`) and no real component nor a variable bound in
/// `t` other than binders of enclosing builds of fixed sizes (`j + k` inside `build 3 (\j -> ..)`)
/// made `sum (build (length shape) (\j -> b * (if real j < ⟨u⟩ then 1.0 else 0.0)))`: `sizes`
/// gets `shape`, u (with the lets of `inner` it reads) and those binders, `shape` an iota of u's
/// largest value over the integers' states and the binders' ranges, bound before the loop (`int_fold`). The paper's shapes are static, or
/// weaker, "all the intermediate values computed in a build1-lambda must have shapes that are
/// independent of the index at which the lambda is called" (§5, "Static shapes"): the loop body's
/// build has one size at every step, and a sum reads the entries past u as the zeros they are
/// masked to. ⟨u⟩'s `real k` is then a column of the integers' states (`read_as_reals`). A negative
/// u sums nothing, where the source stops.
pub(super) fn masked_sizes(t: &mut Expr, inner: &Binds, (ints, reals, i): (&[u32], &[u32], u32), sizes: &mut Vec<Size>, fresh: &mut Fresh) {
    use super::bot::mentions;
    let Some(local) = bound_in(t) else { return };
    let whole = |x: &Expr| wrap(live(inner, x), x.clone());
    // each node with the builds of a fixed size around it: (binder, size), as `binder_tables`
    let mut stack: Vec<(&mut Expr, Vec<(Name, Expr)>)> = vec![(t, vec![])];
    while let Some((y, around)) = stack.pop() {
        let hit = match &y.kind {
            ExprKind::Prim(Prim::Sum, a) if y.ty == Type::Real && a.len() == 1 => match &a[0].kind {
                ExprKind::Prim(Prim::Build, b) if b.len() == 2 && matches!(&b[1].kind, ExprKind::Lam(_, p) if matches!(&p.0, Pat::Var(..))) => {
                    let size = whole(&b[0]);
                    let others = reals.iter().chain(local.iter().filter(|&&x| around.iter().all(|(j, _)| j.id != x))).any(|&x| mentions(&size, x));
                    bare_int_use(&size, ints) && !others
                }
                _ => false,
            },
            _ => false,
        };
        if hit {
            let ExprKind::Prim(_, mut a) = std::mem::replace(&mut y.kind, ExprKind::Int(0)) else { unreachable!() };
            let ExprKind::Prim(_, b) = std::mem::replace(&mut a[0].kind, ExprKind::Int(0)) else { unreachable!() };
            let [u, f]: [Expr; 2] = b.into_iter().collect::<Vec<_>>().try_into().unwrap_or_else(|_| unreachable!());
            let ExprKind::Lam(kind, p_body) = f.kind else { unreachable!() };
            let (p, body) = *p_body;
            let Pat::Var(j, _) = &p else { unreachable!() };
            let shape = fresh.name("shape");
            let size = whole(&u);
            let binders: Vec<(Name, Expr)> = around.iter().filter(|(x, _)| mentions(&size, x.id)).cloned().collect();
            sizes.push((shape.clone(), size, binders));
            let below = prim(Prim::Lt, vec![as_real(var(j).with_ty(Type::Int)), as_real(u)]).with_ty(Type::Bool);
            let mask = if_(below, real(1.0).with_ty(Type::Real), real(0.0).with_ty(Type::Real)).with_ty(Type::Real);
            let body = prim(Prim::Mul, vec![body, mask]).with_ty(Type::Real);
            let f = Expr { kind: ExprKind::Lam(kind, Box::new((p, body))), ..f };
            let b = prim(Prim::Build, vec![length(var(&shape).with_ty(Type::array(Type::Int))), f]).with_ty(Type::array(Type::Real));
            *y = Expr { kind: ExprKind::Prim(Prim::Sum, vec![b].into()), ..std::mem::replace(y, unit()) };
        }
        // (read before the loop: not of the element either)
        let fixed = fixed_build(y, whole, |size| !bare_int_use(size, ints) && !reals.iter().chain(&local).chain(std::iter::once(&i)).any(|&x| mentions(size, x)));
        let mut inside = around.clone();
        inside.extend(fixed);
        for c in children_mut(y) {
            stack.push((c, inside.clone()));
        }
    }
}

/// A `masked_sizes` entry: the name of the iota of the largest size, the size, and the binders of
/// builds of fixed sizes it reads with their sizes (outermost first), over whose ranges it is largest too.
pub(super) type Size = (Name, Expr, Vec<(Name, Expr)>);

/// In `t` (a real component's new value or a let it reads), each `build u f` whose size u reads an
/// integer component (`ints`) fused with the operation consuming it, exactly: `map g (build u f)` is
/// `build u (\j -> g (f j))` (g's parameter substituted, or a let of its pattern), `length (build u f)` is u, `build u f ! e` is `f e` (where
/// the source stops out of range, this reads f there), `map2 g xs ys` of such a build and a variable
/// or another such build `build u (\j -> let x = xs ! j; y = ys ! j in g x y)`, its `!` then fused
/// (where the source stops at lengths that differ, this reads at j). A sum of such a build is then a sum of a build,
/// which `masked_sizes` masks to the largest size: the mask carried to the build's consumer. A build
/// of such a size used as an array otherwise (an array component's new value, a fold's elements)
/// stays, and is refused.
pub(super) fn fuse_sized_builds(t: &mut Expr, inner: &Binds, ints: &[u32], fresh: &mut Fresh) {
    let sized = |b: &Expr| match &b.kind {
        ExprKind::Prim(Prim::Build, a) if a.len() == 2 && matches!(&a[1].kind, ExprKind::Lam(_, p) if matches!(&p.0, Pat::Var(..))) => bare_int_use(&wrap(live(inner, &a[0]), a[0].clone()), ints),
        _ => false,
    };
    // a build's size and its lambda's binder and body
    fn parts(b: Expr) -> Option<(Expr, Name, Expr)> {
        let ExprKind::Prim(_, a) = b.kind else { return None };
        let [u, f]: [Expr; 2] = a.into_iter().collect::<Vec<_>>().try_into().ok()?;
        let ExprKind::Lam(_, p_body) = f.kind else { return None };
        let (p, body) = *p_body;
        let Pat::Var(j, _) = &p else { return None };
        Some((u, j.clone(), body))
    }
    // until none is left: a fused map may be the build another consumer meets
    let mut changed = true;
    while changed {
        changed = false;
        let mut stack = vec![&mut *t];
        while let Some(y) = stack.pop() {
            let fused = match &y.kind {
                ExprKind::Prim(Prim::Map, a) if a.len() == 2 && sized(&a[1]) && matches!(&a[0].kind, ExprKind::Lam(..)) => true,
                ExprKind::Prim(Prim::Length | Prim::Index, a) if !a.is_empty() && sized(&a[0]) => true,
                // both arrays of a map2 read at j: the sized build's size, the other read (a variable,
                // or a build fused by its index)
                ExprKind::Prim(Prim::Map2, a) if a.len() == 3 && (sized(&a[1]) || sized(&a[2])) && a[1..].iter().all(|x| sized(x) || matches!(x.kind, ExprKind::Var(_))) && matches!(&a[0].kind, ExprKind::Lam(_, g) if matches!(g.1.kind, ExprKind::Lam(..))) => true,
                _ => false,
            };
            if fused {
                let ty = y.ty.clone();
                let ExprKind::Prim(op, a) = std::mem::replace(&mut y.kind, ExprKind::Int(0)) else { unreachable!() };
                let mut a = a.into_iter().collect::<Vec<_>>();
                let new = match op {
                    Prim::Map => {
                        let (g, b) = (a.remove(0), a.remove(0));
                        let ExprKind::Lam(_, pg_gb) = g.kind else { unreachable!() };
                        let (pg, gb) = *pg_gb;
                        let Some((u, j, fb)) = parts(b) else { unreachable!() };
                        let elem = ty.as_array().cloned().unwrap_or(Type::Unknown);
                        let body = match &pg {
                            Pat::Var(x, _) => super::bot::subst(&gb, x.id, &fb, fresh),
                            _ => let_(pg.clone(), fb, gb).with_ty(elem),
                        };
                        prim(Prim::Build, vec![u, lam(pvar(&j), body)])
                    }
                    Prim::Length => parts(a.remove(0)).map(|p| p.0).unwrap_or_else(|| unreachable!()),
                    Prim::Map2 => {
                        let (g, xs, ys) = (a.remove(0), a.remove(0), a.remove(0));
                        let u = [&xs, &ys].into_iter().find(|x| sized(x)).and_then(|b| match &b.kind {
                            ExprKind::Prim(_, p) => p.first().cloned(),
                            _ => None,
                        });
                        let Some(u) = u else { unreachable!() };
                        let j = fresh.name("j");
                        let elem = ty.as_array().cloned().unwrap_or(Type::Unknown);
                        let ExprKind::Lam(_, px_g1) = g.kind else { unreachable!() };
                        let (px, g1) = *px_g1;
                        let ExprKind::Lam(_, py_gb) = g1.kind else { unreachable!() };
                        let (py, gb) = *py_gb;
                        let read = |x: Expr| {
                            let t = x.ty.as_array().cloned().unwrap_or(Type::Unknown);
                            prim(Prim::Index, vec![x, var(&j).with_ty(Type::Int)]).with_ty(t)
                        };
                        let body = let_(py.clone(), read(ys), gb).with_ty(elem.clone());
                        let body = let_(px.clone(), read(xs), body).with_ty(elem);
                        prim(Prim::Build, vec![u, lam(pvar(&j), body)])
                    }
                    _ => {
                        let (b, e) = (a.remove(0), a.remove(0));
                        let Some((_, j, fb)) = parts(b) else { unreachable!() };
                        super::bot::subst(&fb, j.id, &e, fresh)
                    }
                };
                let span = y.span;
                *y = Expr { ty, ..at(new, span) };
                changed = true;
                continue;
            }
            stack.extend(children_mut(y));
        }
    }
}

/// Whether `x` is an integer term: typed so, an integer component (whose variable is not typed
/// here), or integer arithmetic on one.
pub(super) fn integer(x: &Expr, ints: &[u32]) -> bool {
    match &x.kind {
        _ if x.ty == Type::Int => true,
        ExprKind::Var(v) => ints.contains(&v.id),
        ExprKind::Prim(Prim::Add | Prim::Sub | Prim::Mul | Prim::Div | Prim::Mod | Prim::Neg, a) if x.ty == Type::Unknown => a.iter().any(|y| integer(y, ints)),
        _ => false,
    }
}

/// An integer term as a real, `real` pushed through `+`, `-`, `*` and negation (exact below 2^53):
/// `real (j + k)` is `real j + real k`, whose `real k` the reals' loop reads as a column.
pub(super) fn as_real(u: Expr) -> Expr {
    match u.kind {
        ExprKind::Int(k) => real(k as f64).with_ty(Type::Real),
        ExprKind::Prim(op @ (Prim::Add | Prim::Sub | Prim::Mul | Prim::Neg), a) => prim(op, a.into_iter().collect::<Vec<_>>().into_iter().map(as_real).collect()).with_ty(Type::Real),
        kind => prim(Prim::ToReal, vec![Expr { kind, ..u }]).with_ty(Type::Real),
    }
}

/// Whether `t` reads an integer component (`ints`) other than as `real m`.
pub(super) fn bare_int_use(t: &Expr, ints: &[u32]) -> bool {
    let mut stack = vec![t];
    while let Some(y) = stack.pop() {
        match &y.kind {
            ExprKind::Prim(Prim::ToReal, a) if matches!(&a[0].kind, ExprKind::Var(v) if ints.contains(&v.id)) => continue,
            ExprKind::Var(v) if ints.contains(&v.id) => return true,
            _ => each_child(y, &mut |c| stack.push(c)),
        }
    }
    false
}
