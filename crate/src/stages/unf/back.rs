//! `unf/back`: `UNF⁻¹` of Huot & Shaikhha §4.4, Fig. 10, applied to `unf/target`'s Target UNF term:
//! back to a Target program with named lets and continuations, with Fig. 4's gradient wrapper. It
//! computes the same gradient as `unf/direct` (Prop. 6.14; tests/unf_route.rs checks it).
//!
//! Decisions (the note §3.6, "Recommended executable reading", is the algorithm; common/jacobian.rs
//! `back_chain`):
//! - a symbolic stack of atoms replaces Fig. 10's positional `x(n+1)`: a primitive without J binds only
//!   the slot it pushes (`let v = op(…)`, Fig. 10: "additionally projects to the last element"), var
//!   and constants push an atom with no code, proj and pair move no primal values (`UNF⁻¹(proj)` and
//!   `UNF⁻¹(e1 ; e2)` are too vague to implement literally when a step adds or removes several slots);
//! - `UNF⁻¹(e1 ∘ e2) = fun (y1, …, ym) → UNF⁻¹(e1)(UNF⁻¹(e2)[yi/xi])` becomes one continuation per
//!   primitive, `Yk = fun (y1, …, ym) → Y(k-1)(J^T p …)`;
//! - the (†) fixes: `op(x(n+1), …, x(n+m))`, and reduce's unbound `y1` is its initial value; the (‡)
//!   fix: J^T map2's array cotangents bind both primal elements and add to the cotangents already
//!   there (the Fig. 5 form), and J^T reduce adds likewise;
//! - the lets J^T reduce needs at the primal context (A0 … A3) are computed in the forward pass,
//!   before the continuation, as Fig. 5 does (the note's open point 17: eager);
//! - the input: the source, whose UNF term is re-derived by the shared `source_unf` (the same function
//!   `unf/source` and `unf/target` use, so the term is `unf/target`'s), rather than a stage output.

use super::common::jacobian::{back_chain, BackChain};
use super::common::*;
use crate::build::*;
use crate::diag::Diagnostic;
use crate::features::Features;
use crate::interp::{Graph, Machine, RunError};
use crate::ir::*;
use crate::value::Value;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};

pub struct UnfBack;

static INFO: StageInfo = StageInfo {
    id: "unf/back",
    paper: PAPER,
    section: "§4.4, Fig. 10",
    title: "UNF⁻¹: back to a Target program of lets and continuations",
    explanation: "UNF⁻¹ turns the Target UNF term back into a Target program with variables. Primitives \
without a Jacobian bind only the value they push (an A-normal form of the primal: UNF followed by UNF⁻¹ \
is a version of the ANF transformation); each F(p, Jᵀp) becomes a continuation Yk that adds the \
cotangent of p's result into the cotangents of p's arguments and calls the one before it. The result is \
the program Fig. 5's direct macro produces (Ex. 3.1), up to naming and the order of the lets, and it \
computes the same gradient (Prop. 6.14).",
    complexity: "O(n · |Γ|) as printed: every continuation copies the whole stack of cotangents (§5.1's partial evaluation removes it).",
    accepts: ACCEPTS,
};

impl Stage for UnfBack {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn supports(&self) -> Features {
        supports_source()
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        accepts_source(src)
    }

    /// `grad (s, dt) = let p = s in let Id = … in <lets> in (r, Yn(0_Γ, dt))` (Fig. 4's ∇_Γ).
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let (p, pat, u, mut fr) = source_unf(src)?;
        let BackChain { binds, result, y } = back_chain(&u, &mut fr)?;
        let (s, dt) = (fr.name("s"), fr.name("dt"));
        let gs: Vec<Name> = (0..u.input.len()).map(|i| fr.name(&format!("g{}", i + 1))).collect();
        let zeros: Vec<Expr> = u.input.iter().map(|sl| zero(&sl.ty, var(&sl.name), &mut fr)).collect();
        let grads = call_last(&y, zeros, &dt, &gs, result, &pat);
        let body = binds.into_iter().rev().fold(grads, |acc, (p, e)| let_(p, e, acc));
        Ok(Output::from(wrapper_program(&p, &s, &dt, let_(pat, var(&s), body), fr.next_id)))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        grad_type(src)
    }

    /// The wrapper, with every continuation call recorded (`line::run`).
    fn run(&self, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
        line::run(m, cx)
    }

    /// The line of continuations Y_k → … → Id.
    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        line::graph(m)
    }
}
