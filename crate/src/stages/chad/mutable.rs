//! `chad/mutable`: §5, Table 2. The program of `chad/monadic`, unchanged; the accumulation monad
//! runs over a mutable stack of cells (`EArr Γ`, one per variable in scope) instead of a persistent
//! map: `scope` pushes a zero cell and pops it, `one` modifies a cell in place, all O(1).

use super::common::chad;
use super::common::runtime::{generic_builtins, Repr};
use super::common::*;
use crate::diag::Diagnostic;
use crate::features::Features;
use crate::interp::{Builtin, Machine, RunError};
use crate::ir::*;
use crate::stage::{Input, Output, RunCtx, Source, Stage, StageInfo};
use crate::value::Value;

pub struct Mutable;

static INFO: StageInfo = StageInfo {
    id: "chad/mutable",
    paper: PAPER,
    section: "§5, Table 2",
    title: "Mutable accumulation: a stack of cells, every monad operation O(1) (program unchanged)",
    explanation: "The program text is exactly chad/monadic's; the accumulation monad's implementation changes. The \
persistent map becomes a mutable array of cells EArr Γ, one per variable in scope, used linearly: run allocates the \
cells of the inputs at zero, scope pushes a zero cell for the bound variable and pops it after the body's \
backpropagator, one adds into a cell in place. Each is O(1), so the derivative's cost is within a constant factor of \
the program's, plus |Γ| for run and the size of the output cotangent: the paper's complexity criterion (Eq. (3)).",
    complexity: "O(T + |Γ| + size d) (Eq. (3); the Agda proof's constants: 5 + 31·cost(t) + size(d) + 4·|Γ|). The counters eq3_c (the constant this run needs, in interpreter steps) and eq3_holds measure it.",
    accepts: ACCEPTS,
};

impl Stage for Mutable {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn input(&self) -> Input {
        Input::After("chad/monadic")
    }
    /// (its run reads the user's program (`RunCtx::origin`), not its input: the input may go once transformed)
    fn run_reads_input(&self) -> bool {
        false
    }
    fn supports(&self) -> Features {
        SUPPORTS
    }
    fn builtins(&self) -> Vec<Builtin> {
        generic_builtins()
    }
    /// The same program: §5 changes the monad's implementation, not the code.
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        self.transform_keeping(src.program.clone(), src)
    }
    fn passes_input_through(&self) -> bool {
        true
    }
    fn transform_keeping(&self, program: Program, _src: &Source) -> Result<Output, Diagnostic> {
        output(program)
    }
    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        chad::stated(src)
    }
    fn run(&self, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
        run(m, cx, Repr::Sparse, true, || {
            let _ = super::monadic::Monadic.transform(cx.origin);
        })
    }
    /// The backpropagator closure tree the traced run recorded (`bp_tree`).
    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<crate::interp::Graph> {
        graph(m)
    }
}
