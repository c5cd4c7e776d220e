//! `chad/naive-ho`: naive higher-order CHAD (§9, after Vákár 2021 and Vákár & Smeding 2022), in
//! Fig. 2's style on the sparse runtime of `chad/sparse`. A function's cotangent is the log of its
//! invocations, `D[τ → σ]2 = List (D[τ]1 × D[σ]2)`; a lambda's derivative has an argument half and
//! a context half, and an application uses both, so each call backpropagates the body twice and
//! nested calls multiply: the innermost body of t_n runs its backpropagator 2^(n−1) times.

use super::common::apis::Fig2;
use super::common::chad;
use super::common::runtime::{generic_builtins, Repr};
use super::common::source::{self, with_lambdas, K};
use super::common::*;
use crate::diag::Diagnostic;
use crate::features::Features;
use crate::interp::{Builtin, Machine, RunError};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo};
use crate::value::Value;

pub struct NaiveHo;

static INFO: StageInfo = StageInfo {
    id: "chad/naive-ho",
    paper: PAPER,
    section: "§9",
    title: "Naive higher-order CHAD: function cotangents are invocation logs, each call backpropagates twice",
    explanation: "Without inlining, a function value needs a derivative too. Naive higher-order CHAD gives a \
function type the cotangent D[τ → σ]2 = List (D[τ]1 × D[σ]2), the log of its invocations (argument, output \
cotangent), with 0 = [] and + = ++. A lambda's derivative has two halves: the argument half \
λx. let ⟨y, y'⟩ = D_{Γ,x}[t] in ⟨y, λd. snd (split (y' d))⟩ gives the cotangent of the argument, the context half \
λl. fold l with ⟨x, d⟩, acc → acc + fst (split (snd D_{Γ,x}[t] d)) from 0 re-runs the body on every logged \
argument to get the captured variables' cotangents. An application uses both: \
D_Γ[t s] = … ⟨z, λd. y' (z' d) + x' [⟨y, d⟩]⟩. So every call backpropagates its body twice (splitλ marks the end \
of each such run, counted in body_backprops), and nested calls multiply: t_n runs in O(n), its derivative in O(2^n). \
(D_{Γ,x}[t] is bound once as Dλ and called by both halves, so the printed program stays linear in size.)",
    complexity: "O(2^n) on t_n (nested function calls double the body's backpropagations per level; §9), and ++ is linear (footnote 25).",
    accepts: "the chain's language with its lambdas kept (no inlining): local and top-level functions, \
applications, no recursion; lambdas nested at most 20 deep (the naive budget: 2^20 backpropagations)",
};

/// The deepest lambda nesting this stage takes: the work doubles per level (§9).
pub const MAX_LAMBDA_NESTING: usize = 20;

impl Stage for NaiveHo {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn supports(&self) -> Features {
        SUPPORTS
    }
    fn builtins(&self) -> Vec<Builtin> {
        generic_builtins()
    }
    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        // (the chain's `accepts`, run first, asked it already where it could)
        if !super::chain_asks_first_order(src) {
            first_order(src)?;
        }
        let fo = with_lambdas(src)?;
        let mut stack = vec![(&fo.body, 0usize)];
        while let Some((t, depth)) = stack.pop() {
            let depth = depth + matches!(t.kind, K::Lam(..)) as usize;
            if depth > MAX_LAMBDA_NESTING {
                return Err(Diagnostic::error(t.span, format!("this program nests lambdas more than {MAX_LAMBDA_NESTING} deep, this stage's `naive` budget: naive higher-order CHAD doubles the work per level (§9); chad/cc-chad has no such cost")));
            }
            source_children(t, &mut |c| stack.push((c, depth)));
        }
        Ok(())
    }
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let fo = with_lambdas(src)?;
        let program = chad::program_with(&fo, &Fig2, src.output_type, true)?;
        output_by_name(program)
    }
    /// Its type-indexed instances (three a source line: `0_{EV Γ}`, `one_{x∈Γ}`, `split_{Γ,τ}`),
    /// made by name when asked, not listed in its output (issue 14 item 4).
    fn builtin_family(&self) -> Option<crate::interp::BuiltinFamily> {
        Some(family)
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

/// A core term's subterms.
fn source_children<'a>(t: &'a source::Term, f: &mut dyn FnMut(&'a source::Term)) {
    match &t.kind {
        K::Var(_) | K::Lit(_) | K::Discrete(_) | K::Global(_) => {}
        K::Lets(chain, body) => {
            chain.iter().for_each(|(_, r)| f(r));
            f(body);
        }
        K::Tuple(ts) | K::Op(_, ts) => ts.iter().for_each(f),
        K::Proj(_, s) | K::Inl(s) | K::Inr(s) | K::Lam(_, s) => f(s),
        K::App(a, b) => {
            f(a);
            f(b);
        }
        K::Case(s, _, a, _, b) => {
            f(s);
            f(a);
            f(b);
        }
        K::If(c, a, b) | K::Fold { init: c, arr: a, body: b, .. } => {
            f(c);
            f(a);
            f(b);
        }
        K::Index(a, b) | K::Build(a, _, b) => {
            f(a);
            f(b);
        }
    }
}
