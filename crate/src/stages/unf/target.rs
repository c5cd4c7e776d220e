//! `unf/target`: the reverse-mode transformation `D←_ρ` on Source UNF, Huot & Shaikhha §4.2–4.3
//! (Fig. 7's Target UNF, Fig. 8's rules), with Fig. 4's gradient wrapper. Every primitive p becomes
//! `F(p, J^T p) = < proj ; p , proj ∘ (proj ; J^T p) >`: on the object `T, (T̲ → ρ)` (the primal context
//! and a continuation), run p on the primal context and precompose the continuation with `J^T p`
//! taken at that primal context. `D←_ρ(e1 ; e2) = D←_ρ(e1) ; D←_ρ(e2)`.
//!
//! The program is the executable reading of the Target UNF term: F's two components are bound in
//! turn, the new context tuple (as `unf/source` rebinds it) and the continuation
//! `Yk = fun (y1, …, ym) → Y(k-1)(J^T p …)`, whose J^T is read as Fig. 10 reads it (with the note's
//! corrections, see common/jacobian.rs); the lets J^T needs at the primal context (reduce's scans)
//! sit inside the continuation, as J^T p is one function of the cotangents there. The nested
//! gradients of map2 and reduce bodies are taken by the UNF route itself (common/jacobian.rs).

use super::common::jacobian::{context_step, cotangents, jt};
use super::common::unf::Unf;
use super::common::*;
use crate::build::*;
use crate::diag::Diagnostic;
use crate::features::Features;
use crate::interp::{Graph, Machine, RunError};
use crate::ir::*;
use crate::value::Value;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, View};
use crate::types::show;

pub struct UnfTarget;

static INFO: StageInfo = StageInfo {
    id: "unf/target",
    paper: PAPER,
    section: "§4.2–4.3, Figs. 7–8",
    title: "Reverse mode on UNF: each primitive p becomes F(p, Jᵀp)",
    explanation: "On Unary Normal Form, reverse mode is a map over the sequence: D←_ρ(e1 ; e2) = \
D←_ρ(e1) ; D←_ρ(e2), and each primitive p becomes F(p, Jᵀp), which carries the primal context T and a \
continuation T̲ → ρ. F runs p on the primal context and precomposes the continuation with p's transposed \
Jacobian at that context, so the continuation of the whole term maps the result's cotangent back to the \
context's (Lemma 4.3). Compare the one rule per primitive here with Fig. 5's rules for every construct. \
The program shown reads the Target UNF term: each step rebinds the whole context and defines the next \
continuation; the wrapper applies the last one to (0_Γ, dt) (Fig. 4).",
    complexity: "O(n · |Γ|): every step carries and every continuation copies the whole context.",
    accepts: ACCEPTS,
};

/// The Target UNF term `D←_ρ(e)` (Fig. 8), one `F(p, Jᵀp)` per line with the object after it.
fn target_term(u: &Unf) -> String {
    let mut out = format!(
        "{}, ({} → ρ)\n",
        u.input.iter().map(|s| show(&s.ty)).collect::<Vec<_>>().join(", "),
        product(&u.input.iter().map(|s| s.ty.clone()).collect::<Vec<_>>())
    );
    for (st, before) in u.contexts() {
        let Some(st) = st else { break };
        let p = st.paper(&before);
        let mut after = before;
        st.apply(&mut after);
        let tys: Vec<Type> = after.iter().map(|s| s.ty.clone()).collect();
        let list = tys.iter().map(show).collect::<Vec<_>>().join(", ");
        out.push_str(&format!("; F({p}, Jᵀ{p})\n      : {}{}({} → ρ)\n", list, if list.is_empty() { "" } else { ", " }, product(&tys)));
    }
    out
}

/// `T̲`: the product of a context's types.
fn product(ts: &[Type]) -> String {
    if ts.is_empty() {
        "()".into()
    } else {
        ts.iter().map(show).collect::<Vec<_>>().join(" × ")
    }
}

impl Stage for UnfTarget {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn supports(&self) -> Features {
        supports_source()
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        accepts_source(src)
    }

    /// `grad (s, dt) = let p = s in` the steps from `Y0 = Id_Γ`, then `(r, Yn(0_Γ, dt))` (Fig. 4's ∇_Γ
    /// with the output cotangent dt for the paper's 1), the cotangents rebuilt in main's input shape.
    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let (p, pat, u, mut fr) = source_unf(src)?;
        let mut binds = vec![];
        let id = fr.name("Id");
        let ys = cotangents(u.input.len(), &mut fr);
        binds.push((pvar(&id), lam(ptuple(ys.iter().map(pvar).collect()), tuple(ys.iter().map(var).collect()))));
        let mut y = id;
        let mut atoms: Vec<Expr> = u.input.iter().map(|s| var(&s.name)).collect();
        for (k, (st, before)) in u.contexts().enumerate() {
            let Some(st) = st else { break };
            let mut after = before.clone();
            st.apply(&mut after);
            // F's first component: p on the primal context
            let (pt, rhs, next) = context_step(st, &atoms, &after, &mut fr);
            binds.push((pt, rhs));
            // F's second component: the continuation precomposed with J^T p at the primal context
            let pushed = st.push.as_ref().and_then(|_| next.last());
            let cs = cotangents(after.len(), &mut fr);
            let j = jt(st, &before, &atoms, pushed, &y, cs.iter().map(var).collect(), &mut fr)?;
            let body = j.pre.into_iter().rev().fold(j.call, |acc, (p, e)| let_(p, e, acc));
            let y2 = fr.name(&format!("Y{}", k + 1));
            binds.push((pvar(&y2), lam(ptuple(cs.iter().map(pvar).collect()), body)));
            y = y2;
            atoms = next;
        }
        let result = atoms.pop().unwrap_or_else(unit);
        let (s, dt) = (fr.name("s"), fr.name("dt"));
        let gs = cotangents(u.input.len(), &mut fr);
        let zeros: Vec<Expr> = u.input.iter().map(|sl| zero(&sl.ty, var(&sl.name), &mut fr)).collect();
        let grads = call_last(&y, zeros, &dt, &gs, result, &pat);
        let body = binds.into_iter().rev().fold(grads, |acc, (p, e)| let_(p, e, acc));
        let out = wrapper_program(&p, &s, &dt, let_(pat, var(&s), body), fr.next_id);
        let views = if crate::stage::shown() { vec![View { name: "Target UNF".into(), text: target_term(&u), ..View::default() }] } else { vec![] };
        Ok(Output { program: out, builtins: vec![], views, steps: vec![] })
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        grad_type(src)
    }

    /// The wrapper, with every continuation call recorded (`line::run`).
    fn run(&self, m: &mut Machine, cx: &RunCtx) -> Result<(Value, Value), RunError> {
        line::run(m, cx)
    }

    /// The line of continuations Y_k → … → Id.
    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        line::graph(m)
    }
}
