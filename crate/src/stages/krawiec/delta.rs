//! `krawiec/delta`: reverse mode #2, Krawiec et al. §6, Figs. 7–8. The dense δS vector of
//! `krawiec/dense` becomes a symbolic term, `Delta = Zero | OneHot N | Scale R Delta | Add Delta Delta`,
//! built in O(1) per operation and interpreted once at the end by `eval2` into one accumulator that
//! is updated in place (`updateAt`). Deltas share physically (a node of the run's arena, referred to
//! by its index), so the forward pass stays linear, but eval2 walks the DAG as a tree: on
//! `let y = e in y + y` it walks e twice, and on the doubling chain its visits grow as 2^n.

use crate::kit::delta::{delta_arg, delta_ctor_builtins, delta_type, int_arg, mk, real_arg, DeltaRef, Ix, Kind, STATE_ROWS};
use crate::kit::delta::dual::{dual_program, dual_stated_types, DeltaCompanion};
use crate::kit::delta::graph::{delta_graph, Visits};
use super::common::wrapper::require_ra_to_r;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Graph, Machine, RunError, TraceStep, Shown};
use crate::ir::*;
use crate::kit::polytypic::{count_reals, ra_expr, ra_pat};
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};
use crate::value::{show_real, Value};

pub struct Delta;

static INFO: StageInfo = StageInfo {
    id: "krawiec/delta",
    paper: "Krawiec et al. 2022",
    section: "§6, Figs. 7–8",
    title: "Reverse mode #2: Delta terms, evaluated once by eval2",
    explanation: "Instead of carrying a dense δS vector with every real, carry a small symbolic description of it: \
Delta = Zero | OneHot i | Scale r u | Add u1 u2, a defunctionalised linear function. Drev2{R} = R × Delta, and the \
translation is no longer indexed by S: literals get Zero, +R builds Add u1 u2 and ×R builds \
Add (Scale y u1) (Scale x u2), each O(1). The wrapper R2{e} seeds input i with OneHot i and runs eval2 dt u z, which \
walks the Delta once, multiplying the Scale factors along each path and adding them into one accumulator with \
updateAt, in place. The O(a) cost per operation is gone, but sharing is lost: the Delta is a DAG in memory (one node, referred to twice), yet \
eval2 has no way to know that two occurrences of the same sub-Delta are the same, so on `let y = e in y + y` it walks \
e twice, and on the chain `let x1 = x + x in … in xn + xn` it makes 2^(n+2) − 1 visits (counter eval_visits; the \
graph shows how often each shared node was visited).",
    complexity: "forward pass O(T); eval2 O(size of the Delta unfolded into a tree), up to O(2^T).",
    accepts: "the whole scalar language inside main; main itself must have type R^a → R (Fig. 8; OneHot needs S = R^a)",
};

// ---------------------------------------------------------------------------------------------
// eval2 (Fig. 8)
// ---------------------------------------------------------------------------------------------

/// `OneHot i` (Fig. 7): only this stage seeds inputs with it (S = R^a).
fn b_onehot(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let i = int_arg(&args[0], span, "OneHot")?;
    mk(m, Kind::OneHot(i))
}

/// The runtime state of `krawiec/delta`: the Delta eval2 was given, and its visits per node.
#[derive(Default)]
pub struct Eval2State {
    pub root: Option<DeltaRef>,
    pub visits: Visits,
}

/// `eval2 : R → Delta → R^a ⊸ R^a` (Fig. 8). The vector is any value; its reals, left to right, are
/// the slots `updateAt i` adds to (1-based), mutated in place (the vector is used linearly), and the
/// result has the vector's shape. Iterative over an explicit stack; one `tick` per visit, so that the
/// steps budget stops the exponential walk cleanly with the counts reached.
fn b_eval2(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let dt = real_arg(&args[0], span, "eval2")?;
    let root = delta_arg(&args[1], span, "eval2")?;
    let mut acc = args[2].real_leaves();
    let mut visits = Visits::of(m);
    let mut res = eval2_loop(m, dt, &root, &mut acc, &mut visits, span);
    visits.flush(m, &mut res);
    let st = m.state::<Eval2State>();
    st.root = Some(root);
    st.visits.merge(visits);
    res?;
    Ok(args[2].with_reals(&mut acc.into_iter()))
}

fn eval2_loop(m: &mut Machine, dt: f64, root: &DeltaRef, acc: &mut [f64], visits: &mut Visits, span: Span) -> Result<(), RunError> {
    let Ok(ar) = root.arena.try_borrow() else { return Err(RunError::runtime(span, "eval2: the Delta is being built")) };
    let mut stack: Vec<(f64, Ix)> = vec![(dt, root.ix)];
    while let Some((x, n)) = stack.pop() {
        visits.visit(n as u64);
        m.tick(1)?;
        let k = ar.kind(n);
        match k {
            // eval2 x Zero xs = xs
            Kind::Zero => {}
            // eval2 x (OneHot i) xs = updateAt i x xs
            Kind::OneHot(i) => {
                if i < 1 || i as usize > acc.len() {
                    return Err(RunError::runtime(span, format!("eval2: OneHot {i} is outside the input's 1..{} reals", acc.len())));
                }
                acc[i as usize - 1] += x;
                m.real_op();
            }
            // eval2 x (Scale y u) xs = eval2 (x × y) u xs
            Kind::Scale(y, u) => {
                m.real_op();
                stack.push((x * y, u));
            }
            // eval2 x (Add u1 u2) xs = eval2 x u2 (eval2 x u1 xs): u1 first
            Kind::Add(a, b) => {
                stack.push((x, b));
                stack.push((x, a));
            }
            Kind::Var(_) | Kind::Let(..) | Kind::Input(_) | Kind::Share(..) => {
                return Err(RunError::runtime(span, "eval2: Var and Let are not in Fig. 7's Delta (they come with §7)"))
            }
        }
        if m.tracing() {
            let note = match k {
                Kind::OneHot(i) => format!("updateAt {i} ({})", show_real(x)),
                Kind::Scale(y, _) => format!("Scale {}: factor becomes {}", show_real(y), show_real(x * y)),
                Kind::Add(..) => "Add: u1, then u2".to_string(),
                _ => "Zero: nothing to add".to_string(),
            };
            let state = acc.iter().take(STATE_ROWS).enumerate().map(|(i, v)| (format!("{}", i + 1), Shown::from(*v))).collect();
            let span = ar.span(n);
            let span = (!span.is_none()).then_some(span);
            m.trace(TraceStep { kind: "eval2".into(), node: Some(n as u64), span, factor: Some(x.into()), note, state, ..TraceStep::default() });
        }
    }
    Ok(())
}

impl Stage for Delta {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let mut bs = delta_ctor_builtins();
        bs.push(Builtin {
            name: "OneHot",
            scheme: Scheme::mono(Type::fun(Type::Int, delta_type())),
            arity: 1,
            lazy_last: false,
            run: b_onehot,
        });
        // eval2 : R → Delta → R^a ⊸ R^a (any shape of reals: the input's)
        let a = Type::Var(0);
        bs.push(Builtin {
            name: "eval2",
            scheme: Scheme { vars: vec![0], ty: Type::fun(Type::Real, Type::fun(delta_type(), Type::lin(a.clone(), a))) },
            arity: 3,
            lazy_last: false,
            run: b_eval2,
        });
        bs
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        require_ra_to_r(src, "krawiec/delta", "Fig. 8 (R2{e}; OneHot works only for S = R^a)")
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut fr = Fresh::new(src.program);
        let mut out = dual_program(src, &mut fr, &DeltaCompanion);
        let s = src.input_type;
        let a = count_reals(s);
        // R2{e} = λ((..., s_i, ...), dt).
        //   let s0 = (..., (s_i, OneHot i), ...) in let z = (..., 0, ...) in
        //   let (t, u) = Drev2{e} s0 in eval2 dt u z          (returning t too)
        let names: Vec<Name> = (0..a).map(|_| fr.name("s")).collect();
        let (dt, s0, z, t, u) = (fr.name("dt"), fr.name("s0"), fr.name("z"), fr.name("t"), fr.name("u"));
        let seeds = ra_expr(s, &mut 0, &mut |i| pair(var(&names[i as usize - 1]), app(builtin("OneHot"), int(i))));
        let zeros = ra_expr(s, &mut 0, &mut |_| real(0.0));
        let body = let_(
            pvar(&s0),
            seeds,
            let_(
                pvar(&z),
                zeros,
                let_(
                    ppair(pvar(&t), pvar(&u)),
                    app(global("main"), var(&s0)),
                    pair(var(&t), apps(builtin("eval2"), [var(&dt), var(&u), var(&z)])),
                ),
            ),
        );
        let param = ppair(ra_pat(s, &mut names.iter().cloned()), pvar(&dt));
        out.defs.push(def(WRAPPER, lam(param, body)));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        dual_stated_types(src, &DeltaCompanion)
    }

    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        let st = m.state::<Eval2State>();
        let root = st.root.clone()?;
        Some(delta_graph(&root, &st.visits, &Default::default()))
    }
}
