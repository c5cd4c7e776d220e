//! Monomorphisation: every polymorphic top-level definition (Hindley–Milner let-polymorphism, see
//! types.rs) is copied once per ground type it is used at, starting from `main` at its ground type,
//! the way whole-program compilers specialise ML (MLton) before closure conversion; Smeding & Vákár
//! ("Efficient CHAD", App. C) state the closure-converted CHAD rules for types without free type
//! variables, which is what this pass produces.
//!
//! - A copy of `f` at type arguments `τ1 … τn` is named `f_τ1_…_τn` with the types mangled
//!   (`id_R`, `compose_R_R_R`, `fst_t2_R_Z`); monomorphic definitions keep their names; `main` stays
//!   `main` (at its type with unconstrained parts defaulted to R, as the pipeline runs it).
//! - Definitions `main` does not reach are dropped.
//! - Type variables that a definition's type does not mention (dead code such as `let _ = \x -> x`)
//!   are grounded to `()`, and the lambda or injection that introduced them is annotated, so the
//!   re-inferred output has no type variables either.
//! - Local definitions are generalised by the type checker, but not specialised here: the program is
//!   typed again with monomorphic locals first (`types::check_program_monomorphic`), which gives each
//!   local the one type its uses need, and refuses, located at the conflicting use, a local used at
//!   two types (make it a top-level `def` to have it specialised).

use super::{freshen, has_type_vars, mangle, refuse, retype, unique_global};
use crate::build::Fresh;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::types::rename;
use std::collections::VecDeque;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

const PASS: &str = "monomorphise";
/// Copies beyond this many mean a type grows with every use (it cannot in HM, but a bound is cheap).
const MAX_INSTANCES: usize = 10_000;

/// Specialises `p` (type-checked) from `main`. The output is type-checked and has no type variables.
pub fn monomorphise(p: &Program) -> Result<Program, Diagnostic> {
    let main = p.def("main").ok_or_else(|| refuse(Span::NONE, PASS, "the program has no `def main`"))?;
    // Local definitions are generalised by the checker, but only top-level ones are specialised
    // here: type the program again with monomorphic locals, which pins every local's type, or
    // refuses a local used at two types where the uses disagree.
    let main_ty = main.scheme.as_ref().map(|s| s.ty.clone());
    let original = p;
    let mut p = p.clone();
    if let Err(d) = crate::types::check_program_monomorphic(&mut p, main_ty.as_ref()) {
        return Err(match polymorphic_use(original) {
            Some((span, name, ty)) => refuse(
                span,
                PASS,
                format!("the local definition `{name}` is used at more than one type, here at {} (only top-level definitions are specialised; make it a `def`)", crate::types::show(&ty)),
            ),
            None => refuse(d.span, PASS, format!("internal error: the program does not type-check with monomorphic local definitions: {}", d.message)),
        });
    }
    let p = &p;
    let main = p.def("main").expect("still there");
    let scheme_of = |d: &Def| d.scheme.clone().ok_or_else(|| refuse(d.span, PASS, "the program is not type-checked"));
    let main_ty = rename(&scheme_of(main)?.ty, &mut |_| Type::Real);
    let index: HashMap<&str, usize> = p.defs.iter().enumerate().map(|(i, d)| (&*d.name.text, i)).collect();
    let mut taken: HashSet<String> = p.params.iter().map(|q| q.name.text.to_string()).collect();
    taken.insert("main".into());
    for d in &p.defs {
        if d.scheme.as_ref().is_some_and(|s| s.vars.is_empty()) {
            taken.insert(d.name.text.to_string());
        }
    }
    let mut fresh = Fresh::new(p);
    let mut instances: HashMap<(usize, Type), String> = HashMap::default();
    let mut queue: VecDeque<(usize, Type, String)> = VecDeque::new();
    let main_i = index["main"];
    instances.insert((main_i, main_ty.clone()), "main".into());
    queue.push_back((main_i, main_ty, "main".into()));
    let mut copied: HashSet<usize> = HashSet::default();
    let mut defs = vec![];
    while let Some((i, ty, name)) = queue.pop_front() {
        let d = &p.defs[i];
        let scheme = scheme_of(d)?;
        let mut subst = HashMap::default();
        if !matches(&scheme.ty, &ty, &mut subst) {
            return Err(refuse(d.span, PASS, format!("internal error: `{}` used at a type that is not an instance of its scheme", d.name.text)));
        }
        let mut body = d.body.clone();
        if !copied.insert(i) {
            freshen(&mut body, &mut fresh);
        }
        // `head`: a parameter's λ of a local function (`let loop k acc = …`), which must stay a λ to be
        // printed as the equation's parameter (annotated, `let loop = (\k -> … : τ)` printed a
        // non-recursive `let`, whose body no longer parses); its leftover types are R at the end.
        let mut stack = vec![(&mut body, false)];
        while let Some((e, head)) = stack.pop() {
            let leftover = has_leftover(&e.ty, &subst);
            e.ty = ground(&e.ty, &subst);
            if let ExprKind::Ann(t_x) = &mut e.kind {
                let (_, t) = &mut **t_x;
                *t = ground(t, &subst);
            }
            if let ExprKind::Var(n) = &mut e.kind {
                if let Some(&j) = n.is_global().then(|| index.get(&*n.text)).flatten() {
                    let key = (j, e.ty.clone());
                    let target = match instances.get(&key) {
                        Some(t) => t.clone(),
                        None => {
                            if instances.len() >= MAX_INSTANCES {
                                return Err(refuse(e.span, PASS, format!("more than {MAX_INSTANCES} specialised copies")));
                            }
                            let s = p.defs[j].scheme.as_ref();
                            let t = match s.filter(|s| !s.vars.is_empty()) {
                                None => p.defs[j].name.text.to_string(),
                                Some(s) => {
                                    let mut sub = HashMap::default();
                                    matches(&s.ty, &e.ty, &mut sub);
                                    let args: Vec<String> = s.vars.iter().map(|v| mangle(sub.get(v).unwrap_or(&Type::Unit))).collect();
                                    unique_global(&format!("{}_{}", p.defs[j].name.text, args.join("_")), &mut taken)
                                }
                            };
                            instances.insert(key, t.clone());
                            queue.push_back((j, e.ty.clone(), t.clone()));
                            t
                        }
                    };
                    n.text = target.as_str().into();
                }
            }
            // Dead code's unconstrained types: pin the node that introduced them (see the module doc).
            if leftover && !head && matches!(e.kind, ExprKind::Lam(..) | ExprKind::Inl(_) | ExprKind::Inr(_)) {
                let ty = e.ty.clone();
                let inner = std::mem::replace(e, Expr::gen(ExprKind::Unit));
                let span = inner.span;
                *e = Expr { kind: ExprKind::Ann(Box::new((inner, ty.clone()))), span, ty };
            }
            let heads = match &e.kind {
                ExprKind::LetRec(fs_x) => { let (fs, _) = &**fs_x; fs.len() },
                ExprKind::Lam(..) if head => 1,
                _ => 0,
            };
            let mut cs: Vec<_> = children_mut(e).into_iter().enumerate().map(|(k, c)| (c, k < heads)).collect();
            cs.reverse(); // left to right, so copies are numbered in reading order
            stack.extend(cs);
        }
        defs.push((Def { name: Name::global(&name), body, span: d.span, scheme: None, role: d.role }, ty));
    }
    let types: Vec<Type> = defs.iter().map(|(_, t)| t.clone()).collect();
    let mut out = Program { params: p.params.clone(), input: p.input.clone(), seed: p.seed.clone(), defs: defs.into_iter().map(|(d, _)| d).collect(), expects: p.expects.clone(), next_id: fresh.next_id };
    retype(&mut out, PASS)?;
    // Arithmetic that main's body leaves open was R by default, but main's type says Z (`main x =
    // x * x` on an integer input): typed again with main at its type, which `retype` fits main to.
    let main_at = |out: &Program| out.def("main").and_then(|d| d.scheme.as_ref()).map(|s| rename(&s.ty, &mut |_| Type::Real));
    if main_at(&out).is_some_and(|t| t != types[0]) {
        if let Some(d) = out.defs.iter_mut().find(|d| &*d.name.text == "main") {
            d.scheme = Some(Scheme::mono(types[0].clone()));
        }
        retype(&mut out, PASS)?;
    }
    // A copy whose body does not pin its type (`id x = x`) would be generalised again: annotate it.
    let mut again = false;
    for (d, ty) in out.defs.iter_mut().zip(types) {
        if d.scheme.as_ref().is_some_and(|s| !s.vars.is_empty()) {
            let body = std::mem::replace(&mut d.body, Expr::gen(ExprKind::Unit));
            let span = body.span;
            d.body = Expr { kind: ExprKind::Ann(Box::new((body, ty))), span, ty: Type::Unknown };
            again = true;
        }
    }
    if again {
        retype(&mut out, PASS)?;
    }
    // What nothing constrains (an unused `[]`, `let v = [] in …`) is at R, as main's open parts are.
    for d in &mut out.defs {
        let mut stack = vec![&mut d.body];
        while let Some(e) = stack.pop() {
            if has_type_vars(&e.ty) {
                e.ty = crate::types::rename(&e.ty, &mut |_| Type::Real);
            }
            stack.extend(children_mut(e));
        }
    }
    Ok(out)
}

/// The first use, in reading order, of a generalised local definition at a type other than its own.
fn polymorphic_use(p: &Program) -> Option<(Span, std::rc::Rc<str>, Type)> {
    let mut own: HashMap<u32, &Type> = HashMap::default();
    for e in super::all_exprs(p) {
        match &e.kind {
            ExprKind::Let(p_rhs) if super::has_type_vars(&p_rhs.1 .0.ty) => {
                let (p, rhs_pair) = &**p_rhs;
                let (rhs, _) = rhs_pair;
                if let Pat::Var(x, _) = p {
                    own.insert(x.id, &rhs.ty);
                }
            }
            ExprKind::LetRec(fs_x) => { let (fs, _) = &**fs_x; own.extend(fs.iter().filter(|f| super::has_type_vars(&f.body.ty)).map(|f| (f.name.id, &f.body.ty))) },
            _ => {}
        }
    }
    let mut stack: Vec<&Expr> = p.defs.iter().rev().map(|d| &d.body).collect();
    while let Some(e) = stack.pop() {
        if let ExprKind::Var(n) = &e.kind {
            if own.get(&n.id).is_some_and(|t| **t != e.ty) {
                return Some((e.span, std::rc::Rc::from(&n.text), e.ty.clone()));
            }
        }
        let mut cs = children(e);
        cs.reverse();
        stack.extend(cs);
    }
    None
}

/// One-way matching of a scheme's type against a ground instance.
fn matches(pat: &Type, t: &Type, subst: &mut HashMap<u32, Type>) -> bool {
    match (pat, t) {
        (Type::Var(v), _) => match subst.get(v) {
            Some(u) => u == t,
            None => {
                subst.insert(*v, t.clone());
                true
            }
        },
        (Type::Tuple(xs), Type::Tuple(ys)) => xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| matches(x, y, subst)),
        (Type::Con(c), Type::Con(d)) => c.name == d.name && c.args.len() == d.args.len() && c.args.iter().zip(d.args.iter()).all(|(x, y)| matches(x, y, subst)),
        (Type::Sum(ab), Type::Sum(cd)) | (Type::Fun(ab) | Type::Lin(ab), Type::Fun(cd) | Type::Lin(cd)) => {
            matches(&ab.0, &cd.0, subst) && matches(&ab.1, &cd.1, subst)
        }
        (a, b) => a == b,
    }
}

fn ground(t: &Type, subst: &HashMap<u32, Type>) -> Type {
    if !has_type_vars(t) {
        return t.clone();
    }
    let t = rename(t, &mut |v| subst.get(&v).cloned().unwrap_or(Type::Unit));
    if t == Type::Unknown {
        Type::Unit
    } else {
        t
    }
}

fn has_leftover(t: &Type, subst: &HashMap<u32, Type>) -> bool {
    let mut vs = std::collections::BTreeSet::new();
    crate::types::free_vars(t, &mut vs);
    vs.iter().any(|v| !subst.contains_key(v))
}
