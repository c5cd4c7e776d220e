//! Partial evaluation (Huot & Shaikhha §5.1) as named rules of the rewrite engine (kit/rewrite.rs),
//! shared by `unf/pe`, which applies them to `unf/direct`'s output, and `unf/opt`, which adds Fig. 12's
//! optimisations to them; the check of Lemma 5.3 and the rewrite trace's view. The decisions are
//! listed in `unf/pe.rs`.

use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::ir::Prim as P;
use crate::ir::*;
use crate::kit::passes::freshen;
use crate::kit::rewrite::{charge, normalise_program, Budget, Changed, RewriteCx, Rule, Trace};
use crate::stage::View;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// How often each of `ids` occurs in `e`.
pub fn counts(e: &Expr, ids: &HashSet<u32>) -> HashMap<u32, usize> {
    let (mut out, mut walked) = (HashMap::default(), 0);
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        walked += 1;
        if let ExprKind::Var(n) = &x.kind {
            if ids.contains(&n.id) {
                *out.entry(n.id).or_insert(0) += 1;
            }
        }
        each_child(x, &mut |c| stack.push(c));
    }
    charge(walked);
    out
}

/// How often the variable `id` occurs in `e` (binders are unique: every occurrence is of it).
pub fn occurrences(e: &Expr, id: u32) -> usize {
    counts(e, &HashSet::from_iter([id])).get(&id).copied().unwrap_or(0)
}

/// The ids of the variables occurring in `e`.
pub fn vars_in(e: &Expr, out: &mut HashSet<u32>) {
    let (mut stack, mut walked) = (vec![e], 0);
    while let Some(x) = stack.pop() {
        walked += 1;
        if let ExprKind::Var(n) = &x.kind {
            out.insert(n.id);
        }
        each_child(x, &mut |c| stack.push(c));
    }
    charge(walked);
}

pub fn address(e: &Expr) -> usize {
    e as *const Expr as usize
}

/// Replaces in place each node of `e` that `f` gives a replacement for (without walking into it, nor
/// into a node `descend` refuses), stopping after `limit` replacements. So that the rewrite engine
/// walks again only what changed (`rewrite::Changed`), pushes onto `dirty` the addresses of the nodes
/// above a replacement but `e` itself, and says whether `e` is above one. (The addresses are of nodes
/// in boxes or vectors, which stay where they are when `e` is moved.)
pub fn replace_tracked(
    e: &mut Expr,
    f: &mut dyn FnMut(&Expr) -> Option<Expr>,
    descend: &dyn Fn(&Expr) -> bool,
    limit: usize,
    dirty: &mut Vec<usize>,
) -> bool {
    let root = address(e);
    let (mut root_dirty, mut left) = (false, limit);
    // the nodes from `e` down to the one being visited, each with whether it is marked dirty yet
    let mut path: Vec<(usize, bool)> = vec![];
    let (mut stack, mut walked) = (vec![(e, 0usize)], 0);
    while let Some((x, depth)) = stack.pop() {
        walked += 1;
        path.truncate(depth);
        if let Some(r) = f(x) {
            *x = r;
            // marked upwards until a node marked already (then so is everything above it)
            for entry in path.iter_mut().rev() {
                if entry.1 {
                    break;
                }
                entry.1 = true;
                if entry.0 == root {
                    root_dirty = true;
                } else {
                    dirty.push(entry.0);
                }
            }
            left -= 1;
            if left == 0 {
                break;
            }
            continue;
        }
        if !descend(x) {
            continue;
        }
        path.push((address(x), false));
        each_child_mut(x, &mut |c| stack.push((c, depth + 1)));
    }
    charge(walked);
    root_dirty
}

/// `e` with the variables of `map` replaced, simultaneously (binders are unique: nothing is captured),
/// saying what changed (see `replace_tracked`).
pub fn subst_tracked(mut e: Expr, map: &HashMap<u32, Expr>, dirty: &mut Vec<usize>) -> (Expr, bool) {
    let mut f = |x: &Expr| match &x.kind {
        ExprKind::Var(n) => map.get(&n.id).cloned(),
        _ => None,
    };
    let root_dirty = replace_tracked(&mut e, &mut f, &|_| true, usize::MAX, dirty);
    (e, root_dirty)
}

/// The addresses of the let bodies along `e`'s chain, `n` links down (the new lets a rule built
/// around a body: each is new, so the engine must walk it).
pub fn chain_bodies(e: &Expr, n: usize, dirty: &mut Vec<usize>) {
    let mut cur = e;
    for _ in 0..n {
        let ExprKind::Let(b_pair_x) = &cur.kind else { return };
        let (_, b_pair) = &**b_pair_x;
        let (_, b) = b_pair;
        dirty.push(address(b));
        cur = b;
    }
}

/// A let chain taken apart: its links (pattern, right-hand side, span), outermost first, and its tail.
pub fn unchain(mut cur: Expr) -> (Vec<(Pat, Expr, Span)>, Expr) {
    let mut links = vec![];
    loop {
        match cur.kind {
            ExprKind::Let(q_rhs_b) => {
                let (q, rhs_b) = *q_rhs_b;
                let (rhs, b) = rhs_b;
                links.push((q, rhs, cur.span));
                cur = b;
            }
            kind => {
                charge(links.len());
                return (links, Expr { kind, span: cur.span, ty: cur.ty });
            }
        }
    }
}

/// `let p = rhs in body`, typed as `body`.
pub fn let_typed(p: Pat, rhs: Expr, body: Expr) -> Expr {
    let ty = body.ty.clone();
    Expr { kind: ExprKind::Let(Box::new((p, (rhs, body)))), span: Span::NONE, ty }
}

fn is_var(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Var(_))
}

/// R16 `πi <e1, e2> ~> ei`.
fn r16_projection(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let i = usize::from(matches!(e.kind, ExprKind::Snd(_)));
    let (ExprKind::Fst(t) | ExprKind::Snd(t)) = &mut e.kind else { return None };
    let ExprKind::Tuple(es) = &mut t.kind else { return None };
    if es.len() != 2 {
        return None;
    }
    // the result is a part of the redex, normal already
    cx.changed = Some(Changed::Nothing);
    Some(cx.take(&mut es[i]))
}

/// R1 `(fun p → e) a ~> let p = a in e` (n-ary: p is the tuple of parameters, split afterwards).
fn r1_beta(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::App(f_a) = &mut e.kind else { return None };
    let (f, a) = &mut **f_a;
    let ExprKind::Lam(_, p_body) = &mut f.kind else { return None };
    let (p, body) = &mut **p_body;
    // a new root over two parts of the redex
    cx.changed = Some(Changed::Only(vec![]));
    Some(let_typed(p.clone(), cx.take(a), cx.take(body)))
}

/// R17 `let x = (let y = e1 in e2) in e3 ~> let y = e1 in let x = e2 in e3`, for a whole chain of lets
/// on the right at once (one step instead of one per link, each of which would walk e3 again).
fn r17_let_of_let(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(p_rhs_e3) = &mut e.kind else { return None };
    let (p, rhs_e3) = &mut **p_rhs_e3;
    let (rhs, e3) = rhs_e3;
    if !matches!(rhs.kind, ExprKind::Let(..)) {
        return None;
    }
    let (links, cur) = unchain(cx.take(rhs));
    let n = links.len();
    let inner = let_typed(p.clone(), cur, cx.take(e3));
    let out = links.into_iter().rev().fold(inner, |acc, (q, e1, span)| at(let_typed(q, e1, acc), span));
    // every let of the result is new; their right-hand sides and e3 are parts of the redex
    let mut dirty = vec![];
    chain_bodies(&out, n, &mut dirty);
    cx.changed = Some(Changed::Only(dirty));
    Some(out)
}

/// R18 `f(let x = e1 in e2) ~> let x = e1 in f(e2)`, for f an application, a tuple, a projection or a
/// primitive (the language is pure, so evaluating e1 first changes nothing). Never out of a lambda.
fn r18_let_out_of_argument(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let is_let = |x: &Expr| matches!(x.kind, ExprKind::Let(..));
    let candidate = match &e.kind {
        ExprKind::App(f_a) => { let (f, a) = &**f_a; is_let(f) || is_let(a) },
        ExprKind::Fst(x) | ExprKind::Snd(x) => is_let(x),
        ExprKind::Tuple(es) | ExprKind::Array(es) | ExprKind::Prim(_, es) => es.iter().any(is_let),
        _ => false,
    };
    if !candidate {
        return None;
    }
    let mut out = cx.take(e);
    let slot: &mut Expr = match &mut out.kind {
        ExprKind::App(f_a) => {
            let (f, a) = &mut **f_a;
            if is_let(f) {
                f
            } else {
                a
            }
        }
        ExprKind::Fst(x) | ExprKind::Snd(x) => x,
        ExprKind::Tuple(es) | ExprKind::Array(es) | ExprKind::Prim(_, es) => es.iter_mut().find(|x| is_let(x)).expect("a candidate"),
        _ => unreachable!("a candidate"),
    };
    let inner = std::mem::replace(slot, Expr::gen(ExprKind::Unit));
    let ExprKind::Let(q_e1_e2) = inner.kind else { unreachable!("matched a let") };
    let (q, e1_e2) = *q_e1_e2;
    let (e1, e2) = e1_e2;
    *slot = e2;
    // the node f(e2) is new, below a new let
    let out = let_typed(q, e1, out);
    let mut dirty = vec![];
    chain_bodies(&out, 1, &mut dirty);
    cx.changed = Some(Changed::Only(dirty));
    Some(out)
}

/// R2 for one let: `let _ = e in b ~> b`, and a continuation no one calls.
fn r2_dead_let(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(p_rhs_b) = &mut e.kind else { return None };
    let (p, rhs_b) = &mut **p_rhs_b;
    let (rhs, b) = rhs_b;
    let dead = match p {
        Pat::Wild(_) | Pat::Unit(_) => true,
        Pat::Var(n, _) => matches!(rhs.kind, ExprKind::Lam(..)) && occurrences(b, n.id) == 0,
        _ => false,
    };
    if !dead {
        return None;
    }
    // the result is the redex's body, normal already
    cx.changed = Some(Changed::Nothing);
    Some(cx.take(b))
}

/// R3 `let x1 = x2 in e ~> e[x2/x1]`.
fn r3_forward_substitution(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(pat_rhs_b) = &mut e.kind else { return None };
    let (pat, rhs_b) = &mut **pat_rhs_b;
    let (rhs, b) = rhs_b;
    let Pat::Var(x, _) = pat else { return None };
    if !is_var(rhs) {
        return None;
    }
    let mut dirty = vec![];
    let (out, _) = subst_tracked(cx.take(b), &HashMap::from_iter([(x.id, rhs.clone())]), &mut dirty);
    cx.changed = Some(Changed::Only(dirty));
    Some(out)
}

/// `let Y = fun … in C[Y] ~> C[fun …]` when Y occurs once (Lemma 5.1: every continuation does).
fn inline_continuation(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(pat_rhs_b) = &mut e.kind else { return None };
    let (pat, rhs_b) = &mut **pat_rhs_b;
    let (rhs, b) = rhs_b;
    let Pat::Var(y, _) = pat else { return None };
    if !matches!(rhs.kind, ExprKind::Lam(..)) || occurrences(b, y.id) != 1 {
        return None;
    }
    let mut dirty = vec![];
    // its one occurrence gets the continuation itself, not a copy
    let (y, mut once) = (y.id, Some(cx.take(rhs)));
    let mut put = |x: &Expr| match &x.kind {
        ExprKind::Var(n) if n.id == y => once.take(),
        _ => None,
    };
    let mut out = cx.take(b);
    replace_tracked(&mut out, &mut put, &|_| true, 1, &mut dirty);
    cx.changed = Some(Changed::Only(dirty));
    Some(out)
}

/// `let (x1, …, xn) = e in C[(x1, …, xn)] ~> C[e]` when the xi occur only there, once, and not under a
/// lambda (the wrapper's `let (g1, …, gn) = Y(0_Γ, 1) in (r, (g1, …, gn))`): no work moves or repeats.
fn eta_tuple_let(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(pat_rhs_b) = &mut e.kind else { return None };
    let (pat, rhs_b) = &mut **pat_rhs_b;
    let (rhs, b) = rhs_b;
    let Pat::Tuple(ps, _) = pat else { return None };
    let ids: Vec<u32> = ps.iter().map(|p| if let Pat::Var(n, _) = p { Some(n.id) } else { None }).collect::<Option<_>>()?;
    let set: HashSet<u32> = ids.iter().copied().collect();
    if set.len() != ids.len() {
        return None;
    }
    let rebuilds = |x: &Expr| matches!(&x.kind, ExprKind::Tuple(es) if es.len() == ids.len() && es.iter().zip(&ids).all(|(c, id)| matches!(&c.kind, ExprKind::Var(n) if n.id == *id)));
    // One walk of the body, before it is copied (the rule is tried at every tuple let of a normalised
    // program, again after each step, and fires rarely): the rebuilt tuple outside any lambda, and the
    // variables used nowhere else — the walk stops at their (n+1)-th use.
    let (mut uses, mut found, mut walked) = (0, false, 0);
    let mut stack = vec![(&*b, false)];
    while let Some((x, under_lambda)) = stack.pop() {
        walked += 1;
        match &x.kind {
            ExprKind::Var(n) if set.contains(&n.id) => uses += 1,
            _ if !under_lambda && !found && rebuilds(x) => {
                found = true;
                uses += ids.len();
                continue;
            }
            _ => {}
        }
        if uses > ids.len() {
            break;
        }
        let under = under_lambda || matches!(x.kind, ExprKind::Lam(..));
        // pushed straight onto the stack, not collected per node first (the walk is tried at every
        // tuple let after each step; the order does not matter: one rebuild is allowed and counted)
        each_child(x, &mut |c| stack.push((c, under)));
    }
    charge(walked);
    if !found || uses != ids.len() {
        return None;
    }
    let mut out = cx.take(b);
    let mut dirty = vec![];
    let mut once = Some(cx.take(rhs));
    let mut put = |x: &Expr| if rebuilds(x) { once.take() } else { None };
    replace_tracked(&mut out, &mut put, &|x| !matches!(x.kind, ExprKind::Lam(..)), 1, &mut dirty);
    cx.changed = Some(Changed::Only(dirty));
    Some(out)
}

/// `let (p1, …, pn) = <e1, …, en> in b ~> let p1 = e1 in … let pn = en in b` (the note's destructuring
/// of `let x, Y = <e1, e2>`), with R3 for the components that are variables and R2 for the dead ones.
fn split_tuple_let(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(pat_rhs_b) = &mut e.kind else { return None };
    let (pat, rhs_b) = &mut **pat_rhs_b;
    let (rhs, b) = rhs_b;
    let Pat::Tuple(ps, _) = pat else { return None };
    let ExprKind::Tuple(es) = &mut rhs.kind else { return None };
    if ps.len() != es.len() {
        return None;
    }
    let ids: HashSet<u32> = ps.iter().filter_map(|p| if let Pat::Var(n, _) = p { Some(n.id) } else { None }).collect();
    let used = counts(b, &ids);
    let mut map = HashMap::default();
    let mut lets = vec![];
    for (p, c) in ps.iter().zip(es.iter_mut()) {
        match p {
            Pat::Wild(_) | Pat::Unit(_) => {}
            Pat::Var(n, _) if is_var(c) => {
                map.insert(n.id, c.clone());
            }
            Pat::Var(n, _) if !used.contains_key(&n.id) => {}
            _ => lets.push((p.clone(), cx.take(c))),
        }
    }
    let mut dirty = vec![];
    let (body, body_dirty) = subst_tracked(cx.take(b), &map, &mut dirty);
    let n = lets.len();
    let out = lets.into_iter().rev().fold(body, |acc, (p, c)| let_typed(p, c, acc));
    // the new lets but the root, and the body below them if something in it changed
    if n > 0 {
        chain_bodies(&out, if body_dirty { n } else { n - 1 }, &mut dirty);
    }
    cx.changed = Some(Changed::Only(dirty));
    Some(out)
}

/// R2 over a lambda's body: every let of its chain whose variables are not used later is dropped, in
/// one walk from the end (a rule per let would look at the rest of the chain once per let).
fn r2_dead_lets(e: &mut Expr, cx: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Lam(k, p_body) = &mut e.kind else { return None };
    let (p, body) = &mut **p_body;
    let mut keep = vec![];
    {
        let mut links = vec![];
        let mut cur = &*body;
        while let ExprKind::Let(q_rhs_b) = &cur.kind {
            let (q, rhs_b) = &**q_rhs_b;
            let (rhs, b) = rhs_b;
            links.push((q, rhs));
            cur = b;
        }
        charge(links.len());
        let mut live = HashSet::default();
        vars_in(cur, &mut live);
        keep.resize(links.len(), false);
        for (i, (q, rhs)) in links.iter().enumerate().rev() {
            if q.names().iter().any(|n| live.contains(&n.id)) {
                keep[i] = true;
                vars_in(rhs, &mut live);
            }
        }
    }
    if keep.iter().all(|k| *k) {
        return None;
    }
    let (links, cur) = unchain(cx.take(body));
    let mut out = cur;
    for (i, (q, rhs, span)) in links.into_iter().enumerate().rev() {
        if keep[i] {
            out = at(let_typed(q, rhs, out), span);
        }
    }
    // every kept link is a new let (rebuilt typed as its body, which need not be the type the
    // redex's own let had); their right-hand sides and the chain's tail are the redex's
    let new_lets = keep.iter().filter(|k| **k).count();
    let out = Expr { kind: ExprKind::Lam(*k, Box::new((p.clone(), out))), span: e.span, ty: e.ty.clone() };
    let ExprKind::Lam(_, body_x) = &out.kind else { unreachable!("built a lambda") };
    let (_, body) = &**body_x;
    let mut dirty = vec![];
    if new_lets > 0 {
        dirty.push(address(body));
        chain_bodies(body, new_lets - 1, &mut dirty);
    }
    cx.changed = Some(Changed::Only(dirty));
    Some(out)
}

/// The partial-evaluation rules, in the order they are tried at a node.
pub fn pe_rules() -> Vec<Rule> {
    let r = |name, apply| Rule { name, inexact: false, apply };
    vec![
        r("R16 π of a tuple", r16_projection),
        r("R1 inline (β)", r1_beta),
        r("R17 let of a let", r17_let_of_let),
        r("R18 let out of an argument", r18_let_out_of_argument),
        r("R2 dead let", r2_dead_let),
        r("R3 forward substitution", r3_forward_substitution),
        r("X7 inline a single-use continuation", inline_continuation),
        r("η a tuple let rebuilt once", eta_tuple_let),
        r("split a tuple let (with R3, R2)", split_tuple_let),
        r("R2 dead lets", r2_dead_lets),
    ]
}

/// Steps the trace keeps with their text (the rest are counted): the first ones are the innermost,
/// small redexes; later ones print whole continuations.
const TRACE_STEPS: usize = 400;

/// The program's definitions with fresh binders, rewritten to normal form under `rules`.
pub fn rewrite(p: &Program, rules: &[Rule]) -> Result<(Program, Trace), Diagnostic> {
    let mut p = p.clone();
    let mut fr = Fresh::new(&p);
    for d in &mut p.defs {
        freshen(&mut d.body, &mut fr);
    }
    p.next_id = fr.next_id;
    // The visits budget grows with the input: Fig. 5's continuations each take the cotangents of every
    // variable in scope, so unf/direct's output for n lets has Θ(n²) nodes (bounded by unf/direct's
    // `stack copies` budget), and the innermost-first engine visited each node about 30–37 times when
    // it normalised a rule's result again whole (now only what the rule changed: the quaternion's
    // 128,286 visits became 6,107, the same steps). Rule applications grow linearly in n (straight
    // family: 1638, 3260, 6510, 9760 at n = 50, 100, 200, 300). A fixed budget of 2·10^6 visits
    // stopped it near n = 200; this one lets every input unf/direct gives finish.
    //
    // It is capped, so that an input this rewrite is quadratic on stops within seconds: on `x + x + …`
    // and `sin (sin (…))` each continuation inlined renames through all those inlined before it (see
    // bench/README.md, session 18), and with the rules' walks charged (`charge`) the examples take at
    // most 2.7 visits a node and a 100-line straight program 2.2, while `sin` nested 10,000 deep ran
    // over a minute (and finished). The cap is about 5 s natively.
    let nodes = p.defs.iter().map(|d| node_count(&d.body)).sum::<u64>();
    let budget = Budget::default();
    let visits = VISITS_PER_NODE.saturating_mul(nodes).clamp(budget.visits, MAX_VISITS);
    normalise_program(p, rules, Budget { trace_steps: TRACE_STEPS, program_after: true, visits, ..budget })
}

/// Node visits allowed per node of the input (see `rewrite`).
const VISITS_PER_NODE: u64 = 96;

/// The most node visits a partial evaluation may take, however large its input (see `rewrite`).
const MAX_VISITS: u64 = 4_000_000;

/// Lemma 5.3: no lambda abstraction but the top one of each definition (and the functions of array
/// operations, the paper's binders), and so no application and no variable of a function type.
pub fn check_lemma_5_3(p: &Program) -> Result<(), String> {
    for d in &p.defs {
        let ExprKind::Lam(_, body_x) = &d.body.kind else { return Err(format!("`{}` is not a function", d.name.text)) };
        let (_, body) = &**body_x;
        let mut stack = vec![body];
        while let Some(e) = stack.pop() {
            match &e.kind {
                ExprKind::Lam(..) => return Err("a lambda abstraction is left".into()),
                ExprKind::App(..) => return Err("an application is left".into()),
                ExprKind::Prim(P::Map | P::Map2 | P::Reduce | P::Scanl | P::Scanr | P::Fold, args) => {
                    let arity = if matches!(e.kind, ExprKind::Prim(P::Map, _)) { 1 } else { 2 };
                    if super::lambda_params(&args[0], arity).is_none() {
                        return Err("an array operation's function is not a binder `\\x y -> e`".into());
                    }
                    stack.push(super::lambda_body(&args[0], arity));
                    stack.extend(&args[1..]);
                }
                _ => each_child(e, &mut |c| stack.push(c)),
            }
        }
    }
    Ok(())
}

/// The trace as the page's view, named "rewrite trace".
pub fn trace_views(tr: &Trace) -> Vec<View> {
    vec![tr.view("rewrite trace")]
}
