//! Lowers the language's array operations to the three of Efficient CHAD §7 — `build`, indexing
//! `!` and `fold` (with `length`, footnote 23) — so that a transform with rules for those three
//! (Fig. 9) takes every array program:
//!
//! - `map f a = build (length a) (\i -> f (a ! i))`, `map2` likewise (its length is `a`'s);
//! - `sum a = reduce (\x y -> x + y) 0.0 a`; `fold` and `reduce` stay (footnote 16: a fold with an
//!   initial value);
//! - `replicate n x = build n (\_ -> x)`; `shift1L a = build (max (length a - 1) 0) (\i -> a ! (i + 1))`,
//!   `shift1R` likewise;
//! - `scanl f z a = build (length a + 1) (\k -> fold f z (build k (\j -> a ! j)))` and `scanr` as a
//!   fold of the flipped `f` over the reversed suffix: a scan becomes n + 1 folds (O(n²) work; §7
//!   says a scan needs a specialised derivative of its own, which the paper does not give);
//! - a literal `[e0, …, en]` = `build (n + 1) (\i -> if i == 0 then e0 else … en)`.
//!
//! Array arguments are let-bound first, so each is computed once; a lambda applied to an element is
//! beta-reduced into a `let`. The output is re-typed; it computes the same `main`, except that
//! `map2` on arrays of different lengths fails only when the second is the shorter (an index out
//! of range) rather than always. Walked with an explicit stack, top-down: a rewrite only wraps the
//! original subterms, which are visited after it.

use super::retype;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::prims::Prim;

const PASS: &str = "lower_arrays";

/// `p` (one typed `main`, as `inline_all` leaves it) with its array operations lowered.
pub fn lower_arrays(p: &Program) -> Result<Program, Diagnostic> {
    let mut out = p.clone();
    let mut fr = Fresh::new(&out);
    for d in &mut out.defs {
        let mut stack = vec![&mut d.body];
        while let Some(e) = stack.pop() {
            if let Some(new) = lower(e, &mut fr) {
                *e = new;
            }
            stack.extend(children_mut(e));
        }
    }
    out.next_id = fr.next_id;
    retype(&mut out, PASS)?;
    // what nothing constrains (an unused lambda parameter's type) is R, as first_order_at reads it
    for d in &mut out.defs {
        let mut stack = vec![&mut d.body];
        while let Some(e) = stack.pop() {
            e.ty = crate::types::rename(&e.ty, &mut |_| Type::Real);
            stack.extend(children_mut(e));
        }
    }
    Ok(out)
}

/// `f x` (and `f x y`) with a lambda `f` beta-reduced into lets; other functions applied.
fn apply(f: &Expr, args: Vec<Expr>) -> Expr {
    let mut f = f.clone();
    let mut binds = vec![];
    let mut rest = vec![];
    for a in args {
        while let ExprKind::Ann(x_x) = f.kind {
            let (x, _) = *x_x;
            f = x;
        }
        match f.kind {
            ExprKind::Lam(_, p_body) if rest.is_empty() => {
                let (p, body) = *p_body;
                binds.push((p, a));
                f = body;
            }
            kind => {
                f = Expr { kind, ..f };
                rest.push(a);
            }
        }
    }
    let call = apps(f, rest);
    binds.into_iter().rev().fold(call, |acc, (p, a)| let_(p, a, acc))
}

fn length(xs: &Name) -> Expr {
    prim(Prim::Length, vec![var(xs)])
}
fn index(xs: &Name, i: Expr) -> Expr {
    prim(Prim::Index, vec![var(xs), i])
}
fn build_(n: Expr, i: &Name, body: Expr) -> Expr {
    prim(Prim::Build, vec![n, lam(pvar(i), body)])
}

/// The lowered form of one node, if it is an operation §7 does not have.
fn lower(e: &Expr, fr: &mut Fresh) -> Option<Expr> {
    let out = match &e.kind {
        ExprKind::Prim(op, args) => match (op, &args[..]) {
            (Prim::Map, [f, a]) => {
                let (xs, i) = (fr.name("xs"), fr.name("i"));
                let_(pvar(&xs), a.clone(), build_(length(&xs), &i, apply(f, vec![index(&xs, var(&i))])))
            }
            (Prim::Map2, [f, a, b]) => {
                let (xs, ys, i) = (fr.name("xs"), fr.name("ys"), fr.name("i"));
                let body = apply(f, vec![index(&xs, var(&i)), index(&ys, var(&i))]);
                let_(pvar(&xs), a.clone(), let_(pvar(&ys), b.clone(), build_(length(&xs), &i, body)))
            }
            (Prim::Sum, [a]) => {
                let (x, y) = (fr.name("x"), fr.name("y"));
                prim(Prim::Reduce, vec![lam(pvar(&x), lam(pvar(&y), add(var(&x), var(&y)))), real(0.0), a.clone()])
            }
            (Prim::Replicate, [n, x]) => {
                let (v, i) = (fr.name("v"), fr.name("i"));
                let_(pvar(&v), x.clone(), build_(n.clone(), &i, var(&v)))
            }
            (Prim::Shift1L | Prim::Shift1R, [a]) => {
                let (xs, i) = (fr.name("xs"), fr.name("i"));
                let n = prim(Prim::Max, vec![sub(length(&xs), int(1)), int(0)]);
                let at = if *op == Prim::Shift1L { add(var(&i), int(1)) } else { var(&i) };
                let_(pvar(&xs), a.clone(), build_(n, &i, index(&xs, at)))
            }
            (Prim::Scanl, [f, z, a]) => {
                let (xs, z0, k, j) = (fr.name("xs"), fr.name("z"), fr.name("k"), fr.name("j"));
                let prefix = build_(var(&k), &j, index(&xs, var(&j)));
                let fold = prim(Prim::Fold, vec![f.clone(), var(&z0), prefix]);
                let_(pvar(&xs), a.clone(), let_(pvar(&z0), z.clone(), build_(add(length(&xs), int(1)), &k, fold)))
            }
            (Prim::Scanr, [f, z, a]) => {
                let (xs, z0, k, j, acc, x) = (fr.name("xs"), fr.name("z"), fr.name("k"), fr.name("j"), fr.name("acc"), fr.name("x"));
                // a_{n-1}, …, a_k: the suffix from k, reversed, folded from the left with f flipped
                let at = sub(sub(length(&xs), int(1)), var(&j));
                let suffix = build_(sub(length(&xs), var(&k)), &j, index(&xs, at));
                let flipped = lam(pvar(&acc), lam(pvar(&x), apply(f, vec![var(&x), var(&acc)])));
                let fold = prim(Prim::Fold, vec![flipped, var(&z0), suffix]);
                let_(pvar(&xs), a.clone(), let_(pvar(&z0), z.clone(), build_(add(length(&xs), int(1)), &k, fold)))
            }
            _ => return None,
        },
        // an empty literal stays a constant (its elements' type may have no value to write)
        ExprKind::Array(es) if !es.is_empty() => {
            let i = fr.name("i");
            let last = es.len() - 1;
            let mut body = es[last].clone();
            for (k, x) in es[..last].iter().enumerate().rev() {
                body = if_(prim(Prim::Eq, vec![var(&i), int(k as i64)]), x.clone(), body);
            }
            build_(int(es.len() as i64), &i, body)
        }
        _ => return None,
    };
    Some(spanned(out, e.span))
}

/// The generated skeleton (the builds, indexings and folds an operation became) with the
/// operation's span, down to the original subterms, which keep theirs: a runtime that reports
/// where it is (chad/arrays's graph) then names the source operation.
fn spanned(mut out: Expr, span: Span) -> Expr {
    let mut stack = vec![&mut out];
    while let Some(e) = stack.pop() {
        if e.span.is_none() {
            e.span = span;
            stack.extend(children_mut(e));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{Budget, Builtins, Machine};

    /// The program inlined, lowered, and run at `at` against the original.
    fn same(text: &str, at: &str) -> Program {
        let (p, s, t) = crate::pipeline::front_end_at(text, &[], Some(at)).expect("front end");
        let src = crate::stage::Source { program: &p, input_type: &s, output_type: &t, builtins: &Builtins::new() };
        let inl = crate::kit::passes::first_order_at(&src, 100_000).expect("inlines");
        let low = lower_arrays(&inl).expect("lowers");
        let x = crate::syntax::value_of(&crate::syntax::parse_expr(at).expect("parses")).expect("a value");
        let run = |p: &Program| {
            let mut m = Machine::new(p, &Builtins::new(), Budget::default()).expect("lowers to code");
            m.call("main", vec![x.clone()]).expect("runs")
        };
        assert_eq!(format!("{}", run(&low)), format!("{}", run(&p)), "{text}");
        low
    }

    fn ops(p: &Program) -> Vec<Prim> {
        crate::kit::passes::all_exprs(p).iter().filter_map(|e| if let ExprKind::Prim(op, _) = &e.kind { Some(*op) } else { None }).collect()
    }

    /// Only §7's operations (and `reduce`, a fold) are left.
    fn only_build_index_fold(p: &Program) {
        for op in ops(p) {
            assert!(!matches!(op, Prim::Map | Prim::Map2 | Prim::Sum | Prim::Replicate | Prim::Scanl | Prim::Scanr | Prim::Shift1L | Prim::Shift1R), "{op:?} left");
        }
        assert!(crate::kit::passes::all_exprs(p).iter().all(|e| !matches!(&e.kind, ExprKind::Array(es) if !es.is_empty())));
    }

    #[test]
    fn map_map2_sum_replicate_keep_their_values() {
        let p = same("def main (a, b) = sum (map2 (\\x y -> x * y) (map (\\x -> x + 1.0) a) b) + sum (replicate 3 (a ! 0))", "([1.0, 2.0], [3.0, 4.0])");
        only_build_index_fold(&p);
        assert!(ops(&p).contains(&Prim::Build) && ops(&p).contains(&Prim::Reduce));
    }

    #[test]
    fn scans_and_shifts_become_folds_over_builds() {
        for text in [
            "def main a = scanl (\\acc x -> acc * x) 1.0 a",
            "def main a = scanr (\\x acc -> x - acc) 0.5 a",
            "def main a = map2 (\\x y -> x * y) (shift1L a) (shift1R a)",
            "def main a = shift1L (scanl (\\acc x -> acc - x) 2.0 a)",
        ] {
            for at in ["[2.0, 3.0, 5.0]", "[]", "[7.0]"] {
                let p = same(text, at);
                only_build_index_fold(&p);
            }
        }
    }

    #[test]
    fn literals_become_builds_and_empty_ones_stay() {
        let p = same("def main x = sum [x, 2.0 * x, x * x]", "3.0");
        only_build_index_fold(&p);
        let p = same("def main x = length ([] : Array R) + 1", "3.0");
        assert!(crate::kit::passes::all_exprs(&p).iter().any(|e| matches!(&e.kind, ExprKind::Array(es) if es.is_empty())));
    }

    #[test]
    fn an_operation_inside_another_is_lowered_too() {
        let p = same("def main m = map (\\row -> sum (map (\\x -> x * x) row)) m", "[[1.0, 2.0], [3.0, 4.0]]");
        only_build_index_fold(&p);
    }
}
