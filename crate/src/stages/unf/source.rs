//! `unf/source`: the UNF transformation of Huot & Shaikhha §4.1 and §4.4 (Fig. 6's Source UNF, Fig. 9's
//! transformation with the weakening `(ẽ)_A` the note reconstructs — free here, the slots being named).
//! A same-function stage: its program is the semantic reading of the UNF term, each primitive a
//! function on the whole context tuple and `;` the let-sequencing of that tuple (Ex. 4.1's
//! `let (x1, x2, x3, x4) = (x1, x2, x3, cos x3) in …`), ending with the last slot projected out.
//! The stack diagram (one row per primitive, with its input and output contexts) is a view.

use super::common::jacobian::context_step;
use super::common::*;
use crate::build::*;
use crate::diag::Diagnostic;
use crate::features::Features;
use crate::ir::*;
use crate::stage::{Contract, Output, Source, Stage, StageInfo, View};

pub struct UnfSource;

static INFO: StageInfo = StageInfo {
    id: "unf/source",
    paper: PAPER,
    section: "§4.1, §4.4, Figs. 6 and 9",
    title: "Unary Normal Form: a point-free sequence of primitives over the whole context",
    explanation: "The source term becomes a composition p1 ; p2 ; … of unary primitives, each taking the \
whole context (a stack of slots: the variables in scope and the values computed so far) and returning it \
extended by one slot (var, op, πi, map2, reduce), or shrunk (pair joins the top slots, proj forgets the \
slots a let or an argument no longer needs). Fig. 9 sequentialises left to right, as call-by-value \
evaluation does; a later argument runs on the context that the earlier ones extended (the weakening ẽ_A). \
The program shown is the semantic reading of the UNF term: each primitive rebinds the whole context \
tuple, and the result is the last slot. The stack diagram lists each primitive with its input and \
output contexts.",
    complexity: "O(n · |Γ|): n primitives, each carrying the whole context (UNF⁻¹ later binds only the pushed slot).",
    accepts: ACCEPTS,
};

impl Stage for UnfSource {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn contract(&self) -> Contract {
        Contract::SameFunction
    }

    fn supports(&self) -> Features {
        supports_source()
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        accepts_source(src)
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let (p, pat, u, mut fr) = source_unf(src)?;
        let mut binds = vec![];
        let mut atoms: Vec<Expr> = u.input.iter().map(|s| var(&s.name)).collect();
        for (st, before) in u.contexts() {
            let Some(st) = st else { break };
            let mut after = before;
            st.apply(&mut after);
            let (pt, rhs, next) = context_step(st, &atoms, &after, &mut fr);
            binds.push((pt, rhs));
            atoms = next;
        }
        let result = atoms.pop().unwrap_or_else(unit);
        let body = binds.into_iter().rev().fold(result, |acc, (p, e)| let_(p, e, acc));
        let mut main = def("main", lam(pat, body));
        main.role = Role::User;
        let out = with_defs(&p, vec![main], fr.next_id);
        // (views only for a stage shown: the stack diagram is a third of this stage's time)
        let views = if crate::stage::shown() {
            vec![
                View { name: "stack diagram".into(), text: u.table(), stack: u.rows(), ..View::default() },
                View { name: "Source UNF term".into(), text: u.term(), ..View::default() },
            ]
        } else {
            vec![]
        };
        Ok(Output { program: out, builtins: vec![], views, steps: vec![] })
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        vec![("main".into(), Type::fun(src.input_type.clone(), src.output_type.clone()))]
    }
}
