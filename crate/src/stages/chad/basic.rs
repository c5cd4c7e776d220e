//! `chad/basic`: CHAD as in §2 (Fig. 2), with the naive implementation of the linear types of
//! Fig. 4: dense cotangents and environment vectors `EV Γ` as tuples. Every variable reference
//! builds a one-hot tuple of |Γ| cells, every constant a zero tuple, every pair of subterms adds two
//! of them: correct, but not the complexity reverse AD should have (§3, Table 1).

use super::common::apis::Fig2;
use super::common::chad;
use super::common::runtime::{generic_builtins, Repr};
use super::common::source;
use super::common::*;
use crate::diag::Diagnostic;
use crate::features::Features;
use crate::interp::{Builtin, Machine, RunError};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};
use crate::value::Value;

pub struct Basic;

static INFO: StageInfo = StageInfo {
    id: "chad/basic",
    paper: PAPER,
    section: "§2, Figs. 2–4",
    title: "Basic CHAD: dense cotangents, environment vectors as tuples",
    explanation: "Each term Γ ⊢ t : τ becomes D_Γ[t] : D[τ]1 × (D[τ]2 → EV D[Γ]2): its value paired with a \
backpropagator that maps the result's cotangent to cotangents for every variable of the context at once. No tape, no \
IDs: the backpropagators are closures that mirror the program's syntax tree. A variable's backpropagator is the \
one-hot vector one_x, a let splits the body's vector into the context's part and the bound variable's cotangent, \
pairs and primitives add the vectors of their parts. With Fig. 4's naive linear types (dense tuples for τ ×_L σ and for \
EV Γ) a one-hot vector, a zero and a + all cost O(|Γ|) or the size of a type.",
    complexity: "O(|Γ| · T) and worse: one-hots, zeros and + of environment vectors are O(|Γ|), zeros of product types O(size of τ) (§3, Table 1).",
    accepts: ACCEPTS,
};

/// The most cells of dense environment vectors a program may build (a run budget, checked before
/// the run: past it the quadratic cost would take minutes).
pub const MAX_DENSE_CELLS: usize = 2_000_000;

impl Stage for Basic {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn supports(&self) -> Features {
        SUPPORTS
    }
    fn builtins(&self) -> Vec<Builtin> {
        generic_builtins()
    }
    /// Fig. 4's dense vectors make the run O(|Γ|) per variable reference: past a budget of cells
    /// the program is refused (with chad/sparse, which runs the same program text).
    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        let fo = first_order(src)?;
        let cells = source::dense_cells(&fo);
        if cells > MAX_DENSE_CELLS {
            let span = fo.program.def("main").map_or(crate::diag::Span::NONE, |d| d.span);
            return Err(Diagnostic::error(
                span,
                format!("this program's dense environment vectors would hold about {cells} cells, more than the {MAX_DENSE_CELLS} this stage allows (the `dense cells` budget): with Fig. 4's naive linear types every variable reference builds a one-hot vector of |Γ| cells and every constant a zero vector (§3, Table 1); chad/monadic and chad/mutable have no such cost"),
            ));
        }
        Ok(())
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let fo = first_order(src)?;
        let program = chad::program(&fo, &Fig2, src.output_type)?;
        output(program)
    }
    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        chad::stated(src)
    }
    fn run(&self, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
        run(m, cx, Repr::Dense, false, || {
            let _ = self.transform(cx.src);
        })
    }
    /// The backpropagator closure tree the traced run recorded (`bp_tree`).
    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<crate::interp::Graph> {
        graph(m)
    }
}
