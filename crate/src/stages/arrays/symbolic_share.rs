//! `arrays/symbolic-share`: symbolic evaluation with `share` (§7.3, Fig. 19): the reverse pass of
//! `arrays/symbolic` with each cotangent that eval duplicates (at Add and LitArray) wrapped in
//! `share i`; each i is computed once (the program is printed with `shared i` after the first).

use super::common::core::gradient::{run_reporting_size, symbolic_output};
use super::common::PAPER;
use crate::diag::Diagnostic;
use crate::interp::{Machine, RunError};
use crate::ir::*;
use crate::stage::{PageHints, wrapper_type, CounterInfo, Input, Output, RunCtx, Source, Stage, StageInfo};
use crate::value::Value;

pub struct SymbolicShare;

static INFO: StageInfo = StageInfo {
    id: "arrays/symbolic-share",
    paper: PAPER,
    section: "§7.3, Fig. 19",
    title: "Symbolic evaluation with share: each duplicated cotangent computed once",
    explanation: "The symbolic reverse pass of arrays/symbolic copies a cotangent term wherever eval duplicates it \
(Add sends c to both children, LitArray indexes c once per element). Fig. 19 adds global sharing to the term \
language: share i t denotes the same value wherever ID i occurs, computed once (an interpreter memoises it), and eval \
wraps each duplicated cotangent in a fresh share (the optimistic placement; trivial cotangents — variables, constants, \
shares — are not wrapped, notes §8.10). IDs are generated monotonically, so a share only refers to lower IDs. The \
program is printed with the first occurrence of each share whole and later ones as shared i (each is read after it \
is computed, left to right): its size is that of the gradient DAG, linear where arrays/symbolic's is exponential.",
    complexity: "Gradient program size linear in the Delta (E11: O(m)), each share computed once.",
    accepts: "what arrays/dual-arrays accepts (a conditional on real arrays selects by B4's index into [u, v]: notes §8.3)",
};

use super::symbolic::COUNTERS;

impl Stage for SymbolicShare {
    /// §7.3–7.4's global shares, marked per ID in the page.
    fn page(&self) -> PageHints {
        PageHints { marks_shares: true, ..PageHints::default() }
    }
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn input(&self) -> Input {
        Input::After("arrays/dual-arrays")
    }
    /// (its run reads only its own output: the input may go once transformed)
    fn run_reads_input(&self) -> bool {
        false
    }
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        symbolic_output(src, true)
    }
    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        vec![wrapper_type(src)]
    }
    fn counters(&self) -> &'static [CounterInfo] {
        COUNTERS
    }
    fn run(&self, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
        run_reporting_size(m, cx)
    }
}
