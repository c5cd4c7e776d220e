//! `chad/cc`: typed closure conversion (Minamide, Morrisett & Harper 1996) of the source, as App. C
//! uses it before CHAD: every lambda becomes a pack of its captured variables with closed code
//! `λ⟨⟨y1, …, yk⟩, x⟩. t^CC`, every application a case on the pack that calls the code on
//! ⟨captured variables, argument⟩. The same function as the source (a same-function stage); its
//! output is what `chad/cc-chad` differentiates.

use super::common::*;
use crate::diag::Diagnostic;
use crate::features::Features;
use crate::ir::*;
use crate::kit::passes::closure_convert;
use crate::stage::{Contract, Output, Source, Stage, StageInfo};

pub struct Cc;

static INFO: StageInfo = StageInfo {
    id: "chad/cc",
    paper: PAPER,
    section: "App. C (§9)",
    title: "Typed closure conversion: every function a pack of captured variables and closed code",
    explanation: "Naive higher-order CHAD splits a function's derivative into a part for its argument and a part \
for its captured context, and an application needs both, so it differentiates the body twice (§9). App. C removes \
the second part by closure conversion first: (λx. t)^CC = pack ⟨⟨y1, …, yk⟩, λ⟨⟨y1, …, yk⟩, x⟩. t^CC⟩ with the \
yi the free variables of t, and (t s)^CC = case t^CC of pack z → let ⟨cvars, f⟩ = z in f ⟨cvars, s^CC⟩; \
everything else is translated homomorphically. The code λ⟨⟨y1, …, yk⟩, x⟩. t^CC is closed (τ →□ σ), lifted to a \
top-level definition. The existential Σ_α. α × ((α × τ) →□ σ) is the finite sum over the lambdas that can reach \
each function value (its lambda set): with one lambda the pack is the pair itself, with several it is tagged \
inl/inr (the paper's tagged Σ, footnote 28, restricted to the types that occur). Same function, same cost \
(footnote 29).",
    complexity: "The source's: a pack is a pair, an application one projection and one call (footnote 29).",
    accepts: "programs whose closures do not contain closures of their own lambda (those need recursive types): \
after monomorphisation, every higher-order program the chain's language allows, without recursion",
};

impl Stage for Cc {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }
    fn contract(&self) -> Contract {
        Contract::SameFunction
    }
    fn supports(&self) -> Features {
        SUPPORTS
    }
    /// The chain's language (the program must go through the first-order stages too, and CHAD of
    /// the converted program takes no recursion or arrays), and the pass's own limits.
    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        // (the chain's `accepts`, run first, asked it already where it could)
        if !super::chain_asks_first_order(src) {
            first_order(src)?;
        }
        closure_convert(src.program).map(|_| ())
    }
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        Ok(closure_convert(src.program)?.into())
    }
    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        vec![("main".into(), Type::fun(src.input_type.clone(), src.output_type.clone()))]
    }
}
