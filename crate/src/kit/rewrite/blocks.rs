//! The `blocks` strategy: rules at the statements of do blocks (`p ← m; k`), for laws that substitute
//! (the monad laws' left identity, `kit/monad_laws.rs`). Innermost rewriting would substitute into the
//! rest of a block once per statement, quadratic on a long block; here a block is walked left to right
//! with a substitution environment: a rule may answer "continue with the rest under x ↦ v", and the walk
//! puts v where it reaches x, so one pass does every substitution.
//!
//! Order at a statement `p ← m; k`: m is normalised first, then the `Link` rules are tried with `k` not
//! yet walked (they may drop the statement under a substitution, or hoist a statement out of m); then
//! `k`. When the block's end is reached it is rebuilt from there, with the `End` rules tried at each
//! statement (its rest now normal). Lets are statements too, where no rule is tried. A block is walked
//! in a loop (a long run is one long block); other nesting recurses, as the parser bounds it (limits.rs).
//! A right-hand side that is itself a block (`p ← (q ← m1; m2); k`, left-nested binds: the lifting of
//! `x + x + … + x` or `sin (sin (…))`) is normalised into its statements, which a `Head` rule moves in
//! front of the statement all at once (one step each, as if one by one): hoisting them one at a time
//! at every level would be quadratic in the nesting.
//! Names are unique in a program (`Fresh`), so substitution never captures.

use super::{cut_copy, map_children, Budget, RewriteCx, Step, Trace, Walk};
use crate::build::{at, Fresh};
use crate::diag::{Diagnostic, Span};
use crate::ir::{each_child, Expr, ExprKind, Name, Pat, Type};
use crate::print::{print_expr, Later};
use std::collections::VecDeque;
use rustc_hash::{FxHashMap as HashMap};

/// A rule at a statement `p ← m; k` (an `ExprKind::Bind`; the strategy never offers it a `let`).
pub struct LinkRule {
    pub name: &'static str,
    pub site: Site,
    /// Whether the rule applies (it may read the use counts in `RewriteCx::uses`).
    pub matches: fn(&Expr, &RewriteCx) -> bool,
    /// The rewrite of a statement it matches, which it takes by value: nothing is copied.
    pub apply: fn(Expr) -> Linked,
}

/// When a rule is tried at a statement.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// As the walk reaches it: m normal, the rest k not yet walked.
    Link,
    /// As the walk reaches it, when m is itself a statement (`q ← m1; m2` or `let q = m1 in m2`): the
    /// rule moves that statement out in front (answering `Hoist`). It is tried in its place among the
    /// `Link` rules, and may look only at the statement and m's first statement; once the trace keeps
    /// no more text, the strategy hoists every statement of m's normal form at once, counting a step each.
    Head,
    /// As the block is rebuilt from its end: m and k normal. The rule may match only at the block's
    /// last statement (k not a statement), so the rebuild stops trying at the first statement left.
    End,
}

/// What a rule makes of a statement.
pub enum Linked {
    /// (`Link`) The statement goes; the walk continues with its rest under x ↦ v.
    Under { x: Name, v: Expr, rest: Expr },
    /// (`Link`) A statement of m's own block moves out in front (`Stmt` with m's head, normal), and the
    /// statement continues as `rest` (its right-hand side normal, its rest not walked).
    Hoist { stmt: Stmt, rest: Expr },
    /// (`End`) The statement becomes this expression (normal).
    To(Expr),
}

/// One statement of a block: `p ← m` (`bind`) or `let p = m`, with its node's span and type.
pub struct Stmt {
    pub bind: bool,
    pub pat: Pat,
    pub rhs: Expr,
    pub span: Span,
    pub ty: Type,
}

impl Stmt {
    /// Takes a `Bind` or `Let` node apart into its statement and its rest.
    pub fn split(e: Expr) -> Result<(Stmt, Expr), Expr> {
        let (bind, pat, rhs_rest) = match e.kind {
            ExprKind::Bind(p_m_k) => { let (p, m_k) = *p_m_k; (true, p, m_k) },
            ExprKind::Let(p_m_k) => { let (p, m_k) = *p_m_k; (false, p, m_k) },
            kind => return Err(Expr { kind, span: e.span, ty: e.ty }),
        };
        let (rhs, rest) = rhs_rest;
        Ok((Stmt { bind, pat, rhs, span: e.span, ty: e.ty }, rest))
    }

    /// The statement followed by `rest`.
    pub fn then(self, rest: Expr) -> Expr {
        let kind = if self.bind {
            ExprKind::Bind(Box::new((self.pat, (self.rhs, rest))))
        } else {
            ExprKind::Let(Box::new((self.pat, (self.rhs, rest))))
        };
        Expr { kind, span: self.span, ty: self.ty }
    }
}

/// A rewrite under the `blocks` strategy, definition by definition, with one trace.
pub struct Blocks<'r, 'f> {
    rules: &'r [LinkRule],
    cx: RewriteCx<'f>,
    /// x ↦ v for every statement dropped under a substitution (ids are unique in a program).
    env: HashMap<u32, Expr>,
    w: Walk,
}

/// Rewrites one expression under `rules` with the `blocks` strategy.
pub fn normalise_blocks(e: Expr, rules: &[LinkRule], fresh: &mut Fresh, budget: Budget) -> Result<(Expr, Trace), Diagnostic> {
    let mut b = Blocks::new(rules, fresh, budget);
    let out = b.def("", e)?;
    Ok((out, b.finish()))
}

impl<'r, 'f> Blocks<'r, 'f> {
    pub fn new(rules: &'r [LinkRule], fresh: &'f mut Fresh, budget: Budget) -> Blocks<'r, 'f> {
        let w = Walk::new(budget, rules.iter().map(|r| r.name));
        Blocks { rules, cx: RewriteCx { fresh, uses: HashMap::default(), changed: None, keep: true }, env: HashMap::default(), w }
    }

    /// The normal form of the definition `name = e`.
    pub fn def(&mut self, name: &str, e: Expr) -> Result<Expr, Diagnostic> {
        self.w.def = name.to_string();
        self.cx.uses.clear();
        count_uses(&e, &mut self.cx.uses);
        let span = e.span;
        let out = self.walk(e);
        self.w.result(out, span)
    }

    /// Node visits so far (each node is visited once, and each substituted variable once more).
    pub fn visits(&self) -> u64 {
        self.w.visits
    }

    pub fn finish(self) -> Trace {
        self.w.trace
    }

    fn walk(&mut self, mut e: Expr) -> Expr {
        if self.w.stopped.is_some() || !self.w.visit() {
            return e;
        }
        match &e.kind {
            ExprKind::Var(n) if !n.is_global() => {
                return match self.env.get(&n.id) {
                    Some(v) => at(v.clone(), e.span),
                    None => e,
                }
            }
            ExprKind::Bind(..) | ExprKind::Let(..) => return self.block(e),
            _ => {}
        }
        map_children(self, &mut e, |b| &mut b.w.path, Self::walk);
        e
    }

    /// The path to the `i`th statement of the block at `depth` (its rests are child 1), from the path
    /// to a neighbouring statement: moving by one statement is one push or pop, so a long block is not
    /// quadratic in its paths.
    fn at_stmt(&mut self, depth: usize, i: usize) {
        let want = depth + i;
        if self.w.path.len() > want {
            self.w.path.truncate(want);
        } else {
            self.w.path.resize(want, 1);
        }
    }

    fn block(&mut self, e: Expr) -> Expr {
        let (mut done, mut acc) = self.block_parts(e);
        while let Some(stmt) = done.pop_back() {
            acc = stmt.then(acc);
        }
        acc
    }

    /// `walk` of a right-hand side, as its normal form's statements and its end when it is a block.
    fn walk_parts(&mut self, e: Expr) -> (VecDeque<Stmt>, Expr) {
        if self.w.stopped.is_some() || !matches!(e.kind, ExprKind::Bind(..) | ExprKind::Let(..)) {
            return (VecDeque::new(), self.walk(e));
        }
        if !self.w.visit() {
            return (VecDeque::new(), e);
        }
        self.block_parts(e)
    }

    /// The normal form of a block, as its statements and the expression after them.
    fn block_parts(&mut self, e: Expr) -> (VecDeque<Stmt>, Expr) {
        let depth = self.w.path.len();
        let mut done: VecDeque<Stmt> = VecDeque::new();
        let mut cur = e;
        let tail = 'walk: loop {
            let (mut stmt, rest) = match Stmt::split(cur) {
                Ok(s) => s,
                Err(tail) => break tail,
            };
            self.at_stmt(depth, done.len());
            self.w.path.push(0);
            let (inner, rhs) = self.walk_parts(stmt.rhs);
            self.w.path.pop();
            stmt.rhs = rhs;
            let mut node = self.hoist_all(inner, stmt, &mut done).then(rest);
            loop {
                self.at_stmt(depth, done.len());
                match self.fire(Site::Link, node) {
                    Err(unchanged) => {
                        node = unchanged;
                        break;
                    }
                    Ok(Linked::Under { x, v, rest }) => {
                        self.substitute(&x, v);
                        cur = rest;
                        continue 'walk;
                    }
                    Ok(Linked::Hoist { stmt, rest }) => {
                        done.push_back(stmt);
                        node = rest;
                    }
                    // not a `Link` rule's answer: walked again
                    Ok(Linked::To(e)) => {
                        cur = e;
                        continue 'walk;
                    }
                }
            }
            match Stmt::split(node) {
                Ok((stmt, rest)) => {
                    done.push_back(stmt);
                    cur = rest;
                }
                Err(e) => break e,
            }
        };
        self.at_stmt(depth, done.len());
        let mut acc = self.walk(tail);
        // `End` rules match only a block's last statement: none once the rest is a statement
        while !matches!(acc.kind, ExprKind::Bind(..) | ExprKind::Let(..)) {
            let Some(stmt) = done.pop_back() else { break };
            self.at_stmt(depth, done.len());
            acc = match self.fire(Site::End, stmt.then(acc)) {
                Ok(Linked::To(e)) => e,
                Ok(Linked::Under { x, v, rest }) => {
                    // not an `End` rule's answer: the rest is normal, so substitute in it now
                    self.substitute(&x, v);
                    self.walk(rest)
                }
                Ok(Linked::Hoist { stmt, rest }) => stmt.then(rest),
                Err(e) => e,
            };
        }
        self.w.path.truncate(depth);
        (done, acc)
    }

    /// Whether the trace keeps no more steps' text (then a `Head` rule's steps need not be taken one
    /// at a time).
    fn trace_full(&self) -> bool {
        self.w.trace.steps.len() >= self.w.budget.trace_steps
    }

    /// The statement `p ← m` whose right-hand side's normal form is `inner` followed by m: if a `Head`
    /// rule is the first to match it, every statement of `inner` moves to the end of `done`, one step
    /// of the rule each (what taking them one at a time gives); else `inner` goes back in front of m.
    fn hoist_all(&mut self, mut inner: VecDeque<Stmt>, mut stmt: Stmt, done: &mut VecDeque<Stmt>) -> Stmt {
        let Some(first) = inner.pop_front() else { return stmt };
        // the rules see the statement with m's first statement in front of its end (a placeholder)
        let rhs = std::mem::replace(&mut stmt.rhs, Expr::gen(ExprKind::Unit));
        let probe = Stmt { rhs: first.then(Expr::gen(ExprKind::Unit)), ..stmt }.then(Expr::gen(ExprKind::Unit));
        let k = self.rules.iter().position(|r| matches!(r.site, Site::Link | Site::Head) && (r.matches)(&probe, &self.cx));
        let (mut stmt, first) = match Stmt::split(probe) {
            Ok((mut s, _)) => {
                let first = Stmt::split(std::mem::replace(&mut s.rhs, rhs)).ok().map(|(f, _)| f);
                (s, first.expect("the probe's right-hand side is a statement"))
            }
            Err(_) => unreachable!("the probe is a statement"),
        };
        inner.push_front(first);
        let head = k.filter(|&k| self.rules[k].site == Site::Head);
        match head {
            // while the trace keeps text, one at a time by the walk (a bounded number of steps)
            Some(k) if self.w.stopped.is_none() && self.trace_full() => {
                let taken = self.w.steps(k, inner.len() as u64) as usize;
                // the first `taken` of `inner`: all of it taken whole, not copied (a left-nested
                // block's inner block is all that came before it: copying it at every level was
                // quadratic, 75 % of krawiec/monadic's time on x + x + … + x of 10^4 terms)
                let rest = if taken < inner.len() { inner.split_off(taken) } else { VecDeque::new() };
                let mut moved = std::mem::replace(&mut inner, rest);
                // the smaller of the two moves (a block nested either way stays O(n log n))
                if done.len() <= moved.len() {
                    while let Some(s) = done.pop_back() {
                        moved.push_front(s);
                    }
                    std::mem::swap(done, &mut moved);
                } else {
                    done.extend(moved);
                }
                while let Some(s) = inner.pop_back() {
                    stmt.rhs = s.then(stmt.rhs);
                }
            }
            _ => {
                while let Some(s) = inner.pop_back() {
                    stmt.rhs = s.then(stmt.rhs);
                }
            }
        }
        stmt
    }

    /// x ↦ v from here on; each local of v now also occurs wherever x did.
    fn substitute(&mut self, x: &Name, v: Expr) {
        let n = self.cx.uses.get(&x.id).copied().unwrap_or(0);
        let mut locals = HashMap::default();
        count_uses(&v, &mut locals);
        for (a, k) in locals {
            *self.cx.uses.entry(a).or_default() += k * n.saturating_sub(1);
        }
        self.env.insert(x.id, v);
    }

    /// Tries the rules of `site` at a statement in order; the first that matches is applied and recorded.
    fn fire(&mut self, site: Site, mut node: Expr) -> Result<Linked, Expr> {
        if self.w.stopped.is_some() || !matches!(node.kind, ExprKind::Bind(..)) {
            return Err(node);
        }
        let tried = |r: &LinkRule| r.site == site || (site == Site::Link && r.site == Site::Head);
        let Some(k) = self.rules.iter().position(|r| tried(r) && (r.matches)(&node, &self.cx)) else { return Err(node) };
        let rule = &self.rules[k];
        if !self.w.step(k) {
            return Err(node);
        }
        if self.w.trace.steps.len() >= self.w.budget.trace_steps {
            return Ok((rule.apply)(node));
        }
        let span = (!node.span.is_none()).then_some(node.span);
        let o = self.w.print;
        let before = Later::expr(cut_stmt(&mut node), o);
        let (out, after) = match (rule.apply)(node) {
            Linked::Under { x, v, mut rest } => {
                let (rest_cut, name, value) = (cut_stmt(&mut rest), x.text.clone(), v.clone());
                let after = Later::new(move || format!("{}\n  with {} ↦ {}", print_expr(&rest_cut, &o), name, print_expr(&value, &o)));
                (Linked::Under { x, v, rest }, after)
            }
            Linked::Hoist { stmt, rest } => {
                let mut e = stmt.then(rest);
                let after = Later::expr(cut_stmt(&mut e), o);
                match Stmt::split(e) {
                    Ok((stmt, rest)) => (Linked::Hoist { stmt, rest }, after),
                    Err(e) => (Linked::To(e), after),
                }
            }
            Linked::To(mut e) => {
                let after = Later::expr(cut_stmt(&mut e), o);
                (Linked::To(e), after)
            }
        };
        // a block step keeps cut copies of a few statements, printed when read (print::Later):
        // printing them as the rewrite went was most of the shown krawiec/monadic's transform
        self.w.trace.steps.push(Step {
            rule: rule.name,
            inexact: false,
            def: self.w.def.clone(),
            path: self.w.path.clone(),
            span,
            before,
            after,
            program: None,
        });
        Ok(out)
    }
}

/// A block step's text: a copy of its statement and the few after it (a statement's redex is the rest
/// of its block, which the whole-redex cut of `print_cut` would print a screenful of at every kept step).
fn cut_stmt(e: &mut Expr) -> Expr {
    cut_copy(e, 60, 8)
}

/// How often each local occurs in `e`, counted without recursion (a long run is one deep block).
fn count_uses(e: &Expr, uses: &mut HashMap<u32, u32>) {
    let mut stack: Vec<&Expr> = vec![e];
    while let Some(e) = stack.pop() {
        if let ExprKind::Var(n) = &e.kind {
            if !n.is_global() {
                *uses.entry(n.id).or_default() += 1;
            }
        }
        each_child(e, &mut |c| stack.push(c));
    }
}
