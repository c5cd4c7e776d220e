//! `arrays/share`: Smeding et al. §2.5–2.7, Figs. 3, 5 and 6: D with IdGen and Share, the
//! sharing-aware reverse pass and the wrapper.

use super::common::scalar::{backprop, program, runtime};
use crate::diag::Diagnostic;
use crate::interp::{Builtin, Graph, Machine};
use crate::ir::Type;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};

pub struct Share;

static INFO: StageInfo = StageInfo {
    id: "arrays/share",
    paper: super::common::PAPER,
    section: "§2.5–2.7, Figs. 3, 5, 6, Fig. 4(d)",
    title: "D with IdGen and Share, and the sharing-aware reverse pass",
    explanation: "eval3 lost sharing because nothing in a Delta tells that two subterms are one object. Fig. 3 \
makes D monadic in IdGen, a state monad of increasing IDs (D[σ → τ] = D[σ] → IdGen D[τ]): every primitive's \
result is wrapped as Share id d with a fresh id drawn after its operands' (so every ID inside d is smaller, \
Invariant 1; one ID names one object, Invariant 2; both checked as the Delta is built). The reverse pass (Fig. 5) \
keeps three maps: eval4 c (Share i d) does not descend but adds c to accum i and files d in dfrag i; backprop4 \
then repeatedly pops the largest pending ID and evaluates its fragment once with all the cotangent that has \
arrived — sharing in the primal becomes addition in the dual. Inputs add into grad. The wrapper (Fig. 6) names \
the input's reals (named_S), runs D[t] with runIdGen, runs reversePass with the output cotangent and rebuilds the \
input's shape (reconstruct_S). On Fig. 4 the 7 nodes are visited once each (op_visits), popping IDs 6, 5, 4, 3, \
2, 1; on the chain P1, 3n + 1 eval calls (eval_visits) instead of 2^(n+1) − 1. The stepper shows the accum, \
dfrag and grad maps after each step.",
    complexity: "O(T log T): one visit per operation, a map operation (log) per Share.",
    accepts: "§2's scalar language (no arrays); main : S → T with S first-order and T tuples of reals, integers, booleans (App. A: one evaluation per real of T)",
};

impl Stage for Share {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn builtins(&self) -> Vec<Builtin> {
        let mut bs = runtime::share_builtins();
        bs.push(runtime::eval_builtin("reversePass", backprop::b_reverse_pass));
        bs
    }
    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        program::require_scalar(src, INFO.id)
    }
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        program::share_transform(src)
    }
    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        program::stated_types(src, true)
    }
    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        runtime::graph(m)
    }
}
