//! `chad/sparse`: Step 1 (§4.1, Fig. 6). The program of `chad/basic`, unchanged; only the linear
//! types' implementation changes: `τ ×_L σ = 1 ⊔ (τ × σ)`, so every zero is one node, and `EV Γ` is a
//! persistent tree map `EMap Γ` (one-hots are singleton maps, + is union, split is pop).

use super::common::chad;
use super::common::runtime::{generic_builtins, Repr};
use super::common::*;
use crate::diag::Diagnostic;
use crate::features::Features;
use crate::interp::{Builtin, Machine, RunError};
use crate::ir::*;
use crate::stage::{Input, Output, RunCtx, Source, Stage, StageInfo};
use crate::value::Value;

pub struct Sparse;

static INFO: StageInfo = StageInfo {
    id: "chad/sparse",
    paper: PAPER,
    section: "§4.1, Fig. 6",
    title: "Sparsity: explicit zeros and environment vectors as persistent maps (program unchanged)",
    explanation: "The program text is exactly chad/basic's; the runtime of the linear types changes. A linear pair \
becomes 1 ⊔ (τ × σ), whose inl ⟨⟩ is a zero of any size in O(1), and EV Γ becomes EMap Γ, a persistent tree map \
from variables to cotangents where absent means zero: 0 is the empty map, one_x v the singleton {x: v}, + the union \
(adding on common keys), split the pop of the last variable. Zeros are now O(1), but union costs m·log(n/m + 1) and \
pop log n: on a sum of n variables the unions still cost O(n log n) in all (App. A shows no union can do better).",
    complexity: "O(T log T): zeros O(1); union and pop cost log factors, counted in map_log_steps (App. A: even a magical union leaves O(n log n)).",
    accepts: ACCEPTS,
};

impl Stage for Sparse {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn input(&self) -> Input {
        Input::After("chad/basic")
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
    /// The same program: §4.1 changes the representation, not the code.
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
        run(m, cx, Repr::Sparse, false, || {
            let _ = super::basic::Basic.transform(cx.origin);
        })
    }
    /// The backpropagator closure tree the traced run recorded (`bp_tree`).
    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<crate::interp::Graph> {
        graph(m)
    }
}
