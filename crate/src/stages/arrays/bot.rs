//! `arrays/bot`: the bulk-operation transform of §5 (Figs. 9–11), after the lowering from the
//! surface arrays to the paper's core (common/core/lower.rs). A same-function stage: its program
//! computes what the source does, with every `build1` turned into bulk operations (Theorem 5.1,
//! checked on every output); its rule trace is the stepper's steps.

use super::common::core::{bot, lower, runtime, tuples};
use super::common::PAPER;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::features::{Feature, Features};
use crate::interp::Builtin;
use crate::ir::*;
use crate::kit::passes::{first_order_at, first_order_unrolled};
use crate::kit::rewrite::{normalise_located, Budget, Trace};
use crate::print::{print_expr, Later, PrintOptions};
use crate::stage::{Contract, Output, Source, Stage, StageInfo, View};

pub struct Bot;

static INFO: StageInfo = StageInfo {
    id: "arrays/bot",
    paper: PAPER,
    section: "§3.2, §5, Figs. 7, 9–11, Theorem 5.1",
    title: "bot: the bulk-operation transform (build1 pushed inward until none is left)",
    explanation: "The program is inlined into one expression and lowered to the paper's core language: its tuples are \
split into their components (scalar replacement: the core has no tuples; an array of tuples becomes a tuple of \
arrays), map, map2, build, ! and sum become build1, index and sumOuter, a fold that adds to its accumulator becomes \
a sumOuter, a max or min fold a selection by comparisons, an additive scan a masked \
sumOuter per prefix, any other fold or scan a sequential scanl (beyond the paper, whose core has no loop, §2.3: as its \
reference implementation horde-ad does, one Delta node per loop; a tuple accumulator's reals packed into an array of reals, its integers, booleans and arrays of them a loop of their own or, where the reals and integers read each other, real copies in the reals' row brought back by §2's `round`), shifts become build1s of indexes, if becomes the \
strict cond; recursion that params and literals bound is unrolled first (App. B's staging), `a ||| b` is the pair, \
a sum inside the program a tag and both sides (a case computes both branches and selects by the tag, as cond). Then bot rewrites it: each build1 is \
pushed inward through lets, conditionals, arithmetic, sums, literals and transposes (Fig. 9), and through a loop (B-scan, ours: k scanls side by side are one scanl over arrays of their accumulators, the build1 pushed into its body; their arrays must have one length), indexes are pushed \
inward (Fig. 10), and a build1 of an index becomes a gather (Fig. 11). Scalar arithmetic inside a build1 becomes \
arithmetic on whole arrays (a broadcast op, shown as a map of the scalar op). What is left has no build1 and only \
indexes of variables, literals and scatters (Theorem 5.1): the only code run per element is in gather and scatter \
index functions, whose results are discrete and never differentiated. Shapes are Int terms computed when the program \
runs (the paper's are static).",
    complexity: "The output runs in the same time as the input (up to a constant); BI3/BI4 may take more memory (§5.1). \
The number of one-hots in the derivative is at most the number of lexical indexes.",
    accepts: "first-order array programs whose main returns a real, an array or a tuple of them; arrays of tuples inside \
the program, in main's input (taken apart at the wrapper, its gradient zipped back) and in main's output (returned as its component arrays, zipped back after bot, the seed taken apart); any fold, reduce or scan whose accumulator is a real, an integer, a boolean, an array of them (of any rank, of one shape from step to step: §5) or a tuple of these (beyond the paper, as horde-ad: a sequential scanl); recursion whose depth params and literals decide, top-level or local `let rec` (unrolled, App. B); \
`|||` as a pair; sums inside the program (a tag and both sides), not in main's input or output",
};

/// Why recursion on a run-time value is refused (appended to the inliner's message, which is located
/// at the recursive call): a documented boundary of the paper, not a missing rule. Part A's scalar
/// language allows a recursive let (§2.1), but the array core of Part C has none: Fig. 8 types
/// `let x = u in v` with u outside x's scope, §3.2 allows no top-level functions, and the authors'
/// implementation leaves such loops out (App. B).
pub const RECURSION_BOUNDARY: &str = " (a boundary of the paper's array language, not a missing rule: its core (§3.2, Figs. 7–8) has no \
recursion, as its let is not recursive and \"the language does not support separate top-level functions\", and the \
authors' implementation says \"Loops of statically unknown length are currently unsupported due to the difficulty in \
handling them in the bot (Section 5) and in AD (Section 6)\" (App. B; also §2.3, §5.2); only recursion whose depth \
params and literals decide is unrolled, as the host language's static control flow in App. B's staging)";

/// The budget of the inlining before lowering (as the other first-order chains).
const INLINE_BUDGET: usize = 100_000;

/// Lowers and rewrites `src`'s main: the core program before bot, the output and the trace.
pub fn bot_program(src: &Source) -> Result<(Program, Program, Trace), Diagnostic> {
    // recursion whose depth the params and literals decide is unrolled first: the paper stages its
    // programs in a host language whose static control flow runs before AD (App. B); recursion on
    // run-time data is a dynamic loop, which the core has not (§2.3, §5.2)
    // (only a recursive program: the unrolling inliner also folds static integer arithmetic)
    let recursive = crate::features::scan(src.program).span(Feature::Recursion).is_some();
    let inlined = if recursive { first_order_unrolled(src, INLINE_BUDGET) } else { first_order_at(src, INLINE_BUDGET) };
    let p = inlined.map_err(|mut d| {
        if d.message.contains("recurs") {
            d.message.push_str(RECURSION_BOUNDARY);
        }
        Diagnostic { refused: true, ..d }
    })?;
    let mut fr = Fresh::new(&p);
    let (pat, boundary, core) = lower::lower_main(&p, &mut fr)?;
    // main's output arrays of tuples (or nested tuples) given back in the user's shape below bot's output (boundary.rs)
    let soa_out = super::common::core::boundary::flat_output(src.output_type).then(|| src.output_type.clone());
    let user = |e: Expr, fr: &mut Fresh| match &soa_out {
        Some(t) => super::common::core::boundary::output(t, e, fr),
        None => e,
    };
    let mut before = p.clone();
    before.defs = vec![def_main(lam(pat.clone(), tuples::wrap(boundary.clone(), user(core.clone(), &mut fr))))];
    before.next_id = fr.next_id;
    // bot's terms carry the span of the source term they come from (a ragged `tr`'s run-time error
    // then points at the user's map)
    let (out, trace) = normalise_located(core, &bot::rules(), &mut fr, Budget { trace_steps: 2_000, ..Budget::default() })?;
    bot::check_theorem_5_1(&out)?;
    let mut after = p.clone();
    // main's arrays of tuples taken apart above bot's output, where dual-arrays' wrapper finds them
    let out = user(out, &mut fr);
    after.defs = vec![def_main(lam(pat, tuples::wrap(boundary, out)))];
    after.next_id = fr.next_id;
    Ok((before, after, trace))
}

fn def_main(body: Expr) -> Def {
    let mut d = def("main", body);
    d.role = Role::User;
    d
}

/// The rule trace, one line per step; made when read (it prints every kept step).
fn trace_view(tr: &Trace) -> View {
    let (taken, per_rule, steps) = (tr.taken, tr.per_rule.clone(), tr.steps.clone());
    View::later(
        "bot's rewrite trace",
        Later::new(move || {
            use std::fmt::Write;
            let mut text = String::new();
            let per: Vec<String> = per_rule.iter().filter(|(_, n)| *n > 0).map(|(r, n)| format!("{r} ×{n}")).collect();
            let _ = writeln!(text, "{taken} rewrite steps: {}", per.join(", "));
            for (k, s) in steps.iter().enumerate() {
                let _ = writeln!(text, "{:>4}. {:<26} {}  ⟶  {}", k + 1, s.rule, one_line(&s.before.text()), one_line(&s.after.text()));
            }
            text
        }),
    )
}

fn one_line(s: &str) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 200 {
        flat.chars().take(199).collect::<String>() + "…"
    } else {
        flat
    }
}

impl Stage for Bot {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn contract(&self) -> Contract {
        Contract::SameFunction
    }

    /// §5.2: no dynamic loops and no sums; functions are inlined away, recursion on params and
    /// literals unrolled (App. B's staging), sums inside the program split (tuples.rs).
    fn supports(&self) -> Features {
        Features::of(&[Feature::HigherOrder, Feature::Integers, Feature::Conditionals, Feature::Par, Feature::Recursion, Feature::Sums])
    }

    fn builtins(&self) -> Vec<Builtin> {
        runtime::builtins()
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        if !src.input_type.is_first_order() || !src.output_type.is_first_order() {
            return Err(Diagnostic::error(Span::NONE, "main must be first-order").refused());
        }
        Ok(())
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let (before, after, trace) = bot_program(src)?;
        let views = if crate::stage::shown() {
            let core = before.def("main").map(|d| print_expr(&d.body, &PrintOptions::unicode())).unwrap_or_default();
            vec![View { name: "core program before bot (the lowering)".into(), text: core, ..View::default() }, trace_view(&trace)]
        } else {
            vec![]
        };
        // the gathers and scatters of ranks past those every stage registers (lang.rs, `MAX_DIMS`)
        let builtins = runtime::builtins_for(&after);
        Ok(Output { program: after, builtins, views, steps: trace.stepper() })
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        vec![("main".into(), Type::fun(src.input_type.clone(), src.output_type.clone()))]
    }
}
