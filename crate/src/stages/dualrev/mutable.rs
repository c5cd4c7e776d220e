//! `dualrev/mutable`: mutable arrays, the first stage with the right complexity O(T + I).
//! Smeding & Vákár §9, Fig. 10. Both maps are keyed by consecutive IDs from 0, so they become
//! arrays (sizes known when the reverse pass starts), updated in place in IO (here: the monad `M`,
//! run in direct style, with `runIO` for unsafePerformIO).

use super::common::*;
use crate::build::*;
use crate::diag::Diagnostic;
use crate::interp::{Builtin, Graph, Machine};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};

pub struct Mutable;

static INFO: StageInfo = StageInfo {
    id: "dualrev/mutable",
    paper: PAPER,
    section: "§9, Fig. 10",
    title: "Mutable arrays: O(T + I)",
    explanation: "The maps of the sparse stage are keyed by IDs 0, 1, 2, … in order, and their sizes are known when \
the reverse pass starts: the number of input reals (the ID after Interleave) and the number of backpropagators (the \
ID after the program). So both become mutable arrays, allocated by SAlloc and updated in place in IO — sound because \
the only effects are accumulations, which commute. Backpropagators become Staged c → IO (); SCall and SOneHot add \
into an array cell in O(1); SResolve loops from the highest ID to 0 over the staging array and calls each \
backpropagator once with its accumulated cotangent; Interleave builds a getter into the frozen collector array. \
Every step is now O(1), so the whole gradient costs O(T + I): the paper's complexity criterion.",
    complexity: "O(T + I): forward O(T), SAlloc O(T + I), each backpropagator at most once and O(1), rebuild O(I).",
    accepts: ACCEPTS,
};

// The term translation is `IO_RULE` (common): D⁴_c[R] = (R, (Z, dR ⊸ (Staged c → IO ()))), "same as
// D², with λ_. return () for 0_Staged and λf g x. f x >> g x for +_Staged" (Fig. 10). The runtime
// (`Staged c` as two arrays) is shared with §10.1 and lives in common.

impl Stage for Mutable {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        array_staged_builtins(true)
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut mo = Monadic::new(src.program, &IO_RULE);
        let mut out = mo.program(src.program);
        let mut fr = mo.fr;
        let (s, t) = (src.input_type, src.output_type);
        // Interleave⁴_R = λx. λi. (((x, (i, SOneHot i)), λa. a @ i), i + 1)
        let x = fr.name("x");
        let leaf = |x: Expr, fr: &mut Fresh| leaf_at(x, fr, &|i, _| app(builtin("SOneHot"), i));
        let il = interleave_up(s, var(&x), &mut fr, &leaf);
        out.defs.push(def("interleave", lam(pvar(&x), il)));
        // Deinterleave⁴_τ: program text unchanged from Deinterleave², with the IO monoid
        let y = fr.name("y");
        let dl = deinterleave(t, var(&y), &mut fr, &leaf_ignore_id, &combine_io);
        out.defs.push(def("deinterleave", lam(pvar(&y), dl)));
        // Wrap⁴ (Fig. 10)
        out.defs.push(def(WRAPPER, wrapper_fig10(&out, &mut fr, true)));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        stated_io(src, &real_ty_io(&cvar()))
    }


    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        graph(m, "backprop")
    }
}
