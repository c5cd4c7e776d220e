//! `arrays/share-to-let`: shareToLet (§7.4, Fig. 20) over symbolic-share's gradient program, and
//! the final wrapper (§7.5, Fig. 21): `let primal lets in (primal, let shared_i = … in gradient)`, a
//! program differentiated once and then run at any input point.

use super::common::core::gradient::{run_reporting_size, share_to_let_output};
use super::common::PAPER;
use super::symbolic::COUNTERS;
use crate::diag::Diagnostic;
use crate::interp::{Machine, RunError};
use crate::ir::*;
use crate::stage::{PageHints, wrapper_type, CounterInfo, Input, Output, RunCtx, Source, Stage, StageInfo};
use crate::value::Value;

pub struct ShareToLet;

static INFO: StageInfo = StageInfo {
    id: "arrays/share-to-let",
    paper: PAPER,
    section: "§7.4–7.5, Figs. 20–21",
    title: "shareToLet and the final wrapper: a gradient program with ordinary lets",
    explanation: "Global sharing is turned into local lets (Fig. 20): unshare walks the gradient terms with a map from \
share IDs to fresh variables, replacing the first occurrence of share i t by a variable bound to t (t itself \
unshared first, threading the map: an erratum of the figure) and every later one by the same variable; stackLets \
binds them, lowest ID outermost, which respects their dependencies since IDs grow monotonically. The final wrapper \
(Fig. 21) is bot, then D with the inputs as Input nodes, Delta extraction, the symbolic reverse pass with share, and \
shareToLet: one program computing the primal and the gradient, made once from the source and run at every input \
point (the compile-once, run-many split of §7).",
    complexity: "The gradient program runs in time proportional to the primal's (each shared cotangent once).",
    accepts: "what arrays/symbolic-share accepts",
};

impl Stage for ShareToLet {
    /// §7.3–7.4's global shares, marked per ID in the page.
    fn page(&self) -> PageHints {
        PageHints { marks_shares: true, ..PageHints::default() }
    }
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn input(&self) -> Input {
        Input::After("arrays/symbolic-share")
    }
    /// (its run reads only its own output: the input may go once transformed)
    fn run_reads_input(&self) -> bool {
        false
    }
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        share_to_let_output(src)
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
