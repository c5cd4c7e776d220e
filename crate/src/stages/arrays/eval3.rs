//! `arrays/eval3`: Smeding et al. §2.4, the reverse accumulating evaluator on the Delta tree.

use super::common::scalar::{evals, program, runtime};
use crate::diag::Diagnostic;
use crate::interp::{Builtin, Graph, Machine};
use crate::ir::Type;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};

pub struct Eval3;

static INFO: StageInfo = StageInfo {
    id: "arrays/eval3",
    paper: super::common::PAPER,
    section: "§2.4, Fig. 4(c)",
    title: "eval3: the cotangent pushed inwards, reverse order, but the Delta walked as a tree",
    explanation: "eval2 still pays O(n) at every Scale. Pushing the scale factors inwards as an accumulating \
parameter c gives eval3 c d tg = tg + c · eval1 d: Scale r d continues with c · r, Input i adds c at position i, \
Add d1 d2 does d1 then d2, so every visit is O(1) and the products are formed in the reverse order \
((r1·r2)·…)·rn — c is the incoming cotangent and this is reverse mode. Called as eval3 c d 0⃗ on the same program \
as arrays/eval0. But D's Delta is a DAG in memory that eval3 walks as a tree: a node is visited once per path to it. \
On the sharing chain P1 (let x1 = x + x in … xn = x(n−1) + x(n−1)) that is 2^(n+1) − 1 visits; on Fig. 4 \
12 visits of its 7 nodes, exp and x three times each (counters eval_visits, every constructor, and op_visits, \
Fig. 4's nodes).",
    complexity: "O(size of the Delta unfolded into a tree): up to O(2^T) for a program of T operations.",
    accepts: "§2's scalar language (no arrays); main : S → T with S first-order and T tuples of reals, integers, booleans (App. A: one evaluation per real of T)",
};

impl Stage for Eval3 {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn builtins(&self) -> Vec<Builtin> {
        let mut bs = runtime::tree_builtins();
        bs.push(runtime::eval_builtin("eval", evals::b_eval3));
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
