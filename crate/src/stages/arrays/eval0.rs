//! `arrays/eval0`: Smeding et al. §2.2–2.3, the naive transform D: dual numbers with a Delta tree, evaluated forwards once per input.

use super::common::scalar::{evals, program, runtime};
use crate::diag::Diagnostic;
use crate::interp::{Builtin, Graph, Machine};
use crate::ir::Type;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};

pub struct Eval0;

static INFO: StageInfo = StageInfo {
    id: "arrays/eval0",
    paper: super::common::PAPER,
    section: "§2.2–2.3, Figs. 1–2, Eq. 2",
    title: "The naive transform D: dual numbers with a Delta tree, evaluated forwards once per input",
    explanation: "Figs. 1–2: every real is paired with a Delta, a defunctionalised linear map (Zero | Input i | Add d1 d2 | \
Scale r d): D[R] = (R, Delta), a constant gets Zero, x1 + x2 builds Add d1 d2, x1 × x2 builds Add (Scale x2 d1) \
(Scale x1 d2), any other primitive the Scales of its partial derivatives, and everything else (pairs, λ, \
application, let, if) is translated structurally. The primal is computed as before. The wrapper names each real \
of the input (named_S: (r, Input i), i = 0, 1, … left to right), runs D[t], and hands the Delta d to eval. This \
stage's eval is eval0 d ε, the forward derivative in direction ε (Zero ↦ 0, Input i ↦ ε_i, Add ↦ sum, Scale r ↦ \
r ·), run once per input with ε the one-hot vectors (Eq. 2): n passes over the whole Delta for n inputs. The \
Delta is a DAG in memory but every pass walks it as a tree. The same program text runs under eval1, eval2 and \
eval3 (only eval's runtime changes).",
    complexity: "n passes, each O(size of the Delta unfolded into a tree).",
    accepts: "§2's scalar language (no arrays); main : S → T with S first-order and T tuples of reals, integers, booleans (App. A: one evaluation per real of T)",
};

impl Stage for Eval0 {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn builtins(&self) -> Vec<Builtin> {
        let mut bs = runtime::tree_builtins();
        bs.push(runtime::eval_builtin("eval", evals::b_eval0));
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
