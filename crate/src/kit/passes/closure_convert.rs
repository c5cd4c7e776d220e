//! Typed closure conversion (Minamide, Morrisett & Harper, POPL 1996), as Smeding & Vákár use it to
//! make CHAD of higher-order code efficient ("Efficient CHAD", §9 and App. C): every lambda becomes
//! a closure, a pair of its environment (the tuple of its captured variables) and closed code
//! `λ⟨⟨y1, …, yk⟩, x⟩. t^CC`; application `t s` becomes
//! `case t^CC of pack z -> let ⟨cvars, f⟩ = z in f ⟨cvars, s^CC⟩`. Every other construct is
//! translated homomorphically.
//!
//! The existential `Σ_α. α × ((α × τ) →□ σ)` of App. C is represented by the finite sum over the
//! lambdas that can reach a function-typed value (lambda sets, see `closures.rs`): a value reached by
//! one lambda is just the pair `(env, code)`, as if `pack` were erased; a value reached by several
//! is `inl`/`inr`-tagged, and application cases over the tags with the same arm for each (the
//! paper's tagged Σ, footnote 28, restricted to the types that occur). The closed code of each
//! lambda is a top-level definition. Limits: see `closures.rs` (closures that would contain
//! themselves need recursive types, and are refused with a located message).
//!
//! Input: a type-checked program (it is monomorphised first). Output: type-checked; every lambda is
//! closed (its free variables are globals only).

use crate::diag::Diagnostic;
use crate::ir::Program;

/// Closure-converts `p`: `main` keeps its parameter, every other lambda becomes (environment, code).
pub fn closure_convert(p: &Program) -> Result<Program, Diagnostic> {
    super::closures::convert(p, super::closures::Mode::ClosureConvert)
}
