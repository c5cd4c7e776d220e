//! `krawiec/monadic`: the monadic translation, Krawiec et al. §7.1–7.2, Figs. 9–11. Every Delta a
//! primitive builds is bound at once to a fresh DeltaId with `deltaLet` in a state monad M, and only
//! `Var id` travels with the real, so Deltas are copied without losing sharing. `runDelta` runs the
//! translated program and wraps the bindings it made around the result as nested `Let`s; `eval` walks
//! that Let spine body-first over a persistent map from DeltaIds to cotangents, and evaluates each
//! binding's right-hand side once, scaled by the cotangent accumulated for its id: backpropagation.
//!
//! Decisions where the paper leaves room (note §8): evaluation is left to right, as Fig. 9 makes it
//! explicit (function before argument, components in order, let-rhs before body), and a literal makes
//! no binding (Drev{r} = pure (r, Zero)). Fig. 12's Delta was produced by an OCaml implementation that
//! evaluates right to left and binds `from_float` literals to Zero: 40 bindings there, 38 here, with
//! the same gradient (tests/krawiec.rs checks both numbers). Fig. 14's reverse rule, as printed, lacks
//! the `pure` around its λ that the sin and cos rules have and returns the DeltaId dy where `Var dy`
//! is meant; we follow the sin/cos rules. Its n-ary Add is folded into binary Adds, left to right.
//!
//! This file also holds what `krawiec/array` and `krawiec/general` share with it: the translation
//! Drev (Fig. 9) with its administrative simplification, the monad's runtime (deltaLet, runDelta,
//! Var) and the iterative eval.

use super::delta::{
    delta_arg, delta_ctor_builtins, delta_graph, delta_type, int_arg, mk, mk_node_at, real_arg, Visits, Kind, Node, STATE_ROWS,
};
use super::dense::{combine, count_reals, ra_expr, ra_pat, require_ra_to_r, without_reserved, Companion};
use crate::build::*;
use crate::deriv;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Graph, Machine, RunError, TraceStep};
use crate::ir::*;
use crate::stage::{Output, RunCtx, Source, Stage, StageInfo, WRAPPER};
use crate::value::{show_real, ExtValue, Value};
use rpds::RedBlackTreeMap;
use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

pub struct Monadic;

static INFO: StageInfo = StageInfo {
    id: "krawiec/monadic",
    paper: "Krawiec et al. 2022",
    section: "§7.1–7.2, Figs. 9–11",
    title: "The monadic translation: a Delta DAG with explicit sharing, eval over a map",
    explanation: "eval2 lost sharing because a Delta could be copied. The fix is to name every Delta a primitive \
builds: Drev is a standard monadic translation into a state monad M whose state is a supply of DeltaIds and a list \
of bindings; +R and ×R bind their Delta with deltaLet and return only Var id, so the Delta paired with any real is \
Zero or Var id and copies are free (Drev{A → B} = Drev{A} → M Drev{B}, and evaluation order becomes explicit, left \
to right). OneHot is gone: the wrapper R{e} seeds input i with Var i and starts the supply at a + 1; runDelta runs \
the program and wraps its bindings around the result as nested Lets. eval then walks the Let spine body first: at \
Let id rhs body it looks up the cotangent accumulated for id (skipping the binding if id is absent: dead code), \
deletes it, and evaluates rhs once, scaled by it, so every node is visited once (eval_visits is linear on the \
doubling chain). The map is persistent (rpds red-black tree), so each lookup, addDelta and delete is O(log n). The \
program is printed after the monad laws' administrative simplification (do { x ← pure v; m } becomes m[v/x] for a variable or literal v, and nested do blocks are flattened), \
which is not in the paper.",
    complexity: "forward pass O(T) (one binding per real operation); eval O(T log T) with the persistent map.",
    accepts: "the whole scalar language inside main; main itself must have type R^a → R (Fig. 11)",
};

// ---------------------------------------------------------------------------------------------
// The translation (Fig. 9)
// ---------------------------------------------------------------------------------------------

/// `M a`
pub fn m_type(t: Type) -> Type {
    Type::con("M", vec![t])
}

/// `Drev{A}` (Fig. 9): R ↦ R × Delta, A → B ↦ Drev{A} → M Drev{B}, homomorphic elsewhere.
pub fn drev_type(t: &Type) -> Type {
    match t {
        Type::Real => Type::Tuple(vec![Type::Real, delta_type()]),
        Type::Tuple(ts) => Type::Tuple(ts.iter().map(drev_type).collect()),
        Type::Sum(a, b) => Type::sum(drev_type(a), drev_type(b)),
        Type::Fun(a, b) => Type::fun(drev_type(a), m_type(drev_type(b))),
        Type::Lin(a, b) => Type::lin(drev_type(a), m_type(drev_type(b))),
        Type::Con(n, ts) => Type::Con(n.clone(), ts.iter().map(drev_type).collect()),
        t => t.clone(),
    }
}

/// Delta-building expressions for `combine` (the Delta of Fig. 10 has Fig. 7's Zero, Scale, Add).
pub(crate) struct DeltaExprs;

impl Companion for DeltaExprs {
    fn ty(&self) -> Type {
        delta_type()
    }
    fn zero(&self) -> Expr {
        builtin("Zero")
    }
    fn add(&self, a: Expr, b: Expr) -> Expr {
        apps(builtin("Add"), [a, b])
    }
    fn scale(&self, c: Expr, d: Expr) -> Expr {
        apps(builtin("Scale"), [c, d])
    }
    fn names(&self) -> [&'static str; 2] {
        ["u1", "u2"]
    }
}

pub(crate) struct Drev<'a> {
    pub fr: &'a mut Fresh,
    /// Top-level definitions that are not functions: their translation is already an `M A`.
    pub cafs: HashSet<Rc<str>>,
}

impl Drev<'_> {
    /// `Drev{e} : M Drev{A}`, rule for rule (Fig. 9).
    pub fn expr(&mut self, e: &Expr) -> Result<Expr, Diagnostic> {
        use ExprKind::*;
        let out = match &e.kind {
            // A top-level non-function definition c = e was translated to c = Drev{e}, an M value.
            Var(n) if n.is_global() && self.cafs.contains(&n.text) => e.clone(),
            // Drev{x} = pure x (a top-level function f was translated to Drev{f}'s function, §7.5)
            Var(_) => pure(e.clone()),
            // Drev{k} = pure k
            Int(_) | Bool(_) | Unit | Builtin(_) => pure(e.clone()),
            // Drev{r} = pure (r, Zero)
            Real(r) => pure(pair(real(*r), builtin("Zero"))),
            // Drev{λx. e} = pure λx. Drev{e}
            Lam(..) => pure(self.function(e)?),
            // Drev{let x = e1 in e2} = do { x ← Drev{e1}; Drev{e2} }
            // (iteratively along a chain of lets: a long straight-line program is one deep chain)
            Let(..) => {
                let mut stmts = vec![];
                let mut cur = e;
                while let Let(p, e1, e2) = &cur.kind {
                    stmts.push((p.clone(), self.expr(e1)?, cur.span));
                    cur = e2;
                }
                let mut acc = self.expr(cur)?;
                for (p, m, span) in stmts.into_iter().rev() {
                    acc = at(bind(p, m, acc), span);
                }
                acc
            }
            // Drev{e1 e2} = do { f ← Drev{e1}; x ← Drev{e2}; f x }
            App(f, a) => {
                let (nf, nx) = (self.fr.name("f"), self.fr.name("x"));
                let (df, da) = (self.expr(f)?, self.expr(a)?);
                bind(pvar(&nf), df, bind(pvar(&nx), da, app(var(&nf), var(&nx))))
            }
            // Not in the paper (§10.3): local recursive functions translate like λ, homomorphically:
            // each f is bound to λx. Drev{e}, of type Drev{A → B}.
            LetRec(fs, body) => {
                let mut out = vec![];
                for f in fs {
                    out.push(FunDef { name: f.name.clone(), body: self.function(&f.body)?, span: f.span });
                }
                Expr::gen(LetRec(out, Box::new(self.expr(body)?)))
            }
            // Drev{(e1, e2)} = do { x ← Drev{e1}; y ← Drev{e2}; pure (x, y) }
            // Smeding–Vákár's fork-join pair `e1 ||| e2` is, for this sequential method, the pair (e1, e2).
            Par(a, b) => self.tuple(&[&**a, &**b])?,
            Tuple(es) => self.tuple(&es.iter().collect::<Vec<_>>())?,
            // Drev{fst e} = do { x ← Drev{e}; pure (fst x) }, and likewise snd, inl, inr
            Fst(x) => self.unary(x, fst)?,
            Snd(x) => self.unary(x, snd)?,
            Inl(x) => self.unary(x, inl)?,
            Inr(x) => self.unary(x, inr)?,
            // Drev{case e0 of inl x1 → e1, inr x2 → e2} = do { x ← Drev{e0}; case x of inl x1 → Drev{e1}, inr x2 → Drev{e2} }
            Case(s, p1, e1, p2, e2) => {
                let n = self.fr.name("x");
                let ds = self.expr(s)?;
                let (d1, d2) = (self.expr(e1)?, self.expr(e2)?);
                bind(pvar(&n), ds, case(var(&n), p1.clone(), d1, p2.clone(), d2))
            }
            // Booleans are the leaf () + (): if is the case on them.
            If(c, a, b) => {
                let n = self.fr.name("c");
                let dc = self.expr(c)?;
                let (da, db) = (self.expr(a)?, self.expr(b)?);
                bind(pvar(&n), dc, if_(var(&n), da, db))
            }
            Ann(x, t) => ann(self.expr(x)?, m_type(drev_type(t))),
            Bind(..) | Pure(_) => {
                return Err(Diagnostic::error(e.span, "do and pure appear only in the output of AD (Fig. 1): the source cannot use them"))
            }
            Prim(op, args) => self.prim(*op, args, e.span)?,
        };
        Ok(at(out, e.span))
    }

    /// Drev{(e1, e2)} = do { x ← Drev{e1}; y ← Drev{e2}; pure (x, y) }, for any number of components.
    fn tuple(&mut self, es: &[&Expr]) -> Result<Expr, Diagnostic> {
        let ns: Vec<Name> = es.iter().map(|_| self.fr.name("x")).collect();
        let mut translated = vec![];
        for x in es {
            translated.push(self.expr(x)?);
        }
        let mut acc = pure(tuple(ns.iter().map(var).collect()));
        for (n, t) in ns.iter().zip(translated).rev() {
            acc = bind(pvar(n), t, acc);
        }
        Ok(acc)
    }

    fn unary(&mut self, x: &Expr, f: fn(Expr) -> Expr) -> Result<Expr, Diagnostic> {
        let n = self.fr.name("x");
        Ok(bind(pvar(&n), self.expr(x)?, pure(f(var(&n)))))
    }

    /// `λx. Drev{e}`: the function inside Drev{λx. e} = pure λx. Drev{e}, for top-level function
    /// definitions (whose outer `pure` the wrapper would run at once, note §8.2) and local recursive ones.
    pub fn function(&mut self, e: &Expr) -> Result<Expr, Diagnostic> {
        match &e.kind {
            ExprKind::Lam(k, p, b) => Ok(Expr { kind: ExprKind::Lam(*k, p.clone(), Box::new(self.expr(b)?)), span: e.span, ty: Type::Unknown }),
            _ => Err(Diagnostic::error(e.span, "a recursive binding must be a function")),
        }
    }

    /// Primitives. Fig. 9 gives Drev{+R} = pure λ((x, u1), (y, u2)). do { u3 ← deltaLet (Add u1 u2);
    /// pure (x + y, Var u3) } and Drev{×R} likewise with Add (Scale y u1) (Scale x u2); Fig. 14 gives
    /// the rule for any primitive from its partial derivatives (deriv.rs, shared by all stages). Our
    /// primitives are saturated, so Drev{op (e1, e2)} = do { f ← pure Drev{op}...; f (x, y) } is shown
    /// β-reduced: do { (x, u1) ← Drev{e1}; (y, u2) ← Drev{e2}; u3 ← deltaLet ...; pure (x op y, Var u3) }.
    fn prim(&mut self, op: Prim, args: &[Expr], span: Span) -> Result<Expr, Diagnostic> {
        let real_args = args.first().is_some_and(|a| a.ty == Type::Real);
        if matches!(op, Prim::And | Prim::Or) {
            // && and || evaluate their right operand only when needed, so its effects (deltaLets)
            // happen only then: do { x ← Drev{a}; if x then Drev{b} else pure false } (and dually).
            let n = self.fr.name("x");
            let (da, db) = (self.expr(&args[0])?, self.expr(&args[1])?);
            let body = if op == Prim::And { if_(var(&n), db, pure(Expr::gen(ExprKind::Bool(false)))) } else { if_(var(&n), pure(Expr::gen(ExprKind::Bool(true))), db) };
            return Ok(bind(pvar(&n), da, body));
        }
        let translated: Vec<Expr> = args.iter().map(|a| self.expr(a)).collect::<Result<_, _>>()?;
        if op == Prim::ToReal {
            // real k depends on no real input: a constant, like a literal (no binding).
            let n = self.fr.name("k");
            let t = translated.into_iter().next().expect("real has one argument");
            return Ok(bind(pvar(&n), t, pure(pair(prim(op, vec![var(&n)]), builtin("Zero")))));
        }
        if !real_args {
            // Drev{+Z} = pure λ(x, y). pure (x +Z y): integer and boolean operations are untouched.
            let ns: Vec<Name> = args.iter().map(|_| self.fr.name("x")).collect();
            let body = pure(prim(op, ns.iter().map(var).collect()));
            return Ok(ns.iter().zip(translated).rev().fold(body, |acc, (n, t)| bind(pvar(n), t, acc)));
        }
        let texts: &[(&str, &str)] = if args.len() == 1 { &[("x", "u1")] } else { &[("x", "u1"), ("y", "u2")] };
        let names: Vec<(Name, Name)> = texts.iter().map(|(x, d)| (self.fr.name(x), self.fr.name(d))).collect();
        let xs: Vec<Expr> = names.iter().map(|(x, _)| var(x)).collect();
        let us: Vec<Expr> = names.iter().map(|(_, d)| var(d)).collect();
        let result = self.fr.name("r");
        let (body, used_delta) = match deriv::rule(op, &xs, &var(&result)) {
            // comparisons look at primals only: pure (x < y)
            None => (pure(prim(op, xs.clone())), false),
            Some(rule) => {
                let id = self.fr.name(if args.len() == 1 { "u2" } else { "u3" });
                // deltaLet and the Delta it binds carry the operation's span (for the graph and trace).
                let mut delta = combine(&rule.partials, &us, &DeltaExprs);
                super::delta::stamp(&mut delta, span);
                let delta_let = |d: Expr| at(app(builtin("deltaLet"), d), span);
                let body = if rule.uses_result {
                    // Fig. 14: let (y1, ..., ym) = f xs in do { dy ← deltaLet (...); pure (y, Var dy) },
                    // with the let as the statement y ← pure (f xs), so that do blocks stay flat.
                    bind(
                        pvar(&result),
                        pure(prim(op, xs.clone())),
                        bind(pvar(&id), delta_let(delta), pure(pair(var(&result), at(app(builtin("Var"), var(&id)), span)))),
                    )
                } else {
                    bind(pvar(&id), delta_let(delta), pure(pair(prim(op, xs.clone()), at(app(builtin("Var"), var(&id)), span))))
                };
                (body, true)
            }
        };
        Ok(names.iter().zip(translated).rev().fold(body, |acc, ((x, u), t)| {
            let pu = if used_delta { pvar(u) } else { pwild() };
            bind(ppair(pvar(x), pu), t, acc)
        }))
    }
}

/// Translates every definition: a function `f = λx. e` becomes `f = λx. Drev{e}` (Drev{f} = pure f
/// at its uses, as §7.5's separate compilation has it); any other `c = e` becomes `c = Drev{e}`.
pub(crate) fn drev_program(p: &Program, fr: &mut Fresh) -> Result<Program, Diagnostic> {
    let cafs: HashSet<Rc<str>> =
        p.defs.iter().filter(|d| !matches!(d.body.kind, ExprKind::Lam(..))).map(|d| d.name.text.clone()).collect();
    let mut out = p.clone();
    let mut dr = Drev { fr, cafs };
    for d in &mut out.defs {
        let body = if matches!(d.body.kind, ExprKind::Lam(..)) { dr.function(&d.body)? } else { dr.expr(&d.body)? };
        d.body = simplify_owned(body);
        d.scheme = None;
    }
    out.expects.clear();
    out.input = None;
    Ok(out)
}

/// Administrative simplification by the monad laws (not in the paper; note §8.13), so that the
/// printed program reads like the figures rather than a thicket of `do { x ← pure x; ... }`:
/// - `do { x ← pure v; m }` = `m[v/x]` for a variable or literal v, or a tuple of them if x is used once;
/// - `do { p ← do { q ← m1; m2 }; m }` = `do { q ← m1; p ← m2; m }`, and likewise through a `let`;
/// - `do { x ← m; pure x }` = `m`.
/// Names are unique in a program, so substitution and re-association never capture. One pass, with
/// the substitution carried in an environment.
pub(crate) fn simplify_owned(e: Expr) -> Expr {
    let mut cx = Simp { env: HashMap::new(), uses: HashMap::new() };
    count_uses(&e, &mut cx.uses);
    simp(e, &mut cx)
}

struct Simp {
    /// Substitutions: local id ↦ the atom (or tuple of atoms) it stands for.
    env: HashMap<u32, Expr>,
    /// How often each local id occurs.
    uses: HashMap<u32, u32>,
}

/// Counts the occurrences of each local, iteratively (a long run is one deep do block).
fn count_uses(e: &Expr, uses: &mut HashMap<u32, u32>) {
    let mut stack: Vec<&Expr> = vec![e];
    while let Some(e) = stack.pop() {
        if let ExprKind::Var(n) = &e.kind {
            if !n.is_global() {
                *uses.entry(n.id).or_default() += 1;
            }
        }
        push_children(e, &mut stack);
    }
}

fn push_children<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    use ExprKind::*;
    match &e.kind {
        Var(_) | Real(_) | Int(_) | Bool(_) | Unit | Builtin(_) => {}
        Lam(_, _, b) | Fst(b) | Snd(b) | Inl(b) | Inr(b) | Ann(b, _) | Pure(b) => out.push(b),
        App(a, b) | Let(_, a, b) | Bind(_, a, b) | Par(a, b) => {
            out.push(a);
            out.push(b)
        }
        LetRec(fs, b) => {
            out.extend(fs.iter().map(|d| &d.body));
            out.push(b)
        }
        Tuple(es) | Prim(_, es) => out.extend(es.iter()),
        Case(s, _, a, _, b) | If(s, a, b) => {
            out.push(s);
            out.push(a);
            out.push(b)
        }
    }
}

fn is_atom(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Var(_) | ExprKind::Int(_) | ExprKind::Real(_) | ExprKind::Bool(_) | ExprKind::Unit)
}

/// `(a, b)` of atoms: substituted for a variable used once (it only allocates, so moving it under a
/// λ repeats no real work and no effect).
fn is_atom_tuple(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Tuple(es) if es.iter().all(is_atom))
}

/// Takes the expression by value, so that the pass is linear (no subtree is copied).
fn simp(mut e: Expr, env: &mut Simp) -> Expr {
    match e.kind {
        ExprKind::Var(ref n) if !n.is_global() => match env.env.get(&n.id) {
            Some(v) => at(v.clone(), e.span),
            None => e,
        },
        ExprKind::Bind(..) => simp_do(e, env),
        _ => {
            each_child_mut(&mut e, &mut |c| {
                let taken = std::mem::replace(c, Expr::gen(ExprKind::Unit));
                *c = simp(taken, env);
            });
            e
        }
    }
}

/// A statement of a flattened do block.
enum Stmt {
    Bind(Pat, Expr, Span),
    Let(Pat, Expr, Span),
}

/// A do block, statement by statement without recursion along it (the block of a long run is as
/// long as the run): each statement's action is simplified, its own statements are spliced in
/// (associativity), `x ← pure v` is substituted away, and the block is rebuilt from the end, where
/// `do { x ← m; pure x }` becomes `m` (right identity).
fn simp_do(e: Expr, env: &mut Simp) -> Expr {
    let mut stmts: Vec<Stmt> = vec![];
    let mut cur = e;
    let tail = loop {
        let (p, m, k, span) = match cur.kind {
            ExprKind::Bind(p, m, k) => (p, m, k, cur.span),
            kind => break simp(Expr { kind, span: cur.span, ty: cur.ty }, env),
        };
        let mut m = simp(*m, env);
        loop {
            match m.kind {
                ExprKind::Bind(q, m1, rest) => {
                    stmts.push(Stmt::Bind(q, *m1, m.span));
                    m = *rest;
                }
                ExprKind::Let(q, e1, rest) => {
                    stmts.push(Stmt::Let(q, *e1, m.span));
                    m = *rest;
                }
                kind => {
                    m = Expr { kind, span: m.span, ty: m.ty };
                    break;
                }
            }
        }
        match (p, m.kind) {
            (Pat::Var(x, _), ExprKind::Pure(v)) if is_atom(&v) || (is_atom_tuple(&v) && env.uses.get(&x.id).copied().unwrap_or(0) <= 1) => {
                // Each atom now also occurs wherever x did.
                let n = env.uses.get(&x.id).copied().unwrap_or(0);
                let mut atoms = vec![];
                each_atom_var(&v, &mut atoms);
                for a in atoms {
                    *env.uses.entry(a).or_default() += n.saturating_sub(1);
                }
                env.env.insert(x.id, *v);
            }
            // Kept as a statement `p ← pure e` rather than `let p = e in ...`: a let inside a do
            // would nest the rest of the block one level deeper each time, and the printed program
            // of a long run would grow quadratically.
            (p, ExprKind::Pure(v)) => stmts.push(Stmt::Bind(p, pure(*v), span)),
            (p, kind) => stmts.push(Stmt::Bind(p, Expr { kind, span: m.span, ty: m.ty }, span)),
        }
        cur = *k;
    };
    let mut acc = tail;
    for st in stmts.into_iter().rev() {
        acc = match st {
            Stmt::Bind(p, m, sp) => {
                let identity = matches!((&p, &acc.kind), (Pat::Var(x, _), ExprKind::Pure(v)) if matches!(&v.kind, ExprKind::Var(y) if y == x));
                if identity {
                    m
                } else {
                    at(bind(p, m, acc), sp)
                }
            }
            Stmt::Let(p, e1, sp) => at(let_(p, e1, acc), sp),
        };
    }
    acc
}

fn each_atom_var(e: &Expr, out: &mut Vec<u32>) {
    match &e.kind {
        ExprKind::Var(n) if !n.is_global() => out.push(n.id),
        ExprKind::Tuple(es) => es.iter().for_each(|x| each_atom_var(x, out)),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// The monad's runtime (Fig. 10): deltaLet, runDelta, Var
// ---------------------------------------------------------------------------------------------

/// DeltaState (Fig. 10) and what the backward pass leaves for the graph.
#[derive(Default)]
pub struct DeltaState {
    /// Inside runDelta.
    pub active: bool,
    /// The next fresh DeltaId.
    pub next_id: i64,
    /// The bindings so far, oldest first (Fig. 10 keeps them newest first; runDelta's foldl wraps
    /// the newest innermost either way).
    pub binds: Vec<(i64, Rc<Node>, Span)>,
    /// The Let-wrapped Delta runDelta returned (the graph's root).
    pub root: Option<Rc<Node>>,
    /// eval's visits per node, and the Lets it skipped.
    pub visits: Visits,
    pub skipped: HashSet<u64>,
}

/// `deltaLet : Delta → M DeltaId`: binds the Delta to a fresh id. (M runs in direct style.)
pub(crate) fn b_delta_let(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let d = delta_arg(&args[0], span, "deltaLet")?;
    m.count("ids_allocated", 1);
    m.tick(1)?;
    let st = m.state::<DeltaState>();
    if !st.active {
        return Err(RunError::runtime(span, "deltaLet outside runDelta: there is no DeltaState to bind in"));
    }
    let id = st.next_id;
    st.next_id += 1;
    st.binds.push((id, d, span));
    Ok(Value::Int(id))
}

pub(crate) fn b_var(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let i = int_arg(&args[0], span, "Var")?;
    mk(m, Kind::Var(i))
}

/// Runs `runDelta start m`: the computation, then `foldl wrap delta binds` (the newest binding
/// innermost). The result is the computation's value with its Delta wrapped — `(x, δ)` or
/// `(a, (x, δ))` — and the last DeltaId allocated.
fn run_delta(m: &mut Machine, args: &[Value], span: Span) -> Result<(Value, i64), RunError> {
    let start = int_arg(&args[0], span, "runDelta")?;
    {
        let st = m.state::<DeltaState>();
        if st.active {
            return Err(RunError::runtime(span, "runDelta inside runDelta"));
        }
        st.active = true;
        st.next_id = start;
        st.binds.clear();
    }
    let r = m.apply(args[1].clone(), Value::Unit);
    let (binds, last) = {
        let st = m.state::<DeltaState>();
        st.active = false;
        (std::mem::take(&mut st.binds), st.next_id - 1)
    };
    let v = r?;
    let wrap = |m: &mut Machine, d: Rc<Node>| -> Result<Rc<Node>, RunError> {
        let mut acc = d;
        for (id, rhs, at) in binds.into_iter().rev() {
            acc = mk_node_at(m, Kind::Let(id, rhs, acc), at)?;
        }
        Ok(acc)
    };
    let bad = || RunError::runtime(span, "runDelta: the computation did not return a pair ending in a Delta");
    let Value::Tuple(vs) = &v else { return Err(bad()) };
    if vs.len() != 2 {
        return Err(bad());
    }
    let out = if let Some(d) = vs[1].ext::<super::delta::DeltaVal>() {
        let w = wrap(m, d.0.clone())?;
        m.state::<DeltaState>().root = Some(w.clone());
        Value::pair(vs[0].clone(), Value::Ext(Rc::new(super::delta::DeltaVal(w))))
    } else if let Value::Tuple(inner) = &vs[1] {
        let d = inner.get(1).and_then(|d| d.ext::<super::delta::DeltaVal>()).ok_or_else(bad)?;
        let w = wrap(m, d.0.clone())?;
        m.state::<DeltaState>().root = Some(w.clone());
        Value::pair(vs[0].clone(), Value::pair(inner[0].clone(), Value::Ext(Rc::new(super::delta::DeltaVal(w)))))
    } else {
        return Err(bad());
    };
    Ok((out, last))
}

pub(crate) fn b_run_delta(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    Ok(run_delta(m, &args, span)?.0)
}

/// §7.3's runDelta, which also returns the last DeltaId allocated (the array's size, the little
/// point whose code the paper omits): `(x, δ, last)`.
pub(crate) fn b_run_delta_last(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let (v, last) = run_delta(m, &args, span)?;
    let Value::Tuple(vs) = v else { unreachable!("run_delta returns a pair") };
    Ok(Value::tuple(vec![vs[0].clone(), vs[1].clone(), Value::Int(last)]))
}

/// The builtins of the monad: Delta's constructors, Var, deltaLet and runDelta at the given type.
pub(crate) fn monad_builtins(run_delta_scheme: Scheme, run: crate::interp::BuiltinFn) -> Vec<Builtin> {
    let mut bs = delta_ctor_builtins();
    bs.push(Builtin { name: "Var", scheme: Scheme::mono(Type::fun(Type::Int, delta_type())), arity: 1, lazy_last: false, run: b_var });
    bs.push(Builtin {
        name: "deltaLet",
        scheme: Scheme::mono(Type::fun(delta_type(), m_type(Type::Int))),
        arity: 1,
        lazy_last: false,
        run: b_delta_let,
    });
    bs.push(Builtin { name: "runDelta", scheme: run_delta_scheme, arity: 2, lazy_last: true, run });
    bs
}

// ---------------------------------------------------------------------------------------------
// eval (Fig. 10)
// ---------------------------------------------------------------------------------------------

/// A DeltaMap: cotangents by DeltaId.
pub(crate) trait Adjoints {
    /// `addDelta id x`
    fn add(&mut self, id: i64, x: f64) -> Result<(), String>;
    /// `lookup id`, then `delete id` when present.
    fn take(&mut self, id: i64) -> Result<Option<f64>, String>;
    /// The entries, for a trace step.
    fn rows(&self) -> Vec<(String, f64)>;
    /// Called once tracing has stopped: no more rows will be asked for.
    fn stop_rows(&mut self) {}
}

enum Frame<'a> {
    Visit(f64, &'a Node),
    AfterLet(&'a Node),
}

/// `eval x u um` (Fig. 10), iteratively over an explicit stack (the Let spine is as long as the run):
/// ```text
/// eval x Zero um            = um
/// eval x (Scale y u) um     = eval (x × y) u um
/// eval x (Add u1 u2) um     = eval x u2 (eval x u1 um)
/// eval x (Var uid) um       = addDelta uid x um
/// eval x (Let uid u1 u2) um = let um2 = eval x u2 um in
///                             case lookup uid um2 of Nothing → um2
///                                                    Just x  → eval x u1 (delete uid um2)
/// ```
pub(crate) fn eval_loop(
    m: &mut Machine,
    x: f64,
    root: &Node,
    um: &mut dyn Adjoints,
    visits: &mut Visits,
    skipped: &mut HashSet<u64>,
    span: Span,
) -> Result<(), RunError> {
    let mut stack: Vec<Frame> = vec![Frame::Visit(x, root)];
    let mut rows = true;
    let err = |msg: String| RunError::runtime(span, format!("eval: {msg}"));
    while let Some(f) = stack.pop() {
        let (kind, node, factor) = match f {
            Frame::Visit(x, n) => {
                visits.visit(n.serial);
                m.tick(1)?;
                match &n.kind {
                    Kind::Zero => {}
                    Kind::Scale(y, u) => {
                        m.real_op();
                        stack.push(Frame::Visit(x * y, u));
                    }
                    Kind::Add(a, b) => {
                        stack.push(Frame::Visit(x, b));
                        stack.push(Frame::Visit(x, a));
                    }
                    Kind::Var(id) => {
                        m.real_op();
                        um.add(*id, x).map_err(err)?;
                    }
                    Kind::Let(_, _, body) => {
                        stack.push(Frame::AfterLet(n));
                        stack.push(Frame::Visit(x, body));
                    }
                    Kind::OneHot(_) => return Err(err("OneHot is not in Fig. 10's Delta (inputs are Var i)".into())),
                }
                ("eval", n, x)
            }
            Frame::AfterLet(n) => {
                m.tick(1)?;
                let Kind::Let(id, rhs, _) = &n.kind else { unreachable!("AfterLet holds a Let") };
                match um.take(*id).map_err(err)? {
                    None => {
                        skipped.insert(n.serial);
                        ("skip", n, 0.0)
                    }
                    Some(v) => {
                        stack.push(Frame::Visit(v, rhs));
                        ("let", n, v)
                    }
                }
            }
        };
        if rows {
            if m.tracing() {
                let state = um.rows();
                let span = (!node.span.is_none()).then_some(node.span);
                let note = eval_note(kind, node, factor);
                m.trace(TraceStep { kind: kind.into(), node: Some(node.serial), span, factor: Some(factor), note, state });
            } else {
                rows = false;
                um.stop_rows();
            }
        }
    }
    Ok(())
}

/// What an eval step did, in words (built only for traced steps).
fn eval_note(kind: &str, n: &Node, x: f64) -> String {
    match (kind, &n.kind) {
        ("skip", Kind::Let(id, ..)) => format!("lookup {id} = Nothing: the binding is dead, skip its right-hand side"),
        ("let", Kind::Let(id, ..)) => format!("lookup {id} = Just {}; delete {id}; eval its right-hand side scaled by it", show_real(x)),
        (_, Kind::Let(id, ..)) => format!("Let {id}: the body first"),
        (_, Kind::Scale(y, _)) => format!("Scale {}: factor becomes {}", show_real(*y), show_real(x * y)),
        (_, Kind::Add(..)) => "Add: u1, then u2".to_string(),
        (_, Kind::Var(id)) => format!("addDelta {id} ({})", show_real(x)),
        _ => "Zero: nothing to add".to_string(),
    }
}

/// The persistent map (Fig. 10's `Map DeltaId dR`): an rpds red-black tree, O(log n) per operation.
#[derive(Debug, Clone, Default)]
pub struct DeltaMapVal(pub RedBlackTreeMap<i64, f64>);

impl ExtValue for DeltaMapVal {
    fn type_name(&self) -> &'static str {
        "DeltaMap"
    }
    fn show(&self) -> String {
        let mut items: Vec<String> = self.0.iter().take(12).map(|(k, v)| format!("{k} ↦ {}", show_real(*v))).collect();
        if self.0.size() > 12 {
            items.push(format!("… ({} entries)", self.0.size()));
        }
        format!("{{{}}}", items.join(", "))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Adjoints for RedBlackTreeMap<i64, f64> {
    fn add(&mut self, id: i64, x: f64) -> Result<(), String> {
        let v = self.get(&id).copied().unwrap_or(0.0) + x;
        self.insert_mut(id, v);
        Ok(())
    }
    fn take(&mut self, id: i64) -> Result<Option<f64>, String> {
        let v = self.get(&id).copied();
        if v.is_some() {
            self.remove_mut(&id);
        }
        Ok(v)
    }
    fn rows(&self) -> Vec<(String, f64)> {
        self.iter().take(STATE_ROWS).map(|(k, v)| (k.to_string(), *v)).collect()
    }
}

pub fn map_type() -> Type {
    Type::con("DeltaMap", vec![])
}

fn map_arg(v: &Value, span: Span, what: &str) -> Result<RedBlackTreeMap<i64, f64>, RunError> {
    v.ext::<DeltaMapVal>().map(|m| m.0.clone()).ok_or_else(|| RunError::runtime(span, format!("{what} expects a DeltaMap, got {v}")))
}

/// Keeps what eval did for the graph.
pub(crate) fn record_eval(m: &mut Machine, root: &Rc<Node>, mut visits: Visits, skipped: HashSet<u64>, res: &mut Result<(), RunError>) {
    visits.flush(m, res);
    let st = m.state::<DeltaState>();
    if st.root.is_none() {
        st.root = Some(root.clone());
    }
    st.visits.merge(visits);
    st.skipped.extend(skipped);
}

fn b_eval(m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let x = real_arg(&args[0], span, "eval")?;
    let root = delta_arg(&args[1], span, "eval")?;
    let mut um = map_arg(&args[2], span, "eval")?;
    let (mut visits, mut skipped) = (Visits::default(), HashSet::new());
    let mut res = eval_loop(m, x, &root, &mut um, &mut visits, &mut skipped, span);
    record_eval(m, &root, visits, skipped, &mut res);
    res?;
    m.alloc(1)?;
    Ok(Value::Ext(Rc::new(DeltaMapVal(um))))
}

fn b_empty_map(m: &mut Machine, _args: Vec<Value>, _span: Span) -> Result<Value, RunError> {
    m.alloc(1)?;
    Ok(Value::Ext(Rc::new(DeltaMapVal::default())))
}

fn b_lookup_or_zero(_m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let id = int_arg(&args[0], span, "lookupOrZero")?;
    let um = map_arg(&args[1], span, "lookupOrZero")?;
    Ok(Value::Real(um.get(&id).copied().unwrap_or(0.0)))
}

/// `lookupDelta u um`: Fig. 15's lookup_R at a dual number's Delta: `lookupOrZero uid um` for
/// `Var uid`, 0 for `Zero` (the pattern match on Delta that lookup_S does).
fn b_lookup_delta(_m: &mut Machine, args: Vec<Value>, span: Span) -> Result<Value, RunError> {
    let d = delta_arg(&args[0], span, "lookupDelta")?;
    let um = map_arg(&args[1], span, "lookupDelta")?;
    match d.kind {
        Kind::Var(id) => Ok(Value::Real(um.get(&id).copied().unwrap_or(0.0))),
        Kind::Zero => Ok(Value::Real(0.0)),
        _ => Err(RunError::runtime(span, "lookupDelta: an input's Delta is Var id or Zero")),
    }
}

/// The map API of Fig. 10 (eval, emptyMap, lookupOrZero), and lookupDelta for Fig. 15.
pub(crate) fn map_builtins() -> Vec<Builtin> {
    let (d, um, r, z) = (delta_type(), map_type(), Type::Real, Type::Int);
    vec![
        Builtin {
            name: "eval",
            scheme: Scheme::mono(Type::fun(r.clone(), Type::fun(d.clone(), Type::lin(um.clone(), um.clone())))),
            arity: 3,
            lazy_last: false,
            run: b_eval,
        },
        Builtin { name: "emptyMap", scheme: Scheme::mono(um.clone()), arity: 0, lazy_last: false, run: b_empty_map },
        Builtin {
            name: "lookupOrZero",
            scheme: Scheme::mono(Type::fun(z, Type::fun(um.clone(), r.clone()))),
            arity: 2,
            lazy_last: false,
            run: b_lookup_or_zero,
        },
        Builtin {
            name: "lookupDelta",
            scheme: Scheme::mono(Type::fun(d, Type::fun(um, r))),
            arity: 2,
            lazy_last: false,
            run: b_lookup_delta,
        },
    ]
}

pub(crate) fn graph_of_state(m: &mut Machine) -> Option<Graph> {
    let st = m.state::<DeltaState>();
    let root = st.root.clone()?;
    Some(delta_graph(&root, &st.visits, &st.skipped))
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
    let mut v = vec![(WRAPPER.to_string(), Type::fun(Type::Tuple(vec![s.clone(), t.clone()]), Type::Tuple(vec![t.clone(), s.clone()])))];
    if src.program.def("main").is_some_and(|d| matches!(d.body.kind, ExprKind::Lam(..))) {
        v.push(("main".into(), Type::fun(drev_type(s), m_type(drev_type(t)))));
    }
    v
}

impl Stage for Monadic {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        // runDelta : DeltaId → M (a × Delta) → a × Delta (Fig. 10 returns only the Delta; ours keeps
        // the primal a too, so that the wrapper can return it).
        let a = Type::Var(0);
        let pair_ty = Type::Tuple(vec![a, delta_type()]);
        let scheme = Scheme { vars: vec![0], ty: Type::fun(Type::Int, Type::fun(m_type(pair_ty.clone()), pair_ty)) };
        let mut bs = monad_builtins(scheme, b_run_delta);
        bs.extend(map_builtins());
        bs
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        require_ra_to_r(src, "krawiec/monadic", "Fig. 11 (R{e})")
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut fr = Fresh::new(src.program);
        let mut out = drev_program(&without_reserved(src.program, &[WRAPPER]), &mut fr)?;
        out.defs.push(ra_wrapper(src, &mut fr, false));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        ra_stated_types(src)
    }

    fn graph(&self, m: &mut Machine, _cx: &RunCtx) -> Option<Graph> {
        graph_of_state(m)
    }
}
