//! Whole-program passes that later chains compose: each maps a typed `Program` to a typed `Program`
//! that computes the same `main`, re-checked by `types::check_program` before it is returned.
//!
//! - `monomorphise`: one copy of each polymorphic definition per ground type it is used at.
//! - `inline`: every call of a non-recursive function inlined, lambdas beta-reduced (first-order
//!   where every function value is known statically).
//! - `closure_convert`: typed closure conversion (Minamide, Morrisett & Harper 1996; Smeding & Vákár,
//!   "Efficient CHAD", App. C): every lambda closed, a function value an (environment, code) pair.
//! - `defunctionalise`: Reynolds' defunctionalisation: function values become tags with their
//!   environments, application an `apply` dispatcher per lambda set.
//!
//! The helpers here walk expressions with explicit stacks (binder ids are unique in a program, so a
//! walk needs no scopes: see ir.rs); the passes recurse on nesting but walk let chains in loops.

pub mod closure_convert;
mod closures;
pub mod defunctionalise;
pub mod inline;
pub mod lower_arrays;
mod lambda_sets;
pub mod monomorphise;

pub use closure_convert::closure_convert;
pub use defunctionalise::defunctionalise;
pub use inline::{first_order_at, first_order_unrolled, inline_all};
pub use lower_arrays::lower_arrays;
pub use monomorphise::monomorphise;

use crate::build::Fresh;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// Re-infers the types of a pass's output, local definitions monomorphic (so that every node of a
/// monomorphised program keeps a ground type); a failure is the pass's bug, reported as such.
pub(crate) fn retype(p: &mut Program, pass: &str) -> Result<(), Diagnostic> {
    let main = p.def("main").and_then(|d| d.scheme.clone()).map(|s| s.ty);
    crate::types::check_program_monomorphic(p, main.as_ref()).map_err(|d| {
        Diagnostic::error(d.span, format!("internal error in {pass}: the output does not type-check: {}", d.message))
    })
}

/// The binders a node introduces for its children (lambda parameter, let, case arms, local functions).
pub(crate) fn node_binders(e: &Expr, out: &mut Vec<u32>) {
    let mut pat = |p: &Pat| out.extend(p.names().iter().map(|n| n.id));
    match &e.kind {
        ExprKind::Lam(_, p_x) => pat(&p_x.0), ExprKind::Let(p_x) | ExprKind::Bind(p_x) => pat(&p_x.0),
        ExprKind::Case(c) => {
            let (_, p1, _, p2, _) = &**c;
            pat(p1);
            pat(p2)
        }
        ExprKind::LetRec(fs_x) => { let (fs, _) = &**fs_x; out.extend(fs.iter().map(|f| f.name.id)) },
        _ => {}
    }
}

/// The free local variables of `e`, in order of first occurrence (globals are not free variables).
pub fn free_locals(e: &Expr) -> Vec<Name> {
    let mut bound = vec![];
    let mut used: Vec<Name> = vec![];
    let mut seen = HashSet::default();
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        node_binders(e, &mut bound);
        if let ExprKind::Var(n) = &e.kind {
            if !n.is_global() && seen.insert(n.id) {
                used.push(n.clone());
            }
        }
        let mut cs = children(e);
        cs.reverse();
        stack.extend(cs);
    }
    let bound: HashSet<u32> = bound.into_iter().collect();
    used.into_iter().filter(|n| !bound.contains(&n.id)).collect()
}

/// The names of the globals `e` refers to.
pub fn globals_used(e: &Expr) -> Vec<Text> {
    let mut out = vec![];
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        if let ExprKind::Var(n) = &e.kind {
            if n.is_global() && !out.contains(&n.text) {
                out.push(n.text.clone());
            }
        }
        each_child(e, &mut |c| stack.push(c));
    }
    out
}

fn rename_pat(p: &mut Pat, map: &HashMap<u32, u32>) {
    match p {
        Pat::Var(n, _) => {
            if let Some(&id) = map.get(&n.id) {
                n.id = id
            }
        }
        Pat::Tuple(ps, _) => ps.iter_mut().for_each(|p| rename_pat(p, map)),
        Pat::Wild(_) | Pat::Unit(_) => {}
    }
}

/// Gives every binder inside `e` a fresh id (and its occurrences with it), so that a copy of `e` can
/// sit beside the original in one program. Variables bound outside `e` are left alone.
pub fn freshen(e: &mut Expr, fresh: &mut Fresh) {
    let mut map: HashMap<u32, u32> = HashMap::default();
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        // A binder's node is visited before its scope (pre-order), and ids are unique.
        let mut bs = vec![];
        node_binders(e, &mut bs);
        for b in bs {
            map.insert(b, fresh.name("_").id);
        }
        match &mut e.kind {
            ExprKind::Var(n) => {
                if let Some(&id) = map.get(&n.id) {
                    n.id = id
                }
            }
            ExprKind::Lam(_, p_x) => rename_pat(&mut p_x.0, &map), ExprKind::Let(p_x) | ExprKind::Bind(p_x) => rename_pat(&mut p_x.0, &map),
            ExprKind::Case(c) => {
                let (_, p1, _, p2, _) = &mut **c;
                rename_pat(p1, &map);
                rename_pat(p2, &map)
            }
            ExprKind::LetRec(fs_x) => { let (fs, _) = &mut **fs_x; fs.iter_mut().for_each(|f| f.name.id = map[&f.name.id]) },
            _ => {}
        }
        stack.extend(children_mut(e));
    }
}

/// Whether any type variable (or `Unknown`) remains in `t`.
pub fn has_type_vars(t: &Type) -> bool {
    match t {
        Type::Var(_) | Type::Unknown => true,
        Type::Tuple(ts) => ts.iter().any(has_type_vars),
        Type::Con(c) => c.args.iter().any(has_type_vars),
        Type::Sum(ab) | Type::Fun(ab) | Type::Lin(ab) => has_type_vars(&ab.0) || has_type_vars(&ab.1),
        _ => false,
    }
}

/// A readable identifier fragment for a ground type, for the names of specialised copies:
/// `R`, `Z`, `B`, `U`, `t2_R_Z` (tuples), `s_R_U` (sums), `f_R_R` (functions).
pub fn mangle(t: &Type) -> String {
    match t {
        Type::Real => "R".into(),
        Type::Int => "Z".into(),
        Type::Bool => "B".into(),
        Type::Unit => "U".into(),
        Type::Tuple(ts) => format!("t{}_{}", ts.len(), ts.iter().map(mangle).collect::<Vec<_>>().join("_")),
        Type::Sum(ab) => format!("s_{}_{}", mangle(&ab.0), mangle(&ab.1)),
        Type::Fun(ab) | Type::Lin(ab) => format!("f_{}_{}", mangle(&ab.0), mangle(&ab.1)),
        Type::Con(c) => std::iter::once(c.name.to_string()).chain(c.args.iter().map(mangle)).collect::<Vec<_>>().join("_"),
        Type::Var(v) => format!("a{v}"),
        Type::Unknown => "X".into(),
    }
}

/// A global name based on `base` that no definition or param in `taken` has; reserves it.
pub(crate) fn unique_global(base: &str, taken: &mut HashSet<String>) -> String {
    let name = if taken.contains(base) { (2..).map(|k| format!("{base}_{k}")).find(|c| !taken.contains(c)).unwrap() } else { base.to_string() };
    taken.insert(name.clone());
    name
}

/// Some closed value of type `t`, for code that cannot run (the arm of a dispatcher over no lambdas).
/// `None` for target types whose values the passes cannot build (`Con`).
pub(crate) fn some_value(t: &Type) -> Option<Expr> {
    use crate::build::*;
    Some(match t {
        Type::Real => real(0.0),
        Type::Int => int(0),
        Type::Bool => Expr::gen(ExprKind::Bool(false)),
        Type::Unit => unit(),
        Type::Tuple(ts) => tuple(ts.iter().map(some_value).collect::<Option<Vec<_>>>()?),
        Type::Sum(ab) => ann(inl(some_value(&ab.0)?), Type::Sum(ab.clone())),
        Type::Fun(ab) | Type::Lin(ab) => ann(lam(pwild(), some_value(&ab.1)?), Type::Fun(ab.clone())),
        Type::Con(..) | Type::Var(_) | Type::Unknown => return None,
    })
}

/// A located refusal of a pass (a construct its method cannot take).
pub(crate) fn refuse(span: Span, pass: &str, msg: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::error(span, format!("{pass}: {msg}"))
}

/// Every expression of a program, for structural checks in tests.
pub fn all_exprs(p: &Program) -> Vec<&Expr> {
    let mut out = vec![];
    let mut stack: Vec<&Expr> = p.defs.iter().map(|d| &d.body).collect();
    while let Some(e) = stack.pop() {
        out.push(e);
        each_child(e, &mut |c| stack.push(c));
    }
    out
}
