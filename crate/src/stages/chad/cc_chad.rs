//! `chad/cc-chad`: CHAD of the closure-converted program (App. C), with the monadic rules (Fig. 7)
//! run on the mutable accumulation of `chad/mutable` (§5). Closed code `τ →□ σ` has the trivial
//! cotangent `D[τ →□ σ]2 = 1`; its derivative `D[τ]1 →□ (D[σ]1 × (D[σ]2 → D[τ]2))` is the code
//! differentiated in the context of its parameter only, so captured variables get their cotangents
//! through the parameter's, and an application backpropagates the callee's body once.

use super::common::chad;
use super::common::runtime::{generic_builtins, Repr};
use super::common::source::closure_converted;
use super::common::*;
use crate::diag::Diagnostic;
use crate::features::Features;
use crate::interp::{Builtin, Machine, RunError};
use crate::ir::*;
use crate::stage::{Input, Output, RunCtx, Source, Stage, StageInfo};
use crate::value::Value;

pub struct CcChad;

static INFO: StageInfo = StageInfo {
    id: "chad/cc-chad",
    paper: PAPER,
    section: "App. C",
    title: "CHAD of the closure-converted program: function cotangents are 1, each body backpropagated once",
    explanation: "The closure-converted program (chad/cc) has only closed functions τ →□ σ, whose captured \
variables are part of their argument. So a function needs no cotangent of its own, D[τ →□ σ]2 = 1, and its \
derivative is local: D[τ →□ σ]1 = D[τ]1 →□ (D[σ]1 × (D[σ]2 → D[τ]2)), the code's body differentiated in the \
context of its own parameter (each code f becomes Df). An application calls Df on the argument and gets the \
result with a backpropagator, which runs once and returns the argument's cotangent (captured variables \
included): D_Γ[t s] = let ⟨x, _⟩ = D_Γ[t] in let ⟨y, y'⟩ = D_Γ[s] in let ⟨z, z'⟩ = x y in ⟨z, λv. y' (z' v)⟩. \
The backpropagator of a closed function runs its own accumulator over its parameter (runOpen/runClose, `run` \
written out as scope is), on the mutable cells of chad/mutable.",
    complexity: "O(T + |Γ| + size d), as chad/mutable: every body's backpropagator runs once per call (body_backprops).",
    accepts: ACCEPTS,
};

/// What the pipeline's failed check of the output says: any failure but a budget stop (which the
/// pipeline reports as one) is the open parameter type this stage refuses.
fn refused(d: &Diagnostic) -> Option<Diagnostic> {
    if d.message.starts_with("stopped: ") {
        return None;
    }
    Some(Diagnostic::error(d.span, format!("after closure conversion a closed code's parameter type is left open (a closure it only passes on, typed generically), so its cotangent type is not known here ({}); inlining first (chad/mutable) handles this program", d.message)).refused())
}

impl Stage for CcChad {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn input(&self) -> Input {
        Input::After("chad/cc")
    }
    fn supports(&self) -> Features {
        SUPPORTS
    }
    fn builtins(&self) -> Vec<Builtin> {
        generic_builtins()
    }
    /// The closure conversion may leave a code's parameter type open (a closure that code only
    /// passes on, typed generically); read as R, a closure there has no one cotangent type, and
    /// the derivative does not type-check: such programs are refused by the pipeline's check of
    /// the output (`refused_by_check`), the only check (issue 14 item 4: this transform checked its
    /// output too, beside its input, 531 MiB live on a 10^5-line program against the 512 budget).
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let (fo, codes, consts) = closure_converted(src)?;
        let program = chad::program_cc(&fo, &codes, &consts, &super::common::apis::Fig7, src.output_type)?;
        // the closure-converted program goes before the output is returned (and checked)
        drop((fo, codes, consts));
        output(program)
    }
    /// (its traced run transforms its input again, for the backpropagators' names: `run`)
    fn run_reads_input_only_traced(&self) -> bool {
        true
    }
    fn refused_by_check(&self, why: &Diagnostic) -> Option<Diagnostic> {
        refused(why)
    }
    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        chad::stated(src)
    }
    fn run(&self, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
        run(m, cx, Repr::Sparse, true, || {
            let _ = self.transform(cx.src);
        })
    }
    /// The backpropagator closure tree the traced run recorded (`bp_tree`).
    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<crate::interp::Graph> {
        graph(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Span;

    /// A check that ran out of memory is a budget stop (the pipeline gives it that status), not
    /// this stage's refusal; a check that failed otherwise is the refusal.
    #[test]
    fn a_budget_stop_in_the_check_is_not_a_refusal() {
        let stop = Diagnostic::error(Span::NONE, "stopped: the memory budget (512 MiB, `--max-mb`) ran out while type-checking");
        assert!(refused(&stop).is_none());
        let open = refused(&Diagnostic::error(Span::NONE, "cannot unify R with a → b")).expect("a refusal");
        assert!(open.refused && open.message.starts_with("after closure conversion"), "{}", open.message);
    }
}
