//! A rewrite engine: named rules, applied innermost-first until none applies, under a step budget,
//! with a trace of every step (rule, position, redex before and after) that the page steps through
//! like a backward pass. Huot & Shaikhha's partial evaluation and Fig. 12 optimisations, the arrays
//! paper's bot (Figs. 9–11) and shareToLet, and CHAD's clean-ups are rule sets over this engine.
//!
//! Strategy: `innermost` — the children of a node are normalised first, then the rules are tried at
//! the node in order; when one fires, its result is normalised again, but for the parts of it known
//! to be normal already (`rewrite/known.rs`: the redex's own subtrees, wherever the rule put them),
//! which no rule could rewrite. Let/bind chains are walked in a loop (a long straight-line program is
//! one deep chain); other nesting recurses, as the parser bounds it (see limits.rs).
//!
//! Strategy: `blocks` (blocks.rs) — for rules on do blocks that substitute (the monad laws): a block is
//! walked statement by statement, left to right, with a substitution environment, so one pass does
//! every substitution.

mod blocks;
mod known;
pub use blocks::{normalise_blocks, Blocks, LinkRule, Linked, Site, Stmt};

use crate::build::Fresh;
use crate::diag::{Diagnostic, Span};
use crate::ir::{each_child_mut, Expr, ExprKind, Pat, Program, Type};
use crate::print::{print_expr, Later, PrintOptions};

/// One named rule. `apply` returns the rewritten node, or None where the rule does not match (and
/// then leaves the redex as it was). A rule that fires may move parts of the redex into its result
/// with `RewriteCx::take` instead of copying them, if it says what it changed (`RewriteCx::changed`).
pub struct Rule {
    pub name: &'static str,
    /// The rule can change floating-point results (reassociation, `0 * e → 0` when e is NaN or ∞):
    /// steps by it are marked in the trace.
    pub inexact: bool,
    pub apply: fn(&mut Expr, &mut RewriteCx) -> Option<Expr>,
}

/// What a rule may use besides the redex: fresh names for what it introduces, and (in the `blocks`
/// strategy) how often each local occurs in the program as the substitutions so far have left it.
pub struct RewriteCx<'a> {
    pub fresh: &'a mut Fresh,
    pub uses: rustc_hash::FxHashMap<u32, u32>,
    /// What a rule that fired may say of its result (the `innermost` strategy reads and clears it):
    /// then the result is not hashed against the redex to find what is normal (`known.rs`).
    pub changed: Option<Changed>,
    /// Whether the engine reads the redex after a rule fires (to print the step for the trace, or in
    /// tests to check the rule's account of what it changed): then `take` copies.
    pub keep: bool,
}

impl RewriteCx<'_> {
    /// A part of the redex for the result of a rule that fires and says what it changed (`changed`):
    /// moved out, leaving `()` in the redex the engine then drops, or copied while the engine still
    /// reads the redex (`keep`). A rule's copies of its redex's continuations were most of a partial
    /// evaluation's time (each redex near the top is most of the program). Never before the rule
    /// knows it fires: a rule that does not fire leaves the redex whole.
    pub fn take(&self, e: &mut Expr) -> Expr {
        if self.keep {
            e.clone()
        } else {
            std::mem::replace(e, Expr::gen(ExprKind::Unit))
        }
    }
}

thread_local! {
    /// Nodes walked by the rules since the engine last looked (`charge`).
    static WALKED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Charges `nodes` walked by a rule (a side condition's count, a substitution, a chain taken apart) to
/// the running rewrite's budget. Visits alone did not bound a rewrite's time: on `sin (sin (… x))`
/// partial evaluation visits 17 nodes a level while its substitutions walk the whole continuation
/// built so far, Θ(n²) in all, so a budget stop came only after minutes (issue 14).
pub fn charge(nodes: usize) {
    WALKED.with(|w| w.set(w.get() + nodes as u64));
}

/// Nodes a rule may walk for the price of one visit: a visit (a node entered, rebuilt, every rule tried
/// at it) costs about as much time as a side condition's walk over this many nodes.
pub const WALKED_PER_VISIT: u64 = 32;

#[cfg(test)]
thread_local! {
    /// Tests keep every redex (to check each rule's account against it, `known::check_claim`) unless
    /// a test turns this off to run the rules that move parts out of their redex.
    pub static KEEP_REDEX: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// A rule's own account of its result: which nodes are not copies of the redex's proper subtrees
/// (all normal, as the redex's children are).
pub enum Changed {
    /// The result is one of the redex's proper subtrees: normal whole.
    Nothing,
    /// The result's nodes at these addresses, and its root, are new or have a new node below them
    /// (closed upwards: a listed node's parent is listed or the root); every other node is a copy.
    Only(Vec<usize>),
}

/// One step of a rewrite: which rule fired where, and the redex before and after. The terms are cut
/// copies printed when read (`print::Later`): a kept step costs a copy of a screenful of nodes, and
/// only the steps someone looks at are printed.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Step {
    pub rule: &'static str,
    pub inexact: bool,
    /// The definition it happened in.
    pub def: String,
    /// The child indices from the definition's body to the redex (`ir::each_child` order).
    pub path: Vec<u32>,
    /// The redex's source span, where it has one.
    pub span: Option<Span>,
    pub before: Later,
    pub after: Later,
    /// The whole definition after the step, cut as the redex is, when the rewrite keeps it
    /// (`Budget::program_after`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<Later>,
}

/// Limits of a rewrite.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Rule applications.
    pub steps: u64,
    /// Node visits (each re-normalisation walks its result again, but for what is known normal), plus
    /// one for every `WALKED_PER_VISIT` nodes the rules walk (`charge`). 2·10^6 is about 4 s natively on
    /// this project's machines; the quaternion's partial evaluation takes ~10^4.
    pub visits: u64,
    /// Steps kept with their text; later steps are counted only.
    pub trace_steps: usize,
    /// Keep, with each step kept, the whole definition after it (a copy of the definition is updated
    /// at the step's path, so each kept step costs a copy of its result and a print).
    pub program_after: bool,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget { steps: 1_000_000, visits: 2_000_000, trace_steps: 2_000, program_after: false }
    }
}

/// What a rewrite did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Trace {
    pub steps: Vec<Step>,
    /// Steps taken in all (the trace keeps the first `Budget::trace_steps`).
    pub taken: u64,
    /// Steps per rule, in rule order.
    pub per_rule: Vec<(&'static str, u64)>,
}

impl Trace {
    /// The rewrite as stepper steps: one per rule application kept, named by its rule (an inexact rule
    /// is marked `≈`), with the redex before and after and where it is.
    pub fn stepper(&self) -> Vec<crate::interp::TraceStep> {
        use crate::interp::{Shown, TraceStep};
        self.steps
            .iter()
            .map(|s| TraceStep {
                kind: if s.inexact { format!("{} ≈", s.rule) } else { s.rule.to_string() },
                node: None,
                span: s.span,
                factor: None,
                note: String::new(),
                note_later: Some({
                    let (before, after) = (s.before.clone(), s.after.clone());
                    Later::new(move || format!("{}  ⟶  {}", one_line(&before.text()), one_line(&after.text())))
                }),
                state: vec![("rule".into(), Shown::text(s.rule)), ("in".into(), Shown::text(&s.def))],
                state_later: [("redex", Some(&s.before)), ("becomes", Some(&s.after)), ("program after", s.program.as_ref())]
                    .into_iter()
                    .filter_map(|(k, l)| Some((k.to_string(), l?.clone())))
                    .collect(),
            })
            .collect()
    }

    /// The trace as a page view named `name`: how many steps by which rule, then each step's rule and
    /// the redex before and after it; made when read (it prints every kept step).
    pub fn view(&self, name: &str) -> crate::stage::View {
        let (taken, per_rule, steps) = (self.taken, self.per_rule.clone(), self.steps.clone());
        crate::stage::View::later(name, Later::new(move || view_text(taken, &per_rule, &steps)))
    }
}

/// The text of `Trace::view`.
fn view_text(taken: u64, per_rule: &[(&'static str, u64)], steps: &[Step]) -> String {
    use std::fmt::Write;
    let mut text = String::new();
    let per: Vec<String> = per_rule.iter().filter(|(_, n)| *n > 0).map(|(r, n)| format!("{r} ×{n}")).collect();
    let _ = writeln!(text, "{taken} rewrite steps: {}", per.join(", "));
    if (steps.len() as u64) < taken {
        let _ = writeln!(text, "(the first {} are shown)", steps.len());
    }
    for (i, s) in steps.iter().enumerate() {
        let mark = if s.inexact { "  [inexact: may change floating-point results]" } else { "" };
        let _ = writeln!(text, "\n{}. {}{mark}", i + 1, s.rule);
        push_indented(&mut text, &s.before.text());
        text.push_str("\n  ⇝\n");
        push_indented(&mut text, &s.after.text());
        text.push('\n');
        if let Some(p) = &s.program {
            text.push_str("  program after it:\n");
            push_indented(&mut text, &p.text());
            text.push('\n');
        }
    }
    text
}

/// `side` with each line indented by four spaces, and cut after `STEP_TEXT` characters (a step at
/// the top of a long program prints all of it).
fn push_indented(text: &mut String, side: &str) {
    let cut;
    let side = match side.char_indices().nth(STEP_TEXT) {
        Some((i, _)) => {
            cut = format!("{} …", &side[..i]);
            &cut
        }
        None => side,
    };
    for (k, l) in side.lines().enumerate() {
        if k > 0 {
            text.push('\n');
        }
        text.push_str("    ");
        text.push_str(l);
    }
}

/// How much of each side of a step a view keeps.
const STEP_TEXT: usize = 4_000;

/// A printed expression on one line, cut at 160 characters.
fn one_line(s: &str) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 160 {
        flat.chars().take(159).collect::<String>() + "…"
    } else {
        flat
    }
}

/// What both strategies keep as they walk: the budget and what it has used, the trace, and where
/// they are (the definition, the path from its body).
struct Walk {
    budget: Budget,
    visits: u64,
    /// Nodes the rules walked (`charge`), counted against the visits budget at `WALKED_PER_VISIT` a visit.
    walked: u64,
    trace: Trace,
    def: String,
    path: Vec<u32>,
    stopped: Option<&'static str>,
    print: PrintOptions,
}

impl Walk {
    fn new(mut budget: Budget, rules: impl Iterator<Item = &'static str>) -> Walk {
        if !crate::stage::shown() {
            // nobody will read this stage's trace: count the steps, keep no text (printing each kept
            // step and the program after it is most of a traced rewrite's time)
            budget.trace_steps = 0;
            budget.program_after = false;
        }
        let per_rule = rules.map(|r| (r, 0)).collect();
        let trace = Trace { steps: vec![], taken: 0, per_rule };
        WALKED.with(|w| w.set(0));
        Walk { budget, visits: 0, walked: 0, trace, def: String::new(), path: vec![], stopped: None, print: PrintOptions::unicode() }
    }

    /// Counts a node visit: false (and stopped) once the visit budget is spent.
    fn visit(&mut self) -> bool {
        self.visits += 1;
        self.over_visits()
    }

    /// Takes the nodes the rules walked since the last look into the budget: false (and stopped) once
    /// it is spent.
    fn walked(&mut self) -> bool {
        self.walked += WALKED.with(|w| w.replace(0));
        self.over_visits()
    }

    fn over_visits(&mut self) -> bool {
        if self.visits.saturating_add(self.walked / WALKED_PER_VISIT) > self.budget.visits {
            self.stopped = Some("visits");
        }
        self.stopped.is_none()
    }

    /// Counts a step by the `k`th rule: false (and stopped) once the step budget is spent.
    fn step(&mut self, k: usize) -> bool {
        self.trace.taken += 1;
        self.trace.per_rule[k].1 += 1;
        if self.trace.taken > self.budget.steps {
            self.stopped = Some("steps");
        }
        self.stopped.is_none()
    }

    /// Counts up to `n` steps by the `k`th rule at once, as `n` calls of `step` would: how many were
    /// allowed (fewer once the step budget is spent, which stops the walk).
    fn steps(&mut self, k: usize, n: u64) -> u64 {
        let room = self.budget.steps.saturating_sub(self.trace.taken);
        let (allowed, counted) = if n > room { (room, room + 1) } else { (n, n) };
        self.trace.taken += counted;
        self.trace.per_rule[k].1 += counted;
        if self.trace.taken > self.budget.steps {
            self.stopped = Some("steps");
        }
        allowed
    }

    /// The located message for the budget that ran out, if one did.
    fn result<T>(&self, out: T, span: Span) -> Result<T, Diagnostic> {
        match self.stopped {
            Some(which) => Err(budget_error(self, which, span)),
            None => Ok(out),
        }
    }
}

struct Engine<'r, 'f> {
    rules: &'r [Rule],
    cx: RewriteCx<'f>,
    w: Walk,
    /// The current definition as the steps so far left it (`Budget::program_after`).
    shadow: Option<Expr>,
    /// The parts known normal of each rule result being normalised, innermost last (`known.rs`).
    marks: Vec<known::Marks>,
    /// A rule result's span-less nodes take the redex's span (`normalise_located`).
    locate: bool,
}

/// Rewrites every definition of `p` to normal form under `rules`. Stops with a located message naming
/// the budget that ran out.
pub fn normalise_program(mut p: Program, rules: &[Rule], budget: Budget) -> Result<(Program, Trace), Diagnostic> {
    let mut fresh = Fresh::new(&p);
    let mut en = Engine::new(rules, &mut fresh, budget);
    for d in &mut p.defs {
        en.w.def = d.name.text.to_string();
        if en.w.budget.program_after {
            en.shadow = Some(d.body.clone());
        }
        let body = std::mem::replace(&mut d.body, Expr::gen(ExprKind::Unit));
        let out = en.normalise(body);
        d.body = en.w.result(out, d.span)?;
    }
    let trace = en.w.trace;
    p.next_id = fresh.next_id;
    Ok((p, trace))
}

/// Rewrites one expression to normal form.
pub fn normalise(e: Expr, rules: &[Rule], fresh: &mut Fresh, budget: Budget) -> Result<(Expr, Trace), Diagnostic> {
    normalise_with(e, rules, fresh, budget, false)
}

/// `normalise`, each rule result's span-less nodes given the redex's span (`ir::locate`): a
/// transform's generated terms point at the source they come from, so an error in them, or a
/// run-time one when they run, is located (arrays/bot: a ragged `tr`).
pub fn normalise_located(e: Expr, rules: &[Rule], fresh: &mut Fresh, budget: Budget) -> Result<(Expr, Trace), Diagnostic> {
    normalise_with(e, rules, fresh, budget, true)
}

fn normalise_with(e: Expr, rules: &[Rule], fresh: &mut Fresh, budget: Budget, locate: bool) -> Result<(Expr, Trace), Diagnostic> {
    let span = e.span;
    let mut en = Engine::new(rules, fresh, budget);
    en.locate = locate;
    let out = en.normalise(e);
    let out = en.w.result(out, span)?;
    Ok((out, en.w.trace))
}

impl<'r, 'f> Engine<'r, 'f> {
    fn new(rules: &'r [Rule], fresh: &'f mut Fresh, budget: Budget) -> Engine<'r, 'f> {
        let w = Walk::new(budget, rules.iter().map(|r| r.name));
        Engine { rules, cx: RewriteCx { fresh, uses: Default::default(), changed: None, keep: true }, w, shadow: None, marks: vec![], locate: false }
    }

    /// Whether `e`, a part of the rule result being normalised that the walk has not reached yet, is
    /// known to be normal (`known.rs`).
    fn known(&self, e: &Expr) -> bool {
        self.marks.last().is_some_and(|m| m.has(e))
    }

    /// Innermost normal form. Along a let/bind chain, the right-hand sides and the chain's tail are
    /// normalised first, then the chain is rebuilt from its end with the rules tried at each link (no
    /// recursion along it). Parts known normal are left as they are.
    fn normalise(&mut self, e: Expr) -> Expr {
        if self.w.stopped.is_some() {
            return e;
        }
        let depth = self.w.path.len();
        // (is a bind, pattern, right-hand side and whether it is known normal, span, type) of each
        // link, outermost first
        let mut links: Vec<(bool, Pat, Expr, bool, Span, Type)> = vec![];
        let mut cur = e;
        let mut tail_normal = false;
        let tail = loop {
            let (is_bind, link) = match cur.kind {
                ExprKind::Let(link) if !tail_normal => (false, link),
                ExprKind::Bind(link) if !tail_normal => (true, link),
                kind => break Expr { kind, span: cur.span, ty: cur.ty },
            };
            // asked in place, before the link's box is opened: a mark is a node's address in its box
            let rhs_normal = self.known(&link.1 .0);
            tail_normal = self.known(&link.1 .1);
            let (p, (rhs, body)) = *link;
            links.push((is_bind, p, rhs, rhs_normal, cur.span, cur.ty));
            cur = body;
        };
        // the right-hand side of link i is at path [1; i] ++ [0], the tail at [1; n] (one push per
        // link, so that a long chain's paths are not rebuilt quadratically)
        for link in links.iter_mut() {
            if !link.3 {
                self.w.path.push(0);
                let rhs = std::mem::replace(&mut link.2, Expr::gen(ExprKind::Unit));
                link.2 = self.normalise(rhs);
                self.w.path.pop();
            }
            self.w.path.push(1);
        }
        let mut acc = if tail_normal { tail } else { self.node(tail) };
        while let Some((is_bind, p, rhs, _, span, ty)) = links.pop() {
            self.w.path.pop();
            let kind = if is_bind { ExprKind::Bind(Box::new((p, (rhs, acc)))) } else { ExprKind::Let(Box::new((p, (rhs, acc)))) };
            acc = self.at_root(Expr { kind, span, ty });
        }
        self.w.path.truncate(depth);
        acc
    }

    /// A node that is not a let or bind: its children normalised (but those known normal), then the
    /// rules tried at it.
    fn node(&mut self, mut e: Expr) -> Expr {
        if !self.w.visit() {
            return e;
        }
        let mut i = 0u32;
        each_child_mut(&mut e, &mut |c| {
            if !self.known(c) {
                self.w.path.push(i);
                let taken = std::mem::replace(c, Expr::gen(ExprKind::Unit));
                *c = self.normalise(taken);
                self.w.path.pop();
            }
            i += 1;
        });
        self.at_root(e)
    }

    /// The shadow definition with the node at the current path replaced by `new`, cut, to print when
    /// read; None without a shadow, or if the path does not lead to a node (then the shadow is dropped).
    fn program_after(&mut self, new: &Expr) -> Option<Later> {
        let root = self.shadow.as_mut()?;
        let mut at = root;
        for &i in &self.w.path {
            let Some(c) = crate::ir::children_mut(at).into_iter().nth(i as usize) else {
                self.shadow = None;
                return None;
            };
            at = c;
        }
        *at = new.clone();
        let root = self.shadow.as_mut().expect("still there");
        Some(later_cut(root, &self.w.print))
    }

    /// Tries the rules at the root of `e` (whose children are normal), in order; the first that fires
    /// is recorded and its result normalised again.
    fn at_root(&mut self, mut e: Expr) -> Expr {
        if self.w.stopped.is_some() {
            return e;
        }
        let keeping = self.w.trace.steps.len() < self.w.budget.trace_steps;
        #[cfg(test)]
        let keeping = keeping || KEEP_REDEX.with(|k| k.get());
        self.cx.keep = keeping;
        for (k, rule) in self.rules.iter().enumerate() {
            self.cx.changed = None;
            // the redex's span, read before the rule may move parts of the redex out
            let span = e.span;
            let applied = (rule.apply)(&mut e, &mut self.cx);
            if !self.w.walked() {
                // stopped by the rules' walks: the result, if any, replaces the redex (which may have
                // lost parts to the rule); the budget's message replaces the whole anyway
                return applied.unwrap_or(e);
            }
            let Some(mut new) = applied else { continue };
            if self.locate {
                crate::ir::locate(&mut new, span);
            }
            if !self.w.step(k) {
                // stopped (the budget's message replaces the result); the redex may have lost parts
                // to the rule, its result has not
                return new;
            }
            if self.w.trace.steps.len() < self.w.budget.trace_steps {
                let program = self.program_after(&new);
                self.w.trace.steps.push(Step {
                    rule: rule.name,
                    inexact: rule.inexact,
                    def: self.w.def.clone(),
                    path: self.w.path.clone(),
                    span: (!e.span.is_none()).then_some(e.span),
                    before: later_cut(&mut e, &self.w.print),
                    after: later_cut(&mut new, &self.w.print),
                    program,
                });
                if self.w.trace.steps.len() == self.w.budget.trace_steps {
                    self.shadow = None;
                }
            }
            // what the rule kept of the redex is normal: only the rest is normalised again (as the rule
            // says, or as hashing its result against the redex finds)
            let marks = match self.cx.changed.take() {
                Some(changed) => {
                    #[cfg(test)]
                    if keeping {
                        known::check_claim(rule.name, &e, &new, &changed);
                    }
                    match changed {
                        Changed::Nothing => return new,
                        Changed::Only(dirty) => known::Marks::all_but(dirty),
                    }
                }
                None => match known::Normal::below(&e).marks(&new) {
                    Some(marks) => marks,
                    None => return new,
                },
            };
            self.marks.push(marks);
            let out = self.normalise(new);
            self.marks.pop();
            return out;
        }
        e
    }
}

/// Rewrites each child of `e` by `f`, in `ir::each_child` order, with its index on the path meanwhile.
fn map_children<S>(s: &mut S, e: &mut Expr, path: fn(&mut S) -> &mut Vec<u32>, f: fn(&mut S, Expr) -> Expr) {
    let mut i = 0u32;
    each_child_mut(e, &mut |c| {
        path(s).push(i);
        let taken = std::mem::replace(c, Expr::gen(ExprKind::Unit));
        *c = f(s, taken);
        path(s).pop();
        i += 1;
    });
}

/// The located message for a budget (`which`: "steps" or "visits") that ran out.
fn budget_error(w: &Walk, which: &str, span: Span) -> Diagnostic {
    let limit = if which == "steps" { w.budget.steps } else { w.budget.visits };
    let walked = if w.walked > 0 { format!(" (and {} nodes walked by the rules, {WALKED_PER_VISIT} a visit)", w.walked) } else { String::new() };
    Diagnostic::error(
        span,
        format!("stopped: the rewrite {which} budget ({limit}) ran out after {} rule applications and {} node visits{walked}", w.trace.taken, w.visits),
    )
}

/// How much of a redex a step prints: its first `STEP_NODES` nodes in pre-order (a screenful), at most
/// `STEP_DEPTH` deep; the rest is shown as `…`. A step near the top of a program has the whole
/// program as its redex, and printing it whole at every kept step was most of a rewrite's time (the
/// quaternion's partial evaluation: a third), for text the page cuts to a few thousand characters.
const STEP_NODES: usize = 250;
const STEP_DEPTH: usize = 40;

/// `e` printed with the subterms past `STEP_NODES`/`STEP_DEPTH` cut to `…`: the subterms are moved
/// out, the rest printed, and the subterms moved back (no copy of the redex).
pub fn print_cut(e: &mut Expr, o: &PrintOptions) -> String {
    print_cut_to(e, o, STEP_NODES, STEP_DEPTH)
}

/// `e` cut as `print_cut` cuts it, copied, to print when read.
pub fn later_cut(e: &mut Expr, o: &PrintOptions) -> Later {
    Later::expr(cut_copy(e, STEP_NODES, STEP_DEPTH), *o)
}

/// A copy of `e` cut as `print_cut_to` cuts it (only the kept nodes are copied).
pub fn cut_copy(e: &mut Expr, nodes: usize, depth: usize) -> Expr {
    let mut stash = vec![];
    let mut left = nodes;
    cut(e, &mut left, 1, depth, &mut stash);
    let copy = e.clone();
    if !stash.is_empty() {
        uncut(e, &mut stash.into_iter());
    }
    copy
}

/// `print_cut` with other limits: `nodes` in pre-order, at most `depth` deep.
pub fn print_cut_to(e: &mut Expr, o: &PrintOptions, nodes: usize, depth: usize) -> String {
    let mut stash = vec![];
    let mut left = nodes;
    cut(e, &mut left, 1, depth, &mut stash);
    if stash.is_empty() {
        return print_expr(e, o);
    }
    let text = print_expr(e, o);
    let mut back = stash.into_iter();
    uncut(e, &mut back);
    text
}

fn is_hole(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Builtin(b) if &**b == HOLE)
}

const HOLE: &str = "…";

fn cut(e: &mut Expr, left: &mut usize, depth: usize, max_depth: usize, stash: &mut Vec<Expr>) {
    if *left == 0 || depth > max_depth {
        let hole = Expr { kind: ExprKind::Builtin(HOLE.into()), span: e.span, ty: e.ty.clone() };
        stash.push(std::mem::replace(e, hole));
        return;
    }
    *left -= 1;
    each_child_mut(e, &mut |c| cut(c, left, depth + 1, max_depth, stash));
}

/// Puts the stashed subterms back, visiting the holes in the order `cut` made them.
fn uncut(e: &mut Expr, back: &mut std::vec::IntoIter<Expr>) {
    if is_hole(e) {
        if let Some(x) = back.next() {
            *e = x;
        }
        return;
    }
    each_child_mut(e, &mut |c| uncut(c, back));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::*;
    use crate::ir::{Name, Prim};

    fn is_real(e: &Expr, v: f64) -> bool {
        matches!(e.kind, ExprKind::Real(r) if r == v)
    }

    /// `e + 0.0 → e` and `0.0 * e → 0.0` (inexact: e may be NaN or ∞), and folding `r1 + r2`.
    fn rules() -> Vec<Rule> {
        vec![
            Rule {
                name: "add-zero",
                inexact: false,
                apply: |e, _| match &e.kind {
                    ExprKind::Prim(Prim::Add, xs) if is_real(&xs[1], 0.0) => Some(xs[0].clone()),
                    _ => None,
                },
            },
            Rule {
                name: "zero-mul",
                inexact: true,
                apply: |e, _| match &e.kind {
                    ExprKind::Prim(Prim::Mul, xs) if is_real(&xs[0], 0.0) => Some(real(0.0)),
                    _ => None,
                },
            },
            Rule {
                name: "fold-add",
                inexact: false,
                apply: |e, _| match &e.kind {
                    ExprKind::Prim(Prim::Add, xs) => match (&xs[0].kind, &xs[1].kind) {
                        (ExprKind::Real(a), ExprKind::Real(b)) => Some(real(a + b)),
                        _ => None,
                    },
                    _ => None,
                },
            },
        ]
    }

    fn x() -> Name {
        Name::new("x", 1)
    }

    #[test]
    fn innermost_until_no_rule_applies_with_a_trace() {
        // (x + (0.0 * x)) + (1.0 + 2.0)  →  x + 3.0
        let e = add(add(var(&x()), mul(real(0.0), var(&x()))), add(real(1.0), real(2.0)));
        let mut fr = Fresh { next_id: 10 };
        let (out, tr) = normalise(e, &rules(), &mut fr, Budget::default()).unwrap();
        assert_eq!(print_expr(&out, &PrintOptions::ascii()), "x + 3.0");
        let names: Vec<&str> = tr.steps.iter().map(|s| s.rule).collect();
        assert_eq!(names, ["zero-mul", "add-zero", "fold-add"]);
        assert_eq!(tr.steps[0].path, vec![0, 1], "0.0 * x is the right child of the left child");
        assert!(tr.steps[0].inexact && !tr.steps[1].inexact);
        assert_eq!(tr.steps[2].before.text(), "1.0 + 2.0");
        assert_eq!(tr.steps[2].after.text(), "3.0");
        assert_eq!(tr.per_rule, vec![("add-zero", 1), ("zero-mul", 1), ("fold-add", 1)]);
        // as the page's stepper shows it: the rule (inexact ones marked), the redex and its result
        let mut st = tr.stepper();
        st.iter_mut().for_each(|s| s.materialise());
        assert_eq!((st[0].kind.as_str(), st[1].kind.as_str()), ("zero-mul ≈", "add-zero"));
        assert_eq!(st[2].note, "1.0 + 2.0  ⟶  3.0");
    }

    #[test]
    fn a_big_redex_is_printed_cut_and_left_whole() {
        // a sum of 2000 terms: the step prints its start and `…`, and the term is unchanged after
        let mut e = var(&x());
        for _ in 0..2000 {
            e = add(e, real(1.0));
        }
        let whole = print_expr(&e, &PrintOptions::ascii());
        let mut cut_e = e.clone();
        let text = print_cut(&mut cut_e, &PrintOptions::ascii());
        assert!(text.contains('…') && text.len() < whole.len() / 5, "{} of {}", text.len(), whole.len());
        assert_eq!(print_expr(&cut_e, &PrintOptions::ascii()), whole);
        let mut small = add(var(&x()), real(1.0));
        assert_eq!(print_cut(&mut small, &PrintOptions::ascii()), "x + 1.0");
    }

    #[test]
    fn a_result_is_normalised_again() {
        // ((x + 0.0) + 0.0) + 0.0 takes three steps, each on the result of the one before
        let e = add(add(add(var(&x()), real(0.0)), real(0.0)), real(0.0));
        let mut fr = Fresh { next_id: 10 };
        let (out, tr) = normalise(e, &rules(), &mut fr, Budget::default()).unwrap();
        assert_eq!(print_expr(&out, &PrintOptions::ascii()), "x");
        assert_eq!(tr.taken, 3);
    }

    #[test]
    fn long_let_chains_do_not_recurse_and_budgets_stop_with_a_message() {
        // the IR's derived Clone and Drop recurse along the chain (not the engine): a big stack for those
        crate::limits::run_with_stack(long_let_chain);
    }

    fn long_let_chain() {
        // let a1 = x + 0.0 in let a2 = a1 + 0.0 in ... 100,000 links
        let n = 100_000;
        let names: Vec<Name> = (0..=n).map(|i| Name::new("a", i as u32 + 2)).collect();
        let mut e = var(&names[n]);
        for i in (1..=n).rev() {
            e = let_(pvar(&names[i]), add(var(&names[i - 1]), real(0.0)), e);
        }
        let mut fr = Fresh { next_id: n as u32 + 10 };
        let (out, tr) = normalise(e.clone(), &rules(), &mut fr, Budget::default()).unwrap();
        assert_eq!(tr.taken, n as u64);
        assert_eq!(tr.steps.len(), 2_000, "the trace keeps the first steps only");
        assert_eq!(tr.steps[1].path, vec![1, 0], "the second link's right-hand side");
        let mut links = 0;
        let mut cur = &out;
        while let ExprKind::Let(rhs_body_x) = &cur.kind {
            let (_, rhs_body) = &**rhs_body_x;
            let (rhs, body) = rhs_body;
            assert!(matches!(rhs.kind, ExprKind::Var(_)));
            links += 1;
            cur = body;
        }
        assert_eq!(links, n);
        let err = normalise(e, &rules(), &mut fr, Budget { steps: 1000, ..Budget::default() }).unwrap_err();
        assert!(err.message.contains("rewrite steps budget (1000)"), "{}", err.message);
    }
}
