//! `krawiec/general`: arbitrary first-order S and T, Krawiec et al. §11, Fig. 15. The translation,
//! Delta and eval are those of `krawiec/monadic` unchanged; only the wrapper changes. Its polytypic
//! helpers — initVars_S, initZeros_T, the dot product ⊙_T (inside the differentiated program),
//! lookup_S — are generated per type as IR, so they print.

use crate::kit::delta::delta_type;
use crate::kit::delta::drev::{drev_program, drev_type, m_type};
use super::common::eval::{graph_of_state, map_builtins, map_type};
use super::common::monad::{b_run_delta, monad_builtins};
use super::common::wrapper::wrapper_type;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Graph, Machine};
use crate::ir::*;
use crate::kit::polytypic::{dot, map_shape, map_shape_acc};
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};
use crate::types;

pub struct General;

static INFO: StageInfo = StageInfo {
    id: "krawiec/general",
    paper: "Krawiec et al. 2022",
    section: "§11, Fig. 15",
    title: "Arbitrary first-order S and T: sums and integer leaves in the input and output",
    explanation: "The translation Drev, the Delta type and eval are unchanged from krawiec/monadic; only the wrapper \
generalises from R^a → R to any first-order S → T, with polytypic helpers generated per type. initVars_S walks the \
input left to right pairing each real with Var of a fresh DeltaId (integer leaves and sum tags are untouched) and \
returns the last id used; initZeros_T pairs each real of the output cotangent dt with Zero. The dot product is put \
inside the differentiated program: Drev is applied to λ(s, dt). e s ⊙_T dt, with ⊙_T expanded into + and × (so it \
makes bindings of its own), which returns one real, so runDelta applies and eval is seeded with 1 rather than dt. \
lookup_S walks the dualised input and replaces each (s_i, Var id) by lookupOrZero id finalMap, so the gradient has \
the input's shape, tags and integer leaves. (Ours also returns e s, to hand back the primal.)",
    complexity: "as krawiec/monadic: O(T + |S| + |T|) forward, eval O((T + |T|) log T) with the persistent map.",
    accepts: "the whole scalar language; main : S → T for any first-order S and T",
};

/// `initVars_A (x, n) : Drev{A} × DeltaId` at a leaf: `initVars_R (r, n) = ((r, Var (n + 1)), n + 1)`,
/// `initVars_L (k, n) = (k, n)`; tuples and sums thread n left to right (kit::polytypic::map_shape_acc).
fn init_var(ty: &Type, x: Expr, n: Expr) -> Expr {
    if *ty == Type::Real {
        pair(pair(x, app(builtin("Var"), add(n.clone(), int(1)))), add(n, int(1)))
    } else {
        pair(x, n)
    }
}

/// The definitions this stage adds to the source before transforming it.
const GENERATED: [&str; 7] = [crate::stage::WRAPPER, "dot_T", "mainDot", "initVars_S", "initZeros_T", "lookup_S", "primal_T"];

impl Stage for General {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        // runDelta : DeltaId → M (a × (R × Delta)) → a × (R × Delta): the differentiated program
        // returns (e s, e s ⊙ dt); the Delta of the dot product is wrapped in the bindings.
        let a = Type::Var(0);
        let res = Type::tup(vec![a, Type::tup(vec![Type::Real, delta_type()])]);
        let scheme = Scheme { vars: vec![0], ty: Type::fun(Type::Int, Type::fun(m_type(res.clone()), res)) };
        let mut bs = monad_builtins(scheme, b_run_delta);
        bs.extend(map_builtins());
        bs
    }

    fn round_calls(&self) -> Option<&'static crate::interp::RoundCalls> {
        Some(&super::common::monad::ROUND_CALLS)
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let (s, t) = (src.input_type, src.output_type);
        // This stage type-checks the program it builds before it returns (Fig. 15's λ(s, dt) is itself
        // transformed), so it renames source definitions named like the ones it adds first; the
        // pipeline's renaming by role comes only after a transform.
        let mut p = crate::stage::without_reserved(src.program, &GENERATED);
        let mut fr = Fresh::new(&p);
        // The program Fig. 15 differentiates, λ(s, dt). e s ⊙_T dt, with ⊙_T expanded (note §7.4), as
        // source definitions (ours also returns e s, for the primal):
        //   dot_T (a, b) = a ⊙_T b
        //   mainDot (s, dt) = let t = main s in (t, dot_T (t, dt))
        let (na, nb) = (fr.name("a"), fr.name("b"));
        let dot_body = dot(t, var(&na), var(&nb), &mut fr);
        p.defs.push(def("dot_T", lam(ppair(pvar(&na), pvar(&nb)), dot_body)));
        let (ns, ndt, nt) = (fr.name("s"), fr.name("dt"), fr.name("t"));
        let md = let_(pvar(&nt), app(global("main"), var(&ns)), pair(var(&nt), app(global("dot_T"), pair(var(&nt), var(&ndt)))));
        p.defs.push(def("mainDot", lam(ppair(pvar(&ns), pvar(&ndt)), md)));
        p.next_id = fr.next_id;
        // at main's type as the pipeline fitted it to the input (arithmetic main's body leaves
        // open is main's R or Z, not R by default: `main x = x * x` on an integer)
        types::check_program_fitted(&mut p, &Type::fun(s.clone(), t.clone()))
            .map_err(|d| Diagnostic::error(Span::NONE, format!("internal error: λ(s, dt). e s ⊙_T dt does not type-check: {}", d.message)))?;
        let (mut out, laws) = drev_program(&p, &mut fr, crate::kit::delta::drev::Naming::DeltaLet)?;

        // initVars_S : S × DeltaId → Drev{S} × DeltaId
        let (x, n) = (fr.name("s"), fr.name("n"));
        let iv = map_shape_acc(s, var(&x), var(&n), &mut fr, &init_var);
        out.defs.push(def("initVars_S", lam(ppair(pvar(&x), pvar(&n)), iv)));
        // initZeros_T : δT → Drev{δT}: each real r ↦ (r, Zero)
        let y = fr.name("dt");
        let iz = map_shape(t, var(&y), &mut fr, &|t, v, _| if *t == Type::Real { pair(v, builtin("Zero")) } else { v });
        out.defs.push(def("initZeros_T", lam(pvar(&y), iz)));
        // lookup_S : DeltaMap × Drev{S} → δS: (s_i, Var uid) ↦ lookupOrZero uid finalMap
        let (um, s0) = (fr.name("m"), fr.name("s0"));
        let um2 = um.clone();
        let lk = map_shape(s, var(&s0), &mut fr, &move |t, v, fr| {
            if *t == Type::Real {
                let u = fr.name("u");
                let_(ppair(pwild(), pvar(&u)), v, apps(builtin("lookupDelta"), [var(&u), var(&um2)]))
            } else {
                v
            }
        });
        out.defs.push(def("lookup_S", lam(ppair(pvar(&um), pvar(&s0)), lk)));
        // primal_T : Drev{T} → T (to hand back the primal)
        let v = fr.name("v");
        let pr = map_shape(t, var(&v), &mut fr, &|t, v, _| if *t == Type::Real { fst(v) } else { v });
        out.defs.push(def("primal_T", lam(pvar(&v), pr)));

        // R{e} = λ(s, dt).
        //   let (s0, dv) = initVars_S (s, 0) in
        //   let dt0 = initZeros_T dt in            (Fig. 15 writes `let t0 = ...` and uses dt0: one variable)
        //   let u = runDelta (dv + 1) (Drev{λ(s, dt). e s ⊙_T dt} (s0, dt0)) in
        //   let finalMap = eval 1 u emptyMap in
        //   lookup_S (finalMap, s0)
        let (gs, gdt, gs0, dv, dt0, t0, u, fm) = (
            fr.name("s"),
            fr.name("dt"),
            fr.name("s0"),
            fr.name("dv"),
            fr.name("dt0"),
            fr.name("t0"),
            fr.name("u"),
            fr.name("finalMap"),
        );
        let run = apps(builtin("runDelta"), [add(var(&dv), int(1)), app(global("mainDot"), pair(var(&gs0), var(&dt0)))]);
        let body = let_(
            ppair(pvar(&gs0), pvar(&dv)),
            app(global("initVars_S"), pair(var(&gs), int(0))),
            let_(
                pvar(&dt0),
                app(global("initZeros_T"), var(&gdt)),
                let_(
                    ppair(pvar(&t0), ppair(pwild(), pvar(&u))),
                    run,
                    let_(
                        pvar(&fm),
                        apps(builtin("eval"), [real(1.0), var(&u), builtin("emptyMap")]),
                        pair(app(global("primal_T"), var(&t0)), app(global("lookup_S"), pair(var(&fm), var(&gs0)))),
                    ),
                ),
            ),
        );
        out.defs.push(def(WRAPPER, lam(ppair(pvar(&gs), pvar(&gdt)), body)));
        out.next_id = fr.next_id;
        Ok(Output { views: vec![laws.view(crate::kit::monad_laws::VIEW)], ..Output::from(out) })
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        let (s, t) = (src.input_type, src.output_type);
        let (ds, dtt) = (drev_type(s), drev_type(t));
        let delta_pair = Type::tup(vec![Type::Real, delta_type()]);
        let mut v = vec![
            ("mainDot".to_string(), Type::fun(Type::tup(vec![ds.clone(), dtt.clone()]), m_type(Type::tup(vec![dtt.clone(), delta_pair])))),
            ("initVars_S".into(), Type::fun(Type::tup(vec![s.clone(), Type::Int]), Type::tup(vec![ds.clone(), Type::Int]))),
            ("initZeros_T".into(), Type::fun(t.clone(), dtt.clone())),
            ("lookup_S".into(), Type::fun(Type::tup(vec![map_type(), ds.clone()]), s.clone())),
            (WRAPPER.into(), wrapper_type(s, t)),
        ];
        if src.program.def("main").is_some_and(|d| matches!(d.body.kind, ExprKind::Lam(..))) {
            v.push(("main".into(), Type::fun(ds, m_type(dtt))));
        }
        v
    }

    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        graph_of_state(m)
    }
}
