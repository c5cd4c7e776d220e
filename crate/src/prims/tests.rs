//! Tests that iterate the table itself, so a new row is checked without new test code: its
//! partials against central differences (run through the interpreter, as stages run them), its
//! spelling through the parser and printer, and the consistency of its typing and implementation.

use super::*;
use crate::deriv::{self, Partial};
use crate::interp::{Budget, Builtins, Machine};
use crate::ir::{Def, ExprKind, Name, Program};
use crate::pipeline::close;
use crate::print::{print_program, PrintOptions};
use crate::value::Value;

fn run_real(row: &Row, xs: &[f64]) -> f64 {
    match (row.on_real, xs) {
        (Some(OnReal::R1(f)), [x]) => f(*x),
        (Some(OnReal::R2(f)), [x, y]) => f(*x, *y),
        _ => panic!("{}: not a real function of {} arguments", row.name, xs.len()),
    }
}

/// The partials of `op` at `xs`, by running `main xs = let y = op xs in (partials)` in the
/// interpreter after type-checking it (so the partials are well-typed code, as stages emit them).
fn partials_at(op: Prim, xs: &[f64]) -> Vec<f64> {
    let names: Vec<Name> = (0..xs.len()).map(|i| Name::new(&format!("x{i}"), i as u32 + 1)).collect();
    let y = Name::new("y", 10);
    let args: Vec<Expr> = names.iter().map(var).collect();
    let rule = deriv::rule(op, &args, &var(&y)).expect("a jvp");
    assert_eq!(rule.partials.len(), xs.len(), "{}: one partial per argument", op.symbol());
    let parts: Vec<Expr> = rule
        .partials
        .into_iter()
        .map(|p| match p {
            Partial::One => real(1.0),
            Partial::MinusOne => real(-1.0),
            Partial::Times(c) => c,
        })
        .collect();
    let body = let_(pvar(&y), prim(op, args), tuple(parts));
    let main = lam(ptuple(names.iter().map(pvar).collect()), body);
    let mut p = Program {
        params: vec![],
        input: None,
        seed: None,
        defs: vec![Def { name: Name::global("main"), body: main, span: crate::diag::Span::NONE, scheme: None, role: crate::ir::Role::User }],
        expects: vec![],
        next_id: 11,
    };
    let src = print_program(&p, &PrintOptions::ascii());
    crate::types::check_program(&mut p, &Builtins::new()).unwrap_or_else(|d| panic!("{}: {d:?}\n{src}", op.symbol()));
    let mut m = Machine::new(&p, &Builtins::new(), Budget::default()).expect("lowering");
    let input = match xs {
        [x] => Value::Real(*x),
        _ => Value::tuple(xs.iter().map(|&x| Value::Real(x)).collect()),
    };
    m.call("main", vec![input]).unwrap_or_else(|e| panic!("{}: {}", op.symbol(), e.message())).real_leaves()
}

#[test]
fn every_partial_matches_central_differences() {
    const ONE: &[f64] = &[-1.7, -0.6, 0.35, 0.8, 1.45, 2.3];
    const TWO: &[(f64, f64)] = &[(0.7, 1.3), (1.9, 0.4), (-0.8, 1.1), (-1.6, -0.45), (2.3, -0.9), (0.55, 2.2)];
    for row in PRIMS.iter().filter(|r| r.jvp.is_some()) {
        let points: Vec<Vec<f64>> = match row.arity {
            1 => ONE.iter().map(|&x| vec![x]).collect(),
            _ => TWO.iter().map(|&(x, y)| vec![x, y]).collect(),
        };
        let mut checked = 0;
        for xs in points {
            // Outside the domain (log of a negative, ...) there is nothing to compare.
            let f = |xs: &[f64]| run_real(row, xs);
            let h: Vec<f64> = xs.iter().map(|x| 1e-6 * x.abs().max(1.0)).collect();
            let fd: Vec<f64> = (0..xs.len())
                .map(|j| {
                    let (mut lo, mut hi) = (xs.clone(), xs.clone());
                    lo[j] -= h[j];
                    hi[j] += h[j];
                    (f(&hi) - f(&lo)) / (2.0 * h[j])
                })
                .collect();
            if !f(&xs).is_finite() || !fd.iter().all(|d| d.is_finite()) {
                continue;
            }
            let ad = partials_at(row.prim, &xs);
            for j in 0..xs.len() {
                assert!(close(ad[j], fd[j], 1e-6), "{} at {xs:?}: partial {j} is {}, central differences give {}", row.name, ad[j], fd[j]);
            }
            checked += 1;
        }
        assert!(checked >= 3, "{}: only {checked} sample points in its domain", row.name);
    }
}

#[test]
fn real_valued_rows_have_partials_and_the_others_none() {
    for row in PRIMS {
        let real_valued = matches!(row.on_real, Some(OnReal::R1(_) | OnReal::R2(_)));
        assert_eq!(row.jvp.is_some(), real_valued, "{}: a jvp exactly when the result on reals is a real", row.name);
    }
}

/// `round` is Haskell's (ties to even), and refuses what has no integer rather than saturating.
#[test]
fn round_takes_ties_to_even_and_has_no_integer_for_nan_infinities_or_beyond_i64() {
    let Some(OnReal::RToZ(round)) = Prim::Round.info().on_real else { panic!("round is R -> Z") };
    let cases = [(2.5, Some(2)), (-2.5, Some(-2)), (3.5, Some(4)), (2.4999, Some(2)), (-0.7, Some(-1)), (1e15 + 0.5, Some(1_000_000_000_000_000))];
    for (x, want) in cases {
        assert_eq!(round(x), want, "round {x}");
    }
    // the largest f64 below 2^63 is an integer that fits; 2^63 itself does not
    assert_eq!(round(9_223_372_036_854_774_784.0), Some(9_223_372_036_854_774_784));
    assert_eq!(round(-9_223_372_036_854_775_808.0), Some(i64::MIN));
    for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 9_223_372_036_854_775_808.0, -1e19] {
        assert_eq!(round(x), None, "round {x}");
    }
}

#[test]
fn typing_and_implementations_agree() {
    for row in PRIMS {
        let arity_of_real = match row.on_real {
            Some(OnReal::R1(_) | OnReal::RToZ(_)) => Some(1),
            Some(OnReal::R2(_) | OnReal::RCmp(_)) => Some(2),
            None => None,
        };
        let arity_of_int = match row.on_int {
            Some(OnInt::Z1(_) | OnInt::ZToR(_)) => Some(1),
            Some(OnInt::Z2(_) | OnInt::ZCmp(_)) => Some(2),
            None => None,
        };
        for a in [arity_of_real, arity_of_int].into_iter().flatten() {
            assert_eq!(a, row.arity, "{}: implementation arity", row.name);
        }
        let (r, z, b) = (row.on_real.is_some(), row.on_int.is_some(), row.on_bool.is_some());
        let expected = match row.typing {
            Typing::Numeric | Typing::Compare => (true, true, false),
            Typing::Equality => (true, true, true),
            Typing::Mono(args, _) => (args[0] == Base::R, args[0] == Base::Z, args[0] == Base::Bool),
            // the array operations run in the machine, on any element type
            Typing::Poly(sig) => {
                let mut n = 0;
                let (params, _) = sig(&mut || {
                    n += 1;
                    crate::ir::Type::Var(n)
                });
                assert_eq!(params.len(), row.arity, "{}: typing arity", row.name);
                assert!(row.on_array.is_some(), "{}: an array operation has its implementation", row.name);
                (false, false, false)
            }
        };
        assert_eq!((r, z, b), expected, "{}: implemented on exactly the types its typing admits", row.name);
        if let Typing::Mono(args, _) = row.typing {
            assert_eq!(args.len(), row.arity, "{}: typing arity", row.name);
        }
        match row.syntax {
            Syntax::Infix(prec, _) => assert!(row.arity == 2 && prec >= 1 && prec <= MAX_PREC, "{}", row.name),
            Syntax::Prefix(prec) => assert!(row.arity == 1 && prec < MAX_PREC, "{}", row.name),
            Syntax::Named => assert!(row.name.chars().all(|c| c.is_ascii_alphanumeric()), "{}", row.name),
        }
    }
}

#[test]
fn every_primitive_parses_from_its_spelling_and_prints_back() {
    for row in PRIMS {
        let call = match row.syntax {
            Syntax::Named => format!("{} {}", row.name, ["a", "a b", "a b c"][row.arity - 1]),
            Syntax::Prefix(_) => format!("{}a", row.name),
            Syntax::Infix(..) => format!("a {} b", row.name),
        };
        let src = format!("def main (a, b, c) = {call}\n");
        let p = crate::syntax::parse_program(&src).unwrap_or_else(|d| panic!("{src}: {d:?}"));
        let body = &p.defs[0].body;
        let ExprKind::Lam(_, body_x) = &body.kind else { panic!("{src}") };
        let (_, body) = &**body_x;
        match &body.kind {
            ExprKind::Prim(op, args) => assert!(*op == row.prim && args.len() == row.arity, "{src} parsed as {op:?}"),
            k => panic!("{src} parsed as {k:?}"),
        }
        for o in [PrintOptions::ascii(), PrintOptions::unicode()] {
            let printed = print_program(&p, &o);
            assert_eq!(printed, src, "{}: printed differently", row.name);
        }
    }
}

#[test]
fn pow_partials_are_finite_where_pow_is_differentiable() {
    // d/dx x**2 at 0 is 0 and at -3 is -6; constant exponents never make the y-partial NaN
    assert_eq!(partials_at(Prim::Pow, &[0.0, 2.0]), vec![0.0, 0.0]);
    assert_eq!(partials_at(Prim::Pow, &[-3.0, 2.0]), vec![-6.0, 0.0]);
    assert_eq!(partials_at(Prim::Pow, &[0.0, 1.0]), vec![1.0, 0.0]);
    assert_eq!(partials_at(Prim::Pow, &[0.0, 0.0]), vec![0.0, 0.0]);
    let d = partials_at(Prim::Pow, &[2.0, 0.0]);
    assert_eq!(d[0], 0.0);
    assert!(close(d[1], 2f64.ln(), 1e-15));
    let d = partials_at(Prim::Pow, &[2.0, 3.0]);
    assert!(close(d[0], 12.0, 1e-15) && close(d[1], 8.0 * 2f64.ln(), 1e-15), "{d:?}");
}

#[test]
fn min_and_max_give_a_tie_to_the_left_argument() {
    assert_eq!(partials_at(Prim::Min, &[1.5, 1.5]), vec![1.0, 0.0]);
    assert_eq!(partials_at(Prim::Max, &[1.5, 1.5]), vec![1.0, 0.0]);
    assert_eq!(partials_at(Prim::Min, &[2.0, 1.0]), vec![0.0, 1.0]);
    assert_eq!(partials_at(Prim::Max, &[1.0, 2.0]), vec![0.0, 1.0]);
    // NaN propagates through both, whichever side it is on
    assert!(run_real(Prim::Min.info(), &[f64::NAN, 1.0]).is_nan() && run_real(Prim::Min.info(), &[1.0, f64::NAN]).is_nan());
    assert!(run_real(Prim::Max.info(), &[f64::NAN, 1.0]).is_nan() && run_real(Prim::Max.info(), &[1.0, f64::NAN]).is_nan());
}

#[test]
fn erf_is_accurate_and_sigmoid_is_stable() {
    // erf to 20 digits (mpmath.erf at 30 digits)
    let erf = |x| run_real(Prim::Erf.info(), &[x]);
    for (x, want) in [
        (0.5, 0.5204998778130465377),
        (1.0, 0.8427007929497148693),
        (2.0, 0.9953222650189527342),
        (-0.3, -0.32862675945912742764),
        (3.5, 0.9999992569016276586),
        (1e-10, 1.1283791670955126e-10),
    ] {
        assert!(close(erf(x), want, 2e-16), "erf {x} = {} not {want}", erf(x));
    }
    let s = |x| run_real(Prim::Sigmoid.info(), &[x]);
    assert_eq!(s(0.0), 0.5);
    assert_eq!(s(800.0), 1.0);
    assert_eq!(s(-800.0), 0.0);
    assert!(close(s(-40.0), 4.248354255291589e-18, 1e-15));
    assert!(close(s(2.0) + s(-2.0), 1.0, 1e-15));
    // log1p and expm1 keep their digits near 0
    assert_eq!(run_real(Prim::Log1p.info(), &[1e-20]), 1e-20);
    assert_eq!(run_real(Prim::Expm1.info(), &[1e-20]), 1e-20);
}

#[test]
fn operators_lex_longest_first() {
    assert_eq!(operator_prefix_of("** 2"), Some("**"));
    assert_eq!(operator_prefix_of("*2"), Some("*"));
    assert_eq!(operator_prefix_of("<= b"), Some("<="));
    assert_eq!(operator_prefix_of("mod"), None);
    assert_eq!(operator("mod"), Some("mod"));
    assert_eq!(infix_op("**"), Some((Prim::Pow, MAX_PREC - 1, Assoc::Right)));
    assert_eq!(infix_op("!"), Some((Prim::Index, MAX_PREC, Assoc::Left)));
    assert_eq!(operator_prefix_of("!= b"), Some("!="));
    assert_eq!(operator_prefix_of("! i"), Some("!"));
    assert_eq!(prefix_op("-"), Some((Prim::Neg, NEG_PREC)));
}
