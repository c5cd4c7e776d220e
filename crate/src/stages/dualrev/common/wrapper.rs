//! The polytypic wrapper pieces of the chain: `Interleave`, which hands each input real its ID and
//! backpropagator (Figs. 7–9, passed down; Fig. 10, with a rebuild function up), `Deinterleave`,
//! which splits the output into its primal and one backpropagator (Fig. 7), the monoids a
//! backpropagator's parts are summed in, and the wrappers of Figs. 8–10.

use super::*;
use crate::build::*;
use crate::ir::*;
use crate::kit::polytypic::has_real;

// ---------------------------------------------------------------------------------------------
// Interleave: each input real gets its ID and backpropagator

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
        Type::Sum(lr) => {
            let (l, r) = &**lr;
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
        // Arrays (not in the paper, whose language has none; the array paper §4.1's arrays of dual
        // numbers): element k gets the backpropagator that puts its cotangent at k of an array of zeros
        // (Figs. 7–8), or updates element k (Fig. 9). As with tuples, summing these one-hot arrays
        // costs O(n) each: the §8–9 collectors are what make that cheap.
        t if t.as_array().is_some() => {
            let elem = t.as_array().expect("checked");
            let (xs, k) = (fr.name("xs"), fr.name("k"));
            let len = || prim(Prim::Length, vec![var(&xs)]);
            let at = |a: &Name, i: &Name| prim(Prim::Index, vec![var(a), var(i)]);
            let dk = match mode {
                // linλz. d (build (length xs) (λj. if j == k then z else zeroOf (xs ! j)))
                Down::Naive | Down::Staged => {
                    let (z, j) = (fr.name("z"), fr.name("j"));
                    let pick = if_(prim(Prim::Eq, vec![var(&j), var(&k)]), var(&z), app(builtin("zeroOf"), at(&xs, &j)));
                    let body = app(d.clone(), prim(Prim::Build, vec![len(), lam(pvar(&j), pick)]));
                    linlam(pvar(&z), if *elem == Type::Real { app(builtin("counted"), body) } else { body })
                }
                // λf. d (λv. build (length v) (λj. if j == k then f (v ! j) else v ! j))
                Down::Cayley => {
                    let (f, v, j) = (fr.name("f"), fr.name("v"), fr.name("j"));
                    let pick = if_(prim(Prim::Eq, vec![var(&j), var(&k)]), app(var(&f), at(&v, &j)), at(&v, &j));
                    let upd = lam(pvar(&v), prim(Prim::Build, vec![prim(Prim::Length, vec![var(&v)]), lam(pvar(&j), pick)]));
                    lam(pvar(&f), app(d.clone(), upd))
                }
            };
            let each = lam(pvar(&k), interleave_down(elem, at(&xs, &k), dk, fr, mode));
            let all = if mode == Down::Naive { prim(Prim::Build, vec![len(), each]) } else { apps(builtin("buildM"), [len(), each]) };
            let_(pvar(&xs), x, all)
        }
        // Interleave_Z = λ(n, d). n
        _ => ret(x),
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
        Type::Sum(lr) => {
            let (l, r) = &**lr;
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
        // Arrays: do ps ← buildM (length xs) (λk. Interleave (xs ! k)); pure (map fst ps, λa. map (λp. snd p a) ps)
        t if t.as_array().is_some() => {
            let elem = t.as_array().expect("checked");
            let (xs, k, ps, p1, p2, a) = (fr.name("xs"), fr.name("k"), fr.name("ps"), fr.name("p"), fr.name("p"), fr.name("a"));
            let each = lam(pvar(&k), interleave_up(elem, prim(Prim::Index, vec![var(&xs), var(&k)]), fr, leaf));
            let made = apps(builtin("buildM"), [prim(Prim::Length, vec![var(&xs)]), each]);
            let primals = prim(Prim::Map, vec![lam(pvar(&p1), fst(var(&p1))), var(&ps)]);
            let getter = lam(pvar(&a), prim(Prim::Map, vec![lam(pvar(&p2), app(snd(var(&p2)), var(&a))), var(&ps)]));
            let_(pvar(&xs), x, mbind(pvar(&ps), made, pure(pair(primals, getter))))
        }
        // Interleave_Z = λn. pure (n, λa. n)
        _ => {
            let a = fr.name("a");
            pure(pair(x.clone(), lam(pvar(&a), x)))
        }
    }
}

/// Fig. 10's `Interleave⁴_R = λx. genID >>= λi. pure ((x, (i, bp i)), λa. a @ i)`: the real's ID, its
/// backpropagator (`bp`, given the ID) and the getter of its gradient from the frozen array.
pub fn leaf_at(x: Expr, fr: &mut Fresh, bp: &dyn Fn(Expr, &mut Fresh) -> Expr) -> Expr {
    let (i, a) = (fr.name("i"), fr.name("a"));
    let d = pair(x, pair(var(&i), bp(var(&i), fr)));
    bind(pvar(&i), builtin("genID"), pure(pair(d, lam(pvar(&a), apps(builtin("at"), [var(&a), var(&i)])))))
}

// ---------------------------------------------------------------------------------------------
// Deinterleave: the output split into its primal and one backpropagator

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
        Type::Sum(ab) => {
            let (a, b) = &**ab;
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
        // Arrays: let ps = map (λy. Deinterleave y) ys in (map fst ps, linλz. the parts (snd (ps ! k)) (z ! k)
        // summed left to right: fold (λacc k. acc + snd (ps ! k) (z ! k)) 0 (build (length ps) (λi. i)))
        t if t.as_array().is_some() => {
            let elem = t.as_array().expect("checked");
            let (ys, ps, y, p, z, acc, k, i) =
                (fr.name("ys"), fr.name("ps"), fr.name("y"), fr.name("p"), fr.name("z"), fr.name("acc"), fr.name("k"), fr.name("i"));
            let each = lam(pvar(&y), deinterleave(elem, var(&y), fr, leaf, combine));
            let primals = prim(Prim::Map, vec![lam(pvar(&p), fst(var(&p))), var(&ps)]);
            let part = app(snd(prim(Prim::Index, vec![var(&ps), var(&k)])), prim(Prim::Index, vec![var(&z), var(&k)]));
            let step = lam(pvar(&acc), lam(pvar(&k), combine(vec![var(&acc), part], fr)));
            let indices = prim(Prim::Build, vec![prim(Prim::Length, vec![var(&ps)]), lam(pvar(&i), var(&i))]);
            let bp = linlam(pvar(&z), prim(Prim::Fold, vec![step, combine(vec![], fr), indices]));
            let_(pvar(&ys), e, let_(pvar(&ps), prim(Prim::Map, vec![each, var(&ys)]), pair(primals, bp)))
        }
        // Deinterleave_Z = λn. (n, linλz. 0) ; Deinterleave_() likewise
        _ => {
            let z = fr.name("z");
            pair(e, linlam(pvar(&z), combine(vec![], fr)))
        }
    }
}

/// Deinterleave's leaf from Fig. 8 to §9: `(x, (i, d)) ↦ (x, d)`, the ID ignored.
pub fn leaf_ignore_id(e: Expr, fr: &mut Fresh) -> Expr {
    let (p, i, bp) = (fr.name("x"), fr.name("i"), fr.name("d"));
    let_(ppair(pvar(&p), ppair(pvar(&i), pvar(&bp))), e, pair(var(&p), var(&bp)))
}

/// Deinterleave's leaf from §10.1 on: `(x, d) ↦ (x, SCall d)`, the output's calls staged, not made
/// directly (`id` names what the second half is: `d`, or an ID `i` on a tape).
pub fn leaf_scall(id: &'static str) -> impl Fn(Expr, &mut Fresh) -> Expr {
    move |e, fr| {
        let (p, d) = (fr.name("x"), fr.name(id));
        let_(ppair(pvar(&p), pvar(&d)), e, pair(var(&p), app(builtin("SCall"), var(&d))))
    }
}

// ---------------------------------------------------------------------------------------------
// The monoids a backpropagator's parts are summed in

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

// ---------------------------------------------------------------------------------------------
// The wrappers

/// The wrapper of Figs. 8–9, `Wrap[λx. t] = λx. let (x, i) = Interleave_σ (x, cot) 0 in let (y, d) =
/// Deinterleave_τ (fst (D_σ[t] i)) in (y, linλz. SResolve (d z))`; ours takes the output cotangent too:
/// `grad (x, dy) = let (y, d) = runIDs (do x' ← interleave (x, cot); y ← main x'; pure (deinterleave y))
/// in (y, SResolve (d dy))`.
pub fn wrapper_fig8(out: &Program, fr: &mut Fresh, cot: &dyn Fn(&mut Fresh) -> Expr) -> Expr {
    let (x, dy, yv, dv, x2) = (fr.name("x"), fr.name("dy"), fr.name("y"), fr.name("d"), fr.name("x'"));
    let cot = cot(fr);
    let m = bind(
        pvar(&x2),
        app(global("interleave"), pair(var(&x), cot)),
        bind(pvar(&yv), run_main(out, var(&x2), fr), pure(app(global("deinterleave"), var(&yv)))),
    );
    let body = let_(ppair(pvar(&yv), pvar(&dv)), app(builtin("runIDs"), m), pair(var(&yv), app(builtin("SResolve"), app(var(&dv), var(&dy)))));
    lam(ppair(pvar(&x), pvar(&dy)), body)
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
