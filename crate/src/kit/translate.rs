//! The one homomorphic dual-number translation `D{e}` (non-monadic): Krawiec et al. Fig. 3 (forward
//! mode), Figs. 5 and 7 (reverse mode with δS or Delta companions), and Smeding & Vákár Fig. 6 (D¹_c,
//! with Sec. 11 for sums, letrec and conditionals). All of them pair each real with something and
//! translate everything else homomorphically; a stage says, through `DualRule`, only what a real's
//! type becomes, what a constant is paired with, and how a primitive's result's companion is made
//! from the partial derivatives (deriv.rs) and its arguments' companions.

use crate::build::*;
use crate::deriv::{self, Partial};
use crate::diag::Span;
use crate::ir::*;

/// What a stage's dual numbers are: `D[R] = R × companion`, the companion of a constant, and the
/// companion of a primitive's result.
pub trait DualRule {
    /// `D[τ]` of an annotation's type (a `kit::polytypic::map_reals` with this rule's `D[R]`).
    fn ty(&self, t: &Type) -> Type;
    /// `D[c]` for a real whose primal `c` depends on no real input (a literal, or `real k`): the pair
    /// of `c` and the zero companion (`(r, 0)`, `(r, zero_S)`, `(r, Zero)`, `(r, linλz. 0)`).
    fn constant(&self, fr: &mut Fresh, c: Expr) -> Expr;
    /// The printed names of a real primitive's argument pairs (primal, companion), one per argument,
    /// and of its result: the names each paper's rule uses (`(x, dx)`, `(x, u1)`, `(x1, d1)`, ...).
    fn names(&self, arity: usize) -> (&'static [(&'static str, &'static str)], &'static str);
    /// The companion of a real primitive's result from its partials (deriv.rs) and its arguments'
    /// companions `ds`; `span` is the primitive's.
    fn companion(&self, fr: &mut Fresh, partials: &[Partial], ds: &[Expr], span: Span) -> Expr;
    /// Whether a comparison's argument companions, which it does not use, are bound to `_` (as
    /// forward mode prints them) rather than named.
    fn wild_unused(&self) -> bool {
        false
    }
    /// Whether a constant argument's term is left out of the companion (`deriv::is_constant`: its
    /// tangent is a structural zero, so an infinite partial cannot turn it into NaN).
    fn skips_constants(&self) -> bool {
        false
    }
}

/// `D{e}`, rule for rule. Fresh names are taken left to right, subterm by subterm, so a stage's
/// printed program does not depend on which stage calls this.
pub fn dual(e: &Expr, fr: &mut Fresh, r: &dyn DualRule) -> Expr {
    use ExprKind::*;
    let b = |x: &Expr, fr: &mut Fresh| Box::new(dual(x, fr, r));
    let kind = match &e.kind {
        // D{x} = x ; D{k} = k for integer, boolean and unit constants (and a target's builtins)
        Var(_) | Int(_) | Bool(_) | Unit | Builtin(_) => e.kind.clone(),
        // D{r} = (r, 0) (Fig. 3), (r, zero_S) (Fig. 5), (r, Zero) (Fig. 7), (r, linλz. 0) (S&V Fig. 6)
        Real(x) => return at(r.constant(fr, real(*x)), e.span),
        // D{λx. e} = λx. D{e}
        Lam(k, p_body) => { let (p, body) = &**p_body; Lam(*k, Box::new((p.clone(), dual(body, fr, r)))) },
        // D{e1 e2} = D{e1} D{e2}
        App(f_a) => { let (f, a) = &**f_a; App(Box::new((dual(f, fr, r), dual(a, fr, r)))) },
        // D{let x = e1 in e2} = let x = D{e1} in D{e2}
        // (iteratively along a chain of lets: a long straight-line program is one deep chain)
        Let(..) => {
            let mut links = vec![];
            let mut cur = e;
            while let ExprKind::Let(p_rhs_body) = &cur.kind {
                let (p, rhs_body) = &**p_rhs_body;
                let (rhs, body) = rhs_body;
                links.push((p.clone(), dual(rhs, fr, r), cur.span));
                cur = body;
            }
            let mut acc = dual(cur, fr, r);
            for (p, rhs, span) in links.into_iter().rev() {
                acc = Expr { kind: ExprKind::Let(Box::new((p, (rhs, acc)))), span, ty: Type::Unknown };
            }
            return acc;
        }
        // letrec is translated like let (S&V Sec. 11): each function's body is translated
        LetRec(fs_body) => { let (fs, body) = &**fs_body; LetRec(Box::new((
            fs.iter().map(|f| FunDef { name: f.name.clone(), body: dual(&f.body, fr, r), span: f.span }).collect(),
            dual(body, fr, r),
        ))) },
        // D{(e1, e2)} = (D{e1}, D{e2}) ; D{fst e} = fst D{e} ; D{snd e} = snd D{e}
        Tuple(es) => Tuple(es.iter().map(|x| dual(x, fr, r)).collect()),
        // arrays of dual numbers (the array paper §4.1): D{[e1, …, en]} = [D{e1}, …, D{en}]
        Array(es) => Array(es.iter().map(|x| dual(x, fr, r)).collect()),
        // D{sum a} = D{fold (λacc x. acc + x) 0.0 a}
        Prim(crate::ir::Prim::Sum, args) => return dual(&crate::kit::arrays::sum_as_fold(&args[0], e.span, fr), fr, r),
        // D{map f a} = map D{f} D{a}, and every other array operation likewise
        Prim(op, args) if op.is_array_op() => Prim(*op, args.iter().map(|x| dual(x, fr, r)).collect()),
        // S&V §12: D[s ⋆ t] = D[s] ⋆ D[t] (no IDs to fork here: the fork-join pair stays a pair)
        Par(x_y) => { let (x, y) = &**x_y; Par(Box::new((dual(x, fr, r), dual(y, fr, r)))) },
        Fst(x) => Fst(b(x, fr)),
        Snd(x) => Snd(b(x, fr)),
        // S&V Sec. 11: D{inl e} = inl D{e}, D{case e of …} = case D{e} of …, and if likewise
        Inl(x) => Inl(b(x, fr)),
        Inr(x) => Inr(b(x, fr)),
        Case(c) => {
            let (s, p1, e1, p2, e2) = &**c;
            Case(Box::new((dual(s, fr, r), p1.clone(), dual(e1, fr, r), p2.clone(), dual(e2, fr, r))))
        }
        If(c_x_y) => { let (c, x_y) = &**c_x_y; If(Box::new((dual(c, fr, r), (dual(&x_y.0, fr, r), dual(&x_y.1, fr, r))))) },
        Ann(x_t) => { let (x, t) = &**x_t; Ann(Box::new((dual(x, fr, r), r.ty(t)))) },
        Bind(p_m_k) => { let (p, m_k) = &**p_m_k; Bind(Box::new((p.clone(), (dual(&m_k.0, fr, r), dual(&m_k.1, fr, r))))) },
        Pure(x) => Pure(b(x, fr)),
        Prim(op, args) => return at(dual_prim(*op, args, e.span, fr, r), e.span),
    };
    Expr { kind, span: e.span, ty: Type::Unknown }
}

/// Real primitives: Fig. 3's `+R` and `×R`, Figs. 5 and 7's, S&V Fig. 6's, and Krawiec Fig. 14's
/// general rule, with the partials from the shared table (deriv.rs). The primitive's
/// λ((x, dx), (y, dy)). ... is shown applied to its (saturated) arguments:
/// `let (x, dx) = D{e1} in let (y, dy) = D{e2} in (x op y, companion)`.
fn dual_prim(op: Prim, args: &[Expr], span: Span, fr: &mut Fresh, r: &dyn DualRule) -> Expr {
    let real_args = args.first().is_some_and(|a| a.ty == Type::Real);
    let translated: Vec<Expr> = args.iter().map(|a| dual(a, fr, r)).collect();
    if op == Prim::ToReal {
        // real k depends on no real input: a constant, like a literal.
        return r.constant(fr, prim(op, translated));
    }
    if !real_args {
        // integer and boolean operations are untouched: D{+Z} = +Z (and && and || keep their short circuit)
        return prim(op, translated);
    }
    let (texts, result_text) = r.names(args.len());
    let names: Vec<(Name, Name)> = texts.iter().take(args.len()).map(|(x, d)| (fr.name(x), fr.name(d))).collect();
    let xs: Vec<Expr> = names.iter().map(|(x, _)| var(x)).collect();
    let ds: Vec<Expr> = names.iter().map(|(_, d)| var(d)).collect();
    let result = fr.name(result_text);
    let rule = deriv::rule(op, &xs, &var(&result));
    let used = rule.is_some();
    let body = match rule {
        // comparisons look at primals only
        None => prim(op, xs.clone()),
        Some(rule) => {
            let (partials, ds) = if r.skips_constants() { deriv::without_constants(&rule.partials, &ds, args) } else { (rule.partials, ds) };
            let companion = r.companion(fr, &partials, &ds, span);
            if rule.uses_result {
                let_(pvar(&result), prim(op, xs.clone()), pair(var(&result), companion))
            } else {
                pair(prim(op, xs.clone()), companion)
            }
        }
    };
    names.iter().zip(translated).rev().fold(body, |acc, ((x, d), a)| {
        let dp = if used || !r.wild_unused() { pvar(d) } else { pwild() };
        let_(ppair(pvar(x), dp), a, acc)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::Builtins;
    use crate::kit::polytypic::with_real;
    use crate::pipeline::run_source;
    use crate::print::{print_expr, PrintOptions};
    use crate::value::Value;

    /// Reals become (primal, sensitivity) pairs of reals, the sensitivity being forward mode's
    /// tangent, named as in the test's own rule.
    struct Pairs;

    impl DualRule for Pairs {
        fn ty(&self, t: &Type) -> Type {
            with_real(t, &Type::tup(vec![Type::Real, Type::Real]))
        }
        fn constant(&self, _: &mut Fresh, c: Expr) -> Expr {
            pair(c, real(0.0))
        }
        fn names(&self, _: usize) -> (&'static [(&'static str, &'static str)], &'static str) {
            (&[("a", "da"), ("b", "db")], "c")
        }
        fn companion(&self, _: &mut Fresh, partials: &[Partial], ds: &[Expr], _: Span) -> Expr {
            deriv::linear_combination(partials, ds)
        }
    }

    /// Parses and types `src`, translates `main` with `Pairs`, type-checks the result and runs it.
    fn run(src: &str, input: Value) -> (String, Value) {
        let mut p = crate::syntax::parse_program(src).expect("parses");
        crate::types::check_program(&mut p, &Builtins::new()).expect("the source type-checks");
        let mut fr = Fresh::new(&p);
        for d in &mut p.defs {
            d.body = dual(&d.body, &mut fr, &Pairs);
            d.scheme = None;
        }
        p.next_id = fr.next_id;
        p.expects.clear();
        p.input = None;
        p.seed = None;
        let main = p.defs.iter().find(|d| &*d.name.text == "main").expect("main").body.clone();
        let shown = print_expr(&main, &PrintOptions::ascii());
        crate::types::check_program(&mut p, &Builtins::new()).expect("the translation type-checks");
        (shown, run_source(&p, &input, &Default::default()).expect("the translation runs"))
    }

    #[test]
    fn reals_become_pairs_and_everything_else_is_homomorphic() {
        // d/dx of (let y = x * x in if y < 10 then sin y else 2.0 * y) at x = 1.5 is cos(2.25) · 3
        let src = "def main x = let y = x * x in let k = real 2 in if y < 10.0 then sin y else k * y";
        let (shown, out) = run(src, Value::pair(Value::Real(1.5), Value::Real(1.0)));
        assert_eq!(out.to_string(), format!("({}, {})", (2.25f64).sin(), (2.25f64).cos() * 3.0));
        // the rule's names, the product's companion, and the comparison's unused companions named
        assert!(shown.contains("let (a, da) = x in let (b, db) = x in (a * b, b * da + a * db)"), "{shown}");
        assert!(shown.contains("let (a, da) = y in let (b, db) = (10.0, 0.0) in a < b"), "{shown}");
        assert!(shown.contains("let k = (real 2, 0.0) in"), "{shown}");
    }

    #[test]
    fn sums_tuples_and_local_functions_translate_homomorphically() {
        let src = "def main x = let f n = if n == 0 then inl (x, n) else f (n - 1) in \
                   case f 3 of inl p -> fst p * 3.0 | inr q -> q";
        let (_, out) = run(src, Value::pair(Value::Real(2.0), Value::Real(1.0)));
        assert_eq!(out.to_string(), "(6.0, 3.0)");
    }
}
