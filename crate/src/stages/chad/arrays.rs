//! `chad/arrays`: §7, Figs. 9–10. The monadic CHAD of Fig. 7 with arrays: `build`, indexing and
//! `fold`, array cotangents as Bags (BEmpty/BOne/BPlus), fold's reduction recorded as a `Tree`,
//! run on the mutable cells of §5. The language's other array operations are lowered to those
//! three first (`kit::passes::lower_arrays`, shown as a view). §8.1's BArray is a switch of the
//! runtime: every run is made twice, with the paper's Bags (the stage's result, trace and counters)
//! and with BArray (its BOne and BArray counts beside them, `*_barray`).

use super::common::apis::Fig7;
use super::common::chad;
use super::common::runtime::{generic_builtins, Repr, Rt};
use super::common::*;
use crate::diag::Diagnostic;
use crate::features::Features;
use crate::interp::{Builtin, Builtins, Graph, Machine, RunError};
use crate::ir::*;
use crate::print::{print_program, PrintOptions};
use crate::stage::{run_wrapper, Output, RunCtx, Source, Stage, StageInfo, View};
use crate::value::Value;

pub struct Arrays;

pub const ID: &str = "chad/arrays";

static INFO: StageInfo = StageInfo {
    id: ID,
    paper: PAPER,
    section: "§7, Figs. 9–10; §8.1",
    title: "Arrays: build, index and fold, with Bag cotangents and the fold's recorded reduction Tree",
    explanation: "An array is a product, so its cotangent must make zeros and one-hots cheap: D[Array τ]2 = \
Bag (Z × D[τ]2), the free monoid BEmpty | BOne ⟨i, d⟩ | BPlus a b, each O(1); collect turns a Bag into a list \
of ⟨index, cotangent⟩ pairs, paid for by its construction. Indexing backpropagates BOne ⟨i, d⟩. build runs its \
body per index with the body's backpropagators kept (unzip); the backward pass collects the Bag, scatters it \
into an array of zeros and runs each element's backpropagator in a scope for i (zipWith, sequence). fold \
records its reduction Tree in the primal pass (a Node keeps the value and the backpropagator of each step) \
and unTree pushes the cotangent from the root down to the leaves (Fig. 10); the language's fold has an \
initial value, the first leaf (footnote 16). The other array operations (map, map2, sum, reduce, replicate, \
scans, shifts, literals) are first lowered to build, ! and fold (the view 'lowered to §7'). All of it runs on \
chad/mutable's cells. §8.1: a gather build n (i. … a ! t …) makes n BOne's, a BPlus tree of them, a collect \
and a scatter (counter bag_ones); with the BArray constructor a Bag takes in further BOne's into an array in \
place (the run is repeated with it: bag_ones_barray, barrays_barray).",
    complexity: "O(T + |Γ| + size d) argued as for §6 (not proved, §7): Bags and Trees cost what made them; a \
scan lowered to folds is O(n²). §8.1: a gather of n elements makes n BOne's; BArray makes one array.",
    accepts: "§7's array language after inlining: build, indexing, length and fold (with an initial value; \
the accumulator of the elements' type, since §7's fold reduces τ × τ → τ), and the operations lowered to them \
(map, map2, sum, reduce, replicate, scanl, scanr, shift1L, shift1R, literals), over reals, tuples, sums, \
integers and conditionals; no recursion (§2)",
};

impl Stage for Arrays {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn supports(&self) -> Features {
        SUPPORTS
    }
    fn builtins(&self) -> Vec<Builtin> {
        let mut bs = generic_builtins();
        bs.extend(bags::builtins());
        bs
    }
    /// §7's language after the lowering (refused, located, where it is not).
    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        first_order_arrays(src).map(|_| ())
    }
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let (fo, lowered) = first_order_arrays(src)?;
        let program = chad::program(&fo, &Fig7, src.output_type)?;
        let mut out = output(program)?;
        if crate::stage::shown() {
            let text = print_program(&lowered, &PrintOptions::unicode());
            out.views.push(View { name: "lowered to §7".into(), text, ..View::default() });
        }
        Ok(out)
    }
    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        chad::stated(src)
    }
    fn run(&self, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
        // §8.1: the same program once more with BArray, untraced, its counts beside, on the same
        // lowered code (a run that stops, at a budget, only leaves its counts out: the stage's
        // result is the paper's run). Run first and let go: after the paper's run, whose Bags and
        // Trees the graph keeps, the two were live at once (issue 14 item 4: chain-100000's run
        // went 558 → 915 MiB, past the CLI's 1 GiB last resort).
        // Its entries do not count toward compiling regions: added to the paper's run's they made the
        // functions entered once a run compile (and keep) theirs.
        m.count_entries(false);
        let barray = run_barray_on(&mut m.rerun(), cx.input, cx.seed).ok().map(|(_, counts)| counts);
        m.count_entries(true);
        m.restart_clock();
        // the paper's run, recording its Bags and Trees for the graph
        runtime::set_up(m, Repr::Sparse, true);
        m.state::<Rt>().record = Some(Box::default());
        // and, traced, its backpropagator tree (`bp_tree`), drawn beside them
        if m.tracing() {
            let sites = bp_tree::sites_of(|| {
                let _ = self.transform(cx.src);
            });
            bp_tree::record(m, sites, bp_tree::ARRAYS_BASE);
        }
        let r = run_wrapper(m, cx.input, cx.seed)?;
        let kept = kept_ones(m);
        m.count("bag_ones", kept);
        if let Some((ones, barrays)) = barray {
            m.count("bag_ones_barray", ones);
            m.count("barrays_barray", barrays);
        }
        Ok(r)
    }
    /// The Bags and Trees the paper's run built (not the BArray run's, whose only output is counts).
    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        let bags = graph::graph(m);
        bp_tree::beside(bags, bp_tree::graph(m))
    }
}

/// The BOne's the backward pass made and left in Bags (those a BArray took in are not kept).
fn kept_ones(m: &mut Machine) -> u64 {
    let rt = m.state::<Rt>();
    rt.made.saturating_sub(rt.absorbed)
}

/// The stage's output run with §8.1's BArray on: `(primal, gradient)` and (BOne's kept, BArrays made).
pub fn run_barray(p: &Program, builtins: &Builtins, budget: crate::interp::Budget, input: &Value, seed: &Value) -> Result<((Value, Value), (u64, u64)), RunError> {
    run_barray_on(&mut Machine::new(p, builtins, budget)?, input, seed)
}

/// `run_barray` on a fresh machine for the stage's output (`Machine::rerun` of the first run's).
fn run_barray_on(m: &mut Machine, input: &Value, seed: &Value) -> Result<((Value, Value), (u64, u64)), RunError> {
    m.set_tracing(false);
    runtime::set_up(m, Repr::Sparse, true);
    m.state::<Rt>().barray = true;
    let r = run_wrapper(m, input, seed)?;
    let barrays = m.state::<Rt>().barrays;
    Ok((r, (kept_ones(m), barrays)))
}
