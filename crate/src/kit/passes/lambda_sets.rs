//! The lambda-set analysis behind closure conversion and defunctionalisation (see closures.rs):
//! every function type occurrence of the monomorphised program gets a set variable; lambdas put
//! themselves in their set; wherever two function values may meet, their sets are unified
//! (union-find), like HM unifies types. Expressions are walked once; let chains in loops.

use super::{free_locals, refuse, unique_global};
use crate::diag::Diagnostic;
use crate::ir::*;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// A type annotated with lambda sets at its function types.
#[derive(Clone, Debug)]
pub(super) enum At {
    Base(Type),
    Tup(Vec<At>),
    Sum(Box<At>, Box<At>),
    /// argument, result, lambda-set variable
    Fun(Box<At>, Box<At>, u32),
}

pub(super) struct Lam<'a> {
    pub(super) expr: &'a Expr,
    /// Its annotated function type; `set` is its lambda-set variable.
    pub(super) at: At,
    pub(super) set: u32,
    /// The variables its environment holds (for a local recursive function: its group's).
    pub(super) captured: Vec<Name>,
    /// For a member of a local recursive group: the group's members (name, lambda index).
    pub(super) group: Option<usize>,
    /// The name of its lifted code.
    pub(super) code: String,
}

pub(super) struct Analysis<'a> {
    pub(super) parent: Vec<u32>,
    /// Lambdas of each set (valid at roots).
    pub(super) members: Vec<Vec<usize>>,
    /// The source function type of each set variable.
    pub(super) set_ty: Vec<Type>,
    pub(super) lams: Vec<Lam<'a>>,
    pub(super) lam_of: HashMap<*const Expr, usize>,
    pub(super) groups: Vec<Vec<(Name, usize)>>,
    pub(super) binders: HashMap<u32, At>,
    pub(super) globals: HashMap<String, At>,
    /// The annotated type of the function of each application, and of each annotated expression.
    pub(super) at_of: HashMap<*const Expr, At>,
    pub(super) pass: &'static str,
    pub(super) current_def: String,
    /// The lambda a top-level definition is (under annotations), whose code is named after it.
    pub(super) top_lam: *const Expr,
    pub(super) taken: HashSet<String>,
}

/// `e` under its type annotations (monomorphise annotates copies whose body does not pin their type).
pub(super) fn peel(mut e: &Expr) -> &Expr {
    while let ExprKind::Ann(x_x) = &e.kind {
        let (x, _) = &**x_x;
        e = x;
    }
    e
}

impl<'a> Analysis<'a> {
    /// Analyses a monomorphised, type-checked program.
    pub(super) fn run(p: &'a Program, pass: &'static str) -> Result<Analysis<'a>, Diagnostic> {
        let mut taken: HashSet<String> = p.defs.iter().map(|d| d.name.text.to_string()).chain(p.params.iter().map(|q| q.name.text.to_string())).collect();
        taken.insert("main".into());
        let mut an = Analysis {
            parent: vec![],
            members: vec![],
            set_ty: vec![],
            lams: vec![],
            lam_of: HashMap::default(),
            groups: vec![],
            binders: HashMap::default(),
            globals: HashMap::default(),
            at_of: HashMap::default(),
            pass,
            current_def: String::new(),
            top_lam: std::ptr::null(),
            taken,
        };
        let mut def_ats = vec![];
        for d in &p.defs {
            let ty = d.scheme.as_ref().map(|s| s.ty.clone()).unwrap_or(Type::Unknown);
            let t = an.fresh_at(&ty);
            an.globals.insert(d.name.text.to_string(), t.clone());
            def_ats.push(t);
        }
        for (d, t) in p.defs.iter().zip(&def_ats) {
            an.current_def = d.name.text.to_string();
            an.top_lam = peel(&d.body);
            let found = an.infer(&d.body)?;
            an.unify(t, &found);
        }
        Ok(an)
    }

    pub(super) fn root(&mut self, mut s: u32) -> u32 {
        while self.parent[s as usize] != s {
            let g = self.parent[self.parent[s as usize] as usize];
            self.parent[s as usize] = g;
            s = g;
        }
        s
    }

    fn union(&mut self, a: u32, b: u32) {
        let (a, b) = (self.root(a), self.root(b));
        if a != b {
            self.parent[b as usize] = a;
            let m = std::mem::take(&mut self.members[b as usize]);
            self.members[a as usize].extend(m);
        }
    }

    pub(super) fn fresh_at(&mut self, t: &Type) -> At {
        match t {
            Type::Tuple(ts) => At::Tup(ts.iter().map(|t| self.fresh_at(t)).collect()),
            Type::Sum(ab) => At::Sum(Box::new(self.fresh_at(&ab.0)), Box::new(self.fresh_at(&ab.1))),
            Type::Fun(ab) | Type::Lin(ab) => {
                let (a, b) = &**ab;
                let s = self.parent.len() as u32;
                self.parent.push(s);
                self.members.push(vec![]);
                self.set_ty.push(t.clone());
                At::Fun(Box::new(self.fresh_at(a)), Box::new(self.fresh_at(b)), s)
            }
            t => At::Base(t.clone()),
        }
    }

    pub(super) fn unify(&mut self, a: &At, b: &At) {
        match (a, b) {
            (At::Tup(xs), At::Tup(ys)) => xs.iter().zip(ys).for_each(|(x, y)| self.unify(x, y)),
            (At::Sum(a1, b1), At::Sum(a2, b2)) => {
                self.unify(a1, a2);
                self.unify(b1, b2)
            }
            (At::Fun(a1, b1, s1), At::Fun(a2, b2, s2)) => {
                self.union(*s1, *s2);
                self.unify(a1, a2);
                self.unify(b1, b2)
            }
            _ => {}
        }
    }

    fn bind(&mut self, p: &Pat, t: At) -> Result<(), Diagnostic> {
        match (p, t) {
            (Pat::Var(n, _), t) => {
                self.binders.insert(n.id, t);
            }
            (Pat::Tuple(ps, _), At::Tup(ts)) if ps.len() == ts.len() => {
                for (p, t) in ps.iter().zip(ts) {
                    self.bind(p, t)?;
                }
            }
            (Pat::Wild(_) | Pat::Unit(_), _) => {}
            (p, _) => return Err(refuse(p.span(), self.pass, "internal error: a pattern does not fit its type")),
        }
        Ok(())
    }

    fn new_lam(&mut self, e: &'a Expr, at: At, set: u32, captured: Vec<Name>, group: Option<usize>, hint: &str) -> usize {
        let code = unique_global(hint, &mut self.taken);
        let k = self.lams.len();
        self.lams.push(Lam { expr: e, at, set, captured, group, code });
        self.members[set as usize].push(k);
        self.lam_of.insert(e as *const Expr, k);
        k
    }

    pub(super) fn lambda(&mut self, e: &'a Expr, captured: Vec<Name>, group: Option<usize>, hint: &str) -> Result<At, Diagnostic> {
        let ExprKind::Lam(_, p_body) = &e.kind else { unreachable!("called on lambdas") };
        let (p, body) = &**p_body;
        let t = self.fresh_at(&e.ty);
        let At::Fun(a, r, s) = &t else {
            return Err(refuse(e.span, self.pass, "internal error: a lambda without a function type"));
        };
        self.new_lam(e, t.clone(), *s, captured, group, hint);
        self.bind(p, (**a).clone())?;
        let tb = self.infer(body)?;
        self.unify(r, &tb);
        Ok(t)
    }

    /// Infers the annotated type of `e`; let chains in a loop.
    pub(super) fn infer(&mut self, e: &'a Expr) -> Result<At, Diagnostic> {
        let mut cur = e;
        loop {
            match &cur.kind {
                ExprKind::Let(p_rhs_body) => {
                    let (p, rhs_body) = &**p_rhs_body;
                    let (rhs, body) = rhs_body;
                    let t = self.infer(rhs)?;
                    self.bind(p, t)?;
                    cur = body;
                }
                ExprKind::LetRec(fs_body) => {
                    let (fs, body) = &**fs_body;
                    let ids: Vec<u32> = fs.iter().map(|f| f.name.id).collect();
                    let mut captured: Vec<Name> = vec![];
                    for f in fs.iter() {
                        if !matches!(f.body.kind, ExprKind::Lam(..)) {
                            return Err(refuse(f.span, self.pass, "a local recursive definition must be a function"));
                        }
                        for n in free_locals(&f.body) {
                            if !ids.contains(&n.id) && !captured.iter().any(|c| c.id == n.id) {
                                captured.push(n);
                            }
                        }
                    }
                    let g = self.groups.len();
                    self.groups.push(vec![]);
                    let tys: Vec<At> = fs.iter().map(|f| self.fresh_at(&f.body.ty)).collect();
                    for (f, t) in fs.iter().zip(&tys) {
                        self.binders.insert(f.name.id, t.clone());
                    }
                    for (f, t) in fs.iter().zip(&tys) {
                        let hint = format!("{}_{}", self.current_def, f.name.text);
                        let tf = self.lambda(&f.body, captured.clone(), Some(g), &hint)?;
                        self.unify(t, &tf);
                        let k = self.lam_of[&(&f.body as *const Expr)];
                        self.groups[g].push((f.name.clone(), k));
                    }
                    cur = body;
                }
                _ => return self.infer_node(cur),
            }
        }
    }

    fn infer_node(&mut self, e: &'a Expr) -> Result<At, Diagnostic> {
        Ok(match &e.kind {
            ExprKind::Var(n) if n.is_global() => match self.globals.get(&*n.text) {
                Some(t) => t.clone(),
                None => At::Base(Type::Int), // a param
            },
            ExprKind::Var(n) => self.binders.get(&n.id).cloned().ok_or_else(|| refuse(e.span, self.pass, format!("internal error: unbound `{}`", n.text)))?,
            ExprKind::Real(_) | ExprKind::Int(_) | ExprKind::Bool(_) | ExprKind::Unit => At::Base(e.ty.clone()),
            ExprKind::Lam(..) => {
                let hint = if std::ptr::eq(self.top_lam, e) { format!("{}_code", self.current_def) } else { format!("{}_lam", self.current_def) };
                self.lambda(e, free_locals(e), None, &hint)?
            }
            ExprKind::App(f_a) => {
                let (f, a) = &**f_a;
                let tf = self.infer(f)?;
                let ta = self.infer(a)?;
                let At::Fun(x, r, _) = &tf else {
                    return Err(refuse(e.span, self.pass, "internal error: applying a value that is not a function"));
                };
                self.unify(x, &ta);
                let r = (**r).clone();
                self.at_of.insert(e as *const Expr, tf);
                r
            }
            ExprKind::Tuple(es) | ExprKind::Array(es) | ExprKind::Prim(_, es) => {
                let ts = es.iter().map(|x| self.infer(x)).collect::<Result<Vec<_>, _>>()?;
                if let ExprKind::Tuple(_) = e.kind {
                    At::Tup(ts)
                } else {
                    At::Base(e.ty.clone())
                }
            }
            ExprKind::Fst(x) | ExprKind::Snd(x) => match self.infer(x)? {
                At::Tup(mut ts) if ts.len() == 2 => ts.swap_remove(if matches!(e.kind, ExprKind::Fst(_)) { 0 } else { 1 }),
                _ => return Err(refuse(e.span, self.pass, "internal error: projection from a value that is not a pair")),
            },
            ExprKind::Inl(x) | ExprKind::Inr(x) => {
                let tx = self.infer(x)?;
                let Type::Sum(ab) = &e.ty else { return Err(refuse(e.span, self.pass, "internal error: an injection without a sum type")) };
                let (a, b) = &**ab;
                if let ExprKind::Inl(_) = e.kind {
                    At::Sum(Box::new(tx), Box::new(self.fresh_at(b)))
                } else {
                    At::Sum(Box::new(self.fresh_at(a)), Box::new(tx))
                }
            }
            ExprKind::Case(c) => {
                let (s, p1, e1, p2, e2) = &**c;
                let At::Sum(a, b) = self.infer(s)? else { return Err(refuse(e.span, self.pass, "internal error: case on a value that is not a sum")) };
                self.bind(p1, *a)?;
                self.bind(p2, *b)?;
                let t1 = self.infer(e1)?;
                let t2 = self.infer(e2)?;
                self.unify(&t1, &t2);
                t1
            }
            ExprKind::If(c_a_b) => {
                let (c, a_b) = &**c_a_b;
                let (a, b) = a_b;
                self.infer(c)?;
                let t1 = self.infer(a)?;
                let t2 = self.infer(b)?;
                self.unify(&t1, &t2);
                t1
            }
            ExprKind::Ann(x_x) => {
                let (x, _) = &**x_x;
                let t = self.infer(x)?;
                self.at_of.insert(e as *const Expr, t.clone());
                t
            }
            ExprKind::Par(a_b) => { let (a, b) = &**a_b; At::Tup(vec![self.infer(a)?, self.infer(b)?]) },
            ExprKind::Let(..) | ExprKind::LetRec(..) => self.infer(e)?,
            ExprKind::Builtin(_) | ExprKind::Bind(..) | ExprKind::Pure(_) => {
                return Err(refuse(e.span, self.pass, "target constructs (builtins, `do`, `pure`) are not source constructs"))
            }
        })
    }
}

