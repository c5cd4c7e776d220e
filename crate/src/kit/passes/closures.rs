//! What closure conversion and defunctionalisation share: a lambda-set analysis over the
//! monomorphised program, the representation types it gives function types, and one translation
//! parameterised by what a closure is (Smeding & Vákár, "Efficient CHAD" §9: defunctionalisation =
//! closure conversion followed by deexistentialisation).
//!
//! **Lambda sets.** HM has no existential types, so `Σ_α. α × ((α × τ) →□ σ)` (App. C) cannot be
//! written. Instead every function type *occurrence* carries a set of lambdas, inferred by
//! unification (as Steensgaard's points-to analysis, and as Roc infers its lambda sets): wherever
//! two function values may meet (a `let`, an argument, the arms of an `if`) their sets are merged.
//! A function value whose set is `{ℓ1, …, ℓn}` is then represented by the finite sum, over the
//! lambdas `ℓi`, of `ℓi`'s environment — the tuple of its captured variables — (defunctionalisation)
//! or of that environment paired with `ℓi`'s closed code (closure conversion): the paper's
//! deexistentialisation, with sums nested to the right (`A + (B + C)`); one lambda needs no sum.
//!
//! **Limits.** The analysis is monovariant per definition (after monomorphisation), so a closure
//! that ends up in its own environment — `twice (twice f)`, where the inner `\x -> f (f x)` captures
//! a value of its own lambda set — would need a recursive type, which the IR lacks: the pass refuses
//! it, located at that lambda (inline first, `kit::passes::inline`, which removes such closures).
//! Local recursive functions are fine: a member's environment is its group's captured variables,
//! and its code rebuilds the group's closures from it.
//!
//! Every lambda's code is lifted to a closed top-level definition (`f_code`, `main_lam_2`), so
//! recursion needs no name beyond globals. `main` keeps its one parameter and is called directly.

use super::lambda_sets::{peel, Analysis, At};
use super::{mangle, refuse, retype, some_value, unique_global};
use crate::build::{self, Fresh};
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A closure is `(environment, code)`; application unpacks it and calls the code.
    ClosureConvert,
    /// A closure is its environment under its lambda's tag; application calls `apply`.
    Defunctionalise,
}

impl Mode {
    pub(super) fn pass(self) -> &'static str {
        match self {
            Mode::ClosureConvert => "closure_convert",
            Mode::Defunctionalise => "defunctionalise",
        }
    }
}

/// Closure-converts or defunctionalises `p` (type-checked), after monomorphising it.
pub(crate) fn convert(p: &Program, mode: Mode) -> Result<Program, Diagnostic> {
    let pass = mode.pass();
    let p = super::monomorphise::monomorphise(p)?;
    // An array operation (`map f a`) calls its function natively (interp/arrays.rs); a closure
    // record or a dispatcher's tag is nothing it can call, so such programs are refused, located.
    let mut stack: Vec<&Expr> = p.defs.iter().map(|d| &d.body).collect();
    while let Some(e) = stack.pop() {
        if let ExprKind::Prim(op, args) = &e.kind {
            let function = args.iter().find(|a| matches!(a.ty, Type::Fun(..)) || matches!(a.kind, ExprKind::Lam(..)));
            if let (true, Some(f)) = (op.is_array_op(), function) {
                return Err(refuse(f.span, pass, format!("the function given to the array operation `{}` is not converted: the operation calls it itself", op.symbol())));
            }
        }
        each_child(e, &mut |c| stack.push(c));
    }
    let an = Analysis::run(&p, pass)?;
    let main = p.def("main").ok_or_else(|| refuse(Span::NONE, pass, "the program has no `def main`"))?;
    if !matches!(peel(&main.body).kind, ExprKind::Lam(..)) {
        return Err(refuse(main.span, pass, "`main` must be a function definition `def main x = ...`"));
    }
    let main_lam = an.lam_of[&(peel(&main.body) as *const Expr)];
    let mut tr = Tr {
        an,
        mode,
        fresh: Fresh::new(&p),
        rename: HashMap::default(),
        reps: HashMap::default(),
        busy: vec![],
        tag_only: HashSet::default(),
        retry: false,
        lifted: vec![],
        dispatchers: HashMap::default(),
        main_lam,
    };
    tr.representations()?;
    let mut defs = vec![];
    for d in &p.defs {
        if &*d.name.text == "main" {
            let ExprKind::Lam(kind, pat_body) = &peel(&d.body).kind else { unreachable!("checked above") };
            let (pat, body) = &**pat_body;
            let pat2 = tr.fresh_pat(pat);
            let body2 = tr.tr(body)?;
            defs.push(Def { name: d.name.clone(), body: build::at(Expr::gen(ExprKind::Lam(*kind, Box::new((pat2, body2)))), d.body.span), role: d.role, span: d.span, scheme: None });
        } else {
            // Under monomorphise's annotation: the closure's type follows from its code's.
            let body = tr.tr(peel(&d.body))?;
            defs.push(Def { name: d.name.clone(), body, span: d.span, scheme: None, role: d.role });
        }
    }
    defs.append(&mut tr.lifted);
    let mut out = Program { params: p.params.clone(), input: p.input.clone(), seed: p.seed.clone(), defs, expects: p.expects.clone(), next_id: tr.fresh.next_id };
    retype(&mut out, pass)?;
    Ok(out)
}

/// The translation of terms (App. C's `(-)^CC`, homomorphic except on λ and application).
struct Tr<'a> {
    an: Analysis<'a>,
    mode: Mode,
    fresh: Fresh,
    rename: HashMap<u32, Name>,
    reps: HashMap<u32, Type>,
    /// The sets whose representation is being computed, each with whether we are inside its code type.
    busy: Vec<(u32, bool)>,
    /// Closure conversion: sets whose closures keep only their tag (see `representations`).
    tag_only: HashSet<u32>,
    retry: bool,
    lifted: Vec<Def>,
    /// `apply` per lambda set (defunctionalisation).
    dispatchers: HashMap<u32, String>,
    main_lam: usize,
}

/// `inj_i` into the right-nested sum of `n` summands.
fn inject(i: usize, n: usize, v: Expr) -> Expr {
    if n <= 1 {
        v
    } else if i == 0 {
        build::inl(v)
    } else {
        build::inr(inject(i - 1, n - 1, v))
    }
}

impl<'a> Tr<'a> {
    fn pass(&self) -> &'static str {
        self.mode.pass()
    }

    /// The lambdas of a set, in a fixed order (their tags are positions in this list).
    fn labels(&mut self, s: u32) -> Vec<usize> {
        let r = self.an.root(s);
        let mut ls = self.an.members[r as usize].clone();
        ls.sort();
        ls
    }

    fn rep(&mut self, t: &At) -> Result<Type, Diagnostic> {
        Ok(match t {
            At::Base(t) => t.clone(),
            At::Tup(ts) => Type::Tuple(ts.iter().map(|t| self.rep(t)).collect::<Result<_, _>>()?),
            At::Sum(a, b) => Type::sum(self.rep(a)?, self.rep(b)?),
            At::Fun(a, r, s) => {
                let s = self.an.root(*s);
                if let Some(t) = self.reps.get(&s) {
                    return Ok(t.clone());
                }
                let labels = self.labels(s);
                if let Some(i) = self.busy.iter().position(|&(t, _)| t == s) {
                    // A cycle through a code type: that set's closures drop their code pointer.
                    if let Some(&(x, _)) = self.busy[i..].iter().find(|&&(_, code)| code) {
                        self.tag_only.insert(x);
                        self.retry = true;
                        return Err(refuse(Span::NONE, self.pass(), "retry"));
                    }
                    let span = labels.first().map_or(Span::NONE, |&l| self.an.lams[l].expr.span);
                    return Err(refuse(
                        span,
                        self.pass(),
                        format!(
                            "a closure of this lambda (of type {}) would hold a closure of its own kind, as in `twice (twice f)`: \
                             its representation would be a recursive type, which the IR lacks (inline the program first)",
                            crate::types::show(&self.an.set_ty[s as usize])
                        ),
                    ));
                }
                self.busy.push((s, false));
                let mut summands = vec![];
                for &l in &labels {
                    let env = self.env_type(l)?;
                    summands.push(if self.with_code(s) {
                        self.busy.last_mut().expect("pushed above").1 = true;
                        let code = Type::fun(Type::tup(vec![env.clone(), self.rep(a)?]), self.rep(r)?);
                        self.busy.last_mut().expect("pushed above").1 = false;
                        Type::tup(vec![env, code])
                    } else {
                        env
                    });
                }
                self.busy.pop();
                let t = summands.into_iter().rev().reduce(|acc, t| Type::sum(t, acc)).unwrap_or(Type::Unit);
                self.reps.insert(s, t.clone());
                t
            }
        })
    }

    /// Whether the closures of set `s` carry their code (closure conversion, unless that would
    /// make a type recursive).
    fn with_code(&mut self, s: u32) -> bool {
        let s = self.an.root(s);
        self.mode == Mode::ClosureConvert && !self.tag_only.contains(&s)
    }

    /// Computes the representation of every lambda set, refusing recursive types. Closure
    /// conversion pairs an environment with its code `(Env, A) -> B`; where that code type would
    /// contain the closure's own representation (a local recursive function whose closures capture
    /// it, or a function passed a closure that captures the function itself), the set keeps only
    /// its tags, which name their code statically (the paper's deexistentialisation, per set), and
    /// the computation restarts. A cycle through environments alone is a recursive type: refused.
    fn representations(&mut self) -> Result<(), Diagnostic> {
        loop {
            self.reps.clear();
            self.busy.clear();
            self.retry = false;
            let mut res = Ok(());
            for l in 0..self.an.lams.len() {
                let at = self.an.lams[l].at.clone();
                if let Err(d) = self.rep(&at) {
                    res = Err(d);
                    break;
                }
            }
            match res {
                Err(_) if self.retry => continue,
                r => return r,
            }
        }
    }

    fn env_type(&mut self, l: usize) -> Result<Type, Diagnostic> {
        let captured = self.an.lams[l].captured.clone();
        let mut ts = vec![];
        for n in &captured {
            let at = self.an.binders.get(&n.id).cloned().ok_or_else(|| refuse(Span::NONE, self.pass(), format!("internal error: unbound `{}`", n.text)))?;
            ts.push(self.rep(&at)?);
        }
        Ok(Type::tuple(ts))
    }

    fn fresh_pat(&mut self, p: &Pat) -> Pat {
        match p {
            Pat::Var(n, s) => {
                let x = self.fresh.name(&n.text);
                self.rename.insert(n.id, x.clone());
                Pat::Var(x, *s)
            }
            Pat::Tuple(ps, s) => Pat::Tuple(ps.iter().map(|p| self.fresh_pat(p)).collect(), *s),
            p => p.clone(),
        }
    }

    fn var(&self, n: &Name, span: Span) -> Result<Expr, Diagnostic> {
        let x = self.rename.get(&n.id).ok_or_else(|| refuse(span, self.pass(), format!("internal error: unbound `{}`", n.text)))?;
        Ok(build::at(build::var(x), span))
    }

    /// The closure of lambda `l`, built from the current names of its captured variables.
    fn closure(&mut self, l: usize, span: Span) -> Result<Expr, Diagnostic> {
        let captured = self.an.lams[l].captured.clone();
        let env = build::tuple(captured.iter().map(|n| self.var(n, span)).collect::<Result<_, _>>()?);
        let set = self.an.lams[l].set;
        let v = if self.with_code(set) { build::pair(env, build::global(&self.an.lams[l].code)) } else { env };
        let labels = self.labels(set);
        let i = labels.iter().position(|&k| k == l).unwrap_or(0);
        Ok(build::at(inject(i, labels.len(), v), span))
    }

    /// Lifts lambda `l` to a closed definition `code (env, p) = body` (the paper's `λ⟨⟨y…⟩, x⟩. t^CC`).
    fn lift(&mut self, l: usize) -> Result<(), Diagnostic> {
        let e = self.an.lams[l].expr;
        let ExprKind::Lam(kind, p_body) = &e.kind else { unreachable!("lambdas") };
        let (p, body) = &**p_body;
        let captured = self.an.lams[l].captured.clone();
        // Inside the code, captured variables are the environment's components (fresh binders).
        let group: Vec<(Name, usize)> = self.an.lams[l].group.map(|g| self.an.groups[g].clone()).unwrap_or_default();
        let saved: Vec<(u32, Option<Name>)> =
            captured.iter().chain(group.iter().map(|(n, _)| n)).map(|n| (n.id, self.rename.get(&n.id).cloned())).collect();
        let env_pat = build::ptuple(captured.iter().map(|n| self.fresh_pat(&Pat::Var(n.clone(), Span::NONE))).collect());
        let arg = self.fresh_pat(p);
        let mut preamble = vec![];
        // A local recursive function rebuilds its group's closures from the shared environment.
        {
            for (name, k) in group {
                let x = self.fresh.name(&name.text);
                self.rename.insert(name.id, x.clone());
                let clo = self.closure(k, e.span)?;
                preamble.push((build::pvar(&x), clo));
            }
        }
        let body = self.tr(body)?;
        let body = preamble.into_iter().rev().fold(body, |acc, (p, rhs)| build::let_(p, rhs, acc));
        for (id, old) in saved {
            match old {
                Some(n) => self.rename.insert(id, n),
                None => self.rename.remove(&id),
            };
        }
        let code = Expr::gen(ExprKind::Lam(*kind, Box::new((build::ppair(env_pat, arg), body))));
        let name = self.an.lams[l].code.clone();
        self.lifted.push(Def { name: Name::global(&name), body: build::at(code, e.span), span: e.span, scheme: None, role: crate::ir::Role::Helper });
        Ok(())
    }

    /// A case over the right-nested sum `scrut` of `n` summands, arm `i` built by `arm(i, pattern var)`.
    fn case_tree(&mut self, scrut: Expr, n: usize, arm: &mut dyn FnMut(&mut Self, usize, Expr) -> Result<Expr, Diagnostic>, i: usize) -> Result<Expr, Diagnostic> {
        if n <= 1 {
            return arm(self, i, scrut);
        }
        let (x, rest) = (self.fresh.name("c"), self.fresh.name("c"));
        let a = arm(self, i, build::var(&x))?;
        let b = self.case_tree(build::var(&rest), n - 1, arm, i + 1)?;
        Ok(build::case(scrut, build::pvar(&x), a, build::pvar(&rest), b))
    }

    fn app(&mut self, e: &'a Expr, f: &'a Expr, a: &'a Expr) -> Result<Expr, Diagnostic> {
        let tf = self.an.at_of.get(&(e as *const Expr)).cloned().ok_or_else(|| refuse(e.span, self.pass(), "internal error: an application was not analysed"))?;
        let At::Fun(_, r, s) = &tf else { unreachable!("applications have function types") };
        let f2 = self.tr(f)?;
        let a2 = self.tr(a)?;
        let labels = self.labels(*s);
        if labels.contains(&self.main_lam) {
            return Err(refuse(f.span, self.pass(), "`main` is used as a value; only its call from outside is supported"));
        }
        let with_code = self.with_code(*s);
        let out = match self.mode {
            Mode::ClosureConvert if labels.is_empty() => {
                // No lambda reaches here: the call cannot run (dead code), but must have a type.
                let rt = self.rep(r)?;
                let v = some_value(&rt).ok_or_else(|| refuse(e.span, self.pass(), "internal error: no value of the result type"))?;
                build::let_(build::pwild(), f2, build::let_(build::pwild(), a2, v))
            }
            Mode::ClosureConvert if !with_code && labels.len() == 1 => {
                build::app(build::global(&self.an.lams[labels[0]].code), build::pair(f2, a2))
            }
            Mode::ClosureConvert if !with_code => {
                // Tags only: each arm calls its lambda's code by name.
                let (c, x) = (self.fresh.name("clo"), self.fresh.name("arg"));
                let codes: Vec<String> = labels.iter().map(|&l| self.an.lams[l].code.clone()).collect();
                let arms = self.case_tree(build::var(&c), labels.len(), &mut |_, i, z| Ok(build::app(build::global(&codes[i]), build::pair(z, build::var(&x)))), 0)?;
                build::let_(build::pvar(&c), f2, build::let_(build::pvar(&x), a2, arms))
            }
            Mode::ClosureConvert if labels.len() == 1 => {
                // App. C: case t of pack z -> let <cvars, f> = z in f <cvars, s>
                let (env, code) = (self.fresh.name("env"), self.fresh.name("code"));
                build::let_(build::ppair(build::pvar(&env), build::pvar(&code)), f2, build::app(build::var(&code), build::pair(build::var(&env), a2)))
            }
            Mode::ClosureConvert => {
                let (c, x) = (self.fresh.name("clo"), self.fresh.name("arg"));
                let arms = self.case_tree(build::var(&c), labels.len(), &mut |tr, _, z| {
                    let (env, code) = (tr.fresh.name("env"), tr.fresh.name("code"));
                    Ok(build::let_(build::ppair(build::pvar(&env), build::pvar(&code)), z, build::app(build::var(&code), build::pair(build::var(&env), build::var(&x)))))
                }, 0)?;
                build::let_(build::pvar(&c), f2, build::let_(build::pvar(&x), a2, arms))
            }
            Mode::Defunctionalise => {
                let apply = self.dispatcher(&tf)?;
                build::app(build::global(&apply), build::pair(f2, a2))
            }
        };
        Ok(build::at(out, e.span))
    }

    /// Reynolds' `apply` for a lambda set: `apply (c, x) = case c of tag_i env -> code_i (env, x)`.
    fn dispatcher(&mut self, tf: &At) -> Result<String, Diagnostic> {
        let At::Fun(_, r, s) = tf else { unreachable!("function types") };
        let s = self.an.root(*s);
        if let Some(n) = self.dispatchers.get(&s) {
            return Ok(n.clone());
        }
        let (ta, tr) = match &self.an.set_ty[s as usize] {
            Type::Fun(xy) | Type::Lin(xy) => (mangle(&xy.0), mangle(&xy.1)),
            _ => ("X".into(), "X".into()),
        };
        let name = unique_global(&format!("apply_{ta}_{tr}"), &mut self.an.taken);
        self.dispatchers.insert(s, name.clone());
        let labels = self.labels(s);
        let (c, x) = (self.fresh.name("clo"), self.fresh.name("arg"));
        let body = if labels.is_empty() {
            let rt = self.rep(r)?;
            some_value(&rt).ok_or_else(|| refuse(Span::NONE, self.pass(), "internal error: no value of the result type"))?
        } else {
            let codes: Vec<String> = labels.iter().map(|&l| self.an.lams[l].code.clone()).collect();
            self.case_tree(build::var(&c), labels.len(), &mut |_, i, z| Ok(build::app(build::global(&codes[i]), build::pair(z, build::var(&x)))), 0)?
        };
        let def = build::def(&name, build::lam(build::ppair(build::pvar(&c), build::pvar(&x)), body));
        self.lifted.push(def);
        Ok(name)
    }

    /// Translates `e`; let chains in a loop.
    fn tr(&mut self, e: &'a Expr) -> Result<Expr, Diagnostic> {
        let mut spine: Vec<(Pat, Expr, Span)> = vec![];
        let mut cur = e;
        loop {
            match &cur.kind {
                ExprKind::Let(p_rhs_body) => {
                    let (p, rhs_body) = &**p_rhs_body;
                    let (rhs, body) = rhs_body;
                    let rhs2 = self.tr(rhs)?;
                    let p2 = self.fresh_pat(p);
                    spine.push((p2, rhs2, cur.span));
                    cur = body;
                }
                ExprKind::LetRec(fs_body) => {
                    let (fs, body) = &**fs_body;
                    // let f_i = closure_i in …: the group's closures share one environment.
                    let mut names = vec![];
                    for f in fs.iter() {
                        names.push(self.fresh_pat(&Pat::Var(f.name.clone(), f.span)));
                    }
                    for f in fs.iter() {
                        let l = self.an.lam_of[&(&f.body as *const Expr)];
                        self.lift(l)?;
                    }
                    for (f, n) in fs.iter().zip(names) {
                        let l = self.an.lam_of[&(&f.body as *const Expr)];
                        let clo = self.closure(l, f.span)?;
                        spine.push((n, clo, f.span));
                    }
                    cur = body;
                }
                _ => break,
            }
        }
        let mut out = self.node(cur)?;
        for (p, rhs, span) in spine.into_iter().rev() {
            out = build::at(build::let_(p, rhs, out), span);
        }
        Ok(out)
    }

    fn node(&mut self, e: &'a Expr) -> Result<Expr, Diagnostic> {
        let span = e.span;
        let k = match &e.kind {
            ExprKind::Var(n) if n.is_global() => {
                if &*n.text == "main" {
                    return Err(refuse(span, self.pass(), "`main` is used as a value; only its call from outside is supported"));
                }
                e.kind.clone()
            }
            ExprKind::Var(n) => return self.var(n, span),
            ExprKind::Real(_) | ExprKind::Int(_) | ExprKind::Bool(_) | ExprKind::Unit | ExprKind::Builtin(_) => e.kind.clone(),
            ExprKind::Lam(..) => {
                let l = self.an.lam_of[&(e as *const Expr)];
                self.lift(l)?;
                return self.closure(l, span);
            }
            ExprKind::App(f_a) => { let (f, a) = &**f_a; return self.app(e, f, a) },
            ExprKind::Tuple(es) => ExprKind::Tuple(es.iter().map(|x| self.tr(x)).collect::<Result<_, _>>()?),
            ExprKind::Array(es) => ExprKind::Array(es.iter().map(|x| self.tr(x)).collect::<Result<_, _>>()?),
            ExprKind::Prim(op, es) => {
                let mut xs: Vec<Expr> = es.iter().map(|x| self.tr(x)).collect::<Result<_, _>>()?;
                // A lifted code is typed on its own, where `+` on unconstrained operands defaults
                // to R: pin operands of other types to what they were in place.
                let overloaded = matches!(op, Prim::Add | Prim::Sub | Prim::Mul | Prim::Div | Prim::Neg | Prim::Abs | Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne);
                let literal = es.iter().any(|x| matches!(x.kind, ExprKind::Int(_) | ExprKind::Bool(_)));
                if let (true, false, Some(first), Some(x)) = (overloaded, literal, es.first(), xs.first_mut()) {
                    if first.ty != Type::Real {
                        let inner = std::mem::replace(x, build::unit());
                        *x = build::at(build::ann(inner, first.ty.clone()), first.span);
                    }
                }
                ExprKind::Prim(*op, xs.into())
            }
            ExprKind::Fst(x) => ExprKind::Fst(Box::new(self.tr(x)?)),
            ExprKind::Snd(x) => ExprKind::Snd(Box::new(self.tr(x)?)),
            ExprKind::Inl(x) => ExprKind::Inl(Box::new(self.tr(x)?)),
            ExprKind::Inr(x) => ExprKind::Inr(Box::new(self.tr(x)?)),
            ExprKind::Case(c) => {
                let (s, p1, e1, p2, e2) = &**c;
                let s = self.tr(s)?;
                let q1 = self.fresh_pat(p1);
                let a1 = self.tr(e1)?;
                let q2 = self.fresh_pat(p2);
                let a2 = self.tr(e2)?;
                ExprKind::Case(Box::new((s, q1, a1, q2, a2)))
            }
            ExprKind::If(c_a_b) => {
                let (c, a_b) = &**c_a_b;
                let (a, b) = a_b;
                ExprKind::If(Box::new((self.tr(c)?, (self.tr(a)?, self.tr(b)?))))
            }
            ExprKind::Ann(x_x) => {
                let (x, _) = &**x_x;
                let at = self.an.at_of.get(&(e as *const Expr)).cloned().ok_or_else(|| refuse(span, self.pass(), "internal error: an annotation was not analysed"))?;
                let t = self.rep(&at)?;
                ExprKind::Ann(Box::new((self.tr(x)?, t)))
            }
            ExprKind::Par(a_b) => { let (a, b) = &**a_b; ExprKind::Par(Box::new((self.tr(a)?, self.tr(b)?))) },
            ExprKind::Let(..) | ExprKind::LetRec(..) => return self.tr(e),
            ExprKind::Bind(..) | ExprKind::Pure(_) => return Err(refuse(span, self.pass(), "monadic code is not a source construct")),
        };
        Ok(build::at(Expr::gen(k), span))
    }
}
