//! Types: the monad `M`, `Staged c`, the type translation D_c[τ], and the types the paper states for
//! a stage's output.

use super::*;
use crate::ir::*;
use crate::stage::Source;

pub fn staged_ty(c: Type) -> Type {
    Type::con("Staged", vec![c])
}

/// The wrapper's stated type: `grad : (σ, τ) → (τ, σ)` (gradients in the input's shape).
pub fn grad_type(src: &Source) -> (String, Type) {
    crate::stage::wrapper_type(src)
}

/// `main`'s stated type: `D[σ → τ]` (`main : D[σ] → M D[τ]` in the monadic stages).
pub fn main_type(src: &Source, real: &Type, monadic: bool) -> (String, Type) {
    // D[σ → τ]
    let f = dtype(&Type::fun(src.input_type.clone(), src.output_type.clone()), real, monadic);
    // a `main` that is not a lambda (`def main = compose f g`) is a computation of the function
    let is_lam = src.program.def("main").is_some_and(|d| matches!(strip_ann(&d.body).kind, ExprKind::Lam(..)));
    ("main".into(), if monadic && !is_lam { m_ty(f) } else { f })
}

/// Stated types of the Fig. 10-shaped stages (`bp` is what an output cotangent maps to).
pub fn stated_fig10(src: &Source, real: &Type, bp: &Type) -> Vec<(String, Type)> {
    let (s, t) = (src.input_type, src.output_type);
    vec![
        main_type(src, real, true),
        ("interleave".into(), Type::fun(s.clone(), m_ty(Type::tup(vec![dtype(s, real, true), Type::fun(iarray_ty(), s.clone())])))),
        ("deinterleave".into(), Type::fun(dtype(t, real, true), Type::tup(vec![t.clone(), Type::lin(t.clone(), bp.clone())]))),
        grad_type(src),
    ]
}

/// Stated types of the stages whose output backpropagators map into `Staged c → IO ()`.
pub fn stated_io(src: &Source, real: &Type) -> Vec<(String, Type)> {
    stated_fig10(src, real, &io_ty(&cvar()))
}
