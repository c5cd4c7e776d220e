//! `arrays/build1`: dual arrays with a Build1 Delta constructor (§4.2–4.3). An array of reals is
//! paired with one Delta, `D[Array sh R] = (Array sh R, Delta sh)`, with a Delta constructor per
//! array operation (Index, SumOuter, Replicate, LitArray) and, for build, the only candidate the
//! paper finds: `Build1 [d0, …, dk-1]`, the lambda's Delta for each index. The D rule for build is
//! the notes' §8.17 (the paper gives only the constructor). The reverse pass adds an Index's
//! cotangent in place, so this stage's cost is its Delta's size alone: the one-hot problem is
//! `arrays/onehot`'s.

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

pub struct Build1;

static INFO: StageInfo = StageInfo {
    id: "arrays/build1",
    paper: PAPER,
    section: "§4.2–4.3",
    title: "Dual arrays with a Build1 constructor: no fewer Delta nodes",
    explanation: "Arrays become differentiable objects in themselves: D[Array sh R] = (Array sh R, Delta sh), one \
Delta per array, with a constructor per array operation (Index for !, SumOuter for sum, Replicate, and LitArray for \
a literal), each the operation's own forward derivative since they are linear. The surface operations are first \
lowered to build, !, length, sum and replicate (map f a is build (length a) (λi. f (a ! i)), and so on: the \
'lowered source' view). That leaves build, whose derivative depends on the path each call of its lambda took: \
the best Delta can do is Build1, which records the lambda's Delta for each index (§4.3). So the Delta graph still \
holds every element's Share (Add (Scale …) (Scale …)), now under a Build1, plus an Index per element read: as many \
nodes as arrays of dual numbers, only organised differently (footnote 21: effectively (Array sh R, Array sh Delta)). \
Here the reverse pass adds an Index's cotangent in place (the mutable accumulator §4.4 mentions), so the cost \
shown is the Delta's size alone; arrays/onehot transposes Index as the paper's pure reverse pass must.",
    complexity: "forward and reverse O(number of scalar operations): the dot product makes 6n+4 Delta constructors (4n from the lambda as before, 2n Index, a Build1 and a SumOuter with their Shares).",
    accepts: "the whole language, with arrays of reals, of arrays of reals, or of discrete values (no arrays of tuples, sums or functions)",
};

impl Stage for Build1 {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let mut bs = delta_builtins();
        bs.extend(eval_builtins(Mode::InPlace));
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
