//! `arrays/onehot`: dual arrays with Index transposed to a one-hot array (§4.4). The translation and
//! Delta are `arrays/build1`'s (common/naive); the reverse pass is the paper's pure one, in which the
//! transpose of `Index d i` is a dense one-hot array shaped like d's value, added into d's
//! accumulator: O(n) per index, so O(n²) on the dot product. `ct_cells` counts that work.

use super::common::naive::delta::delta_builtins;
use super::common::naive::eval::{eval_builtins, graph, Mode};
use super::common::naive::lower::lower;
use super::common::naive::translate::{output, stated_types, DualArrays};
use super::common::naive::{accepts_dual_arrays, accepts_source, lowered_views};
use super::common::PAPER;
use crate::diag::Diagnostic;
use crate::interp::{Builtin, Graph, Machine};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};

pub struct OneHot;

static INFO: StageInfo = StageInfo {
    id: "arrays/onehot",
    paper: PAPER,
    section: "§4.4",
    title: "Dual arrays: the transpose of Index is a one-hot array",
    explanation: "The same dual arrays and Delta as arrays/build1, with the reverse pass the paper's pure eval must \
run: the forward derivative of a ! i, Index d i, is innocuous, but its transpose takes the cotangent of one element \
and has to return a cotangent for the whole array d, a one-hot array [0, …, 0, c, 0, …, 0] shaped like d's value, \
which is then added to d's accumulator. An index per element, as in the dot product or sumOuter (build1 n (λi. a ! i)) \
(sum (build n (λi. a ! i)) here), makes n one-hots of size n: O(n²) cotangent work where O(n) would do. The \
counter ct_cells counts the reals the reverse pass writes (every cell of a one-hot, of an addition into an \
accumulator, of a scale or a replicate): 4n² + 5n + 1 on the dot product. The paper rejects sparse cotangents \
(dense in practice, and no help with the Delta explosion) and mutable accumulators (impure, same): the fix is the \
bulk-operation transform of §5, where the index becomes a gather whose transpose is one scatter.",
    complexity: "reverse O(Σ over index operations of the indexed array's size): O(n²) on the dot product (4n² + 5n + 1 cells written).",
    accepts: "the whole language, with arrays of reals, of arrays of reals, or of discrete values (no arrays of tuples, sums or functions)",
};

impl Stage for OneHot {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let mut bs = delta_builtins();
        bs.extend(eval_builtins(Mode::OneHot));
        bs.extend(crate::kit::arrays::monadic_builtins());
        bs
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        accepts_source(src)?;
        accepts_dual_arrays(src)
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let lowered = lower(src)?;
        output(src, &lowered, &DualArrays, true, lowered_views(&lowered))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        stated_types(src, true)
    }

    fn graph(&self, m: &mut Machine, _: &RunCtx) -> Option<Graph> {
        graph(m)
    }
}
