//! `arrays/eval2`: Smeding et al. §2.4, eval2: the Cayley transform, one accumulator threaded through.

use super::common::scalar::{evals, program, runtime};
use crate::diag::Diagnostic;
use crate::interp::{Builtin, Graph, Machine};
use crate::ir::Type;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};

pub struct Eval2;

static INFO: StageInfo = StageInfo {
    id: "arrays/eval2",
    paper: super::common::PAPER,
    section: "§2.4",
    title: "eval2: the Cayley transform, one accumulator threaded through",
    explanation: "eval2 d tg = tg + eval1 d threads one accumulator through the walk instead of returning vectors, the \
difference-list (Cayley) trick: Zero is the identity, Input i adds 1 at position i, Add d1 d2 is eval2 d2 ∘ \
eval2 d1, all O(1). A Scale r d still needs the vector of d alone to scale it: tg + r · eval2 d 0⃗, O(n) (the \
paper prints (r·) ∘ eval2 d, which also scales tg and is right only when tg = 0⃗: erratum, note §8). Counter \
vector_elem_ops: n per Scale. Same program as arrays/eval0.",
    complexity: "O(size of the Delta unfolded into a tree + n · number of Scale visits).",
    accepts: "§2's scalar language (no arrays); main : S → T with S first-order and T tuples of reals, integers, booleans (App. A: one evaluation per real of T)",
};

impl Stage for Eval2 {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn builtins(&self) -> Vec<Builtin> {
        let mut bs = runtime::tree_builtins();
        bs.push(runtime::eval_builtin("eval", evals::b_eval2));
        bs
    }
    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        program::require_scalar(src, INFO.id)
    }
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        program::tree_transform(src)
    }
    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        program::stated_types(src, false)
    }
    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        runtime::graph(m)
    }
}
