//! `unf/pe`: partial evaluation (Huot & Shaikhha §5.1) of `unf/direct`'s output, wrapper included:
//! `∇_Γ(e) = π2 D←^Γ_{Γ;Id_Γ}(e) (0_Γ, 1)` with `Y := Id_Γ` and the arguments supplied, rewritten until
//! no continuation is left. Each rule is one named rule of the rewrite engine (kit/rewrite.rs), named
//! as the note's reconstruction of Fig. 12 (R1–R18) where it is one of them.
//!
//! Decisions:
//! - β binds the arguments with `let` (R1) and never substitutes a non-variable argument (§5.1: that
//!   is what keeps the cost linear; the note's pitfall P3). Variables are substituted for variables
//!   (R3) in the same step that splits a tuple let, simultaneously (one walk of the body per call of a
//!   continuation instead of one per argument: a continuation of a context of n slots takes n of them).
//! - A continuation is inlined where it is used; Lemma 5.1 says each is used exactly once.
//! - Constants stay bound (`let y1 = 0.0 in …`): Ex. 1.1's middle program, the golden output of this
//!   stage, keeps `let y1, …, y5 = 0, 0, 0, 0, 1`; propagating them (R4) is left to `unf/opt`.
//! - Binders are unique in a program (each has its own id), so substitution never captures.
//! - Lemma 5.3 (no lambda left but the top one) is asserted on every output: the functions given to
//!   array operations (`map2 (x,y. e)`, `reduce`, `scanl`, `scanr`) are the paper's binders, not
//!   lambdas of the Target language, and may stay.

use super::common::partial::{pe_rules, rewrite, trace_views};
use super::common::PAPER;
use crate::diag::{Diagnostic, Span};
use crate::features::{Feature, Features};
use crate::ir::*;
use crate::stage::{Input, Output, Source, Stage, StageInfo};

/// Lemma 5.3's check, which the tests also run on every example's output.
pub use super::common::partial::check_lemma_5_3;

pub struct Pe;

static INFO: StageInfo = StageInfo {
    id: "unf/pe",
    paper: PAPER,
    section: "§5.1, Lemmas 5.1 and 5.3, Ex. 1.1 and 5.2",
    title: "Partial evaluation: inlining the continuations away",
    explanation: "unf/direct's program with Y := Id_Γ and its arguments (0_Γ, 1) supplied is partially evaluated: \
every continuation is used exactly once (Lemma 5.1), so it is inlined where it is called; the call is β-reduced into \
lets of its arguments (never substituting an expression that is not a variable, which would duplicate work); tuple \
lets are split, projections of tuples taken, variable-to-variable lets substituted forward, nested lets flattened and \
dead lets dropped. What is left has no lambda abstraction but the top one (Lemma 5.3): a first-order, SSA-like \
program whose backward part is a line of lets, as imperative reverse mode would write it (Ex. 1.1). Each step of the \
rewrite is listed with its rule.",
    complexity: "O(T): after partial evaluation the gradient costs at most 4·3^p times the primal (Theorem 5.4); the rewrite itself walks the continuation program once per continuation it inlines.",
    accepts: super::common::ACCEPTS,
};

impl Stage for Pe {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    /// What `unf/direct`'s output may hold: its continuations, and the conditionals and integers of
    /// the derivative table (`abs`, `max`); the source's own are refused by `unf/direct`, and so here.
    fn supports(&self) -> Features {
        Features::of(&[Feature::HigherOrder, Feature::Conditionals, Feature::Integers])
    }

    fn input(&self) -> Input {
        Input::After("unf/direct")
    }
    /// (its run reads only its own output: the input may go once transformed)
    fn run_reads_input(&self) -> bool {
        false
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let (program, trace) = rewrite(src.program, &pe_rules())?;
        check_lemma_5_3(&program).map_err(|why| Diagnostic::error(Span::NONE, format!("internal error: Lemma 5.3 does not hold after partial evaluation: {why}")))?;
        Ok(Output { program, builtins: vec![], views: trace_views(&trace), steps: trace.stepper() })
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        super::common::grad_type(src)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::Stage;

    /// `unf/direct`'s output on `src`.
    pub(crate) fn direct_output(src: &str) -> (Program, Type, Type) {
        let (p, s, t) = crate::pipeline::front_end(src, &[]).unwrap();
        let b = crate::interp::Builtins::new();
        let source = Source { program: &p, input_type: &s, output_type: &t, builtins: &b };
        (super::super::direct::Direct.transform(&source).unwrap().program, s, t)
    }

    fn size(e: &Expr) -> usize {
        node_count(e) as usize
    }

    /// `let w1 = x * c in let w2 = w1 * c in …` (or `w_k = w_{k-1} * w_{k-1}`, every variable used twice:
    /// the note's P3, where substituting non-variables would double the program at every let).
    fn chain(m: usize, fan_out: bool) -> String {
        let mut src = String::from("input 1.0\ndef main x = ");
        for i in 1..=m {
            let prev = if i == 1 { "x".to_string() } else { format!("w{}", i - 1) };
            let rhs = if fan_out { format!("{prev} * {prev}") } else { format!("{prev} * 1.0001") };
            src.push_str(&format!("let w{i} = {rhs} in "));
        }
        src + &format!("w{m}\n")
    }

    /// The output of partial evaluation grows linearly with the program (its input, Fig. 5's program,
    /// grows quadratically: every continuation takes the whole context), with and without fan-out,
    /// and Lemma 5.3 holds on it.
    #[test]
    fn partial_evaluation_stays_linear_in_the_program() {
        for fan_out in [false, true] {
            let sizes: Vec<usize> = [20, 40, 80]
                .iter()
                .map(|&m| {
                    let (p, _, _) = direct_output(&chain(m, fan_out));
                    let (out, _) = rewrite(&p, &pe_rules()).unwrap();
                    check_lemma_5_3(&out).unwrap();
                    size(&out.defs[0].body)
                })
                .collect();
            // doubling the program doubles the output (Fig. 5's own output grows four times)
            assert!(sizes[2] <= 2 * sizes[1] + 20 && sizes[1] <= 2 * sizes[0] + 20, "{sizes:?}");
            assert!(sizes[2] < 30 * 80, "about 22 nodes per let: {sizes:?}");
        }
    }

    /// Every example program, by path, in order.
    fn examples() -> Vec<(std::path::PathBuf, String)> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
        let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|f| f.unwrap().path()).filter(|f| f.extension().is_some_and(|x| x == "cot")).collect();
        files.sort();
        files.into_iter().map(|f| (f.clone(), std::fs::read_to_string(f).unwrap())).collect()
    }

    /// Each partial-evaluation rule says which nodes of its result are new (`rewrite::Changed`), so
    /// that the engine walks only those again; in tests the engine checks every such account against
    /// the redex (`known::check_claim`, which panics on a wrong one) — here on every example through
    /// unf/pe and unf/opt, whose rule set includes these rules.
    #[test]
    fn every_rules_account_of_what_it_changed_holds_on_every_example() {
        crate::limits::run_with_stack(|| {
            let mut rewritten = 0;
            for (_, text) in examples() {
                let opts = crate::pipeline::Options { stages: vec!["unf/pe".into(), "unf/opt".into()], ..Default::default() };
                let Ok(a) = crate::pipeline::analyse(&text, &opts) else { continue };
                rewritten += a.stages.iter().filter(|s| s.ok).count();
            }
            assert!(rewritten > 40, "{rewritten} programs rewritten");
        });
    }

    /// Rules move parts of their redex into their result where the engine does not read the redex
    /// again (`RewriteCx::take`: past the steps the trace keeps, and in a stage not shown), and copy
    /// them where it does. Both give the same program and the same number of steps, on every example
    /// through unf/pe's rules and then unf/opt's.
    #[test]
    fn rules_that_move_parts_of_their_redex_give_what_copying_gives() {
        use crate::kit::rewrite::KEEP_REDEX;
        use crate::print::{print_program, PrintOptions};
        crate::limits::run_with_stack(|| {
            let mut compared = 0;
            for (f, text) in examples() {
                let Ok((p, s, t)) = crate::pipeline::front_end(&text, &[]) else { continue };
                let b = crate::interp::Builtins::new();
                let source = Source { program: &p, input_type: &s, output_type: &t, builtins: &b };
                // unf/direct's output as the pipeline gives it to unf/pe: checked, so typed
                let direct = super::super::direct::Direct;
                let Ok(d) = crate::pipeline::prepare(&direct, &source, &Default::default()) else { continue };
                let mut input = d.program;
                for rules in [pe_rules(), super::super::opt::opt_rules()] {
                    let run = |keep: bool| {
                        KEEP_REDEX.with(|k| k.set(keep));
                        let out = crate::stage::showing(false, || rewrite(&input, &rules));
                        KEEP_REDEX.with(|k| k.set(true));
                        out.map(|(q, tr)| (print_program(&q, &PrintOptions::ascii()), tr.taken, q))
                    };
                    let (Ok(kept), Ok(moved)) = (run(true), run(false)) else { panic!("{f:?}: one of the rewrites stopped") };
                    assert_eq!((&kept.0, kept.1), (&moved.0, moved.1), "{f:?}");
                    compared += 1;
                    input = moved.2;
                }
            }
            assert!(compared > 40, "{compared} rewrites compared");
        });
    }

    #[test]
    fn lemma_5_3_refuses_a_continuation_left_behind() {
        let (p, _, _) = direct_output(&chain(2, false));
        assert!(check_lemma_5_3(&p).is_err(), "unf/direct's own output has lambdas");
    }
}
