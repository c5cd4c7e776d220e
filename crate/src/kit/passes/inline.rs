//! Inline-all: every call of a top-level or local function is inlined and every application of a
//! lambda beta-reduced, so that a program whose function values are all known statically becomes one
//! first-order `main` (Huot & Shaikhha §8 inline higher-order code to first-order form before UNF; the
//! array pipeline of Smeding et al. works on one expression).
//!
//! How: a partial evaluator over partially static values (Jones, Gomard & Sestoft, *Partial
//! Evaluation*, ch. 10). A function value is a static closure (lambda + environment) and never
//! residual code; tuples and injections of static parts stay static so `fst`, `let (a, b)` and
//! `case` on them reduce; everything first-order is residual code.
//!
//! - Beta reduction is `(\p -> e) a  ⟶  let p = a in e`: the argument is computed once, where the
//!   call was (call by value), and shared, never duplicated. The language is pure (its only effects
//!   are runtime errors), so moving a `let` outward to the enclosing block changes at most which of
//!   two runtime errors is reported; no error appears or disappears (unused arguments and tuple
//!   components are still bound).
//! - Recursion is refused, located at the recursive definition: inlining a recursive call does not
//!   terminate (the chains that take recursion keep their own calls).
//! - `budget` bounds the work (nodes visited plus bindings emitted): inlining copies a function body
//!   per call, so nested calls can multiply the output; past the budget the pass stops with a
//!   located message naming it.
//! - Where a function value is not static (chosen by `if`/`case` on a run-time value, or stored in a
//!   sum that is matched at run time) it stays a residual lambda and its calls stay applications.
//! - Binders stay unique: every binder in the output is fresh (`build::Fresh`).

use super::{globals_used, refuse, retype};
use crate::build::{self, Fresh};
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::kit::pmap::PMap;
use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

const PASS: &str = "inline_all";

/// The source as one first-order `main` at the type the pipeline fitted to the input: every call
/// inlined, then re-typed with `main : S → T`, so that a part of the input that main leaves open
/// (`fst x` of x : R × (R × R)) has the input's type in every subterm; what nothing constrains is R.
/// (The papers' transforms that take first-order programs start from this: Huot & Shaikhha §8,
/// Efficient CHAD.)
pub fn first_order_at(src: &crate::stage::Source, budget: usize) -> Result<Program, Diagnostic> {
    retyped_at(inline_all(src.program, budget)?, src, "inlined")
}

/// `first_order_at`, with recursion on a `param` unrolled (`inline_unrolling`).
pub fn first_order_unrolled(src: &crate::stage::Source, budget: usize) -> Result<Program, Diagnostic> {
    retyped_at(inline_unrolling(src.program, budget)?, src, "unrolled")
}

/// `p` type-checked with `main : S → T` (the source's), what nothing constrains read as R.
fn retyped_at(mut p: Program, src: &crate::stage::Source, what: &str) -> Result<Program, Diagnostic> {
    let main_ty = Type::fun(src.input_type.clone(), src.output_type.clone());
    crate::types::check_program_monomorphic(&mut p, Some(&main_ty))
        .map_err(|d| Diagnostic::error(d.span, format!("internal error: the {what} program does not type-check: {}", d.message)))?;
    for d in &mut p.defs {
        let mut stack = vec![&mut d.body];
        while let Some(e) = stack.pop() {
            e.ty = crate::types::rename(&e.ty, &mut |_| Type::Real);
            stack.extend(crate::ir::children_mut(e));
        }
    }
    Ok(p)
}

/// Inlines every call in `p` (type-checked) into one `main`; see the module doc.
pub fn inline_all(p: &Program, budget: usize) -> Result<Program, Diagnostic> {
    inline_with(p, budget, false)
}

/// How many calls unrolling may nest (each is a few native frames of the partial evaluator): 100 in
/// the page and natively (half the page's bracket budget; natively too, so that a test thread's stack
/// holds it and the CLI refuses what the page refuses).
pub fn unroll_depth() -> usize {
    crate::limits::max_brackets().min(200) / 2
}

/// `inline_all` that also unrolls recursion for the values of the program's `param`s (Huot &
/// Shaikhha, issue 10: "recursion on a param is unrolled for the given parameter value"): integers
/// and booleans computed from literals and params are static (integer and boolean primitives on them
/// are folded), an `if` on a static condition takes its branch only, and a recursive top-level
/// definition is inlined like any other. A recursion that does not stop within `unroll_depth()`
/// nested calls (one on a run-time value: its `if` is residual, so both branches are unrolled) or
/// past the size budget is refused, located, naming the budget. A local `let rec` group is unrolled
/// the same way: each of its functions is a static value (`Val::Rec`) whose body is evaluated, with
/// the group in scope, at each call.
pub fn inline_unrolling(p: &Program, budget: usize) -> Result<Program, Diagnostic> {
    inline_with(p, budget, true)
}

fn inline_with(p: &Program, budget: usize, unroll: bool) -> Result<Program, Diagnostic> {
    let main = p.def("main").ok_or_else(|| refuse(Span::NONE, PASS, "the program has no `def main`"))?;
    let index: HashMap<&str, usize> = p.defs.iter().enumerate().map(|(i, d)| (&*d.name.text, i)).collect();
    if !unroll {
        check_no_recursive_defs(p, &index)?;
    }
    // The budget bounds what inlining adds: the program's own nodes are allowed on top of it, a few
    // times over (each is visited and may be bound once), so a long program without calls is not
    // refused for calls that multiply (a 100,000-line straight program was, at line 28,574).
    let own = p.defs.iter().map(|d| node_count(&d.body) as usize).sum::<usize>();
    let mut cx = Cx { p, index, fresh: Fresh::new(p), work: 0, budget, own, block: vec![], unroll, depth: 0, active: vec![], dyn_ifs: 0 };
    let v = cx.eval(&main.body, &Env::new())?;
    let body = cx.reify(v)?;
    let block = std::mem::take(&mut cx.block);
    let body = cx.wrap(block, body);
    let def = Def { name: Name::global("main"), body, span: main.span, scheme: None, role: main.role };
    let mut out = Program { params: p.params.clone(), input: p.input.clone(), seed: p.seed.clone(), defs: vec![def], expects: p.expects.clone(), next_id: cx.fresh.next_id };
    retype(&mut out, PASS)?;
    Ok(out)
}

/// The work allowed per node of the input program, besides the stage's budget (see `inline_with`).
const OWN_NODE_WORK: usize = 4;

/// The definitions `main` reaches must not call themselves (directly or through others).
fn check_no_recursive_defs(p: &Program, index: &HashMap<&str, usize>) -> Result<(), Diagnostic> {
    let deps: Vec<Vec<usize>> = p.defs.iter().map(|d| globals_used(&d.body).iter().filter_map(|g| index.get(&**g).copied()).collect()).collect();
    // Iterative depth-first search; a grey successor closes a cycle.
    let (white, grey, black) = (0u8, 1u8, 2u8);
    let mut colour = vec![white; p.defs.len()];
    let start = index["main"];
    let mut stack = vec![(start, 0usize)];
    colour[start] = grey;
    while let Some((v, k)) = stack.pop() {
        if let Some(&w) = deps[v].get(k) {
            stack.push((v, k + 1));
            if colour[w] == grey {
                let d = &p.defs[w];
                return Err(refuse(
                    d.span,
                    PASS,
                    format!("`{}` is recursive: inlining every call needs a program without recursion (a recursive call would be inlined forever)", d.name.text),
                ));
            }
            if colour[w] == white {
                colour[w] = grey;
                stack.push((w, 0));
            }
        } else {
            colour[v] = black;
        }
    }
    Ok(())
}

type Env<'a> = PMap<u32, Val<'a>>;

/// A partially static value.
#[derive(Clone)]
enum Val<'a> {
    /// Residual code (an atom once bound to a variable, so that it is never duplicated).
    Dyn(Expr),
    Clo(Rc<Clo<'a>>),
    Tup(Vec<Val<'a>>),
    Inl(Box<Val<'a>>),
    Inr(Box<Val<'a>>),
    /// The k-th function of a local recursive group (only when unrolling): its closure is made at
    /// each call, with the group in scope (`Cx::rec_closure`), as an environment cannot hold itself.
    Rec(Rc<RecGroup<'a>>, usize),
}

struct RecGroup<'a> {
    fs: &'a [FunDef],
    /// The environment of the `let rec`, without the group.
    env: Env<'a>,
}

struct Clo<'a> {
    lam: &'a Expr,
    env: Env<'a>,
}

struct Cx<'a> {
    p: &'a Program,
    index: HashMap<&'a str, usize>,
    fresh: Fresh,
    work: usize,
    budget: usize,
    /// The program's own nodes, whose work is allowed besides `budget` (`OWN_NODE_WORK` each).
    own: usize,
    /// The bindings emitted so far in the current block (a lambda body, a branch, the whole `main`).
    block: Vec<(Pat, Expr)>,
    /// Unroll recursion on params (`inline_unrolling`), and how many calls are being inlined now.
    unroll: bool,
    depth: usize,
    /// When unrolling: the functions being inlined (their lambdas), each with the number of residual
    /// `if` branches entered when it was, and that number now. A function called again from inside
    /// a residual `if` entered since it started recurses on a run-time value: refused at once.
    active: Vec<(*const Expr, usize)>,
    dyn_ifs: usize,
}

/// A primitive on integer or boolean literals, computed (what `inline_unrolling` keeps static); None
/// when an argument is not a literal or the operation fails (overflow: the program reports it).
fn fold_static(op: Prim, xs: &[Expr]) -> Option<ExprKind> {
    use crate::prims::{OnBool, OnInt};
    let ints: Option<Vec<i64>> = xs.iter().map(|x| if let ExprKind::Int(i) = x.kind { Some(i) } else { None }).collect();
    let bools: Option<Vec<bool>> = xs.iter().map(|x| if let ExprKind::Bool(b) = x.kind { Some(b) } else { None }).collect();
    let info = op.info();
    match (ints, bools, info.on_int, info.on_bool) {
        (Some(v), _, Some(OnInt::Z1(f)), _) if v.len() == 1 => f(v[0]).map(ExprKind::Int),
        (Some(v), _, Some(OnInt::Z2(f)), _) if v.len() == 2 => f(v[0], v[1]).ok().map(ExprKind::Int),
        (Some(v), _, Some(OnInt::ZCmp(f)), _) if v.len() == 2 => Some(ExprKind::Bool(f(v[0], v[1]))),
        (Some(v), _, Some(OnInt::ZToR(f)), _) if v.len() == 1 => Some(ExprKind::Real(f(v[0]))),
        (_, Some(v), _, Some(OnBool::B1(f))) if v.len() == 1 => Some(ExprKind::Bool(f(v[0]))),
        (_, Some(v), _, Some(OnBool::B2(f))) if v.len() == 2 => Some(ExprKind::Bool(f(v[0], v[1]))),
        _ => None,
    }
}

fn is_atom(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Var(_) | ExprKind::Real(_) | ExprKind::Int(_) | ExprKind::Bool(_) | ExprKind::Unit | ExprKind::Builtin(_))
}

impl<'a> Cx<'a> {
    fn tick(&mut self, span: Span) -> Result<(), Diagnostic> {
        self.work += 1;
        if self.work > self.budget.saturating_add(OWN_NODE_WORK.saturating_mul(self.own)) {
            return Err(refuse(
                span,
                PASS,
                format!(
                    "stopped at the size budget ({} nodes, besides {OWN_NODE_WORK} for each of the program's own {}): inlining copies a function body at every call, and the calls here multiply{}",
                    self.budget,
                    self.own,
                    if self.unroll { " (or a recursion is unrolled that a `param` does not stop)" } else { "" }
                ),
            ));
        }
        Ok(())
    }

    fn emit(&mut self, p: Pat, rhs: Expr) -> Result<(), Diagnostic> {
        self.tick(rhs.span)?;
        self.block.push((p, rhs));
        Ok(())
    }

    fn wrap(&self, block: Vec<(Pat, Expr)>, body: Expr) -> Expr {
        block.into_iter().rev().fold(body, |acc, (p, rhs)| build::let_(p, rhs, acc))
    }

    /// Runs `f` in a block of its own and returns its residual code with the block's bindings.
    fn in_block(&mut self, f: impl FnOnce(&mut Self) -> Result<Val<'a>, Diagnostic>) -> Result<Expr, Diagnostic> {
        let saved = std::mem::take(&mut self.block);
        let r = f(self).and_then(|v| self.reify(v));
        let block = std::mem::replace(&mut self.block, saved);
        Ok(self.wrap(block, r?))
    }

    /// Names every non-atomic residual part of `v`, so that `v` can be copied freely.
    fn atomize(&mut self, v: Val<'a>, hint: &str) -> Result<Val<'a>, Diagnostic> {
        Ok(match v {
            Val::Dyn(e) if !is_atom(&e) => {
                let x = self.fresh.name(hint);
                self.emit(build::pvar(&x), e)?;
                Val::Dyn(build::var(&x))
            }
            Val::Tup(vs) => Val::Tup(vs.into_iter().map(|v| self.atomize(v, hint)).collect::<Result<_, _>>()?),
            Val::Inl(v) => Val::Inl(Box::new(self.atomize(*v, hint)?)),
            Val::Inr(v) => Val::Inr(Box::new(self.atomize(*v, hint)?)),
            v => v,
        })
    }

    /// A copy of `p` with fresh binders, each bound in `env` to its residual variable.
    fn fresh_pat(&mut self, p: &Pat, env: &mut Env<'a>) -> Pat {
        match p {
            Pat::Var(n, s) => {
                let x = self.fresh.name(&n.text);
                env.insert_mut(n.id, Val::Dyn(build::var(&x)));
                Pat::Var(x, *s)
            }
            Pat::Tuple(ps, s) => Pat::Tuple(ps.iter().map(|p| self.fresh_pat(p, env)).collect(), *s),
            p => p.clone(),
        }
    }

    fn bind(&mut self, p: &Pat, v: Val<'a>, env: &mut Env<'a>) -> Result<(), Diagnostic> {
        match (p, v) {
            (Pat::Var(n, _), v) => {
                let v = self.atomize(v, &n.text)?;
                env.insert_mut(n.id, v);
            }
            (Pat::Tuple(ps, _), Val::Tup(vs)) if ps.len() == vs.len() => {
                for (p, v) in ps.iter().zip(vs) {
                    self.bind(p, v, env)?;
                }
            }
            (p, Val::Dyn(e)) => {
                if !matches!(p, Pat::Wild(_) | Pat::Unit(_)) || !is_atom(&e) {
                    let p2 = self.fresh_pat(p, env);
                    self.emit(p2, e)?;
                }
            }
            (Pat::Wild(_), v) => {
                self.atomize(v, "_")?;
            }
            (p, _) => return Err(refuse(p.span(), PASS, "internal error: a pattern does not fit its value")),
        }
        Ok(())
    }

    /// The closure of a local recursive group's k-th function: its body in the group's environment
    /// with every function of the group bound.
    fn rec_closure(&mut self, g: &Rc<RecGroup<'a>>, k: usize) -> Result<Val<'a>, Diagnostic> {
        let mut env = g.env.clone();
        for (j, f) in g.fs.iter().enumerate() {
            env.insert_mut(f.name.id, Val::Rec(g.clone(), j));
        }
        self.eval(&g.fs[k].body, &env)
    }

    fn reify(&mut self, v: Val<'a>) -> Result<Expr, Diagnostic> {
        Ok(match v {
            Val::Rec(g, k) => {
                let f = self.rec_closure(&g, k)?;
                self.reify(f)?
            }
            Val::Dyn(e) => e,
            Val::Tup(vs) => build::tuple(vs.into_iter().map(|v| self.reify(v)).collect::<Result<_, _>>()?),
            Val::Inl(v) => build::inl(self.reify(*v)?),
            Val::Inr(v) => build::inr(self.reify(*v)?),
            Val::Clo(c) => {
                let ExprKind::Lam(kind, p_body) = &c.lam.kind else { unreachable!("closures are lambdas") };
                let (p, body) = &**p_body;
                let mut env = c.env.clone();
                let p2 = self.fresh_pat(p, &mut env);
                let body = self.in_block(|cx| cx.eval(body, &env))?;
                build::at(Expr::gen(ExprKind::Lam(*kind, Box::new((p2, body)))), c.lam.span)
            }
        })
    }

    fn apply(&mut self, f: Val<'a>, a: Val<'a>, span: Span) -> Result<Val<'a>, Diagnostic> {
        self.tick(span)?;
        match f {
            Val::Clo(c) => {
                let ExprKind::Lam(_, p_body) = &c.lam.kind else { unreachable!("closures are lambdas") };
                let (p, body) = &**p_body;
                let mut env = c.env.clone();
                self.bind(p, a, &mut env)?;
                if self.unroll && self.depth >= unroll_depth() {
                    return Err(refuse(
                        span,
                        PASS,
                        format!("recursion that does not stop within {} nested calls, the unrolling budget: recursion is unrolled only where a `param` (or a literal) decides when it stops", unroll_depth()),
                    ));
                }
                let me = c.lam as *const Expr;
                if self.unroll && self.active.iter().any(|(f, ifs)| *f == me && *ifs < self.dyn_ifs) {
                    return Err(refuse(
                        span,
                        PASS,
                        "recursion on a run-time value: the test that stops it depends on the input, so it cannot be unrolled (recursion is unrolled only where a `param` or a literal decides when it stops, within the unrolling budget)",
                    ));
                }
                if !self.unroll {
                    return self.eval(body, &env);
                }
                self.depth += 1;
                self.active.push((me, self.dyn_ifs));
                let r = self.eval(body, &env);
                self.active.pop();
                self.depth -= 1;
                r
            }
            Val::Rec(g, k) => {
                let f = self.rec_closure(&g, k)?;
                self.apply(f, a, span)
            }
            Val::Dyn(fe) => {
                let a = self.reify(a)?;
                Ok(Val::Dyn(build::at(build::app(fe, a), span)))
            }
            _ => Err(refuse(span, PASS, "internal error: applying a value that is not a function")),
        }
    }

    /// Evaluates `e`; let chains are walked in a loop, other nodes recurse on nesting only.
    fn eval(&mut self, e: &'a Expr, env: &Env<'a>) -> Result<Val<'a>, Diagnostic> {
        let mut env = env.clone();
        let mut cur = e;
        loop {
            match &cur.kind {
                ExprKind::Let(p_rhs_body) => {
                    let (p, rhs_body) = &**p_rhs_body;
                    let (rhs, body) = rhs_body;
                    self.tick(cur.span)?;
                    let v = self.eval(rhs, &env)?;
                    self.bind(p, v, &mut env)?;
                    cur = body;
                }
                ExprKind::LetRec(fs_body) => {
                    let (fs, body) = &**fs_body;
                    let ids: Vec<u32> = fs.iter().map(|f| f.name.id).collect();
                    let recursive = fs.iter().find(|f| super::free_locals(&f.body).iter().any(|n| ids.contains(&n.id)));
                    if let (Some(_), true) = (recursive, self.unroll) {
                        // unrolled as a recursive top-level definition is: at each call
                        let g = Rc::new(RecGroup { fs, env: env.clone() });
                        for (k, f) in fs.iter().enumerate() {
                            env.insert_mut(f.name.id, Val::Rec(g.clone(), k));
                        }
                        cur = body;
                        continue;
                    }
                    if let Some(f) = recursive {
                        return Err(refuse(
                            f.span,
                            PASS,
                            format!("`{}` is recursive: inlining every call needs a program without recursion (a recursive call would be inlined forever)", f.name.text),
                        ));
                    }
                    let outer = env.clone();
                    for f in fs.iter() {
                        let v = self.eval(&f.body, &outer)?;
                        env.insert_mut(f.name.id, v);
                    }
                    cur = body;
                }
                _ => return self.node(cur, &env),
            }
        }
    }

    fn node(&mut self, e: &'a Expr, env: &Env<'a>) -> Result<Val<'a>, Diagnostic> {
        self.tick(e.span)?;
        let dynamic = |k: ExprKind| Ok(Val::Dyn(build::at(Expr::gen(k), e.span)));
        match &e.kind {
            ExprKind::Var(n) if n.is_global() => match self.index.get(&*n.text) {
                Some(&i) => {
                    let p = self.p;
                    self.eval(&p.defs[i].body, &Env::new())
                }
                // a param: its value, static, when unrolling
                None => match self.p.params.iter().find(|q| q.name.text == n.text) {
                    Some(q) if self.unroll => dynamic(ExprKind::Int(q.value)),
                    _ => dynamic(e.kind.clone()),
                },
            },
            ExprKind::Var(n) => env.get(&n.id).cloned().ok_or_else(|| refuse(e.span, PASS, format!("internal error: unbound `{}`", n.text))),
            ExprKind::Real(_) | ExprKind::Int(_) | ExprKind::Bool(_) | ExprKind::Unit | ExprKind::Builtin(_) => dynamic(e.kind.clone()),
            ExprKind::Lam(..) => Ok(Val::Clo(Rc::new(Clo { lam: e, env: env.clone() }))),
            ExprKind::App(f_a) => {
                let (f, a) = &**f_a;
                let f = self.eval(f, env)?;
                let a = self.eval(a, env)?;
                self.apply(f, a, e.span)
            }
            ExprKind::Tuple(es) => Ok(Val::Tup(es.iter().map(|x| self.eval(x, env)).collect::<Result<_, _>>()?)),
            ExprKind::Fst(x) | ExprKind::Snd(x) => {
                let first = matches!(e.kind, ExprKind::Fst(_));
                match self.eval(x, env)? {
                    // The other component is still computed (bound), as the source computed it.
                    Val::Tup(vs) => match self.atomize(Val::Tup(vs), "p")? {
                        Val::Tup(mut vs) if vs.len() == 2 => Ok(if first { vs.swap_remove(0) } else { vs.swap_remove(1) }),
                        _ => Err(refuse(e.span, PASS, "internal error: projection from a value that is not a pair")),
                    },
                    v => {
                        let x = self.reify(v)?;
                        dynamic(if first { ExprKind::Fst(Box::new(x)) } else { ExprKind::Snd(Box::new(x)) })
                    }
                }
            }
            ExprKind::Inl(x) => Ok(Val::Inl(Box::new(self.eval(x, env)?))),
            ExprKind::Inr(x) => Ok(Val::Inr(Box::new(self.eval(x, env)?))),
            ExprKind::Case(c) => match self.eval(&c.0, env)? {
                Val::Inl(v) => {
                    let mut env2 = env.clone();
                    self.bind(&c.1, *v, &mut env2)?;
                    self.eval(&c.2, &env2)
                }
                Val::Inr(v) => {
                    let mut env2 = env.clone();
                    self.bind(&c.3, *v, &mut env2)?;
                    self.eval(&c.4, &env2)
                }
                v => {
                    let s = self.reify(v)?;
                    let (mut env1, mut env2) = (env.clone(), env.clone());
                    let q1 = self.fresh_pat(&c.1, &mut env1);
                    let q2 = self.fresh_pat(&c.3, &mut env2);
                    let a1 = self.in_block(|cx| cx.eval(&c.2, &env1))?;
                    let a2 = self.in_block(|cx| cx.eval(&c.4, &env2))?;
                    dynamic(ExprKind::Case(Box::new((s, q1, a1, q2, a2))))
                }
            },
            ExprKind::If(c_a_b) => {
                let (c, a_b) = &**c_a_b;
                let (a, b) = a_b;
                let c = self.eval(c, env)?;
                let c = self.reify(c)?;
                if let (true, ExprKind::Bool(taken)) = (self.unroll, &c.kind) {
                    return self.eval(if *taken { a } else { b }, env);
                }
                self.dyn_ifs += 1;
                let a = self.in_block(|cx| cx.eval(a, env));
                let b = self.in_block(|cx| cx.eval(b, env));
                self.dyn_ifs -= 1;
                let (a, b) = (a?, b?);
                dynamic(ExprKind::If(Box::new((c, (a, b)))))
            }
            ExprKind::Prim(op, args) => {
                let mut xs = vec![];
                for a in args {
                    let v = self.eval(a, env)?;
                    xs.push(self.reify(v)?);
                }
                if let Some(k) = self.unroll.then(|| fold_static(*op, &xs)).flatten() {
                    return dynamic(k);
                }
                dynamic(ExprKind::Prim(*op, xs.into()))
            }
            ExprKind::Array(es) => {
                let mut xs = vec![];
                for a in es {
                    let v = self.eval(a, env)?;
                    xs.push(self.reify(v)?);
                }
                dynamic(ExprKind::Array(xs.into()))
            }
            ExprKind::Ann(x_t) => { let (x, t) = &**x_t; match self.eval(x, env)? {
                Val::Dyn(x) => dynamic(ExprKind::Ann(Box::new((x, t.clone())))),
                v => Ok(v),
            } },
            // Each side of a parallel pair keeps its own work (a block each), so it stays parallel.
            ExprKind::Par(a_b) => {
                let (a, b) = &**a_b;
                let a = self.in_block(|cx| cx.eval(a, env))?;
                let b = self.in_block(|cx| cx.eval(b, env))?;
                dynamic(ExprKind::Par(Box::new((a, b))))
            }
            ExprKind::Let(..) | ExprKind::LetRec(..) => self.eval(e, env),
            ExprKind::Bind(..) | ExprKind::Pure(_) => Err(refuse(e.span, PASS, "monadic code (`do`, `pure`) is not a source construct")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(src: &str) -> Program {
        crate::pipeline::front_end(src, &[]).expect("a valid program").0
    }

    /// The budget bounds what inlining adds, not the program's own size: a straight program with no
    /// call is inlined whatever its length (a 100,000-line one was refused for "calls that multiply"),
    /// while calls that multiply still stop at the budget.
    #[test]
    fn the_size_budget_counts_what_inlining_adds() {
        let mut chain = String::from("input 1.5\ndef main x =\n  let v0 = x * 1.01 + 0.5 in\n");
        for i in 1..3000 {
            chain.push_str(&format!("  let v{i} = v{} * 1.01 + 0.5 in\n", i - 1));
        }
        chain.push_str("  v2999\n");
        let p = crate::limits::run_with_stack(move || inline_all(&program(&chain), 1_000).map(|q| q.defs.len()));
        assert_eq!(p.map_err(|d| d.message), Ok(1));

        let twice = "input 1.5\ndef twice f x = f (f x)\ndef double x = 2.0 * x\n\
                     def main x = twice (twice (twice (twice (twice (twice (twice (twice (twice (twice double))))))))) x\n";
        let e = crate::limits::run_with_stack(move || inline_all(&program(twice), 1_000).map(|_| ()).map_err(|d| d.message));
        assert!(e.as_ref().is_err_and(|m| m.contains("stopped at the size budget")), "{e:?}");
    }
}
