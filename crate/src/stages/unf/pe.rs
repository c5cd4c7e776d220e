//! `unf/pe`: partial evaluation (Huot & Shaikhha §5.1) of `unf/direct`'s output, wrapper included:
//! `∇_Γ(e) = π2 D←^Γ_{Γ;Id_Γ}(e) (0_Γ, 1)` with `Y := Id_Γ` and the arguments supplied, rewritten until
//! no continuation is left. Each rule is one named rule of the rewrite engine (kit/rewrite.rs), named
//! as the note's reconstruction of Fig. 12 (R1–R18) where it is one of them.
//!
//! Decisions:
//! - β binds the arguments with `let` (R1) and never substitutes a non-variable argument (§5.1: that
//!   is what keeps the cost linear; the note's pitfall P3). Variables are substituted for variables
//!   (R3) in the same step that splits a tuple let, simultaneously (one walk of the body per call of a
//!   continuation instead of one per argument: a continuation of a context of n slots takes n of them).
//! - A continuation is inlined where it is used; Lemma 5.1 says each is used exactly once.
//! - Constants stay bound (`let y1 = 0.0 in …`): Ex. 1.1's middle program, the golden output of this
//!   stage, keeps `let y1, …, y5 = 0, 0, 0, 0, 1`; propagating them (R4) is left to `unf/opt`.
//! - Binders are unique in a program (each has its own id), so substitution never captures.
//! - Lemma 5.3 (no lambda left but the top one) is asserted on every output: the functions given to
//!   array operations (`map2 (x,y. e)`, `reduce`, `scanl`, `scanr`) are the paper's binders, not
//!   lambdas of the Target language, and may stay.

use super::common::PAPER;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::ir::Prim as P;
use crate::features::{Feature, Features};
use crate::ir::*;
use crate::kit::passes::freshen;
use crate::kit::rewrite::{normalise_program, Budget, RewriteCx, Rule, Trace};
use crate::stage::{Input, Output, Source, Stage, StageInfo, View};
use std::collections::{HashMap, HashSet};

pub struct Pe;

static INFO: StageInfo = StageInfo {
    id: "unf/pe",
    paper: PAPER,
    section: "§5.1, Lemmas 5.1 and 5.3, Ex. 1.1 and 5.2",
    title: "Partial evaluation: inlining the continuations away",
    explanation: "unf/direct's program with Y := Id_Γ and its arguments (0_Γ, 1) supplied is partially evaluated: \
every continuation is used exactly once (Lemma 5.1), so it is inlined where it is called; the call is β-reduced into \
lets of its arguments (never substituting an expression that is not a variable, which would duplicate work); tuple \
lets are split, projections of tuples taken, variable-to-variable lets substituted forward, nested lets flattened and \
dead lets dropped. What is left has no lambda abstraction but the top one (Lemma 5.3): a first-order, SSA-like \
program whose backward part is a line of lets, as imperative reverse mode would write it (Ex. 1.1). Each step of the \
rewrite is listed with its rule.",
    complexity: "O(T): after partial evaluation the gradient costs at most 4·3^p times the primal (Theorem 5.4); the rewrite itself walks the continuation program once per continuation it inlines.",
    accepts: super::common::ACCEPTS,
};

/// How often each of `ids` occurs in `e`.
pub(super) fn counts(e: &Expr, ids: &HashSet<u32>) -> HashMap<u32, usize> {
    let mut out = HashMap::new();
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        if let ExprKind::Var(n) = &x.kind {
            if ids.contains(&n.id) {
                *out.entry(n.id).or_insert(0) += 1;
            }
        }
        stack.extend(children(x));
    }
    out
}

/// How often the variable `id` occurs in `e` (binders are unique: every occurrence is of it).
pub(super) fn occurrences(e: &Expr, id: u32) -> usize {
    counts(e, &HashSet::from([id])).get(&id).copied().unwrap_or(0)
}

/// The ids of the variables occurring in `e`.
pub(super) fn vars_in(e: &Expr, out: &mut HashSet<u32>) {
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        if let ExprKind::Var(n) = &x.kind {
            out.insert(n.id);
        }
        stack.extend(children(x));
    }
}

/// `e` with the variables of `map` replaced, simultaneously (binders are unique: nothing is captured).
pub(super) fn subst(mut e: Expr, map: &HashMap<u32, Expr>) -> Expr {
    let mut stack = vec![&mut e];
    while let Some(x) = stack.pop() {
        if let ExprKind::Var(n) = &x.kind {
            if let Some(r) = map.get(&n.id) {
                *x = r.clone();
                continue;
            }
        }
        stack.extend(children_mut(x));
    }
    e
}

/// `let p = rhs in body`, typed as `body`.
pub(super) fn let_typed(p: Pat, rhs: Expr, body: Expr) -> Expr {
    let ty = body.ty.clone();
    Expr { kind: ExprKind::Let(p, Box::new(rhs), Box::new(body)), span: Span::NONE, ty }
}

fn is_var(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Var(_))
}

/// R16 `πi <e1, e2> ~> ei`.
fn r16_projection(e: &Expr, _: &mut RewriteCx) -> Option<Expr> {
    match &e.kind {
        ExprKind::Fst(t) | ExprKind::Snd(t) => match &t.kind {
            ExprKind::Tuple(es) if es.len() == 2 => Some(es[usize::from(matches!(e.kind, ExprKind::Snd(_)))].clone()),
            _ => None,
        },
        _ => None,
    }
}

/// R1 `(fun p → e) a ~> let p = a in e` (n-ary: p is the tuple of parameters, split afterwards).
fn r1_beta(e: &Expr, _: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::App(f, a) = &e.kind else { return None };
    let ExprKind::Lam(_, p, body) = &f.kind else { return None };
    Some(let_typed(p.clone(), (**a).clone(), (**body).clone()))
}

/// R17 `let x = (let y = e1 in e2) in e3 ~> let y = e1 in let x = e2 in e3`, for a whole chain of lets
/// on the right at once (one step instead of one per link, each of which would walk e3 again).
fn r17_let_of_let(e: &Expr, _: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(p, rhs, e3) = &e.kind else { return None };
    let mut links = vec![];
    let mut cur = &**rhs;
    while let ExprKind::Let(q, e1, e2) = &cur.kind {
        links.push((q, e1, cur.span));
        cur = e2;
    }
    if links.is_empty() {
        return None;
    }
    let inner = let_typed(p.clone(), cur.clone(), (**e3).clone());
    Some(links.into_iter().rev().fold(inner, |acc, (q, e1, span)| at(let_typed(q.clone(), (**e1).clone(), acc), span)))
}

/// R18 `f(let x = e1 in e2) ~> let x = e1 in f(e2)`, for f an application, a tuple, a projection or a
/// primitive (the language is pure, so evaluating e1 first changes nothing). Never out of a lambda.
fn r18_let_out_of_argument(e: &Expr, _: &mut RewriteCx) -> Option<Expr> {
    let is_let = |x: &Expr| matches!(x.kind, ExprKind::Let(..));
    let candidate = match &e.kind {
        ExprKind::App(f, a) => is_let(f) || is_let(a),
        ExprKind::Fst(x) | ExprKind::Snd(x) => is_let(x),
        ExprKind::Tuple(es) | ExprKind::Array(es) | ExprKind::Prim(_, es) => es.iter().any(is_let),
        _ => false,
    };
    if !candidate {
        return None;
    }
    let mut out = e.clone();
    let slot: &mut Expr = match &mut out.kind {
        ExprKind::App(f, a) => {
            if matches!(f.kind, ExprKind::Let(..)) {
                f
            } else if matches!(a.kind, ExprKind::Let(..)) {
                a
            } else {
                return None;
            }
        }
        ExprKind::Fst(x) | ExprKind::Snd(x) if matches!(x.kind, ExprKind::Let(..)) => x,
        ExprKind::Tuple(es) | ExprKind::Array(es) | ExprKind::Prim(_, es) => es.iter_mut().find(|x| matches!(x.kind, ExprKind::Let(..)))?,
        _ => return None,
    };
    let inner = std::mem::replace(slot, Expr::gen(ExprKind::Unit));
    let ExprKind::Let(q, e1, e2) = inner.kind else { unreachable!("matched a let") };
    *slot = *e2;
    Some(let_typed(q, *e1, out))
}

/// R2 for one let: `let _ = e in b ~> b`, and a continuation no one calls.
fn r2_dead_let(e: &Expr, _: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(p, rhs, b) = &e.kind else { return None };
    match p {
        Pat::Wild(_) | Pat::Unit(_) => Some((**b).clone()),
        Pat::Var(n, _) if matches!(rhs.kind, ExprKind::Lam(..)) && occurrences(b, n.id) == 0 => Some((**b).clone()),
        _ => None,
    }
}

/// R3 `let x1 = x2 in e ~> e[x2/x1]`.
fn r3_forward_substitution(e: &Expr, _: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(Pat::Var(x, _), rhs, b) = &e.kind else { return None };
    if !is_var(rhs) {
        return None;
    }
    Some(subst((**b).clone(), &HashMap::from([(x.id, (**rhs).clone())])))
}

/// `let Y = fun … in C[Y] ~> C[fun …]` when Y occurs once (Lemma 5.1: every continuation does).
fn inline_continuation(e: &Expr, _: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(Pat::Var(y, _), rhs, b) = &e.kind else { return None };
    if !matches!(rhs.kind, ExprKind::Lam(..)) || occurrences(b, y.id) != 1 {
        return None;
    }
    Some(subst((**b).clone(), &HashMap::from([(y.id, (**rhs).clone())])))
}

/// `let (x1, …, xn) = e in C[(x1, …, xn)] ~> C[e]` when the xi occur only there, once, and not under a
/// lambda (the wrapper's `let (g1, …, gn) = Y(0_Γ, 1) in (r, (g1, …, gn))`): no work moves or repeats.
fn eta_tuple_let(e: &Expr, _: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(Pat::Tuple(ps, _), rhs, b) = &e.kind else { return None };
    let ids: Vec<u32> = ps.iter().map(|p| if let Pat::Var(n, _) = p { Some(n.id) } else { None }).collect::<Option<_>>()?;
    let set: HashSet<u32> = ids.iter().copied().collect();
    if set.len() != ids.len() || counts(b, &set).values().sum::<usize>() != ids.len() {
        return None;
    }
    let rebuilds = |x: &Expr| matches!(&x.kind, ExprKind::Tuple(es) if es.len() == ids.len() && es.iter().zip(&ids).all(|(c, id)| matches!(&c.kind, ExprKind::Var(n) if n.id == *id)));
    let mut out = (**b).clone();
    let mut stack = vec![&mut out];
    while let Some(x) = stack.pop() {
        if rebuilds(x) {
            *x = (**rhs).clone();
            return Some(out);
        }
        if !matches!(x.kind, ExprKind::Lam(..)) {
            stack.extend(children_mut(x));
        }
    }
    None
}

/// `let (p1, …, pn) = <e1, …, en> in b ~> let p1 = e1 in … let pn = en in b` (the note's destructuring
/// of `let x, Y = <e1, e2>`), with R3 for the components that are variables and R2 for the dead ones.
fn split_tuple_let(e: &Expr, _: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Let(Pat::Tuple(ps, _), rhs, b) = &e.kind else { return None };
    let ExprKind::Tuple(es) = &rhs.kind else { return None };
    if ps.len() != es.len() {
        return None;
    }
    let ids: HashSet<u32> = ps.iter().filter_map(|p| if let Pat::Var(n, _) = p { Some(n.id) } else { None }).collect();
    let used = counts(b, &ids);
    let mut map = HashMap::new();
    let mut lets = vec![];
    for (p, c) in ps.iter().zip(es) {
        match p {
            Pat::Wild(_) | Pat::Unit(_) => {}
            Pat::Var(n, _) if is_var(c) => {
                map.insert(n.id, c.clone());
            }
            Pat::Var(n, _) if !used.contains_key(&n.id) => {}
            _ => lets.push((p.clone(), c.clone())),
        }
    }
    let body = subst((**b).clone(), &map);
    Some(lets.into_iter().rev().fold(body, |acc, (p, c)| let_typed(p, c, acc)))
}

/// R2 over a lambda's body: every let of its chain whose variables are not used later is dropped, in
/// one walk from the end (a rule per let would look at the rest of the chain once per let).
fn r2_dead_lets(e: &Expr, _: &mut RewriteCx) -> Option<Expr> {
    let ExprKind::Lam(k, p, body) = &e.kind else { return None };
    let mut links = vec![];
    let mut cur = &**body;
    while let ExprKind::Let(q, rhs, b) = &cur.kind {
        links.push((q, rhs, cur.span));
        cur = b;
    }
    let mut live = HashSet::new();
    vars_in(cur, &mut live);
    let mut keep = vec![false; links.len()];
    for (i, (q, rhs, _)) in links.iter().enumerate().rev() {
        if q.names().iter().any(|n| live.contains(&n.id)) {
            keep[i] = true;
            vars_in(rhs, &mut live);
        }
    }
    if keep.iter().all(|k| *k) {
        return None;
    }
    let mut out = cur.clone();
    for (i, (q, rhs, span)) in links.into_iter().enumerate().rev() {
        if keep[i] {
            out = at(let_typed(q.clone(), (**rhs).clone(), out), span);
        }
    }
    Some(Expr { kind: ExprKind::Lam(*k, p.clone(), Box::new(out)), span: e.span, ty: e.ty.clone() })
}

/// The partial-evaluation rules, in the order they are tried at a node.
pub(super) fn pe_rules() -> Vec<Rule> {
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

/// How much of each side of a step the views keep.
const STEP_TEXT: usize = 4_000;

/// The program's definitions with fresh binders, rewritten to normal form under `rules`.
pub(super) fn rewrite(p: &Program, rules: &[Rule]) -> Result<(Program, Trace), Diagnostic> {
    let mut p = p.clone();
    let mut fr = Fresh::new(&p);
    for d in &mut p.defs {
        freshen(&mut d.body, &mut fr);
    }
    p.next_id = fr.next_id;
    normalise_program(p, rules, Budget { trace_steps: TRACE_STEPS, ..Budget::default() })
}

/// Lemma 5.3: no lambda abstraction but the top one of each definition (and the functions of array
/// operations, the paper's binders), and so no application and no variable of a function type.
pub fn check_lemma_5_3(p: &Program) -> Result<(), String> {
    for d in &p.defs {
        let ExprKind::Lam(_, _, body) = &d.body.kind else { return Err(format!("`{}` is not a function", d.name.text)) };
        let mut stack = vec![&**body];
        while let Some(e) = stack.pop() {
            match &e.kind {
                ExprKind::Lam(..) => return Err("a lambda abstraction is left".into()),
                ExprKind::App(..) => return Err("an application is left".into()),
                ExprKind::Prim(P::Map | P::Map2 | P::Reduce | P::Scanl | P::Scanr | P::Fold, args) => {
                    let arity = if matches!(e.kind, ExprKind::Prim(P::Map, _)) { 1 } else { 2 };
                    if super::common::lambda_params(&args[0], arity).is_none() {
                        return Err("an array operation's function is not a binder `\\x y -> e`".into());
                    }
                    stack.push(super::common::lambda_body(&args[0], arity));
                    stack.extend(&args[1..]);
                }
                _ => stack.extend(children(e)),
            }
        }
    }
    Ok(())
}

/// The trace as the page's view: each step's rule, then the redex before and after it.
pub(super) fn trace_views(tr: &Trace) -> Vec<View> {
    use std::fmt::Write;
    // a step at the top of a long program prints all of it: each side is cut to STEP_TEXT characters
    let mut tr = tr.clone();
    for s in &mut tr.steps {
        for side in [&mut s.before, &mut s.after] {
            if let Some((i, _)) = side.char_indices().nth(STEP_TEXT) {
                side.truncate(i);
                side.push_str(" …");
            }
        }
    }
    let tr = &tr;
    let mut text = String::new();
    let per: Vec<String> = tr.per_rule.iter().filter(|(_, n)| *n > 0).map(|(r, n)| format!("{r} ×{n}")).collect();
    let _ = writeln!(text, "{} rewrite steps: {}", tr.taken, per.join(", "));
    if (tr.steps.len() as u64) < tr.taken {
        let _ = writeln!(text, "(the first {} are shown)", tr.steps.len());
    }
    let indent = |s: &str| s.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n");
    for (i, s) in tr.steps.iter().enumerate() {
        let mark = if s.inexact { "  [inexact: may change floating-point results]" } else { "" };
        let _ = write!(text, "\n{}. {}{mark}\n{}\n  ⇝\n{}\n", i + 1, s.rule, indent(&s.before), indent(&s.after));
    }
    vec![View { name: "rewrite trace".into(), text, ..View::default() }]
}


impl Stage for Pe {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    /// What `unf/direct`'s output may hold: its continuations, and the conditionals and integers of
    /// the derivative table (`abs`, `max`); the source's own are refused by `unf/direct`, and so here.
    fn supports(&self) -> Features {
        Features::of(&[Feature::HigherOrder, Feature::Conditionals, Feature::Integers])
    }

    fn input(&self) -> Input {
        Input::After("unf/direct")
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let (program, trace) = rewrite(src.program, &pe_rules())?;
        check_lemma_5_3(&program).map_err(|why| Diagnostic::error(Span::NONE, format!("internal error: Lemma 5.3 does not hold after partial evaluation: {why}")))?;
        Ok(Output { program, builtins: vec![], views: trace_views(&trace), steps: trace.stepper() })
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        super::common::grad_type(src)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::Stage;

    /// `unf/direct`'s output on `src`.
    pub(crate) fn direct_output(src: &str) -> (Program, Type, Type) {
        let (p, s, t) = crate::pipeline::front_end(src, &[]).unwrap();
        let b = crate::interp::Builtins::new();
        let source = Source { program: &p, input_type: &s, output_type: &t, builtins: &b };
        (super::super::direct::Direct.transform(&source).unwrap().program, s, t)
    }

    fn size(e: &Expr) -> usize {
        let mut n = 0;
        let mut stack = vec![e];
        while let Some(x) = stack.pop() {
            n += 1;
            stack.extend(children(x));
        }
        n
    }

    /// `let w1 = x * c in let w2 = w1 * c in …` (or `w_k = w_{k-1} * w_{k-1}`, every variable used twice:
    /// the note's P3, where substituting non-variables would double the program at every let).
    fn chain(m: usize, fan_out: bool) -> String {
        let mut src = String::from("input 1.0\ndef main x = ");
        for i in 1..=m {
            let prev = if i == 1 { "x".to_string() } else { format!("w{}", i - 1) };
            let rhs = if fan_out { format!("{prev} * {prev}") } else { format!("{prev} * 1.0001") };
            src.push_str(&format!("let w{i} = {rhs} in "));
        }
        src + &format!("w{m}\n")
    }

    /// The output of partial evaluation grows linearly with the program (its input, Fig. 5's program,
    /// grows quadratically: every continuation takes the whole context), with and without fan-out,
    /// and Lemma 5.3 holds on it.
    #[test]
    fn partial_evaluation_stays_linear_in_the_program() {
        for fan_out in [false, true] {
            let sizes: Vec<usize> = [20, 40, 80]
                .iter()
                .map(|&m| {
                    let (p, _, _) = direct_output(&chain(m, fan_out));
                    let (out, _) = rewrite(&p, &pe_rules()).unwrap();
                    check_lemma_5_3(&out).unwrap();
                    size(&out.defs[0].body)
                })
                .collect();
            // doubling the program doubles the output (Fig. 5's own output grows four times)
            assert!(sizes[2] <= 2 * sizes[1] + 20 && sizes[1] <= 2 * sizes[0] + 20, "{sizes:?}");
            assert!(sizes[2] < 30 * 80, "about 22 nodes per let: {sizes:?}");
        }
    }

    #[test]
    fn lemma_5_3_refuses_a_continuation_left_behind() {
        let (p, _, _) = direct_output(&chain(2, false));
        assert!(check_lemma_5_3(&p).is_err(), "unf/direct's own output has lambdas");
    }
}
