//! The cost model of §5.2 (Fig. 11), the nesting of array operations of §5.3, and the check of
//! Theorem 5.4, `Cost(∇e after partial evaluation) ≤ 4·3^p·Cost(e)` with `p ≥ NAO(e)`.
//!
//! The machine charges Fig. 11 as it runs (`interp::CostModel`), so the counts are those of what ran:
//! for the lambda-free programs the figure covers (after partial evaluation, Lemma 5.3) they are the
//! figure's static cost at the input's array sizes; for the continuation-passing outputs before it,
//! each continuation call moves every slot it is given (the O(|Γ|) MOVES of §5.3's proof sketch).
//!
//! Decisions:
//! - Cost is a vector (MOVES, ADDS, MULTS, NLOPS); the theorem compares totals (the sum of the four),
//!   because compared component by component it would fail on `x * y`, whose primal has no ADDS and
//!   whose gradient has (and the proof counts "operations", not kinds).
//! - An operator given to an array operation is a lambda here (`\x y -> x * y`), which reads its two
//!   parameters: 2 MOVES per element more than the paper's `map2 *` (Cost(e1) = Cost(*)).
//! - `/`, `**`, `atan2`, `min`, `max` are non-linear binary operations: (3,0,0,1); every unary
//!   operation, negation included, is `op1` = (2,0,0,1) as the paper states.
//! - `sum A` is `reduce + 0 A` (Ex. 1.2): n·(Cost(+) + (2,0,0,0)); `map` and `fold` cost as `map2` and
//!   `reduce`; `replicate n` and the shifts move n values; `a ! i` and `length` one.

use super::first_order;
use crate::interp::{Budget, Builtins, CostModel, Machine};
use crate::ir::Prim as P;
use crate::ir::*;
use crate::stage::{CounterInfo, RunCtx};

/// Fig. 11 as the machine charges it.
pub static FIG11: CostModel = CostModel {
    counters: ["moves", "adds", "mults", "nlops"],
    var: [1, 0, 0, 0],
    bind: [1, 0, 0, 0],
    proj: [1, 0, 0, 0],
    prim1: |_| [2, 0, 0, 1],
    prim2: |op| match op {
        P::Mul => [3, 0, 1, 0],
        P::Add | P::Sub => [3, 1, 0, 0],
        _ => [3, 0, 0, 1],
    },
    array: |op, n| match op {
        P::Map | P::Map2 | P::Reduce | P::Fold | P::Build => [2 * n, 0, 0, 0],
        P::Scanl | P::Scanr => [3 * n, 0, 0, 0],
        P::Sum => [5 * n, n, 0, 0],
        P::Shift1L | P::Shift1R | P::Replicate => [n, 0, 0, 0],
        _ => [1, 0, 0, 0],
    },
};

/// The counters the chain reports, with what they count.
pub static COUNTERS: &[CounterInfo] = &[
    CounterInfo { name: "moves", about: "Fig. 11 MOVES of this stage's run: variables and constants read, lets bound, projections, array elements moved" },
    CounterInfo { name: "adds", about: "Fig. 11 ADDS of this stage's run (+ and − on reals)" },
    CounterInfo { name: "mults", about: "Fig. 11 MULTS of this stage's run" },
    CounterInfo { name: "nlops", about: "Fig. 11 NLOPS of this stage's run: non-linear operations (sin, exp, /, …)" },
    CounterInfo { name: "cost", about: "Fig. 11 cost of this stage's run: MOVES + ADDS + MULTS + NLOPS" },
    CounterInfo { name: "primal_cost", about: "Fig. 11 cost of the source program (inlined to first order) at the same input: Cost(e)" },
    CounterInfo { name: "nesting_p", about: "NAO(e), the nesting depth of array operations (§5.3)" },
    CounterInfo { name: "thm54_bound", about: "Theorem 5.4's bound 4·3^p·Cost(e); it holds once the gradient is partially evaluated (§5.1)" },
    CounterInfo { name: "thm54_holds", about: "1 when this run's cost is at most Theorem 5.4's bound, else 0 (expected 0 before partial evaluation)" },
];

/// The chain's `before_run`: charge Fig. 11 for everything the output runs.
pub fn before_run(m: &mut Machine, _: &RunCtx) {
    m.set_cost_model(&FIG11);
}

/// The chain's `after_run`: the run's total, the source's Cost(e) and NAO(e), and Theorem 5.4's bound.
pub fn after_run(m: &mut Machine, cx: &RunCtx) {
    let cost: u64 = m.model_cost().iter().sum();
    m.count("cost", cost);
    let Some((primal, p)) = primal_cost(cx) else { return };
    let bound = 4u64.saturating_mul(3u64.saturating_pow(p as u32)).saturating_mul(primal);
    m.count("primal_cost", primal);
    m.count("nesting_p", p);
    m.count("thm54_bound", bound);
    m.count("thm54_holds", u64::from(cost <= bound));
}

/// Cost(e) of the user's program as the paper's language (inlined to first order), run at the same
/// input, and its NAO; None if it is outside that language (the stage has refused it then).
pub fn primal_cost(cx: &RunCtx) -> Option<(u64, u64)> {
    let p = first_order(cx.origin).ok()?;
    let main = p.def("main")?;
    let nao = nao(&main.body);
    let mut m = Machine::new(&p, &Builtins::new(), Budget::default()).ok()?;
    m.set_tracing(false);
    m.set_cost_model(&FIG11);
    m.call("main", vec![cx.input.clone()]).ok()?;
    Some((m.model_cost().iter().sum(), nao))
}

/// NAO(e) of §5.3: the deepest nesting of array operations, an operation counting one level more
/// than what runs inside its function (`sum` is `reduce +`, one level). Walked with an explicit stack.
pub fn nao(e: &Expr) -> u64 {
    let mut deepest = 0;
    let mut stack = vec![(e, 0u64)];
    while let Some((e, d)) = stack.pop() {
        if let ExprKind::Prim(op, args) = &e.kind {
            if matches!(op, P::Map | P::Map2 | P::Reduce | P::Fold | P::Build | P::Scanl | P::Scanr | P::Sum) {
                deepest = deepest.max(d + 1);
                for a in args {
                    let inside = matches!(a.kind, ExprKind::Lam(..));
                    stack.push((a, if inside { d + 1 } else { d }));
                }
                continue;
            }
        }
        each_child(e, &mut |c| stack.push((c, d)));
    }
    deepest
}

#[cfg(test)]
mod tests {
    use crate::interp::{Budget, Builtins, CostModel, Machine};
    use crate::ir::Prim as P;
    use crate::value::Value;

    /// A model whose every class charges a counter of its own, so each class's count shows.
    static CLASSES: CostModel = CostModel {
        counters: ["vars", "binds", "projs", "ops"],
        var: [1, 0, 0, 0],
        bind: [0, 1, 0, 0],
        proj: [0, 0, 1, 0],
        prim1: |op| [0, 0, 0, if op == P::Sin { 100 } else { 10_000 }],
        prim2: |op| [0, 0, 0, if op == P::Mul { 1 } else { 1_000_000 }],
        array: |_, n| [0, 0, 0, 100_000_000 * n],
    };

    /// The machine counts each step's class and multiplies the model out when the cost is read
    /// (`Machine::model_cost`): every class charged to the model's own row for it, per variable for
    /// a let, on the walker and on the engine alike.
    #[test]
    fn each_step_is_charged_as_its_class_in_the_model() {
        let src = "input 0.5\ndef main x = let (a, b) = (x * x, sin x) in fst (a, b) * 2.0";
        let (p, _, _) = crate::pipeline::front_end(src, &[]).expect("the program checks");
        for walker in [false, true] {
            let mut m = Machine::new(&p, &Builtins::new(), Budget { walker, ..Budget::default() }).expect("a machine");
            m.set_cost_model(&CLASSES);
            m.call("main", vec![Value::Real(0.5)]).expect("it runs");
            // reads: x, x, x, a, b, 2.0; the let binds a and b; one `fst`; `sin` once, `*` twice
            assert_eq!(m.model_cost(), [6, 2, 1, 100 + 2], "walker: {walker}");
            let c = m.cost();
            assert_eq!((c.counter("vars"), c.counter("binds"), c.counter("projs"), c.counter("ops")), (6, 2, 1, 102));
        }
    }
}
