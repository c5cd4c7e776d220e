//! `arrays/dual-arrays`: D′ and the dual-arrays transform D (§6.1–6.3, Figs. 12–15) over bot's
//! output, the forward run building an array-level Delta DAG, and the array reverse pass (§6.4,
//! Figs. 16–17) with its wrapper (§6.5). The backprop loop's steps are the trace.

use super::common::core::{delta, dual};
use super::common::PAPER;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Graph, Machine};
use crate::ir::*;
use crate::stage::{wrapper_type, Beside, CounterInfo, Input, PageHints, Output, RunCtx, Source, Stage, StageInfo};

pub struct DualArrays;

static INFO: StageInfo = StageInfo {
    id: "arrays/dual-arrays",
    paper: PAPER,
    section: "§6, Figs. 12–17",
    title: "Dual arrays: one Delta node per array operation, and an array reverse pass",
    explanation: "bot's output is differentiated with dual arrays: every term with real elements becomes a pair of \
its primal array and one Delta for the whole array (Fig. 12: Index, SumOuter, Gather, Scatter, LitArray, Replicate, \
Transpose beside Zero, Input, Add, Scale, Share), built in the IdGen monad so that every result is shared under a \
fresh ID (Figs. 14–15). Discrete terms (indexes, sizes, index functions) are kept as they are, reading the primals \
of dual variables (D′, Fig. 13). The reverse pass (Figs. 16–17) sends a cotangent array down the Delta: each \
constructor by its linear transpose (a gather's is a scatter, SumOuter's a replicate), stopping at a Share, whose \
cotangent is accumulated under its ID; the loop pops the largest ID (complete, since IDs grow bottom-up) and \
evaluates its fragment. The dot product's Delta has 12 nodes at any length n.",
    complexity: "O(number of array operations) Delta nodes; the reverse pass costs what the primal's bulk operations cost (up to the map's log factor).",
    accepts: "what arrays/bot accepts",
};

static COUNTERS: &[CounterInfo] = &[
    CounterInfo { name: "delta_nodes", about: "array-level Delta nodes built by the forward pass" },
    CounterInfo { name: "backprop_ids", about: "IDs popped by the backprop loop" },
    CounterInfo { name: "eval_visits", about: "Delta nodes visited by eval" },
];

impl Stage for DualArrays {
    /// The scalar-level Delta of §4.1's arrays of dual numbers beside this array-level one, for the same
    /// program: the Delta explosion seen.
    fn page(&self) -> PageHints {
        PageHints { beside: Some(Beside { stage: "arrays/dual-numbers", mine: "array Delta", theirs: "scalar Delta" }), ..PageHints::default() }
    }
    fn run(&self, m: &mut Machine, cx: &RunCtx) -> Result<(crate::value::Value, crate::value::Value), crate::interp::RunError> {
        super::common::core::gradient::run_in_input_shape(m, cx)
    }

    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn input(&self) -> Input {
        Input::After("arrays/bot")
    }
    /// (its run reads only its own output: the input may go once transformed)
    fn run_reads_input(&self) -> bool {
        false
    }

    fn builtins(&self) -> Vec<Builtin> {
        // with the gradient programs' operations: a sequential fold's Delta carries its body's vjp,
        // a gradient program (fold.rs)
        let mut out = delta::builtins();
        out.extend(super::common::core::runtime::gradient_builtins());
        out
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let main = src.program.def("main").ok_or_else(|| Diagnostic::error(Span::NONE, "no main"))?;
        let mut fr = Fresh::new(src.program);
        // main's inputs at their stated types where it takes arrays of tuples apart (boundary.rs): the
        // conversions are typed `a → b`, so main's inferred input type says nothing of their components
        let mut main = main.body.clone();
        if let ExprKind::Lam(_, b_x) = &main.kind {
            let (_, b) = &**b_x;
            if matches!(&b.kind, ExprKind::Let(rhs_pair) if super::common::core::boundary::parse_get(&rhs_pair.1 .0).is_some()) {
                main.ty = Type::fun(src.input_type.clone(), src.output_type.clone());
            }
        }
        let body = dual::wrapper(&main, src.output_type, &mut fr)?;
        let mut p = src.program.with_defs(vec![def(crate::stage::WRAPPER, body)]);
        p.next_id = fr.next_id;
        Ok(Output::from(p))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        vec![wrapper_type(src)]
    }

    fn counters(&self) -> &'static [CounterInfo] {
        COUNTERS
    }

    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        delta::graph(m)
    }
}
