//! `chad/monadic`: Step 2 (§4.2, Fig. 7). Backpropagators become `D[τ]2 → EVM D[Γ]2 1` over the
//! local accumulation monad: environment vectors are never built or added, a variable's
//! backpropagator adds its cotangent into the variable's entry (`one`), a let opens the bound
//! variable's entry for the body's backpropagator and closes it (`scope`), and `run` starts from
//! zeros. Here `EVM Γ τ = EMap Γ → τ × EMap Γ` on the persistent map of §4.1 (sparse cotangents).
//! The accumulation tape (scope push, one += , scope pop) is the stage's trace.

use super::common::apis::Fig7;
use super::common::chad;
use super::common::runtime::{generic_builtins, Repr};
use super::common::*;
use crate::diag::Diagnostic;
use crate::features::Features;
use crate::interp::{Builtin, Machine, RunError};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};
use crate::value::Value;

pub struct Monadic;

static INFO: StageInfo = StageInfo {
    id: "chad/monadic",
    paper: PAPER,
    section: "§4.2, Fig. 7",
    title: "Monadic lifting: backpropagators accumulate into one environment (local accumulation monad)",
    explanation: "Environment vectors are only ever added, additions commute, and old versions are never needed: so \
one accumulator is threaded through the backward pass instead (state passing). Backpropagators return EVM Γ 1: \
0_{EV Γ} becomes return ⟨⟩, + of environment vectors becomes sequencing (do a; b), one_x adds its cotangent into x's \
entry in place, and split becomes scope, which opens the bound variable's entry (push0), runs the body's \
backpropagator and closes the entry (pop), handing back its value; scope is printed as this definition (Table 2). The wrapper runs the monad from zeros. On the persistent map of §4.1 every \
one and scope still costs a log factor; cotangent + is already fine by amortisation (§4.3).",
    complexity: "O(T log |Γ|): each one and scope costs ⌈log2 n⌉ map steps; + amortised against the size of the cotangent (§4.3).",
    accepts: ACCEPTS,
};

impl Stage for Monadic {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn supports(&self) -> Features {
        SUPPORTS
    }
    fn builtins(&self) -> Vec<Builtin> {
        generic_builtins()
    }
    /// The paper's first-order language: what the chain's `accepts` checks, asked again only where
    /// the chain did not ask it (a program with arrays, refused here: §7 is chad/arrays).
    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        if super::chain_asks_first_order(src) {
            return Ok(());
        }
        first_order(src).map(|_| ())
    }
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let fo = first_order(src)?;
        let program = chad::program(&fo, &Fig7, src.output_type)?;
        output(program)
    }
    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        chad::stated(src)
    }
    fn run(&self, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
        run(m, cx, Repr::Sparse, false, || {
            let _ = self.transform(cx.src);
        })
    }
    /// The backpropagator closure tree the traced run recorded (`bp_tree`).
    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<crate::interp::Graph> {
        graph(m)
    }
}
