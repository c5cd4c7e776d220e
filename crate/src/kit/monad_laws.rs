//! Administrative simplification by the monad laws (not in the papers; note §8.13), so that a
//! monadic lifting's printed program reads like the figures rather than a thicket of
//! `do { x ← pure x; … }`. Three named rules on the rewrite engine's `blocks` strategy:
//! - left identity: `do { x ← pure v; m }` = `m[v/x]` for a variable or literal v, or a tuple of them
//!   if x is used once (a tuple only allocates, so moving it under a λ repeats no work and no effect);
//! - associativity: `do { p ← do { q ← m1; m2 }; m }` = `do { q ← m1; p ← m2; m }`, likewise through a `let`;
//! - right identity: `do { x ← m; pure x }` = `m`.
//!
//! A statement `p ← pure e` that no law removes stays a statement rather than becoming
//! `let p = e in …`: a let inside a do would nest the rest of the block one level deeper each time,
//! and the printed program of a long run would grow quadratically.

use crate::build::Fresh;
use crate::diag::Diagnostic;
use crate::ir::{Expr, ExprKind, Pat};
use crate::kit::rewrite::{Blocks, Budget, LinkRule, Linked, RewriteCx, Site, Stmt, Trace};

/// The three laws, in the order they are tried.
pub const MONAD_LAWS: [LinkRule; 3] = [
    LinkRule { name: "left identity", site: Site::Link, matches: left_identity_matches, apply: left_identity },
    LinkRule { name: "associativity", site: Site::Head, matches: associativity_matches, apply: associativity },
    LinkRule { name: "right identity", site: Site::End, matches: right_identity_matches, apply: right_identity },
];

/// The name of the simplification's trace as a stage's view (the stepper keeps the run's own steps:
/// a long program's laws would bury the backward pass).
pub const VIEW: &str = "monad laws";

/// Steps of the simplification the trace keeps with their text (the rest are counted): the stage is
/// the page's first screen, traced on every keystroke, and each kept step costs two prints.
const TRACE_STEPS: usize = 100;

/// A simplification of a program's definitions, one after another, with one trace.
pub struct Simplifier<'f>(Blocks<'static, 'f>);

impl<'f> Simplifier<'f> {
    pub fn new(fresh: &'f mut Fresh) -> Simplifier<'f> {
        // linear in the program, so no budget but the trace's is needed
        let budget = Budget { steps: u64::MAX, visits: u64::MAX, trace_steps: TRACE_STEPS, program_after: false };
        Simplifier(Blocks::new(&MONAD_LAWS, fresh, budget))
    }

    /// The definition `name = e` simplified.
    pub fn def(&mut self, name: &str, e: Expr) -> Result<Expr, Diagnostic> {
        self.0.def(name, e)
    }

    /// Node visits so far (an outcome a test can count: linear in the program).
    pub fn visits(&self) -> u64 {
        self.0.visits()
    }

    pub fn finish(self) -> Trace {
        self.0.finish()
    }
}

fn is_atom(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Var(_) | ExprKind::Int(_) | ExprKind::Real(_) | ExprKind::Bool(_) | ExprKind::Unit)
}

fn is_atom_tuple(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Tuple(es) if es.iter().all(is_atom))
}

/// `x ← pure v` with v an atom, or a tuple of atoms and x used at most once.
fn left_identity_matches(e: &Expr, cx: &RewriteCx) -> bool {
    match &e.kind {
        ExprKind::Bind(p_m_pair) => { let (p, m_pair) = &**p_m_pair; match (p, &m_pair.0.kind) {
            (Pat::Var(x, _), ExprKind::Pure(v)) => is_atom(v) || (is_atom_tuple(v) && cx.uses.get(&x.id).copied().unwrap_or(0) <= 1),
            _ => false,
        } },
        _ => false,
    }
}

fn left_identity(e: Expr) -> Linked {
    match Stmt::split(e) {
        Ok((Stmt { pat: Pat::Var(x, _), rhs: Expr { kind: ExprKind::Pure(v), .. }, .. }, rest)) => Linked::Under { x, v: *v, rest },
        Ok((stmt, rest)) => Linked::To(stmt.then(rest)),
        Err(e) => Linked::To(e),
    }
}

/// `p ← m` where m's head is itself a statement (`q ← m1; m2` or `let q = m1 in m2`).
fn associativity_matches(e: &Expr, _: &RewriteCx) -> bool {
    matches!(&e.kind, ExprKind::Bind(m_k) if matches!(m_k.1 .0.kind, ExprKind::Bind(..) | ExprKind::Let(..)))
}

fn associativity(e: Expr) -> Linked {
    let (stmt, rest) = match Stmt::split(e) {
        Ok(s) => s,
        Err(e) => return Linked::To(e),
    };
    match Stmt::split(stmt.rhs) {
        // q ← m1 moves out; p ← m2 continues
        Ok((head, m2)) => Linked::Hoist { stmt: head, rest: Stmt { rhs: m2, ..stmt }.then(rest) },
        Err(m) => Linked::To(Stmt { rhs: m, ..stmt }.then(rest)),
    }
}

/// `x ← m; pure x`.
fn right_identity_matches(e: &Expr, _: &RewriteCx) -> bool {
    match &e.kind {
        ExprKind::Bind(p_k_pair) => {
            let (p, k_pair) = &**p_k_pair;
            let (_, k) = k_pair;
            matches!((p, &k.kind), (Pat::Var(x, _), ExprKind::Pure(v)) if matches!(&v.kind, ExprKind::Var(y) if y == x))
        }
        _ => false,
    }
}

fn right_identity(e: Expr) -> Linked {
    match e.kind {
        ExprKind::Bind(m_pair) => Linked::To(m_pair.1 .0),
        kind => Linked::To(Expr { kind, span: e.span, ty: e.ty }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::*;
    use crate::ir::Name;
    use crate::kit::delta::drev::{drev_lifted, Naming};
    use crate::print::{print_expr, PrintOptions};

    /// Drev (Krawiec Fig. 9) of `main (x, y)` = a straight chain of n lets, before simplification.
    fn drev_chain(n: usize) -> (Expr, Fresh) {
        let mut s = String::from("input (0.3, 0.7)\ndef main (x, y) =\n  let a0 = x in\n");
        for i in 1..=n {
            s += &format!("  let a{i} = sin a{} * y + 0.5 in\n", i - 1);
        }
        s += &format!("  a{n}\n");
        let (p, _, _) = crate::pipeline::front_end(&s, &[]).expect("the chain checks");
        let mut fr = Fresh::new(&p);
        let lifted = drev_lifted(&p, &mut fr, Naming::DeltaLet).expect("Drev");
        (lifted.def("main").expect("main").body.clone(), fr)
    }

    /// (rule steps, node visits) of the simplification of the chain of n lets.
    fn effort(n: usize) -> (u64, u64) {
        let (e, mut fr) = drev_chain(n);
        let mut laws = Simplifier::new(&mut fr);
        laws.def("main", e).expect("no budget runs out");
        let visits = laws.visits();
        (laws.finish().taken, visits)
    }

    #[test]
    fn the_laws_take_steps_and_visits_in_proportion_to_a_straight_chain() {
        // the chain is walked in loops: a big stack only for the IR's derived Clone and Drop
        crate::limits::run_with_stack(|| {
            let (s1, v1) = effort(1000);
            let (s2, v2) = effort(2000);
            let (s4, v4) = effort(4000);
            // each line adds the same number of steps and visits: exactly linear, up to the ends
            assert_eq!(s4 - s2, 2 * (s2 - s1), "steps {s1} {s2} {s4}");
            assert_eq!(v4 - v2, 2 * (v2 - v1), "visits {v1} {v2} {v4}");
            assert!(s1 >= 3000, "every line's do blocks are simplified: {s1}");
        });
    }

    /// Drev (Krawiec Fig. 9) of `main` of `src`, before simplification.
    fn drev_of(src: &str) -> (Expr, Fresh) {
        let (p, _, _) = crate::pipeline::front_end(src, &[]).expect("the program checks");
        let mut fr = Fresh::new(&p);
        let lifted = drev_lifted(&p, &mut fr, Naming::DeltaLet).expect("Drev");
        (lifted.def("main").expect("main").body.clone(), fr)
    }

    #[test]
    fn nested_blocks_hoisted_at_once_give_what_one_at_a_time_gives() {
        // left-nested binds (x + x + … + x, sin (sin …)) are hoisted a whole block at a time once the
        // trace is full; with every step's text kept they go one at a time: the same program and counts
        crate::limits::run_with_stack(|| {
            let n = 48;
            let left = format!("input 1.5\ndef main x = x{}", " + x".repeat(n));
            let right = format!("input 1.5\ndef main x = {}x{}", "x + (".repeat(n), ")".repeat(n));
            let sins = format!("input 0.5\ndef main x = {}x{}", "sin (".repeat(n), ")".repeat(n));
            let mixed = format!("input 0.5\ndef main x = {}x{}", "(x * sin (".repeat(n / 2), ")) + x".repeat(n / 2));
            for src in [left, right, sins, mixed] {
                let mut outs = vec![];
                for trace_steps in [usize::MAX, 200, 0] {
                    let (e, mut fr) = drev_of(&src);
                    let budget = Budget { steps: u64::MAX, visits: u64::MAX, trace_steps, program_after: false };
                    let (out, tr) = crate::kit::rewrite::normalise_blocks(e, &MONAD_LAWS, &mut fr, budget).expect("no budget");
                    outs.push((print_expr(&out, &PrintOptions::ascii()), tr.taken, tr.per_rule.clone(), tr.steps.len().min(200)));
                }
                assert_eq!(outs[0], outs[1], "{src}");
                assert_eq!((&outs[0].0, outs[0].1, &outs[0].2), (&outs[2].0, outs[2].1, &outs[2].2), "{src}");
                assert!(outs[0].2.iter().any(|(r, k)| *r == "associativity" && *k as usize > n), "{:?}", outs[0].2);
            }
            // a step budget spent partway through a block hoisted at once stops where one at a time would
            let src = format!("input 1.5\ndef main x = x{}", " + x".repeat(40));
            let stopped: Vec<String> = [usize::MAX, 0]
                .into_iter()
                .map(|trace_steps| {
                    let (e, mut fr) = drev_of(&src);
                    let budget = Budget { steps: 100, visits: u64::MAX, trace_steps, program_after: false };
                    crate::kit::rewrite::normalise_blocks(e, &MONAD_LAWS, &mut fr, budget).map(|_| ()).unwrap_err().message
                })
                .collect();
            assert_eq!(stopped[0], stopped[1]);
            assert!(stopped[0].contains("steps"), "{}", stopped[0]);
        });
    }

    #[test]
    fn the_three_laws_on_one_block_with_a_trace() {
        // do { a ← do { b ← f 1.0; d ← g b; pure d }; c ← pure a; pure c }  →  do { b ← f 1.0; g b }
        let n = |t: &str, i| Name::new(t, i);
        let m = app(global("f"), real(1.0));
        let gb = app(global("g"), var(&n("b", 2)));
        let inner = bind(pvar(&n("b", 2)), m, bind(pvar(&n("d", 4)), gb, pure(var(&n("d", 4)))));
        let e = bind(pvar(&n("a", 1)), inner, bind(pvar(&n("c", 3)), pure(var(&n("a", 1))), pure(var(&n("c", 3)))));
        let mut fr = Fresh { next_id: 10 };
        let mut laws = Simplifier::new(&mut fr);
        let out = laws.def("main", e).unwrap();
        assert_eq!(print_expr(&out, &PrintOptions::ascii()).split_whitespace().collect::<Vec<_>>().join(" "), "do { b <- f 1.0; g b }");
        let tr = laws.finish();
        let names: Vec<&str> = tr.steps.iter().map(|s| s.rule).collect();
        assert_eq!(names, ["right identity", "associativity", "left identity", "right identity"]);
        assert_eq!(tr.steps[1].path, Vec::<u32>::new(), "the block's first statement");
        assert_eq!(tr.steps[2].path, vec![1, 1], "its third: b ← f 1.0 hoisted, then a ← g b");
        assert!(tr.steps[2].after.text().contains("c ↦ a"), "{:?}", tr.steps[2].after);
        assert!(tr.view(VIEW).printed().starts_with("4 rewrite steps: left identity ×1, associativity ×1, right identity ×2"));
    }

    #[test]
    fn a_tuple_is_substituted_only_for_a_variable_used_once() {
        // do { p ← pure (x, y); q ← pure (x, y); r ← f p; g (q, q) }: p goes, q (used twice) stays
        let n = |t: &str, i| Name::new(t, i);
        let (x, y) = (var(&n("x", 1)), var(&n("y", 2)));
        let e = bind(
            pvar(&n("p", 3)),
            pure(pair(x.clone(), y.clone())),
            bind(
                pvar(&n("q", 4)),
                pure(pair(x, y)),
                bind(pvar(&n("r", 5)), app(global("f"), var(&n("p", 3))), app(global("g"), pair(var(&n("q", 4)), var(&n("q", 4))))),
            ),
        );
        let mut fr = Fresh { next_id: 10 };
        let out = Simplifier::new(&mut fr).def("main", e).unwrap();
        let text = print_expr(&out, &PrintOptions::ascii());
        assert!(text.contains("f (x, y)") && text.contains("q <- pure (x, y)"), "{text}");
    }
}
