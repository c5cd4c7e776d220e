//! Hindley–Milner type inference over the IR, with let-polymorphism for top-level definitions
//! (inferred one strongly connected group at a time) and arithmetic overloaded on R and Z.
//!
//! It fills in `Expr::ty` everywhere and `Def::scheme`, and is run on the source and, with the
//! stage's builtins, on every stage's output: that is how a stage's type translation is checked.

use crate::diag::{Diagnostic, Span};
use crate::interp::Builtins;
use crate::ir::*;
use crate::prims::{Base, Typing};
use crate::value::Value;
use std::collections::BTreeSet;
use rustc_hash::{FxHashMap as HashMap};

/// Infers and annotates the types of a whole program.
pub fn check_program(p: &mut Program, builtins: &Builtins) -> Result<(), Diagnostic> {
    check_program_at(p, builtins, None)
}

/// Like `check_program`; `main_input`, the value `main` will be run on (the program's `input` or
/// `--at`), fixes the parts of main's argument type that main's body leaves open (an input component
/// main never uses, a comparison operand), before they would default to R.
pub fn check_program_at(p: &mut Program, builtins: &Builtins, main_input: Option<&Value>) -> Result<(), Diagnostic> {
    check(p, builtins, main_input.map(Fit::Value), true)
}

/// Like `check_program` with local definitions monomorphic (as before local let-polymorphism) and
/// main at (an instance of) `main`: for whole-program passes whose output must have no type
/// variables (kit/passes): a local used at one type gets that type everywhere inside it.
pub fn check_program_monomorphic(p: &mut Program, main: Option<&Type>) -> Result<(), Diagnostic> {
    check(p, &Builtins::new(), main.map(Fit::Type), false)
}

/// Like `check_program` with main at (an instance of) `main`, from an earlier check: for a source-level
/// rewrite of the user's program (the array chain's lowering), whose locals may stay polymorphic.
pub fn check_program_fitted(p: &mut Program, main: &Type) -> Result<(), Diagnostic> {
    check(p, &Builtins::new(), Some(Fit::Type(main)), true)
}

/// Like `check_program` with each definition named in `stated` at (an instance of) its type there,
/// the types the paper states for a stage's output: for an output whose body leaves main's type
/// open up to its arithmetic's R or Z, which would default to R where the source's was fitted to
/// an integer input (`main x = x * x` on `input 20`: the source is Z → Z, so is forward's output,
/// `D[Z] = Z`).
pub fn check_program_stated(p: &mut Program, builtins: &Builtins, stated: &[(String, Type)]) -> Result<(), Diagnostic> {
    check(p, builtins, Some(Fit::Stated(stated)), true)
}

/// What main's argument is fitted to: a value, or main's type from an earlier check.
enum Fit<'a> {
    Value(&'a Value),
    Type(&'a Type),
    /// Definitions by name at the types given.
    Stated(&'a [(String, Type)]),
}

fn check(p: &mut Program, builtins: &Builtins, fit: Option<Fit>, generalise_locals: bool) -> Result<(), Diagnostic> {
    let mut cx = Cx::new(builtins);
    cx.generalise_locals = generalise_locals;
    for param in &p.params {
        cx.globals.insert(param.name.text.to_string(), Scheme::mono(Type::Int));
    }
    let (nodes, groups) = cx.locals.count_uses(p);
    cx.settling = nodes >= SETTLE_FROM;
    #[cfg(test)]
    if tests::SETTLE_ALL.with(|s| s.get()) {
        cx.settling = true;
    }
    for group in groups {
        // Monomorphic within a group; generalised after it.
        let tys: Vec<Type> = group.iter().map(|_| cx.fresh()).collect();
        for (&i, t) in group.iter().zip(&tys) {
            cx.globals.insert(p.defs[i].name.text.to_string(), Scheme::mono(t.clone()));
        }
        let main_at = group.iter().position(|&i| &*p.defs[i].name.text == "main");
        // before the body, so that a use that disagrees is where the error is
        let fitted: Vec<(usize, &Type)> = match &fit {
            Some(Fit::Type(main)) => main_at.map(|k| (k, *main)).into_iter().collect(),
            Some(Fit::Stated(stated)) => (group.iter().enumerate())
                .filter_map(|(k, &i)| stated.iter().find(|(name, _)| *name == *p.defs[i].name.text).map(|(_, t)| (k, t)))
                .collect(),
            _ => vec![],
        };
        for (k, t) in fitted {
            let mut fresh: HashMap<u32, Type> = HashMap::default();
            let t = rename(t, &mut |v| fresh.entry(v).or_insert_with(|| cx.fresh()).clone());
            cx.unify(&t, &tys[k], p.defs[group[k]].span)?;
        }
        for (&i, t) in group.iter().zip(&tys) {
            let span = p.defs[i].span;
            let found = cx.infer(&mut p.defs[i].body)?;
            cx.unify(t, &found, span)?;
        }
        if let (Some(k), Some(Fit::Value(v))) = (main_at, &fit) {
            cx.fit_input(&tys[k], v);
        }
        // open arithmetic stays open (monomorphic) for a later group to decide: defaulting it to R
        // here typed `def sq x = x * x` R → R, and `sq k` on an integer k failed
        cx.check_numeric(true)?;
        for (&i, t) in group.iter().zip(&tys) {
            let ty = cx.zonk(t);
            let mut vars = BTreeSet::new();
            free_vars(&ty, &mut vars);
            let open = &cx.open_numeric;
            let vars = vars.into_iter().filter(|v| !open.contains(v)).collect();
            let scheme = Scheme { vars, ty };
            cx.globals.insert(p.defs[i].name.text.to_string(), scheme.clone());
            p.defs[i].scheme = Some(scheme);
        }
    }
    cx.default_open_numeric();
    for d in &mut p.defs {
        if let Some(s) = &mut d.scheme {
            s.ty = cx.zonk(&s.ty);
        }
    }
    #[cfg(test)]
    let zonking = !tests::ZONK_OFF.with(|z| z.get());
    #[cfg(not(test))]
    let zonking = true;
    if zonking {
        cx.zonk_exprs(p.defs.iter_mut().map(|d| &mut d.body));
    }
    #[cfg(test)]
    tests::VARIABLES.with(|v| v.set(cx.subst.len()));
    for value in p.input.iter_mut().chain(p.seed.iter_mut()) {
        cx.infer(value)?;
        cx.resolve_numeric()?;
        cx.zonk_expr(value);
    }
    Ok(())
}

/// Unifies `a` and `b` as types (variables on either side); used to compare a stage's output
/// type with the type the paper states.
pub fn unifiable(a: &Type, b: &Type) -> bool {
    let builtins = Builtins::new();
    let mut cx = Cx::new(&builtins);
    let shift = |t: &Type, off: u32| rename(t, &mut |v| Type::Var(v + off));
    let max = max_var(a).max(max_var(b)) + 1;
    cx.subst = Chunked::filled(None, 2 * max as usize);
    cx.levels = Chunked::filled(0, 2 * max as usize);
    let a2 = shift(a, 0);
    let b2 = shift(b, max);
    cx.unify(&a2, &b2, Span::NONE).is_ok()
}

/// Each local binder's type, by its id, while the binder is in scope: a binding is undone when its
/// scope ends (`mark`/`undo`: a let or bind spine's end, a lambda's or a case arm's body), so the
/// table holds the binders in scope, not every binder met (issue 14 item 4: on a 10^5-line program's
/// dualrev/staged output, 20 binders a line, most of them inside one line's `do` blocks; a vector
/// by id of every binder was ~0.6 KB a line at the check's peak). An id bound again inside its own
/// scope (a transform may copy a subterm with its binders) takes its new type until that scope ends.
/// A binder whose uses have all been inferred (`uses`) is let go before its scope ends: a CHAD
/// output is one let spine of ten binders a line, all in scope to its end, and the table and its
/// undo list were ~0.8 KB a line at the check's peak.
#[derive(Default)]
struct Locals {
    types: rustc_hash::FxHashMap<u32, Type>,
    /// The ids bound in scope, innermost last (4 bytes each: most bindings replace none).
    undo: Vec<u32>,
    /// What a binding replaced, by its place in `undo`, innermost last.
    shadowed: Vec<(usize, Type)>,
    /// Each id's uses not yet inferred, from `count_uses` (saturated at 255: kept to its scope's
    /// end; 0: let go, or not counted). Empty where not counted.
    uses: Vec<u8>,
}

impl Locals {
    fn insert(&mut self, id: u32, t: Type) {
        if let Some(prev) = self.types.insert(id, t) {
            self.shadowed.push((self.undo.len(), prev));
        }
        self.undo.push(id);
        #[cfg(test)]
        tests::LOCALS_HELD.with(|m| m.set(m.get().max(self.types.len())));
    }
    fn get(&self, id: u32) -> Option<&Type> {
        self.types.get(&id)
    }
    /// A use of `id` inferred: its binding is let go after its last use. (No use is inferred after
    /// its last, so every look-up finds what it found before.)
    fn used(&mut self, id: u32) {
        let Some(c) = self.uses.get_mut(id as usize) else { return };
        match *c {
            0 | u8::MAX => {}
            1 => {
                *c = 0;
                self.types.remove(&id);
            }
            _ => *c -= 1,
        }
    }
    /// The local variables' uses in `p`'s definitions, by id, for `used`; none counted where the
    /// ids are sparse (a table by id would be larger than the program). Returns the definitions'
    /// node count and their strongly connected components in dependency order (`tarjan`), found in the same walk: three walks of a stage's
    /// output before inference (the ids' largest, their uses, the globals used) were ~9 % of its
    /// check (dualrev/cayley's, issue 14 item 4, session 45).
    fn count_uses(&mut self, p: &Program) -> (usize, Vec<Vec<usize>>) {
        let index: HashMap<&str, usize> = p.defs.iter().enumerate().map(|(i, d)| (&*d.name.text, i)).collect();
        let (mut nodes, mut max) = (0usize, 0u32);
        // (counted in place up to the bound the table may have so far; ids past it kept aside until
        // the count of nodes, and so the bound, is known)
        let (mut uses, mut aside) = (Vec::<u8>::new(), Vec::<u32>::new());
        let mut deps: Vec<Vec<usize>> = Vec::with_capacity(p.defs.len());
        let mut stack: Vec<&Expr> = vec![];
        for d in &p.defs {
            let mut out = BTreeSet::new();
            stack.push(&d.body);
            while let Some(e) = stack.pop() {
                nodes += 1;
                if let ExprKind::Var(n) = &e.kind {
                    if n.is_global() {
                        if let Some(&j) = index.get(&*n.text) {
                            out.insert(j);
                        }
                    } else {
                        let id = n.id as usize;
                        max = max.max(n.id);
                        if id >= uses.len() && id <= sparse_bound(nodes) {
                            uses.resize((id + 1).max(2 * uses.len()).min(sparse_bound(nodes) + 1), 0);
                        }
                        match uses.get_mut(id) {
                            Some(c) => *c = c.saturating_add(1),
                            None => aside.push(n.id),
                        }
                    }
                }
                each_child(e, &mut |c| stack.push(c));
            }
            deps.push(out.into_iter().collect());
        }
        if max as usize <= sparse_bound(nodes) {
            uses.resize(max as usize + 1, 0);
            // (grown by doubling: its room past the ids given back, a byte an id of a long output)
            uses.shrink_to_fit();
            for id in aside {
                uses[id as usize] = uses[id as usize].saturating_add(1);
            }
            self.uses = uses;
        }
        (nodes, tarjan(&deps))
    }
    /// The bindings made so far, for `undo`.
    fn mark(&self) -> usize {
        self.undo.len()
    }
    /// Ends the scope of the bindings made since `mark`, innermost first.
    fn undo(&mut self, mark: usize) {
        while self.undo.len() > mark {
            let Some(id) = self.undo.pop() else { break };
            match self.shadowed.last() {
                Some((at, _)) if *at == self.undo.len() => {
                    if let Some((_, t)) = self.shadowed.pop() {
                        self.types.insert(id, t);
                    }
                }
                _ => {
                    self.types.remove(&id);
                }
            }
        }
        if self.undo.capacity() > 64 && self.undo.len() < self.undo.capacity() / 4 {
            self.undo.shrink_to(self.undo.capacity() / 2);
        }
        if self.types.capacity() > 64 && self.types.len() < self.types.capacity() / 4 {
            self.types.shrink_to(self.types.capacity() / 2);
        }
    }
}

/// The largest id `Locals::count_uses` keeps a table by id for, in a program of `nodes` nodes.
fn sparse_bound(nodes: usize) -> usize {
    4 * nodes + 4096
}

/// What zonking a whole program remembers: each bound variable's zonked type, and each compound
/// type it has zonked (by identity: nodes share their types, e.g. every `let` of a chain has its
/// body's), so that a type shared by many nodes is walked once and its zonked copy shared too.
struct Memo {
    /// The substitution itself, moved out of `Cx` for the walk: a variable's binding is replaced by
    /// its zonked form once made (`done`), which is the same substitution (path compression), and
    /// is given back after. A second vector of zonked bindings beside it was 24 bytes per variable
    /// at the check's peak (issue 14: a stage's output of 1.7 million variables).
    vars: Chunked<Option<Type>>,
    /// Which of `vars` are zonked already, a bit each.
    done: Vec<u64>,
    /// A compound type held more than once (`identity`), by its parts (the key keeps them, so
    /// that their addresses are not reused while they are keys) → its zonked form (None:
    /// unchanged). Only types held more than once are kept: an entry for every node's own type was
    /// most of the check's peak (issue 14: 300 MB on the dualrev/staged output of a 30,000-line
    /// program).
    seen: rustc_hash::FxHashMap<ByParts<Type>, Option<Type>>,
    /// `seen`'s size at which its dead entries are swept out (`Memo::sweep`).
    sweep_at: usize,
    /// Every compound type the walk makes, made once (hash-consing): a zonked type equal to one
    /// made before is that one, so the nodes of a program share their types' allocations, e.g. the
    /// `R ⊸ Staged` of every backpropagator and the `(R, R)` of every dual number (issue 14: each
    /// its own allocation made the typed output of dualrev/staged twice its untyped size).
    made: Made,
}

/// `Memo::seen`'s least size for a sweep.
const SWEEP_MIN: usize = 1 << 12;

/// The most entries a sweep leaves in the zonk's memo (`Memo::entries`); past it the memo starts
/// again empty (`Memo::sweep`).
const ZONK_KEPT: usize = 1 << 16;

/// `ZONK_KEPT` (a test's own, where it sets one).
fn zonk_kept() -> usize {
    #[cfg(test)]
    if let k @ 1.. = tests::ZONK_KEPT_AT.with(|k| k.get()) {
        return k;
    }
    ZONK_KEPT
}

/// The least size for a sweep: `SWEEP_MIN`, or a test's smaller `ZONK_KEPT`.
fn sweep_min() -> usize {
    SWEEP_MIN.min(zonk_kept())
}

impl Memo {
    /// Drops the entries of `seen` whose key no one else holds: no type met later can have those
    /// parts, since the parts are that key's own allocation. The walk replaces each node's type, so
    /// most of what inference built dies behind it, and these entries were what kept it alive
    /// (issue 14: at the check's peak on the dualrev/tape output of a 10^4-line program, the map
    /// was 6.5 MB and the inference types it held ~10 MB). Swept again once the live entries have
    /// doubled, so the sweeps cost O(1) an entry.
    ///
    /// Where more than `ZONK_KEPT` entries are still held (by nodes the walk has passed, each a type
    /// of its own: chad/naive-ho's `EV Γ` types, several a source line), both maps start again
    /// empty: they remember answers, they do not make them (a type met again is walked again, and
    /// `made` gives it the allocation it had), and kept whole they were the check's peak, ~90 MB
    /// of maps on a 10^5-line program (issue 14 item 4, session 43). `made` is kept: emptied too,
    /// the equal types made on either side of it stayed two allocations (+13 MiB after that check).
    /// Not within a node's walk: a type shared inside itself is still walked once.
    fn sweep(&mut self) {
        self.seen.retain(|k, _| held_elsewhere(&k.0));
        self.made.canonical.retain(|k, _| held_elsewhere(&k.0));
        if self.entries() >= zonk_kept() {
            self.seen = Default::default();
            self.made.canonical = Default::default();
        }
        self.sweep_at = sweep_min().max(2 * self.entries());
    }

    /// The entries a sweep may drop.
    fn entries(&self) -> usize {
        self.seen.len() + self.made.canonical.len()
    }
}

/// Whether a compound type's allocation has a holder besides `t` itself.
fn held_elsewhere(t: &Type) -> bool {
    match t {
        Type::Tuple(ts) => ts.strong_count() > 1,
        Type::Con(c) => std::rc::Rc::strong_count(c) > 1,
        Type::Sum(ab) | Type::Fun(ab) | Type::Lin(ab) => std::rc::Rc::strong_count(ab) > 1,
        _ => true,
    }
}

/// The compound types a zonk has made, each by its parts (`ByParts`): parts are made first, so
/// equal parts are the same allocation and equal parts mean equal types. Each entry is the type
/// itself, which holds the allocations its key is made of (8 bytes a tuple or a pair, 40 a
/// constructor; keys of parts' addresses beside the types were 80–90 bytes an entry).
#[derive(Default)]
struct Made {
    tuples: rustc_hash::FxHashSet<ByParts<Types>>,
    /// By name (its text: `Type::con` shares one allocation a name, but a constructor may be built
    /// from any `Rc<str>`) and arguments.
    cons: rustc_hash::FxHashMap<ByParts<TyCon>, std::rc::Rc<TyCon>>,
    /// The two sides of a `Sum`, `Fun` or `Lin` (one allocation whichever of the three holds it).
    pairs: rustc_hash::FxHashSet<ByParts<std::rc::Rc<(Type, Type)>>>,
    /// `canon`'s answer for a compound type held more than once (`identity`; the key keeps its
    /// parts, as `Memo::seen`'s): a node's type is a part of its parent's, so without this each
    /// node walked its whole type again (issue 14: a tuple nested n deep, n²/2 steps; 4,000 deep took
    /// 2 s in forward alone). Swept with `Memo::seen`.
    canonical: rustc_hash::FxHashMap<ByParts<Type>, Option<Type>>,
}

/// What identifies a type given its parts' allocations: its variant, then a leaf's nothing, a
/// variable's number, or the pointers it holds.
fn parts(t: &Type) -> (u8, usize, usize) {
    use std::rc::Rc;
    let ptr = |p: &Rc<(Type, Type)>| Rc::as_ptr(p) as usize;
    match t {
        Type::Real => (0, 0, 0),
        Type::Int => (1, 0, 0),
        Type::Bool => (2, 0, 0),
        Type::Unit => (3, 0, 0),
        Type::Unknown => (4, 0, 0),
        Type::Var(v) => (5, *v as usize, 0),
        Type::Tuple(ts) => (6, ts.as_ptr() as usize, 0),
        Type::Con(c) => (7, Rc::as_ptr(c) as usize, 0),
        Type::Sum(ab) => (8, ptr(ab), 0),
        Type::Fun(ab) => (9, ptr(ab), 0),
        Type::Lin(ab) => (10, ptr(ab), 0),
    }
}

/// A type (or a tuple's or constructor's parts) hashed and compared by `parts`, not structurally.
struct ByParts<T>(T);

impl std::hash::Hash for ByParts<Type> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        parts(&self.0).hash(h)
    }
}
impl PartialEq for ByParts<Type> {
    fn eq(&self, other: &Self) -> bool {
        parts(&self.0) == parts(&other.0)
    }
}
impl Eq for ByParts<Type> {}

impl std::hash::Hash for ByParts<Types> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        h.write_usize(self.0.len());
        self.0.iter().for_each(|t| parts(t).hash(h));
    }
}
impl PartialEq for ByParts<Types> {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len() && self.0.iter().zip(other.0.iter()).all(|(a, b)| parts(a) == parts(b))
    }
}
impl Eq for ByParts<Types> {}

impl std::hash::Hash for ByParts<std::rc::Rc<(Type, Type)>> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (parts(&self.0 .0), parts(&self.0 .1)).hash(h)
    }
}
impl PartialEq for ByParts<std::rc::Rc<(Type, Type)>> {
    fn eq(&self, other: &Self) -> bool {
        parts(&self.0 .0) == parts(&other.0 .0) && parts(&self.0 .1) == parts(&other.0 .1)
    }
}
impl Eq for ByParts<std::rc::Rc<(Type, Type)>> {}

impl std::hash::Hash for ByParts<TyCon> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.name.hash(h);
        h.write_usize(self.0.args.len());
        self.0.args.iter().for_each(|t| parts(t).hash(h));
    }
}
impl PartialEq for ByParts<TyCon> {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.0, &other.0);
        a.name == b.name && a.args.len() == b.args.len() && a.args.iter().zip(b.args.iter()).all(|(x, y)| parts(x) == parts(y))
    }
}
impl Eq for ByParts<TyCon> {}

/// A key of `Made`'s tables given by its parts, borrowed (`Made::pair_from` and the like): a type
/// is looked up before it is allocated, and most are found (the same shapes on every line), so
/// the allocation made for the look-up and dropped again was most of what settling a part cost.
/// Hashed and compared as the tables' own keys (`ByParts`).
trait PairKey {
    fn sides(&self) -> (&Type, &Type);
}
trait TupleKey {
    fn items(&self) -> &[Type];
}
trait ConKey {
    fn name_args(&self) -> (&str, &[Type]);
}

impl PairKey for ByParts<std::rc::Rc<(Type, Type)>> {
    fn sides(&self) -> (&Type, &Type) {
        (&self.0 .0, &self.0 .1)
    }
}
impl PairKey for (&Type, &Type) {
    fn sides(&self) -> (&Type, &Type) {
        (self.0, self.1)
    }
}
impl<'a> std::borrow::Borrow<dyn PairKey + 'a> for ByParts<std::rc::Rc<(Type, Type)>> {
    fn borrow(&self) -> &(dyn PairKey + 'a) {
        self
    }
}
impl std::hash::Hash for dyn PairKey + '_ {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let (a, b) = self.sides();
        (parts(a), parts(b)).hash(h)
    }
}
impl PartialEq for dyn PairKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        let ((a, b), (c, d)) = (self.sides(), other.sides());
        parts(a) == parts(c) && parts(b) == parts(d)
    }
}
impl Eq for dyn PairKey + '_ {}

impl TupleKey for ByParts<Types> {
    fn items(&self) -> &[Type] {
        &self.0
    }
}
impl TupleKey for &[Type] {
    fn items(&self) -> &[Type] {
        self
    }
}
impl<'a> std::borrow::Borrow<dyn TupleKey + 'a> for ByParts<Types> {
    fn borrow(&self) -> &(dyn TupleKey + 'a) {
        self
    }
}
impl std::hash::Hash for dyn TupleKey + '_ {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let ts = self.items();
        h.write_usize(ts.len());
        ts.iter().for_each(|t| parts(t).hash(h));
    }
}
impl PartialEq for dyn TupleKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.items(), other.items());
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| parts(x) == parts(y))
    }
}
impl Eq for dyn TupleKey + '_ {}

impl ConKey for ByParts<TyCon> {
    fn name_args(&self) -> (&str, &[Type]) {
        (&self.0.name, &self.0.args)
    }
}
impl ConKey for (&str, &[Type]) {
    fn name_args(&self) -> (&str, &[Type]) {
        (self.0, self.1)
    }
}
impl<'a> std::borrow::Borrow<dyn ConKey + 'a> for ByParts<TyCon> {
    fn borrow(&self) -> &(dyn ConKey + 'a) {
        self
    }
}
impl std::hash::Hash for dyn ConKey + '_ {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // (as `ByParts<TyCon>`'s: an `Rc<str>` hashes as its `str`)
        let (name, args) = self.name_args();
        name.hash(h);
        h.write_usize(args.len());
        args.iter().for_each(|t| parts(t).hash(h));
    }
}
impl PartialEq for dyn ConKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        let ((n, a), (m, b)) = (self.name_args(), other.name_args());
        n == m && a.len() == b.len() && a.iter().zip(b).all(|(x, y)| parts(x) == parts(y))
    }
}
impl Eq for dyn ConKey + '_ {}

impl Made {
    /// `pair` of `(a, b)`, allocated only when its parts are new.
    fn pair_from(&mut self, a: Type, b: Type) -> std::rc::Rc<(Type, Type)> {
        if let Some(made) = self.pairs.get(&(&a, &b) as &dyn PairKey) {
            return made.0.clone();
        }
        let ab = std::rc::Rc::new((a, b));
        self.pairs.insert(ByParts(ab.clone()));
        ab
    }
    /// `tuple` of `ts`, allocated only when its parts are new.
    fn tuple_from(&mut self, ts: &[Type]) -> Type {
        if let Some(made) = self.tuples.get(&ts as &dyn TupleKey) {
            return Type::Tuple(made.0.clone());
        }
        self.tuple(ts.to_vec().into())
    }
    /// `con` of `name args`, allocated only when its parts are new.
    fn con_from(&mut self, name: &std::rc::Rc<str>, args: &[Type]) -> Type {
        if let Some(made) = self.cons.get(&(&**name, args) as &dyn ConKey) {
            return Type::Con(made.clone());
        }
        self.con(name, args.into(), None)
    }

    /// The tuple of `ts`'s parts, made once: `ts` itself when its parts are new.
    fn tuple(&mut self, ts: Types) -> Type {
        let key = ByParts(ts);
        if let Some(made) = self.tuples.get(&key) {
            return Type::Tuple(made.0.clone());
        }
        let ts = key.0.clone();
        self.tuples.insert(key);
        Type::Tuple(ts)
    }
    /// The constructor `name args`, made once: `given` (an allocation of these parts) when they
    /// are new, else a new allocation.
    fn con(&mut self, name: &std::rc::Rc<str>, args: std::rc::Rc<[Type]>, given: Option<&std::rc::Rc<TyCon>>) -> Type {
        let key = ByParts(TyCon { name: name.clone(), args });
        if let Some(made) = self.cons.get(&key) {
            return Type::Con(made.clone());
        }
        let made = given.cloned().unwrap_or_else(|| std::rc::Rc::new(key.0.clone()));
        self.cons.insert(key, made.clone());
        Type::Con(made)
    }
    /// The pair of `ab`'s parts, made once: `ab` itself when its parts are new.
    fn pair(&mut self, ab: std::rc::Rc<(Type, Type)>) -> std::rc::Rc<(Type, Type)> {
        let key = ByParts(ab);
        if let Some(made) = self.pairs.get(&key) {
            return made.0.clone();
        }
        let ab = key.0.clone();
        self.pairs.insert(key);
        ab
    }

    /// `t` as the allocation made for a type of its parts, its parts first (the first of its kind is
    /// kept as made, not copied): None where `t` is that allocation already, or a leaf or variable.
    /// The zonk leaves a type without variables as inference built it, one allocation per node
    /// (`M R` of each `pure`, `(R, R)` of each pair of literals): this shares them as well
    /// (issue 14: 0.8 KB a line of krawiec/monadic's typed output).
    fn canon(&mut self, t: &Type) -> Option<Type> {
        let key = identity(t);
        if let Some(c) = key.as_ref().and_then(|k| self.canonical.get(k)) {
            return c.clone();
        }
        let c = self.canon_walk(t);
        if let Some(k) = key {
            self.canonical.insert(k, c.clone());
        }
        c
    }

    /// `canon` of `t`, walked.
    fn canon_walk(&mut self, t: &Type) -> Option<Type> {
        #[cfg(test)]
        tests::walked();
        use std::rc::Rc;
        // The made one where it is not `t` (a type already made has its parts made: not walked again).
        let other = |made: Type| (parts(&made) != parts(t)).then_some(made);
        match t {
            Type::Tuple(ts) => {
                if self.tuples.get(&ByParts(ts.clone())).is_some_and(|m| Types::ptr_eq(&m.0, ts)) {
                    return None;
                }
                let parts = self.canon_all(ts);
                other(match parts {
                    Some(parts) => self.tuple_from(&parts),
                    None => self.tuple(ts.clone()),
                })
            }
            Type::Con(c) => {
                if self.cons.get(&ByParts(TyCon { name: c.name.clone(), args: c.args.clone() })).is_some_and(|m| Rc::ptr_eq(m, c)) {
                    return None;
                }
                let args = self.canon_all(&c.args);
                let given = args.is_none().then_some(c);
                other(self.con(&c.name, args.map_or_else(|| c.args.clone(), Rc::from), given))
            }
            Type::Sum(ab) | Type::Fun(ab) | Type::Lin(ab) => {
                if self.pairs.get(&ByParts(ab.clone())).is_some_and(|m| Rc::ptr_eq(&m.0, ab)) {
                    return None;
                }
                let (a, b) = &**ab;
                let made = match (self.canon(a), self.canon(b)) {
                    (None, None) => self.pair(ab.clone()),
                    (na, nb) => self.pair_from(na.unwrap_or_else(|| a.clone()), nb.unwrap_or_else(|| b.clone())),
                };
                other(with_pair(t, made))
            }
            _ => None,
        }
    }

    /// `canon` of each of `ts`: None when none changes.
    fn canon_all(&mut self, ts: &[Type]) -> Option<Vec<Type>> {
        let (first, z) = ts.iter().enumerate().find_map(|(i, t)| self.canon(t).map(|z| (i, z)))?;
        let mut out: Vec<Type> = Vec::with_capacity(ts.len());
        out.extend_from_slice(&ts[..first]);
        out.push(z);
        out.extend(ts[first + 1..].iter().map(|t| self.canon(t).unwrap_or_else(|| t.clone())));
        Some(out)
    }
}

/// `t` (a `Sum`, `Fun` or `Lin`) with its two sides `ab`.
fn with_pair(t: &Type, ab: std::rc::Rc<(Type, Type)>) -> Type {
    match t {
        Type::Sum(_) => Type::Sum(ab),
        Type::Fun(_) => Type::Fun(ab),
        _ => Type::Lin(ab),
    }
}

/// Whether a compound type may be met again by its parts: None for a leaf or a variable, which
/// `Memo::vars` covers, and for a type held once (a child pointer no other type holds): no other
/// type can have its parts.
fn identity(t: &Type) -> Option<ByParts<Type>> {
    let compound = matches!(t, Type::Tuple(_) | Type::Con(_) | Type::Sum(_) | Type::Fun(_) | Type::Lin(_));
    (compound && held_elsewhere(t)).then(|| ByParts(t.clone()))
}

struct Cx<'b> {
    subst: Chunked<Option<Type>>,
    /// The let-nesting level each variable was made at, lowered when it is unified with an older
    /// one: a variable deeper than the current level is free in no enclosing binding's type, so it
    /// may be generalised (Rémy's levels; the efficient form of HM's "not free in the environment").
    levels: Chunked<u32>,
    /// The current level: 0 for top-level definitions, one more inside each generalisable `let`'s
    /// right-hand side.
    level: u32,
    /// Type variables of arithmetic operands, which must end up R or Z (defaulting to R).
    numeric: Vec<(Type, Span, Prim)>,
    /// Variables of arithmetic operands that a finished top-level group left open: monomorphic, and
    /// R or Z, decided by a later group's use (`def sq x = x * x` used as `sq k` on an integer k is
    /// Z → Z) or defaulted to R after the whole program; `unify` refuses anything else for them.
    open_numeric: rustc_hash::FxHashSet<u32>,
    builtins: &'b Builtins,
    globals: HashMap<String, Scheme>,
    /// Each local binder's type, by its id (ids are dense: `Fresh` and the resolver count up).
    locals: Locals,
    /// Local binders generalised like top-level definitions (`let comp f g x = f (g x) in ...`).
    poly: HashMap<u32, Scheme>,
    /// Whether local `let`s of functions are generalised (always, but for `check_program_monomorphic`).
    generalise_locals: bool,
    /// Nodes inferred, for the memory budget's check every `MEMORY_CHECK` of them (a stage's output
    /// can be large enough to take the whole budget while it is checked).
    nodes: u32,
    /// The span of the last located node inferred: a budget stop at a generated node (most of a
    /// stage's output) is reported there, at the source text it was made from, not without line:col.
    located: Span,
    /// The compound types inference has made for nodes (`M a` of a `pure`, a tuple's, a lambda's),
    /// each made once by its parts (`Made`, as the zonk's), so that the nodes of a long program
    /// share them until the zonk replaces them: `pure (x * y, Var u)` on every line of a translation
    /// made its `(R, Delta)` and `M (R, Delta)` anew, ~1 KB a line of krawiec/monadic's output held
    /// until the zonk, and the check's growth was what stopped it at the memory budget on a 10^5-line
    /// program (issue 14 item 4). Emptied at `RECENT` entries, so that types met once (with fresh
    /// variables) cost a bounded table, and types met on every line are made again once.
    recent: Made,
    /// A zonk's variables already followed, during one `zonk_changed`: a variable is a part of many
    /// types (bindings share it), and a walk that followed it at each meeting was quadratic on a
    /// tuple nested n deep (issue 14).
    zonked: std::cell::RefCell<rustc_hash::FxHashMap<u32, Type>>,
    /// The let/bind spines being inferred (`infer`'s loops with a link), for `settle_nodes`.
    spines: u32,
    /// `settle_nodes`' memo of one link, empty between links (kept for its capacity).
    settled: rustc_hash::FxHashMap<ByParts<Type>, Type>,
    /// Whether types are settled as inference goes (`settle`, `settle_nodes`): only in a program of
    /// `SETTLE_FROM` nodes or more.
    settling: bool,
    /// `settle`'s answers for the types whose walk met no unbound variable and ran to its end
    /// (`closed`), by identity, with the parts the walk took: the substitution only grows, so such a
    /// walk gives the same answer whenever it is made again, from any budget of that many parts or
    /// more. Nodes and instantiated schemes share their parts (`recent`, `rename`), and each settle
    /// walked them again: on dualrev/cayley's output settling was ~60 % of the check (issue 14 item 4,
    /// session 42). Emptied with `recent`, whose allocations its answers are.
    closed: rustc_hash::FxHashMap<ByParts<Type>, (Type, u32, smallvec::SmallVec<[u32; OPEN_KEPT]>)>,
    /// The unbound variables the current `settle` has met, for `closed`.
    open_met: Vec<u32>,
    /// How many times `recent` has been emptied (`reset_recent`).
    recent_resets: u32,
    /// `apply_builtin`'s head and result types by builtin and instance (the parts of the argument's
    /// type its quantified variables stand for, by identity; the entry keeps them and the builtin,
    /// so that their addresses are not reused while they are keys). Emptied with `recent`, whose
    /// allocations its settled types are, and when bindings are undone (`fit_input`).
    applied: rustc_hash::FxHashMap<(usize, smallvec::SmallVec<[(u8, usize, usize); 4]>), Applied2>,
}

/// An entry of `Cx::applied`: the builtin, the instance, the head's type and the result's.
type Applied2 = (std::rc::Rc<crate::interp::Builtin>, smallvec::SmallVec<[Type; 4]>, Type, Type);

/// What `Cx::apply_builtin` found: the application's type (the head's set), or the head's instance
/// and the argument's type, to be unified.
enum Applied {
    Matched(Type),
    Instantiated(Type, Type),
}

/// The most parts of an argument's type `Cx::match_scheme` walks (a builtin's parameter is a few
/// dozen parts at most, as `SETTLE_PARTS` says; a variable's part is not walked, but for `same`).
const MATCH_PARTS: u32 = 64;

/// `Cx::applied`'s size at which it is emptied: an instance met on every line (`Staged c` of each
/// `SCall d`) is met again within a few entries, and the rest (`counted`'s `a → a` of each line, its
/// own variable) held by a larger table raised the check's peak (+7 MiB at 16,384 entries on
/// dualrev/cayley's output of a 10^5-line program).
const APPLIED_KEPT: usize = 1 << 10;

/// Whether `Cx::apply_builtin` reads instances off arguments (always, but in the tests comparing it
/// with instantiating).
fn fast_application() -> bool {
    #[cfg(test)]
    if tests::MATCH_OFF.with(|c| c.get()) {
        return false;
    }
    true
}

/// Whether `Cx::closed`'s answers are taken (always, but in the test comparing them with walking again).
fn remembering_closed() -> bool {
    #[cfg(test)]
    if tests::CLOSED_OFF.with(|c| c.get()) {
        return false;
    }
    true
}

/// A link of a let/bind spine: its right-hand side, or a `let rec` group's definitions.
enum Link<'a> {
    Expr(&'a mut Expr),
    Defs(&'a mut [FunDef]),
}

/// The most entries `Cx::settled` keeps room for between links.
const SETTLED_KEPT: usize = 1 << 10;

/// The most unbound variables a walk remembered in `Cx::closed` may have met.
const OPEN_KEPT: usize = 4;

/// The slots of `Cx::settle_nodes`' cache of the types it has just settled.
const LAST_SLOTS: usize = 32;

/// `t`'s slot in a cache of `LAST_SLOTS` by identity (`parts`).
fn slot_of(t: &Type) -> usize {
    let (k, a, b) = parts(t);
    // (in 64 bits on every target: usize is 32 in the page's wasm)
    let h = (a as u64 ^ (b as u64).rotate_left(17) ^ (k as u64).rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 58) as usize % LAST_SLOTS
}

/// `Cx::recent`'s size at which it is emptied.
const RECENT: usize = 1 << 14;

/// How many parts of an instantiated type `Cx::settle` visits, and the widest tuple or constructor it
/// enters (a builtin's type is a few dozen parts at most: `SCall`'s `(Z, R ⊸ Staged c) → R ⊸
/// Staged c` is 11). A bound on parts, not on depth: at depth 3 that type's innermost `Staged c`
/// was kept as `instantiate` made it, so each use's settled type was its own (issue 14 item 4:
/// ~0.9 KB a line of dualrev/staged's output held until the zonk).
const SETTLE_PARTS: u32 = 32;
const SETTLE_WIDTH: usize = 4;

/// The fewest nodes of a program whose check settles its types as it goes. Settling spares memory
/// on a long program (what the check holds a line, issue 14 item 4) and costs instructions on any:
/// on the quaternion's 42 stage outputs it was 100 M of the page's 890 M a keystroke (+12 %,
/// session 35), for a few MiB it could spare; below this size the zonk finds the same types.
const SETTLE_FROM: usize = 1 << 16;

/// How often (in nodes) the type check compares the live heap with the memory budget.
const MEMORY_CHECK: u32 = 4096;

impl<'b> Cx<'b> {
    fn new(builtins: &'b Builtins) -> Cx<'b> {
        Cx {
            subst: Chunked::default(),
            levels: Chunked::default(),
            level: 0,
            numeric: vec![],
            open_numeric: Default::default(),
            builtins,
            globals: HashMap::default(),
            locals: Locals::default(),
            poly: HashMap::default(),
            generalise_locals: true,
            nodes: 0,
            located: Span::NONE,
            recent: Made::default(),
            zonked: Default::default(),
            spines: 0,
            settled: Default::default(),
            settling: true,
            closed: Default::default(),
            recent_resets: 0,
            open_met: vec![],
            applied: Default::default(),
        }
    }

    /// The tuple of `ts`, made once while it is in `recent`. Its parts are taken with their outermost
    /// bound variables followed (`shallow`), which is the same type, so that a part whose variable
    /// is bound already (a lambda's parameter, once its body has used it as R) is met by its parts.
    fn tuple_of(&mut self, ts: Vec<Type>) -> Type {
        self.forget_recent();
        let ts: smallvec::SmallVec<[Type; 4]> = ts.iter().map(|t| self.shallow(t)).collect();
        self.recent.tuple_from(&ts)
    }

    /// The constructor `name args`, made once while it is in `recent` (its parts as `tuple_of`'s).
    fn con_of(&mut self, name: &str, args: Vec<Type>) -> Type {
        self.forget_recent();
        let args: smallvec::SmallVec<[Type; 4]> = args.iter().map(|t| self.shallow(t)).collect();
        self.recent.con_from(&interned(name), &args)
    }

    /// `A → B` or `A ⊸ B` (as `kind` says), its two sides made once while they are in `recent`
    /// (its parts as `tuple_of`'s: `linλz → counted (plusC …)` of every line is `R ⊸ Staged`).
    fn fun_of(&mut self, kind: LamKind, a: Type, b: Type) -> Type {
        self.forget_recent();
        let (a, b) = (self.shallow(&a), self.shallow(&b));
        let ab = self.recent.pair_from(a, b);
        match kind {
            LamKind::Plain => Type::Fun(ab),
            LamKind::Linear => Type::Lin(ab),
        }
    }

    /// `t` with its bound variables followed in its first `budget` parts (each part the same type, as
    /// a zonk's), each compound part made once while it is in `recent`: a polymorphic builtin's
    /// `a → a → a`, copied with fresh variables at each use (`plusC`, `counted`: ~0.4 KB a line of
    /// dualrev/naive's output), is the one `Staged → Staged → Staged` once the application has bound
    /// them, and the copy dies with it. Bounded in parts and width: types are shared, not trees, and
    /// following every part could walk a type of exponential size; parts past the bound are kept as
    /// they are. (Recursion as deep as `SETTLE_PARTS` at most.)
    fn settle(&mut self, t: &Type, budget: &mut u32) -> Type {
        let r = self.settle_closed(t, budget).0;
        self.open_met.clear();
        r
    }

    /// `settle`, and whether its walk ran to its end (was not cut short by the budget); the unbound
    /// variables it met are pushed on `open_met`. Such a walk, made again while those variables are
    /// still unbound, gives the same answer (`Cx::closed`).
    fn settle_closed(&mut self, t0: &Type, budget: &mut u32) -> (Type, bool) {
        let t = self.shallow(t0);
        if *budget == 0 {
            return (t, false);
        }
        // (a leaf or an unbound variable is its own answer: bound variables and compound types held
        // by more than the part walked are remembered; one held once, a part an instantiation made
        // anew, is not met again)
        let key = match (t0, &t) {
            (_, Type::Var(_) | Type::Real | Type::Int | Type::Bool | Type::Unit | Type::Unknown) => None,
            (Type::Var(_), _) => Some(ByParts(t0.clone())),
            _ => identity(t0),
        };
        if let Some(known) = key.as_ref().filter(|_| remembering_closed()).and_then(|k| self.closed.get(k)) {
            let (r, n, open) = known;
            if *budget >= *n && open.iter().all(|&v| self.subst.get(v as usize).is_some_and(|b| b.is_none())) {
                *budget -= *n;
                self.open_met.extend_from_slice(open);
                return (r.clone(), true);
            }
        }
        let (start, generation, met) = (*budget, self.recent_resets, self.open_met.len());
        *budget -= 1;
        // Where no part changed, the type itself is looked up (and kept, if new) rather than a copy
        // of its parts allocated first: most nodes' types were made from settled parts already, and
        // allocating before the look-up was most of `settle_nodes`' cost (+35 % instructions in the
        // check of dualrev/staged's output, session 34).
        let same = |a: &[Type], b: &[Type]| a.iter().zip(b).all(|(x, y)| parts(x) == parts(y));
        let (r, complete) = match &t {
            Type::Sum(ab) | Type::Fun(ab) | Type::Lin(ab) => {
                let (a, ca) = self.settle_closed(&ab.0, budget);
                let (b, cb) = self.settle_closed(&ab.1, budget);
                self.forget_recent();
                let ab = match parts(&a) == parts(&ab.0) && parts(&b) == parts(&ab.1) {
                    true => self.recent.pair(ab.clone()),
                    false => self.recent.pair_from(a, b),
                };
                (with_pair(&t, ab), ca && cb)
            }
            Type::Tuple(ts) if ts.len() <= SETTLE_WIDTH => {
                let mut complete = true;
                let settled: smallvec::SmallVec<[Type; SETTLE_WIDTH]> = ts
                    .iter()
                    .map(|u| {
                        let (u, c) = self.settle_closed(u, budget);
                        complete &= c;
                        u
                    })
                    .collect();
                self.forget_recent();
                let r = match same(&settled, ts) {
                    true => self.recent.tuple(ts.clone()),
                    false => self.recent.tuple_from(&settled),
                };
                (r, complete)
            }
            Type::Con(c) if !c.args.is_empty() && c.args.len() <= SETTLE_WIDTH => {
                let mut complete = true;
                let settled: smallvec::SmallVec<[Type; SETTLE_WIDTH]> = c
                    .args
                    .iter()
                    .map(|u| {
                        let (u, c) = self.settle_closed(u, budget);
                        complete &= c;
                        u
                    })
                    .collect();
                self.forget_recent();
                let r = match same(&settled, &c.args) {
                    true => self.recent.con(&c.name, c.args.clone(), Some(c)),
                    false => self.recent.con_from(&c.name, &settled),
                };
                (r, complete)
            }
            Type::Var(v) => {
                self.open_met.push(*v);
                return (t, true);
            }
            // (a leaf; a wide tuple or constructor is kept whole)
            _ => return (t, true),
        };
        // (remembered only while `recent` is the one its answer was made in; a bounded table)
        let open = &self.open_met[met..];
        if let Some(k) = key.filter(|_| complete && open.len() <= OPEN_KEPT && generation == self.recent_resets) {
            let open = open.iter().copied().collect();
            if self.closed.len() >= RECENT {
                self.closed.clear();
            }
            self.closed.insert(k, (r.clone(), start - *budget, open));
        }
        (r, complete)
    }

    /// Each node's type in `link` settled (`settle`, as many parts as an instantiated type's), once
    /// `link` is a link of the outermost spine inferred and the next one too: by then most of what
    /// its nodes' types left open is bound (a translation's line binds its backpropagator's
    /// parameter in its own `do` block, or the next line does when it uses the binder),
    /// and each node's type is made once through `recent`, so that what inference built per node
    /// (`linλz → counted zeroStaged`'s `Var ⊸ Staged`, the tuples and `M _` around it) dies here
    /// rather than at the zonk (issue 14 item 4: ~0.5 KB a line of dualrev/staged's output). The same
    /// type under the substitution (a partial zonk), each node once, a bounded walk each.
    /// (Each type held by many of the link's nodes, a spine's and its body's, a binder's and its
    /// uses', is settled once: the substitution does not change meanwhile.)
    fn settle_nodes(&mut self, link: Link<'_>, vars: std::ops::Range<usize>) {
        // (the map kept between links, emptied: a link is about a line, and a map made anew for
        // each grew through its sizes each time)
        let mut settled = std::mem::take(&mut self.settled);
        let mut stack: Vec<&mut Expr> = match link {
            Link::Expr(e) => vec![e],
            Link::Defs(fs) => fs.iter_mut().map(|f| &mut f.body).collect(),
        };
        // (the last type settled and its answer: a spine's links have their body's type, and a node
        // often its parent's, so that most look-ups in `settled` were of the type just looked up)
        let mut last: [Option<(Type, Type)>; LAST_SLOTS] = Default::default();
        while let Some(e) = stack.pop() {
            if matches!(e.ty, Type::Sum(_) | Type::Fun(_) | Type::Lin(_) | Type::Tuple(_) | Type::Con(_) | Type::Var(_)) {
                let slot = slot_of(&e.ty);
                match &last[slot] {
                    Some((from, to)) if parts(from) == parts(&e.ty) => e.ty = to.clone(),
                    _ => {
                        let to = self.settle_memo(&e.ty, &mut settled);
                        let from = std::mem::replace(&mut e.ty, to.clone());
                        last[slot] = Some((from, to));
                    }
                }
            }
            each_child_mut(e, &mut |c| stack.push(c));
        }
        // The link's variables' bindings settled too (the same substitution, as the zonk's path
        // compression): a binding is the type as unification met it, an instantiated copy of a
        // scheme's part (`Staged c'` of `SCall`'s) or a lambda's type with its parameter's variable,
        // and the substitution held each such copy to the zonk after the nodes had let it go
        // (issue 14 item 4: ~0.3 KB a line of dualrev/cayley's output).
        for v in vars {
            let bound = match self.subst.get(v) {
                Some(Some(t @ (Type::Sum(_) | Type::Fun(_) | Type::Lin(_) | Type::Tuple(_) | Type::Con(_)))) => t.clone(),
                _ => continue,
            };
            let t = self.settle_memo(&bound, &mut settled);
            self.subst[v] = Some(t);
        }
        settled.clear();
        if settled.capacity() > SETTLED_KEPT {
            settled = Default::default();
        }
        self.settled = settled;
    }

    /// `settle`, once per type held by many (`settle_nodes`' memo of a link, by identity).
    fn settle_memo(&mut self, t: &Type, settled: &mut rustc_hash::FxHashMap<ByParts<Type>, Type>) -> Type {
        let _ = settled;
        let mut budget = SETTLE_PARTS;
        self.settle(t, &mut budget)
    }

    fn forget_recent(&mut self) {
        let r = &self.recent;
        if r.tuples.len() + r.cons.len() + r.pairs.len() >= RECENT {
            self.reset_recent();
        }
    }

    /// `recent` emptied, and `closed`, whose answers are its allocations.
    fn reset_recent(&mut self) {
        self.recent = Made::default();
        // (emptied, its room kept: it fills again at once)
        self.closed.clear();
        self.applied.clear();
        self.recent_resets += 1;
    }

    fn fresh(&mut self) -> Type {
        self.subst.push(None);
        self.levels.push(self.level);
        Type::Var(self.subst.len() as u32 - 1)
    }

    fn instantiate(&mut self, s: &Scheme) -> Type {
        if s.vars.is_empty() {
            return s.ty.clone();
        }
        // most schemes quantify a few variables: a list, not a hash map per use; a scheme of many
        // (a function over a tuple nested n deep has 2n) a map, else each use is quadratic
        if s.vars.len() <= 16 {
            let map: Vec<(u32, Type)> = s.vars.iter().map(|&v| (v, self.fresh())).collect();
            return rename(&s.ty, &mut |v| map.iter().find(|(w, _)| *w == v).map_or(Type::Var(v), |(_, t)| t.clone()));
        }
        let map: rustc_hash::FxHashMap<u32, Type> = s.vars.iter().map(|&v| (v, self.fresh())).collect();
        rename(&s.ty, &mut |v| map.get(&v).cloned().unwrap_or(Type::Var(v)))
    }

    fn shallow(&self, t: &Type) -> Type {
        self.resolve(t).clone()
    }

    /// `shallow`, and every variable on the way bound straight to what it ends at (path
    /// compression, as in union–find): variables unified with each other form chains (the operands of
    /// a long sum are each bound to the last one's variable), and following a chain as long as the
    /// program on every unification made inference quadratic (issue 14: a sum of n products
    /// `… + a_k * b_k` nested n deep, the forward stage's `dot_T` of a tuple nested n deep).
    fn compress(&mut self, t: &Type) -> Type {
        let end = self.shallow(t);
        let mut at = t.clone();
        // each link (a variable bound to a variable) rebound to the end, then the old link followed
        while let Type::Var(v) = at {
            match self.subst.get_mut(v as usize).and_then(|s| s.as_mut()) {
                Some(next @ Type::Var(_)) => at = std::mem::replace(next, end.clone()),
                _ => break,
            }
        }
        end
    }

    /// `t` with its outermost bound variables followed, borrowed: following them by cloning made
    /// `zonk` and `occurs` quadratic in a type's size (a function of 400 curried parameters took
    /// minutes to check).
    fn resolve<'a>(&'a self, t: &'a Type) -> &'a Type {
        resolve_in(&self.subst, t)
    }

    fn zonk(&self, t: &Type) -> Type {
        self.zonk_changed(t).unwrap_or_else(|| t.clone())
    }

    /// `t` with its bound variables replaced, or None where it has none: what has none stays shared
    /// (types are shared, not copied; see `ir::Type`), and a node whose type has none (most of them,
    /// once a definition is checked) allocates nothing.
    fn zonk_changed(&self, t: &Type) -> Option<Type> {
        let z = self.zonk_memo(t, &mut None);
        self.zonked.borrow_mut().clear();
        z
    }

    /// `zonk_changed`, remembering each bound variable's zonked type in `memo` (when there is one:
    /// only while the substitution no longer changes), so that the nodes of a program, whose types
    /// mention the same variables again and again, follow each binding once and share the result;
    /// and each compound type's, so that a type many nodes share is zonked once (`Memo::seen`).
    fn zonk_memo(&self, t: &Type, memo: &mut Option<Memo>) -> Option<Type> {
        #[cfg(test)]
        tests::walked();
        let key = memo.as_ref().and_then(|_| identity(t));
        if let (Some(k), Some(m)) = (&key, memo.as_ref()) {
            if let Some(z) = m.seen.get(k) {
                return z.clone();
            }
        }
        let z = match t {
            Type::Var(v) => {
                let v = *v as usize;
                let Some(m) = memo.as_mut() else {
                    if let Some(z) = self.zonked.borrow().get(&(v as u32)) {
                        return Some(z.clone());
                    }
                    let u = self.subst.get(v)?.as_ref()?;
                    let z = self.zonk_memo(u, memo).unwrap_or_else(|| u.clone());
                    self.zonked.borrow_mut().insert(v as u32, z.clone());
                    return Some(z);
                };
                let u = m.vars.get(v)?.clone()?;
                if m.done[v / 64] >> (v % 64) & 1 == 1 {
                    return Some(u);
                }
                let z = self.zonk_memo(&u, memo).unwrap_or(u);
                if let Some(m) = memo {
                    m.vars[v] = Some(z.clone());
                    m.done[v / 64] |= 1 << (v % 64);
                }
                return Some(z);
            }
            Type::Tuple(ts) => self.zonk_all(ts, memo).map(|ts| match memo.as_mut() {
                Some(m) => m.made.tuple_from(&ts),
                None => Type::Tuple(ts.into()),
            }),
            Type::Con(c) => self.zonk_all(&c.args, memo).map(|args| match memo.as_mut() {
                Some(m) => m.made.con_from(&c.name, &args),
                None => Type::Con(std::rc::Rc::new(TyCon { name: c.name.clone(), args: args.into() })),
            }),
            Type::Sum(ab) | Type::Fun(ab) | Type::Lin(ab) => {
                let (a, b) = &**ab;
                let (za, zb) = (self.zonk_memo(a, memo), self.zonk_memo(b, memo));
                if za.is_none() && zb.is_none() {
                    None
                } else {
                    let (a, b) = (za.unwrap_or_else(|| a.clone()), zb.unwrap_or_else(|| b.clone()));
                    Some(with_pair(t, match memo.as_mut() {
                        Some(m) => m.made.pair_from(a, b),
                        None => std::rc::Rc::new((a, b)),
                    }))
                }
            }
            _ => return None,
        };
        if let (Some(k), Some(m)) = (key, memo.as_mut()) {
            m.seen.insert(k, z.clone());
        }
        z
    }

    /// `zonk_memo` of each of `ts`: None when none changes.
    fn zonk_all(&self, ts: &[Type], memo: &mut Option<Memo>) -> Option<Vec<Type>> {
        let (first, z) = ts.iter().enumerate().find_map(|(i, t)| self.zonk_memo(t, memo).map(|z| (i, z)))?;
        let mut out: Vec<Type> = Vec::with_capacity(ts.len());
        out.extend_from_slice(&ts[..first]);
        out.push(z);
        out.extend(ts[first + 1..].iter().map(|t| self.zonk_memo(t, memo).unwrap_or_else(|| t.clone())));
        Some(out)
    }

    /// Every node's type zonked, in place (a type with bound variables is replaced, and one equal to
    /// a type made before by that one: `Made::canon`).
    fn zonk_expr(&mut self, e: &mut Expr) {
        self.zonk_exprs(std::iter::once(e))
    }

    /// `zonk_expr` of each of `es`, with one memo, which holds the substitution meanwhile.
    fn zonk_exprs<'e>(&mut self, es: impl Iterator<Item = &'e mut Expr>) {
        // (inference's shared types are the nodes' own from here: the zonk makes its own)
        self.reset_recent();
        let vars = std::mem::take(&mut self.subst);
        let done = vec![0; vars.len().div_ceil(64)];
        let mut memo = Some(Memo { vars, done, seen: Default::default(), sweep_at: sweep_min(), made: Made::default() });
        let mut stack: Vec<&mut Expr> = es.collect();
        // (the last node's type and what it became: a spine's links have their body's type, and a
        // node often its parent's, and looking it up again in the memo's maps was most of the zonk)
        // (session 45: the last few, by slot: a node's type is often one met a few nodes before, a
        // sibling's or an enclosing node's)
        let mut last: [Option<(Type, Type)>; LAST_SLOTS] = Default::default();
        while let Some(e) = stack.pop() {
            let slot = slot_of(&e.ty);
            if let Some((_, to)) = last[slot].as_ref().filter(|(from, _)| parts(from) == parts(&e.ty)) {
                e.ty = to.clone();
                each_child_mut(e, &mut |c| stack.push(c));
                continue;
            }
            if let Some(m) = memo.as_mut().filter(|m| m.entries() >= m.sweep_at) {
                m.sweep();
            }
            // (moved out, not cloned, while it is looked up: a type held by this node alone is no key
            // of the memo's, `identity`)
            let from = std::mem::replace(&mut e.ty, Type::Unknown);
            let (mut from, zonked) = match self.zonk_memo(&from, &mut memo) {
                Some(z) => (Some(from), z),
                None => (None, from),
            };
            e.ty = zonked;
            if let Some(c) = memo.as_mut().and_then(|m| m.made.canon(&e.ty)) {
                let zonked = std::mem::replace(&mut e.ty, c);
                from.get_or_insert(zonked);
            }
            #[cfg(test)]
            if let Some(m) = &memo {
                tests::MEMO_HELD.with(|h| h.set(h.get().max(m.entries())));
            }
            let from = from.unwrap_or_else(|| e.ty.clone());
            last[slot] = Some((from, e.ty.clone()));
            each_child_mut(e, &mut |c| stack.push(c));
        }
        if let Some(m) = memo {
            self.subst = m.vars;
        }
    }

    /// Whether `v` occurs in `t`; also lowers the level of every variable of `t` to `v`'s, since
    /// `t` is about to be what `v` is, and whatever mentions `v` now mentions them.
    fn occurs(&mut self, v: u32, t: &Type) -> bool {
        // (called on every binding of a variable: a walk without allocations, the walk's stack inline
        // unless the type is large; it was a fifth of the check)
        let level = self.levels[v as usize];
        let (subst, levels) = (&self.subst, &mut self.levels);
        let mut found = false;
        let mut stack: smallvec::SmallVec<[&Type; 16]> = smallvec::smallvec![t];
        // The variables bound to a variable that this walk has followed: a chain of variables (the
        // operands of a long sum, each bound to the next one's) is followed once, not from each of
        // its variables again (issue 14: quadratic on a sum nested n deep). Made at the first such link.
        let mut linked: Option<rustc_hash::FxHashSet<u32>> = None;
        'walk: while let Some(mut t) = stack.pop() {
            #[cfg(test)]
            tests::walked();
            while let Type::Var(w) = t {
                match subst.get(*w as usize).and_then(|s| s.as_ref()) {
                    Some(u @ Type::Var(_)) => {
                        if !linked.get_or_insert_with(Default::default).insert(*w) {
                            continue 'walk;
                        }
                        t = u;
                    }
                    Some(u) => t = u,
                    None => break,
                }
            }
            match t {
                Type::Var(w) => {
                    levels[*w as usize] = levels[*w as usize].min(level);
                    found |= *w == v;
                }
                Type::Tuple(ts) => stack.extend(ts.iter()),
                Type::Con(c) => stack.extend(c.args.iter()),
                Type::Sum(ab) | Type::Fun(ab) | Type::Lin(ab) => stack.extend([&ab.0, &ab.1]),
                _ => {}
            }
        }
        found
    }

    fn unify(&mut self, expected: &Type, found: &Type, span: Span) -> Result<(), Diagnostic> {
        let (a, b) = (self.compress(expected), self.compress(found));
        let ok = match (&a, &b) {
            (Type::Var(v), Type::Var(w)) if v == w => true,
            // Two unbound variables: bind the newer to the older, so that an old variable stays a
            // root and chains of variables stay short (else `shallow` walks chains as long as the
            // program, and inference turns quadratic on long programs).
            (Type::Var(v), Type::Var(w)) => {
                let (young, old) = if v > w { (*v, *w) } else { (*w, *v) };
                self.subst[young as usize] = Some(Type::Var(old));
                if self.open_numeric.contains(&young) {
                    self.open_numeric.insert(old);
                }
                self.levels[old as usize] = self.levels[old as usize].min(self.levels[young as usize]);
                true
            }
            (Type::Var(v), t) | (t, Type::Var(v)) => {
                if self.open_numeric.contains(v) && !matches!(t, Type::Real | Type::Int) {
                    // an earlier definition's arithmetic, still R or Z (its message as defaulting's)
                    return Err(Diagnostic::error(span, format!("type mismatch: expected R or Z, found {}", show(&self.zonk(t)))));
                }
                if self.occurs(*v, t) {
                    return Err(Diagnostic::error(span, format!("infinite type: {} occurs in {}", show(&a), show(&b))));
                }
                self.subst[*v as usize] = Some(t.clone());
                true
            }
            (Type::Real, Type::Real) | (Type::Int, Type::Int) | (Type::Bool, Type::Bool) | (Type::Unit, Type::Unit) => true,
            (Type::Tuple(xs), Type::Tuple(ys)) if xs.len() == ys.len() => {
                for (x, y) in xs.iter().zip(ys.iter()) {
                    self.unify_in(x, y, span, &a, &b)?;
                }
                true
            }
            (Type::Sum(ab1), Type::Sum(ab2)) | (Type::Fun(ab1) | Type::Lin(ab1), Type::Fun(ab2) | Type::Lin(ab2)) => {
                let ((a1, b1), (a2, b2)) = (&**ab1, &**ab2);
                self.unify_in(a1, a2, span, &a, &b)?;
                self.unify_in(b1, b2, span, &a, &b)?;
                true
            }
            (Type::Con(c), Type::Con(d)) if c.name == d.name && c.args.len() == d.args.len() => {
                for (x, y) in c.args.iter().zip(d.args.iter()) {
                    self.unify_in(x, y, span, &a, &b)?;
                }
                true
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            let mut msg = format!("type mismatch: expected {}, found {}", show(&self.zonk(&a)), show(&self.zonk(&b)));
            if (a, b) == (Type::Real, Type::Int) {
                msg.push_str(" (write a real literal with a point, e.g. `2.0`, or convert with `real`)");
            }
            Err(Diagnostic::error(span, msg))
        }
    }

    /// Unifies components, reporting the whole types when a part disagrees.
    fn unify_in(&mut self, x: &Type, y: &Type, span: Span, whole_a: &Type, whole_b: &Type) -> Result<(), Diagnostic> {
        self.unify(x, y, span).map_err(|d| self.in_whole(d, whole_a, whole_b))
    }

    /// A part's mismatch `d` said of the whole types it is part of.
    fn in_whole(&self, mut d: Diagnostic, whole_a: &Type, whole_b: &Type) -> Diagnostic {
        if !d.message.starts_with("infinite") {
            d.message = format!(
                "type mismatch: expected {}, found {} ({})",
                show(&self.zonk(whole_a)),
                show(&self.zonk(whole_b)),
                d.message.trim_start_matches("type mismatch: ")
            );
        }
        d
    }

    /// `unify(M expected, found)` without building `M expected` when `found` already is an `M _`
    /// (every bind of a monadic stage's output): the same unifications, levels and messages.
    fn unify_monadic(&mut self, expected: &Type, found: &Type, span: Span) -> Result<(), Diagnostic> {
        let inner = match self.resolve(found) {
            Type::Con(c) if &*c.name == "M" && c.args.len() == 1 => c.args[0].clone(),
            _ => return self.unify(&Type::con("M", vec![expected.clone()]), found, span),
        };
        self.unify(expected, &inner, span).map_err(|d| {
            let whole_b = self.shallow(found);
            self.in_whole(d, &Type::con("M", vec![expected.clone()]), &whole_b)
        })
    }

    /// Checks the arithmetic constraints so far; one still open defaults to R, or, at the end of a
    /// top-level group (`keep_open`), stays open for the groups after it (`open_numeric`).
    fn resolve_numeric(&mut self) -> Result<(), Diagnostic> {
        self.check_numeric(false)
    }

    fn check_numeric(&mut self, keep_open: bool) -> Result<(), Diagnostic> {
        for (t, span, op) in std::mem::take(&mut self.numeric) {
            match self.compress(&t) {
                Type::Var(v) if keep_open => {
                    self.open_numeric.insert(v);
                }
                Type::Var(v) => self.subst[v as usize] = Some(Type::Real), // defaulting
                Type::Real | Type::Int => {}
                Type::Bool if matches!(op.info().typing, Typing::Equality) => {}
                other => {
                    return Err(Diagnostic::error(
                        span,
                        format!("`{}` works on R and Z, not on {}", op.symbol(), show(&self.zonk(&other))),
                    ))
                }
            }
        }
        Ok(())
    }

    /// Defaults what the whole program left open of its definitions' arithmetic to R.
    fn default_open_numeric(&mut self) {
        for v in std::mem::take(&mut self.open_numeric) {
            if let Type::Var(w) = self.shallow(&Type::Var(v)) {
                self.subst[w as usize] = Some(Type::Real);
            }
        }
    }

    /// Enters a generalisable right-hand side; returns where its arithmetic constraints start.
    fn enter(&mut self) -> usize {
        self.level += 1;
        self.numeric.len()
    }

    fn leave<T>(&mut self, r: Result<T, Diagnostic>) -> Result<T, Diagnostic> {
        self.level -= 1;
        r
    }

    /// `∀ vars. t` over the variables made inside the right-hand side just left and not unified
    /// with anything outside it (Damas & Milner's `gen`). A variable of an arithmetic operand stays
    /// monomorphic, as in a top-level group: whether it is R or Z is decided once for the group
    /// (there are no type classes), by its uses or by defaulting to R.
    fn generalise(&mut self, t: &Type, mark: usize) -> Scheme {
        let ty = self.zonk(t);
        let mut vars = BTreeSet::new();
        free_vars(&ty, &mut vars);
        let mut pinned = BTreeSet::new();
        for (n, _, _) in &self.numeric[mark..] {
            free_vars(&self.zonk(n), &mut pinned);
        }
        let mut quantified = vec![];
        for v in vars {
            if self.levels[v as usize] > self.level {
                if pinned.contains(&v) {
                    self.levels[v as usize] = self.level;
                } else {
                    quantified.push(v);
                }
            }
        }
        Scheme { vars: quantified, ty }
    }

    /// Unifies main's type with `value → _` if they are unifiable and the arithmetic in main still
    /// works on R or Z, and leaves it alone if not (the pipeline then reports that the input does
    /// not fit main's argument, at the input).
    fn fit_input(&mut self, main: &Type, v: &Value) {
        let saved = (self.subst.clone(), self.levels.clone(), self.open_numeric.clone());
        let fitted = self.type_of_value(v).and_then(|arg| {
            let res = self.fresh();
            self.unify(main, &Type::fun(arg, res), Span::NONE)
        });
        let numeric_ok = || {
            self.numeric.iter().all(|(t, _, op)| match self.shallow(t) {
                Type::Var(_) | Type::Real | Type::Int => true,
                Type::Bool => matches!(op.info().typing, Typing::Equality),
                _ => false,
            })
        };
        if fitted.is_err() || !numeric_ok() {
            (self.subst, self.levels, self.open_numeric) = saved;
            // (bindings undone: a walk remembered may have met them)
            self.closed.clear();
            self.applied.clear();
        }
    }

    /// The type of a first-order value, with fresh variables where it does not say (an empty array's
    /// elements, the other side of an injection).
    fn type_of_value(&mut self, v: &Value) -> Result<Type, Diagnostic> {
        Ok(match v {
            Value::Real(_) => Type::Real,
            Value::Int(_) => Type::Int,
            Value::Bool(_) => Type::Bool,
            Value::Unit => Type::Unit,
            Value::Tuple(vs) => Type::tuple(vs.iter().map(|v| self.type_of_value(v)).collect::<Result<_, _>>()?),
            Value::Array(vs) => {
                let a = self.fresh();
                for v in vs.iter() {
                    let t = self.type_of_value(v)?;
                    self.unify(&a, &t, Span::NONE)?;
                }
                Type::array(a)
            }
            Value::Inl(v) => Type::sum(self.type_of_value(v)?, self.fresh()),
            Value::Inr(v) => Type::sum(self.fresh(), self.type_of_value(v)?),
            Value::Fun(_) | Value::Ext(_) => self.fresh(),
        })
    }

    /// Binds `p` to `t` directly where `t` already has the pattern's shape (a tuple of as many
    /// components, `()`), without a fresh variable per name to unify with `t` afterwards: a
    /// `let (x, dx) = e` or `(x, dx) ← m` of a translation binds its names to the parts of `e`'s
    /// type. False, binding nothing, where it has not; the caller then binds and unifies as ever,
    /// so a pattern that does not fit gets the same message.
    fn bind_pat_to(&mut self, p: &Pat, t: &Type) -> bool {
        if !self.pat_fits(p, t) {
            return false;
        }
        self.bind_fitting(p, t);
        true
    }

    fn pat_fits(&self, p: &Pat, t: &Type) -> bool {
        match (p, self.resolve(t)) {
            (Pat::Var(..) | Pat::Wild(_), _) | (Pat::Unit(_), Type::Unit) => true,
            (Pat::Tuple(ps, _), Type::Tuple(ts)) => ps.len() == ts.len() && ps.iter().zip(ts.iter()).all(|(p, t)| self.pat_fits(p, t)),
            _ => false,
        }
    }

    fn bind_fitting(&mut self, p: &Pat, t: &Type) {
        match p {
            Pat::Var(n, _) => self.locals.insert(n.id, t.clone()),
            Pat::Wild(_) | Pat::Unit(_) => {}
            Pat::Tuple(ps, _) => {
                let Type::Tuple(ts) = self.resolve(t).clone() else { unreachable!("checked by pat_fits") };
                ps.iter().zip(ts.iter()).for_each(|(p, t)| self.bind_fitting(p, t));
            }
        }
    }

    fn bind_pat(&mut self, p: &Pat) -> Type {
        match p {
            Pat::Var(n, _) => {
                let t = self.fresh();
                self.locals.insert(n.id, t.clone());
                t
            }
            Pat::Wild(_) => self.fresh(),
            Pat::Unit(_) => Type::Unit,
            Pat::Tuple(ps, _) => Type::Tuple(ps.iter().map(|p| self.bind_pat(p)).collect()),
        }
    }

    /// Infers `e`'s type. Chains of `let`, local `let f … in` and `do` binds (long straight-line
    /// programs and their translations) are walked in a loop rather than by recursion on the body,
    /// so deep programs do not exhaust the stack (wasm's is small).
    fn infer(&mut self, e: &mut Expr) -> Result<Type, Diagnostic> {
        // (the innermost bind's continuation's span: a do block's value must be `M _`. The spine's
        // nodes are walked again for their types at its end, not kept in a list: a CHAD output's
        // spine is five links a line, 24 bytes each and a doubling vector, ~0.2 KB a line)
        let mut innermost_bind: Option<Span> = None;
        // (the spine's binders are in scope until its end)
        let scope = self.locals.mark();
        // (whether this is the outermost spine with a link: its links' nodes are settled)
        let mut outermost = None;
        // (the outermost spine's last link inferred, with the variables made while it was, settled
        // once the next link is: a line's types are often closed by the next line's use of its
        // binders, as CHAD's `λd → pure ()` of a literal, whose `d` is R once the product using it
        // is inferred)
        let mut pending: Option<(Link, std::ops::Range<usize>)> = None;
        let mut cur = &mut *e;
        while matches!(cur.kind, ExprKind::Let(..) | ExprKind::LetRec(..) | ExprKind::Bind(..)) {
            let outermost = *outermost.get_or_insert_with(|| {
                self.spines += 1;
                self.spines == 1
            });
            let first_var = self.subst.len();
            let here = cur;
            let (link, next) = match &mut here.kind {
                ExprKind::Let(p_rhs_body) => {
                    let (p, rhs_body) = &mut **p_rhs_body;
                    let (rhs, body) = rhs_body;
                    self.let_binding(p, rhs)?;
                    (Link::Expr(rhs), body)
                }
                ExprKind::LetRec(fs_body) => {
                    let (fs, body) = &mut **fs_body;
                    self.let_rec(fs)?;
                    (Link::Defs(fs), body)
                }
                ExprKind::Bind(p_m_k) => {
                    let (p, m_k) = &mut **p_m_k;
                    let (m, k) = m_k;
                    let tm = self.infer(m)?;
                    let bound = match self.resolve(&tm) {
                        Type::Con(c) if &*c.name == "M" && c.args.len() == 1 => {
                            let inner = c.args[0].clone();
                            self.bind_pat_to(p, &inner)
                        }
                        _ => false,
                    };
                    if !bound {
                        let tp = self.bind_pat(p);
                        self.unify_monadic(&tp, &tm, m.span)?;
                    }
                    innermost_bind = Some(k.span);
                    (Link::Expr(m), k)
                }
                _ => unreachable!("checked by the loop condition"),
            };
            cur = next;
            if outermost && self.settling {
                if let Some((link, vars)) = pending.replace((link, first_var..self.subst.len())) {
                    self.settle_nodes(link, vars);
                }
            }
        }
        if let Some((link, vars)) = pending.take() {
            self.settle_nodes(link, vars);
        }
        if outermost.is_some() {
            self.spines -= 1;
        }
        let t = self.infer_node(cur)?;
        // (checked without a fresh variable where it is `M _` already; once the innermost bind's
        // check has made it so, the outer binds' hold too)
        let monadic = |t: &Type| matches!(t, Type::Con(c) if &*c.name == "M" && c.args.len() == 1);
        if let Some(span) = innermost_bind.filter(|_| !monadic(self.resolve(&t))) {
            let b = self.fresh();
            self.unify_monadic(&b, &t, span)?;
        }
        let mut at = e;
        loop {
            let Expr { kind, ty, .. } = at;
            let next = match kind {
                ExprKind::Let(p_rhs_body) => &mut p_rhs_body.1.1,
                ExprKind::LetRec(fs_body) => &mut fs_body.1,
                ExprKind::Bind(p_m_k) => &mut p_m_k.1.1,
                _ => break,
            };
            *ty = t.clone();
            at = next;
        }
        self.locals.undo(scope);
        Ok(t)
    }

    /// The binding of `let p = rhs in …` (its body is typed by `infer`'s loop). Kept out of `infer`,
    /// whose frame is on the stack once per nesting level (wasm's stack is small).
    #[inline(never)]
    fn let_binding(&mut self, p: &Pat, rhs: &mut Expr) -> Result<(), Diagnostic> {
        match p {
            Pat::Var(x, _) if self.generalise_locals && is_value(rhs) => {
                // `let f = \x -> e in b`: generalised like a top-level definition.
                let mark = self.enter();
                let t1 = self.infer(rhs);
                let t1 = self.leave(t1)?;
                let scheme = self.generalise(&t1, mark);
                self.locals.insert(x.id, t1);
                if !scheme.vars.is_empty() {
                    self.poly.insert(x.id, scheme);
                }
            }
            p => {
                let t1 = self.infer(rhs)?;
                if !self.bind_pat_to(p, &t1) {
                    let tp = self.bind_pat(p);
                    self.unify(&tp, &t1, p.span())?;
                }
            }
        }
        Ok(())
    }

    /// The group of `let f x = … and g y = … in …`: monomorphic inside the group, generalised for
    /// the body when every member is a function (the value restriction), as top-level groups are.
    #[inline(never)]
    fn let_rec(&mut self, fs: &mut [FunDef]) -> Result<(), Diagnostic> {
        let values = self.generalise_locals && fs.iter().all(|f| is_value(&f.body));
        let mark = values.then(|| self.enter());
        let tys: Vec<Type> = fs.iter().map(|_| self.fresh()).collect();
        for (f, t) in fs.iter().zip(&tys) {
            self.locals.insert(f.name.id, t.clone());
        }
        let mut r = Ok(());
        for (f, t) in fs.iter_mut().zip(&tys) {
            r = self.infer(&mut f.body).and_then(|found| self.unify(t, &found, f.span));
            if r.is_err() {
                break;
            }
        }
        let Some(mark) = mark else { return r };
        self.leave(r)?;
        for (f, t) in fs.iter().zip(&tys) {
            let scheme = self.generalise(t, mark);
            if !scheme.vars.is_empty() {
                self.poly.insert(f.name.id, scheme);
            }
        }
        Ok(())
    }

    /// One node that is not on a let/bind spine.
    fn infer_node(&mut self, e: &mut Expr) -> Result<Type, Diagnostic> {
        let span = e.span;
        self.count_node(span)?;
        let t = match &mut e.kind {
            ExprKind::Var(n) if n.is_global() => match self.globals.get(&*n.text).cloned() {
                Some(s) => self.instantiate(&s),
                None => return Err(Diagnostic::error(span, format!("unknown name `{}`", n.text))),
            },
            ExprKind::Var(n) => {
                let t = match self.poly.get(&n.id).cloned() {
                    Some(s) => self.instantiate(&s),
                    None => match self.locals.get(n.id) {
                        Some(t) => t.clone(),
                        None => return Err(Diagnostic::error(span, format!("unbound variable `{}`", n.text))),
                    },
                };
                self.locals.used(n.id);
                t
            }
            ExprKind::Real(_) => Type::Real,
            ExprKind::Int(_) => Type::Int,
            ExprKind::Bool(_) => Type::Bool,
            ExprKind::Unit => Type::Unit,
            ExprKind::Lam(kind, p_body) => {
                let (p, body) = &mut **p_body;
                let scope = self.locals.mark();
                let a = self.bind_pat(p);
                let b = self.infer(body)?;
                self.locals.undo(scope);
                self.fun_of(*kind, a, b)
            }
            ExprKind::App(f_a) => {
                let (f, a) = &mut **f_a;
                let head = match &f.kind {
                    ExprKind::Builtin(name) => self.builtins.get(name).filter(|b| !b.scheme.vars.is_empty()),
                    _ => None,
                };
                let (tf, ta) = match head {
                    Some(b) => match self.apply_builtin(f, a, b)? {
                        Applied::Matched(t) => {
                            e.ty = t.clone();
                            return Ok(t);
                        }
                        Applied::Instantiated(tf, ta) => (tf, ta),
                    },
                    None => {
                        let tf = self.infer(f)?;
                        (tf, self.infer(a)?)
                    }
                };
                match self.shallow(&tf) {
                    // (the result is the function's: no fresh variable to unify with it)
                    Type::Fun(xy) | Type::Lin(xy) => {
                        let (x, y) = &*xy;
                        self.unify(x, &ta, a.span)?;
                        // a polymorphic head's type is a copy of its scheme's (`instantiate`): settled
                        // now that its variables are bound, as is a partial application's result
                        let instantiated = match &f.kind {
                            ExprKind::Builtin(_) => true,
                            ExprKind::Var(n) => n.is_global() || self.poly.contains_key(&n.id),
                            _ => false,
                        };
                        if instantiated && self.settling {
                            let (mut head, mut result) = (SETTLE_PARTS, SETTLE_PARTS);
                            f.ty = self.settle(&tf, &mut head);
                            self.settle(y, &mut result)
                        } else {
                            y.clone()
                        }
                    }
                    Type::Var(_) => {
                        let r = self.fresh();
                        self.unify(&tf, &Type::fun(ta, r.clone()), f.span)?;
                        r
                    }
                    other => {
                        return Err(Diagnostic::error(
                            f.span,
                            format!("this is applied to an argument but has type {}, not a function type", show(&self.zonk(&other))),
                        ))
                    }
                }
            }
            ExprKind::Tuple(es) => {
                let mut ts = Vec::with_capacity(es.len());
                for e in es.iter_mut() {
                    ts.push(self.infer(e)?);
                }
                self.tuple_of(ts)
            }
            ExprKind::Array(es) => {
                let a = self.fresh();
                for e in es.iter_mut() {
                    let t = self.infer(e)?;
                    self.unify(&a, &t, e.span)?;
                }
                Type::array(a)
            }
            ExprKind::Fst(x) => {
                let (a, b) = (self.fresh(), self.fresh());
                let tx = self.infer(x)?;
                self.unify(&Type::tup(vec![a.clone(), b]), &tx, x.span)?;
                a
            }
            ExprKind::Snd(x) => {
                let (a, b) = (self.fresh(), self.fresh());
                let tx = self.infer(x)?;
                self.unify(&Type::tup(vec![a, b.clone()]), &tx, x.span)?;
                b
            }
            ExprKind::Inl(x) => {
                let (ta, tb) = (self.infer(x)?, self.fresh());
                Type::sum(ta, tb)
            }
            ExprKind::Inr(x) => {
                let (ta, tb) = (self.fresh(), self.infer(x)?);
                Type::sum(ta, tb)
            }
            ExprKind::Case(c) => {
                let (s, p1, e1, p2, e2) = &mut **c;
                let ts = self.infer(s)?;
                let scope = self.locals.mark();
                let a = self.bind_pat(p1);
                let b = self.bind_pat(p2);
                self.unify(&Type::sum(a, b), &ts, s.span)?;
                let t1 = self.infer(e1)?;
                let t2 = self.infer(e2)?;
                self.locals.undo(scope);
                self.unify(&t1, &t2, e2.span)?;
                t1
            }
            ExprKind::If(c_a_b) => {
                let (c, a_b) = &mut **c_a_b;
                let (a, b) = a_b;
                let tc = self.infer(c)?;
                self.unify(&Type::Bool, &tc, c.span)?;
                let ta = self.infer(a)?;
                let tb = self.infer(b)?;
                self.unify(&ta, &tb, b.span)?;
                ta
            }
            ExprKind::Prim(op, args) => {
                let op = *op;
                let mut ts = Vec::with_capacity(args.len());
                for a in args.iter_mut() {
                    ts.push((self.infer(a)?, a.span));
                }
                self.prim(op, &ts, span)?
            }
            ExprKind::Ann(x_t) => {
                let (x, t) = &mut **x_t;
                // Type variables in an annotation (generated code's `c`) are unknowns of this
                // annotation, fresh ones, so that they never clash with the checker's own.
                let mut fresh: rustc_hash::FxHashMap<u32, Type> = Default::default();
                let t = rename(t, &mut |v| fresh.entry(v).or_insert_with(|| self.fresh()).clone());
                let tx = self.infer(x)?;
                self.unify(&t, &tx, x.span)?;
                t
            }
            ExprKind::Builtin(name) => match self.builtins.get(name) {
                Some(b) => self.instantiate(&b.scheme),
                None => return Err(Diagnostic::error(span, format!("unknown builtin `{name}`"))),
            },
            ExprKind::Par(a_b) => {
                let (a, b) = &mut **a_b;
                let ta = self.infer(a)?;
                let tb = self.infer(b)?;
                self.tuple_of(vec![ta, tb])
            }
            ExprKind::Let(..) | ExprKind::LetRec(..) | ExprKind::Bind(..) => return self.infer(e),
            ExprKind::Pure(x) => {
                let t = self.infer(x)?;
                self.con_of("M", vec![t])
            }
        };
        e.ty = t.clone();
        Ok(t)
    }

    /// A node about to be inferred: where a budget stop is reported, and the memory budget checked
    /// every `MEMORY_CHECK` nodes.
    fn count_node(&mut self, span: Span) -> Result<(), Diagnostic> {
        if !span.is_none() {
            self.located = span;
        }
        self.nodes = self.nodes.wrapping_add(1);
        if self.nodes % MEMORY_CHECK == 0 {
            if let Some(m) = crate::limits::memory_exceeded("type-checking") {
                return Err(Diagnostic::error(self.located, m));
            }
        }
        Ok(())
    }

    /// `b a` for a polymorphic builtin `b` (the head `f`), its scheme's instance read off the
    /// argument's type rather than built and unified: where the parameter's type matches `a`'s (its
    /// quantified variables standing for parts of `a`'s type, the rest equal), unifying the
    /// instantiated parameter with it would bind each fresh variable to its part and nothing else,
    /// so each is bound so (the same substitution, the same variables made in the same order as
    /// `instantiate`'s), and the head's and the result's types are the scheme's with those parts,
    /// made once for each builtin and instance (`Cx::applied`). Every backpropagator of a dualrev
    /// output is `counted (λs → SCall d (x * z) s)`: instantiating, unifying and settling each
    /// application's copy of the scheme was ~40 % of the check of dualrev/cayley's output (issue 14
    /// item 4, session 45). Otherwise (`Instantiated`: a part of `a`'s type still a variable where
    /// the parameter's is not, or two parts that should be equal not the same) the head's instance
    /// and `a`'s type, for unification as ever, with its messages.
    fn apply_builtin(&mut self, f: &mut Expr, a: &mut Expr, b: std::rc::Rc<crate::interp::Builtin>) -> Result<Applied, Diagnostic> {
        // (as `infer_node` of the head: counted, and its variables made before the argument's)
        self.count_node(f.span)?;
        let s = &b.scheme;
        let fresh: smallvec::SmallVec<[Type; 4]> = s.vars.iter().map(|_| self.fresh()).collect();
        let ta = self.infer(a)?;
        let mut found: smallvec::SmallVec<[Option<Type>; 4]> = smallvec::smallvec![None; s.vars.len()];
        let matched = match &s.ty {
            Type::Fun(xy) | Type::Lin(xy) if fast_application() => {
                let mut budget = MATCH_PARTS;
                self.match_scheme(&xy.0, &ta, &s.vars, &mut found, &mut budget)
            }
            _ => false,
        };
        if !matched {
            let tf = rename(&s.ty, &mut |v| s.vars.iter().position(|&w| w == v).map_or(Type::Var(v), |i| fresh[i].clone()));
            f.ty = tf.clone();
            return Ok(Applied::Instantiated(tf, ta));
        }
        // each fresh variable bound to its part as unifying it with the part binds it (a variable
        // part: the fresh, younger, one to it; its variables' levels lowered to the current one)
        let mut inst: smallvec::SmallVec<[Type; 4]> = smallvec::SmallVec::new();
        for (v, part) in fresh.iter().zip(found) {
            match part {
                Some(p) => {
                    self.unify(v, &p, a.span)?;
                    inst.push(p);
                }
                // (a variable only the result mentions stays the fresh one)
                None => inst.push(v.clone()),
            }
        }
        let key = (std::rc::Rc::as_ptr(&b) as usize, inst.iter().map(parts).collect::<smallvec::SmallVec<[(u8, usize, usize); 4]>>());
        if let Some((_, _, head, result)) = self.applied.get(&key) {
            #[cfg(test)]
            tests::MATCHED.with(|m| m.set(m.get() + 1));
            f.ty = head.clone();
            return Ok(Applied::Matched(result.clone()));
        }
        let tf = rename(&s.ty, &mut |v| s.vars.iter().position(|&w| w == v).map_or(Type::Var(v), |i| inst[i].clone()));
        let (head, result) = match (&tf, self.settling) {
            (Type::Fun(xy) | Type::Lin(xy), true) => {
                let (mut h, mut r) = (SETTLE_PARTS, SETTLE_PARTS);
                let y = xy.1.clone();
                (self.settle(&tf, &mut h), self.settle(&y, &mut r))
            }
            (Type::Fun(xy) | Type::Lin(xy), false) => (tf.clone(), xy.1.clone()),
            // (matched a function's parameter, so `tf` is a function: never taken, but not a panic)
            _ => {
                f.ty = tf.clone();
                return Ok(Applied::Instantiated(tf, ta));
            }
        };
        if self.applied.len() >= APPLIED_KEPT {
            self.applied.clear();
        }
        // (the builtin and the parts kept with their addresses, so that no other is met at them)
        self.applied.insert(key, (b.clone(), inst, head.clone(), result.clone()));
        #[cfg(test)]
        tests::MATCHED.with(|m| m.set(m.get() + 1));
        f.ty = head;
        Ok(Applied::Matched(result))
    }

    /// Whether `t` (under the substitution) is an instance of the scheme's type `pat`: each of
    /// `vars` (the quantified variables) standing for a part of `t`, recorded in `found`, one met
    /// again for a part equal to the first (`same`), and the rest of `pat` as `t` is, at most
    /// `budget` parts walked. False where unification would have more to do: a part of `t` that is
    /// a variable where `pat`'s is not, a variable of `pat` not quantified.
    fn match_scheme(&self, pat: &Type, t: &Type, vars: &[u32], found: &mut [Option<Type>], budget: &mut u32) -> bool {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let t = self.resolve(t);
        match (pat, t) {
            (Type::Var(v), _) => match vars.iter().position(|w| w == v) {
                Some(i) => match &found[i] {
                    Some(p) => self.same(p, t, budget),
                    None => {
                        found[i] = Some(t.clone());
                        true
                    }
                },
                None => false,
            },
            (Type::Real, Type::Real) | (Type::Int, Type::Int) | (Type::Bool, Type::Bool) | (Type::Unit, Type::Unit) => true,
            (Type::Tuple(ps), Type::Tuple(ts)) => {
                ps.len() == ts.len() && ps.iter().zip(ts.iter()).all(|(p, t)| self.match_scheme(p, t, vars, found, budget))
            }
            (Type::Con(c), Type::Con(d)) => {
                c.name == d.name
                    && c.args.len() == d.args.len()
                    && c.args.iter().zip(d.args.iter()).all(|(p, t)| self.match_scheme(p, t, vars, found, budget))
            }
            // (as `unify`: a function and a linear function unify)
            (Type::Sum(p), Type::Sum(q)) | (Type::Fun(p) | Type::Lin(p), Type::Fun(q) | Type::Lin(q)) => {
                self.match_scheme(&p.0, &q.0, vars, found, budget) && self.match_scheme(&p.1, &q.1, vars, found, budget)
            }
            _ => false,
        }
    }

    /// Whether `a` and `b` are the same type under the substitution (so that unifying them binds
    /// nothing), within `budget` parts; false where unsure.
    fn same(&self, a: &Type, b: &Type, budget: &mut u32) -> bool {
        let (a, b) = (self.resolve(a), self.resolve(b));
        if parts(a) == parts(b) {
            return true;
        }
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        match (a, b) {
            (Type::Tuple(xs), Type::Tuple(ys)) => xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| self.same(x, y, budget)),
            (Type::Con(c), Type::Con(d)) => {
                c.name == d.name && c.args.len() == d.args.len() && c.args.iter().zip(d.args.iter()).all(|(x, y)| self.same(x, y, budget))
            }
            (Type::Sum(p), Type::Sum(q)) | (Type::Fun(p), Type::Fun(q)) | (Type::Lin(p), Type::Lin(q)) => {
                self.same(&p.0, &q.0, budget) && self.same(&p.1, &q.1, budget)
            }
            _ => false,
        }
    }

    /// A primitive's type, from the typing class in its row (prims.rs).
    fn prim(&mut self, op: Prim, args: &[(Type, Span)], span: Span) -> Result<Type, Diagnostic> {
        let base = |b: Base| match b {
            Base::R => Type::Real,
            Base::Z => Type::Int,
            Base::Bool => Type::Bool,
        };
        let typing = op.info().typing;
        if let Typing::Poly(sig) = typing {
            let (params, result) = sig(&mut || self.fresh());
            for ((t, s), p) in args.iter().zip(&params) {
                self.unify(p, t, *s)?;
            }
            return Ok(result);
        }
        if let Typing::Mono(params, result) = typing {
            for ((t, s), &b) in args.iter().zip(params) {
                self.unify(&base(b), t, *s)?;
            }
            return Ok(base(result));
        }
        // Overloaded: one type for every argument, R or Z (or Bool for equality), decided later,
        // or now where the first argument's already is R or Z (most of a translation's arithmetic:
        // no fresh variable and nothing left to decide).
        let t = match args.first().map(|(a, _)| self.resolve(a)) {
            Some(Type::Real) => Type::Real,
            Some(Type::Int) => Type::Int,
            _ => self.fresh(),
        };
        for (a, s) in args {
            self.unify(&t, a, *s)?;
        }
        if matches!(t, Type::Var(_)) {
            self.numeric.push((t.clone(), span, op));
        }
        Ok(if matches!(typing, Typing::Numeric) { t } else { Type::Bool })
    }
}

/// A vector grown a chunk of `CHUNK` elements at a time: never copied as it grows, and never more
/// than a chunk over its length. The substitution and the variables' levels (20 bytes a variable,
/// ~20 variables a line of a translation) were `Vec`s, which double: up to half their capacity
/// unused at the check's peak, and the old buffer beside the new one while they grew (issue 14
/// item 4).
#[derive(Clone)]
struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

/// `Chunked`'s elements a chunk (a power of two).
const CHUNK: usize = 1 << 12;

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked { chunks: vec![], len: 0 }
    }
}

impl<T: Clone> Chunked<T> {
    /// `n` copies of `x`.
    fn filled(x: T, n: usize) -> Self {
        let mut c = Chunked::default();
        (0..n).for_each(|_| c.push(x.clone()));
        c
    }
}

impl<T> Chunked<T> {
    fn push(&mut self, x: T) {
        if self.len.is_multiple_of(CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        if let Some(last) = self.chunks.last_mut() {
            last.push(x);
        }
        self.len += 1;
    }
    fn len(&self) -> usize {
        self.len
    }
    fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i / CHUNK).and_then(|c| c.get(i % CHUNK))
    }
    fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.chunks.get_mut(i / CHUNK).and_then(|c| c.get_mut(i % CHUNK))
    }
}

impl<T> std::ops::Index<usize> for Chunked<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        &self.chunks[i / CHUNK][i % CHUNK]
    }
}

impl<T> std::ops::IndexMut<usize> for Chunked<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i / CHUNK][i % CHUNK]
    }
}

/// `Cx::resolve` over a substitution alone (so that `occurs` can change levels while it walks).
fn resolve_in<'a>(subst: &'a Chunked<Option<Type>>, mut t: &'a Type) -> &'a Type {
    while let Type::Var(v) = t {
        #[cfg(test)]
        tests::walked();
        match subst.get(*v as usize).and_then(|s| s.as_ref()) {
            Some(u) => t = u,
            None => break,
        }
    }
    t
}

/// A syntactic value whose binding may be generalised (the value restriction): a function.
fn is_value(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Lam(..) => true,
        ExprKind::Ann(x_x) => { let (x, _) = &**x_x; is_value(x) },
        _ => false,
    }
}

/// Tarjan's SCC algorithm; components come out in reverse topological order of the edges
/// (dependencies first), which is the order inference needs.
fn tarjan(deps: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct T<'a> {
        deps: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn go(t: &mut T, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &t.deps[v] {
            match t.index[w] {
                None => {
                    go(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut comp = vec![];
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            comp.sort();
            t.out.push(comp);
        }
    }
    let n = deps.len();
    let mut t = T { deps, index: vec![None; n], low: vec![0; n], on: vec![false; n], stack: vec![], next: 0, out: vec![] };
    for v in 0..n {
        if t.index[v].is_none() {
            go(&mut t, v);
        }
    }
    t.out
}

pub fn free_vars(t: &Type, out: &mut BTreeSet<u32>) {
    match t {
        Type::Var(v) => {
            out.insert(*v);
        }
        Type::Tuple(ts) => ts.iter().for_each(|t| free_vars(t, out)),
        Type::Con(c) => c.args.iter().for_each(|t| free_vars(t, out)),
        Type::Sum(ab) | Type::Fun(ab) | Type::Lin(ab) => {
            free_vars(&ab.0, out);
            free_vars(&ab.1, out);
        }
        _ => {}
    }
}

fn max_var(t: &Type) -> u32 {
    let mut vs = BTreeSet::new();
    free_vars(t, &mut vs);
    vs.into_iter().max().unwrap_or(0)
}

/// Replaces every type variable through `f`. A part without variables is shared, not copied: an
/// instantiated scheme (each use of a builtin) is new only along the paths to its variables, so
/// that its closed parts (`IO ()` of `SCall`'s `R ⊸ (Staged c → IO ())`) are one allocation for
/// every use, and the types the zonk makes of them are shared too (issue 14 item 4: a copy per use,
/// a part the zonk leaves as it is, kept each use's zonked type apart, ~1.7 KB a line of
/// dualrev/mutable's typed output, and the copies were ~1 KB a line at its check's peak).
pub fn rename(t: &Type, f: &mut dyn FnMut(u32) -> Type) -> Type {
    rename_changed(t, f).unwrap_or_else(|| t.clone())
}

/// `rename`, or None where `t` has no variable.
fn rename_changed(t: &Type, f: &mut dyn FnMut(u32) -> Type) -> Option<Type> {
    // (a part is visited once: a scheme's type is the size of what its builtin was written as)
    let all = |ts: &[Type], f: &mut dyn FnMut(u32) -> Type| -> Option<Vec<Type>> {
        let (first, z) = ts.iter().enumerate().find_map(|(i, t)| rename_changed(t, f).map(|z| (i, z)))?;
        let mut out: Vec<Type> = Vec::with_capacity(ts.len());
        out.extend_from_slice(&ts[..first]);
        out.push(z);
        out.extend(ts[first + 1..].iter().map(|t| rename_changed(t, f).unwrap_or_else(|| t.clone())));
        Some(out)
    };
    match t {
        Type::Var(v) => Some(f(*v)),
        Type::Tuple(ts) => all(ts, f).map(|ts| Type::Tuple(ts.into())),
        Type::Con(c) => all(&c.args, f).map(|args| Type::Con(std::rc::Rc::new(TyCon { name: c.name.clone(), args: args.into() }))),
        Type::Sum(ab) | Type::Fun(ab) | Type::Lin(ab) => {
            let (a, b) = &**ab;
            let (za, zb) = (rename_changed(a, f), rename_changed(b, f));
            if za.is_none() && zb.is_none() {
                return None;
            }
            Some(with_pair(t, std::rc::Rc::new((za.unwrap_or_else(|| a.clone()), zb.unwrap_or_else(|| b.clone())))))
        }
        _ => None,
    }
}

/// A plain rendering for messages (the printer renders types for program views).
pub fn show(t: &Type) -> String {
    crate::print::print_type(t, &crate::print::PrintOptions::unicode())
}


#[cfg(test)]
mod tests {
    use super::*;

    /// `main`'s type after checking `src`, or the error message.
    fn main_type(src: &str, input: Option<Value>) -> Result<String, String> {
        let mut p = crate::syntax::parse_program(src).map_err(|ds| ds[0].message.clone())?;
        check_program_at(&mut p, &Builtins::new(), input.as_ref()).map_err(|d| d.message)?;
        Ok(show(&p.def("main").and_then(|d| d.scheme.clone()).expect("main").ty))
    }

    /// Issue 14 item 4: while inference runs (before the zonk, which shares every type), the `pure`s
    /// of a do block whose values have one type share one `M (R, R)` and one `(R, R)`: one allocation
    /// each per line of a long translation was what its check grew by.
    #[test]
    fn inference_makes_a_repeated_node_type_once() {
        let src = "def main x =\n  do {\n    a ← pure (x * 1.0, 2.0);\n    b ← pure (x * 3.0, 4.0);\n    c ← pure (x * 5.0, 6.0);\n    pure (x * 7.0, 8.0)\n  }\n";
        let mut p = crate::syntax::parse_program(src).expect("parses");
        let builtins = Builtins::new();
        let mut cx = Cx::new(&builtins);
        cx.infer(&mut p.defs[0].body).expect("checks");
        let mut pures: Vec<(&Type, &Type)> = vec![];
        let mut e = &p.defs[0].body;
        loop {
            e = match &e.kind {
                ExprKind::Lam(_, b_x) => { let (_, b) = &**b_x; b },
                ExprKind::Bind(mk_x) => {
                    let (_, mk) = &**mk_x;
                    let ExprKind::Pure(v) = &mk.0.kind else { panic!("a pure") };
                    pures.push((&mk.0.ty, &v.ty));
                    &mk.1
                }
                ExprKind::Pure(v) => {
                    pures.push((&e.ty, &v.ty));
                    break;
                }
                k => panic!("unexpected {k:?}"),
            };
        }
        assert_eq!(pures.len(), 4);
        assert_eq!(show(&cx.zonk(pures[0].0)), "M (R, R)");
        // (the first's `x * 1.0` has a variable's type, R only once it is unified: from the second on
        // they are (R, R) as inferred)
        for (m, pair) in &pures[2..] {
            assert!(matches!(m, Type::Con(_)) && parts(m) == parts(pures[1].0), "{m:?} is not the second pure's M (R, R)");
            assert!(matches!(pair, Type::Tuple(_)) && parts(pair) == parts(pures[1].1), "{pair:?} is not the second (R, R)");
        }
    }

    /// Issue 14 item 4: a polymorphic function's uses each instantiate its scheme with fresh
    /// variables; once each application has bound them, the heads share one `R → (R, R)` (settled
    /// through `recent`) before the zonk, and the copies die with their applications.
    #[test]
    fn instantiated_heads_share_their_settled_type() {
        let src = "def main x =\n  let f = \\y -> (y, y) in\n  let a = f 1.0 in\n  let b = f 2.0 in\n  f 3.0\n";
        let mut p = crate::syntax::parse_program(src).expect("parses");
        let builtins = Builtins::new();
        let mut cx = Cx::new(&builtins);
        cx.infer(&mut p.defs[0].body).expect("checks");
        let mut heads: Vec<(&Type, &Type)> = vec![];
        let mut e = &p.defs[0].body;
        loop {
            e = match &e.kind {
                ExprKind::Lam(_, b_x) => { let (_, b) = &**b_x; b },
                ExprKind::Let(rb_x) => {
                    let (_, rb) = &**rb_x;
                    if let ExprKind::App(f_x) = &rb.0.kind {
                        let (f, _) = &**f_x;
                        heads.push((&f.ty, &rb.0.ty));
                    }
                    &rb.1
                }
                ExprKind::App(f_x) => {
                    let (f, _) = &**f_x;
                    heads.push((&f.ty, &e.ty));
                    break;
                }
                k => panic!("unexpected {k:?}"),
            };
        }
        assert_eq!(heads.len(), 3);
        assert_eq!(show(heads[0].0), "R → (R, R)");
        for (f, app) in &heads[1..] {
            assert!(matches!(f, Type::Fun(_)) && parts(f) == parts(heads[0].0), "{f:?} is not the first head's type");
            assert!(matches!(app, Type::Tuple(_)) && parts(app) == parts(heads[0].1), "{app:?} is not the first application's");
        }
    }

    /// Issue 15: the links of a let chain have their body's type, here a tuple of variables bound to
    /// R, and the final zonk makes one copy of it for all of them (it used to make one per link).
    #[test]
    fn the_links_of_a_let_chain_share_their_zonked_type() {
        let src = "def main x =\n  let a = x * 2.0 in\n  let b = a + 1.0 in\n  let c = b * a in\n  (a, c)\n";
        let mut p = crate::syntax::parse_program(src).expect("parses");
        check_program(&mut p, &Builtins::new()).expect("checks");
        let mut links = vec![];
        let mut e = &p.def("main").expect("main").body;
        loop {
            e = match &e.kind {
                ExprKind::Lam(_, b_x) => { let (_, b) = &**b_x; b },
                ExprKind::Let(ab_x) => {
                    let (_, ab) = &**ab_x;
                    links.push(&e.ty);
                    &ab.1
                }
                _ => break,
            };
        }
        assert_eq!(links.len(), 3);
        assert_eq!(show(links[0]), "(R, R)");
        for t in &links[1..] {
            let (Type::Tuple(x), Type::Tuple(y)) = (links[0], *t) else { panic!("{}", show(t)) };
            assert!(Types::ptr_eq(x, y), "each link has its own copy of {}", show(t));
        }
    }

    /// Issue 14 (memory per line): tuples of leaf types zonked apart — here each line's pair, as a
    /// forward-mode program has a dual number `(R, R)` on most of its nodes — share one allocation.
    #[test]
    fn zonked_tuples_of_leaves_are_shared() {
        let src = "def main x =\n  let a = (x * 2.0, x) in\n  let b = (fst a + 1.0, snd a) in\n  (fst b, snd a * 3.0)\n";
        let mut p = crate::syntax::parse_program(src).expect("parses");
        check_program(&mut p, &Builtins::new()).expect("checks");
        let mut pairs = vec![];
        let mut stack = vec![&p.def("main").expect("main").body];
        while let Some(e) = stack.pop() {
            if matches!(e.kind, ExprKind::Tuple(_)) {
                pairs.push(&e.ty);
            }
            each_child(e, &mut |c| stack.push(c));
        }
        assert_eq!(pairs.len(), 3);
        for t in &pairs {
            let (Type::Tuple(x), Type::Tuple(y)) = (pairs[0], *t) else { panic!("{}", show(t)) };
            assert_eq!(show(t), "(R, R)");
            assert!(Types::ptr_eq(x, y), "each tuple has its own copy of {}", show(t));
        }
    }

    /// Issue 14 (memory per line): a type inference built without variables (a pair of literals,
    /// a tuple of them) is not changed by the zonk, and is shared all the same (`Made::canon`).
    #[test]
    fn closed_types_built_per_node_are_shared() {
        let src = "def main x =\n  let a = ((1.0, 2.0), 1) in\n  let b = ((3.0, 4.0), 2) in\n  x * fst (fst a) * snd (fst b)\n";
        let mut p = crate::syntax::parse_program(src).expect("parses");
        check_program(&mut p, &Builtins::new()).expect("checks");
        let mut outer = vec![];
        let mut stack = vec![&p.def("main").expect("main").body];
        while let Some(e) = stack.pop() {
            if matches!(&e.kind, ExprKind::Tuple(es) if es.len() == 2 && matches!(es[1].kind, ExprKind::Int(_))) {
                outer.push(&e.ty);
            }
            each_child(e, &mut |c| stack.push(c));
        }
        assert_eq!(outer.len(), 2);
        let (Type::Tuple(x), Type::Tuple(y)) = (outer[0], outer[1]) else { panic!("{}", show(outer[0])) };
        assert_eq!(show(outer[0]), "((R, R), Z)");
        assert!(Types::ptr_eq(x, y), "each tuple has its own copy of {}", show(outer[0]));
    }

    /// Hash-consing in the final zonk: every node whose zonked type is `R → (R, R)` (functions and
    /// tuples of compound parts, not only tuples of leaves) holds the same allocation.
    #[test]
    fn equal_zonked_compound_types_are_one_allocation() {
        let src = "def main x =\n  let f = \\y -> (y * x, (y, x)) in\n  let g = \\z -> (z + x, (x, z)) in\n  let h = \\w -> (w * x, (w, w)) in\n  fst (f 1.0) + fst (g 2.0) + fst (h 3.0)\n";
        let mut p = crate::syntax::parse_program(src).expect("parses");
        check_program(&mut p, &Builtins::new()).expect("checks");
        let mut funs = vec![];
        let mut stack = vec![&p.def("main").expect("main").body];
        while let Some(e) = stack.pop() {
            // (main itself is a lambda too, of type R → R)
            if matches!(e.kind, ExprKind::Lam(..)) && show(&e.ty) != "R → R" {
                funs.push(&e.ty);
            }
            each_child(e, &mut |c| stack.push(c));
        }
        assert_eq!(funs.len(), 3);
        for t in &funs {
            assert_eq!(show(t), "R → (R, (R, R))");
            let (Type::Fun(ab0), Type::Fun(ab)) = (funs[0], *t) else { panic!("{}", show(t)) };
            let (Type::Tuple(b0), Type::Tuple(b)) = (&ab0.1, &ab.1) else { panic!("{}", show(t)) };
            assert!(Types::ptr_eq(b0, b), "each function has its own copy of its result {}", show(&ab.1));
            assert!(std::rc::Rc::ptr_eq(ab0, ab), "each function has its own copy of {}", show(t));
        }
    }

    /// Session 43: `Made`'s look-ups by borrowed parts (`pair_from`, `tuple_from`, `con_from`) find
    /// what the tables' own keys hold, made either way, and make nothing new for parts made before.
    /// (Seen failing with `dyn PairKey`'s hash of its first side only.)
    #[test]
    fn made_types_are_found_by_borrowed_parts() {
        use std::rc::Rc;
        let mut made = Made::default();
        let m = Type::con("M", vec![Type::Var(3)]);
        let p = made.pair(Rc::new((m.clone(), Type::Real)));
        assert!(Rc::ptr_eq(&p, &made.pair_from(m.clone(), Type::Real)), "a pair made by `pair` is found by its parts");
        let q = made.pair_from(Type::Real, m.clone());
        assert!(!Rc::ptr_eq(&p, &q) && Rc::ptr_eq(&q, &made.pair_from(Type::Real, m.clone())), "other parts, another pair, once");
        assert!(Rc::ptr_eq(&q, &made.pair(Rc::new((Type::Real, m.clone())))), "a pair made by `pair_from` is found by `pair`");
        let Type::Tuple(t) = made.tuple(vec![m.clone(), Type::Int].into()) else { panic!("a tuple") };
        let Type::Tuple(u) = made.tuple_from(&[m.clone(), Type::Int]) else { panic!("a tuple") };
        assert!(Types::ptr_eq(&t, &u), "a tuple is found by its parts");
        let Type::Tuple(w) = made.tuple_from(&[m.clone(), Type::Int, Type::Int]) else { panic!("a tuple") };
        assert!(!Types::ptr_eq(&t, &w), "more parts, another tuple");
        let name = interned("Staged");
        let c = made.con(&name, vec![m.clone()].into(), None);
        assert_eq!(parts(&c), parts(&made.con_from(&name, &[m.clone()])), "a constructor is found by its name and parts");
        let d = made.con_from(&name, &[m.clone(), m.clone()]);
        assert_ne!(parts(&c), parts(&d), "more arguments, another constructor");
        assert_eq!(parts(&d), parts(&made.con(&name, vec![m.clone(), m.clone()].into(), None)), "made by `con_from`, found by `con`");
        assert_eq!((made.pairs.len(), made.tuples.len(), made.cons.len()), (2, 2, 2));
    }

    /// The zonk's hash-consing merges constructors by their name's text (not all of them share
    /// `Type::con`'s one allocation a name) and parts by their allocations.
    #[test]
    fn made_types_are_one_allocation_by_name_text_and_parts() {
        use std::rc::Rc;
        let mut made = Made::default();
        let con = |m: &mut Made, name: &str, arg: &Type| m.con(&Rc::from(name), vec![arg.clone()].into(), None);
        let (Type::Con(a), Type::Con(b), Type::Con(c)) = (con(&mut made, "M", &Type::Real), con(&mut made, "M", &Type::Real), con(&mut made, "N", &Type::Real)) else {
            panic!("constructors")
        };
        assert!(Rc::ptr_eq(&a, &b), "two `M R`s made from two allocations of the name are one");
        assert!(!Rc::ptr_eq(&a, &c), "`N R` is not `M R`");
        let m = Type::Con(a.clone());
        let (Type::Tuple(x), Type::Tuple(y)) = (made.tuple(vec![m.clone(), Type::Int].into()), made.tuple(vec![m.clone(), Type::Int].into())) else {
            panic!("tuples")
        };
        assert!(Types::ptr_eq(&x, &y));
        let (Type::Tuple(z), Type::Tuple(w)) = (made.tuple(vec![Type::Int, m.clone()].into()), made.tuple(vec![m.clone(), Type::Real].into())) else {
            panic!("tuples")
        };
        assert!(!Types::ptr_eq(&x, &z) && !Types::ptr_eq(&x, &w), "other parts, another type");
        let (p, q) = (made.pair(Rc::new((m.clone(), Type::Int))), made.pair(Rc::new((Type::Con(b), Type::Int))));
        assert!(Rc::ptr_eq(&p, &q), "a pair of the same parts is one allocation");
        assert!(!Rc::ptr_eq(&p, &made.pair(Rc::new((Type::Int, m.clone())))), "other parts, another pair");
    }

    /// The zonk's memo lets go of the types no one else holds (what inference built for nodes the
    /// walk has replaced), and keeps the ones still held.
    #[test]
    fn a_sweep_drops_the_entries_only_the_memo_holds() {
        let held = Type::tup(vec![Type::Real, Type::Var(0)]);
        let mut memo = Memo { vars: Chunked::default(), done: vec![], seen: Default::default(), sweep_at: SWEEP_MIN, made: Made::default() };
        for t in [held.clone(), Type::fun(Type::Var(1), Type::Real), Type::con("M", vec![Type::Var(2)])] {
            memo.seen.insert(ByParts(t.clone()), Some(Type::Real));
        }
        assert_eq!(memo.seen.len(), 3);
        memo.sweep();
        assert_eq!(memo.seen.len(), 1, "the function and the constructor are held by their keys alone");
        assert!(memo.seen.contains_key(&ByParts(held.clone())));
        assert_eq!(memo.sweep_at, SWEEP_MIN);
    }

    /// Local binders' types by id while in scope: an id bound again takes its new type until its
    /// scope ends, then has its old one back; an id never bound, or out of scope, has none; the table
    /// holds the binders in scope only.
    #[test]
    fn locals_by_id_in_scope() {
        let mut l = Locals::default();
        l.insert(3, Type::Real);
        let outer = l.mark();
        l.insert(u32::MAX - 1, Type::Int);
        l.insert(3, Type::Bool);
        l.insert(0, Type::Unit);
        assert_eq!(l.get(3), Some(&Type::Bool));
        assert_eq!(l.get(0), Some(&Type::Unit));
        assert_eq!(l.get(u32::MAX - 1), Some(&Type::Int));
        assert_eq!(l.get(2), None);
        l.undo(outer);
        assert_eq!(l.get(3), Some(&Type::Real), "the outer binding is back");
        assert_eq!((l.get(0), l.get(u32::MAX - 1)), (None, None));
        for id in 10..100_000 {
            let m = l.mark();
            l.insert(id, Type::Real);
            l.insert(id + 1_000_000, Type::Int);
            l.undo(m);
        }
        assert_eq!(l.types.len(), 1);
        assert!(l.types.capacity() < 64 && l.undo.capacity() < 64, "what went out of scope is let go");
    }

    /// A let chain whose right sides bind names of their own: the check holds a binder until its last
    /// use, at most to its scope's end, not every binder of the program (fails with a table of every
    /// binder met: 4n + 1 here; with each binder held to its scope's end, the chain's: n + 4).
    #[test]
    fn the_check_holds_only_the_binders_in_scope() {
        let n = 2000;
        let mut src = String::from("def main x =\n");
        for k in 0..n {
            let prev = if k == 0 { "x".to_string() } else { format!("v{}", k - 1) };
            src += &format!("  let v{k} = (let (a, b) = ({prev}, 2.0) in (\\c -> c * b) a) in\n");
        }
        src += &format!("  v{}\n", n - 1);
        // (on a thread of its own with a deep stack, as the pipeline runs: the counter is that thread's)
        let held = crate::limits::run_with_stack(move || {
            let mut p = crate::syntax::parse_program(&src).expect("parses");
            LOCALS_HELD.with(|m| m.set(0));
            check_program(&mut p, &Builtins::new()).expect("checks");
            LOCALS_HELD.with(|m| m.get())
        });
        assert!(held <= 8, "{held} binders held at once");
    }

    /// Issue 14 item 4: a polymorphic head's type is settled as far as it goes (up to `SETTLE_PARTS`
    /// parts), not three levels deep: the uses of `f : a → ((a, (a, (a, a))), R)` share one settled
    /// type before the zonk (fails with the bound of 3 levels: each use kept its own innermost
    /// tuples, so its own type).
    #[test]
    fn deep_instantiated_heads_share_their_settled_type() {
        let src = "def main x =\n  let f = \\y -> ((y, (y, (y, y))), 1.0) in\n  let a = f 1.0 in\n  let b = f 2.0 in\n  f 3.0\n";
        let mut p = crate::syntax::parse_program(src).expect("parses");
        let builtins = Builtins::new();
        let mut cx = Cx::new(&builtins);
        cx.infer(&mut p.defs[0].body).expect("checks");
        let mut heads: Vec<&Type> = vec![];
        let mut e = &p.defs[0].body;
        loop {
            e = match &e.kind {
                ExprKind::Lam(_, pb) => &pb.1,
                ExprKind::Let(prb) => {
                    let (_, rb) = &**prb;
                    if let ExprKind::App(fa) = &rb.0.kind {
                        heads.push(&fa.0.ty);
                    }
                    &rb.1
                }
                ExprKind::App(fa) => {
                    heads.push(&fa.0.ty);
                    break;
                }
                k => panic!("unexpected {k:?}"),
            };
        }
        assert_eq!(heads.len(), 3);
        assert_eq!(show(&cx.zonk(heads[0])), "R → ((R, (R, (R, R))), R)");
        for f in &heads[1..] {
            assert!(matches!(f, Type::Fun(_)) && parts(f) == parts(heads[0]), "{f:?} is not the first head's type");
        }
    }

    /// The types inference (a checker made directly: it settles at any size) gives the tuples of
    /// `src`'s main, as they stand before the zonk.
    fn tuple_types_inferred(src: &str) -> Vec<Type> {
        let mut p = crate::syntax::parse_program(src).expect("parses");
        let builtins = Builtins::new();
        let mut cx = Cx::new(&builtins);
        cx.infer(&mut p.defs[0].body).expect("checks");
        let mut tuples: Vec<Type> = vec![];
        let mut stack = vec![&p.defs[0].body];
        while let Some(e) = stack.pop() {
            if let ExprKind::Tuple(_) = e.kind {
                tuples.push(e.ty.clone());
            }
            each_child(e, &mut |c| stack.push(c));
        }
        tuples
    }

    /// Issue 14 item 4: once a link of the outermost spine is inferred, its nodes' types are settled:
    /// two links whose lambda's parameter is unused until the link applies it (a translation's
    /// `linλz → counted zeroStaged`) share their `(R, R → R)` before the zonk (fails without
    /// `settle_nodes`: each tuple holds its own parameter's variable, bound later).
    #[test]
    fn a_spines_links_share_their_settled_node_types() {
        let src = "def main x =\n  let v = (let a = (1.0, \\z -> 2.0) in (snd a) 3.0) in\n  let w = (let c = (4.0, \\z -> 5.0) in (snd c) v) in\n  v + w\n";
        let tuples = tuple_types_inferred(src);
        assert_eq!(tuples.len(), 2);
        assert_eq!(show(&tuples[0]), "(R, R → R)", "settled: no variable left");
        assert!(parts(&tuples[0]) == parts(&tuples[1]), "{:?} and {:?} are two allocations", tuples[0], tuples[1]);
    }

    /// A link's lambda whose parameter the next link binds (CHAD's `λd → pure ()` of a literal,
    /// bound where the product uses it): its type is settled once the next link is inferred, and is
    /// the one `(R, R → R)` of the later link's tuple, not `(R, a → R)` of its own until the zonk.
    #[test]
    fn a_link_is_settled_once_the_next_link_has_bound_its_types() {
        let src = "def main x =\n  let a = (1.0, \\z -> 2.0) in\n  let u = (snd a) 3.0 in\n  let c = (4.0, \\z -> 5.0) in\n  let w = (snd c) u in\n  w + x\n";
        let tuples = tuple_types_inferred(src);
        assert_eq!(tuples.len(), 2);
        for t in &tuples {
            assert_eq!(show(t), "(R, R → R)", "settled after the next link: no variable left");
        }
        assert!(parts(&tuples[0]) == parts(&tuples[1]), "{:?} and {:?} are two allocations", tuples[0], tuples[1]);
    }

    /// The variables made in a link are bound, by the link's end, to types as unification met them
    /// (`snd`'s result variable to the lambda's `a → R` with `a` since bound to R, an instantiated
    /// scheme's copy): each binding is settled with the link, so that the substitution holds no
    /// copy the nodes have let go.
    #[test]
    fn a_links_variables_are_bound_to_settled_types() {
        let src = "def main x =\n  let a = (1.0, \\z -> 2.0) in\n  let u = (snd a) 3.0 in\n  let c = (4.0, \\z -> 5.0) in\n  let w = (snd c) u in\n  w + x\n";
        let mut p = crate::syntax::parse_program(src).expect("parses");
        let builtins = Builtins::new();
        let mut cx = Cx::new(&builtins);
        cx.infer(&mut p.defs[0].body).expect("checks");
        let mut compound = 0;
        for v in 0..cx.subst.len() {
            let Some(t) = cx.subst[v].clone() else { continue };
            if !matches!(t, Type::Tuple(_) | Type::Fun(_) | Type::Lin(_) | Type::Sum(_) | Type::Con(_)) {
                continue;
            }
            compound += 1;
            let mut vars = BTreeSet::new();
            free_vars(&t, &mut vars);
            let bound: Vec<u32> = vars.into_iter().filter(|&w| cx.subst[w as usize].is_some()).collect();
            assert!(bound.is_empty(), "variable {v} is bound to {t:?}, which holds the bound variables {bound:?}");
        }
        assert!(compound >= 2, "{compound} variables bound to compound types: the test no longer tests");
    }

    /// The substitution's storage grows a chunk at a time: never more than a chunk over its length
    /// (fails with a vector that doubles: 131,072 for 100,000), and reads back what was pushed.
    #[test]
    fn the_substitution_grows_a_chunk_at_a_time() {
        let mut c: Chunked<u32> = Chunked::default();
        for k in 0..100_000u32 {
            c.push(k);
        }
        let capacity: usize = c.chunks.iter().map(|ch| ch.capacity()).sum();
        assert!(capacity <= c.len() + CHUNK, "capacity {capacity} for {}", c.len());
        assert_eq!((c.len(), c[0], c[4095], c[4096], c[99_999]), (100_000, 0, 4095, 4096, 99_999));
        assert_eq!((c.get(100_000), c.get(77_777).copied()), (None, Some(77_777)));
        c[5] = 7;
        *c.get_mut(70_000).expect("pushed") = 1;
        assert_eq!((c[5], c[70_000]), (7, 1));
        let f = Chunked::filled(3u8, 5000);
        assert_eq!((f.len(), f[4999], f.get(5000)), (5000, 3, None));
    }

    /// An instantiation copies only the paths to its variables: its closed parts are the scheme's
    /// own (fails with a `rename` that rebuilds every part).
    #[test]
    fn renaming_shares_the_parts_without_variables() {
        let io = Type::con("M", vec![Type::Unit]);
        let closed = Type::lin(Type::Real, Type::fun(Type::con("Staged", vec![Type::Real]), io.clone()));
        let t = Type::fun(Type::tup(vec![Type::Int, Type::Var(0)]), closed.clone());
        let r = rename(&t, &mut |v| Type::Var(v + 10));
        assert_eq!(show(&r), "(Z, b10) → R ⊸ Staged R → M ()".replace("b10", &show(&Type::Var(10))));
        let (Type::Fun(ab), Type::Lin(cd)) = (&r, &closed) else { panic!("{}", show(&r)) };
        let Type::Lin(ef) = &ab.1 else { panic!() };
        assert!(std::rc::Rc::ptr_eq(ef, cd), "the closed result is the scheme's own");
        let same = rename(&closed, &mut |v| Type::Var(v + 10));
        assert!(matches!((&same, &closed), (Type::Lin(x), Type::Lin(y)) if std::rc::Rc::ptr_eq(x, y)));
    }

    thread_local! {
        /// `check` settles at any size (its `SETTLE_FROM` aside).
        pub(super) static SETTLE_ALL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        /// `settle` walks again where `Cx::closed` has the answer.
        pub(super) static CLOSED_OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        /// `Cx::apply_builtin` instantiates and unifies always, as before session 45.
        pub(super) static MATCH_OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        /// How many builtin applications `Cx::apply_builtin` has read the instance of off their argument.
        pub(super) static MATCHED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        /// `check` leaves the nodes' types as inference and settling left them (no final zonk).
        pub(super) static ZONK_OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        /// The most local binders the checker held at once on this thread.
        pub(super) static LOCALS_HELD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        /// `ZONK_KEPT` for the checks on this thread (0: the constant).
        pub(super) static ZONK_KEPT_AT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        /// The most entries the zonk's memo held at once on this thread.
        pub(super) static MEMO_HELD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        /// How many inference variables the last `check` on this thread made.
        pub(super) static VARIABLES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        /// Steps of the checker's type walks on this thread: variables followed, `occurs`, `zonk`
        /// and `canon` visits.
        static WALKED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    pub(super) fn walked() {
        WALKED.with(|w| w.set(w.get() + 1));
    }

    /// The type walks' steps to check `src(n)`.
    fn walks(src: impl Fn(usize) -> String, n: usize) -> u64 {
        let src = src(n);
        // (on a thread of its own with a deep stack, as the pipeline runs: the counter is that thread's)
        crate::limits::run_with_stack(move || {
            let mut p = crate::syntax::parse_program(&src).expect("parses");
            WALKED.with(|w| w.set(0));
            check_program(&mut p, &Builtins::new()).expect("checks");
            WALKED.with(|w| w.get())
        })
    }

    /// Issue 14: a tuple nested n deep, a function taking it apart level by level, and a sum of n
    /// products nested as deep (forward's `primal_T` and `dot_T` of such an output) check in work
    /// linear in n. Fails without `compress` (the sum's operands are a chain of variables, which
    /// unification and the arithmetic check followed from its start each time) and without `canon`'s
    /// memo (forward's output: each node's whole type walked again). The zonk's `zonked`, `occurs`'
    /// `linked` and `instantiate`'s map serve the same programs at the CLI's sizes (forward on a
    /// tuple nested 16,000 deep), past what a unit test runs.
    #[test]
    fn nested_tuples_and_sums_check_in_linear_work() {
        let tuple = |n: usize| format!("def main x = {}x{}\n", "(".repeat(n), ", 1.0)".repeat(n));
        let apart = |n: usize| {
            let mut body = "fst v".to_string();
            for k in 1..=n {
                body = format!("let (v, v{k}) = v in ({body}, fst v{k})");
            }
            format!("def parts v = {body}\ndef main x = parts {}((x, 1.0), (1.0, 2.0)){}\n", "(".repeat(n), ", (1.0, 2.0))".repeat(n))
        };
        let sum = |n: usize| {
            let mut body = "a * b".to_string();
            for k in 1..=n {
                body = format!("let (a, a{k}) = a in let (b, b{k}) = b in ({body}) + a{k} * b{k}");
            }
            format!("def dot (a, b) = {body}\n")
        };
        for (what, src) in [("tuple", &tuple as &dyn Fn(usize) -> String), ("apart", &apart), ("sum", &sum)] {
            let (small, large) = (walks(src, 200), walks(src, 800));
            // linear: 4× the size, 4× the steps (quadratic: 16×)
            assert!(large < 6 * small, "{what}: {small} steps at 200, {large} at 800");
        }
        // the forward stage on the tuple: its output checked (the nodes' types shared by `canon`)
        let forward = |n: usize| {
            let src = format!("input 1.5\n{}", tuple(n));
            crate::limits::run_with_stack(move || {
                let (p, s, t) = crate::pipeline::front_end_at(&src, &[], None).expect("front end");
                let builtins = Builtins::new();
                let src = crate::stage::Source { program: &p, input_type: &s, output_type: &t, builtins: &builtins };
                WALKED.with(|w| w.set(0));
                crate::pipeline::prepare(crate::stages::forward::CHAIN.stages[0], &src, &Default::default()).expect("prepared");
                WALKED.with(|w| w.get())
            })
        };
        let (small, large) = (forward(200), forward(800));
        assert!(large < 6 * small, "forward: {small} steps at 200, {large} at 800");
    }

    /// A pattern binds its names to the parts of a type of its shape, an application's type is
    /// its function's result, and arithmetic on an argument known to be R is R: none of them
    /// makes an inference variable (a translation's output has tens of them a line; each was a
    /// substitution entry and a level at the output check's peak, issue 14).
    #[test]
    fn patterns_applications_and_known_arithmetic_make_no_variables() {
        let src = "def f y = y * y\ndef main x =\n  let (a, b) = (x * 2.0, x + 1.0) in\n  let (c, (d, _)) = (a * b, (a - b, ())) in\n  f (f (c + d))\n";
        let mut p = crate::syntax::parse_program(src).expect("parses");
        check_program(&mut p, &Builtins::new()).expect("checks");
        // f's group: f and y, and `y * y`'s operands' type (y's is not known yet); main's: main,
        // x and `x * 2.0`'s. Before: also one per pattern name (4), per later operation (5) and
        // per application (2).
        assert_eq!(VARIABLES.with(|v| v.get()), 6);
        assert_eq!(show(&p.def("main").expect("main").scheme.as_ref().expect("scheme").ty), "R → R");
    }

    thread_local! {
        /// The live heap as this test's probe reports it (0 on every other test's thread).
        static LIVE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// Issue 14 item 4: a check past the memory budget stops with the named budget, not at the
    /// process limit. (The budget is set once per process; its probe reads this thread's figure,
    /// so other tests, on their own threads, never see it exceeded.)
    #[test]
    fn the_check_stops_at_the_memory_budget() {
        // (a big stack: the IR's derived Clone and Drop recurse along the chain)
        crate::limits::run_with_stack(check_stops_at_the_memory_budget);
    }

    fn check_stops_at_the_memory_budget() {
        crate::limits::set_memory_budget(|| LIVE.with(|l| l.get()), 1 << 40);
        let Some((probe, limit)) = crate::limits::memory_budget() else { unreachable!("just set") };
        let mut src = String::from("def main x =\n  let v0 = x * 1.01 in\n");
        for i in 1..2000 {
            src.push_str(&format!("  let v{i} = v{} * 1.01 + 0.5 in\n", i - 1));
        }
        src.push_str("  v1999\n");
        let p = crate::syntax::parse_program(&src).unwrap();
        // within the budget it checks; past it (as the probe of the budget set first reports it) it stops
        let mut ok = p.clone();
        assert!(check_program(&mut ok, &Builtins::new()).is_ok());
        LIVE.with(|l| l.set(u64::MAX));
        if probe() > limit {
            let mut over = p.clone();
            let err = check_program(&mut over, &Builtins::new()).unwrap_err();
            assert!(err.message.starts_with("stopped: the memory budget ("), "{}", err.message);
            assert!(err.message.ends_with("ran out while type-checking"), "{}", err.message);
            // A stage's output is mostly generated nodes (no span): the stop is located at the last
            // node made from the source text, here the first lines', not without line:col.
            let mut generated = p.clone();
            let kept = src.lines().take(3).map(|l| l.len() + 1).sum::<usize>() as u32;
            for d in generated.defs.iter_mut() {
                let mut todo = vec![&mut d.body];
                while let Some(e) = todo.pop() {
                    if e.span.start >= kept {
                        e.span = Span::NONE;
                    }
                    crate::ir::each_child_mut(e, &mut |c| todo.push(c));
                }
            }
            let err = check_program(&mut generated, &Builtins::new()).unwrap_err();
            assert!(!err.span.is_none() && err.span.start < kept, "{:?}: {}", err.span, err.message);
        }
        LIVE.with(|l| l.set(0));
    }

    #[test]
    fn local_functions_are_generalised_like_top_level_ones() {
        let comp = "def main x = let comp f g y = f (g y) in comp (\\b -> if b then x else 0.0) (\\r -> r > 1.0) (comp sin cos x)";
        assert_eq!(main_type(comp, None), Ok("R → R".into()));
        let twice = "def main x = let twice f y = f (f y) in let id = \\z -> z in (twice (\\r -> r * x) x, twice not (id true), id 3)";
        assert_eq!(main_type(twice, None), Ok("R → (R, Bool, Z)".into()));
        // a group is generalised after it, monomorphic inside it
        let group = "def main x = let twice f y = f (f y) and thrice f y = f (twice f y) in (thrice sin x, twice not true)";
        assert_eq!(main_type(group, None), Ok("R → (R, Bool)".into()));
    }

    #[test]
    fn only_values_are_generalised_and_only_over_what_the_environment_does_not_mention() {
        // the value restriction: a pair is not a function, so `fst p` has one type
        let pair = "def main x = let p = (\\y -> y, 1.0) in (fst p 1.0, fst p true)";
        assert!(main_type(pair, None).unwrap_err().contains("type mismatch"));
        // `y`'s type is the enclosing lambda's, not the local function's: not generalised
        let env = "def main x = (\\y -> let g = \\z -> y in (not (g 1.0), g 2.0 + 1.0)) true";
        assert!(main_type(env, None).unwrap_err().contains("type mismatch"));
        // arithmetic is R or Z for the whole definition: `sq` stays monomorphic
        assert!(main_type("def main x = let sq y = y * y in sq 2", None).unwrap().ends_with("→ Z"));
        assert!(main_type("def main x = let sq y = y * y in (sq 2, sq 2.0)", None).is_err());
    }

    #[test]
    fn the_input_point_types_what_main_leaves_open() {
        let src = "def main (x, n) = x * 2.0";
        let open = main_type(src, None).unwrap();
        assert!(open.starts_with("(R, ") && !open.contains('Z'), "{open}");
        let at = Value::pair(Value::Real(1.0), Value::Int(3));
        assert_eq!(main_type(src, Some(at.clone())), Ok("(R, Z) → R".into()));
        // before arithmetic defaults to R
        assert_eq!(main_type("def main (x, k) = if k == k then x else x", Some(at)), Ok("(R, Z) → R".into()));
        let arr = Value::pair(Value::Array(vec![Value::Real(1.0)].into()), Value::Int(3));
        assert_eq!(main_type("def main (a, k) = sum a", Some(arr)), Ok("(Array R, Z) → R".into()));
        // a point that does not fit changes nothing (the pipeline reports it at the point)
        assert_eq!(main_type("def main x = x * x", Some(Value::pair(Value::Real(1.0), Value::Real(2.0)))), Ok("R → R".into()));
    }

    #[test]
    fn a_definitions_open_arithmetic_is_decided_by_a_later_use() {
        let def_type = |src: &str, name: &str, input: Option<Value>| -> Result<String, String> {
            let mut p = crate::syntax::parse_program(src).map_err(|ds| ds[0].message.clone())?;
            check_program_at(&mut p, &Builtins::new(), input.as_ref()).map_err(|d| d.message)?;
            Ok(show(&p.def(name).and_then(|d| d.scheme.clone()).expect("def").ty))
        };
        // `sq`'s group ends before main's: its arithmetic waits for main's use (it was R → R, and
        // `sq k` failed with "expected Z, found R")
        let src = "def sq x = x * x\ndef main k = real (sq k)";
        assert_eq!(def_type(src, "sq", None), Ok("Z → Z".into()));
        assert_eq!(def_type(src, "main", None), Ok("Z → R".into()));
        // through a definition between them, and decided by the input point
        let src = "def sq x = x * x\ndef twice x = sq x + sq x\ndef main k = twice k";
        assert_eq!(def_type(src, "sq", Some(Value::Int(3))), Ok("Z → Z".into()));
        assert_eq!(def_type(src, "main", Some(Value::Int(3))), Ok("Z → Z".into()));
        // nothing decides: R, as before
        assert_eq!(def_type("def sq x = x * x\ndef main y = 1.0", "sq", None), Ok("R → R".into()));
        // monomorphic still: used at both, the second use is the error
        let both = def_type("def sq x = x * x\ndef main (y, k) = sq y * real (sq k)", "main", None);
        assert_eq!(both, Err("type mismatch: expected Z, found R".into()));
        // and only R or Z, at the use
        let tuple = def_type("def f x = x + x\ndef main y = f (y, y)", "main", None);
        assert!(tuple.as_ref().is_err_and(|m| m.starts_with("type mismatch: expected R or Z, found (")), "{tuple:?}");
    }

    /// Every node's type (`{:?}`: the structure, not the allocation) and every scheme of `p`.
    fn types_of(p: &Program) -> String {
        let mut out = String::new();
        for d in &p.defs {
            out += &format!("{:?}\n", d.scheme);
            let mut stack = vec![&d.body];
            while let Some(e) = stack.pop() {
                out += &format!("{:?}\n", e.ty);
                each_child(e, &mut |c| stack.push(c));
            }
        }
        out
    }

    /// `p` with its `k`-th real literal (in a walk's order, cyclically) made `true`: ill-typed, mostly.
    fn with_a_boolean(p: &Program, k: usize) -> Program {
        let mut p = p.clone();
        let mut reals: Vec<&mut Expr> = vec![];
        let mut stack: Vec<&mut Expr> = p.defs.iter_mut().map(|d| &mut d.body).collect();
        while let Some(e) = stack.pop() {
            if matches!(e.kind, ExprKind::Real(_)) {
                reals.push(e);
                continue;
            }
            each_child_mut(e, &mut |c| stack.push(c));
        }
        let n = reals.len();
        if let Some(e) = reals.into_iter().nth(k % n.max(1)) {
            e.kind = ExprKind::Bool(true);
        }
        p
    }

    /// Session 45: a polymorphic builtin's instance read off its argument (`Cx::apply_builtin`) is
    /// what instantiating and unifying gives. On the outputs of every stage for every example, checked
    /// with settling at any size and without: every node's type, every scheme (their variables'
    /// numbers too) and the variables made, and the diagnostic (message and span) of ill-typed
    /// mutations are the same read off and instantiated; and most applications are read off (seen failing with
    /// each fresh variable left unbound where its part was found: the types differ).
    #[test]
    fn builtin_instances_read_off_arguments_agree_with_instantiating() {
        crate::limits::run_with_stack(|| {
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
            let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|f| f.unwrap().path()).filter(|f| f.extension().is_some_and(|x| x == "cot")).collect();
            files.sort();
            let both = |p: &Program, b: &Builtins| {
                let run = |off: bool| {
                    MATCH_OFF.with(|c| c.set(off));
                    let mut q = p.clone();
                    let r = check_program(&mut q, b).map_err(|d| format!("{:?}: {}", d.span, d.message));
                    let made = VARIABLES.with(|v| v.get());
                    MATCH_OFF.with(|c| c.set(false));
                    // (a check that fails leaves its nodes' types unzonked, as far as it went: no one reads them)
                    match r {
                        Ok(()) => (Ok(()), types_of(&q), made),
                        Err(m) => (Err(m), String::new(), 0),
                    }
                };
                (run(false), run(true))
            };
            let (mut compared, mut failed) = (0, 0);
            MATCHED.with(|m| m.set(0));
            for settle in [true, false] {
                SETTLE_ALL.with(|s| s.set(settle));
                for f in &files {
                    let text = std::fs::read_to_string(f).unwrap();
                    let Ok((p, s, t)) = crate::pipeline::front_end(&text, &[]) else { continue };
                    let b = Builtins::new();
                    let src = crate::stage::Source { program: &p, input_type: &s, output_type: &t, builtins: &b };
                    for st in crate::stages::all() {
                        let id = st.info().id;
                        let Ok(out) = crate::pipeline::prepare(st, &src, &Default::default()) else { continue };
                        let (with, without) = both(&out.program, &out.builtins);
                        assert!(with == without, "{} through {id}: the check differs read off ({:?})", f.display(), with.0);
                        for k in [0, 3, 17] {
                            let bad = with_a_boolean(&out.program, k);
                            let (with, without) = both(&bad, &out.builtins);
                            assert!(with == without, "{} through {id}, literal {k} made `true`: {:?} and {:?}", f.display(), with.0, without.0);
                            failed += with.0.is_err() as usize;
                        }
                        compared += 1;
                    }
                }
            }
            SETTLE_ALL.with(|s| s.set(false));
            let matched = MATCHED.with(|m| m.get());
            assert!(compared >= 500 && failed >= 500 && matched >= 10_000, "{compared} outputs compared, {failed} mutations ill-typed, {matched} applications read off: the test no longer tests");
        })
    }

    /// Session 45: `Locals::count_uses` counts in one walk what two walks counted: a use whose id is
    /// past the table's bound when it is met (here the first use walked, of an id only the nodes
    /// after it make small enough) is counted once the bound is known, and ids sparser than the
    /// program's nodes get no table (seen failing with the uses kept aside dropped: id 20,000's count 0).
    #[test]
    fn uses_are_counted_in_one_walk_whatever_order_the_ids_come_in() {
        // (on a thread of its own with a deep stack, as the pipeline runs)
        crate::limits::run_with_stack(uses_counted_in_one_walk)
    }

    fn uses_counted_in_one_walk() {
        let n = 3000;
        let mut src = String::from("def main x =\n");
        for k in 0..n {
            let prev = if k == 0 { "x".to_string() } else { format!("v{}", k - 1) };
            src += &format!("  let v{k} = {prev} * 2.0 + {prev} in\n");
        }
        src += &format!("  v{}\n", n - 1);
        let p = crate::syntax::parse_program(&src).expect("parses");
        // every use by id, counted plainly
        let counted = |p: &Program| {
            let mut by_id: std::collections::BTreeMap<u32, usize> = Default::default();
            let mut stack: Vec<&Expr> = p.defs.iter().map(|d| &d.body).collect();
            while let Some(e) = stack.pop() {
                if let ExprKind::Var(v) = &e.kind {
                    if !v.is_global() {
                        *by_id.entry(v.id).or_default() += 1;
                    }
                }
                each_child(e, &mut |c| stack.push(c));
            }
            by_id
        };
        // the first use the walk meets given an id past 4 nodes + 4096, below the whole program's bound
        let with_first_use = |p: &Program, id: u32| {
            let mut q = p.clone();
            let mut stack: Vec<&mut Expr> = q.defs.iter_mut().map(|d| &mut d.body).collect();
            while let Some(e) = stack.pop() {
                if let ExprKind::Var(v) = &mut e.kind {
                    if !v.is_global() {
                        v.id = id;
                        break;
                    }
                }
                each_child_mut(e, &mut |c| stack.push(c));
            }
            q
        };
        let q = with_first_use(&p, 20_000);
        let mut locals = Locals::default();
        let (nodes, groups) = locals.count_uses(&q);
        assert!(nodes > 10_000 && sparse_bound(nodes) >= 20_000, "{nodes} nodes");
        assert_eq!(groups, vec![vec![0]]);
        let want = counted(&q);
        assert_eq!(want.get(&20_000), Some(&1));
        for (id, c) in &want {
            assert_eq!(locals.uses[*id as usize] as usize, (*c).min(255), "id {id}");
        }
        assert_eq!(locals.uses.iter().map(|&c| c as usize).sum::<usize>(), want.values().map(|&c| c.min(255)).sum::<usize>());
        // sparser than the nodes: no table
        let mut locals = Locals::default();
        locals.count_uses(&with_first_use(&p, 1 << 30));
        assert!(locals.uses.is_empty());
    }

    /// Session 42: `settle`'s answers remembered for closed walks (`Cx::closed`) are what walking
    /// again gives. On the outputs of four stages that settle much (their nodes share instantiated
    /// and `recent`-made parts) for every example, checked settling at any size: every node's type,
    /// every scheme, and the diagnostic (message and span) of ill-typed mutations are the same with
    /// the memo and without it, and so is every node's type before the final zonk (session 43: seen
    /// failing with a remembered answer replaced by the type unsettled, `shallow`, which the final
    /// types alone did not see).
    #[test]
    fn remembered_closed_settles_agree_with_walking_again() {
        crate::limits::run_with_stack(|| {
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
            let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|f| f.unwrap().path()).filter(|f| f.extension().is_some_and(|x| x == "cot")).collect();
            files.sort();
            let ids = ["dualrev/cayley", "dualrev/staged", "chad/monadic", "krawiec/monadic"];
            let both = |p: &Program, b: &Builtins| {
                let run = |off: bool| {
                    CLOSED_OFF.with(|c| c.set(off));
                    let mut q = p.clone();
                    let r = check_program(&mut q, b).map_err(|d| format!("{:?}: {}", d.span, d.message));
                    // (and the types as settling left them, before the final zonk: a remembered
                    // answer merely less settled than walking again gives has the same zonk)
                    ZONK_OFF.with(|z| z.set(true));
                    let mut unzonked = p.clone();
                    let _ = check_program(&mut unzonked, b);
                    ZONK_OFF.with(|z| z.set(false));
                    CLOSED_OFF.with(|c| c.set(false));
                    (r, types_of(&q), types_of(&unzonked))
                };
                (run(false), run(true))
            };
            SETTLE_ALL.with(|s| s.set(true));
            let (mut compared, mut failed) = (0, 0);
            for f in &files {
                let text = std::fs::read_to_string(f).unwrap();
                let Ok((p, s, t)) = crate::pipeline::front_end(&text, &[]) else { continue };
                let b = Builtins::new();
                let src = crate::stage::Source { program: &p, input_type: &s, output_type: &t, builtins: &b };
                for id in ids {
                    let Ok(out) = crate::pipeline::prepare(crate::stages::find(id).unwrap(), &src, &Default::default()) else { continue };
                    let (with, without) = both(&out.program, &out.builtins);
                    assert!(with == without, "{} through {id}: the check differs with the memo", f.display());
                    for k in [0, 7, 31] {
                        let bad = with_a_boolean(&out.program, k);
                        let (with, without) = both(&bad, &out.builtins);
                        assert!(with == without, "{} through {id}, literal {k} made `true`: {:?} and {:?}", f.display(), with.0, without.0);
                        failed += with.0.is_err() as usize;
                    }
                    compared += 1;
                }
            }
            SETTLE_ALL.with(|s| s.set(false));
            assert!(compared >= 100 && failed >= 100, "{compared} outputs compared, {failed} mutations ill-typed: the test no longer tests");
        })
    }

    /// Issue 14 item 4 (session 43): on a long chad/naive-ho output, whose nodes hold types of their
    /// own line by line (each Γ's `EV Γ`, `R → EV Γ`, …), the zonk's memo stays within its bound (it
    /// held an entry for each, ~90 MB of maps at the check's peak on 10^5 lines), and every node's
    /// type is the one the memo kept whole gives.
    #[test]
    fn the_zonks_memo_stays_within_its_bound() {
        crate::limits::run_with_stack(|| {
            let lines: String = (0..400).map(|i| format!("  let v{} = v{i} * 1.01 + 0.5 in\n", i + 1)).collect();
            let text = format!("input 1.5\ndef main v0 =\n{lines}  v400\n");
            let (p, s, t) = crate::pipeline::front_end(&text, &[]).unwrap();
            let b = Builtins::new();
            let src = crate::stage::Source { program: &p, input_type: &s, output_type: &t, builtins: &b };
            let out = crate::pipeline::prepare(crate::stages::find("chad/naive-ho").unwrap(), &src, &Default::default()).unwrap();
            let run = |kept: usize| {
                ZONK_KEPT_AT.with(|k| k.set(kept));
                MEMO_HELD.with(|h| h.set(0));
                SETTLE_ALL.with(|s| s.set(true));
                let mut q = out.program.clone();
                let r = check_program(&mut q, &out.builtins);
                SETTLE_ALL.with(|s| s.set(false));
                ZONK_KEPT_AT.with(|k| k.set(0));
                assert!(r.is_ok(), "the output checks");
                // (the allocations the nodes' compound types are)
                let mut allocations = rustc_hash::FxHashSet::default();
                let mut stack: Vec<&Expr> = q.defs.iter().map(|d| &d.body).collect();
                while let Some(e) = stack.pop() {
                    if matches!(e.ty, Type::Tuple(_) | Type::Con(_) | Type::Sum(_) | Type::Fun(_) | Type::Lin(_)) {
                        allocations.insert(parts(&e.ty));
                    }
                    each_child(e, &mut |c| stack.push(c));
                }
                (types_of(&q), MEMO_HELD.with(|h| h.get()), allocations.len())
            };
            let (whole, held_whole, made_whole) = run(usize::MAX);
            let (bounded, held, made) = run(256);
            assert!(held_whole > 2000, "the memo kept whole held {held_whole} entries: the test no longer tests");
            assert!(held <= 1024, "the zonk's memo held {held} entries, its bound 256 (kept whole: {held_whole})");
            assert!(whole == bounded, "the nodes' types differ with the memo bounded");
            assert!(made <= made_whole, "the nodes' types are {made} allocations with the memo bounded, {made_whole} with it whole");
        })
    }
}
