//! `krawiec/monadic`: the monadic translation, Krawiec et al. §7.1–7.2, Figs. 9–11. Every Delta a
//! primitive builds is bound at once to a fresh DeltaId with `deltaLet` in a state monad M, and only
//! `Var id` travels with the real, so Deltas are copied without losing sharing. `runDelta` runs the
//! translated program and wraps the bindings it made around the result as nested `Let`s; `eval` walks
//! that Let spine body-first over a persistent map from DeltaIds to cotangents, and evaluates each
//! binding's right-hand side once, scaled by the cotangent accumulated for its id: backpropagation.
//!
//! Decisions where the paper leaves room (note §8): evaluation is left to right, as Fig. 9 makes it
//! explicit (function before argument, components in order, let-rhs before body), and a literal makes
//! no binding (Drev{r} = pure (r, Zero)). Fig. 12's Delta was produced by an OCaml implementation that
//! evaluates right to left and binds `from_float` literals to Zero: 40 bindings there, 38 here, with
//! the same gradient (tests/krawiec.rs checks both numbers). Fig. 14's reverse rule, as printed, lacks
//! the `pure` around its λ that the sin and cos rules have and returns the DeltaId dy where `Var dy`
//! is meant; we follow the sin/cos rules. Its n-ary Add is folded into binary Adds, left to right.

use crate::kit::delta::delta_type;
use crate::kit::delta::drev::m_type;
use super::common::eval::{graph_of_state, map_builtins};
use super::common::monad::{b_run_delta, monad_builtins};
use super::common::wrapper::{ra_stated_types, ra_transform, require_ra_to_r};
use crate::diag::Diagnostic;
use crate::interp::{Builtin, Graph, Machine};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};

pub struct Monadic;

static INFO: StageInfo = StageInfo {
    id: "krawiec/monadic",
    paper: "Krawiec et al. 2022",
    section: "§7.1–7.2, Figs. 9–11",
    title: "The monadic translation: a Delta DAG with explicit sharing, eval over a map",
    explanation: "eval2 lost sharing because a Delta could be copied. The fix is to name every Delta a primitive \
builds: Drev is a standard monadic translation into a state monad M whose state is a supply of DeltaIds and a list \
of bindings; +R and ×R bind their Delta with deltaLet and return only Var id, so the Delta paired with any real is \
Zero or Var id and copies are free (Drev{A → B} = Drev{A} → M Drev{B}, and evaluation order becomes explicit, left \
to right). OneHot is gone: the wrapper R{e} seeds input i with Var i and starts the supply at a + 1; runDelta runs \
the program and wraps its bindings around the result as nested Lets. eval then walks the Let spine body first: at \
Let id rhs body it looks up the cotangent accumulated for id (skipping the binding if id is absent: dead code), \
deletes it, and evaluates rhs once, scaled by it, so every node is visited once (eval_visits is linear on the \
doubling chain). The map is persistent (a B+tree, imbl's), so each lookup, addDelta and delete is O(log n). The \
program is printed after the monad laws' administrative simplification (do { x ← pure v; m } becomes m[v/x] for a variable or literal v, and nested do blocks are flattened), \
which is not in the paper.",
    complexity: "forward pass O(T) (one binding per real operation); eval O(T log T) with the persistent map.",
    accepts: "the whole scalar language inside main; main itself must have type R^a → R (Fig. 11)",
};

impl Stage for Monadic {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        // runDelta : DeltaId → M (a × Delta) → a × Delta (Fig. 10 returns only the Delta; ours keeps
        // the primal a too, so that the wrapper can return it).
        let a = Type::Var(0);
        let pair_ty = Type::tup(vec![a, delta_type()]);
        let scheme = Scheme { vars: vec![0], ty: Type::fun(Type::Int, Type::fun(m_type(pair_ty.clone()), pair_ty)) };
        let mut bs = monad_builtins(scheme, b_run_delta);
        bs.extend(map_builtins());
        bs
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        require_ra_to_r(src, "krawiec/monadic", "Fig. 11 (R{e})")
    }

    fn round_calls(&self) -> Option<&'static crate::interp::RoundCalls> {
        Some(&super::common::monad::ROUND_CALLS)
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        ra_transform(src, false)
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        ra_stated_types(src)
    }

    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        graph_of_state(m)
    }
}
