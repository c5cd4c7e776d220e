//! Tests of the Smeding–Vákár chain (`dualrev/*`): agreement with `forward`, the worked numbers of
//! the note (§4.1–4.3), counters, budgets, and golden programs.

use cotangent::build::*;
use cotangent::interp::{Budget, Builtins, RunError};
use cotangent::ir::*;
use cotangent::pipeline::{self, Options, StageResult};
use cotangent::stage::Source;
use cotangent::stages;
use cotangent::types;
use cotangent::value::Value;

const DUALREV: &[&str] = &[
    "dualrev/naive",
    "dualrev/staged",
    "dualrev/cayley",
    "dualrev/sparse",
    "dualrev/mutable",
    "dualrev/no-collector",
    "dualrev/contrib",
    "dualrev/tape",
];

/// A tiny name supply for building source programs by hand.
struct Names(u32);
impl Names {
    fn n(&mut self, t: &str) -> Name {
        self.0 += 1;
        Name::new(t, self.0)
    }
}

fn program(defs: Vec<(&str, Expr)>, next: u32) -> Program {
    Program { params: vec![], input: None, defs: defs.into_iter().map(|(n, e)| def(n, e)).collect(), expects: vec![], next_id: next + 1 }
}

fn typed(mut p: Program) -> (Program, Type, Type) {
    types::check_program(&mut p, &Builtins::new()).expect("source type-checks");
    let ty = p.def("main").unwrap().scheme.clone().unwrap().ty;
    let ty = types::rename(&ty, &mut |_| Type::Real);
    match ty {
        Type::Fun(s, t) => (p, *s, *t),
        t => panic!("main: {t:?}"),
    }
}

fn run(stage: &str, p: &(Program, Type, Type), input: &Value, seed: &Value, budget: Budget) -> StageResult {
    let src = Source { program: &p.0, input_type: &p.1, output_type: &p.2 };
    let st = stages::find(stage).unwrap_or_else(|| panic!("no stage {stage}"));
    let opts = Options { budget, ..Options::default() };
    pipeline::run_stage(st, &src, input, seed, &opts)
}

fn reals(v: &[f64]) -> Value {
    Value::tuple(v.iter().map(|r| Value::Real(*r)).collect())
}

/// `def main (x, y) = let z = x + y in x * z` (Fig. 1)
fn running_example() -> (Program, Type, Type) {
    let mut n = Names(0);
    let (x, y, z) = (n.n("x"), n.n("y"), n.n("z"));
    let body = let_(pvar(&z), add(var(&x), var(&y)), mul(var(&x), var(&z)));
    typed(program(vec![("main", lam(ppair(pvar(&x), pvar(&y)), body))], n.0))
}

/// Fig. 2: `def main x0 = let x1 = x0 + x0 in … in x_{n+1}`
fn doubling(n_: usize) -> (Program, Type, Type) {
    let mut n = Names(0);
    let xs: Vec<Name> = (0..=n_ + 1).map(|k| n.n(&format!("x{k}"))).collect();
    let mut body = var(&xs[n_ + 1]);
    for k in (1..=n_ + 1).rev() {
        body = let_(pvar(&xs[k]), add(var(&xs[k - 1]), var(&xs[k - 1])), body);
    }
    typed(program(vec![("main", lam(pvar(&xs[0]), body))], n.0))
}

#[test]
fn running_example_all_stages() {
    let p = running_example();
    for st in DUALREV {
        let r = run(st, &p, &reals(&[12.0, 13.0]), &Value::Real(1.0), Budget::default());
        assert!(r.ok, "{st}: {:?}\n{}", r.error, r.program);
        assert_eq!(r.primal.as_ref().unwrap().to_string(), "300.0", "{st}");
        assert_eq!(r.gradient, vec![37.0, 12.0], "{st}");
    }
}

#[test]
fn doubling_counts() {
    let p = doubling(2);
    let r = run("dualrev/naive", &p, &Value::Real(1.5), &Value::Real(1.0), Budget::default());
    assert!(r.ok, "{:?}\n{}", r.error, r.program);
    assert_eq!(r.gradient, vec![8.0]);
    assert_eq!(r.cost.counter("backprop_calls"), 15);
    for st in &DUALREV[1..] {
        let r = run(st, &p, &Value::Real(1.5), &Value::Real(1.0), Budget::default());
        assert!(r.ok, "{st}: {:?}", r.error);
        assert_eq!(r.gradient, vec![8.0], "{st}");
        assert_eq!(r.cost.counter("backprop_calls"), 4, "{st}");
    }
}
