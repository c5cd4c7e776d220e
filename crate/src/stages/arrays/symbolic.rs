//! `arrays/symbolic`: Delta extraction by simplification (§7.1) and symbolic evaluation without
//! sharing (§7.2): the reverse pass run on terms gives the gradient as a program, whose cotangent
//! terms are copied at every Add (exponential on E11's chain).

use super::common::core::gradient::{run_reporting_size, symbolic_output};
use super::common::PAPER;
use crate::diag::Diagnostic;
use crate::interp::{Machine, RunError};
use crate::ir::*;
use crate::stage::{wrapper_type, CounterInfo, Input, Output, RunCtx, Source, Stage, StageInfo};
use crate::value::Value;

pub struct Symbolic;

static INFO: StageInfo = StageInfo {
    id: "arrays/symbolic",
    paper: PAPER,
    section: "§7.1–7.2, Eqs. 6–7, Fig. 18",
    title: "The gradient as a program: Delta extraction, then a symbolic reverse pass (no sharing)",
    explanation: "dual-arrays' D program is simplified by the monad laws (§7.1): it always ends in Eq. 6's shape — \
the primal computation as lets, the IDs generated, and a symbolic Delta built only of Delta constructors (Scale \
fields are primal variables, index functions are terms). The reverse pass of §6.4 then runs on terms instead of \
arrays (§7.2): cotangents are programs built from +→, ·→, oneHot, replicate, scatter, gather, sumOuter, tr. The \
result is a gradient program, differentiated once and run at any input. Without sharing it is exponential: eval of \
Add copies its cotangent term into both children, so a chain of m doublings gives a term of 2^m leaves (E11).",
    complexity: "Gradient program size up to exponential in the program's depth (E11: 2^m).",
    accepts: "what arrays/dual-arrays accepts (a conditional on real arrays selects by B4's index into [u, v]: notes §8.3)",
};

pub static COUNTERS: &[CounterInfo] = &[CounterInfo { name: "gradient_size", about: "nodes of the gradient program (as printed)" }];

impl Stage for Symbolic {
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
        symbolic_output(src, false)
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
