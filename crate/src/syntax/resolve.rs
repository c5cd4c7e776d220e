//! Name resolution: parser output (all names `Name::global(text)`) to resolved IR.
//!
//! - Every binder gets a fresh id (from 1 up); references to it carry the same `Name`.
//! - Unbound names: top-level definitions and params (`Name::global`), else the built-in forms
//!   (`fst snd inl inr pure` and the named primitives, saturated or eta-expanded), else stage
//!   builtins (`ExprKind::Builtin`), else "unknown name".
//! - Local bindings shadow all of those.

use crate::diag::{Diagnostic, Span};
use crate::ir::{Def, Expr, ExprKind, FunDef, LamKind, Name, Pat, Prim, Program, Text};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// The forms written as functions of one argument that are not `Prim`s.
const FORMS: &[&str] = &["fst", "snd", "inl", "inr", "pure"];

/// What an unbound name at the head of an application means.
enum Head {
    Prim(Prim, usize),
    Form(&'static str),
}

fn head_of(text: &str) -> Option<Head> {
    if let Some(p) = crate::prims::named_prim(text) {
        return Some(Head::Prim(p, p.arity()));
    }
    FORMS.iter().find(|s| **s == text).map(|s| Head::Form(s))
}

/// Names a top-level definition may not take.
pub(crate) fn is_reserved(text: &str) -> bool {
    head_of(text).is_some()
}

pub fn resolve_program(prog: Program, builtins: &dyn Fn(&str) -> bool) -> Result<Program, Vec<Diagnostic>> {
    let mut r = Resolver::new(builtins);
    // Globals: params and defs (the parser has refused duplicates and reserved names).
    for n in prog.params.iter().map(|p| &p.name).chain(prog.defs.iter().map(|d| &d.name)) {
        r.globals.insert(n.text.clone());
    }
    let Program { params, input, seed, defs, expects, .. } = prog;
    let defs = defs
        .into_iter()
        .map(|d| Def { body: r.expr(d.body), ..d })
        .collect();
    let input = input.map(|e| r.expr(e));
    let seed = seed.map(|e| r.expr(e));
    let expects = expects.into_iter().map(|x| crate::ir::Expect { value: r.expr(x.value), ..x }).collect();
    if !r.errors.is_empty() {
        return Err(r.errors);
    }
    Ok(Program { params, input, seed, defs, expects, next_id: r.next_id })
}

pub fn resolve_closed_expr(e: Expr) -> Result<Expr, Vec<Diagnostic>> {
    let no_builtins = |_: &str| false;
    let mut r = Resolver::new(&no_builtins);
    let e = r.expr(e);
    if r.errors.is_empty() {
        Ok(e)
    } else {
        Err(r.errors)
    }
}

struct Resolver<'b> {
    scope: HashMap<Text, Vec<Name>>,
    globals: HashSet<Text>,
    builtins: &'b dyn Fn(&str) -> bool,
    next_id: u32,
    errors: Vec<Diagnostic>,
}

impl<'b> Resolver<'b> {
    fn new(builtins: &'b dyn Fn(&str) -> bool) -> Self {
        Resolver {
            scope: HashMap::default(),
            globals: HashSet::default(),
            builtins,
            next_id: 1,
            errors: vec![],
                }
    }

    fn fresh(&mut self, text: &str) -> Name {
        let n = Name::new(text, self.next_id);
        self.next_id += 1;
        n
    }

    fn lookup(&self, text: &str) -> Option<&Name> {
        self.scope.get(text).and_then(|v| v.last())
    }

    /// Binds the names of `p` with fresh ids; returns the resolved pattern and the texts to unbind.
    fn bind(&mut self, p: Pat, bound: &mut Vec<Text>) -> Pat {
        let mut here: HashSet<Text> = HashSet::default();
        self.bind_go(p, bound, &mut here)
    }

    fn bind_go(&mut self, p: Pat, bound: &mut Vec<Text>, here: &mut HashSet<Text>) -> Pat {
        match p {
            Pat::Var(n, s) => {
                if !here.insert(n.text.clone()) {
                    self.errors.push(Diagnostic::error(s, format!("`{}` is bound twice in this pattern", n.text)));
                }
                let name = self.fresh(&n.text);
                self.scope.entry(n.text.clone()).or_default().push(name.clone());
                bound.push(n.text);
                Pat::Var(name, s)
            }
            Pat::Tuple(ps, s) => Pat::Tuple(ps.into_iter().map(|p| self.bind_go(p, bound, here)).collect(), s),
            p => p,
        }
    }

    fn unbind(&mut self, bound: Vec<Text>) {
        for t in bound {
            if let Some(v) = self.scope.get_mut(&t) {
                v.pop();
            }
        }
    }

    fn expr(&mut self, e: Expr) -> Expr {
        let Expr { kind, span, ty } = e;
        let kind = match kind {
            ExprKind::Var(n) => return self.head(n, span, vec![]),
            ExprKind::App(f_a) => {
                let (f, a) = *f_a;
                // Flatten the spine `h a1 ... an` (iteratively: it can be long).
                let mut args = vec![(a, span)];
                let mut h = f;
                while let ExprKind::App(f_a) = h.kind {
                    let (f, a) = *f_a;
                    args.push((a, h.span));
                    h = f;
                }
                args.reverse();
                return match h.kind {
                    ExprKind::Var(n) => self.head(n, h.span, args),
                    _ => {
                        let h = self.expr(h);
                        self.apply(h, args)
                    }
                };
            }
            ExprKind::Lam(k, p_b) => {
                let (p, b) = *p_b;
                let mut bound = vec![];
                let p = self.bind(p, &mut bound);
                let b = self.expr(b);
                self.unbind(bound);
                ExprKind::Lam(k, Box::new((p, b)))
            }
            ExprKind::Let(p_rhs_body) => {
                let (p, rhs_body) = *p_rhs_body;
                let (rhs, body) = rhs_body;
                let rhs = self.expr(rhs);
                let mut bound = vec![];
                let p = self.bind(p, &mut bound);
                let body = self.expr(body);
                self.unbind(bound);
                ExprKind::Let(Box::new((p, (rhs, body))))
            }
            ExprKind::Bind(p_m_k) => {
                let (p, m_k) = *p_m_k;
                let (m, k) = m_k;
                let m = self.expr(m);
                let mut bound = vec![];
                let p = self.bind(p, &mut bound);
                let k = self.expr(k);
                self.unbind(bound);
                ExprKind::Bind(Box::new((p, (m, k))))
            }
            ExprKind::LetRec(fds_body) => {
                let (fds, body) = *fds_body;
                let mut bound = vec![];
                let mut seen = HashSet::default();
                let names: Vec<Name> = fds
                    .iter()
                    .map(|fd| {
                        let span = fd.span;
                        let name_span = Span { start: span.start, end: span.start + fd.name.text.len() as u32 };
                        if !seen.insert(fd.name.text.clone()) {
                            self.errors.push(Diagnostic::error(name_span, format!("`{}` is defined twice in this `let … and …` group", fd.name.text)));
                        }
                        let p = Pat::Var(fd.name.clone(), name_span);
                        match self.bind_go(p, &mut bound, &mut HashSet::default()) {
                            Pat::Var(n, _) => n,
                            _ => unreachable!(),
                        }
                    })
                    .collect();
                let fds = fds
                    .into_iter()
                    .zip(names)
                    .map(|(fd, name)| FunDef { name, body: self.expr(fd.body), span: fd.span })
                    .collect::<Vec<_>>();
                let body = self.expr(body);
                self.unbind(bound);
                ExprKind::LetRec(Box::new((fds, body)))
            }
            ExprKind::Case(c) => {
                let (s, p1, e1, p2, e2) = *c;
                let s = self.expr(s);
                let mut bound = vec![];
                let p1 = self.bind(p1, &mut bound);
                let e1 = self.expr(e1);
                self.unbind(std::mem::take(&mut bound));
                let p2 = self.bind(p2, &mut bound);
                let e2 = self.expr(e2);
                self.unbind(bound);
                ExprKind::Case(Box::new((s, p1, e1, p2, e2)))
            }
            ExprKind::If(c_a_b) => {
                let (c, a_b) = *c_a_b;
                let (a, b) = a_b;
                ExprKind::If(Box::new((self.expr(c), (self.expr(a), self.expr(b)))))
            }
            ExprKind::Tuple(es) => ExprKind::Tuple(es.into_iter().map(|e| self.expr(e)).collect()),
            ExprKind::Par(a_b) => { let (a, b) = *a_b; ExprKind::Par(Box::new((self.expr(a), self.expr(b)))) },
            ExprKind::Prim(op, es) => ExprKind::Prim(op, es.into_iter().map(|e| self.expr(e)).collect()),
            ExprKind::Array(es) => ExprKind::Array(es.into_iter().map(|e| self.expr(e)).collect()),
            ExprKind::Fst(b) => ExprKind::Fst(Box::new(self.expr(*b))),
            ExprKind::Snd(b) => ExprKind::Snd(Box::new(self.expr(*b))),
            ExprKind::Inl(b) => ExprKind::Inl(Box::new(self.expr(*b))),
            ExprKind::Inr(b) => ExprKind::Inr(Box::new(self.expr(*b))),
            ExprKind::Pure(b) => ExprKind::Pure(Box::new(self.expr(*b))),
            ExprKind::Ann(b_t) => { let (b, t) = *b_t; ExprKind::Ann(Box::new((self.expr(b), t))) },
            k @ (ExprKind::Real(_) | ExprKind::Int(_) | ExprKind::Bool(_) | ExprKind::Unit | ExprKind::Builtin(_)) => k,
        };
        Expr { kind, span, ty }
    }

    /// `h a1 ... an` where `h` is a name; `args` carry the span of the application node they end.
    fn head(&mut self, n: Name, span: Span, args: Vec<(Expr, Span)>) -> Expr {
        if let Some(local) = self.lookup(&n.text) {
            let h = Expr::new(ExprKind::Var(local.clone()), span);
            return self.apply(h, args);
        }
        if self.globals.contains(&n.text) {
            let h = Expr::new(ExprKind::Var(Name::global(&n.text)), span);
            return self.apply(h, args);
        }
        if let Some(head) = head_of(&n.text) {
            let arity = match head {
                Head::Prim(_, k) => k,
                Head::Form(_) => 1,
            };
            let mut args: Vec<(Expr, Span)> = args.into_iter().map(|(a, s)| (self.expr(a), s)).collect();
            if args.len() >= arity {
                let rest = args.split_off(arity);
                let node_span = args.last().map_or(span, |(_, s)| *s);
                let sat = build(&head, args.into_iter().map(|(a, _)| a).collect(), node_span);
                return self.apply_resolved(sat, rest);
            }
            // Eta-expand: `atan2 e` = `let a = e in \y -> atan2 a y` (non-trivial arguments once).
            let whole = args.last().map_or(span, |(_, s)| *s);
            let mut lets = vec![];
            let mut full = vec![];
            for (a, _) in args {
                if matches!(a.kind, ExprKind::Var(_) | ExprKind::Builtin(_) | ExprKind::Real(_) | ExprKind::Int(_) | ExprKind::Bool(_) | ExprKind::Unit) {
                    full.push(a);
                } else {
                    let x = self.fresh("a");
                    let s = a.span;
                    lets.push((x.clone(), a));
                    full.push(Expr::new(ExprKind::Var(x), s));
                }
            }
            let mut params = vec![];
            for _ in full.len()..arity {
                let x = self.fresh("x");
                full.push(Expr::new(ExprKind::Var(x.clone()), whole));
                params.push(x);
            }
            let mut e = build(&head, full, whole);
            for x in params.into_iter().rev() {
                e = Expr::new(ExprKind::Lam(LamKind::Plain, Box::new((Pat::Var(x, whole), e))), whole);
            }
            for (x, a) in lets.into_iter().rev() {
                e = Expr::new(ExprKind::Let(Box::new((Pat::Var(x, a.span), (a, e)))), whole);
            }
            return e;
        }
        if (self.builtins)(&n.text) {
            let h = Expr::new(ExprKind::Builtin(n.text.clone()), span);
            return self.apply(h, args);
        }
        let mut msg = format!("unknown name `{}`", n.text);
        if let Some(s) = self.suggest(&n.text) {
            msg.push_str(&format!("; did you mean `{s}`?"));
        }
        self.errors.push(Diagnostic::error(span, msg));
        let h = Expr::new(ExprKind::Var(n), span);
        self.apply(h, args)
    }

    fn apply(&mut self, h: Expr, args: Vec<(Expr, Span)>) -> Expr {
        let args = args.into_iter().map(|(a, s)| (self.expr(a), s)).collect();
        self.apply_resolved(h, args)
    }

    fn apply_resolved(&mut self, mut h: Expr, args: Vec<(Expr, Span)>) -> Expr {
        for (a, s) in args {
            h = Expr::new(ExprKind::App(Box::new((h, a))), s);
        }
        h
    }

    /// A name in scope close to `text`, for "did you mean".
    fn suggest(&self, text: &str) -> Option<String> {
        let mut cands: Vec<&str> = self.scope.iter().filter(|(_, v)| !v.is_empty()).map(|(k, _)| &**k).collect();
        cands.extend(self.globals.iter().map(|k| &**k));
        cands.extend(crate::prims::PRIMS.iter().filter(|r| r.prim.is_named()).map(|r| r.name));
        cands.extend(FORMS.iter().copied());
        cands.sort();
        cands.dedup();
        let limit = match text.chars().count() {
            0..=2 => 0,
            3..=5 => 1,
            _ => 2,
        };
        cands
            .into_iter()
            .filter(|c| *c != text)
            .map(|c| (edit_distance(text, c), c))
            .filter(|(d, _)| *d <= limit && *d > 0)
            .min_by_key(|(d, _)| *d)
            .map(|(_, c)| c.to_string())
    }
}

fn build(head: &Head, mut args: Vec<Expr>, span: Span) -> Expr {
    let kind = match head {
        Head::Prim(p, _) => ExprKind::Prim(*p, args.into()),
        Head::Form(f) => {
            let a = Box::new(args.pop().expect("one argument"));
            match *f {
                "fst" => ExprKind::Fst(a),
                "snd" => ExprKind::Snd(a),
                "inl" => ExprKind::Inl(a),
                "inr" => ExprKind::Inr(a),
                _ => ExprKind::Pure(a),
            }
        }
    };
    Expr::new(kind, span)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let sub = prev[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
