//! Source UNF (§4.1, Fig. 6) as data, and the UNF transformation (§4.4, Fig. 9).
//!
//! A Source UNF term is a sequence of primitives `p1 ; p2 ; …`, each acting on the whole context (a
//! stack of slots) and returning it, extended or shrunk. Slots are *named* (the note §3.4's hint):
//! each remembers the Source variable or temporary it holds, so the weakening `(ẽ)_A` of Fig. 9 is
//! the identity (a later argument simply runs on the longer stack) and positions — the paper's
//! indices `var_{T;i}`, `proj_{T1;T2;T3}` — are computed for display only.

use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::ir::Prim as P;
use crate::print::{print_expr, PrintOptions};
use crate::types::show;

/// A slot of the context: the variable (or temporary) it holds and its ground type.
#[derive(Clone, Debug)]
pub struct Slot {
    pub name: Name,
    pub ty: Type,
}

/// A primitive of Source UNF (Fig. 6), on a stack `T`.
#[derive(Clone, Debug)]
pub enum Op {
    /// `c_{T;0}`: a constant, "seen as a 0-ary operator" (Fig. 9).
    Const(Expr),
    /// `var_{T;i}`: `T ⊢ var_{T;i} : T, A_i` (0-based here, 1-based when shown).
    Var(usize),
    /// `op_{T;n}`: `T, R^n ⊢ op_{T;n} : T, R^n, R`.
    Prim(Prim, usize),
    /// `pair_{T;A×B}`, for tuples of any arity: `T, A1, …, An ⊢ pair : T, A1 × … × An`.
    Pair(usize),
    /// `proj_{T1;T2;T3}`: `T1, T2, T3 ⊢ proj : T1, T3` (|T1| = keep, |T2| = drop).
    Proj { keep: usize, drop: usize },
    /// `πi` as a unary operator (Fig. 9): `T, A1 × … × An ⊢ πi : T, A1 × … × An, Ai` (0-based i).
    Pi { i: usize, n: usize },
    /// `map2_{T;x,y.e}`: `T, A[R]^n, A[R]^n ⊢ map2 : T, A[R]^n, A[R]^n, A[R]^n`. `free` are the body's
    /// variables of the context, with their positions in T (the paper's `x1:A1..xn:An ⊢ e`).
    Map2 { f: Expr, free: Vec<(Name, usize)> },
    /// `reduce_{T;x,y.e1;e2}`: `T, A[R]^n ⊢ reduce : T, A[R]^n, R`; the initial value `e2` stays a
    /// Source term in context T (Fig. 9 does not sequentialise it), `free` the variables of it and of
    /// the function (§7.1: the function may have free variables).
    Reduce { f: Expr, init: Expr, free: Vec<(Name, usize)> },
    /// `map_{T;x.e}`: `T, A[R]^n ⊢ map : T, A[R]^n, A[R]^n` (ours, after A.3's map rule, Fig. 16; Fig. 4
    /// reads map as `map2 (x y. e) A A`, which sequentialises A twice). `free` as for map2.
    Map { f: Expr, free: Vec<(Name, usize)> },
    /// `fold_{T;x,y.e1}` (A.3's foldl, ours: the paper gives it no UNF, §7.3): `T, R, A[R]^n ⊢ fold : T, R,
    /// A[R]^n, R`. Unlike reduce's, its initial value is differentiated (Fig. 16), so it is
    /// sequentialised as an argument, as map2's arrays are; `free` the function's variables.
    Fold { f: Expr, free: Vec<(Name, usize)> },
    /// `if_{T;c;e2;e3}`: `T ⊢ if : T, A`, §7.2's conditional as one primitive. The paper gives no UNF
    /// for `if` (§7.3: a new construct needs only its transposed Jacobian), so the condition and both
    /// branches stay Source terms in context T, as reduce's initial value does; `free` are their
    /// variables of the context. Its J^T (common/jacobian.rs) is §7.2's "Solution".
    If { cond: Expr, then: Expr, els: Expr, free: Vec<(Name, usize)> },
}

/// One primitive of the sequence, the slot it pushes (if any), and the source construct it comes from.
#[derive(Clone, Debug)]
pub struct Step {
    pub op: Op,
    pub push: Option<Slot>,
    pub span: Span,
}

/// `T ⊢ p1 ; … ; pk : T'`: the input context and the primitives (`;` is associative: a flat list).
#[derive(Clone, Debug)]
pub struct Unf {
    pub input: Vec<Slot>,
    pub steps: Vec<Step>,
}

/// The most context slots a UNF term may carry over all its steps (the `UNF context` budget): each
/// primitive takes and returns the whole context, so a program of n steps over a context of |Γ| slots
/// is O(n·|Γ|) in size, printed once per step by the stages that show it.
pub const MAX_UNF_SLOTS: usize = 250_000;

impl Step {
    /// The stack after this step, from the stack before it.
    pub fn apply(&self, stack: &mut Vec<Slot>) {
        match &self.op {
            Op::Pair(n) => {
                stack.truncate(stack.len() - n);
            }
            Op::Proj { keep, drop } => {
                stack.drain(*keep..keep + drop);
            }
            _ => {}
        }
        if let Some(s) = &self.push {
            stack.push(s.clone());
        }
    }

    /// The primitive in the paper's notation, its indices from the stack before it (`cos_{R,R}`,
    /// `var_{R,R,R;2}`, `proj_{R,R;R;R}`).
    pub fn paper(&self, before: &[Slot]) -> String {
        let list = |ss: &[Slot]| if ss.is_empty() { "[]".to_string() } else { ss.iter().map(|s| show(&s.ty)).collect::<Vec<_>>().join(",") };
        let n = before.len();
        let o = PrintOptions::unicode();
        match &self.op {
            Op::Const(c) => format!("{}_{{{};0}}", print_expr(c, &o), list(before)),
            Op::Var(i) => format!("var_{{{};{}}}", list(before), i + 1),
            Op::Prim(p, k) => format!("{}_{{{}}}", p.symbol(), list(&before[..n - k])),
            Op::Pair(k) => {
                let ts: Vec<String> = before[n - k..].iter().map(|s| show(&s.ty)).collect();
                format!("pair_{{{};{}}}", list(&before[..n - k]), ts.join("×"))
            }
            Op::Proj { keep, drop } => {
                format!("proj_{{{};{};{}}}", list(&before[..*keep]), list(&before[*keep..keep + drop]), list(&before[keep + drop..]))
            }
            Op::Pi { i, .. } => format!("π{}_{{{}}}", i + 1, list(&before[..n - 1])),
            Op::Map2 { f, .. } => format!("map2_{{{};{}}}", list(&before[..n - 2]), print_expr(f, &o)),
            Op::Reduce { f, init, .. } => format!("reduce_{{{};{};{}}}", list(&before[..n - 1]), print_expr(f, &o), print_expr(init, &o)),
            Op::Map { f, .. } => format!("map_{{{};{}}}", list(&before[..n - 1]), print_expr(f, &o)),
            Op::Fold { f, .. } => format!("fold_{{{};{}}}", list(&before[..n - 2]), print_expr(f, &o)),
            Op::If { cond, then, els, .. } => {
                format!("if_{{{};{};{};{}}}", list(before), print_expr(cond, &o), print_expr(then, &o), print_expr(els, &o))
            }
        }
    }
}

/// One row of the stack diagram (the page draws the slots as columns).
pub use crate::stage::StackRow as Row;

impl Unf {
    /// The stack before each step, and after the last (`steps.len() + 1` contexts), in one pass.
    pub fn contexts(&self) -> impl Iterator<Item = (Option<&Step>, Vec<Slot>)> + '_ {
        let mut stack = self.input.clone();
        let mut i = 0;
        std::iter::from_fn(move || {
            if i > self.steps.len() {
                return None;
            }
            let out = (self.steps.get(i), stack.clone());
            if let Some(s) = self.steps.get(i) {
                s.apply(&mut stack);
            }
            i += 1;
            Some(out)
        })
    }

    /// The stack diagram: one row per primitive (§4.1, Ex. 4.1).
    pub fn rows(&self) -> Vec<Row> {
        let slot = |s: &Slot| format!("{}:{}", s.name.text, show(&s.ty));
        let mut rows = vec![];
        let mut stack = self.input.clone();
        for st in &self.steps {
            let before: Vec<String> = stack.iter().map(slot).collect();
            let n = stack.len();
            let (reads, forgets) = match &st.op {
                Op::Const(_) => (vec![], vec![]),
                Op::Var(i) => (vec![*i], vec![]),
                Op::Prim(_, k) => ((n - k..n).collect(), vec![]),
                Op::Pair(k) => ((n - k..n).collect(), (n - k..n).collect()),
                Op::Proj { keep, drop } => (vec![], (*keep..keep + drop).collect()),
                Op::Pi { .. } | Op::Reduce { .. } | Op::Map { .. } => (vec![n - 1], vec![]),
                Op::Map2 { .. } | Op::Fold { .. } => (vec![n - 2, n - 1], vec![]),
                Op::If { free, .. } => (free.iter().map(|(_, i)| *i).collect(), vec![]),
            };
            let primitive = st.paper(&stack);
            st.apply(&mut stack);
            rows.push(Row { primitive, input: before, output: stack.iter().map(slot).collect(), reads, forgets, pushes: st.push.as_ref().map(|_| stack.len() - 1) });
        }
        rows
    }

    /// The stack diagram as a readable table.
    pub fn table(&self) -> String {
        let rows = self.rows();
        let mut out = format!("input context: {}\n", self.input.iter().map(|s| format!("{}:{}", s.name.text, show(&s.ty))).collect::<Vec<_>>().join(", "));
        for (k, r) in rows.iter().enumerate() {
            out.push_str(&format!("{:>3}  {}\n       {}  →  {}\n", k + 1, r.primitive, r.input.join(", "), r.output.join(", ")));
        }
        out
    }

    /// The term `p1 ; p2 ; …` in the paper's notation.
    pub fn term(&self) -> String {
        self.contexts().filter_map(|(s, before)| s.map(|s| s.paper(&before))).collect::<Vec<_>>().join(" ;\n")
    }
}

/// Why a UNF term would be too large to build: a refusal (declined by design, as the chain's other
/// budgets in `first_order` are), found while building the term.
fn too_large(span: Span, size: usize) -> Diagnostic {
    Diagnostic::error(
        span,
        format!(
            "this program's UNF term would carry more than {MAX_UNF_SLOTS} context slots in all (about {size} so far), this chain's `UNF context` budget: every primitive of Source UNF takes and returns the whole context (§4.1), so the term is O(steps · |Γ|)"
        ),
    )
    .refused()
}

struct Builder<'a> {
    stack: Vec<Slot>,
    /// The step that pushed each slot (None for the input context).
    origin: Vec<Option<usize>>,
    steps: Vec<Step>,
    size: usize,
    fr: &'a mut Fresh,
}

/// `UNF(Γ ⊢ e)` (Fig. 9): `A1, …, An ⊢ UNF(e) : A1, …, An, B` (Lemma 4.4), `input` being Γ.
pub fn unf(input: Vec<Slot>, e: &Expr, fr: &mut Fresh) -> Result<Unf, Diagnostic> {
    let origin = vec![None; input.len()];
    let mut b = Builder { stack: input.clone(), origin, steps: vec![], size: 0, fr };
    b.go(e)?;
    Ok(Unf { input, steps: b.steps })
}

impl Builder<'_> {
    fn step(&mut self, op: Op, push: Option<(&str, Type)>, span: Span) -> Result<(), Diagnostic> {
        // a temporary is named after the step that pushes it (`v3`), as the paper numbers slots
        let k = self.steps.len() + 1;
        let push = push.map(|(text, ty)| Slot { name: self.fr.name(&format!("{text}{k}")), ty });
        let st = Step { op, push, span };
        let pushed_before = st.push.is_some();
        match &st.op {
            Op::Pair(n) => {
                let k = self.stack.len() - n;
                self.origin.truncate(k);
            }
            Op::Proj { keep, drop } => {
                self.origin.drain(*keep..keep + drop);
            }
            _ => {}
        }
        st.apply(&mut self.stack);
        if pushed_before {
            self.origin.push(Some(self.steps.len()));
        }
        self.steps.push(st);
        self.size = self.size.saturating_add(self.stack.len());
        if self.size > MAX_UNF_SLOTS {
            return Err(too_large(span, self.size));
        }
        Ok(())
    }

    /// Names the slot at `j` after a let's variable (named slots: the let rule's `x`).
    fn name_slot(&mut self, j: usize, n: &Name) {
        self.stack[j].name = n.clone();
        if let Some(Some(k)) = self.origin.get(j) {
            if let Some(s) = &mut self.steps[*k].push {
                s.name = n.clone();
            }
        }
    }

    /// Hides the `drop` slots below the top one: `proj_{Γ;T2;B}`.
    fn hide(&mut self, keep: usize, span: Span) -> Result<(), Diagnostic> {
        let drop = self.stack.len() - 1 - keep;
        if drop == 0 {
            return Ok(());
        }
        self.step(Op::Proj { keep, drop }, None, span)
    }

    /// The positions of `e`'s free variables in the context (a map2 body, a reduce initial value).
    fn free(&self, e: &Expr) -> Result<Vec<(Name, usize)>, Diagnostic> {
        crate::kit::passes::free_locals(e)
            .into_iter()
            .map(|n| match self.stack.iter().rposition(|s| s.name.id == n.id) {
                Some(i) => Ok((n, i)),
                None => Err(Diagnostic::error(e.span, format!("`{}` is not a variable of the context", n.text))),
            })
            .collect()
    }

    /// Appends `UNF(e)`: the stack grows by exactly one slot, `e`'s value.
    fn go(&mut self, e: &Expr) -> Result<(), Diagnostic> {
        use ExprKind::*;
        let g = self.stack.len();
        let sp = e.span;
        match &e.kind {
            // UNF(Γ ⊢ c) = c_{Γ;0}
            Real(_) | Unit => self.step(Op::Const(e.clone()), Some(("c", e.ty.clone())), sp),
            // UNF(Γ ⊢ x) = var_{Γ;i}
            Var(n) => {
                let Some(i) = self.stack.iter().rposition(|s| s.name.id == n.id) else {
                    return Err(Diagnostic::error(sp, format!("`{}` is not a variable of the context", n.text)));
                };
                let ty = self.stack[i].ty.clone();
                self.step(Op::Var(i), Some(("v", ty)), sp)
            }
            Ann(x_x) => { let (x, _) = &**x_x; self.go(x) },
            // UNF(Γ ⊢ let x = e1 in e2) = UNF(e1) ; UNF(e2) ; proj_{Γ;A;B}. A tuple pattern binds its
            // components as `let (a, b) = p` would by `let a = π1 p in let b = π2 p`: each `var ; πi ; proj`.
            ExprKind::Let(p_e1_e2) => {
                let (p, e1_e2) = &**p_e1_e2;
                let (e1, e2) = e1_e2;
                self.go(e1)?;
                self.bind(p, g, sp)?;
                self.go(e2)?;
                self.hide(g, sp)
            }
            // UNF(Γ ⊢ <e1, e2>) = UNF(e1) ; ~UNF(e2)_A ; pair_{Γ;A×B} (the weakening is free: named slots)
            Tuple(es) => {
                for a in es {
                    self.go(a)?;
                }
                self.step(Op::Pair(es.len()), Some(("p", e.ty.clone())), sp)
            }
            // UNF(Γ ⊢ πi(e)) = UNF(e) ; πi ; proj_{Γ;A1×A2;Ai}
            Fst(x) | Snd(x) => {
                self.go(x)?;
                let i = usize::from(matches!(e.kind, Snd(_)));
                self.step(Op::Pi { i, n: 2 }, Some(("v", e.ty.clone())), sp)?;
                self.hide(g, sp)
            }
            // UNF(Γ ⊢ map (x.e1) e2) = UNF(e2) ; map_{Γ;x.e1} ; proj_{Γ;A;A} (after Fig. 16's rule for map)
            Prim(P::Map, args) => {
                self.go(&args[1])?;
                let free = self.free(&args[0])?;
                self.step(Op::Map { f: args[0].clone(), free }, Some(("v", e.ty.clone())), sp)?;
                self.hide(g, sp)
            }
            // `sum A = reduce (x y. x + y) 0 A` (Ex. 1.2)
            Prim(P::Sum, args) => {
                let r = super::sum_as_reduce(e, &args[0], self.fr);
                self.go(&r)
            }
            // UNF(Γ ⊢ map2 (x,y.e1) e2 e3) = UNF(e2) ; ~UNF(e3) ; map2_{Γ;x,y.e1} ; proj_{Γ;A,A;A}
            Prim(P::Map2, args) => {
                self.go(&args[1])?;
                self.go(&args[2])?;
                let free = self.free(&args[0])?;
                self.step(Op::Map2 { f: args[0].clone(), free }, Some(("v", e.ty.clone())), sp)?;
                self.hide(g, sp)
            }
            // UNF(Γ ⊢ reduce (x,y.e1) e2 e3) = UNF(e3) ; reduce_{Γ;x,y.e1;e2} ; proj_{Γ;A[R]^n;R}
            // (the note's fix (c): the paper prints proj_{Γ;A[R]^n;A[R]^n})
            Prim(P::Reduce, args) => {
                self.go(&args[2])?;
                let mut free = self.free(&args[1])?;
                for v in self.free(&args[0])? {
                    if !free.iter().any(|(n, _)| n.id == v.0.id) {
                        free.push(v);
                    }
                }
                self.step(Op::Reduce { f: args[0].clone(), init: args[1].clone(), free }, Some(("v", e.ty.clone())), sp)?;
                self.hide(g, sp)
            }
            // UNF(Γ ⊢ if c then e2 else e3) = if_{Γ;c;e2;e3} (ours: §7.2 defines no UNF for it, §7.3)
            ExprKind::If(c_a_b) => {
                let (c, a_b) = &**c_a_b;
                let (a, b) = a_b;
                let mut free = self.free(c)?;
                for x in [self.free(a)?, self.free(b)?] {
                    for v in x {
                        if !free.iter().any(|(n, _)| n.id == v.0.id) {
                            free.push(v);
                        }
                    }
                }
                free.sort_by_key(|(_, i)| *i);
                let op = Op::If { cond: c.clone(), then: a.clone(), els: b.clone(), free };
                self.step(op, Some(("v", e.ty.clone())), sp)
            }
            // UNF(Γ ⊢ fold (x,y.e1) e2 e3) = UNF(e2) ; ~UNF(e3) ; fold_{Γ;x,y.e1} ; proj_{Γ;R,A[R]^n;R}
            Prim(P::Fold, args) => {
                self.go(&args[1])?;
                self.go(&args[2])?;
                let free = self.free(&args[0])?;
                self.step(Op::Fold { f: args[0].clone(), free }, Some(("v", e.ty.clone())), sp)?;
                self.hide(g, sp)
            }
            // UNF(Γ ⊢ e1 op2 e2) = UNF(e1) ; ~UNF(e2)_R ; op_{Γ;2} ; proj_{Γ;R,R;R}, and op1 likewise
            Prim(op, es) if op.info().jvp.is_some() => {
                for a in es {
                    self.go(a)?;
                }
                self.step(Op::Prim(*op, es.len()), Some(("v", e.ty.clone())), sp)?;
                self.hide(g, sp)
            }
            _ => Err(Diagnostic::error(sp, "this construct is outside Fig. 9")),
        }
    }

    /// Binds the slot at `j` to pattern `p`: its variable names the slot, a tuple's components are
    /// pushed by `var_{T;j} ; πi ; proj` and bound in turn.
    fn bind(&mut self, p: &Pat, j: usize, sp: Span) -> Result<(), Diagnostic> {
        match p {
            Pat::Var(n, _) => {
                self.name_slot(j, n);
                Ok(())
            }
            Pat::Wild(_) | Pat::Unit(_) => Ok(()),
            Pat::Tuple(ps, _) => {
                let Type::Tuple(ts) = self.stack[j].ty.clone() else {
                    return Err(Diagnostic::error(sp, "a tuple pattern on a value that is not a tuple"));
                };
                for (i, q) in ps.iter().enumerate() {
                    let k = self.stack.len();
                    let ty = self.stack[j].ty.clone();
                    self.step(Op::Var(j), Some(("p", ty)), sp)?;
                    self.step(Op::Pi { i, n: ps.len() }, Some(("v", ts[i].clone())), sp)?;
                    self.hide(k, sp)?;
                    self.bind(q, k, sp)?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// Ex. 4.1 as rows the page can draw: `cos` reads the top slot and pushes above it, `proj` forgets
    /// cos's argument, `pair` reads and forgets the top two slots and pushes their pair.
    #[test]
    fn ex_4_1_stack_diagram_rows_mark_reads_forgets_and_pushes() {
        let (p, s, t) = crate::pipeline::front_end("input (1.0, 2.0, 0.5)\ndef main (x1, x2, x3) = (x3, cos x3)\n", &[]).unwrap();
        let b = crate::interp::Builtins::new();
        let src = crate::stage::Source { program: &p, input_type: &s, output_type: &t, builtins: &b };
        let (_, _, u, _) = super::super::source_unf(&src).unwrap();
        let rows = u.rows();
        let brief: Vec<(&str, Vec<usize>, Vec<usize>, Option<usize>)> =
            rows.iter().map(|r| (r.primitive.as_str(), r.reads.clone(), r.forgets.clone(), r.pushes)).collect();
        assert_eq!(
            brief,
            vec![
                ("var_{R,R,R;3}", vec![2], vec![], Some(3)),
                ("var_{R,R,R,R;3}", vec![2], vec![], Some(4)),
                ("cos_{R,R,R,R}", vec![4], vec![], Some(5)),
                ("proj_{R,R,R,R;R;R}", vec![], vec![4], None),
                ("pair_{R,R,R;R×R}", vec![3, 4], vec![3, 4], Some(3)),
            ]
        );
        assert_eq!(rows[4].output, ["x1:R", "x2:R", "x3:R", "p5:(R, R)"]);
        let json = serde_json::to_string(&rows).unwrap();
        assert!(json.contains("\"primitive\":\"cos_{R,R,R,R}\""), "{json}");
    }
}
