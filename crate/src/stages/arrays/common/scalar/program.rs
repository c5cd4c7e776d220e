//! The programs of Part A: D[t] (Fig. 2 for the tree stages, Fig. 3 for `arrays/share`) with the
//! wrapper around it, and what the paper's §2 language leaves out (arrays; an output other than R).

use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::kit::delta::drev::{drev_program, drev_type, m_type, Naming};
use crate::kit::delta::dual::{dual_program, dual_type, wrapper_type, DeltaCompanion};
use crate::kit::polytypic::map_shape_acc;
use crate::stage::{Output, Source, WRAPPER};

/// The gradient as a vector with one entry per real of the input (the paper's `Map DVarName R`, or
/// the Rⁿ of eval1–eval3).
pub fn grad_vector_type() -> Type {
    Type::array(Type::Real)
}

/// Refuses what §2's language and wrapper do not have: arrays (the naive extension is Part B) and a
/// result other than one real (§2.1 assumes `x : τin ⊢ t : R`; Appendix A generalises it).
pub fn require_scalar(src: &Source, stage: &str) -> Result<(), Diagnostic> {
    for d in &src.program.defs {
        let mut stack: Vec<&Expr> = vec![&d.body];
        while let Some(e) = stack.pop() {
            let what = match &e.kind {
                ExprKind::Array(_) => Some("the array literal".to_string()),
                ExprKind::Prim(op, _) if op.is_array_op() => Some(format!("the array operation `{}`", op.symbol())),
                _ if has_array(&e.ty) => Some(format!("a value of array type {}", crate::types::show(&e.ty))),
                _ => None,
            };
            if let Some(what) = what {
                return Err(Diagnostic::error(
                    e.span,
                    format!(
                        "{stage} is the scalar background of §2, whose language has no arrays, but the program uses {what}; \
the array stages of the chain (§4 onwards) take arrays"
                    ),
                ));
            }
            each_child(e, &mut |c| stack.push(c));
        }
    }
    let span = src.program.def("main").map_or(Span::NONE, |d| d.span);
    if has_array(src.input_type) || has_array(src.output_type) {
        return Err(Diagnostic::error(span, format!("{stage} is the scalar background of §2, whose language has no arrays, but main's type has one")));
    }
    // App. A: any first-order output, one evaluation per real of it; the paper works it out for
    // arrays of reals and says tuples follow, so tuples of reals, integers and booleans are taken
    if !ground(src.output_type) || count_reals(src.output_type) == 0 {
        return Err(Diagnostic::error(
            span,
            format!(
                "{stage} uses the wrapper of §2.7 (Fig. 6) with Appendix A's generalisation (one evaluation per real of \
the output), which needs a first-order output with at least one real (tuples of reals, integers and booleans), but \
main returns {}",
                crate::types::show(src.output_type)
            ),
        ));
    }
    Ok(())
}

/// Whether `t` is built from reals, integers and booleans by tuples (App. A's first-order outputs).
fn ground(t: &Type) -> bool {
    match t {
        Type::Real | Type::Int | Type::Bool | Type::Unit => true,
        Type::Tuple(ts) => ts.iter().all(ground),
        _ => false,
    }
}

fn count_reals(t: &Type) -> usize {
    match t {
        Type::Real => 1,
        Type::Tuple(ts) => ts.iter().map(count_reals).sum(),
        _ => 0,
    }
}

fn has_array(t: &Type) -> bool {
    match t {
        _ if t.as_array().is_some() => true,
        Type::Tuple(ts) => ts.iter().any(has_array),
        Type::Con(c) => c.args.iter().any(has_array),
        Type::Sum(ab) | Type::Fun(ab) | Type::Lin(ab) => has_array(&ab.0) || has_array(&ab.1),
        _ => false,
    }
}

/// The definitions the wrappers add.
const NAMED: &str = "named_S";
const RECONSTRUCT: &str = "reconstruct_S";

/// `named_S (s, n)` (§2.7): each real r of the input becomes (r, Input n), numbered left to right
/// from n (E3: `named ((7, 3.1), 8) = (((7, Input 0), (3.1, Input 1)), (8, Input 2))`); returns the
/// next name, the number of real inputs. `reconstruct_S (g, s)`: each real of s becomes `g ! i`, the
/// gradient of the input named i (an integer leaf is handed back as it is).
fn named_and_reconstruct(s: &Type, fr: &mut Fresh) -> [Def; 2] {
    let (x, n) = (fr.name("s"), fr.name("n"));
    let nm = map_shape_acc(s, var(&x), var(&n), fr, &|t, x, n| {
        if *t == Type::Real {
            pair(pair(x, app(builtin("Input"), n.clone())), add(n, int(1)))
        } else {
            pair(x, n)
        }
    });
    let named = def(NAMED, lam(ppair(pvar(&x), pvar(&n)), nm));
    let (g, y) = (fr.name("g"), fr.name("s"));
    let g2 = g.clone();
    let rc = map_shape_acc(s, var(&y), int(0), fr, &move |t, x, n| {
        if *t == Type::Real {
            pair(prim(Prim::Index, vec![var(&g2), n.clone()]), add(n, int(1)))
        } else {
            pair(x, n)
        }
    });
    let mut body = fst(rc);
    wild_unused(&mut body);
    let reconstruct = def(RECONSTRUCT, lam(ppair(pvar(&g), pvar(&y)), body));
    [named, reconstruct]
}

/// Binds the input's reals that reconstruct_S does not read to `_` (two unused names of the same text
/// would otherwise print as one name bound twice, which does not parse back).
fn wild_unused(e: &mut Expr) {
    let mut used = rustc_hash::FxHashSet::default();
    let mut stack: Vec<&Expr> = vec![e];
    while let Some(x) = stack.pop() {
        if let ExprKind::Var(n) = &x.kind {
            used.insert(n.id);
        }
        each_child(x, &mut |c| stack.push(c));
    }
    fn pat(p: &mut Pat, used: &rustc_hash::FxHashSet<u32>) {
        match p {
            Pat::Var(n, s) if !used.contains(&n.id) => *p = Pat::Wild(*s),
            Pat::Tuple(ps, _) => ps.iter_mut().for_each(|q| pat(q, used)),
            _ => {}
        }
    }
    let mut stack: Vec<&mut Expr> = vec![e];
    while let Some(x) = stack.pop() {
        match &mut x.kind {
            ExprKind::Let(p_x) => pat(&mut p_x.0, &used), ExprKind::Lam(_, p_x) => pat(&mut p_x.0, &used),
            ExprKind::Case(c) => {
                let (_, p1, _, p2, _) = &mut **c;
                pat(p1, &used);
                pat(p2, &used);
            }
            _ => {}
        }
        each_child_mut(x, &mut |c| stack.push(c));
    }
}

/// The wrapper, for both transforms (Eq. 2's and Fig. 6's, with the evaluator `eval`):
/// ```text
/// grad (s, dt) = let (s0, n) = named_S (s, 0) in
///                let (t, d) = run (main s0) in          -- run = runIdGen 0 for Fig. 3, nothing for Fig. 2
///                let g = eval dt d n in
///                (t, reconstruct_S (g, s))
/// ```
/// For an output other than R (Appendix A: "run the normal algorithm for every scalar in the output,
/// and collect the results"), `(t, d)` is D[T]'s pattern, which names every real's primal t_k and
/// Delta d_k, `dt` the seed's, which names every real's cotangent dt_k; the evaluator runs once per
/// real, `eval dt_k d_k n`, and the gradient is their sum (`map2 (+)`): the seed's cotangent
/// contracted with the Jacobian's rows that App. A's passes give one by one.
fn wrapper(src: &Source, fr: &mut Fresh, eval: &str, monadic: bool) -> Def {
    let s = fr.name("s");
    let mut dts = vec![];
    let seed = out_pattern(src.output_type, fr, &mut |fr, real| {
        if !real {
            return pwild();
        }
        let dt = fr.name("dt");
        dts.push(dt.clone());
        pvar(&dt)
    });
    let (s0, n) = (fr.name("s0"), fr.name("n"));
    let (mut ds, mut primal) = (vec![], vec![]);
    let dpat = out_pattern(src.output_type, fr, &mut |fr, real| {
        if !real {
            let x = fr.name("x");
            primal.push(x.clone());
            return pvar(&x);
        }
        let (t, d) = (fr.name("t"), fr.name("d"));
        primal.push(t.clone());
        ds.push(d.clone());
        ppair(pvar(&t), pvar(&d))
    });
    let g = fr.name("g");
    let call = if !monadic {
        app(global("main"), var(&s0))
    } else {
        // D[main] is `λx. D[t]` when main is a λ; otherwise an IdGen computation giving the function.
        let is_fun = src.program.def("main").is_some_and(|d| matches!(d.body.kind, ExprKind::Lam(..)));
        let m = if is_fun {
            app(global("main"), var(&s0))
        } else {
            let f = fr.name("f");
            bind(pvar(&f), global("main"), app(var(&f), var(&s0)))
        };
        apps(builtin("runIdGen"), [int(0), m])
    };
    let passes = dts.iter().zip(&ds).map(|(dt, d)| apps(builtin(eval), [var(dt), var(d), var(&n)]));
    let sum = passes
        .reduce(|a, b| {
            let (x, y) = (fr.name("a"), fr.name("b"));
            prim(Prim::Map2, vec![lam(pvar(&x), lam(pvar(&y), add(var(&x), var(&y)))), a, b])
        })
        .unwrap_or_else(unit);
    let mut leaves = primal.iter();
    let t = rebuild(src.output_type, &mut || var(leaves.next().expect("one primal per leaf")));
    let body = let_(
        ppair(pvar(&s0), pvar(&n)),
        app(global(NAMED), pair(var(&s), int(0))),
        let_(dpat, call, let_(pvar(&g), sum, pair(t, app(global(RECONSTRUCT), pair(var(&g), var(&s)))))),
    );
    def(WRAPPER, lam(ppair(pvar(&s), seed), body))
}

/// A pattern over a value of the first-order type `t` (tuples of ground leaves): `leaf(fresh, is_real)`
/// for each leaf, left to right.
fn out_pattern(t: &Type, fr: &mut Fresh, leaf: &mut dyn FnMut(&mut Fresh, bool) -> Pat) -> Pat {
    match t {
        Type::Tuple(ts) => ptuple(ts.iter().map(|u| out_pattern(u, fr, leaf)).collect()),
        _ => leaf(fr, *t == Type::Real),
    }
}

/// A value of type `t` from its leaves, left to right.
fn rebuild(t: &Type, leaf: &mut dyn FnMut() -> Expr) -> Expr {
    match t {
        Type::Tuple(ts) => tuple(ts.iter().map(|u| rebuild(u, leaf)).collect()),
        _ => leaf(),
    }
}

/// A1 and A2–A5: Fig. 2's D[t] (the Delta a tree: no IDs) with the wrapper calling `eval`, whose
/// runtime is the stage's evaluator. One program text for all four evaluators.
pub fn tree_transform(src: &Source) -> Result<Output, Diagnostic> {
    let mut fr = Fresh::new(src.program);
    let mut out = dual_program(src, &mut fr, &DeltaCompanion);
    out.defs.extend(named_and_reconstruct(src.input_type, &mut fr));
    out.defs.push(wrapper(src, &mut fr, "eval", false));
    out.next_id = fr.next_id;
    Ok(Output::from(out))
}

/// A6–A8: Fig. 3's D[t] in IdGen (Share on every primitive's result) with Fig. 6's wrapper around
/// reversePass (Fig. 5).
pub fn share_transform(src: &Source) -> Result<Output, Diagnostic> {
    let mut fr = Fresh::new(src.program);
    let (mut out, laws) = drev_program(src.program, &mut fr, Naming::Share)?;
    out.defs.extend(named_and_reconstruct(src.input_type, &mut fr));
    out.defs.push(wrapper(src, &mut fr, "reversePass", true));
    out.next_id = fr.next_id;
    Ok(Output { views: vec![laws.view(crate::kit::monad_laws::VIEW)], ..Output::from(out) })
}

/// The types the paper states: `main : D[S] → D[R]` (Fig. 2) or `D[S] → IdGen D[R]` (Fig. 3, when main is
/// a λ), `named_S`, `reconstruct_S` and the wrapper.
pub fn stated_types(src: &Source, monadic: bool) -> Vec<(String, Type)> {
    let (s, t) = (src.input_type, src.output_type);
    let ds = if monadic { drev_type(s) } else { dual_type(s, &DeltaCompanion) };
    let dt = dual_type(t, &DeltaCompanion);
    let mut v = vec![
        (NAMED.to_string(), Type::fun(Type::tup(vec![s.clone(), Type::Int]), Type::tup(vec![ds.clone(), Type::Int]))),
        (RECONSTRUCT.to_string(), Type::fun(Type::tup(vec![grad_vector_type(), s.clone()]), s.clone())),
        (WRAPPER.to_string(), wrapper_type(s, t)),
    ];
    if !monadic {
        v.push(("main".into(), Type::fun(ds, dt)));
    } else if src.program.def("main").is_some_and(|d| matches!(d.body.kind, ExprKind::Lam(..))) {
        v.push(("main".into(), Type::fun(ds, m_type(dt))));
    }
    v
}
