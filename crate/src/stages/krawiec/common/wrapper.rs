//! The wrappers the paper gives for `main : R^a → R` only (Krawiec et al. Figs. 6, 8 and 11), the
//! check that refuses any other `main`, and Fig. 11's wrapper R{e} shared by `krawiec/monadic` and
//! `krawiec/array` (§7.3).

use crate::kit::delta::drev::{drev_program, drev_type, m_type};
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::kit::polytypic::{count_reals, is_real_tuple, ra_expr, ra_pat};
use crate::stage::{Output, Source, WRAPPER};

pub(crate) use crate::kit::delta::dual::wrapper_type;

/// Refuses a `main` that is not `R^a → R`, for the wrappers the paper gives only for that case.
pub(crate) fn require_ra_to_r(src: &Source, stage: &str, figure: &str) -> Result<(), Diagnostic> {
    let (s, t) = (src.input_type, src.output_type);
    if is_real_tuple(s) && *t == Type::Real {
        return Ok(());
    }
    let span = src.program.def("main").map_or(Span::NONE, |d| d.span);
    let why = if !is_real_tuple(s) {
        format!("its input type {} is not a tuple of reals", crate::types::show(s))
    } else {
        format!("its output type {} is not R", crate::types::show(t))
    };
    Err(Diagnostic::error(
        span,
        format!(
            "{stage} uses the wrapper of {figure}, which the paper gives only for main : R^a → R (a tuple of reals to \
one real), but {why}; krawiec/general (§11, Fig. 15) handles arbitrary first-order S and T, with sums and integer leaves"
        ),
    ))
}

/// `main s0` — or, when main is not a λ (so Drev{main} : M (Drev{S} → M Drev{T})), the outer
/// monad run first: `do { f ← main; f s0 }` (note §8.2).
pub(crate) fn call_main(src: &Program, arg: Expr, fr: &mut Fresh) -> Expr {
    let is_fun = src.def("main").is_some_and(|d| matches!(d.body.kind, ExprKind::Lam(..)));
    if is_fun {
        app(global("main"), arg)
    } else {
        let f = fr.name("f");
        bind(pvar(&f), global("main"), app(var(&f), arg))
    }
}

/// The R^a → R wrapper R{e} of Fig. 11, for the map (`array = false`) and the array (§7.3) stages:
/// ```text
/// R{e} = λ((..., s_i, ...), dt).
///          let s0 = (..., (s_i, Var i), ...) in
///          let u = runDelta (a + 1) (Drev{e} s0) in
///          let finalMap = eval dt u emptyMap in
///          (..., lookupOrZero i finalMap, ...)
/// ```
/// (our runDelta also hands back the primal, which the paper's drops, and for the array its size).
pub(crate) fn ra_wrapper(src: &Source, fr: &mut Fresh, array: bool) -> Def {
    let s = src.input_type;
    let a = count_reals(s);
    let names: Vec<Name> = (0..a).map(|_| fr.name("s")).collect();
    let (dt, s0, t, u, n, fm) = (fr.name("dt"), fr.name("s0"), fr.name("t"), fr.name("u"), fr.name("n"), fr.name("finalMap"));
    let seeds = ra_expr(s, &mut 0, &mut |i| pair(var(&names[i as usize - 1]), app(builtin("Var"), int(i))));
    let grad = ra_expr(s, &mut 0, &mut |i| apps(builtin("lookupOrZero"), [int(i), var(&fm)]));
    let run = apps(builtin("runDelta"), [int(a as i64 + 1), call_main(src.program, var(&s0), fr)]);
    let (pat, empty) = if array {
        (ptuple(vec![pvar(&t), pvar(&u), pvar(&n)]), app(builtin("emptyMap"), var(&n)))
    } else {
        (ppair(pvar(&t), pvar(&u)), builtin("emptyMap"))
    };
    let body = let_(
        pvar(&s0),
        seeds,
        let_(pat, run, let_(pvar(&fm), apps(builtin("eval"), [var(&dt), var(&u), empty]), pair(var(&t), grad))),
    );
    def(WRAPPER, lam(ppair(ra_pat(s, &mut names.iter().cloned()), pvar(&dt)), body))
}

/// The types Fig. 11 states: `main : Drev{S} → M (R × Delta)` (when main is a λ) and the wrapper.
pub(crate) fn ra_stated_types(src: &Source) -> Vec<(String, Type)> {
    let (s, t) = (src.input_type, src.output_type);
    let mut v = vec![(WRAPPER.to_string(), wrapper_type(s, t))];
    if src.program.def("main").is_some_and(|d| matches!(d.body.kind, ExprKind::Lam(..))) {
        v.push(("main".into(), Type::fun(drev_type(s), m_type(drev_type(t)))));
    }
    v
}

/// The whole of `krawiec/monadic`'s and `krawiec/array`'s translation: Drev of every definition
/// (Fig. 9) and the wrapper R{e} (Fig. 11).
pub(crate) fn ra_transform(src: &Source, array: bool) -> Result<Output, Diagnostic> {
    let mut fr = Fresh::new(src.program);
    let (mut out, laws) = drev_program(src.program, &mut fr, crate::kit::delta::drev::Naming::DeltaLet)?;
    out.defs.push(ra_wrapper(src, &mut fr, array));
    out.next_id = fr.next_id;
    Ok(Output { views: vec![laws.view(crate::kit::monad_laws::VIEW)], ..Output::from(out) })
}
