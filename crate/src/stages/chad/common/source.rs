//! The paper's source language (Fig. 1) as the chain sees it: the program with every call inlined,
//! desugared to a small first-order core in which pattern lets are the paper's sugar
//! (`let ⟨x, y⟩ = t in s := let z = t in let x = fst z in let y = snd z in s`, §2), tuples are n-ary
//! and projections name their component. Terms of a discrete type (Z, B, 1 and tuples/sums of them)
//! stay source expressions: like `sign t` (Fig. 2) they are evaluated as they are, and their
//! backpropagator adds nothing.

use crate::build::Fresh;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::kit::passes::first_order_at;
use crate::prims::Prim;
use crate::stage::Source;
use rustc_hash::FxHashMap as HashMap;

pub const PAPER: &str = "Smeding & Vákár 2024";

/// How much work inlining may do before it stops.
const INLINE_BUDGET: usize = 200_000;

pub const ACCEPTS: &str = "the paper's first-order language (Fig. 1): reals, tuples, sums with case, let, real \
primitives, and (as discrete values whose cotangent is 1) integers, booleans, comparisons and if, after every \
function call is inlined; no recursion or loops (§2), arrays come with §7";

/// A first-order core term with its source type and span.
#[derive(Clone, Debug)]
pub struct Term {
    pub kind: K,
    pub ty: Type,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum K {
    Var(Name),
    /// `let x1 = t1 in … let xn = tn in s`, kept as one chain so that no pass recurses along it.
    Lets(Vec<(Name, Term)>, Box<Term>),
    /// `⟨t1, …, tn⟩`, n ≥ 2 (the paper's left-nested pairs, as one n-ary tuple).
    Tuple(Vec<Term>),
    /// Component `i` of an n-tuple (`fst`/`snd` when n = 2).
    Proj(usize, Box<Term>),
    Inl(Box<Term>),
    Inr(Box<Term>),
    Case(Box<Term>, Name, Box<Term>, Name, Box<Term>),
    /// `if c then s else r`: a case on `B = 1 ⊔ 1` whose branches bind nothing.
    If(Box<Term>, Box<Term>, Box<Term>),
    /// A real literal `r`.
    Lit(f64),
    /// `op(t1, …, tn)` with a real result.
    Op(Prim, Vec<Term>),
    /// A term of a discrete type, evaluated as it is (Fig. 2's rule for `sign t`).
    Discrete(Expr),
    /// A closed top-level function (closure-converted code, App. C): `τ →□ σ`.
    Global(Name),
    /// `t s`, where `t` is closed code (closure-converted programs) or any function (§9).
    App(Box<Term>, Box<Term>),
    /// `λx. t` (naive higher-order CHAD, §9).
    Lam(Name, Box<Term>),
    /// `build s (i. t)` (§7).
    Build(Box<Term>, Name, Box<Term>),
    /// `t ! s` (§7).
    Index(Box<Term>, Box<Term>),
    /// `fold (x, y. t) s` from the initial value `init` (§7, with footnote 16's initial value): the
    /// reduction of `init :: s`, `balanced` (a `reduce`, associative) or left to right (a `fold`).
    Fold { x: Name, y: Name, body: Box<Term>, init: Box<Term>, arr: Box<Term>, balanced: bool },
}

/// The cotangent type `D[τ]2` (Fig. 2), for a first-order source type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CT {
    /// `R_L`
    R,
    /// `1_L`, also the cotangent of the discrete types Z and B (§7: `D[Z]2 := 1`).
    One,
    /// `τ1 ×_L … ×_L τn`
    Prod(Vec<CT>),
    /// `τ ⊔_L σ`
    Sum(Box<CT>, Box<CT>),
    /// `D[τ → σ]2 = List (D[τ]1 × D[σ]2)` of naive higher-order CHAD (§9): the log of every
    /// invocation, argument and output cotangent. Only `D[σ]2` is kept: the log's IR type leaves
    /// the arguments' type open (`Log D[σ]2`), as the interned builtins' table must be `Sync`.
    Log(Box<CT>),
    /// `D[Array τ]2 = Bag (Z × D[τ]2)` (§7): the element cotangent `D[τ]2`.
    Bag(Box<CT>),
}

impl CT {
    /// `D[τ]2`, or None for a type outside Fig. 1 (functions, arrays).
    pub fn of(t: &Type) -> Option<CT> {
        Some(match t {
            Type::Real => CT::R,
            Type::Unit | Type::Int | Type::Bool => CT::One,
            Type::Tuple(ts) => CT::Prod(ts.iter().map(CT::of).collect::<Option<_>>()?),
            Type::Sum(ab) => CT::Sum(Box::new(CT::of(&ab.0)?), Box::new(CT::of(&ab.1)?)),
            // closed functions carry no cotangent: D[τ →□ σ]2 = 1 (App. C); the first-order stages
            // never see one (inlining removes them, a residual lambda is refused)
            Type::Fun(..) | Type::Lin(..) => CT::One,
            // §7 (only the stage chad/arrays takes arrays; the others refuse them by `Lang`)
            t if t.as_array().is_some() => CT::Bag(Box::new(CT::of(t.as_array()?)?)),
            _ => return None,
        })
    }

    /// `D[τ]2` in naive higher-order CHAD (§9): as `of`, but a function's is its invocation log.
    pub fn naive(t: &Type) -> Option<CT> {
        Some(match t {
            Type::Fun(ab) | Type::Lin(ab) => CT::Log(Box::new(CT::naive(&ab.1)?)),
            Type::Tuple(ts) => CT::Prod(ts.iter().map(CT::naive).collect::<Option<_>>()?),
            Type::Sum(ab) => CT::Sum(Box::new(CT::naive(&ab.0)?), Box::new(CT::naive(&ab.1)?)),
            t => CT::of(t)?,
        })
    }

    /// The IR type of its values: linear types are opaque constructors, so the same program text
    /// runs with the dense (Fig. 4) and the sparse (§4.1) representation.
    pub fn ty(&self) -> Type {
        match self {
            CT::R => Type::Real,
            CT::One => Type::Unit,
            CT::Prod(ts) => Type::con("LProd", ts.iter().map(CT::ty).collect()),
            CT::Sum(a, b) => Type::con("LSum", vec![a.ty(), b.ty()]),
            CT::Log(c) => Type::con("Log", vec![c.ty()]),
            CT::Bag(c) => Type::con("Bag", vec![Type::tup(vec![Type::Int, c.ty()])]),
        }
    }

    /// As builtin names show it: `R`, `1`, `(R ×L R)`, `(R ⊔L 1)`.
    pub fn show(&self) -> String {
        match self {
            CT::R => "R".into(),
            CT::One => "1".into(),
            CT::Prod(ts) => format!("({})", ts.iter().map(CT::show).collect::<Vec<_>>().join(" ×L ")),
            CT::Sum(a, b) => format!("({} ⊔L {})", a.show(), b.show()),
            CT::Log(c) => format!("[_ × {}]", c.show()),
            CT::Bag(c) => format!("Bag(Z × {})", c.show()),
        }
    }
}

/// `D[τ]1`: the type itself, but for closed functions, which return their backpropagator:
/// `D[τ →□ σ]1 = D[τ]1 →□ (D[σ]1 × (D[σ]2 → D[τ]2))` (App. C).
/// (The same in naive higher-order CHAD, §9, with its cotangent types when `naive`.)
pub fn d1_by(t: &Type, naive: bool) -> Type {
    let ct = |t: &Type| if naive { CT::naive(t) } else { CT::of(t) }.unwrap_or(CT::One);
    match t {
        Type::Fun(ab) | Type::Lin(ab) => {
            let (a, b) = &**ab;
            let (ca, cb) = (ct(a), ct(b));
            Type::fun(d1_by(a, naive), Type::tup(vec![d1_by(b, naive), Type::fun(cb.ty(), ca.ty())]))
        }
        Type::Tuple(ts) => Type::Tuple(ts.iter().map(|t| d1_by(t, naive)).collect()),
        Type::Sum(ab) => Type::sum(d1_by(&ab.0, naive), d1_by(&ab.1, naive)),
        t => t.clone(),
    }
}

/// A type with no real in it: its cotangent carries nothing.
pub fn discrete(t: &Type) -> bool {
    match t {
        Type::Unit | Type::Int | Type::Bool => true,
        Type::Tuple(ts) => ts.iter().all(discrete),
        Type::Sum(ab) => discrete(&ab.0) && discrete(&ab.1),
        _ => false,
    }
}

fn outside(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error(span, format!("{what} is outside the language of Efficient CHAD (Fig. 1: reals, tuples, sums, let, primitives; no loops or recursion, §2)"))
}

/// A value of a type outside Fig. 1, naming the later stage for arrays.
fn outside_type(span: Span, what: &str, t: &Type) -> Diagnostic {
    let arrays = if crate::types::show(t).contains("Array") { " (arrays are §7, the later stage chad/arrays)" } else { "" };
    outside(span, &format!("{what} of type {}{arrays}", crate::types::show(t)))
}

/// Whether values of type `t` are outside the language `lang` reads (arrays only with §7).
fn outside_lang(t: &Type, lang: Lang) -> bool {
    CT::of(t).is_none() || (lang != Lang::Arrays && has_array(t))
}

/// Whether a program has arrays anywhere (the chain leaves those to each stage's own `accepts`:
/// chad/arrays takes them, the others refuse them).
pub fn mentions_arrays(p: &Program) -> bool {
    let mut stack: Vec<&Expr> = p.defs.iter().map(|d| &d.body).collect();
    while let Some(e) = stack.pop() {
        if has_array(&e.ty) || matches!(e.kind, ExprKind::Array(_)) {
            return true;
        }
        each_child(e, &mut |c| stack.push(c));
    }
    false
}

fn has_array(t: &Type) -> bool {
    match t {
        Type::Tuple(ts) => ts.iter().any(has_array),
        Type::Con(c) => t.as_array().is_some() || c.args.iter().any(has_array),
        Type::Sum(ab) | Type::Fun(ab) | Type::Lin(ab) => has_array(&ab.0) || has_array(&ab.1),
        _ => false,
    }
}

/// `main`'s parameter pattern (every `_` named, as each input gets a cell) and its body as a core term.
pub struct FirstOrder {
    pub program: Program,
    pub pattern: Pat,
    /// The input variables, in order: the initial context Γ.
    pub inputs: Vec<(Name, Type)>,
    pub body: Term,
    pub fresh: Fresh,
}

#[cfg(test)]
thread_local! {
    /// How many times `first_order` was asked on this thread (the chain's tests).
    pub static FIRST_ORDER_ASKED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The source as the paper's language: every call inlined (higher-order code without recursion
/// becomes first order), then desugared, each refusal located.
pub fn first_order(src: &Source) -> Result<FirstOrder, Diagnostic> {
    #[cfg(test)]
    FIRST_ORDER_ASKED.with(|c| c.set(c.get() + 1));
    let p = first_order_at(src, INLINE_BUDGET)?;
    core(p, src, Lang::FirstOrder)
}

/// The source as §7's language: inlined, its array operations lowered to `build`, `!` and `fold`
/// (`kit::passes::lower_arrays`), then desugared; with the lowered program, which the stage shows.
pub fn first_order_arrays(src: &Source) -> Result<(FirstOrder, Program), Diagnostic> {
    let p = crate::kit::passes::lower_arrays(&first_order_at(src, INLINE_BUDGET)?)?;
    Ok((core(p.clone(), src, Lang::Arrays)?, p))
}

fn core(p: Program, src: &Source, lang: Lang) -> Result<FirstOrder, Diagnostic> {
    let main = p.def("main").expect("inline_all keeps main").clone();
    let ExprKind::Lam(_, pat_body) = &main.body.kind else {
        return Err(outside(main.span, "`main` that is not a function"));
    };
    let (pat, body) = &**pat_body;
    check_depth(body, main.span)?;
    let mut fresh = Fresh::new(&p);
    let mut inputs = vec![];
    let pattern = name_wilds(pat, src.input_type, &mut fresh, &mut inputs);
    for (n, t) in &inputs {
        if outside_lang(t, lang) {
            return Err(outside_type(pat.span(), &format!("the input `{}`", n.text), t));
        }
    }
    let body = desugar(body, &mut fresh, lang)?;
    Ok(FirstOrder { program: p, pattern, inputs, body, fresh })
}

/// A closed top-level function of a closure-converted program: `def f pattern = body`.
pub struct Code {
    pub name: Name,
    pub pattern: Pat,
    /// The parameter's type.
    pub ty: Type,
    pub inputs: Vec<(Name, Type)>,
    pub body: Term,
}

/// A closure-converted program (the output of `chad/cc`) as the chain's core, without inlining:
/// Would reading a generic definition's open types as R (what nothing constrains is R) be wrong:
/// does one occur at a type other than its own with R for its type variables?
fn used_at_several_types(p: &Program) -> bool {
    let real = |t: &Type| crate::types::rename(t, &mut |_| Type::Real);
    let generic: HashMap<&str, Type> = p
        .defs
        .iter()
        .filter_map(|d| d.scheme.as_ref().filter(|s| !s.vars.is_empty()).map(|s| (&*d.name.text, real(&s.ty))))
        .collect();
    let mut stack: Vec<&Expr> = p.defs.iter().map(|d| &d.body).collect();
    while let Some(e) = stack.pop() {
        if let ExprKind::Var(n) = &e.kind {
            if generic.get(&*n.text).is_some_and(|t| *t != real(&e.ty)) {
                return true;
            }
        }
        crate::ir::each_child(e, &mut |c| stack.push(c));
    }
    false
}

/// `main` as `FirstOrder`, every other function definition as closed code (App. C), and the
/// closed values (closures with no captured variables).
pub fn closure_converted(src: &Source) -> Result<(FirstOrder, Vec<Code>, Vec<(Name, Term)>), Diagnostic> {
    // Closure conversion's output is typed with generalisation: a closed code that only passes a
    // closure on (`compose_code`) is generic in that closure's environment, and may be used at
    // several environment types. CHAD needs every type known, so such codes are specialised per
    // use first (a program whose generic codes are each used at one type keeps its names).
    let mut p = if used_at_several_types(src.program) {
        crate::kit::passes::monomorphise::monomorphise(src.program)?
    } else {
        src.program.clone()
    };
    // main at the type the pipeline fitted to the input (a component main leaves open has it, and
    // so does a closed code's arithmetic that only main decides, `\z -> z * x` on an integer x)
    let main_ty = Type::fun(src.input_type.clone(), src.output_type.clone());
    crate::types::check_program_monomorphic(&mut p, Some(&main_ty)).map_err(|d| {
        Diagnostic::error(d.span, format!("internal error: the closure-converted program does not type-check at main's type: {}", d.message))
    })?;
    // what nothing constrains is R (as first_order_at)
    for d in &mut p.defs {
        let mut stack = vec![&mut d.body];
        while let Some(e) = stack.pop() {
            e.ty = crate::types::rename(&e.ty, &mut |_| Type::Real);
            stack.extend(crate::ir::children_mut(e));
        }
    }
    let mut fresh = Fresh::new(&p);
    let mut main = None;
    let mut codes = vec![];
    let mut consts = vec![];
    for d in &p.defs {
        let mut lam = &d.body;
        while let ExprKind::Ann(x_x) = &lam.kind {
            let (x, _) = &**x_x;
            lam = x;
        }
        let ExprKind::Lam(_, pat_body) = &lam.kind else {
            // a closed value (a closure of closed code with an empty environment)
            check_depth(&d.body, d.span)?;
            consts.push((d.name.clone(), desugar(&d.body, &mut fresh, Lang::ClosedCode)?));
            continue;
        };
        let (pat, body) = &**pat_body;
        check_depth(body, d.span)?;
        let ty = if &*d.name.text == "main" {
            src.input_type.clone()
        } else {
            match &lam.ty {
                Type::Fun(ab) | Type::Lin(ab) => ab.0.clone(),
                _ => return Err(outside(d.span, "a definition without a function type")),
            }
        };
        let mut inputs = vec![];
        let pattern = name_wilds(pat, &ty, &mut fresh, &mut inputs);
        for (n, t) in &inputs {
            if outside_lang(t, Lang::ClosedCode) {
                return Err(outside_type(pat.span(), &format!("the parameter `{}`", n.text), t));
            }
        }
        let body = desugar(body, &mut fresh, Lang::ClosedCode)?;
        if &*d.name.text == "main" {
            main = Some((pattern, inputs, body));
        } else {
            codes.push(Code { name: d.name.clone(), pattern, ty, inputs, body });
        }
    }
    let Some((pattern, inputs, body)) = main else { return Err(outside(Span::NONE, "a program without `main`")) };
    Ok((FirstOrder { program: p, pattern, inputs, body, fresh }, codes, consts))
}

/// The source with its lambdas kept (naive higher-order CHAD, §9): monomorphised, every top-level
/// function a `let` of its lambda at the start of `main`'s body (in dependency order; recursion is
/// refused), then desugared, lambdas and applications included.
pub fn with_lambdas(src: &Source) -> Result<FirstOrder, Diagnostic> {
    let mono = crate::kit::passes::monomorphise::monomorphise(src.program)?;
    let index: HashMap<&str, usize> = mono.defs.iter().enumerate().map(|(i, d)| (&*d.name.text, i)).collect();
    let Some(&main_i) = index.get("main") else { return Err(outside(Span::NONE, "a program without `main`")) };
    // the definitions main reaches, each after those it uses (Kahn's algorithm on the reached set)
    let uses: Vec<Vec<usize>> = mono.defs.iter().map(|d| crate::kit::passes::globals_used(&d.body).iter().filter_map(|g| index.get(&**g).copied()).collect()).collect();
    let mut reached = vec![false; mono.defs.len()];
    let mut stack = vec![main_i];
    while let Some(i) = stack.pop() {
        if !std::mem::replace(&mut reached[i], true) {
            stack.extend(uses[i].iter().copied());
        }
    }
    let mut order = vec![];
    let mut done = vec![false; mono.defs.len()];
    loop {
        let next = (0..mono.defs.len()).find(|&i| reached[i] && !done[i] && uses[i].iter().all(|&j| done[j] || j == usize::MAX));
        match next {
            Some(i) if uses[i].contains(&i) => return Err(outside(mono.defs[i].span, "recursion (a recursive definition)")),
            Some(i) => {
                done[i] = true;
                order.push(i);
            }
            None => break,
        }
    }
    if order.len() != reached.iter().filter(|r| **r).count() {
        return Err(outside(mono.defs[main_i].span, "recursion (definitions that call each other)"));
    }
    let mut fresh = Fresh::new(&mono);
    let locals: HashMap<String, Name> = order.iter().filter(|&&i| i != main_i).map(|&i| (mono.defs[i].name.text.to_string(), fresh.name(&mono.defs[i].name.text))).collect();
    let mut bodies: Vec<(Name, Expr)> = vec![];
    let mut main_body = mono.defs[main_i].body.clone();
    for &i in &order {
        let mut b = mono.defs[i].body.clone();
        let mut stack = vec![&mut b];
        while let Some(e) = stack.pop() {
            if let ExprKind::Var(n) = &e.kind {
                if let Some(l) = n.is_global().then(|| locals.get(&*n.text)).flatten() {
                    e.kind = ExprKind::Var(l.clone());
                }
            }
            stack.extend(crate::ir::children_mut(e));
        }
        if i == main_i {
            main_body = b;
        } else {
            bodies.push((locals[&*mono.defs[i].name.text].clone(), b));
        }
    }
    while let ExprKind::Ann(x_x) = main_body.kind {
        let (x, _) = *x_x;
        main_body = x;
    }
    let ExprKind::Lam(k, pat_body) = main_body.kind else { return Err(outside(mono.defs[main_i].span, "`main` that is not a function")) };
    let (pat, body) = *pat_body;
    let body = bodies.into_iter().rev().fold(body, |acc, (n, rhs)| crate::build::let_(crate::build::pvar(&n), rhs, acc));
    let mut main = mono.defs[main_i].clone();
    main.body = Expr { kind: ExprKind::Lam(k, Box::new((pat, body))), ..main_body };
    main.scheme = None;
    let mut p = mono.clone();
    p.defs = vec![main];
    p.next_id = fresh.next_id;
    let main_ty = Type::fun(src.input_type.clone(), src.output_type.clone());
    crate::types::check_program_monomorphic(&mut p, Some(&main_ty))
        .map_err(|d| Diagnostic::error(d.span, format!("internal error: the program with its lambdas does not type-check: {}", d.message)))?;
    for d in &mut p.defs {
        let mut stack = vec![&mut d.body];
        while let Some(e) = stack.pop() {
            e.ty = crate::types::rename(&e.ty, &mut |_| Type::Real);
            stack.extend(crate::ir::children_mut(e));
        }
    }
    let main = p.defs[0].clone();
    let ExprKind::Lam(_, pat_body) = &main.body.kind else { return Err(outside(main.span, "`main` that is not a function")) };
    let (pat, body) = &**pat_body;
    check_depth(body, main.span)?;
    let mut fresh = Fresh::new(&p);
    let mut inputs = vec![];
    let pattern = name_wilds(pat, src.input_type, &mut fresh, &mut inputs);
    let body = desugar(body, &mut fresh, Lang::Lambdas)?;
    Ok(FirstOrder { program: p, pattern, inputs, body, fresh })
}

/// The transform recurses on every construct but a let's body (let chains are walked in loops):
/// refuse programs nested deeper than the `nesting` budget allows, before anything recurses.
fn check_depth(body: &Expr, span: Span) -> Result<(), Diagnostic> {
    let limit = crate::limits::max_brackets() / 2;
    let mut stack = vec![(body, 1usize)];
    while let Some((e, depth)) = stack.pop() {
        if depth > limit {
            let at = if e.span == Span::NONE { span } else { e.span };
            return Err(Diagnostic::error(at, format!("this program nests more than {limit} levels (not counting let bodies), this chain's `nesting` budget: the CHAD transform recurses on subterms")));
        }
        match &e.kind {
            ExprKind::Let(rhs_b_x) => {
                let (_, rhs_b) = &**rhs_b_x;
                let (rhs, b) = rhs_b;
                stack.push((rhs, depth + 1));
                stack.push((b, depth));
            }
            _ => each_child(e, &mut |c| stack.push((c, depth + 1))),
        }
    }
    Ok(())
}

/// The pattern with each `_` named, and its variables with their types.
fn name_wilds(p: &Pat, ty: &Type, fr: &mut Fresh, vars: &mut Vec<(Name, Type)>) -> Pat {
    match (p, ty) {
        (Pat::Var(n, _), t) => {
            vars.push((n.clone(), t.clone()));
            p.clone()
        }
        (Pat::Tuple(ps, s), Type::Tuple(ts)) if ps.len() == ts.len() => {
            Pat::Tuple(ps.iter().zip(ts.iter()).map(|(p, t)| name_wilds(p, t, fr, vars)).collect(), *s)
        }
        (Pat::Wild(s) | Pat::Unit(s) | Pat::Tuple(_, s), t) => {
            let n = fr.name("w");
            vars.push((n.clone(), t.clone()));
            Pat::Var(n, *s)
        }
    }
}

fn term(kind: K, e: &Expr) -> Term {
    Term { kind, ty: e.ty.clone(), span: e.span }
}

/// `let p = (z : ty) in …` as the paper's sugar: bindings of each pattern variable to a projection.
fn destructure(p: &Pat, z: &Name, ty: &Type, span: Span, fr: &mut Fresh, out: &mut Vec<(Name, Term)>) {
    let mut work = vec![(p.clone(), z.clone(), ty.clone())];
    while let Some((p, z, ty)) = work.pop() {
        let (Pat::Tuple(ps, _), Type::Tuple(ts)) = (&p, &ty) else { continue };
        for (i, (q, t)) in ps.iter().zip(ts.iter()).enumerate() {
            let zt = Term { kind: K::Var(z.clone()), ty: ty.clone(), span };
            let proj = Term { kind: K::Proj(i, Box::new(zt)), ty: t.clone(), span };
            match q {
                Pat::Var(n, _) => out.push((n.clone(), proj)),
                Pat::Tuple(..) => {
                    let w = fr.name("w");
                    out.push((w.clone(), proj));
                    work.push((q.clone(), w, t.clone()));
                }
                Pat::Wild(_) | Pat::Unit(_) => {}
            }
        }
    }
}

/// A pattern binder as one variable, and the bindings that take it apart.
fn binder(p: &Pat, ty: &Type, span: Span, fr: &mut Fresh) -> (Name, Vec<(Name, Term)>) {
    match p {
        Pat::Var(n, _) => (n.clone(), vec![]),
        _ => {
            let z = fr.name("z");
            let mut out = vec![];
            destructure(p, &z, ty, span, fr, &mut out);
            (z, out)
        }
    }
}

fn with_lets(binds: Vec<(Name, Term)>, body: Term) -> Term {
    if binds.is_empty() {
        return body;
    }
    let (ty, span) = (body.ty.clone(), body.span);
    Term { kind: K::Lets(binds, Box::new(body)), ty, span }
}

/// The IR term as a core term. Recursion is bounded by `check_depth` (let bodies are a loop).
/// Which program the core is taken from: the inlined first-order program, closure-converted code
/// (closed functions are globals, applied), or the source's lambdas as they are (naive §9).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    FirstOrder,
    ClosedCode,
    Lambdas,
    /// First order with §7's arrays (`build`, `!`, `fold`), after `lower_arrays`.
    Arrays,
}

impl Lang {
    fn first_order(self) -> bool {
        matches!(self, Lang::FirstOrder | Lang::Arrays)
    }
}

fn desugar(e: &Expr, fr: &mut Fresh, ho: Lang) -> Result<Term, Diagnostic> {
    use ExprKind as E;
    if outside_lang(&e.ty, ho) && !matches!(e.kind, E::Lam(..) | E::App(..) | E::LetRec(..)) {
        return Err(outside_type(e.span, "a value", &e.ty));
    }
    // (with functions kept, a discrete term that calls one is taken apart like any other: the
    // function's derivative replaces it in the output)
    if discrete(&e.ty) && !matches!(e.kind, E::Var(_)) && (ho.first_order() || !calls_function(e)) {
        // (with arrays, a discrete term such as `length (build n (\i -> …))` runs as it is too)
        if ho != Lang::Arrays {
            reject_inside(e)?;
        } else {
            reject_recursion(e)?;
        }
        return Ok(term(K::Discrete(e.clone()), e));
    }
    Ok(match &e.kind {
        E::Var(n) if ho == Lang::ClosedCode && n.is_global() => term(K::Global(n.clone()), e),
        E::Var(n) => term(K::Var(n.clone()), e),
        E::Lam(_, p_body) if ho == Lang::Lambdas => {
            let (p, body) = &**p_body;
            let Type::Fun(ab) = &e.ty else { return Err(outside(e.span, "a lambda of a non-function type")) };
            let (x, parts) = binder(p, &ab.0, p.span(), fr);
            let body = with_lets(parts, desugar(body, fr, ho)?);
            term(K::Lam(x, Box::new(body)), e)
        }
        E::App(f_a) if !ho.first_order() => { let (f, a) = &**f_a; term(K::App(Box::new(desugar(f, fr, ho)?), Box::new(desugar(a, fr, ho)?)), e) },
        E::Real(r) => term(K::Lit(*r), e),
        E::Prim(op, args) if ho == Lang::Arrays && matches!(op, Prim::Build | Prim::Index | Prim::Fold | Prim::Reduce) => arrays(e, *op, args, fr)?,
        // `[]`: a constant, as a literal is
        E::Array(es) if ho == Lang::Arrays && es.is_empty() => term(K::Discrete(e.clone()), e),
        E::Let(..) => {
            let mut binds = vec![];
            let mut cur = e;
            while let ExprKind::Let(p_rhs_body) = &cur.kind {
                let (p, rhs_body) = &**p_rhs_body;
                let (rhs, body) = rhs_body;
                let t = desugar(rhs, fr, ho)?;
                let (z, parts) = binder(p, &rhs.ty, rhs.span, fr);
                binds.push((z, t));
                binds.extend(parts);
                cur = body;
            }
            let body = desugar(cur, fr, ho)?;
            with_lets(binds, body)
        }
        E::Tuple(es) => term(K::Tuple(es.iter().map(|x| desugar(x, fr, ho)).collect::<Result<_, _>>()?), e),
        E::Fst(x) => term(K::Proj(0, Box::new(desugar(x, fr, ho)?)), e),
        E::Snd(x) => term(K::Proj(1, Box::new(desugar(x, fr, ho)?)), e),
        E::Inl(x) => term(K::Inl(Box::new(desugar(x, fr, ho)?)), e),
        E::Inr(x) => term(K::Inr(Box::new(desugar(x, fr, ho)?)), e),
        E::Case(c) => {
            let (s, p1, e1, p2, e2) = &**c;
            let Type::Sum(tatb) = &s.ty else { return Err(outside(s.span, "a case on a non-sum")) };
            let (ta, tb) = &**tatb;
            let st = desugar(s, fr, ho)?;
            let (x, bx) = binder(p1, ta, p1.span(), fr);
            let (y, by) = binder(p2, tb, p2.span(), fr);
            let b1 = with_lets(bx, desugar(e1, fr, ho)?);
            let b2 = with_lets(by, desugar(e2, fr, ho)?);
            term(K::Case(Box::new(st), x, Box::new(b1), y, Box::new(b2)), e)
        }
        ExprKind::If(c_a_b) => {
            let (c, a_b) = &**c_a_b;
            let (a, b) = a_b;
            term(K::If(Box::new(desugar(c, fr, ho)?), Box::new(desugar(a, fr, ho)?), Box::new(desugar(b, fr, ho)?)), e)
        }
        // a real primitive, or a real-valued function of discrete arguments only (`real k`)
        E::Prim(op, args) if op.info().jvp.is_some() || args.iter().all(|a| discrete(&a.ty)) => {
            term(K::Op(*op, args.iter().map(|x| desugar(x, fr, ho)).collect::<Result<_, _>>()?), e)
        }
        E::Ann(x_x) => { let (x, _) = &**x_x; desugar(x, fr, ho)? },
        // a comparison of a call's result: discrete, its backpropagator adds nothing
        E::Prim(op, args) if !ho.first_order() && discrete(&e.ty) => {
            term(K::Op(*op, args.iter().map(|x| desugar(x, fr, ho)).collect::<Result<_, _>>()?), e)
        }
        E::LetRec(..) => return Err(outside(e.span, "recursion (a local recursive function)")),
        E::Array(_) => return Err(outside(e.span, "an array (arrays are §7, the later stage chad/arrays)")),
        E::Prim(op, _) if op.info().jvp.is_none() && e.ty.as_array().is_some() => {
            return Err(outside(e.span, "an array operation (arrays are §7, the later stage chad/arrays)"))
        }
        E::Prim(op, _) => return Err(outside(e.span, &format!("`{}` (no derivative)", op.symbol()))),
        E::Lam(..) | E::App(..) => return Err(outside(e.span, "a function value left after inlining (chosen at run time)")),
        _ => return Err(outside(e.span, "this construct")),
    })
}

/// A lambda argument of an array operation, its annotations taken off.
fn lambda(f: &Expr) -> Option<(&Pat, &Expr)> {
    let mut f = f;
    while let ExprKind::Ann(x_x) = &f.kind {
        let (x, _) = &**x_x;
        f = x;
    }
    match &f.kind {
        ExprKind::Lam(_, p_body) => { let (p, body) = &**p_body; Some((p, body)) },
        _ => None,
    }
}

/// §7's three array operations (after `lower_arrays`, the only ones left).
fn arrays(e: &Expr, op: Prim, args: &[Expr], fr: &mut Fresh) -> Result<Term, Diagnostic> {
    let not_lambda = |f: &Expr| outside(f.span, "an array operation's function that is not a lambda after inlining");
    Ok(match (op, args) {
        (Prim::Build, [n, f]) => {
            let Some((p, body)) = lambda(f) else { return Err(not_lambda(f)) };
            let (i, parts) = binder(p, &Type::Int, p.span(), fr);
            let body = with_lets(parts, desugar(body, fr, Lang::Arrays)?);
            term(K::Build(Box::new(desugar(n, fr, Lang::Arrays)?), i, Box::new(body)), e)
        }
        (Prim::Index, [a, i]) => term(K::Index(Box::new(desugar(a, fr, Lang::Arrays)?), Box::new(desugar(i, fr, Lang::Arrays)?)), e),
        (Prim::Fold | Prim::Reduce, [f, z, a]) => {
            let elem = a.ty.as_array().cloned().unwrap_or(Type::Unknown);
            if elem != e.ty {
                let (acc, el) = (crate::types::show(&e.ty), crate::types::show(&elem));
                return Err(outside(e.span, &format!("a fold whose accumulator ({acc}) is not of its elements' type ({el}): §7's fold (x. t) reduces with t : τ × τ → τ")));
            }
            let Some((p1, inner)) = lambda(f) else { return Err(not_lambda(f)) };
            let Some((p2, body)) = lambda(inner) else { return Err(not_lambda(f)) };
            let (x, mut parts) = binder(p1, &e.ty, p1.span(), fr);
            let (y, py) = binder(p2, &e.ty, p2.span(), fr);
            parts.extend(py);
            let body = with_lets(parts, desugar(body, fr, Lang::Arrays)?);
            let (init, arr) = (desugar(z, fr, Lang::Arrays)?, desugar(a, fr, Lang::Arrays)?);
            term(K::Fold { x, y, body: Box::new(body), init: Box::new(init), arr: Box::new(arr), balanced: op == Prim::Reduce }, e)
        }
        _ => return Err(outside(e.span, "this array operation")),
    })
}

/// A discrete term with arrays runs as it is; it must not recurse.
fn reject_recursion(e: &Expr) -> Result<(), Diagnostic> {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        if let ExprKind::LetRec(..) = &e.kind {
            return Err(outside(e.span, "recursion (a local recursive function)"));
        }
        each_child(e, &mut |c| stack.push(c));
    }
    Ok(())
}

/// Whether `e` applies a function or names a global (whose derivative replaces it in the output).
fn calls_function(e: &Expr) -> bool {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match &e.kind {
            ExprKind::App(..) => return true,
            ExprKind::Var(n) if n.is_global() || matches!(e.ty, Type::Fun(..) | Type::Lin(..)) => return true,
            _ => {}
        }
        each_child(e, &mut |c| stack.push(c));
    }
    false
}

/// A discrete term is run as it is, so it must itself be first order with no arrays or recursion.
fn reject_inside(e: &Expr) -> Result<(), Diagnostic> {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match &e.kind {
            ExprKind::LetRec(..) => return Err(outside(e.span, "recursion (a local recursive function)")),
            ExprKind::Lam(..) => return Err(outside(e.span, "a function value left after inlining")),
            ExprKind::Array(_) => return Err(outside(e.span, "an array (arrays are §7, the later stage chad/arrays)")),
            _ if e.ty.as_array().is_some() => return Err(outside(e.span, "an array (arrays are §7, the later stage chad/arrays)")),
            _ => {}
        }
        each_child(e, &mut |c| stack.push(c));
    }
    Ok(())
}

/// The cells Fig. 4's dense environment vectors would hold in one run, at most: every variable
/// reference builds a one-hot vector of |Γ| cells, every constant a zero vector (Table 1). Walked
/// with an explicit stack.
pub fn dense_cells(fo: &FirstOrder) -> usize {
    let mut total = 0usize;
    let mut stack = vec![(&fo.body, fo.inputs.len())];
    while let Some((t, g)) = stack.pop() {
        match &t.kind {
            K::Var(_) | K::Lit(_) | K::Discrete(_) | K::Global(_) => total = total.saturating_add(g.max(1)),
            K::Lets(chain, body) => {
                for (i, (_, rhs)) in chain.iter().enumerate() {
                    stack.push((rhs, g + i));
                }
                stack.push((body, g + chain.len()));
            }
            K::Tuple(ts) | K::Op(_, ts) => stack.extend(ts.iter().map(|t| (t, g))),
            K::Proj(_, s) | K::Inl(s) | K::Inr(s) => stack.push((s, g)),
            K::Lam(_, b) => stack.push((b, g + 1)),
            K::App(f, a) => {
                stack.push((f, g));
                stack.push((a, g));
            }
            K::Case(s, _, a, _, b) => {
                stack.push((s, g));
                stack.push((a, g + 1));
                stack.push((b, g + 1));
            }
            K::If(c, a, b) => {
                stack.push((c, g));
                stack.push((a, g));
                stack.push((b, g));
            }
            K::Index(a, b) => {
                stack.push((a, g));
                stack.push((b, g));
            }
            K::Build(n, _, b) => {
                stack.push((n, g));
                stack.push((b, g + 1));
            }
            K::Fold { body, init, arr, .. } => {
                stack.push((init, g));
                stack.push((arr, g));
                stack.push((body, g + 2));
            }
        }
    }
    total
}
