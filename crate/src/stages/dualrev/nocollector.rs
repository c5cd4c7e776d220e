//! `dualrev/no-collector`: the cotangent collection array dropped. Smeding & Vákár §10.1.
//! Input backpropagators only added their argument into c[i], so after SResolve c[i] = snd m[i]:
//! keep only the staging array, make the input backpropagators no-ops, and rebuild from m.

use super::common::*;
use crate::build::*;
use crate::diag::Diagnostic;
use crate::interp::{Builtin, Graph, Machine};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};

pub struct NoCollector;

static INFO: StageInfo = StageInfo {
    id: "dualrev/no-collector",
    paper: PAPER,
    section: "§10.1",
    title: "Dropping the cotangent collection array",
    explanation: "In the mutable stage an input's backpropagator SOneHot i only adds its argument into the collector \
cell c[i], and it is called exactly once, by SResolve, with everything staged for ID i. So when SResolve ends, c[i] \
equals the cotangent accumulated in the staging cell m[i]: the collector is redundant. Staged c becomes just the \
staging array, the input backpropagators become no-ops (linλz. λ_. return ()), and the rebuild function reads the \
gradient out of the frozen cotangents of the staging array's first I cells. (Deinterleave now stages the output's \
backpropagator calls instead of making them directly: an output that is itself an input would otherwise lose its \
cotangent to the no-op.)",
    complexity: "O(T + I), with one array fewer.",
    accepts: ACCEPTS,
};

impl Stage for NoCollector {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        array_staged_builtins(false)
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut mo = Monadic::new(src.program, &IO_RULE);
        let mut out = mo.program(src.program);
        let mut fr = mo.fr;
        let (s, t) = (src.input_type, src.output_type);
        // Interleave_R = λx. genID >>= λi. pure ((x, (i, linλz. λ_. return ())), λa. a @ i)
        let x = fr.name("x");
        let leaf = |x: Expr, fr: &mut Fresh| {
            leaf_at(x, fr, &|_, fr| {
                let z = fr.name("z");
                linlam(pvar(&z), app(builtin("counted"), combine_io(vec![], fr)))
            })
        };
        let il = interleave_up(s, var(&x), &mut fr, &leaf);
        out.defs.push(def("interleave", lam(pvar(&x), il)));
        // Deinterleave_R (x, d) = (x, SCall d). Decision: the output's backpropagators are *staged*
        // here, not called directly as in Deinterleave⁴ (§6.1). With the collector gone, an input's
        // backpropagator is a no-op and its cotangent is read from its staging cell, so an output
        // that *is* an input (`main (x, y) = (x, …)`) would lose the direct call's contribution.
        // Staging the output calls, as the reference implementation does, keeps c[i] = snd m[i].
        let y = fr.name("y");
        let dl = deinterleave(t, var(&y), &mut fr, &leaf_scall("d"), &combine_io);
        out.defs.push(def("deinterleave", lam(pvar(&y), dl)));
        out.defs.push(def(WRAPPER, wrapper_fig10(&out, &mut fr, false)));
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
