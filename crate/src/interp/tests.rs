//! Interpreter tests over hand-built IR (the parser is written elsewhere).

use super::*;
use crate::ir::{Def, Expr, ExprKind, FunDef, LamKind, Name, Param, Pat, Prim, Program, Role, Scheme, Type};
use std::rc::Rc;

// ---------- IR builders ----------

fn sp(a: usize, b: usize) -> Span {
    Span::new(a, b)
}
fn ex(k: ExprKind) -> Expr {
    Expr::gen(k)
}
fn at(k: ExprKind, s: Span) -> Expr {
    Expr::new(k, s)
}
fn v(n: &str, id: u32) -> Expr {
    ex(ExprKind::Var(Name::new(n, id)))
}
fn g(n: &str) -> Expr {
    ex(ExprKind::Var(Name::global(n)))
}
fn r(x: f64) -> Expr {
    ex(ExprKind::Real(x))
}
fn i(x: i64) -> Expr {
    ex(ExprKind::Int(x))
}
fn b(x: bool) -> Expr {
    ex(ExprKind::Bool(x))
}
fn unit() -> Expr {
    ex(ExprKind::Unit)
}
fn pv(n: &str, id: u32) -> Pat {
    Pat::Var(Name::new(n, id), Span::NONE)
}
fn pt(ps: Vec<Pat>) -> Pat {
    Pat::Tuple(ps.into(), Span::NONE)
}
fn lam(p: Pat, body: Expr) -> Expr {
    ex(ExprKind::Lam(LamKind::Plain, Box::new((p, body))))
}
fn lamv(n: &str, id: u32, body: Expr) -> Expr {
    lam(pv(n, id), body)
}
fn app(f: Expr, a: Expr) -> Expr {
    ex(ExprKind::App(Box::new((f, a))))
}
fn apps(f: Expr, args: Vec<Expr>) -> Expr {
    args.into_iter().fold(f, app)
}
fn let_(p: Pat, rhs: Expr, body: Expr) -> Expr {
    ex(ExprKind::Let(Box::new((p, (rhs, body)))))
}
fn letrec(fs: Vec<(&str, u32, Expr)>, body: Expr) -> Expr {
    let fs = fs.into_iter().map(|(n, id, e)| FunDef { name: Name::new(n, id), body: e, span: Span::NONE }).collect();
    ex(ExprKind::LetRec(Box::new((fs, body))))
}
fn tup(es: Vec<Expr>) -> Expr {
    ex(ExprKind::Tuple(es.into()))
}
fn fst(e: Expr) -> Expr {
    ex(ExprKind::Fst(Box::new(e)))
}
fn snd(e: Expr) -> Expr {
    ex(ExprKind::Snd(Box::new(e)))
}
fn inl(e: Expr) -> Expr {
    ex(ExprKind::Inl(Box::new(e)))
}
fn inr(e: Expr) -> Expr {
    ex(ExprKind::Inr(Box::new(e)))
}
fn case(s: Expr, p1: Pat, e1: Expr, p2: Pat, e2: Expr) -> Expr {
    ex(ExprKind::Case(Box::new((s, p1, e1, p2, e2))))
}
fn if_(c: Expr, t: Expr, f: Expr) -> Expr {
    ex(ExprKind::If(Box::new((c, (t, f)))))
}
fn p1(op: Prim, a: Expr) -> Expr {
    ex(ExprKind::Prim(op, thin_vec::thin_vec![a]))
}
fn p2(op: Prim, a: Expr, b: Expr) -> Expr {
    ex(ExprKind::Prim(op, thin_vec::thin_vec![a, b]))
}
fn p2at(op: Prim, a: Expr, b: Expr, s: Span) -> Expr {
    at(ExprKind::Prim(op, thin_vec::thin_vec![a, b]), s)
}
fn bi(n: &str) -> Expr {
    ex(ExprKind::Builtin(n.into()))
}
fn def(n: &str, body: Expr) -> Def {
    Def { name: Name::global(n), body, span: Span::NONE, scheme: None, role: Role::User }
}
fn prog(defs: Vec<Def>) -> Program {
    Program { params: vec![], input: None, seed: None, defs, expects: vec![], next_id: 1000 }
}
/// `def main x = body` (x has id 1).
fn main_of(body: Expr) -> Program {
    prog(vec![def("main", lamv("x", 1, body))])
}

fn run_b(p: &Program, bs: &Builtins, budget: Budget, args: Vec<Value>) -> (Result<Value, RunError>, Cost) {
    let mut m = Machine::new(p, bs, budget).expect("lowering");
    let r = m.call("main", args);
    (r, m.cost())
}
fn run(p: &Program, args: Vec<Value>) -> Result<Value, RunError> {
    run_b(p, &Builtins::new(), Budget::default(), args).0
}
fn ok(p: &Program, arg: Value) -> Value {
    run(p, vec![arg]).unwrap_or_else(|e| panic!("run failed: {e:?}"))
}
fn real_of(v: Value) -> f64 {
    v.as_real().unwrap_or_else(|| panic!("not a real: {v}"))
}
fn shows(v: Value) -> String {
    v.to_string()
}

// ---------- arithmetic ----------

#[test]
fn real_arithmetic_and_real_ops() {
    // main x = x * 2.0 + sin 0.0 - (-x) / 4.0
    let p = main_of(p2(
        Prim::Sub,
        p2(Prim::Add, p2(Prim::Mul, v("x", 1), r(2.0)), p1(Prim::Sin, r(0.0))),
        p2(Prim::Div, p1(Prim::Neg, v("x", 1)), r(4.0)),
    ));
    let (res, cost) = run_b(&p, &Builtins::new(), Budget::default(), vec![Value::Real(4.0)]);
    assert_eq!(real_of(res.unwrap()), 9.0);
    assert_eq!(cost.real_ops, 6);
    assert!(cost.steps > 0);
    assert_eq!(cost.max_depth, 1);
}

#[test]
fn named_real_primitives() {
    let p = main_of(tup(vec![
        p1(Prim::Exp, r(0.0)),
        p1(Prim::Log, r(1.0)),
        p1(Prim::Sqrt, r(9.0)),
        p1(Prim::Tanh, r(0.0)),
        p2(Prim::Atan2, r(0.0), r(1.0)),
        p1(Prim::Abs, r(-2.5)),
        p1(Prim::Cos, r(0.0)),
        p1(Prim::Tan, r(0.0)),
        p1(Prim::ToReal, i(3)),
        p1(Prim::Abs, i(-3)),
    ]));
    assert_eq!(shows(ok(&p, Value::Unit)), "(1.0, 0.0, 3.0, 0.0, 0.0, 2.5, 1.0, 0.0, 3.0, 3)");
}

#[test]
fn integer_arithmetic_truncates() {
    let p = main_of(tup(vec![
        p2(Prim::Div, i(7), i(2)),
        p2(Prim::Div, i(-7), i(2)),
        p2(Prim::Mod, i(-7), i(2)),
        p2(Prim::Mod, i(7), i(-2)),
        p2(Prim::Mul, i(6), p1(Prim::Neg, i(7))),
        p2(Prim::Lt, i(1), i(2)),
        p2(Prim::Ge, r(1.0), r(2.0)),
        p2(Prim::Eq, b(true), b(true)),
        p2(Prim::Ne, i(3), i(3)),
        p1(Prim::Not, b(false)),
    ]));
    assert_eq!(shows(ok(&p, Value::Unit)), "(3, -3, -1, 1, -42, true, false, true, false, true)");
    let (_, cost) = run_b(&p, &Builtins::new(), Budget::default(), vec![Value::Unit]);
    assert_eq!(cost.real_ops, 1, "only the comparison on reals counts");
}

#[test]
fn ieee_propagation() {
    let p = main_of(tup(vec![
        p2(Prim::Div, r(1.0), r(0.0)),
        p2(Prim::Div, r(-1.0), r(0.0)),
        p2(Prim::Div, r(0.0), r(0.0)),
        p2(Prim::Add, p1(Prim::Log, r(-1.0)), r(1.0)),
        p2(Prim::Mul, p2(Prim::Div, r(1.0), r(0.0)), r(0.0)),
        p2(Prim::Eq, p2(Prim::Div, r(0.0), r(0.0)), p2(Prim::Div, r(0.0), r(0.0))),
    ]));
    assert_eq!(shows(ok(&p, Value::Unit)), "(inf, -inf, nan, nan, nan, false)");
}

#[test]
fn integer_overflow_is_located() {
    let s = sp(10, 17);
    let p = main_of(p2at(Prim::Mul, v("x", 1), i(2), s));
    let e = run(&p, vec![Value::Int(i64::MAX)]).unwrap_err();
    assert_eq!(e.span(), s);
    assert!(e.message().contains("integer overflow"), "{}", e.message());
    assert!(e.message().contains('*'), "{}", e.message());
    let p = main_of(p1(Prim::Neg, v("x", 1)));
    assert!(run(&p, vec![Value::Int(i64::MIN)]).unwrap_err().message().contains("integer overflow"));
    let p = main_of(p2at(Prim::Add, v("x", 1), i(1), s));
    assert!(run(&p, vec![Value::Int(i64::MAX)]).unwrap_err().message().contains("integer overflow"));
    let p = main_of(p2at(Prim::Div, i(i64::MIN), i(-1), s));
    assert!(run(&p, vec![Value::Unit]).unwrap_err().message().contains("integer overflow"));
}

#[test]
fn division_by_zero_is_located() {
    let s = sp(3, 8);
    for op in [Prim::Div, Prim::Mod] {
        let p = main_of(p2(Prim::Add, i(1), p2at(op, v("x", 1), i(0), s)));
        let e = run(&p, vec![Value::Int(5)]).unwrap_err();
        assert_eq!(e.span(), s);
        assert!(e.message().contains("division by zero"), "{}", e.message());
    }
}

#[test]
fn type_errors_are_runtime_errors() {
    let s = sp(1, 2);
    let p = main_of(p2at(Prim::Add, v("x", 1), r(1.0), s));
    let e = run(&p, vec![Value::Int(1)]).unwrap_err();
    assert_eq!(e.span(), s);
    let p = main_of(app(v("x", 1), r(1.0)));
    assert!(run(&p, vec![Value::Int(1)]).unwrap_err().message().contains("not a function"));
}

#[test]
fn and_or_short_circuit() {
    let boom = || p2(Prim::Eq, p2(Prim::Div, i(1), i(0)), i(0));
    let p = main_of(tup(vec![
        p2(Prim::And, b(false), boom()),
        p2(Prim::Or, b(true), boom()),
        p2(Prim::And, b(true), b(false)),
        p2(Prim::Or, b(false), b(true)),
    ]));
    assert_eq!(shows(ok(&p, Value::Unit)), "(false, true, false, true)");
    let p = main_of(p2(Prim::And, b(true), boom()));
    assert!(run(&p, vec![Value::Unit]).unwrap_err().message().contains("division by zero"));
}

// ---------- functions ----------

#[test]
fn closures_capture_variables() {
    // main x = let a = x * 2.0 in let f = \y -> \z -> y * a + z in let h = f 3.0 in (h 1.0, f 0.0 a)
    let p = main_of(let_(
        pv("a", 2),
        p2(Prim::Mul, v("x", 1), r(2.0)),
        let_(
            pv("f", 3),
            lamv("y", 4, lamv("z", 5, p2(Prim::Add, p2(Prim::Mul, v("y", 4), v("a", 2)), v("z", 5)))),
            let_(
                pv("h", 6),
                app(v("f", 3), r(3.0)),
                tup(vec![app(v("h", 6), r(1.0)), apps(v("f", 3), vec![r(0.0), v("a", 2)])]),
            ),
        ),
    ));
    assert_eq!(shows(ok(&p, Value::Real(5.0))), "(31.0, 10.0)");
}

#[test]
fn currying_and_partial_application() {
    // def add x y = x + y; def twiceApp f x = f (f x); main x = (twiceApp (add 1.0) x, add x)
    let p = prog(vec![
        def("add", lamv("a", 10, lamv("b", 11, p2(Prim::Add, v("a", 10), v("b", 11))))),
        def("twiceApp", lamv("f", 12, lamv("y", 13, app(v("f", 12), app(v("f", 12), v("y", 13)))))),
        def("main", lamv("x", 1, apps(g("twiceApp"), vec![app(g("add"), r(1.0)), v("x", 1)]))),
    ]);
    assert_eq!(real_of(ok(&p, Value::Real(2.0))), 4.0);
    // call with several curried args
    let mut m = Machine::new(&p, &Builtins::new(), Budget::default()).unwrap();
    assert_eq!(real_of(m.call("add", vec![Value::Real(1.5), Value::Real(2.0)]).unwrap()), 3.5);
    let f = m.call("add", vec![Value::Real(1.0)]).unwrap();
    assert_eq!(real_of(m.apply(f.clone(), Value::Real(41.0)).unwrap()), 42.0);
    assert_eq!(real_of(m.apply(f, Value::Real(1.0)).unwrap()), 2.0);
}

#[test]
fn top_level_mutual_recursion() {
    // even n = if n == 0 then true else odd (n - 1); odd n = if n == 0 then false else even (n - 1)
    let p = prog(vec![
        def(
            "even",
            lamv("n", 10, if_(p2(Prim::Eq, v("n", 10), i(0)), b(true), app(g("odd"), p2(Prim::Sub, v("n", 10), i(1))))),
        ),
        def(
            "odd",
            lamv("n", 11, if_(p2(Prim::Eq, v("n", 11), i(0)), b(false), app(g("even"), p2(Prim::Sub, v("n", 11), i(1))))),
        ),
        def("main", lamv("x", 1, tup(vec![app(g("even"), v("x", 1)), app(g("odd"), v("x", 1))]))),
    ]);
    assert_eq!(shows(ok(&p, Value::Int(7))), "(false, true)");
    assert_eq!(shows(ok(&p, Value::Int(100_000))), "(true, false)");
}

#[test]
fn letrec_local_mutual_recursion_with_captures() {
    // main x = let k = 2 in
    //   let rec ev n = if n == 0 then true else od (n - 1)
    //           od n = if n == 0 then false else (\m -> ev m) (n - 1)   -- sibling via nested lambda
    //           sum n = if n == 0 then 0 else n * k + sum (n - 1)
    //   in (ev x, od x, sum x, (\f -> f 3) sum)
    let ev = lamv(
        "n",
        20,
        if_(p2(Prim::Eq, v("n", 20), i(0)), b(true), app(v("od", 11), p2(Prim::Sub, v("n", 20), i(1)))),
    );
    let od = lamv(
        "n",
        21,
        if_(
            p2(Prim::Eq, v("n", 21), i(0)),
            b(false),
            app(lamv("m", 22, app(v("ev", 10), v("m", 22))), p2(Prim::Sub, v("n", 21), i(1))),
        ),
    );
    let sum = lamv(
        "n",
        23,
        if_(
            p2(Prim::Eq, v("n", 23), i(0)),
            i(0),
            p2(Prim::Add, p2(Prim::Mul, v("n", 23), v("k", 2)), app(v("sum", 12), p2(Prim::Sub, v("n", 23), i(1)))),
        ),
    );
    let p = main_of(let_(
        pv("k", 2),
        i(2),
        letrec(
            vec![("ev", 10, ev), ("od", 11, od), ("sum", 12, sum)],
            tup(vec![
                app(v("ev", 10), v("x", 1)),
                app(v("od", 11), v("x", 1)),
                app(v("sum", 12), v("x", 1)),
                app(lamv("f", 30, app(v("f", 30), i(3))), v("sum", 12)),
            ]),
        ),
    ));
    assert_eq!(shows(ok(&p, Value::Int(9))), "(false, true, 90, 12)");
}

#[test]
fn letrec_closures_do_not_leak() {
    // main x = let rec f n = if n == 0 then x else f (n - 1) in f
    let p = main_of(letrec(
        vec![("f", 10, lamv("n", 11, if_(p2(Prim::Eq, v("n", 11), i(0)), v("x", 1), app(v("f", 10), p2(Prim::Sub, v("n", 11), i(1))))))],
        v("f", 10),
    ));
    let mut m = Machine::new(&p, &Builtins::new(), Budget::default()).unwrap();
    let f = m.call("main", vec![Value::Real(1.0)]).unwrap();
    let Value::Fun(rc) = &f else { panic!() };
    let weak = Rc::downgrade(rc);
    assert_eq!(real_of(m.apply(f.clone(), Value::Int(5)).unwrap()), 1.0);
    let FunVal::Rec { group, .. } = rc.downcast_ref::<FunVal>().unwrap() else { panic!() };
    let gweak = Rc::downgrade(group);
    drop(f);
    assert!(weak.upgrade().is_none());
    assert!(gweak.upgrade().is_none(), "the group was freed: no cycle");
}

#[test]
fn tuples_and_patterns() {
    // main x = let (a, (bb, _)) = (x, (2, 3)) in let () = () in let _ = 9 in (a + bb, fst (1, 2), snd (1, 2))
    let p = main_of(let_(
        pt(vec![pv("a", 2), pt(vec![pv("bb", 3), Pat::Wild(Span::NONE)])]),
        tup(vec![v("x", 1), tup(vec![i(2), i(3)])]),
        let_(
            Pat::Unit(Span::NONE),
            unit(),
            let_(
                Pat::Wild(Span::NONE),
                i(9),
                tup(vec![p2(Prim::Add, v("a", 2), v("bb", 3)), fst(tup(vec![i(1), i(2)])), snd(tup(vec![i(1), i(2)]))]),
            ),
        ),
    ));
    assert_eq!(shows(ok(&p, Value::Int(40))), "(42, 1, 2)");
    // tuple-pattern lambda: (\(a, b) -> a - b) x
    let p = main_of(app(lam(pt(vec![pv("a", 2), pv("b", 3)]), p2(Prim::Sub, v("a", 2), v("b", 3))), v("x", 1)));
    assert_eq!(real_of(ok(&p, Value::pair(Value::Real(5.0), Value::Real(3.0)))), 2.0);
    // a mismatching pattern is a located runtime error
    let s = sp(4, 9);
    let p = main_of(let_(Pat::Tuple([pv("a", 2), pv("b", 3)].into(), s), v("x", 1), v("a", 2)));
    assert_eq!(run(&p, vec![Value::Int(1)]).unwrap_err().span(), s);
}

#[test]
fn case_inl_inr_and_if() {
    // main x = case x of inl (a, b) -> a + b | inr c -> if c then 1 else 0
    let p = main_of(case(
        v("x", 1),
        pt(vec![pv("a", 2), pv("b", 3)]),
        p2(Prim::Add, v("a", 2), v("b", 3)),
        pv("c", 4),
        if_(v("c", 4), i(1), i(0)),
    ));
    assert_eq!(shows(ok(&p, Value::Inl(Rc::new(Value::pair(Value::Int(2), Value::Int(3)))))), "5");
    assert_eq!(shows(ok(&p, Value::Inr(Rc::new(Value::Bool(true))))), "1");
    assert_eq!(shows(ok(&p, Value::Inr(Rc::new(Value::Bool(false))))), "0");
    let p = main_of(case(inr(i(3)), pv("a", 2), v("a", 2), pv("b", 3), p2(Prim::Mul, v("b", 3), i(2))));
    assert_eq!(shows(ok(&p, Value::Unit)), "6");
    let p = main_of(tup(vec![inl(unit()), inr(r(1.0))]));
    assert_eq!(shows(ok(&p, Value::Unit)), "(inl (), inr 1.0)");
}

#[test]
fn ann_bind_pure_params_and_constant_defs() {
    // param n = 4; def c = 2.0 * 3.0; main x = do { y <- pure (x + c); pure ((y : R) * real n + c) }
    let mut p = prog(vec![
        def("c", p2(Prim::Mul, r(2.0), r(3.0))),
        def(
            "main",
            lamv(
                "x",
                1,
                ex(ExprKind::Bind(Box::new((pv("y", 2), (
                        ex(ExprKind::Pure(Box::new(p2(Prim::Add, v("x", 1), g("c"))))),
                        ex(ExprKind::Pure(Box::new(p2(
                            Prim::Add,
                            p2(Prim::Mul, ex(ExprKind::Ann(Box::new((v("y", 2), Type::Real)))), p1(Prim::ToReal, g("n"))),
                            g("c"),
                        )))),
                    ))))),
            ),
        ),
    ]);
    p.params.push(Param { name: Name::global("n"), value: 4, span: Span::NONE });
    let (res, cost) = run_b(&p, &Builtins::new(), Budget::default(), vec![Value::Real(1.0)]);
    assert_eq!(real_of(res.unwrap()), 34.0);
    assert_eq!(cost.real_ops, 4, "the constant def is evaluated once");
}

#[test]
fn constant_def_that_needs_itself_fails() {
    let p = prog(vec![def("c", p2(Prim::Add, g("c"), r(1.0))), def("main", lamv("x", 1, g("c")))]);
    let e = run(&p, vec![Value::Unit]).unwrap_err();
    assert!(e.message().contains("needs its own value"), "{}", e.message());
}

#[test]
fn unknown_names() {
    let p = main_of(r(1.0));
    let mut m = Machine::new(&p, &Builtins::new(), Budget::default()).unwrap();
    let e = m.call("nope", vec![]).unwrap_err();
    assert!(matches!(e, RunError::Runtime { span, .. } if span == Span::NONE));
    let p = main_of(g("missing"));
    assert!(Machine::new(&p, &Builtins::new(), Budget::default()).is_err());
    let p = main_of(v("y", 99));
    assert!(Machine::new(&p, &Builtins::new(), Budget::default()).is_err());
    let p = main_of(bi("nosuch"));
    assert!(Machine::new(&p, &Builtins::new(), Budget::default()).is_err());
}

// ---------- builtins ----------

#[derive(Default)]
struct Scratch {
    level: f64,
}

fn test_builtins() -> Builtins {
    fn twice(m: &mut Machine<'_>, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
        m.real_op();
        m.tick(1)?;
        m.count("twice_calls", 1);
        assert_eq!(m.current_span(), span);
        match &args[..] {
            [Value::Real(x)] => Ok(Value::Real(2.0 * x)),
            _ => Err(RunError::runtime(span, "twice: expected a real")),
        }
    }
    // withLevel : R -> (() -> a) -> a, lazy in its last argument
    fn with_level(m: &mut Machine<'_>, args: &mut Vec<Value>, _span: Span) -> Result<Value, RunError> {
        let thunk = args.pop().unwrap();
        let old = m.state::<Scratch>().level;
        m.state::<Scratch>().level = args[0].as_real().unwrap();
        let r = m.apply(thunk, Value::Unit);
        m.state::<Scratch>().level = old;
        r
    }
    // level : R (arity 0)
    fn level(m: &mut Machine<'_>, _args: &mut Vec<Value>, _span: Span) -> Result<Value, RunError> {
        Ok(Value::Real(m.state::<Scratch>().level))
    }
    // mapPair : (a -> b) -> (a, a) -> (b, b)
    fn map_pair(m: &mut Machine<'_>, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
        let [f, Value::Tuple(xs)] = &args[..] else { return Err(RunError::runtime(span, "mapPair")) };
        m.alloc(1)?;
        let a = m.apply(f.clone(), xs[0].clone())?;
        let b = m.apply(f.clone(), xs[1].clone())?;
        Ok(Value::pair(a, b))
    }
    // note : R -> R records a trace step
    fn note(m: &mut Machine<'_>, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
        if m.tracing() {
            m.trace(TraceStep { kind: "note".into(), span: Some(span), factor: args[0].as_real().map(Shown::from), ..TraceStep::default() });
        } else {
            m.trace(TraceStep::default());
        }
        Ok(args[0].clone())
    }
    // callback : (a -> b) -> a -> b, through apply
    fn callback(m: &mut Machine<'_>, args: &mut Vec<Value>, _span: Span) -> Result<Value, RunError> {
        let mut args = args.drain(..);
        let f = args.next().unwrap();
        m.apply(f, args.next().unwrap())
    }
    let s = Scheme::mono(Type::Unknown);
    let mk = |name, arity, lazy_last, run: BuiltinFn| Builtin { name, scheme: s.clone(), arity, lazy_last, run };
    let mut bs = Builtins::new();
    bs.extend([
        mk("twice", 1, false, twice),
        mk("withLevel", 2, true, with_level),
        mk("level", 0, false, level),
        mk("mapPair", 2, false, map_pair),
        mk("note", 1, false, note),
        mk("callback", 2, false, callback),
    ]);
    bs
}

#[test]
fn builtin_saturated_partial_and_as_value() {
    let bs = test_builtins();
    // main x = (twice x, mapPair twice (x, 1.0), (\f -> f 3.0) twice, mapPair (mapPair twice) ((1.0, 2.0), (3.0, 4.0)))
    let p = main_of(tup(vec![
        app(bi("twice"), v("x", 1)),
        apps(bi("mapPair"), vec![bi("twice"), tup(vec![v("x", 1), r(1.0)])]),
        app(lamv("f", 2, app(v("f", 2), r(3.0))), bi("twice")),
        apps(
            bi("mapPair"),
            vec![app(bi("mapPair"), bi("twice")), tup(vec![tup(vec![r(1.0), r(2.0)]), tup(vec![r(3.0), r(4.0)])])],
        ),
    ]));
    let (res, cost) = run_b(&p, &bs, Budget::default(), vec![Value::Real(5.0)]);
    assert_eq!(shows(res.unwrap()), "(10.0, (10.0, 2.0), 6.0, ((2.0, 4.0), (6.0, 8.0)))");
    assert_eq!(cost.counter("twice_calls"), 8);
    assert_eq!(cost.real_ops, 8);
}

#[test]
fn builtin_calls_back_into_closures() {
    let bs = test_builtins();
    // main x = let k = 3.0 in mapPair (\y -> y * k + x) (1.0, 2.0)
    let p = main_of(let_(
        pv("k", 2),
        r(3.0),
        apps(
            bi("mapPair"),
            vec![lamv("y", 3, p2(Prim::Add, p2(Prim::Mul, v("y", 3), v("k", 2)), v("x", 1))), tup(vec![r(1.0), r(2.0)])],
        ),
    ));
    assert_eq!(shows(run_b(&p, &bs, Budget::default(), vec![Value::Real(10.0)]).0.unwrap()), "(13.0, 16.0)");
    // an error inside the callback propagates, located, and the machine stays usable
    let s = sp(7, 9);
    let p = main_of(apps(bi("mapPair"), vec![lamv("y", 3, p2at(Prim::Div, v("y", 3), v("x", 1), s)), tup(vec![i(4), i(2)])]));
    let mut m = Machine::new(&p, &bs, Budget::default()).unwrap();
    assert_eq!(m.call("main", vec![Value::Int(0)]).unwrap_err().span(), s);
    assert_eq!(shows(m.call("main", vec![Value::Int(2)]).unwrap()), "(2, 1)");
}

#[test]
fn lazy_builtin_receives_a_thunk() {
    let bs = test_builtins();
    // main x = (level, withLevel x (level + x), level)   -- the thunk runs inside withLevel
    let p = main_of(tup(vec![
        bi("level"),
        apps(bi("withLevel"), vec![v("x", 1), p2(Prim::Add, bi("level"), v("x", 1))]),
        bi("level"),
    ]));
    assert_eq!(shows(run_b(&p, &bs, Budget::default(), vec![Value::Real(2.0)]).0.unwrap()), "(0.0, 4.0, 0.0)");
    // over-application: withLevel 1.0 (\y -> y + level) 5.0
    let p = main_of(apps(bi("withLevel"), vec![r(1.0), lamv("y", 2, p2(Prim::Add, v("y", 2), bi("level"))), r(5.0)]));
    assert_eq!(real_of(run_b(&p, &bs, Budget::default(), vec![Value::Unit]).0.unwrap()), 5.0);
}

#[test]
fn lazy_builtin_must_be_saturated() {
    let bs = test_builtins();
    let p = main_of(app(bi("withLevel"), r(1.0)));
    assert!(matches!(Machine::new(&p, &bs, Budget::default()), Err(RunError::Runtime { .. })));
    let p = main_of(bi("withLevel"));
    assert!(matches!(Machine::new(&p, &bs, Budget::default()), Err(RunError::Runtime { .. })));
}

#[test]
fn trace_is_capped_and_counts_dropped() {
    let bs = test_builtins();
    // main x = note 1.0 + note 2.0 + note 3.0 + note 4.0
    let p = main_of(
        [2.0, 3.0, 4.0].into_iter().fold(app(bi("note"), r(1.0)), |acc, x| p2(Prim::Add, acc, app(bi("note"), r(x)))),
    );
    let budget = Budget { trace_steps: 2, ..Budget::default() };
    let mut m = Machine::new(&p, &bs, budget).unwrap();
    assert!(m.tracing());
    assert_eq!(real_of(m.call("main", vec![Value::Unit]).unwrap()), 10.0);
    assert!(!m.tracing());
    let (steps, dropped) = m.take_trace();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[1].factor, Some(Shown::from(2.0)));
    assert_eq!(dropped, 2);
    m.set_tracing(false);
    m.call("main", vec![Value::Unit]).unwrap();
    assert_eq!(m.take_trace(), (vec![], 0));
    assert!(!m.tracing());
}

#[test]
fn reentrant_nesting_is_limited() {
    // def loop x = callback loop x : every level re-enters the machine through a builtin
    let e = crate::limits::run_with_stack(move || {
        let p = prog(vec![def("main", lamv("x", 1, apps(bi("callback"), vec![g("main"), v("x", 1)])))]);
        let bs = test_builtins();
        let mut m = Machine::new(&p, &bs, Budget::default()).unwrap();
        let e = m.call("main", vec![Value::Unit]).unwrap_err();
        // the machine is still usable afterwards
        let e2 = m.call("main", vec![Value::Unit]).unwrap_err();
        assert!(matches!(e2, RunError::Budget { budget: BudgetKind::Depth, .. }), "{e2:?}");
        e
    });
    assert!(matches!(e, RunError::Budget { budget: BudgetKind::Depth, .. }), "{e:?}");
}

// ---------- budgets, depth, robustness ----------

/// def f n = if n == 0 then 0.0 else 1.0 + f (n - 1)
fn deep_program() -> Program {
    prog(vec![def(
        "f",
        lamv(
            "n",
            10,
            if_(
                p2(Prim::Eq, v("n", 10), i(0)),
                r(0.0),
                p2(Prim::Add, r(1.0), app(g("f"), p2(Prim::Sub, v("n", 10), i(1)))),
            ),
        ),
    )])
}

#[test]
fn deep_recursion_runs_on_the_heap() {
    // on the test thread's small native stack
    let p = deep_program();
    let mut m = Machine::new(&p, &Builtins::new(), Budget::default()).unwrap();
    assert_eq!(real_of(m.call("f", vec![Value::Int(999_000)]).unwrap()), 999_000.0);
    assert_eq!(m.cost().max_depth, 999_001);
    // 10^6 deep: stopped cleanly by the default depth budget (10^6 frames), never a stack overflow
    match m.call("f", vec![Value::Int(1_000_000)]) {
        Ok(v) => assert_eq!(real_of(v), 1e6),
        Err(RunError::Budget { budget: BudgetKind::Depth, limit, .. }) => assert_eq!(limit, 1_000_000),
        Err(e) => panic!("{e:?}"),
    }
    // a larger budget lets it run
    let mut m = Machine::new(&p, &Builtins::new(), Budget { depth: 2_000_000, ..Budget::default() }).unwrap();
    assert_eq!(real_of(m.call("f", vec![Value::Int(1_000_000)]).unwrap()), 1e6);
}

#[test]
fn depth_budget_stops_recursion() {
    let p = deep_program();
    let budget = Budget { depth: 1000, ..Budget::default() };
    let mut m = Machine::new(&p, &Builtins::new(), budget).unwrap();
    match m.call("f", vec![Value::Int(1_000_000)]) {
        Err(RunError::Budget { budget: BudgetKind::Depth, limit: 1000, cost, .. }) => {
            assert_eq!(cost.max_depth, 1000);
        }
        r => panic!("{r:?}"),
    }
    // the machine recovers: a shallow call works afterwards
    assert_eq!(real_of(m.call("f", vec![Value::Int(10)]).unwrap()), 10.0);
}

#[test]
fn tail_calls_keep_depth_constant() {
    // def loop k acc = if k == 0 then acc else loop (k - 1) (acc + 1.0)
    let p = prog(vec![def(
        "loop",
        lamv(
            "k",
            10,
            lamv(
                "acc",
                11,
                if_(
                    p2(Prim::Eq, v("k", 10), i(0)),
                    v("acc", 11),
                    apps(g("loop"), vec![p2(Prim::Sub, v("k", 10), i(1)), p2(Prim::Add, v("acc", 11), r(1.0))]),
                ),
            ),
        ),
    )]);
    let mut m = Machine::new(&p, &Builtins::new(), Budget { depth: 10, ..Budget::default() }).unwrap();
    assert_eq!(real_of(m.call("loop", vec![Value::Int(100_000), Value::Real(0.0)]).unwrap()), 100_000.0);
    assert!(m.cost().max_depth <= 3, "{}", m.cost().max_depth);
    assert_eq!(m.cost().real_ops, 100_000);
}

#[test]
fn step_budget_stops_an_infinite_loop() {
    // def spin n = spin n   (a tail call: depth stays constant, only steps grow)
    let p = prog(vec![def("spin", lamv("n", 10, app(g("spin"), v("n", 10))))]);
    let mut m = Machine::new(&p, &Builtins::new(), Budget { steps: 100_000, ..Budget::default() }).unwrap();
    match m.call("spin", vec![Value::Int(0)]) {
        Err(RunError::Budget { budget: BudgetKind::Steps, limit: 100_000, cost, .. }) => assert_eq!(cost.steps, 100_001),
        r => panic!("{r:?}"),
    }
    // an infinite loop allocating closures is stopped by the allocs budget
    let p = prog(vec![def("spin", lamv("n", 10, app(g("spin"), lamv("y", 11, v("n", 10)))))]);
    let mut m = Machine::new(&p, &Builtins::new(), Budget { allocs: 1000, ..Budget::default() }).unwrap();
    assert!(matches!(m.call("spin", vec![Value::Int(0)]), Err(RunError::Budget { budget: BudgetKind::Allocs, .. })));
}

#[test]
fn costs_accumulate_over_calls() {
    let p = main_of(tup(vec![p2(Prim::Mul, v("x", 1), v("x", 1)), inl(v("x", 1))]));
    let mut m = Machine::new(&p, &Builtins::new(), Budget::default()).unwrap();
    m.call("main", vec![Value::Real(3.0)]).unwrap();
    let c1 = m.cost();
    assert_eq!((c1.real_ops, c1.allocs), (1, 2));
    m.call("main", vec![Value::Real(3.0)]).unwrap();
    let c2 = m.cost();
    assert_eq!((c2.real_ops, c2.allocs, c2.steps), (2, 4, 2 * c1.steps));
    m.count("x", 2);
    m.count("x", 3);
    assert_eq!(m.cost().counter("x"), 5);
    *m.state::<u32>() += 7;
    assert_eq!(*m.state::<u32>(), 7);
    // three states used in turn, in every order the two-entry cache of recent states can meet
    // (hit on the latest, on the one before, a miss evicting either): each keeps its own value
    for k in 0..4u64 {
        *m.state::<u64>() += 1;
        m.state::<String>().push('s');
        *m.state::<u64>() += 10;
        *m.state::<u32>() += 100;
        if k % 2 == 0 {
            m.state::<String>().push('t');
        }
    }
    assert_eq!((*m.state::<u32>(), *m.state::<u64>(), m.state::<String>().as_str()), (407, 44, "stssts"));
}

#[test]
fn long_let_chain() {
    // let x1 = x0 + 1.0 in let x2 = x1 + 1.0 in ... x100000
    let n = 100_000u32;
    let r = crate::limits::run_with_stack(move || {
        let mut body = v("x", n + 1);
        for k in (1..=n).rev() {
            body = let_(pv("x", k + 1), p2(Prim::Add, v("x", k), r(1.0)), body);
        }
        let p = main_of(body);
        let mut m = Machine::new(&p, &Builtins::new(), Budget::default()).unwrap();
        let res = m.call("main", vec![Value::Real(0.0)]).map(real_of);
        (res, m.cost().real_ops)
    });
    assert_eq!(r, (Ok(100_000.0), 100_000));
}

/// `cargo test --release -p cotangent primal_speed -- --ignored --nocapture`
#[test]
#[ignore]
fn primal_speed() {
    // def loop k acc = if k == 0 then acc else loop (k - 1) (acc * 1.0000001 + 0.5)
    let p = prog(vec![def(
        "loop",
        lamv(
            "k",
            10,
            lamv(
                "acc",
                11,
                if_(
                    p2(Prim::Eq, v("k", 10), i(0)),
                    v("acc", 11),
                    apps(
                        g("loop"),
                        vec![
                            p2(Prim::Sub, v("k", 10), i(1)),
                            p2(Prim::Add, p2(Prim::Mul, v("acc", 11), r(1.0000001)), r(0.5)),
                        ],
                    ),
                ),
            ),
        ),
    )]);
    let n = 1_000_000;
    let mut m = Machine::new(&p, &Builtins::new(), Budget { steps: u64::MAX, allocs: u64::MAX, ..Budget::default() }).unwrap();
    let t = std::time::Instant::now();
    m.call("loop", vec![Value::Int(n), Value::Real(0.0)]).unwrap();
    let dt = t.elapsed().as_secs_f64();
    let c = m.cost();
    println!(
        "loop {n}: {:.3} s, {} real ops ({:.1} M real ops/s), {} steps ({:.1} M steps/s), {} prim ops total ({:.1} M prim ops/s)",
        dt,
        c.real_ops,
        c.real_ops as f64 / dt / 1e6,
        c.steps,
        c.steps as f64 / dt / 1e6,
        4 * n,
        4.0 * n as f64 / dt / 1e6
    );
    // non-tail recursion
    let p = deep_program();
    let mut m = Machine::new(&p, &Builtins::new(), Budget { steps: u64::MAX, depth: u64::MAX, ..Budget::default() }).unwrap();
    let t = std::time::Instant::now();
    m.call("f", vec![Value::Int(n)]).unwrap();
    let dt = t.elapsed().as_secs_f64();
    println!("deep f {n}: {:.3} s, {:.1} M steps/s", dt, m.cost().steps as f64 / dt / 1e6);
}

#[test]
#[ignore]
fn measure_nesting_stack() {
    #[derive(Default)]
    struct Addrs(Vec<usize>);
    fn cb(m: &mut Machine<'_>, args: &mut Vec<Value>, _span: Span) -> Result<Value, RunError> {
        let x = 0u8;
        let a = &x as *const u8 as usize;
        let st = m.state::<Addrs>();
        st.0.push(a);
        if st.0.len() > 5 {
            return Ok(Value::Unit);
        }
        let mut args = args.drain(..);
        let f = args.next().unwrap();
        m.apply(f, args.next().unwrap())
    }
    let mut bs = Builtins::new();
    bs.add(Builtin { name: "callback", scheme: Scheme::mono(Type::Unknown), arity: 2, lazy_last: false, run: cb });
    let p = prog(vec![def("main", lamv("x", 1, apps(bi("callback"), vec![g("main"), v("x", 1)])))]);
    let mut m = Machine::new(&p, &bs, Budget::default()).unwrap();
    m.call("main", vec![Value::Unit]).unwrap();
    let a = &m.state::<Addrs>().0;
    println!("stack per nesting level: {:?}", a.windows(2).map(|w| w[0] as i64 - w[1] as i64).collect::<Vec<_>>());
}

thread_local! {
    /// The live heap as `memory_budget_counts_what_the_run_adds`'s probes report it.
    static LIVE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Issue 14: the run's memory budget counts what the run adds, not the heap already live when it
/// starts (the program and its code): a run whose heap stays flat runs to its step budget even when
/// the live heap is past the limit from the start; one that grows stops, named, at the limit.
#[test]
fn memory_budget_counts_what_the_run_adds() {
    // def spin n = spin n: no allocation, so only the steps budget stops it
    let p = prog(vec![def("spin", lamv("n", 10, app(g("spin"), v("n", 10))))]);
    let flat = || LIVE.with(|l| l.get());
    LIVE.with(|l| l.set(1 << 30));
    let mut m = Machine::new(&p, &Builtins::new(), Budget { steps: 100_000, ..Budget::default() }).unwrap();
    m.set_memory_limit(flat, 1 << 20);
    match m.call("spin", vec![Value::Int(0)]) {
        Err(RunError::Budget { budget: BudgetKind::Steps, .. }) => {}
        r => panic!("{r:?}"),
    }
    // a probe that reports 1 MiB more at each check: past 4 MiB more, the memory budget stops it
    let growing = || {
        LIVE.with(|l| {
            l.set(l.get() + (1 << 20));
            l.get()
        })
    };
    let mut m = Machine::new(&p, &Builtins::new(), Budget { steps: 100_000, ..Budget::default() }).unwrap();
    m.set_memory_limit(growing, 4 << 20);
    match m.call("spin", vec![Value::Int(0)]) {
        Err(e @ RunError::Budget { budget: BudgetKind::Memory, limit, .. }) => {
            assert_eq!(limit, 4 << 20);
            let why = e.message();
            assert!(why.starts_with("stopped: the memory budget (4 MiB of live heap for the run) ran out after"), "{why}");
        }
        r => panic!("{r:?}"),
    }
}

#[test]
fn a_saturated_partial_value_read_once_is_the_spare_and_holds_nothing() {
    // `g`, `h` (a local function's, with captures) and the last `q` are each read once and saturated:
    // the box is reused for the next partial value (`new_part`), emptied of the program's values
    // (captures, group, arguments) in between, so the spare keeps nothing alive
    let src = "def f a b = a * b + 1.0\ndef loop k acc x = if k == 0 then acc else let g = f acc in let h = (let m u v = u * x - v in m acc) in loop (k - 1) (g x + h 0.5) x\ndef main x = loop 3 1.0 x + (let p = f x in p 1.0 + p 2.0) + (let q = f 2.0 in q x)";
    let p = crate::syntax::parse_program(src).expect("parses");
    for walker in [false, true] {
        let mut m = Machine::new(&p, &Builtins::new(), Budget { walker, ..Budget::default() }).unwrap();
        let got = real_of(m.call("main", vec![Value::Real(0.5)]).unwrap());
        let (f, m3) = (|a: f64, b: f64| a * b + 1.0, |u: f64, v: f64| u * 0.5 - v);
        let mut acc = 1.0;
        for _ in 0..3 {
            acc = f(acc, 0.5) + m3(acc, 0.5);
        }
        assert_eq!(got, acc + (f(0.5, 1.0) + f(0.5, 2.0)) + f(2.0, 0.5));
        match (walker, &m.spare_part) {
            (true, None) => {}
            (false, Some(Value::Fun(rc))) => match rc.downcast_ref::<FunVal>() {
                Some(FunVal::Part { env, group: None, args, .. }) => assert!(env.is_empty() && args.is_empty()),
                _ => panic!("the spare is not an empty partial value"),
            },
            (_, s) => panic!("walker {walker}: spare {s:?}"),
        }
    }
}

/// Issue 14 item 4: a second run on the same code (chad/arrays' BArray run) whose entries are not
/// counted leaves a function entered once a run uncompiled, as one run does; counted, its entries
/// added to the first run's passed `regions_after` and made (and kept) a compiled copy of the body.
#[test]
fn a_rerun_not_counted_leaves_regions_as_one_run_does() {
    let body = p2(Prim::Add, p2(Prim::Mul, v("y", 2), r(2.0)), p1(Prim::Sin, v("y", 2)));
    let p = prog(vec![def("f", lamv("y", 2, body)), def("main", lamv("x", 1, app(g("f"), v("x", 1))))]);
    let bs = Builtins::new();
    let compiled = |counted: bool| {
        let mut m = Machine::new(&p, &bs, Budget::default()).expect("lowering");
        m.count_entries(counted);
        let mut again = m.rerun();
        for _ in 0..2 {
            assert_eq!(real_of(again.call("main", vec![Value::Real(1.0)]).expect("runs")), 2.0 + 1f64.sin());
        }
        drop(again);
        m.count_entries(true);
        assert_eq!(real_of(m.call("main", vec![Value::Real(1.0)]).expect("runs")), 2.0 + 1f64.sin());
        let f = m.code.index.get("f").and_then(|&i| m.code.defs[i as usize].lam.clone()).expect("f is a lambda");
        f.hot.get().is_some()
    };
    assert!(compiled(true), "three counted entries compile f's regions");
    assert!(!compiled(false), "the rerun's entries counted toward f's regions");
}

/// `alloc_room` counts the `alloc(1)`s that pass with no memory probe and no budget stop, and the
/// next one probes or stops (runDelta's wrap counts its Lets' allocations that many at once,
/// issue 13, session 45): from allocation counts just below, at and past a 4096 edge, and near the
/// budget. Fails if the room is one off either way (the wrap would skip a probe, or stop late).
#[test]
fn alloc_room_is_the_allocations_that_pass_unprobed() {
    use std::sync::atomic::{AtomicU64, Ordering};
    static PROBES: AtomicU64 = AtomicU64::new(0);
    fn live() -> u64 {
        PROBES.fetch_add(1, Ordering::Relaxed);
        0
    }
    let p = Program::default();
    for (budget, start) in [(1 << 20, 0u64), (1 << 20, 4094), (1 << 20, 4095), (1 << 20, 4096), (1 << 20, 9000), (5000, 4990), (4100, 4096), (100, 100)] {
        let mut m = Machine::new(&p, &Builtins::new(), Budget { allocs: budget, ..Budget::default() }).unwrap();
        m.set_memory_limit(live, u64::MAX);
        m.alloc_fitting(start.min(m.alloc_room()));
        while m.cost().allocs < start {
            let _ = m.alloc(1);
        }
        let room = m.alloc_room();
        let probes = PROBES.load(Ordering::Relaxed);
        for _ in 0..room {
            assert!(m.alloc(1).is_ok(), "{budget} {start}");
        }
        assert_eq!(PROBES.load(Ordering::Relaxed), probes, "{budget} {start}: probed inside the room");
        let next = m.alloc(1);
        assert!(next.is_err() || PROBES.load(Ordering::Relaxed) > probes, "{budget} {start}: neither stop nor probe after the room");
    }
}
