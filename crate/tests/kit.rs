//! The kit's code generators (kit::polytypic) run: the code each one writes is type-checked and
//! evaluated on values of its type.

use cotangent::build::*;
use cotangent::interp::Builtins;
use cotangent::ir::{Expr, Name, Program, Type};
use cotangent::kit::polytypic::{dot, map_shape_acc};
use cotangent::pipeline::run_source;
use cotangent::types;
use cotangent::value::Value;

/// Runs `main = λx. body(x)` on `input`.
fn run(body: impl FnOnce(Expr, &mut Fresh) -> Expr, input: Value) -> Value {
    let x = Name::new("x", 1);
    let mut fr = Fresh { next_id: 2 };
    let e = body(var(&x), &mut fr);
    let mut p = Program { params: vec![], input: None, seed: None, defs: vec![def("main", lam(pvar(&x), e))], expects: vec![], next_id: fr.next_id };
    types::check_program(&mut p, &Builtins::new()).expect("the generated code type-checks");
    run_source(&p, &input, &Default::default()).expect("the generated code runs")
}

fn r(x: f64) -> Value {
    Value::Real(x)
}

#[test]
fn dot_multiplies_reals_and_ignores_integers_and_mismatched_tags() {
    // T = R × Z × (R + R); main (a, b) = a ⊙_T b
    let t = Type::tup(vec![Type::Real, Type::Int, Type::sum(Type::Real, Type::Real)]);
    let dot_of = |a: Value, b: Value| {
        let t = t.clone();
        run(
            move |x, fr| {
                let (na, nb) = (fr.name("a"), fr.name("b"));
                let body = dot(&t, var(&na), var(&nb), fr);
                let_(ppair(pvar(&na), pvar(&nb)), x, body)
            },
            Value::pair(a, b),
        )
    };
    let v = |x: f64, k: i64, s: Value| Value::tuple(vec![r(x), Value::Int(k), s]);
    let inl_ = |x: f64| Value::Inl(r(x).into());
    let inr_ = |x: f64| Value::Inr(r(x).into());
    assert_eq!(dot_of(v(2.0, 5, inl_(3.0)), v(4.0, 7, inl_(10.0))).as_real(), Some(38.0));
    assert_eq!(dot_of(v(2.0, 5, inr_(3.0)), v(4.0, 7, inr_(10.0))).as_real(), Some(38.0));
    assert_eq!(dot_of(v(2.0, 5, inl_(3.0)), v(4.0, 7, inr_(10.0))).as_real(), Some(8.0), "tags differ: no contribution");
}

#[test]
fn map_shape_acc_threads_its_accumulator_left_to_right() {
    // initVars-like: each real r ↦ (r, n + 1), counting the reals of R × (Z × (R + Z)) × R
    let t = Type::tup(vec![Type::Real, Type::tup(vec![Type::Int, Type::sum(Type::Real, Type::Int)]), Type::Real]);
    let number = |t: &Type, x: Expr, n: Expr| {
        if *t == Type::Real {
            pair(pair(x, add(n.clone(), int(1))), add(n, int(1)))
        } else {
            pair(x, n)
        }
    };
    let go = |s: Value| run(|x, fr| map_shape_acc(&t, x, int(0), fr, &number), s);
    let input = |mid: Value| Value::tuple(vec![r(0.5), Value::pair(Value::Int(7), mid), r(1.5)]);
    let out = go(input(Value::Inl(r(2.5).into())));
    assert_eq!(out.to_string(), "(((0.5, 1), (7, inl (2.5, 2)), (1.5, 3)), 3)");
    let out = go(input(Value::Inr(Value::Int(4).into())));
    assert_eq!(out.to_string(), "(((0.5, 1), (7, inr 4), (1.5, 2)), 2)");
}
