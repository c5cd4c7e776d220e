//! D′ (§6.2, Fig. 13) and the dual-arrays transform D (§6.1, §6.3, Figs. 14–15) over bot's output,
//! and the wrapper of §6.5. D[t] : IdGen (primal, Delta) for a term with real elements; D′ keeps a
//! discrete term as it is, reading the primal (`fst x`) of each free dual variable.
//!
//! Decisions (notes §8):
//! - IdGen is the IR's monad `M`, run in direct style: `id ← genID ()`; `runIds` starts the supply.
//! - A broadcast op's Delta is Fig. 15's `Add (Scale ∂1 d1) (Scale ∂2 d2)` with the partials of
//!   the primitive's row (deriv.rs) lifted to its rank (a partial that is an argument is that
//!   argument's primal, as in Fig. 15; one that is a constant scales by the scalar); ∂ = 1 is no
//!   Scale.
//! - `cond` with real branches (§8.3): both branches' (primal, Delta) pairs are computed (strict)
//!   and the pair is selected.
//! - Constants (§8.14): a real constant is `(c, Zero c)`; integer and boolean terms go through D′.
//! - Input k is main's k-th parameter; one without a cotangent gets zeros (§8.13), integer leaves
//!   are returned as they are.

use super::lang::*;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use rustc_hash::FxHashSet as HashSet;

/// Whether the elements of `t` are real (an `Array^n R`). An element type left open is real: bot's
/// output may move arrays without arithmetic (E9), so main's body stays polymorphic where its stated
/// type `S → T` instantiates it at the input's reals.
pub fn is_r(t: &Type) -> bool {
    let mut t = t;
    while let Some(e) = t.as_array() {
        t = e;
    }
    matches!(t, Type::Real | Type::Var(_))
}

/// Whether `t` holds no reals at all: integers, booleans, arrays of them (a nested tuple may hold
/// reals beside its integers, and goes through D).
fn is_discrete(t: &Type) -> bool {
    let mut t = t;
    while let Some(e) = t.as_array() {
        t = e;
    }
    matches!(t, Type::Int | Type::Bool | Type::Unit)
}

pub struct Dx<'a> {
    pub fresh: &'a mut Fresh,
    /// The variables bound to (primal, Delta) pairs.
    pub dual: HashSet<u32>,
}

fn err(e: &Expr, what: &str) -> Diagnostic {
    let shown = crate::print::print_expr(e, &crate::print::PrintOptions::unicode());
    Diagnostic::error(e.span, format!("the dual-arrays transform D (Figs. 14–15) has no rule for {what}: {shown} : {:?}", e.ty)).refused()
}

/// `do (x, d) ← m; k`
fn bind_pair(x: &Name, d: &Name, m: Expr, k: Expr) -> Expr {
    bind(ppair(pvar(x), pvar(d)), m, k)
}

impl Dx<'_> {
    /// D′_Γ[t]: the free dual variables read as their primals.
    pub fn d_prime(&self, e: &Expr) -> Expr {
        let mut out = e.clone();
        let mut stack = vec![&mut out];
        while let Some(y) = stack.pop() {
            if let ExprKind::Var(n) = &y.kind {
                if self.dual.contains(&n.id) {
                    *y = fst(var(n));
                }
                continue;
            }
            stack.extend(children_mut(y));
        }
        out
    }

    /// `pure (D′[t], Zero D′[t])` for a discrete component of main's tuple output.
    fn discrete(&mut self, t: &Expr) -> Expr {
        let y = self.fresh.name("n");
        let_(pvar(&y), self.d_prime(t), pure(pair(var(&y), app(builtin("Zero"), var(&y)))))
    }

    /// `do id ← genID (); pure (primal, Share id delta)`
    fn shared(&mut self, primal: Expr, delta: Expr) -> Expr {
        let id = self.fresh.name("id");
        bind(pvar(&id), app(builtin("genID"), unit()), pure(pair(primal, apps(builtin("Share"), [var(&id), delta]))))
    }

    /// D[t] for a term with real elements.
    pub fn d(&mut self, e: &Expr) -> Result<Expr, Diagnostic> {
        // a let chain is walked in a loop (D[let x = u in v] = do x ← D[u]; D[v], Fig. 14)
        let mut links: Vec<(Name, Expr, bool)> = vec![];
        let mut cur = e;
        while let ExprKind::Let(pat_rhs_body) = &cur.kind {
            let (pat, rhs_body) = &**pat_rhs_body;
            let (rhs, body) = rhs_body;
            let Pat::Var(x, _) = pat else { break };
            let r = is_r(&rhs.ty);
            let rhs2 = if r { self.d(rhs)? } else { self.d_prime(rhs) };
            if r {
                self.dual.insert(x.id);
            }
            links.push((x.clone(), rhs2, r));
            cur = body;
        }
        let mut out = self.d_tail(cur)?;
        for (x, rhs, r) in links.into_iter().rev() {
            out = if r { bind(pvar(&x), rhs, out) } else { let_(pvar(&x), rhs, out) };
        }
        Ok(out)
    }

    fn d_tail(&mut self, e: &Expr) -> Result<Expr, Diagnostic> {
        // main's tuple output (tuples.rs keeps one only there): D of each component, the primals and
        // the Deltas paired up as tuples, which reversePass seeds part by part
        if let ExprKind::Tuple(es) = &e.kind {
            // an integer component (`length xs`) has no cotangent: D′ keeps it as it is and its
            // Delta is `Zero` (Fig. 12's Delta of what depends on no input; §8.14 gives constants
            // the same), so reversePass sends nothing down from its part of the seed and its primal
            // is returned as forward mode returns it
            let ms = es
                .iter()
                .map(|t| if is_discrete(&t.ty) { Ok(self.discrete(t)) } else { self.d(t) })
                .collect::<Result<Vec<_>, _>>()?;
            let names: Vec<(Name, Name)> = es.iter().map(|_| (self.fresh.name("y"), self.fresh.name("dy"))).collect();
            let mut out = pure(pair(tuple(names.iter().map(|n| var(&n.0)).collect()), tuple(names.iter().map(|n| var(&n.1)).collect())));
            for (m, (x, dd)) in ms.into_iter().zip(names).rev() {
                out = bind_pair(&x, &dd, m, out);
            }
            return Ok(out);
        }
        if !is_r(&e.ty) {
            return Err(err(e, "a term without real elements"));
        }
        let mut out = match view(e) {
            Core::Var(x) if self.dual.contains(&x.id) => pure(var(x)),
            Core::Var(_) | Core::Const => pure(pair(e.clone(), app(builtin("Zero"), e.clone()))),
            Core::Lit(ts) if ts.iter().all(|t| !has_var(t)) => pure(pair(e.clone(), app(builtin("Zero"), e.clone()))),
            Core::Op(ops) => self.d_op(e, ops)?,
            Core::Index { t, u } => {
                let (x, dd) = (self.fresh.name("x"), self.fresh.name("d"));
                let m = self.d(t)?;
                let u2 = self.d_prime(u);
                let k = self.shared(index(var(&x), u2.clone()), apps(builtin("Index"), [var(&dd), u2]));
                bind_pair(&x, &dd, m, k)
            }
            Core::SumOuter(t) => {
                let rank1 = matches!(e.kind, ExprKind::Prim(Prim::Sum, _));
                self.unary(t, move |x| if rank1 { prim(Prim::Sum, vec![x]) } else { sum_outer(x) }, |d| app(builtin("SumOuter"), d))?
            }
            Core::Replicate(k, t) => {
                let k2 = self.d_prime(k);
                let k3 = k2.clone();
                self.unary(t, move |x| replicate(k2, x), move |d| apps(builtin("Replicate"), [k3, d]))?
            }
            Core::Tr(p, t) => {
                let p2 = p.clone();
                self.unary(t, move |x| tr(&p, x), move |d| apps(builtin("Transpose"), [Expr::gen(ExprKind::Array(p2.iter().map(|&k| int(k as i64)).collect())), d]))?
            }
            Core::Gather { t, .. } | Core::Scatter { t, .. } => {
                // the same application with x for t; its Delta: Gather/Scatter sizes d f
                let ExprKind::App(head_f) = &e.kind else { return Err(err(e, "this gather")) };
                let (head, f) = &**head_f;
                let ExprKind::App(head2_x) = &head.kind else { return Err(err(e, "this gather")) };
                let (head2, _) = &**head2_x;
                let ExprKind::App(op_sizes) = &head2.kind else { return Err(err(e, "this gather")) };
                let (op, sizes) = &**op_sizes;
                let ctor = if matches!(view(e), Core::Gather { .. }) { "Gather" } else { "Scatter" };
                let (sizes, f, op) = (self.d_prime(sizes), self.d_prime(f), op.clone());
                let (s2, f2) = (sizes.clone(), f.clone());
                self.unary(t, move |x| apps(op, [sizes, x, f]), move |d| apps(builtin(ctor), [s2, d, f2]))?
            }
            Core::Lit(ts) => {
                let mut names = vec![];
                let mut ms = vec![];
                for t in ts {
                    let (x, dd) = (self.fresh.name("x"), self.fresh.name("d"));
                    ms.push(self.d(t)?);
                    names.push((x, dd));
                }
                let primal = Expr::gen(ExprKind::Array(names.iter().map(|(x, _)| var(x)).collect()));
                let delta = app(builtin("LitArray"), Expr::gen(ExprKind::Array(names.iter().map(|(_, d)| var(d)).collect())));
                let mut out = self.shared(primal, delta);
                for ((x, dd), m) in names.iter().zip(ms).rev() {
                    out = bind_pair(x, dd, m, out);
                }
                out
            }
            Core::Cond(b, u, v) => {
                let (p, q) = (self.fresh.name("p"), self.fresh.name("q"));
                let (mu, mv) = (self.d(u)?, self.d(v)?);
                let b2 = self.d_prime(b);
                bind(pvar(&p), mu, bind(pvar(&q), mv, pure(cond(b2, var(&p), var(&q)))))
            }
            Core::Let(..) => self.d(e)?,
            Core::Scanl { f, z, xs } => self.d_scanl(e, f, z, xs)?,
            _ => return Err(err(e, "this construct")),
        };
        // D's terms point at the term they come from (bot's output carries the source's spans), so a
        // run-time error in the forward pass (a ragged `tr`) gets the user's line
        crate::ir::locate(&mut out, e.span);
        Ok(out)
    }

    fn unary(&mut self, t: &Expr, primal: impl FnOnce(Expr) -> Expr, delta: impl FnOnce(Expr) -> Expr) -> Result<Expr, Diagnostic> {
        let (x, dd) = (self.fresh.name("x"), self.fresh.name("d"));
        let m = self.d(t)?;
        let k = self.shared(primal(var(&x)), delta(var(&dd)));
        Ok(bind_pair(&x, &dd, m, k))
    }

    /// Fig. 15: `do (x1,d1) ← D[t1]; (x2,d2) ← D[t2]; id ← genID; return (x1 op x2, Share id (Add (Scale ∂1 d1) (Scale ∂2 d2)))`.
    fn d_op(&mut self, e: &Expr, ops: Vec<&Expr>) -> Result<Expr, Diagnostic> {
        let (scalar, rank) = scalar_core(e).ok_or_else(|| err(e, "this operation"))?;
        let ExprKind::Prim(p, _) = &scalar.kind else { return Err(err(e, "this operation")) };
        let mut binds = vec![];
        let mut primals = vec![];
        let mut deltas: Vec<Option<Name>> = vec![];
        for o in &ops {
            if is_r(&o.ty) {
                let (x, dd) = (self.fresh.name("x"), self.fresh.name("d"));
                binds.push((x.clone(), dd.clone(), self.d(o)?));
                primals.push(var(&x));
                deltas.push(Some(dd));
            } else {
                primals.push(self.d_prime(o));
                deltas.push(None);
            }
        }
        let y = with_operands(e, primals.clone());
        // the scalar partials, at scalar parameters ps, lifted to the op's rank
        let ps: Vec<Name> = (0..ops.len()).map(|k| self.fresh.name(["u", "v", "w"].get(k).copied().unwrap_or("w"))).collect();
        let ys = prim(*p, ps.iter().map(var).collect());
        let rule = crate::deriv::rule(*p, &ps.iter().map(var).collect::<Vec<_>>(), &ys);
        let mut terms = vec![];
        if let Some(rule) = rule {
            for (k, part) in rule.partials.iter().enumerate() {
                let Some(dd) = &deltas[k] else { continue };
                let t = match part {
                    crate::deriv::Partial::One => var(dd),
                    crate::deriv::Partial::MinusOne => apps(builtin("Scale"), [real(-1.0), var(dd)]),
                    crate::deriv::Partial::Times(c) => {
                        let c = subst_result(c, &ys);
                        apps(builtin("Scale"), [lift(c, &ps, &primals, rank, self.fresh), var(dd)])
                    }
                };
                terms.push(t);
            }
        }
        let delta = terms.into_iter().reduce(|a, b| apps(builtin("Add"), [a, b]));
        let mut out = match delta {
            Some(delta) => self.shared(y, delta),
            None => pure(pair(y.clone(), app(builtin("Zero"), y))),
        };
        for (x, dd, m) in binds.into_iter().rev() {
            out = bind_pair(&x, &dd, m, out);
        }
        Ok(out)
    }
}

fn has_var(e: &Expr) -> bool {
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        if matches!(x.kind, ExprKind::Var(_)) {
            return true;
        }
        each_child(x, &mut |c| stack.push(c));
    }
    false
}

/// The scalar primitive at the core of a broadcast op, and the op's rank.
fn scalar_core(e: &Expr) -> Option<(&Expr, usize)> {
    let mut cur = e;
    let mut rank = 0;
    loop {
        match &cur.kind {
            ExprKind::Prim(p, _) if scalar_op(*p) => return Some((cur, rank)),
            ExprKind::Prim(Prim::Map | Prim::Map2, args) => {
                cur = lam_params(&args[0])?.1;
                rank += 1;
            }
            _ => return None,
        }
    }
}

/// A partial that mentions the result `y` (the row's `a.y()`): y is the op on the parameters again.
fn subst_result(c: &Expr, ys: &Expr) -> Expr {
    // deriv's partials name the result by an expression equal to `ys` (the row's `y`); nothing to do
    // when it is `ys` itself, which is already the op on the parameters
    let _ = ys;
    c.clone()
}

/// The scalar expression `c` over `ps` at rank `rank` over the primals: an argument's primal where
/// `c` is that parameter, the scalar itself where it mentions none, else nested maps.
fn lift(c: Expr, ps: &[Name], primals: &[Expr], rank: usize, fresh: &mut Fresh) -> Expr {
    if let ExprKind::Var(x) = &c.kind {
        if let Some(k) = ps.iter().position(|p| p == x) {
            return primals[k].clone();
        }
    }
    let used: Vec<usize> = (0..ps.len()).filter(|&k| super::bot::mentions(&c, ps[k].id)).collect();
    if used.is_empty() {
        return c;
    }
    let mut params: Vec<Name> = used.iter().map(|&k| ps[k].clone()).collect();
    let mut body = c;
    for _ in 0..rank {
        let outer: Vec<Name> = params.iter().map(|p| fresh.name(&p.text)).collect();
        let f = params.iter().rev().fold(body, |b, p| lam(pvar(p), b));
        let op = if params.len() == 1 { Prim::Map } else { Prim::Map2 };
        body = prim(op, std::iter::once(f).chain(outer.iter().map(var)).collect());
        params = outer;
    }
    // params now stand for the primals of the used arguments
    let mut out = body;
    for (p, &k) in params.iter().zip(&used) {
        out = super::bot::subst(&out, p.id, &primals[k], fresh);
    }
    out
}

/// The wrapper of §6.5: `grad (input, seed)` runs D[t] with input k as `(x_k, Input k x_k)`, then the
/// reverse pass from `seed`, and returns (primal, gradient in the input's shape).
pub fn wrapper(main: &Expr, output_type: &Type, fresh: &mut Fresh) -> Result<Expr, Diagnostic> {
    let ExprKind::Lam(_, pat_body) = &main.kind else { return Err(Diagnostic::error(main.span, "main is not a function")) };
    let (pat, body) = &**pat_body;
    // main's arrays of tuples taken apart at the boundary (boundary.rs): each component array is an
    // input of its own, and the array of tuples only the primal they are read from
    let (gets, body) = super::boundary::leading_gets(body);
    // main's output arrays of tuples: the core term returns their leaves as one flat tuple, and bot's
    // `let (y1, …, yn) = core in …` puts them back into the user's shape (boundary.rs), which the
    // primal reuses; the seed is taken apart into the leaves' parts the same way
    let soa_out = super::boundary::flat_output(output_type);
    let (body, conv) = match super::boundary::parse_output(body) {
        Some((core, _)) if soa_out => (core, Some(body)),
        _ if soa_out => return Err(Diagnostic::error(body.span, "main's output holds arrays of tuples but its body does not end in their conversion (boundary.rs)")),
        _ => (body, None),
    };
    let parts: Vec<(Name, Vec<i64>, Name)> = gets.into_iter().map(|g| (g.name.clone(), g.path, g.input.clone())).collect();
    // name every component (a `_` gets a name: its gradient is returned too)
    let mut pat: Pat = pat.clone();
    let mut stack = vec![&mut pat];
    while let Some(p) = stack.pop() {
        match p {
            Pat::Wild(s) => *p = Pat::Var(fresh.name("_x"), *s),
            Pat::Tuple(ps, _) => stack.extend(ps.iter_mut()),
            _ => {}
        }
    }
    let (input, seed, y, dd, g) = (fresh.name("input"), fresh.name("seed"), fresh.name("y"), fresh.name("d"), fresh.name("g"));
    // the inputs in the pattern's order, an array of tuples replaced by its component arrays (so the
    // gradient, zipped back in that order, reads the shares in the order the reverse pass made them)
    let names: Vec<Name> = pat.names().into_iter().cloned().collect();
    let (mut vars, mut types) = (vec![], vec![]);
    let whole: rustc_hash::FxHashMap<u32, (Name, Type)> = names
        .iter()
        .zip(param_types(main, &names))
        .filter_map(|(x, t)| parts.iter().any(|p| p.2 == *x).then(|| (x.id, (fresh.name(&x.text), t))))
        .collect();
    for (x, t) in names.iter().zip(param_types(main, &names)) {
        if !whole.contains_key(&x.id) {
            vars.push(x.clone());
            types.push(t);
            continue;
        }
        for (c, path, _) in parts.iter().filter(|p| p.2 == *x) {
            vars.push(c.clone());
            types.push(super::boundary::components(&t).into_iter().find(|(q, _)| q == path).map_or(Type::Unknown, |(_, t)| t));
        }
    }
    // the primal inputs get their own names outside runIds; inside, the source's names are the dual
    // inputs `(x, Input k x)` (for a discrete input, the primal itself)
    let outer: Vec<Name> = vars.iter().map(|x| fresh.name(&x.text)).collect();
    let mut opat = pat.clone();
    let mut stack = vec![&mut opat];
    while let Some(p) = stack.pop() {
        match p {
            Pat::Var(x, _) => match whole.get(&x.id) {
                Some((o, _)) => *x = o.clone(),
                None => *x = outer[vars.iter().position(|v| v == x).unwrap_or(0)].clone(),
            },
            Pat::Tuple(ps, _) => stack.extend(ps.iter_mut()),
            _ => {}
        }
    }
    let mut dx = Dx { fresh, dual: HashSet::default() };
    let mut inner = Vec::new();
    for (k, (x, t)) in vars.iter().zip(&types).enumerate() {
        let o = &outer[k];
        if is_r(t) {
            dx.dual.insert(x.id);
            inner.push((x.clone(), pair(var(o), apps(builtin("Input"), [int(k as i64), var(o)]))));
        } else {
            inner.push((x.clone(), var(o)));
        }
    }
    // the dual inputs shadow the primal ones inside runIds (the primals are read by D′ as fst x)
    let mut body = dx.d(body)?;
    for (x, rhs) in inner.into_iter().rev() {
        body = let_(pvar(&x), rhs, body);
    }
    // an array of tuples' gradient zipped back from its components' (boundary.rs)
    let mut zips = rustc_hash::FxHashMap::default();
    for (x, (o, t)) in &whole {
        let mut leaf = |path: &[i64]| {
            let c = parts.iter().find(|p| p.2.id == *x && p.1 == path).map(|p| &p.0);
            let j = c.and_then(|c| vars.iter().position(|v| v == c)).unwrap_or(0);
            apps(builtin("gradAt"), [int(j as i64), var(&outer[j]), var(&g)])
        };
        zips.insert(o.id, super::boundary::zip(t, &mut leaf));
    }
    let grads = rebuild(&opat, &outer, &g, &zips);
    let (seed_core, primal) = match conv.map(|c| &c.kind) {
        Some(ExprKind::Let(ys_user)) => {
            let (ys, user_pair) = &**ys_user;
            let (_, user) = user_pair;
            let ls = super::boundary::leaves(output_type);
            let parts = tuple(ls.iter().map(|(p, _)| super::boundary::get(p, var(&seed))).collect());
            let t = Type::Tuple(ls.into_iter().map(|(_, t)| t).collect());
            (ann(parts, t), let_(ys.clone(), var(&y), user.clone()))
        }
        _ => (ann(var(&seed), output_type.clone()), var(&y)),
    };
    let mut out = let_(
        ppair(pvar(&y), pvar(&dd)),
        app(builtin("runIds"), body),
        let_(pvar(&g), apps(builtin("reversePass"), [seed_core, var(&dd)]), pair(primal, grads)),
    );
    // the component arrays read from the input point, outside runIds
    for (k, c) in vars.iter().enumerate().rev() {
        if let Some((_, path, x)) = parts.iter().find(|p| p.0 == *c) {
            out = let_(pvar(&outer[k]), super::boundary::get(path, var(&whole[&x.id].0)), out);
        }
    }
    Ok(lam(ppair(pvar(&input), pvar(&seed)), let_(opat, var(&input), out)))
}

/// The types of main's parameters, read from their uses (the pattern's own type).
fn param_types(main: &Expr, vars: &[Name]) -> Vec<Type> {
    let ExprKind::Lam(_, pat_x) = &main.kind else { return vec![] };
    let (pat, _) = &**pat_x;
    let Type::Fun(arg_result) = &main.ty else { return vars.iter().map(|_| Type::Unknown).collect() };
    let arg = &arg_result.0;
    let mut out = vec![];
    fn go(p: &Pat, t: &Type, out: &mut Vec<Type>) {
        match (p, t) {
            (Pat::Var(..), t) => out.push(t.clone()),
            (Pat::Tuple(ps, _), Type::Tuple(ts)) => ps.iter().zip(ts.iter()).for_each(|(p, t)| go(p, t, out)),
            (Pat::Wild(_), t) => out.push(t.clone()),
            _ => {}
        }
    }
    go(pat, arg, &mut out);
    out
}

/// The gradient in the pattern's shape: `gradAt k x_k g` for the k-th parameter.
fn rebuild(p: &Pat, vars: &[Name], g: &Name, zips: &rustc_hash::FxHashMap<u32, Expr>) -> Expr {
    match p {
        Pat::Var(x, _) if zips.contains_key(&x.id) => zips[&x.id].clone(),
        Pat::Var(x, _) => {
            let k = vars.iter().position(|v| v == x).unwrap_or(0);
            apps(builtin("gradAt"), [int(k as i64), var(x), var(g)])
        }
        Pat::Tuple(ps, _) => tuple(ps.iter().map(|q| rebuild(q, vars, g, zips)).collect()),
        _ => unit(),
    }
}

pub fn no_span() -> Span {
    Span::NONE
}
