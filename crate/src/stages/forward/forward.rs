//! `forward`: forward-mode dual numbers, Krawiec et al. §4, Figs. 3–4 (and Fig. 15's general
//! wrapper). Every real becomes a pair (primal, tangent); only real literals and real primitives
//! change, everything else is translated homomorphically. Run once per real input (the Forward
//! Plan), it gives the reference gradient that every other stage is checked against.

use crate::build::*;
use crate::deriv::{self, Partial};
use crate::diag::{Diagnostic, Span};
use crate::interp::{Machine, RunError};
use crate::ir::*;
use crate::kit::polytypic::{dot, map_shape, with_real, zip_shape, Zip};
use crate::kit::translate::{dual, DualRule};
use crate::stage::{split_pair, Output, RunCtx, Source, Stage, StageInfo};
use crate::value::Value;

pub struct Forward;

static INFO: StageInfo = StageInfo {
    id: "forward",
    paper: "Krawiec et al. 2022",
    section: "§4, Figs. 3–4 (wrapper: Fig. 15)",
    title: "Forward mode with dual numbers",
    explanation: "Each real r is paired with a tangent dr: literals become (r, 0), and each real primitive computes \
its result together with the derivative of that result in the direction of the input tangent (the chain rule, one \
operation at a time). Lets, lambdas, applications, tuples and sums are translated homomorphically, so closures, \
recursion and higher-order code come for free. The wrapper F{e} zips the input with a tangent direction ds and reads \
the output's tangents; one run gives one column of the Jacobian, so the Forward Plan runs it once per real input, \
and dots each column with the output cotangent to give that input's gradient entry.",
    complexity: "O(T) per run, and one run per real input: O(a·T) for a gradient of a reals.",
    accepts: "the whole scalar language",
};

/// `Dfwd{A}` (Fig. 3): R ↦ R × δR, homomorphic elsewhere.
pub fn dual_type(t: &Type) -> Type {
    with_real(t, &Type::tup(vec![Type::Real, Type::Real]))
}

/// `Dfwd{e}` (Fig. 3): the kit's homomorphic translation with Fig. 3's rules for reals.
struct Dfwd;

impl DualRule for Dfwd {
    fn ty(&self, t: &Type) -> Type {
        dual_type(t)
    }
    /// Dfwd{r} = (r, 0)
    fn constant(&self, _: &mut Fresh, c: Expr) -> Expr {
        pair(c, real(0.0))
    }
    fn names(&self, arity: usize) -> (&'static [(&'static str, &'static str)], &'static str) {
        if arity == 1 {
            (&[("x", "dx")], "y")
        } else {
            (&[("x", "dx"), ("y", "dy")], "r")
        }
    }
    /// Fig. 3's `+R` and `×R`, and Fig. 14's general rule: the tangent is Σ ∂ᵢop · dxᵢ.
    fn companion(&self, _: &mut Fresh, partials: &[Partial], ds: &[Expr], _: Span) -> Expr {
        deriv::linear_combination(partials, ds)
    }
    /// comparisons need no tangents: let (x, _) = Dfwd{e1} in ...
    fn wild_unused(&self) -> bool {
        true
    }
    /// a constant's tangent is a structural zero: its term is left out (deriv::is_constant)
    fn skips_constants(&self) -> bool {
        true
    }
}

/// `zip_S : S × δS → Dfwd{S}` (Fig. 15): pairs each real of s with its tangent in ds. The tangent has
/// the input's tags (it is made from the input); where they differ, the tangents are zero.
fn zip_s(ty: &Type, s: Expr, ds: Expr, fr: &mut Fresh) -> Expr {
    let zero = |t: &Type, x: Expr, fr: &mut Fresh| {
        let zeros = map_shape(t, x.clone(), fr, &|t, v, _| if *t == Type::Real { real(0.0) } else { v });
        zip_s(t, x, zeros, fr)
    };
    let z = Zip {
        names: ["s", "ds"],
        keep: &|_| true,
        leaf: &|t, s, ds| if *t == Type::Real { pair(s, ds) } else { s },
        tuple: &tuple,
        inject: &|right, e| if right { inr(e) } else { inl(e) },
        mismatch: &zero,
        array: &|elems| elems,
    };
    zip_shape(ty, s, ds, fr, &z)
}

impl Stage for Forward {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut fr = Fresh::new(src.program);
        let mut out = src.program.clone();
        for d in &mut out.defs {
            d.body = dual(&d.body, &mut fr, &Dfwd);
            d.scheme = None;
        }
        let (s, t) = (src.input_type, src.output_type);
        // F{e} = λ(s, ds, dt). let out = Dfwd{main} (zip_S (s, ds)) in (primal_T out, dt ⊙_T delta_T out)
        let (ns, nds, ndt, nout) = (fr.name("s"), fr.name("ds"), fr.name("dt"), fr.name("out"));
        let run = app(global("main"), app(global("zip_S"), pair(var(&ns), var(&nds))));
        let body = let_(
            pvar(&nout),
            run,
            pair(app(global("primal_T"), var(&nout)), app(global("dot_T"), pair(var(&ndt), app(global("tangent_T"), var(&nout))))),
        );
        let (x, y, z) = (fr.name("x"), fr.name("v"), fr.name("dv"));
        let zip = lam(ppair(pvar(&x), pvar(&z)), zip_s(s, var(&x), var(&z), &mut fr));
        let primal = lam(pvar(&y), map_shape(t, var(&y), &mut fr, &|t, v, _| if *t == Type::Real { fst(v) } else { v }));
        let (y2, a, bb) = (fr.name("v"), fr.name("a"), fr.name("b"));
        let tangent = lam(pvar(&y2), map_shape(t, var(&y2), &mut fr, &|t, v, _| if *t == Type::Real { snd(v) } else { v }));
        let dot = lam(ppair(pvar(&a), pvar(&bb)), dot(t, var(&a), var(&bb), &mut fr));
        out.defs.push(def("zip_S", zip));
        out.defs.push(def("primal_T", primal));
        out.defs.push(def("tangent_T", tangent));
        out.defs.push(def("dot_T", dot));
        out.defs.push(def("fwd", lam(ptuple(vec![pvar(&ns), pvar(&nds), pvar(&ndt)]), body)));
        out.expects.clear();
        out.input = None;
        out.seed = None;
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        let (s, t) = (src.input_type, src.output_type);
        vec![
            ("main".into(), Type::fun(dual_type(s), dual_type(t))),
            ("fwd".into(), Type::fun(Type::tup(vec![s.clone(), s.clone(), t.clone()]), Type::tup(vec![t.clone(), Type::Real]))),
        ]
    }

    /// The Forward Plan (§3.2): F{e} once per real input, in the direction of that input.
    fn run(&self, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
        let (input, seed) = (cx.input, cx.seed);
        let n = input.real_leaves().len();
        let mut grads = Vec::with_capacity(n);
        let mut primal = None;
        for j in 0..n {
            let dir = input.with_reals(&mut (0..n).map(|i| if i == j { 1.0 } else { 0.0 }));
            let out = m.call("fwd", vec![Value::tuple(vec![input.clone(), dir, seed.clone()])])?;
            let (p, g) = split_pair(out)?;
            grads.push(g.as_real().unwrap_or(f64::NAN));
            primal = Some(p);
        }
        let primal = match primal {
            Some(p) => p,
            // No real inputs: run once with the input as its own (real-free) direction, for the primal.
            None => split_pair(m.call("fwd", vec![Value::tuple(vec![input.clone(), input.clone(), seed.clone()])])?)?.0,
        };
        Ok((primal, input.with_reals(&mut grads.into_iter())))
    }
}
