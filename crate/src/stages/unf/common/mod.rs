//! What the chain's stages share: the paper's source language (Fig. 2) as a check of the inlined
//! program, and the ground-type monoid `(G, +^, 0_G)` of Notation 1 as code.

use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::ir::Prim as P;
use crate::kit::passes::first_order_unrolled;
use crate::kit::polytypic::{map_shape, zip_shape, Zip};
use crate::stage::Source;

pub mod cost;
pub mod general;
pub mod jacobian;
pub mod line;
pub mod normalise;
pub mod partial;
pub mod unf;

pub const PAPER: &str = "Huot & Shaikhha 2024";

/// How much work inlining may do before it stops (program nodes visited plus bindings emitted).
const INLINE_BUDGET: usize = 200_000;

pub const ACCEPTS: &str = "the paper's source language (Fig. 2): reals, tuples and arrays (of any ground type, A.5), let, real \
primitives, map2, reduce (whose function may read free variables, §7.1) and sum (Ex. 1.2), with map and fold by \
A.3 (Fig. 16), and \
conditionals whose condition compares primal values (§7.2), after every function call is inlined (§8) and recursion \
on a param unrolled for its value (up to the unrolling budget: 100 nested calls); no other \
recursion, no sums, no integers outside a condition";

/// Why a construct is outside Fig. 2's language.
fn outside(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error(span, format!("{what} is outside the source language of Huot & Shaikhha (Fig. 2: reals, tuples, arrays of reals, let, real primitives, map2, reduce)"))
}

/// A ground type of the paper with A.5's general arrays (`G ::= R | G × … × G | A[G]^n`), and `()`.
/// Walked with an explicit stack (types nest as deep as the program writes them).
pub fn is_ground(t: &Type) -> bool {
    let mut stack = vec![t];
    while let Some(t) = stack.pop() {
        match t {
            Type::Real | Type::Unit => {}
            Type::Tuple(ts) => stack.extend(ts.iter()),
            t => match t.as_array() {
                Some(el) => stack.push(el),
                None => return false,
            },
        }
    }
    true
}

/// The source as the paper's language: every call inlined into one `main = λp. e` (§8: higher-order
/// code without recursion is first partially evaluated to first order), then checked construct by
/// construct, each refusal located.
pub fn first_order(src: &Source) -> Result<Program, Diagnostic> {
    // recursion on a param is unrolled for its value (§8: the paper's language has no recursion)
    let mut p = first_order_unrolled(src, INLINE_BUDGET).map_err(|mut d| {
        if d.message.contains("recursion") {
            d.message.push_str(" (Huot & Shaikhha's source language has no recursion, §8: \"our reverse-mode transformation does not support recursion\")");
        }
        d
    })?;
    // §7.2: conditions let-bound or holding lets and array operations are brought to plain form
    let mut fr = Fresh::new(&p);
    if let Some(d) = p.defs.iter_mut().find(|d| &*d.name.text == "main") {
        if let ExprKind::Lam(_, body_x) = &mut d.body.kind {
            let (_, body) = &mut **body_x;
            normalise::conditions(body, &mut fr).map_err(|span| {
                outside(span, "a condition's boolean computed by a function-taking array operation (a `fold`, `reduce`, `scanl` or `scanr` to a boolean: §7.2's conditions are primal computations that hold none, and Fig. 2's ground types have no booleans, so no let may bind it)")
            })?;
        }
    }
    p.next_id = fr.next_id;
    let main = p.def("main").expect("inline_all keeps main");
    let ExprKind::Lam(_, body_x) = &main.body.kind else {
        return Err(outside(main.span, "`main` that is not a function"));
    };
    let (_, body) = &**body_x;
    if let Type::Fun(io) = &main.body.ty {
        let input = &io.0;
        if !is_ground(input) {
            return Err(outside(main.span, &format!("an input of type {}", crate::types::show(input))));
        }
    }
    // Fig. 5's let rule puts each let's body inside the binding of the next continuation, so the
    // output nests as deep as the let chain is long, and every pass over it recurses on that depth
    // (a binding's right-hand side, unlike a let's body, is not walked in a loop): about two levels
    // of the output per level of the source, hence half the bracket budget (100 in wasm).
    let limit = crate::limits::max_brackets() / 2;
    let mut stack = vec![(body, 1usize)];
    while let Some((e, depth)) = stack.pop() {
        if depth > limit {
            let span = if e.span == Span::NONE { main.span } else { e.span };
            return Err(Diagnostic::error(
                span,
                format!("this program nests more than {limit} levels (counting each let), this chain's `nesting` budget: its let rule (Fig. 5) nests each let's body one level deeper in the output, and every pass over the output recurses on that depth"),
            ));
        }
        each_child(e, &mut |c| stack.push((c, depth + 1)));
    }
    let mut stack = vec![body];
    while let Some(e) = stack.pop() {
        use ExprKind::*;
        if !is_ground(&e.ty) && !matches!(e.kind, Lam(..)) {
            let span = if e.span == Span::NONE { main.span } else { e.span };
            if has_bool_or_int(&e.ty) {
                return Err(outside(span, &format!("a value of type {} outside the condition of an `if` (§7.2: booleans and integers are external to the language, used only in conditions)", crate::types::show(&e.ty))));
            }
            return Err(outside(span, &format!("a value of type {}", crate::types::show(&e.ty))));
        }
        match &e.kind {
            Var(_) | Real(_) | Unit | Let(..) | Tuple(_) | Fst(_) | Snd(_) | Ann(..) => {}
            // §7.2: the condition is evaluated on the primal and never differentiated ("booleans are
            // external to the language"); only the branches are terms of the language
            ExprKind::If(c_a_b) => {
                let (c, a_b) = &**c_a_b;
                let (a, b) = a_b;
                condition(c)?;
                stack.push(a);
                stack.push(b);
                continue;
            }
            Prim(op, args) if op.info().jvp.is_some() => {}
            Prim(P::Map2 | P::Reduce | P::Map | P::Fold, args) => {
                let arity = if matches!(e.kind, Prim(P::Map, _)) { 1 } else { 2 };
                let f = &args[0];
                if lambda_params(f, arity).is_none() {
                    return Err(outside(f.span, "a function argument that is not a lambda `\\x y -> e`"));
                }
                // Fig. 5 passes 0 for the initial value's cotangent (the paper's reduce starts from its
                // function's unit, Lemma A.2): an initial value computed from the input would lose its
                // gradient, so it is refused rather than differentiated wrongly. (`fold`, Fig. 16, takes any.)
                if matches!(e.kind, Prim(P::Reduce, _)) && !shape_only(&args[1]) {
                    return Err(Diagnostic::error(
                        args[1].span,
                        "reduce's initial value must not depend on the input (§3.1: reduce starts from its function's unit, whose cotangent Fig. 5 drops; `fold` (A.3, Fig. 16) differentiates its initial value)",
                    ));
                }
                // Fig. 16 folds reals; A.5's Fig. 17 generalises map2 and reduce only (common/general.rs):
                // a fold over other ground types would also need its initial value's cotangent, the first
                // element of Fig. 17's right scan, which we do not build
                if matches!(e.kind, Prim(P::Fold, _)) && (e.ty != Type::Real || args[2].ty.as_array() != Some(&Type::Real)) {
                    return Err(outside(
                        e.span,
                        &format!("a fold over {} to {} (A.3, Fig. 16 folds an array of reals to a real; A.5's Fig. 17 covers map2 and reduce over other ground types, not fold)", crate::types::show(&args[2].ty), crate::types::show(&e.ty)),
                    ));
                }
                // the lambda's own parameters are binders, not values
                stack.push(lambda_body(f, arity));
                stack.extend(args[1..].iter());
                continue;
            }
            Prim(P::Sum, _) => {}
            Prim(op, _) => return Err(outside(e.span, &format!("`{}`", op.symbol()))),
            Lam(..) | App(..) => return Err(outside(e.span, "a function value left after inlining (chosen at run time)")),
            _ => return Err(outside(e.span, "this construct")),
        }
        each_child(e, &mut |c| stack.push(c));
    }
    let copies = stack_copies(body, main_inputs(&main.body));
    if copies > MAX_STACK_COPIES {
        return Err(Diagnostic::error(
            main.span,
            format!(
                "this program's continuations would copy about {copies} cotangent slots, more than the {MAX_STACK_COPIES} this chain allows \
                 (the `stack copies` budget): in Fig. 5 every continuation takes the cotangents of every variable in scope, so a \
                 program with n lets prints O(n²) of them (§5.1's partial evaluation is what removes them)"
            ),
        ));
    }
    Ok(p)
}

/// Whether a type holds a boolean or an integer (§7.2: external to the language).
fn has_bool_or_int(t: &Type) -> bool {
    let mut stack = vec![t];
    while let Some(t) = stack.pop() {
        match t {
            Type::Bool | Type::Int => return true,
            Type::Tuple(ts) => stack.extend(ts.iter()),
            t => stack.extend(t.as_array()),
        }
    }
    false
}

/// Whether a reduce's initial value reads the input only for shapes: each variable occurs as the
/// array of a `map (x. c)` with c closed (A.6's ZerosLike/OnesLike, e.g. the zero row `map (x. 0) v` a
/// reduce over rows starts from, A.5). Its derivative is 0, so Fig. 5 dropping its cotangent is exact.
fn shape_only(init: &Expr) -> bool {
    let mut stack = vec![init];
    while let Some(e) = stack.pop() {
        match &e.kind {
            ExprKind::Var(n) if !n.is_global() => return false,
            ExprKind::Prim(P::Map, args) if lambda_params(&args[0], 1).is_some() => {
                let f = &args[0];
                if !crate::kit::passes::free_locals(lambda_body(f, 1)).is_empty() {
                    return false;
                }
                if !matches!(args[1].kind, ExprKind::Var(_)) {
                    stack.push(&args[1]);
                }
            }
            _ => each_child(e, &mut |c| stack.push(c)),
        }
    }
    true
}

/// A condition of §7.2: a primal computation (comparisons, arithmetic, `length`) read and never
/// differentiated; what would bind or call a function in it is refused, located.
fn condition(c: &Expr) -> Result<(), Diagnostic> {
    use ExprKind::*;
    let mut stack = vec![c];
    while let Some(e) = stack.pop() {
        match &e.kind {
            Var(_) | Real(_) | Int(_) | Bool(_) | Unit | Fst(_) | Snd(_) | Ann(..) | If(..) | Tuple(_) => {}
            Prim(op, _) if !matches!(op, P::Map | P::Map2 | P::Reduce | P::Fold | P::Build | P::Scanl | P::Scanr) => {}
            _ => {
                return Err(Diagnostic::error(
                    e.span,
                    "a condition of `if` may only compare and compute on values in scope (§7.2: the condition is evaluated on the primal, outside the differentiated language); bind what it needs with `let` before the `if`",
                ))
            }
        }
        each_child(e, &mut |x| stack.push(x));
    }
    Ok(())
}

/// The most cotangent slots the printed continuations may hold in all (a transform budget: past it
/// the output would take gigabytes).
pub const MAX_STACK_COPIES: usize = 400_000;

/// How many variables main's parameter binds (the first context).
fn main_inputs(main: &Expr) -> usize {
    match &main.kind {
        ExprKind::Lam(_, p_x) => { let (p, _) = &**p_x; p.names().len().max(1) },
        _ => 1,
    }
}

/// The number of cotangent slots Fig. 5's continuations take in all: each construct's continuation
/// takes the whole context Γ (plus its result), a let extends Γ for its body, the arguments of a
/// non-unary construct each one slot more than the last, and map2 and reduce differentiate their
/// bodies again (three and two nested gradients). Walked with an explicit stack.
pub fn stack_copies(body: &Expr, inputs: usize) -> usize {
    let mut total = 0usize;
    let mut stack = vec![(body, inputs, 1usize)];
    while let Some((e, n, times)) = stack.pop() {
        total = total.saturating_add(n.saturating_add(1).saturating_mul(times));
        if total > MAX_STACK_COPIES {
            return total;
        }
        match &e.kind {
            ExprKind::Let(p_e1_e2) => {
                let (p, e1_e2) = &**p_e1_e2;
                let (e1, e2) = e1_e2;
                stack.push((e1, n, times));
                stack.push((e2, n + p.names().len().max(1), times));
            }
            // §7.2: each branch runs in the primal and is differentiated again in the continuation
            ExprKind::If(a_b_x) => {
                let (_, a_b) = &**a_b_x;
                let (a, b) = a_b;
                stack.push((a, n, times.saturating_mul(2)));
                stack.push((b, n, times.saturating_mul(2)));
            }
            ExprKind::Prim(P::Map2 | P::Map | P::Reduce, args) => {
                let nested = if matches!(e.kind, ExprKind::Prim(P::Reduce, _)) { 2 } else { 3 };
                let arity = if matches!(e.kind, ExprKind::Prim(P::Map, _)) { 1 } else { 2 };
                let inner = if matches!(e.kind, ExprKind::Prim(P::Reduce, _)) { 2 } else { n + 4 };
                stack.push((lambda_body(&args[0], arity), inner, times.saturating_mul(nested)));
                for (i, a) in args[1..].iter().enumerate() {
                    stack.push((a, n + i, times));
                }
            }
            _ => {
                let mut i = 0;
                each_child(e, &mut |c| {
                    stack.push((c, n + i, times));
                    i += 1;
                });
            }
        }
    }
    total
}

/// The parameters of `\x -> \y -> e` (`arity` of them, each a variable).
pub fn lambda_params(f: &Expr, arity: usize) -> Option<Vec<Name>> {
    let mut out = vec![];
    let mut e = f;
    for _ in 0..arity {
        let ExprKind::Lam(_, p_b) = &e.kind else { return None };
        let (p, b) = &**p_b;
        let Pat::Var(n, _) = p else { return None };
        out.push(n.clone());
        e = b;
    }
    Some(out)
}

/// The body of `\x -> \y -> e`.
pub fn lambda_body(f: &Expr, arity: usize) -> &Expr {
    let mut e = f;
    for _ in 0..arity {
        if let ExprKind::Lam(_, b_x) = &e.kind {
            let (_, b) = &**b_x;
            e = b;
        }
    }
    e
}

/// `0_G`, shaped like `witness : G` (an array's zero needs its length: ZerosLike, Fig. 4).
pub fn zero(ty: &Type, witness: Expr, fr: &mut Fresh) -> Expr {
    match ty {
        Type::Real => real(0.0),
        Type::Unit => unit(),
        _ => map_shape(ty, witness, fr, &|t, v, _| if *t == Type::Real { real(0.0) } else { v }),
    }
}

/// `a +^_G b` (Notation 1: componentwise on tuples, `map2 +` on arrays).
pub fn plus(ty: &Type, a: Expr, b: Expr, fr: &mut Fresh) -> Expr {
    match ty {
        Type::Real => add(a, b),
        Type::Unit => unit(),
        _ => {
            let z = Zip {
                names: ["a", "b"],
                keep: &|_| true,
                leaf: &|t, a, b| if *t == Type::Real { add(a, b) } else { a },
                tuple: &tuple,
                inject: &|right, e| if right { inr(e) } else { inl(e) },
                mismatch: &|_, a, _| a,
                array: &|elems| elems,
            };
            zip_shape(ty, a, b, fr, &z)
        }
    }
}

/// `s * g` for a real `s` and `g : G` (the map2 rule's `map2 *` scaling context tuples).
pub fn scale(ty: &Type, s: Expr, g: Expr, fr: &mut Fresh) -> Expr {
    match ty {
        Type::Real => mul(s, g),
        _ => map_shape(ty, g, fr, &|t, v, _| if *t == Type::Real { mul(s.clone(), v) } else { v }),
    }
}

/// A let pattern with every `_` named (each bound value gets its slot), and its variables with types.
pub fn name_pattern(p: &Pat, ty: &Type, fr: &mut Fresh) -> (Pat, Vec<(Name, Type)>) {
    let mut vars = vec![];
    let p = name_wilds(p, ty, &mut vars, fr);
    (p, vars)
}

fn name_wilds(p: &Pat, ty: &Type, vars: &mut Vec<(Name, Type)>, fr: &mut Fresh) -> Pat {
    match (p, ty) {
        (Pat::Var(n, _), t) => {
            vars.push((n.clone(), t.clone()));
            p.clone()
        }
        (Pat::Wild(s), t) => {
            let n = fr.name("w");
            vars.push((n.clone(), t.clone()));
            Pat::Var(n, *s)
        }
        (Pat::Tuple(ps, s), Type::Tuple(ts)) => Pat::Tuple(ps.iter().zip(ts.iter()).map(|(p, t)| name_wilds(p, t, vars, fr)).collect(), *s),
        _ => p.clone(),
    }
}

/// The value of a pattern's shape built from the given expressions, one per variable.
pub fn rebuild(p: &Pat, vals: &mut dyn Iterator<Item = Expr>) -> Expr {
    match p {
        Pat::Var(..) | Pat::Wild(_) => vals.next().unwrap_or_else(unit),
        Pat::Unit(_) => unit(),
        Pat::Tuple(ps, _) => tuple(ps.iter().map(|p| rebuild(p, vals)).collect()),
    }
}

/// `sum A = reduce (x y. x + y) 0 A` (Ex. 1.2), typed.
pub fn sum_as_reduce(e: &Expr, a: &Expr, fr: &mut Fresh) -> Expr {
    let f = crate::kit::arrays::real_plus(["x", "y"], crate::diag::Span::NONE, fr);
    Expr { kind: ExprKind::Prim(P::Reduce, vec![f, real(0.0).with_ty(Type::Real), a.clone()].into()), span: e.span, ty: Type::Real }
}


/// The first-order main's parameter pattern (its `_` named) and its UNF term (Lemma 4.4: in
/// context A1, …, An, the term returns A1, …, An, B).
pub fn source_unf(src: &Source) -> Result<(Program, Pat, unf::Unf, Fresh), Diagnostic> {
    let p = first_order(src)?;
    let main = p.def("main").expect("first_order keeps main");
    let ExprKind::Lam(_, pat_body) = &main.body.kind else { unreachable!("first_order: main is a lambda") };
    let (pat, body) = &**pat_body;
    let mut fr = Fresh::new(&p);
    let (pat, vars) = name_pattern(pat, src.input_type, &mut fr);
    let input: Vec<unf::Slot> = vars.into_iter().map(|(name, ty)| unf::Slot { name, ty }).collect();
    let u = unf::unf(input, body, &mut fr)?;
    Ok((p, pat, u, fr))
}


/// `grad : (S, δT) → (T, δS)`, the type every gradient stage of the chain states for its wrapper.
pub fn grad_type(src: &Source) -> Vec<(String, Type)> {
    vec![crate::stage::wrapper_type(src)]
}

/// Fig. 4's ∇_Γ, last step: the last continuation `y` called on Γ's zero cotangents and the output's
/// cotangent `dt` (the paper's 1), `let (g1, …, gn) = y (0_Γ, dt) in (r, the gs in main's input shape)`.
pub fn call_last(y: &Name, mut zeros: Vec<Expr>, dt: &Name, gs: &[Name], result: Expr, pat: &Pat) -> Expr {
    zeros.push(var(dt));
    let_(ptuple(gs.iter().map(pvar).collect()), app(var(y), tuple(zeros)), pair(result, rebuild(pat, &mut gs.iter().map(var))))
}

/// `p` with `defs` as its only definitions (a stage's output: no `input` or `expect` lines).
pub fn with_defs(p: &Program, defs: Vec<Def>, next_id: u32) -> Program {
    let mut out = p.clone();
    out.defs = defs;
    out.expects.clear();
    out.input = None;
    out.next_id = next_id;
    out
}

/// The wrapper `grad (s, dt) = body` as the only definition of `p`, located at `def main`, which it
/// differentiates (so that a later stage's stop in it, e.g. unf/pe's budget, points at the source).
pub fn wrapper_program(p: &Program, s: &Name, dt: &Name, body: Expr, next_id: u32) -> Program {
    let mut wrapper = def(crate::stage::WRAPPER, lam(ppair(pvar(s), pvar(dt)), body));
    wrapper.span = p.def("main").map_or(Span::NONE, |m| Span::new(m.span.start as usize, m.span.start as usize + 3));
    with_defs(p, vec![wrapper], next_id)
}

/// What the stages that take the source support: higher-order code, which `first_order` inlines
/// away (§8); the rest of Fig. 2's restrictions are `first_order`'s located refusals.
pub fn supports_source() -> crate::features::Features {
    // integers are let through for the conditions of §7.2; `first_order` refuses them anywhere else
    use crate::features::Feature;
    // and recursion, which `first_order` unrolls where a param decides when it stops
    crate::features::Features::of(&[Feature::HigherOrder, Feature::Conditionals, Feature::Integers, Feature::Recursion])
}

/// A source stage's `accepts`: the program is in Fig. 2's language once inlined.
pub fn accepts_source(src: &Source) -> Result<(), Diagnostic> {
    first_order(src).map(|_| ())
}
