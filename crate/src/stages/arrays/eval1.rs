//! `arrays/eval1`: Smeding et al. §2.4, eval1: all input directions at once, a vector of length n at every node.

use super::common::scalar::{evals, program, runtime};
use crate::diag::Diagnostic;
use crate::interp::{Builtin, Graph, Machine};
use crate::ir::Type;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};

pub struct Eval1;

static INFO: StageInfo = StageInfo {
    id: "arrays/eval1",
    paper: super::common::PAPER,
    section: "§2.4",
    title: "eval1: all input directions at once, a vector of length n at every node",
    explanation: "eval1 d returns the whole gradient vector: Zero ↦ 0⃗, Input i ↦ the one-hot vector at i, Add ↦ the sum of the \
two vectors, Scale r ↦ r times the vector. One walk instead of n, but every node makes, adds or scales a vector \
of length n (counter vector_elem_ops): the cost moves from the number of passes into the vectors. Same program as \
arrays/eval0; the result is multiplied by the output cotangent.",
    complexity: "O(n · size of the Delta unfolded into a tree).",
    accepts: "§2's scalar language (no arrays); main : S → T with S first-order and T tuples of reals, integers, booleans (App. A: one evaluation per real of T)",
};

impl Stage for Eval1 {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn builtins(&self) -> Vec<Builtin> {
        let mut bs = runtime::tree_builtins();
        bs.push(runtime::eval_builtin("eval", evals::b_eval1));
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
