//! Small constructors for generated IR, so that transforms read like the papers' figures.
//! Generated nodes carry `Span::NONE` unless a span is given with `at`.

use crate::diag::Span;
use crate::ir::*;

pub fn var(n: &Name) -> Expr {
    Expr::gen(ExprKind::Var(n.clone()))
}
pub fn global(text: &str) -> Expr {
    Expr::gen(ExprKind::Var(Name::global(text)))
}
pub fn real(r: f64) -> Expr {
    Expr::gen(ExprKind::Real(r))
}
pub fn int(i: i64) -> Expr {
    Expr::gen(ExprKind::Int(i))
}
pub fn unit() -> Expr {
    Expr::gen(ExprKind::Unit)
}
/// A builtin by name; every node of one name shares its text (the names are the builtin tables',
/// a few hundred at most): an allocation each was 5 % of krawiec/monadic's output, eleven builtins
/// a source line (issue 14: memory per line).
pub fn builtin(name: &str) -> Expr {
    Expr::gen(ExprKind::Builtin(interned_text(name)))
}
pub fn app(f: Expr, a: Expr) -> Expr {
    Expr::gen(ExprKind::App(Box::new((f, a))))
}
/// `f a1 ... an`
pub fn apps(f: Expr, args: impl IntoIterator<Item = Expr>) -> Expr {
    args.into_iter().fold(f, app)
}
pub fn lam(p: Pat, body: Expr) -> Expr {
    Expr::gen(ExprKind::Lam(LamKind::Plain, Box::new((p, body))))
}
pub fn linlam(p: Pat, body: Expr) -> Expr {
    Expr::gen(ExprKind::Lam(LamKind::Linear, Box::new((p, body))))
}
pub fn let_(p: Pat, rhs: Expr, body: Expr) -> Expr {
    Expr::gen(ExprKind::Let(Box::new((p, (rhs, body)))))
}
/// A tuple of `es`: `()` for none, the expression itself for one.
pub fn tuple(mut es: Vec<Expr>) -> Expr {
    match es.len() {
        0 => unit(),
        1 => es.pop().unwrap(),
        _ => Expr::gen(ExprKind::Tuple(es.into())),
    }
}
pub fn pair(a: Expr, b: Expr) -> Expr {
    Expr::gen(ExprKind::Tuple(vec![a, b].into()))
}
pub fn fst(e: Expr) -> Expr {
    Expr::gen(ExprKind::Fst(Box::new(e)))
}
pub fn snd(e: Expr) -> Expr {
    Expr::gen(ExprKind::Snd(Box::new(e)))
}
pub fn inl(e: Expr) -> Expr {
    Expr::gen(ExprKind::Inl(Box::new(e)))
}
pub fn inr(e: Expr) -> Expr {
    Expr::gen(ExprKind::Inr(Box::new(e)))
}
pub fn case(s: Expr, p1: Pat, e1: Expr, p2: Pat, e2: Expr) -> Expr {
    Expr::gen(ExprKind::Case(Box::new((s, p1, e1, p2, e2))))
}
pub fn if_(c: Expr, a: Expr, b: Expr) -> Expr {
    Expr::gen(ExprKind::If(Box::new((c, (a, b)))))
}
pub fn prim(op: Prim, args: Vec<Expr>) -> Expr {
    Expr::gen(ExprKind::Prim(op, args.into()))
}
pub fn add(a: Expr, b: Expr) -> Expr {
    prim(Prim::Add, vec![a, b])
}
pub fn sub(a: Expr, b: Expr) -> Expr {
    prim(Prim::Sub, vec![a, b])
}
pub fn mul(a: Expr, b: Expr) -> Expr {
    prim(Prim::Mul, vec![a, b])
}
pub fn div(a: Expr, b: Expr) -> Expr {
    prim(Prim::Div, vec![a, b])
}
pub fn neg(a: Expr) -> Expr {
    prim(Prim::Neg, vec![a])
}
pub fn bind(p: Pat, m: Expr, k: Expr) -> Expr {
    Expr::gen(ExprKind::Bind(Box::new((p, (m, k)))))
}
pub fn pure(e: Expr) -> Expr {
    Expr::gen(ExprKind::Pure(Box::new(e)))
}
pub fn ann(e: Expr, t: Type) -> Expr {
    Expr::gen(ExprKind::Ann(Box::new((e, t))))
}

pub fn pvar(n: &Name) -> Pat {
    Pat::Var(n.clone(), Span::NONE)
}
pub fn pwild() -> Pat {
    Pat::Wild(Span::NONE)
}
/// A tuple pattern: `()` for none, the pattern itself for one.
pub fn ptuple(mut ps: Vec<Pat>) -> Pat {
    match ps.len() {
        0 => Pat::Unit(Span::NONE),
        1 => ps.pop().unwrap(),
        _ => Pat::Tuple(ps.into(), Span::NONE),
    }
}
pub fn ppair(a: Pat, b: Pat) -> Pat {
    Pat::Tuple([a, b].into(), Span::NONE)
}

/// Gives generated code the span of the source construct it comes from (for traces and highlights).
pub fn at(mut e: Expr, span: Span) -> Expr {
    e.span = span;
    e
}

/// A fresh-name supply over a program's id counter.
pub struct Fresh {
    pub next_id: u32,
}

impl Fresh {
    pub fn new(p: &Program) -> Fresh {
        Fresh { next_id: p.next_id.max(1) }
    }
    pub fn name(&mut self, text: &str) -> Name {
        self.next_id += 1;
        Name::new(text, self.next_id - 1)
    }
}

/// A top-level definition from generated code.
pub fn def(name: &str, body: Expr) -> Def {
    let role = if name == crate::stage::WRAPPER { Role::Wrapper } else { Role::Helper };
    Def { name: Name::global(name), body, span: Span::NONE, scheme: None, role }
}

#[cfg(test)]
mod tests {
    /// Issue 14 (memory per line): builtins of one name share one allocation of it.
    #[test]
    fn builtins_of_one_name_share_its_text() {
        use crate::ir::ExprKind;
        let (a, b, c) = (super::builtin("Scale"), super::builtin("Scale"), super::builtin("Add"));
        let (ExprKind::Builtin(a), ExprKind::Builtin(b), ExprKind::Builtin(c)) = (&a.kind, &b.kind, &c.kind) else { panic!("builtins") };
        assert!(crate::ir::Text::ptr_eq(a, b), "each `Scale` has its own copy of its name");
        assert_eq!((&**a, &**c), ("Scale", "Add"));
    }
}
