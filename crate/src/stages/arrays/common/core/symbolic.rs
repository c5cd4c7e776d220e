//! §7: the gradient as a program. Delta extraction by simplification (§7.1): dual-arrays' D program
//! is run symbolically (the notes' C7 shortcut, App. D's "ADVal AST": the monad laws applied as it
//! goes), leaving Eq. 6's shape — primal lets, IDs numbered in generation order (Fig. 21's
//! `t2[id_i := i]`), a symbolic Delta. Then the reverse pass of Figs. 16–17 run on terms (§7.2),
//! optionally with `share` (Fig. 19's optimistic placement, at Add and LitArray), and shareToLet
//! (Fig. 20, with the map threaded through the recursive call: erratum §8.18).
//!
//! Decisions (notes §8): trivial cotangents (variables, constants, shares) are not wrapped in a share
//! (§8.10); `cond` with real branches selects by B4's index into a literal (§8.3, `Ex::cond`); shapes are
//! terms (`length x`) read from each Delta's primal partner, a variable of its shape (the paper's
//! `shapeDelta`, §6.4); shareToLet runs over the whole gradient tuple with one map (§8.12).

use super::lang::*;
use super::steps::{Did, Steps};
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use std::collections::BTreeMap;
use rustc_hash::{FxHashMap as HashMap};
use std::rc::Rc;

/// A symbolic Delta (§7.1's SymDelta): each node with a primal term of its shape.
#[derive(Debug)]
pub struct Sym {
    pub kind: SymKind,
    pub shape: Expr,
}

#[derive(Debug)]
pub enum SymKind {
    Zero,
    Input(usize),
    Add(Rc<Sym>, Rc<Sym>),
    Scale(Expr, Rc<Sym>),
    Share(i64, Rc<Sym>),
    Index(Rc<Sym>, Expr),
    SumOuter(Rc<Sym>),
    Gather(Expr, Expr, Rc<Sym>),
    Scatter(Expr, Expr, Rc<Sym>),
    LitArray(Vec<Rc<Sym>>),
    Replicate(Expr, Rc<Sym>),
    Transpose(Vec<usize>, Rc<Sym>),
    /// The sequential loop's Delta (fold.rs, beyond the paper): the body's vjp, the free dual
    /// variables' primals, the primal accumulators and elements, and the Deltas of z, xs and each
    /// free variable.
    ScanL { vjp: Expr, ctx: Vec<Expr>, accs: Expr, xs: Expr, dz: Rc<Sym>, dxs: Rc<Sym>, dvs: Vec<Rc<Sym>> },
}

#[derive(Clone, Debug)]
enum Val {
    Term(Expr),
    Dual(Expr, Rc<Sym>),
    Delta(Rc<Sym>),
    /// main's tuple output: each component's primal and Delta.
    Outs(Vec<(Expr, Rc<Sym>)>),
}

fn refuse(e: &Expr, what: &str) -> Diagnostic {
    Diagnostic::error(e.span, format!("Delta extraction by simplification (§7.1) has no rule for {what}")).refused()
}

/// What the symbolic forward pass leaves: primal lets, the primal result and its symbolic Delta.
pub struct Extracted {
    pub binds: Vec<(Name, Expr)>,
    pub primal: Expr,
    /// The Delta of each output component with its part of the seed (one for a non-tuple output).
    pub roots: Vec<(Expr, Rc<Sym>)>,
    pub ids: i64,
    /// main's pattern (outer names) and each parameter's name.
    pub pat: Pat,
    pub params: Vec<Name>,
    pub input: Name,
    /// The seed's pattern: a name, or a tuple of names for a tuple output.
    pub seed: Pat,
    /// main's arrays of tuples taken apart (`let c = soaGet path x`, boundary.rs), each component an
    /// input, and the wrapper's gradient with `gradAt k x g` where each input's cotangent goes (the
    /// components zipped back into the input's type); both empty without such an input. The seed's
    /// leaves for an output holding arrays of tuples are read here too (`soaGet path seed`).
    pub boundary: Vec<(Name, Expr)>,
    pub gradient: Option<Expr>,
}

struct Ex<'a> {
    env: HashMap<u32, Val>,
    binds: Vec<(Name, Expr)>,
    next_id: i64,
    fresh: &'a mut Fresh,
}

impl Ex<'_> {
    /// A term with the environment's terms substituted.
    fn term(&self, e: &Expr) -> Result<Expr, Diagnostic> {
        let mut out = e.clone();
        let mut stack = vec![&mut out];
        while let Some(y) = stack.pop() {
            match &y.kind {
                ExprKind::Fst(x) => {
                    if let ExprKind::Var(n) = &x.kind {
                        if let Some(Val::Dual(p, _)) = self.env.get(&n.id) {
                            *y = p.clone();
                            continue;
                        }
                    }
                }
                ExprKind::Var(n) => {
                    match self.env.get(&n.id) {
                        Some(Val::Term(t)) => *y = t.clone(),
                        Some(_) => return Err(refuse(y, "a dual value used as a term")),
                        None => {}
                    }
                    continue;
                }
                _ => {}
            }
            stack.extend(children_mut(y));
        }
        Ok(out)
    }

    /// A primal term as a variable: non-trivial terms are let-bound (Eq. 6's primal lets).
    fn named(&mut self, x: &Name, p: Expr) -> Expr {
        if matches!(p.kind, ExprKind::Var(_) | ExprKind::Real(_) | ExprKind::Int(_)) {
            return p;
        }
        // D's own names (x, d) become x1, x2, … in the order they are bound (Fig. 18)
        let text = if &*x.text == "x" || x.text.is_empty() { format!("x{}", self.binds.len() + 1) } else { x.text.to_string() };
        let v = self.fresh.name(&text);
        self.binds.push((v.clone(), p));
        var(&v)
    }

    /// Runs an `M` computation of D's program symbolically, along its bind chain in a loop.
    fn run(&mut self, e: &Expr) -> Result<Val, Diagnostic> {
        let mut cur = e;
        loop {
            match &cur.kind {
                ExprKind::Bind(p_m_k) => {
                    let (p, m_k) = &**p_m_k;
                    let (m, k) = m_k;
                    if let Some(("genID", _)) = spine(m) {
                        self.next_id += 1;
                        let Pat::Var(id, _) = p else { return Err(refuse(cur, "this genID")) };
                        self.env.insert(id.id, Val::Term(int(self.next_id)));
                    } else {
                        let v = self.run(m)?;
                        self.bind(p, v, cur)?;
                    }
                    cur = k;
                }
                ExprKind::Let(p_rhs_k) => {
                    let (p, rhs_k) = &**p_rhs_k;
                    let (rhs, k) = rhs_k;
                    let v = self.value(rhs)?;
                    match (p, v) {
                        (Pat::Var(x, _), Val::Term(t)) => {
                            let t = self.named(x, t);
                            self.env.insert(x.id, Val::Term(t));
                        }
                        (p, v) => self.bind(p, v, cur)?,
                    }
                    cur = k;
                }
                ExprKind::Pure(x) => return self.value(x),
                _ => return Err(refuse(cur, "this computation")),
            }
        }
    }

    fn bind(&mut self, p: &Pat, v: Val, at: &Expr) -> Result<(), Diagnostic> {
        match (p, v) {
            (Pat::Tuple(ps, _), Val::Dual(t, d)) if ps.len() == 2 => {
                if let Pat::Var(x, _) = &ps[0] {
                    let t = self.named(x, t);
                    self.env.insert(x.id, Val::Term(t));
                }
                if let Pat::Var(dn, _) = &ps[1] {
                    self.env.insert(dn.id, Val::Delta(d));
                }
                Ok(())
            }
            (Pat::Var(x, _), Val::Dual(t, d)) => {
                let t = self.named(x, t);
                self.env.insert(x.id, Val::Dual(t, d));
                Ok(())
            }
            (Pat::Var(x, _), v) => {
                self.env.insert(x.id, v);
                Ok(())
            }
            _ => Err(refuse(at, "this pattern")),
        }
    }

    /// The value of a pure expression: a pair (primal, Delta) or a term.
    fn value(&mut self, e: &Expr) -> Result<Val, Diagnostic> {
        match &e.kind {
            // D's result for main's tuple output: ((y1, .., yn), (dy1, .., dyn))
            ExprKind::Tuple(es) if es.len() == 2 && matches!(es[1].kind, ExprKind::Tuple(_)) => {
                let (ExprKind::Tuple(ps), ExprKind::Tuple(ds)) = (&es[0].kind, &es[1].kind) else { return Err(refuse(e, "this tuple output")) };
                let mut outs = vec![];
                for (p, d) in ps.iter().zip(ds) {
                    match (self.value(p)?, self.value(d)?) {
                        (Val::Term(t), Val::Delta(d)) => outs.push((t, d)),
                        _ => return Err(refuse(e, "a nested tuple output")),
                    }
                }
                Ok(Val::Outs(outs))
            }
            ExprKind::Tuple(es) if es.len() == 2 => {
                let p = self.term(&es[0])?;
                let p = self.named(&Name::new("x", 0), p);
                let shape = p.clone();
                let d = self.delta(&es[1], &shape)?;
                Ok(Val::Dual(p, d))
            }
            ExprKind::Var(n) => match self.env.get(&n.id) {
                Some(v) => Ok(v.clone()),
                None => Ok(Val::Term(e.clone())),
            },
            _ if spine(e).is_some_and(|(h, _)| h == "cond") => self.cond(e),
            _ => Ok(Val::Term(self.term(e)?)),
        }
    }

    /// `cond b u v` with dual branches (D selects the whole pair, Fig. 14). A Delta that depends on a
    /// runtime Bool is no Delta constructor (notes §8.3), so the selection is B4's: `index [u, v]
    /// [cond b 0 1]`, i.e. `Index (LitArray [du, dv]) [cond b 0 1]`. Its transpose sends the
    /// cotangent to the taken branch and zeros to the other, as B4's gather does inside a build1.
    fn cond(&mut self, e: &Expr) -> Result<Val, Diagnostic> {
        let Some((_, args)) = spine(e).filter(|(_, a)| a.len() == 3) else { return Err(refuse(e, "this cond")) };
        let (tu, du, tv, dv) = match (self.value(args[1])?, self.value(args[2])?) {
            (Val::Dual(tu, du), Val::Dual(tv, dv)) => (tu, du, tv, dv),
            // both branches primal (an Int `cond`: the integer inside a sum's side, lower.rs), a
            // primal term (a wide property run's case: `inr (x, -2)`)
            (Val::Term(tu), Val::Term(tv)) => return Ok(Val::Term(cond(self.term(args[0])?, tu, tv))),
            _ => return Err(refuse(e, "cond with a dual and a non-dual branch")),
        };
        let b = self.term(args[0])?;
        let which = cond(b.clone(), int(0), int(1));
        let p = self.named(&Name::new("x", 0), cond(b, tu.clone(), tv.clone()));
        let both = Rc::new(Sym { kind: SymKind::LitArray(vec![du, dv]), shape: Expr::gen(ExprKind::Array(vec![tu, tv].into())) });
        Ok(Val::Dual(p.clone(), Rc::new(Sym { kind: SymKind::Index(both, which), shape: p })))
    }

    /// The symbolic Delta of a Delta expression whose value has the shape of `shape`.
    fn delta(&mut self, e: &Expr, shape: &Expr) -> Result<Rc<Sym>, Diagnostic> {
        if let ExprKind::Var(n) = &e.kind {
            return match self.env.get(&n.id) {
                Some(Val::Delta(d)) => Ok(d.clone()),
                _ => Err(refuse(e, "this Delta variable")),
            };
        }
        let Some((h, args)) = spine(e) else { return Err(refuse(e, "this Delta")) };
        let child = |s: &mut Self, a: &Expr| -> Result<Rc<Sym>, Diagnostic> {
            match &a.kind {
                ExprKind::Var(n) => match s.env.get(&n.id) {
                    Some(Val::Delta(d)) => Ok(d.clone()),
                    _ => Err(refuse(a, "this Delta variable")),
                },
                // a free dual variable's Delta (fold.rs's ScanL)
                ExprKind::Snd(x) => match &x.kind {
                    ExprKind::Var(n) => match s.env.get(&n.id) {
                        Some(Val::Dual(_, d)) => Ok(d.clone()),
                        _ => Err(refuse(a, "this Delta variable")),
                    },
                    _ => Err(refuse(a, "a Delta that is not a variable")),
                },
                _ => Err(refuse(a, "a Delta that is not a variable")),
            }
        };
        let kind = match (h, args.as_slice()) {
            ("Zero", [_]) => SymKind::Zero,
            ("Input", [k, _]) => SymKind::Input(if let ExprKind::Int(k) = k.kind { k.max(0) as usize } else { 0 }),
            ("Add", [a, b]) => SymKind::Add(self.delta(a, shape)?, self.delta(b, shape)?),
            ("Scale", [r, d]) => SymKind::Scale(self.term(r)?, self.delta(d, shape)?),
            ("Share", [id, d]) => {
                let ExprKind::Int(id) = self.term(id)?.kind else { return Err(refuse(e, "a Share without a generated ID")) };
                SymKind::Share(id, self.delta(d, shape)?)
            }
            ("Index", [d, u]) => SymKind::Index(child(self, d)?, self.term(u)?),
            ("SumOuter", [d]) => SymKind::SumOuter(child(self, d)?),
            ("Gather", [s, d, f]) => SymKind::Gather(self.term(s)?, self.term(f)?, child(self, d)?),
            ("Scatter", [s, d, f]) => SymKind::Scatter(self.term(s)?, self.term(f)?, child(self, d)?),
            ("LitArray", [lit]) => {
                let ExprKind::Array(ds) = &lit.kind else { return Err(refuse(e, "LitArray")) };
                SymKind::LitArray(ds.iter().map(|d| child(self, d)).collect::<Result<_, _>>()?)
            }
            ("Replicate", [k, d]) => SymKind::Replicate(self.term(k)?, child(self, d)?),
            ("ScanL", [vjp, ctx, accs, xs, dz, dxs, dvs]) => {
                let ExprKind::Array(dvs) = &dvs.kind else { return Err(refuse(e, "ScanL")) };
                let dvs: Vec<Rc<Sym>> = dvs.iter().map(|d| child(self, d)).collect::<Result<_, _>>()?;
                let ctx = match (self.term(ctx)?, dvs.len()) {
                    (t, 1) => vec![t],
                    (Expr { kind: ExprKind::Tuple(ts), .. }, _) => ts.into_iter().collect::<Vec<_>>(),
                    _ => vec![],
                };
                SymKind::ScanL { vjp: self.term(vjp)?, ctx, accs: self.term(accs)?, xs: self.term(xs)?, dz: child(self, dz)?, dxs: child(self, dxs)?, dvs }
            }
            ("Transpose", [p, d]) => {
                let ExprKind::Array(ps) = &p.kind else { return Err(refuse(e, "Transpose")) };
                SymKind::Transpose(ps.iter().map(|p| if let ExprKind::Int(k) = p.kind { k.max(0) as usize } else { 0 }).collect(), child(self, d)?)
            }
            _ => return Err(refuse(e, h)),
        };
        Ok(Rc::new(Sym { kind, shape: shape.clone() }))
    }
}

/// Delta extraction (§7.1) from dual-arrays' wrapper `grad`.
pub fn extract(grad: &Expr, fresh: &mut Fresh) -> Result<Extracted, Diagnostic> {
    // grad = \(input, seed) -> let pat = input in let (y, d) = runIds (lets of dual inputs; D[t]) in …
    let ExprKind::Lam(_, pat_body) = &grad.kind else { return Err(refuse(grad, "this wrapper")) };
    let (pat, body) = &**pat_body;
    let Pat::Tuple(io, _) = pat else { return Err(refuse(grad, "this wrapper")) };
    let (Pat::Var(input, _), Pat::Var(seed, _)) = (&io[0], &io[1]) else { return Err(refuse(grad, "this wrapper")) };
    let ExprKind::Let(pat_rest_pair) = &body.kind else { return Err(refuse(grad, "this wrapper")) };
    let (pat, rest_pair) = &**pat_rest_pair;
    let (_, rest) = rest_pair;
    let (gets, rest) = super::boundary::leading_gets(rest);
    let ExprKind::Let(run_after_x) = &rest.kind else { return Err(refuse(grad, "this wrapper")) };
    let (_, run_after) = &**run_after_x;
    let (run, after) = run_after;
    // `let g = reversePass seed d in (y, gradient)`
    let gradient = match &after.kind {
        ExprKind::Let(out_pair_x) if !gets.is_empty() => { let (_, out_pair) = &**out_pair_x; match &out_pair.1.kind {
            ExprKind::Tuple(es) if es.len() == 2 => Some(es[1].clone()),
            _ => return Err(refuse(grad, "this wrapper")),
        } },
        _ => None,
    };
    // main's output arrays of tuples (boundary.rs): the seed's leaves `(soaGet path seed, …)` given
    // to reversePass, and the primal `let (y1, …, yn) = y in` the user's shape
    let mut out_conv = None;
    if let ExprKind::Let(rp_out_x) = &after.kind {
        let (_, rp_out) = &**rp_out_x;
        let (rp, out) = rp_out;
        if let (Some(("reversePass", ra)), ExprKind::Tuple(es)) = (spine(rp), &out.kind) {
            let parts = match &ra[0].kind {
                ExprKind::Ann(x_x) => &x_x.0,
                _ => ra[0],
            };
            if let (ExprKind::Tuple(ps), Some(ExprKind::Let(ys_user))) = (&parts.kind, es.first().map(|e| &e.kind)) {
                let (ys, user_pair) = &**ys_user;
                let (_, user) = user_pair;
                if ps.iter().all(|p| super::boundary::parse_get(p).is_some()) {
                    out_conv = Some((ps.clone(), ys.clone(), user.clone()));
                }
            }
        }
    }
    let Some(("runIds", args)) = spine(run) else { return Err(refuse(run, "this wrapper")) };
    let mut ex = Ex { env: HashMap::default(), binds: vec![], next_id: 0, fresh };
    // the dual inputs `let x = (x', Input k x')`
    let mut cur = args[0];
    while let ExprKind::Let(pat_rhs_k) = &cur.kind {
        let (pat, rhs_k) = &**pat_rhs_k;
        let (rhs, k) = rhs_k;
        let Pat::Var(x, _) = pat else { break };
        let v = match &rhs.kind {
            ExprKind::Tuple(es) if es.len() == 2 => {
                let shape = es[0].clone();
                Val::Dual(es[0].clone(), ex.delta(&es[1], &shape)?)
            }
            _ => break,
        };
        ex.env.insert(x.id, v);
        cur = k;
    }
    let mut boundary: Vec<(Name, Expr)> = gets.iter().map(|g| (g.name.clone(), g.rhs.clone())).collect();
    let (primal, roots, seed) = match ex.run(cur)? {
        Val::Outs(outs) if out_conv.as_ref().is_some_and(|c| c.0.len() == outs.len()) => {
            // the seed's leaves read from the user's seed beside the inputs' components, the primal
            // put back into the user's shape
            let Some((gets_seed, ys, user)) = out_conv.take() else { return Err(refuse(cur, "this output")) };
            let parts: Vec<Name> = outs.iter().map(|_| ex.fresh.name(&seed.text)).collect();
            boundary.extend(parts.iter().cloned().zip(gets_seed));
            let primal = let_(ys, tuple(outs.iter().map(|o| o.0.clone()).collect()), user);
            let roots = parts.iter().zip(outs).map(|(s, (_, d))| (var(s), d)).collect();
            (primal, roots, pvar(seed))
        }
        Val::Dual(p, d) => (p, vec![(var(seed), d)], pvar(seed)),
        Val::Outs(outs) => {
            // the seed taken apart: one name per output component
            let parts: Vec<Name> = outs.iter().map(|_| ex.fresh.name(&seed.text)).collect();
            let primal = tuple(outs.iter().map(|o| o.0.clone()).collect());
            let roots = parts.iter().zip(outs).map(|(s, (_, d))| (var(s), d)).collect();
            (primal, roots, ptuple(parts.iter().map(pvar).collect()))
        }
        _ => return Err(refuse(cur, "a result without a Delta")),
    };
    // the inputs as the wrapper numbers them: an array of tuples is its component arrays
    let params = pat
        .names()
        .into_iter()
        .flat_map(|x| {
            let cs: Vec<Name> = gets.iter().filter(|g| g.input == x).map(|g| g.name.clone()).collect();
            if cs.is_empty() {
                vec![x.clone()]
            } else {
                cs
            }
        })
        .collect();
    Ok(Extracted { binds: ex.binds, primal, roots, ids: ex.next_id, pat: pat.clone(), params, input: input.clone(), seed, boundary, gradient })
}

/// The symbolic Delta in the paper's notation, as a DAG: each Share whole once, then by its ID
/// (`Share2 …`); cut below 40 levels (the view is text, not a traversal of a deep program).
pub fn show(d: &Sym) -> String {
    show_at(d, &mut rustc_hash::FxHashSet::default(), 0)
}

fn show_at(d: &Sym, seen: &mut rustc_hash::FxHashSet<i64>, depth: usize) -> String {
    if depth > 40 {
        return "…".into();
    }
    let o = crate::print::PrintOptions::unicode();
    let p = |e: &Expr| crate::print::print_expr(e, &o).split_whitespace().collect::<Vec<_>>().join(" ");
    if let SymKind::Share(id, _) = &d.kind {
        if !seen.insert(*id) {
            return format!("Share{id} …");
        }
    }
    let mut c = |d: &Sym| format!("({})", show_at(d, seen, depth + 1));
    match &d.kind {
        SymKind::Zero => "Zero".into(),
        SymKind::Input(k) => format!("Input {k}"),
        SymKind::Add(a, b) => {
            let l = c(a);
            format!("Add {l} {}", c(b))
        }
        SymKind::Scale(r, x) => format!("Scale {} {}", p(r), c(x)),
        SymKind::Share(id, x) => format!("Share{id} {}", c(x)),
        SymKind::Index(x, u) => format!("Index {} [{}]", c(x), p(u)),
        SymKind::SumOuter(x) => format!("SumOuter {}", c(x)),
        SymKind::Gather(_, f, x) => format!("Gather {} ({})", c(x), p(f)),
        SymKind::Scatter(_, f, x) => format!("Scatter {} ({})", c(x), p(f)),
        SymKind::LitArray(xs) => format!("LitArray [{}]", xs.iter().map(|x| c(x)).collect::<Vec<_>>().join(", ")),
        SymKind::Replicate(k, x) => format!("Replicate {} {}", p(k), c(x)),
        SymKind::Transpose(q, x) => format!("Transpose {q:?} {}", c(x)),
        SymKind::ScanL { accs, xs, dz, dxs, dvs, .. } => {
            let (a, b) = (c(dz), c(dxs));
            let vs: Vec<String> = dvs.iter().map(|x| c(x)).collect();
            format!("ScanL vjp {} {} {a} {b} [{}]", p(accs), p(xs), vs.join(", "))
        }
    }
}

/// The most nodes a gradient program may have (the exponential stage is stopped there: notes §7.12).
pub const MAX_TERM: u64 = 2_000_000;

/// Size of a term as a tree (every node counted at each occurrence).
pub use crate::ir::node_count as tree_size;

/// The sizes `[length s, length (index s 0), …]` of the first `k` dims of a primal term `s`.
fn dims(s: &Expr, k: usize) -> Expr {
    let ds: Vec<Expr> = (0..k).map(|d| prim(Prim::Length, vec![index_all(s.clone(), (0..d).map(|_| int(0)))])).collect();
    if ds.len() == 1 {
        ds.into_iter().next().unwrap_or_else(|| int(0))
    } else {
        tuple(ds)
    }
}

fn fun_dims(f: &Expr) -> (usize, usize) {
    let m = match &f.kind {
        ExprKind::Lam(_, p_x) => { let (p, _) = &**p_x; match p {
            Pat::Tuple(ps, _) => ps.len(),
            _ => 1,
        } },
        _ => 1,
    };
    let n = match &f.kind {
        ExprKind::Lam(_, b_x) => { let (_, b) = &**b_x; match &b.kind {
            ExprKind::Array(xs) => xs.len(),
            _ => 1,
        } },
        _ => 1,
    };
    (m.max(1), n.max(1))
}

fn plus(a: Expr, b: Expr) -> Expr {
    apps(builtin("plus"), [a, b])
}

/// The symbolic reverse pass (§7.2; with `share`, Fig. 19): the gradient term of each input.
pub struct Reverse {
    pub share: bool,
    pub next_share: i64,
    pub steps: Vec<String>,
    /// Nodes copied so far (the no-share pass's duplications), against `MAX_TERM`.
    pub copied: u64,
    /// With share: the body of each `share i t`, kept once. The pass hands the term around as the
    /// reference `shared i` (so a duplicated cotangent is never copied: the pass is linear in the
    /// gradient DAG, not its tree), and `expand` writes `share i t` back at the first occurrence.
    pub bodies: BTreeMap<i64, Expr>,
    /// Per share ID, the size and depth of `share i t` written out as a tree (for the steps' sizes
    /// and the depth check, as if every occurrence were a copy).
    sizes: BTreeMap<i64, (u64, usize)>,
    /// The pass rule by rule, for the stepper.
    pub trace: Steps,
}

fn trivial(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Var(_) | ExprKind::Real(_) | ExprKind::Int(_)) || head(e).is_some_and(|h| h == "share" || h == "shared")
}

/// The head builtin of an application spine, found without collecting its arguments (`spine`):
/// `shared_id` and `trivial` run on every node `tree_size_depth` visits.
fn head(e: &Expr) -> Option<&str> {
    let mut cur = e;
    while let ExprKind::App(f_x) = &cur.kind {
        let (f, _) = &**f_x;
        cur = f;
    }
    match &cur.kind {
        ExprKind::Builtin(n) => Some(n),
        _ => None,
    }
}

/// The ID of a reference `shared i`.
pub fn shared_id(e: &Expr) -> Option<i64> {
    match &e.kind {
        ExprKind::App(f_a) => { let (f, a) = &**f_a; match (&f.kind, &a.kind) {
            (ExprKind::Builtin(h), ExprKind::Int(id)) if &**h == "shared" => Some(*id),
            _ => None,
        } },
        _ => None,
    }
}

impl Reverse {
    /// Fig. 19's `share id c` where eval duplicates a cotangent (not around a trivial one: §8.10).
    fn dup(&mut self, c: Expr) -> Result<Expr, Diagnostic> {
        if !self.share {
            // the copy eval makes of c (§7.2): counted, and stopped past MAX_TERM
            self.copied += tree_size(&c);
            if self.copied > MAX_TERM {
                return Err(Diagnostic::error(
                    Span::NONE,
                    format!("stopped: the gradient term passed {MAX_TERM} nodes (the `gradient size` budget; without share, eval copies each cotangent at every Add: §7.2, and arrays/symbolic-share does not)"),
                ));
            }
            return Ok(c);
        }
        if trivial(&c) {
            return Ok(c);
        }
        self.next_share += 1;
        let id = self.next_share;
        // `share i c` is App(App(share, i), c): c sits one level down, besides 4 nodes of its own
        let (size, depth) = self.tree_size_depth(&c);
        self.sizes.insert(id, (size.saturating_add(4), (depth + 1).max(3)));
        self.bodies.insert(id, c);
        Ok(app(builtin("shared"), int(id)))
    }

    /// A fresh pass: with `share`, Fig. 19's sharing.
    pub fn new(share: bool) -> Reverse {
        Reverse { share, next_share: 0, steps: vec![], copied: 0, bodies: BTreeMap::new(), sizes: BTreeMap::new(), trace: Steps::default() }
    }

    /// Size and depth of `e` as a tree with every `shared i` written out as `share i t`.
    pub fn tree_size_depth(&self, e: &Expr) -> (u64, usize) {
        let (mut n, mut best) = (0u64, 0usize);
        let mut stack = vec![(e, 1usize)];
        while let Some((x, d)) = stack.pop() {
            if let Some((size, depth)) = shared_id(x).and_then(|id| self.sizes.get(&id)) {
                n = n.saturating_add(*size);
                best = best.max(d - 1 + depth);
                continue;
            }
            n = n.saturating_add(1);
            best = best.max(d);
            each_child(x, &mut |c| stack.push((c, d + 1)));
        }
        (n, best)
    }

    /// `expand` on each input's gradient term.
    pub fn expand_all(&mut self, grads: Vec<Option<Expr>>) -> Vec<Option<Expr>> {
        grads
            .into_iter()
            .map(|g| {
                g.map(|mut t| {
                    self.expand(&mut t);
                    t
                })
            })
            .collect()
    }

    /// The gradient term with each share written out at its first occurrence, left to right (the
    /// order the program runs in), and read as `shared i` after: the program's size is the
    /// gradient DAG's. Recurses on the written-out term's nesting (checked against the bracket
    /// budget before: `tree_size_depth`).
    pub fn expand(&mut self, t: &mut Expr) {
        if let Some(id) = shared_id(t) {
            if let Some(mut body) = self.bodies.remove(&id) {
                self.expand(&mut body);
                *t = apps(builtin("share"), [int(id), body]);
            }
            return;
        }
        for c in children_mut(t) {
            self.expand(c);
        }
    }

    /// The pass from each root (a cotangent and its Delta: one per output component), then the
    /// max-ID loop.
    pub fn run(&mut self, roots: &[(Expr, Rc<Sym>)], inputs: usize, fresh: &mut Fresh) -> Result<Vec<Option<Expr>>, Diagnostic> {
        let mut grad: BTreeMap<usize, Expr> = BTreeMap::new();
        let mut dfrag: BTreeMap<i64, Rc<Sym>> = BTreeMap::new();
        let mut accum: BTreeMap<i64, Expr> = BTreeMap::new();
        for (c, d) in roots {
            self.eval(c.clone(), d, &mut grad, &mut dfrag, &mut accum, fresh)?;
        }
        while let Some((id, mut c)) = accum.pop_last() {
            let Some(frag) = dfrag.remove(&id) else { continue };
            // Without share there are no references, and this is the plain tree size. Measured only
            // for a stage shown (the view and the kept steps): a cotangent grows with the Delta
            // below it, so measuring each one is Θ(n²) on a chain n deep (issue 14).
            if self.trace.shown {
                let size = self.tree_size_depth(&c).0;
                self.steps.push(format!("ID {id}: cotangent of size {size}"));
                let rows = if self.trace.keeping() { vec![("c".into(), self.trace.show(&mut c))] } else { vec![] };
                let did = Did { kind: format!("pop ID {id}"), note: format!("the largest ID left: its cotangent (size {size}) goes down its fragment, {}", ctor(&frag.kind)), rows };
                self.trace.record(did, &mut grad, &mut accum);
            }
            self.eval(c, &frag, &mut grad, &mut dfrag, &mut accum, fresh)?;
        }
        self.trace.finish(&mut grad, &mut accum);
        Ok((0..inputs).map(|k| grad.remove(&k)).collect())
    }

    /// Fig. 17's eval (Fig. 19's with share), one rule application per work item: each constructor
    /// sends its cotangent to its children through its linear transpose.
    #[allow(clippy::too_many_arguments)]
    fn eval(&mut self, c: Expr, d: &Rc<Sym>, grad: &mut BTreeMap<usize, Expr>, dfrag: &mut BTreeMap<i64, Rc<Sym>>, accum: &mut BTreeMap<i64, Expr>, fresh: &mut Fresh) -> Result<(), Diagnostic> {
        let mut work = vec![(c, d.clone())];
        while let Some((mut c, d)) = work.pop() {
            let keep = self.trace.keeping();
            let mut rows = if keep { vec![("c".to_string(), self.trace.show(&mut c))] } else { vec![] };
            // what the rule sends to each child, in the order eval visits them
            let mut sent: Vec<(Expr, Rc<Sym>)> = vec![];
            let what = match &d.kind {
                SymKind::Zero => "dropped (Zero)".to_string(),
                SymKind::Input(k) => {
                    // Haskell's insertWith f k new old = f new old: the newer contribution first
                    let v = match grad.remove(k) {
                        Some(g) => plus(c, g),
                        None => c,
                    };
                    grad.insert(*k, v);
                    self.trace.changed_grad(*k);
                    format!("added to grad {}", self.trace.labels.get(*k).map(String::as_str).unwrap_or("?"))
                }
                SymKind::Add(a, b) => {
                    let before = self.next_share;
                    let c = self.dup(c)?;
                    if keep && self.next_share > before {
                        let id = self.next_share;
                        if let Some(body) = self.bodies.get_mut(&id) {
                            rows.push((format!("share {id}"), self.trace.show(body)));
                        }
                    }
                    sent.push((c.clone(), a.clone()));
                    sent.push((c, b.clone()));
                    if self.next_share > before { format!("shared as share {} and sent to both summands", self.next_share) } else { "sent to both summands".into() }
                }
                SymKind::Scale(r, x) => {
                    sent.push((apps(builtin("times"), [r.clone(), c]), x.clone()));
                    "multiplied by the scale factor".into()
                }
                SymKind::Share(id, x) => {
                    dfrag.insert(*id, x.clone());
                    let v = match accum.remove(id) {
                        Some(g) => plus(c, g),
                        None => c,
                    };
                    accum.insert(*id, v);
                    self.trace.changed_accum(*id);
                    format!("added to accum[{id}], evaluated when ID {id} is popped")
                }
                SymKind::Index(x, u) => {
                    sent.push((apps(builtin("oneHot"), [x.shape.clone(), u.clone(), c]), x.clone()));
                    "put in a one-hot array".into()
                }
                SymKind::SumOuter(x) => {
                    sent.push((replicate(prim(Prim::Length, vec![x.shape.clone()]), c), x.clone()));
                    "replicated (SumOuter's transpose)".into()
                }
                SymKind::Gather(_, f, x) => {
                    let (m, n) = fun_dims(f);
                    sent.push((apps(builtin(scatter_name(m, n)), [dims(&x.shape, n), c, f.clone()]), x.clone()));
                    "scattered (Gather's transpose)".into()
                }
                SymKind::Scatter(_, f, x) => {
                    let (m, n) = fun_dims(f);
                    sent.push((apps(builtin(gather_name(m, n)), [dims(&x.shape, m), c, f.clone()]), x.clone()));
                    "gathered (Scatter's transpose)".into()
                }
                SymKind::LitArray(xs) => {
                    let c = self.dup(c)?;
                    for (k, x) in xs.iter().enumerate() {
                        sent.push((index(c.clone(), int(k as i64)), x.clone()));
                    }
                    "indexed: element k to child k".into()
                }
                SymKind::Replicate(_, x) => {
                    sent.push((sum_outer(c), x.clone()));
                    "summed over the outer dimension (Replicate's transpose)".into()
                }
                SymKind::Transpose(p, x) => {
                    let mut inv = vec![0; p.len()];
                    for (q, &dd) in p.iter().enumerate() {
                        if let Some(s) = inv.get_mut(dd) {
                            *s = q;
                        }
                    }
                    sent.push((tr(&inv, c), x.clone()));
                    "transposed back".into()
                }
                SymKind::ScanL { vjp, ctx, accs, xs, dz, dxs, dvs } => {
                    // fold.rs: the reverse fold over the primal accumulators
                    use super::fold::{acc_cotangents, part, vjps};
                    let c = self.dup(c)?;
                    let cas = self.dup(acc_cotangents(vjp, ctx, accs, xs, c, fresh))?;
                    let gs = self.dup(vjps(vjp, ctx, accs, xs, cas.clone(), fresh))?;
                    let width = 2 + dvs.len();
                    sent.push((index(cas, int(0)), dz.clone()));
                    sent.push((part(gs.clone(), 1, width, None, fresh), dxs.clone()));
                    for (j, dv) in dvs.iter().enumerate() {
                        sent.push((part(gs.clone(), 2 + j, width, Some(ctx[j].clone()), fresh), dv.clone()));
                    }
                    "folded back over the accumulators (a scanr of the body's vjp)".into()
                }
            };
            if keep {
                let one = sent.len() == 1;
                for (k, (t, _)) in sent.iter_mut().enumerate() {
                    let key = if one { "sent".to_string() } else { format!("sent {}", k + 1) };
                    rows.push((key, self.trace.show(t)));
                }
            }
            let did = Did { kind: format!("eval {}", ctor(&d.kind)), note: format!("the cotangent is {what}"), rows };
            self.trace.record(did, grad, accum);
            // a stack: the first child is evaluated first
            work.extend(sent.into_iter().rev());
        }
        Ok(())
    }
}

/// A Delta constructor's name (Fig. 12), as the steps name the eval rule they apply.
fn ctor(k: &SymKind) -> &'static str {
    match k {
        SymKind::Zero => "Zero",
        SymKind::Input(_) => "Input",
        SymKind::Add(..) => "Add",
        SymKind::Scale(..) => "Scale",
        SymKind::Share(..) => "Share",
        SymKind::Index(..) => "Index",
        SymKind::SumOuter(_) => "SumOuter",
        SymKind::Gather(..) => "Gather",
        SymKind::Scatter(..) => "Scatter",
        SymKind::LitArray(_) => "LitArray",
        SymKind::Replicate(..) => "Replicate",
        SymKind::Transpose(..) => "Transpose",
        SymKind::ScanL { .. } => "ScanL",
    }
}

/// shareToLet (Fig. 20): each `share i t` becomes a variable bound once, above the whole gradient
/// tuple, in ID order (IDs are monotone: lower IDs never refer to higher ones).
pub fn share_to_let(terms: Vec<Expr>, fresh: &mut Fresh) -> (Vec<(i64, Name, Expr)>, Vec<Expr>) {
    let mut m: BTreeMap<i64, (Name, Expr)> = BTreeMap::new();
    let out = terms.into_iter().map(|t| unshare(&mut m, t, fresh)).collect();
    (m.into_iter().map(|(i, (n, t))| (i, n, t)).collect(), out)
}

/// `unshare m t`, with the map threaded through the share case (erratum of Fig. 20).
fn unshare(m: &mut BTreeMap<i64, (Name, Expr)>, t: Expr, fresh: &mut Fresh) -> Expr {
    // a post-order walk with an explicit stack: children first, so a share's body is unshared
    // (threading m) before it is bound
    let mut t = t;
    unshare_in(m, &mut t, fresh);
    t
}

fn unshare_in(m: &mut BTreeMap<i64, (Name, Expr)>, t: &mut Expr, fresh: &mut Fresh) {
    if let Some(("share", args)) = spine(t).filter(|(_, a)| a.len() == 2) {
        if let ExprKind::Int(id) = args[0].kind {
            if let Some((v, _)) = m.get(&id) {
                *t = var(v);
                return;
            }
            // the body moved out, not copied: a share's body holds the shares nested in it
            let ExprKind::App(arg_x) = &mut t.kind else { return };
            let (_, arg) = &mut **arg_x;
            let mut body = std::mem::replace(arg, unit());
            unshare_in(m, &mut body, fresh);
            let v = fresh.name(&format!("shared{id}"));
            m.insert(id, (v.clone(), body));
            *t = var(&v);
            return;
        }
    }
    for c in children_mut(t) {
        unshare_in(m, c, fresh);
    }
}

/// A body's vjp (fold.rs): `\(pat, seed) -> let primal lets in let shares in (grads)`.
pub fn vjp_program(ex: &Extracted, lets: Vec<(Name, Expr)>, grads: Vec<Option<Expr>>) -> Expr {
    let mut body = rebuild(&ex.pat, &ex.params, &grads);
    // the primal lets the cotangents do not read are dropped (the body's result is not returned)
    for (x, t) in lets.into_iter().rev().chain(ex.binds.iter().rev().cloned()) {
        if super::bot::mentions(&body, x.id) {
            body = let_(pvar(&x), t, body);
        }
    }
    lam(ppair(ex.pat.clone(), ex.seed.clone()), body)
}

/// The gradient program: `grad (input, seed) = let pat = input in let primal lets in (primal, grads)`.
pub fn program(ex: &Extracted, lets: Vec<(Name, Expr)>, grads: Vec<Option<Expr>>) -> Expr {
    let gs = match &ex.gradient {
        Some(g) => fill_gradient(g, &grads),
        None => rebuild(&ex.pat, &ex.params, &grads),
    };
    let mut body = pair(ex.primal.clone(), gs);
    for (x, t) in lets.into_iter().rev() {
        body = let_(pvar(&x), t, body);
    }
    for (x, t) in ex.binds.iter().rev() {
        body = let_(pvar(x), t.clone(), body);
    }
    for (c, rhs) in ex.boundary.iter().rev() {
        body = let_(pvar(c), rhs.clone(), body);
    }
    lam(ppair(pvar(&ex.input), ex.seed.clone()), let_(ex.pat.clone(), var(&ex.input), body))
}

/// The wrapper's gradient with each `gradAt k x g` replaced by input k's cotangent term (zeros where
/// none reached it): the input's shape, arrays of tuples zipped back from their components.
fn fill_gradient(g: &Expr, grads: &[Option<Expr>]) -> Expr {
    let mut out = g.clone();
    let mut stack = vec![&mut out];
    while let Some(t) = stack.pop() {
        if let Some(("gradAt", args)) = spine(t) {
            if let (ExprKind::Int(k), ExprKind::Var(x)) = (&args[0].kind, &args[1].kind) {
                let x = x.clone();
                *t = match grads.get(*k as usize).cloned().flatten() {
                    Some(c) => c,
                    None => app(builtin("zerosLike"), var(&x)),
                };
                continue;
            }
        }
        stack.extend(children_mut(t));
    }
    out
}

fn rebuild(p: &Pat, params: &[Name], grads: &[Option<Expr>]) -> Expr {
    match p {
        Pat::Var(x, _) => {
            let k = params.iter().position(|v| v == x).unwrap_or(0);
            match grads.get(k).cloned().flatten() {
                Some(g) => g,
                // no cotangent reached it: zeros (integer leaves as they are), §8.13
                None => app(builtin("zerosLike"), var(x)),
            }
        }
        Pat::Tuple(ps, _) => tuple(ps.iter().map(|q| rebuild(q, params, grads)).collect()),
        _ => unit(),
    }
}

pub fn span_none() -> Span {
    Span::NONE
}
