//! `arrays/dual-numbers`: arrays of dual numbers (§4.1, Eqs. 3–4). D with IdGen and Share (Fig. 3)
//! extended to arrays "in the obvious way": `D[Array sh R] = Array sh D[R]`, `build`, `!` and every
//! other array operation translated structurally (their functions monadically lifted: `buildM`,
//! `mapM`, …), `sum` by DsumOuter (Eq. 3). Every scalar operation inside a build makes its own Delta
//! nodes: the dot product makes 5n+1 (footnote 18), the Delta explosion.

use super::common::naive::delta::{delta_builtins, dsum_outer_builtin};
use super::common::naive::eval::{eval_builtins, graph, Mode};
use super::common::naive::translate::{output, stated_types, Fig3};
use super::common::naive::accepts_source;
use super::common::PAPER;
use crate::diag::Diagnostic;
use crate::interp::{Builtin, Graph, Machine};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};

pub struct DualNumbers;

static INFO: StageInfo = StageInfo {
    id: "arrays/dual-numbers",
    paper: PAPER,
    section: "§4.1, Eqs. 3–4 (with Figs. 3, 5, 6)",
    title: "Arrays of dual numbers: the Delta explosion",
    explanation: "The scalar algorithm of §2 (D with IdGen and Share, Fig. 3; the sharing-aware reverse pass, Fig. 5; \
the wrapper, Fig. 6) extended to arrays the obvious way: an array of reals becomes an array of dual numbers, \
D[Array sh R] = Array sh D[R]. build and ! only move elements around, so they translate to themselves (Eq. 4: \
build's function is monadically lifted and its results sequenced, buildM here; map, fold and the scans likewise); \
sum must add the elements' Deltas, DsumOuter (Eq. 3): one Share over an Add per element. Derivatives are right \
and the complexity is right, but every scalar operation inside a build makes its own Delta nodes: the dot \
product of length n makes 5n+1 Delta constructors (footnote 18: 4n from the lambda, Share (Add (Scale …) \
(Scale …)) per element, and n+1 for DsumOuter's Adds and Share), all interpreted one by one in the reverse pass.",
    complexity: "forward and reverse O(number of scalar operations): the Delta has a node per scalar operation (5n+1 on the dot product), none per array operation.",
    accepts: "the whole language: closures, recursion, tuples, sums, if, integers, every array operation",
};

impl Stage for DualNumbers {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let mut bs = delta_builtins();
        bs.push(dsum_outer_builtin());
        bs.extend(eval_builtins(Mode::InPlace));
        bs.extend(crate::kit::arrays::monadic_builtins());
        bs
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        accepts_source(src)
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        output(src, src.program, &Fig3, false, vec![])
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        stated_types(src, false)
    }

    fn graph(&self, m: &mut Machine, _: &RunCtx) -> Option<Graph> {
        graph(m)
    }
}
