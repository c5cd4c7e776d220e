//! Fast regions: call-free parts of a function body compiled to Rust closures at lowering (issue 13,
//! item 1).
//!
//! DESIGN. After a function body is lowered to `Code`, `regions` replaces every maximal subtree that
//! makes no call (no `App`, `Call`, `Global`, `LetRec`, `CallLazy`; saturated builtins `CallB` are
//! allowed, and a `Lam` is made as the walker makes it, its body having regions of its own) by one
//! node `Code::Fast`. A region is a tree of boxed closures over `&mut Machine`, run
//! inside the walker's `eval`, so frames, re-entrancy, budgets and the heap continuation stack are
//! untouched: a region binds slots of the current frame, builtins inside it are called exactly as the
//! walker calls them (and may re-enter the machine through `apply`). A chain of lets is a loop over
//! its links, not nested closures; a region whose let chain reaches a call (`let y = f x in …`) runs
//! its links, counts the call's `let`, pushes the walker's `Let` frame and starts the `Call` itself
//! (`Body::Let`); when the call returns, the walker binds `y` and runs the next region, so ANF bodies
//! alternate between regions and calls (`run.rs`'s `call_go`: one frame per saturated call) without a
//! trip round the loop for either. A call's arguments that are regions run in place.
//! Closures recurse natively, so a region is at most `MAX_DEPTH` closures deep; deeper expressions
//! are split (the walker runs the node that would exceed the bound, its children are regions),
//! except a long left spine of real arithmetic (`x1 + x2 + … + xn`), which is one closure looping
//! over its nodes (`spine_real`).
//!
//! Reals are unboxed where the checker's types say so (hints per slot and capture, from the types of
//! binders): such a subtree compiles to a closure returning `f64`, and `a + b` never builds a `Value`.
//! The types are only hints: a closure that meets a value that is not a real hands it on
//! (`Miss::Val`) and its parent finishes with the walker's own `prim1`/`prim2` on values, so a
//! wrong hint costs time, never a different result or message. Tuples are scalar-replaced where a
//! let takes apart the tuple its right side builds (`let (a, da) = (let … in (e1, e2))`, the gradient
//! stages' commonest binding): the items go straight to the pattern's parts (`Rhs::Spread`).
//!
//! COUNTERS stay exact: every node of a region counts its step through `Machine::step` (budget,
//! clock, cost model) at the point the walker would, real ops, allocations (a spread tuple's too) and
//! builtins in the walker's order, with the walker's error messages; `Budget::walker` lowers without
//! regions, and crate/tests/engine.rs checks that both engines agree on every example and random program.
//!
//! NEXT STEP: a call's return without the loop (bodies in ANF run by one loop over links and calls with
//! an explicit frame stack), then the same design emitted as WebAssembly (f64 locals).

use super::flat::Flat;
use super::lower::{frame_children as children, Code, GroupCode, LPat};
use super::prim::{prim1, prim2};
use super::run::{binds, kind, Charge, Kont, Next, Res};
use super::{Builtin, Each, Fused, FusedFn, Machine, RunError, ScalarFusedFn};
use crate::prims::{OnInt, OnReal};
use crate::value::Value;
use std::rc::Rc;

/// How many closures deep a region may nest: they recurse natively when they run, and a builtin
/// inside a region that re-enters the machine (`apply`) stacks another run on top, up to
/// `MAX_NESTING` times; wasm's stack is about 1 MB, so regions there are shallower.
pub(crate) const MAX_DEPTH: u32 = if cfg!(target_arch = "wasm32") { 16 } else { 48 };

/// What the checker's types say a slot or capture holds: a real, an integer, or anything else. Only
/// a hint (see the module comment): a wrong one costs time, never a different result.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Scalar {
    Other,
    Real,
    Int,
}

/// Which slots of the frame and which captures of the closure hold reals or integers.
pub(crate) struct Hints<'a> {
    pub slots: &'a [Scalar],
    pub caps: &'a [Scalar],
    /// The fused pairs of builtins the stage's runtime offers (`Fused`).
    pub fused: &'a [Fused],
    /// The builtins a compiled round may call (`RoundCalls`), if the runtime offers them.
    pub calls: Option<&'static super::RoundCalls>,
}

impl Hints<'_> {
    /// Whether the stage's runtime can run a compiled round (`round.rs`): a round-capable fused
    /// record or builtins a round may call.
    pub(crate) fn rounds(&self) -> bool {
        self.calls.is_some() || self.fused.iter().any(|f| f.round.is_some())
    }
    fn slot(&self, s: u32) -> Scalar {
        self.slots.get(s as usize).copied().unwrap_or(Scalar::Other)
    }
    fn cap(&self, i: u32) -> Scalar {
        self.caps.get(i as usize).copied().unwrap_or(Scalar::Other)
    }
}

type GenFn = Box<dyn Fn(&mut Machine<'_>) -> Res<Value>>;
type UnboxedFn<T> = Box<dyn Fn(&mut Machine<'_>) -> Result<T, Miss>>;

/// A compiled expression returning a value. Variables and constants are read in place (no
/// closure call for a leaf, the commonest operand), counting their step as the walker does.
enum Gen {
    Local(u32),
    /// A slot's last read (`Code::Move`).
    Move(u32),
    Capture(u32),
    Const(Value),
    Code(GenFn),
    /// A real or an integer computed unboxed, boxed only here (no closure around the closure).
    Real(Real),
    Int(Int),
}

/// A compiled expression returning an unboxed real or integer (leaves read in place, as `Gen`'s).
enum Unboxed<T> {
    Local(u32),
    Capture(u32),
    Const(T),
    Code(UnboxedFn<T>),
    /// A flat tree (`flat.rs`), and its stepwise closures when it cannot run at once.
    Flat(Box<(Flat<T>, Unboxed<T>)>),
}
type Real = Unboxed<f64>;
type Int = Unboxed<i64>;

/// A scalar a value may hold unboxed (read back with `Word::of`).
trait Scalarlike: super::flat::Word {
    fn boxed(self) -> Value;
}
impl Scalarlike for f64 {
    fn boxed(self) -> Value {
        Value::Real(self)
    }
}
impl Scalarlike for i64 {
    fn boxed(self) -> Value {
        Value::Int(self)
    }
}

impl Gen {
    #[inline(always)]
    fn run(&self, m: &mut Machine<'_>) -> Res<Value> {
        match self {
            Gen::Local(s) => {
                m.step(Charge::Var)?;
                Ok(m.locals[m.bp + *s as usize].clone())
            }
            Gen::Move(s) => {
                m.step(Charge::Var)?;
                Ok(m.take(*s))
            }
            Gen::Capture(i) => {
                m.step(Charge::Var)?;
                Ok(m.env[*i as usize].clone())
            }
            Gen::Const(v) => {
                m.step(Charge::Var)?;
                Ok(v.clone())
            }
            Gen::Code(f) => f(m),
            Gen::Real(r) => settle(r.run(m)),
            Gen::Int(r) => settle(r.run(m)),
        }
    }
}

impl Gen {
    /// `run`, the value pushed onto `out`: a leaf's value is written straight into `out`'s buffer.
    /// (Returned through `Res<Value>` and then pushed, a value was written as separate words and read
    /// back at once as a wider one, a load the processor could not forward from its stores: a stall
    /// on every builtin argument, 7 % of a taping stage's run.)
    #[inline(always)]
    fn push_to(&self, m: &mut Machine<'_>, out: &mut Vec<Value>) -> Res<()> {
        match self {
            Gen::Local(s) => {
                m.step(Charge::Var)?;
                out.push(m.locals[m.bp + *s as usize].clone());
            }
            Gen::Move(s) => {
                m.step(Charge::Var)?;
                out.push(m.take(*s));
            }
            Gen::Capture(i) => {
                m.step(Charge::Var)?;
                out.push(m.env[*i as usize].clone());
            }
            Gen::Const(v) => {
                m.step(Charge::Var)?;
                out.push(v.clone());
            }
            Gen::Code(f) => out.push(f(m)?),
            Gen::Real(r) => out.push(settle(r.run(m))?),
            Gen::Int(r) => out.push(settle(r.run(m))?),
        }
        Ok(())
    }
}

impl<T: Scalarlike> Unboxed<T> {
    #[inline(always)]
    fn run(&self, m: &mut Machine<'_>) -> Result<T, Miss> {
        let v = match self {
            Unboxed::Const(x) => {
                m.step(Charge::Var)?;
                return Ok(*x);
            }
            Unboxed::Code(f) => return f(m),
            Unboxed::Flat(b) => {
                return match b.0.run(m) {
                    Some(x) => Ok(x),
                    None => b.1.run_slow(m),
                }
            }
            Unboxed::Local(s) => {
                m.step(Charge::Var)?;
                &m.locals[m.bp + *s as usize]
            }
            Unboxed::Capture(i) => {
                m.step(Charge::Var)?;
                &m.env[*i as usize]
            }
        };
        match T::of(v) {
            Some(x) => Ok(x),
            None => Err(Miss::Val(v.clone())),
        }
    }
}

impl<T: Scalarlike> Unboxed<T> {
    /// `run` out of line: a flat tree's stepwise fallback (not inlined into its own caller).
    #[inline(never)]
    fn run_slow(&self, m: &mut Machine<'_>) -> Result<T, Miss> {
        self.run(m)
    }

    /// A slot, capture or constant (its read has no effect but its step).
    fn is_leaf(&self) -> bool {
        !matches!(self, Unboxed::Code(_) | Unboxed::Flat(_))
    }
    /// A leaf's scalar read without counting its step (`None`: not a leaf, or not a scalar).
    #[inline(always)]
    fn peek(&self, m: &Machine<'_>) -> Option<T> {
        match self {
            Unboxed::Const(x) => Some(*x),
            Unboxed::Local(s) => T::of(&m.locals[m.bp + *s as usize]),
            Unboxed::Capture(i) => T::of(&m.env[*i as usize]),
            Unboxed::Code(_) | Unboxed::Flat(_) => None,
        }
    }
}

/// Why a real-typed closure has no `f64`: an error, or a value that is not a real (a wrong hint).
enum Miss {
    Err(Box<RunError>),
    Val(Value),
}

impl From<Box<RunError>> for Miss {
    fn from(e: Box<RunError>) -> Miss {
        Miss::Err(e)
    }
}

/// A region: let links run in order, then its value (or the walker's code for the rest).
pub(crate) struct FastCode {
    links: Box<[Link]>,
    body: Body,
    /// The region is an array literal of variables and constants alone (an index function's
    /// `[i]`, `[i, j]`): its items, read without running it (`Machine::apply_ix`).
    lit: Option<Box<[LitItem]>>,
}

/// An item of a region that is an array literal of leaves (`FastCode::lit`).
enum LitItem {
    /// A slot (read or moved).
    Slot(u32),
    Capture(u32),
    Const(Value),
}

struct Link {
    pat: LPat,
    charge: Charge,
    rhs: Rhs,
}

enum Rhs {
    Gen(Gen),
    /// `let (p1, …, pk) = (let … in (e1, …, ek)) in`: the items go straight to the pattern's parts,
    /// the tuple is never built (its step and allocation are counted, as the walker builds it).
    Spread(Box<[Link]>, Box<[Gen]>),
    /// `let (a, _, c) = x in` with `x` a slot or capture and the pattern flat (slots and wildcards,
    /// none of them `x`'s own slot): the items are copied from the tuple where it lies, with no clone
    /// and drop of the tuple and no trip through `bind_pat` (a tuple destructured from a slot
    /// cost ~118 instructions; issue 13, session 15). Anything but a tuple of the pattern's
    /// length takes the walker's path (same message).
    Split(Src, Box<[Option<u32>]>),
}

/// Where a `Split` link's tuple lies: a slot read (`Code::Local`), its last read (`Code::Move`), or
/// a capture.
#[derive(Clone, Copy)]
enum Src {
    Local(u32),
    Move(u32),
    Capture(u32),
}

enum Body {
    Value(Gen),
    Walk(Code),
    /// The rest is `let p = rhs in rest` whose `rhs` makes a call: the region counts the let's step,
    /// leaves the walker's `Let` frame and starts the call itself (no trip round the loop).
    Let(Charge, LPat, Box<Code>, Box<Code>),
}

impl Machine<'_> {
    /// Runs a region in the current frame (called from `eval`; the region counts its own steps).
    pub(super) fn run_fast(&mut self, f: &FastCode) -> Res<Next> {
        run_links(self, &f.links)?;
        match &f.body {
            Body::Value(g) => {
                self.acc = g.run(self)?;
                Ok(Next::Ret)
            }
            Body::Walk(Code::Call(cc)) => self.eval_call(cc),
            Body::Walk(Code::Spine(s)) => self.run_spine(s),
            Body::Walk(c) => Ok(Next::Eval(c)),
            Body::Let(charge, p, rhs, rest) => {
                self.step(*charge)?;
                self.kont.push(Kont::Let(p, &**rest));
                match &**rhs {
                    Code::Call(cc) => self.eval_call(cc),
                    c => Ok(Next::Eval(c)),
                }
            }
        }
    }
}

impl Machine<'_> {
    /// The value of a region that has one (`FastCode::has_value`), run in place (a call's argument).
    #[inline]
    pub(super) fn fast_value(&mut self, f: &FastCode) -> Res<Value> {
        let Body::Value(g) = &f.body else {
            return Err(Box::new(RunError::runtime(crate::diag::Span::NONE, "internal: a region run in place has a value")));
        };
        if !f.links.is_empty() {
            run_links(self, &f.links)?;
        }
        g.run(self)
    }

    /// The index function of `e` (a gather's or scatter's) at the position `ix`: `apply_each(e, ix)`,
    /// for `n` indexes. When `e` is `λp → [x1, …, xn]` with its items variables and constants, the
    /// indexes are written into `out` and `None` returned: the call's depth check, trace, frame depth
    /// and the literal's steps and allocations are counted as `apply_leaf` counts them, and neither
    /// the position's value, the frame nor the array is made (issue 13: the call was half of the
    /// array chain's run on `dot`). Otherwise (or an item not an integer) the index function's result.
    pub(crate) fn apply_ix(&mut self, e: &Each<'_>, ix: &[i64], n: usize, out: &mut Vec<i64>) -> Result<Option<Value>, RunError> {
        let Some((lam, env, group)) = e.lam.filter(|_| self.lam_watcher.is_none()) else {
            return self.apply_each(e, ix_value(ix)).map(Some);
        };
        // (`apply_each`'s dispatch, the body read once as there)
        let Some(fc) = super::run::leaf(lam.code()) else {
            return self.apply_entered(lam, env, group, ix_value(ix)).map(Some);
        };
        match &fc.lit {
            Some(items) if items.len() == n && binds_position(&lam.pat, ix.len()) => {
                // the indexes read first (reading counts nothing); an item reading a slot the
                // pattern does not bind takes the call
                out.clear();
                let mut ints = true;
                for it in items.iter() {
                    let k = match it {
                        LitItem::Slot(s) => match slot_part(&lam.pat, *s) {
                            Some(k) => Some(ix[k]),
                            None => return self.apply_leaf(lam, fc, env, group, ix_value(ix)).map(Some),
                        },
                        LitItem::Capture(i) => env.get(*i as usize).and_then(Value::as_int),
                        LitItem::Const(v) => v.as_int(),
                    };
                    match k {
                        Some(k) => out.push(k),
                        None => ints = false,
                    }
                }
                self.ix_lit(lam, items.len(), ix)?;
                if ints {
                    return Ok(None);
                }
                // an item not an integer: the array, for the caller's message
                Ok(Some(Value::Array(items.iter().map(|it| lit_value(&lam.pat, it, env, ix)).collect())))
            }
            _ => self.apply_leaf(lam, fc, env, group, ix_value(ix)).map(Some),
        }
    }

    /// `apply_leaf`'s counts for `λp → [x1, …, xn]` (`apply_ix`), in its order: the call's depth
    /// check and trace, the frame's depth, the literal's step, each item's, its allocations.
    #[inline(always)]
    fn ix_lit(&mut self, lam: &super::lower::LamCode, n: usize, ix: &[i64]) -> Result<(), RunError> {
        if self.nesting >= super::MAX_NESTING {
            return Err(self.budget_error(super::BudgetKind::Depth, super::MAX_NESTING));
        }
        if self.trace_on && lam.named.is_some() {
            self.trace_named(lam, &ix_value(ix));
        }
        // the frame `open_frame` opens
        if self.depth >= self.budget.depth {
            return Err(self.budget_error(super::BudgetKind::Depth, self.budget.depth));
        }
        self.depth += 1;
        if self.depth > self.max_depth {
            self.max_depth = self.depth;
        }
        // (`collect`'s counts)
        let counted = (|| {
            self.step(Charge::None)?;
            for _ in 0..n {
                self.step(Charge::Var)?;
            }
            self.alloc(n as u64).map_err(Box::new)
        })();
        self.depth -= 1;
        counted.map_err(|e: Box<RunError>| *e)
    }
}

/// The value an index function takes at the position `ix` (an integer, or a tuple of them).
pub(crate) fn ix_value(ix: &[i64]) -> Value {
    if ix.len() == 1 {
        Value::Int(ix[0])
    } else {
        Value::Tuple(ix.iter().map(|&i| Value::Int(i)).collect())
    }
}

/// Whether the parameter pattern `p` binds a position of `nd` indexes as its parts with no check
/// that could fail (a variable or wildcard for one index, a flat tuple of them for more).
fn binds_position(p: &LPat, nd: usize) -> bool {
    match p {
        LPat::Slot(_) | LPat::Wild => nd == 1,
        LPat::Tuple(t) => nd >= 2 && t.0.len() == nd && t.0.iter().all(|q| matches!(q, LPat::Slot(_) | LPat::Wild)),
        LPat::Unit(_) => false,
    }
}

/// Which index of the position the slot `s` holds once `p` (`binds_position`) binds it.
fn slot_part(p: &LPat, s: u32) -> Option<usize> {
    match p {
        LPat::Slot(q) => (*q == s).then_some(0),
        LPat::Tuple(t) => t.0.iter().position(|q| matches!(q, LPat::Slot(q) if *q == s)),
        _ => None,
    }
}

/// A literal's item as a value (`ix_lit`'s fall-back).
fn lit_value(p: &LPat, it: &LitItem, env: &[Value], ix: &[i64]) -> Value {
    match it {
        LitItem::Slot(s) => Value::Int(ix[slot_part(p, *s).unwrap_or(0)]),
        LitItem::Capture(i) => env.get(*i as usize).cloned().unwrap_or(Value::Unit),
        LitItem::Const(v) => v.clone(),
    }
}

impl FastCode {
    /// The region computes its value itself (it hands nothing to the walker).
    pub(super) fn has_value(&self) -> bool {
        matches!(self.body, Body::Value(_))
    }

    /// What the region hands the walker after its links (`spine.rs` reads a call spine through it).
    pub(super) fn tail(&self) -> Tail<'_> {
        match &self.body {
            Body::Value(_) => Tail::Value,
            Body::Walk(c) => Tail::Walk(c),
            Body::Let(ch, p, rhs, rest) => Tail::Let(*ch, p, rhs, rest),
        }
    }

    pub(super) fn has_links(&self) -> bool {
        !self.links.is_empty()
    }
}

/// A region's end (`FastCode::tail`).
pub(super) enum Tail<'a> {
    Value,
    Walk(&'a Code),
    Let(Charge, &'a LPat, &'a Code, &'a Code),
}

impl Machine<'_> {
    /// A region's links alone, as `run_fast` runs them (a call spine runs them between its calls).
    #[inline]
    pub(super) fn region_links(&mut self, f: &FastCode) -> Res<()> {
        run_links(self, &f.links)
    }
}

fn run_links(m: &mut Machine<'_>, links: &[Link]) -> Res<()> {
    for l in links {
        m.step(l.charge)?;
        match &l.rhs {
            Rhs::Gen(rhs) => {
                let v = rhs.run(m)?;
                m.bind(&l.pat, v)?;
            }
            Rhs::Spread(inner, items) => spread(m, &l.pat, inner, items)?,
            Rhs::Split(src, parts) => split(m, &l.pat, *src, parts)?,
        }
    }
    Ok(())
}

/// A split link's right side: the read's step (as `Gen::Local`'s), then each item to its slot in the
/// pattern's order, as `bind_pat` binds them (a moved tuple no one else holds gives its items away).
#[inline(always)]
fn split(m: &mut Machine<'_>, pat: &LPat, src: Src, parts: &[Option<u32>]) -> Res<()> {
    m.step(Charge::Var)?;
    let bp = m.bp;
    match src {
        Src::Local(s) => {
            let vs = match &m.locals[bp + s as usize] {
                Value::Tuple(vs) if vs.len() == parts.len() => vs.clone(),
                v => {
                    let v = v.clone();
                    return m.bind(pat, v);
                }
            };
            to_slots(&mut m.locals, bp, parts, vs.iter(), copy);
            Ok(())
        }
        Src::Capture(i) => match &m.env[i as usize] {
            Value::Tuple(vs) if vs.len() == parts.len() => {
                to_slots(&mut m.locals, bp, parts, vs.iter(), copy);
                Ok(())
            }
            v => {
                let v = v.clone();
                m.bind(pat, v)
            }
        },
        Src::Move(s) => match m.take(s) {
            Value::Tuple(mut vs) if vs.len() == parts.len() => {
                match Rc::get_mut(&mut vs) {
                    Some(items) => to_slots(&mut m.locals, bp, parts, items.iter_mut(), |v| std::mem::replace(v, Value::Unit)),
                    None => to_slots(&mut m.locals, bp, parts, vs.iter(), copy),
                }
                Ok(())
            }
            v => m.bind(pat, v),
        },
    }
}

/// Each item to its part's slot, in the pattern's order; a wildcard's item is not read (`get`
/// copies an item, or moves it out of a tuple no one else holds).
#[inline(always)]
fn to_slots<T>(locals: &mut [Value], bp: usize, parts: &[Option<u32>], items: impl Iterator<Item = T>, mut get: impl FnMut(T) -> Value) {
    for (d, v) in parts.iter().zip(items) {
        if let Some(d) = d {
            super::run::set_slot(&mut locals[bp + *d as usize], get(v));
        }
    }
}

/// A value's copy, a scalar's without `Value::clone`'s out-of-line match.
#[inline(always)]
fn copy(v: &Value) -> Value {
    match v {
        Value::Real(x) => Value::Real(*x),
        Value::Int(i) => Value::Int(*i),
        v => v.clone(),
    }
}

/// A flat tuple pattern's slots (`None` for a wildcard), if no part is `own` (the tuple's slot).
fn flat_parts(pat: &LPat, own: Option<u32>) -> Option<Box<[Option<u32>]>> {
    let LPat::Tuple(t) = pat else { return None };
    t.0.iter()
        .map(|p| match p {
            LPat::Slot(d) if Some(*d) != own => Some(Some(*d)),
            LPat::Wild => Some(None),
            _ => None,
        })
        .collect()
}

/// A spread link's right side, in the walker's order: its lets, the tuple's step, its items, its
/// allocation; then each item bound to its part of the pattern, as `bind` takes a tuple apart.
fn spread(m: &mut Machine<'_>, pat: &LPat, inner: &[Link], items: &[Gen]) -> Res<()> {
    let LPat::Tuple(t) = pat else { return Ok(()) };
    let ps = &t.0;
    run_links(m, inner)?;
    m.step(Charge::None)?;
    if let ([a, b], [pa, pb]) = (items, &ps[..]) {
        let x = a.run(m)?;
        let y = b.run(m)?;
        m.alloc(1).map_err(Box::new)?;
        m.bind(pa, x)?;
        return m.bind(pb, y);
    }
    // items wait on the value stack (an error leaves them to `run_with`'s clean-up)
    let base = m.vals.len();
    for it in items {
        let v = it.run(m)?;
        m.vals.push(v);
    }
    m.alloc(1).map_err(Box::new)?;
    for (k, p) in ps.iter().enumerate() {
        let v = std::mem::replace(&mut m.vals[base + k], Value::Unit);
        m.bind(p, v)?;
    }
    super::run::clear_slots(&mut m.vals, base);
    Ok(())
}

// ---- region formation ----

#[derive(Clone, Copy)]
struct Shape {
    depth: u32,
    nodes: u32,
}

/// Replaces the maximal call-free subtrees of a function body by fast regions.
pub(crate) fn regions(body: &mut Code, h: &Hints) {
    if let Some(s) = mark(body, h) {
        if s.nodes >= 2 {
            convert(body, h);
        }
    }
}

/// A node the closures can run themselves (its children aside).
fn own_ok(c: &Code) -> bool {
    !matches!(c, Code::Global(..) | Code::App(..) | Code::Call(_) | Code::LetRec(..) | Code::CallLazy(..) | Code::Fast(_))
}

/// Marks regions inside `c`; returns `c`'s shape when `c` itself could be (part of) a region, which
/// its parent then decides. Recurses in the expression nesting, as lowering does; let chains are a loop.
fn mark(c: &mut Code, h: &Hints) -> Option<Shape> {
    if matches!(c, Code::Let(..) | Code::LetRec(..)) {
        return chain(c, h);
    }
    if spine_len(c) >= SPINE_MIN && is_real(c, h) {
        return spine_mark(c, h);
    }
    let own = own_ok(c);
    let mut kids = children(c);
    let shapes: Vec<Option<Shape>> = kids.iter_mut().map(|k| mark(k, h)).collect();
    if own && shapes.iter().all(Option::is_some) {
        let shapes = shapes.iter().flatten();
        let depth = 1 + shapes.clone().map(|s| s.depth).max().unwrap_or(0);
        let nodes = 1 + shapes.map(|s| s.nodes).sum::<u32>();
        if depth <= MAX_DEPTH {
            return Some(Shape { depth, nodes });
        }
    }
    for (k, s) in kids.into_iter().zip(shapes) {
        if s.is_some_and(|s| s.nodes >= 2) {
            convert(k, h);
        }
    }
    None
}

/// A left spine of real arithmetic at least this long (`((x1 + x2) + x3) + … + xn`, Efficient
/// CHAD's P_sum) runs as one loop (`spine_real`, `flat.rs`'s `Builder::spine`): as nested closures
/// it was cut every `MAX_DEPTH` nodes and all but the last cut ran on the walker.
pub(super) const SPINE_MIN: usize = MAX_DEPTH as usize / 2;

/// Whether `op` is real arithmetic on two reals (`+ - * /` and the other `OnReal::R2` rows).
pub(super) fn real2(op: crate::prims::Prim) -> bool {
    matches!(op.info().on_real, Some(OnReal::R2(_)))
}

/// How many nodes of real arithmetic `c`'s left spine has (`c`, its left operand, …).
pub(super) fn spine_len(c: &Code) -> usize {
    let (mut n, mut cur) = (0, c);
    while let Code::Prim2(op, a, _, _) = cur {
        if !real2(*op) {
            break;
        }
        n += 1;
        cur = a;
    }
    n
}

/// `mark` for a long left spine of real arithmetic: its nodes, looped over, add one closure to the
/// nesting of their right operands and the spine's leaf, marked each as a child.
fn spine_mark(c: &mut Code, h: &Hints) -> Option<Shape> {
    let len = spine_len(c);
    let mut parts: Vec<&mut Code> = vec![];
    let mut cur = c;
    for _ in 0..len {
        let Code::Prim2(_, a, b, _) = cur else { break };
        parts.push(&mut **b);
        cur = &mut **a;
    }
    parts.push(cur);
    let shapes: Vec<Option<Shape>> = parts.iter_mut().map(|k| mark(k, h)).collect();
    if shapes.iter().all(|s| s.is_some_and(|s| s.depth < MAX_DEPTH)) {
        let depth = 1 + shapes.iter().flatten().map(|s| s.depth).max().unwrap_or(0);
        let nodes = len as u32 + shapes.iter().flatten().map(|s| s.nodes).sum::<u32>();
        return Some(Shape { depth, nodes });
    }
    // the walker runs the spine's nodes; their operands that are regions still run as such
    for (k, s) in parts.into_iter().zip(shapes) {
        if s.is_some_and(|s| s.nodes >= 2) {
            convert(k, h);
        }
    }
    None
}

/// A chain of `let`s and local recursive groups: wholly a region candidate, or cut into runs of
/// call-free links (each a region that hands the rest of the chain to the walker).
fn chain(c: &mut Code, h: &Hints) -> Option<Shape> {
    enum L {
        Let(LPat, Code, Option<Shape>),
        Rec(Rc<GroupCode>, Box<[u32]>),
    }
    let mut cur = std::mem::replace(c, Code::Tuple(Box::new([])));
    let mut links = vec![];
    let mut body = loop {
        cur = match cur {
            Code::Let(p, rhs, body) => {
                let mut rhs = *rhs;
                let s = mark(&mut rhs, h);
                links.push(L::Let(p, rhs, s));
                *body
            }
            Code::LetRec(g, slots, body) => {
                links.push(L::Rec(g, slots));
                *body
            }
            other => break other,
        };
    };
    let body_shape = mark(&mut body, h);
    let fits = |s: &Option<Shape>| s.is_some_and(|s| s.depth < MAX_DEPTH);
    if fits(&body_shape) && links.iter().all(|l| matches!(l, L::Let(_, _, s) if fits(s))) {
        let mut depth = body_shape.map_or(0, |s| s.depth);
        let mut nodes = body_shape.map_or(0, |s| s.nodes);
        let mut out = body;
        for l in links.into_iter().rev() {
            if let L::Let(p, rhs, Some(s)) = l {
                depth = depth.max(s.depth);
                nodes += 1 + s.nodes;
                out = Code::Let(p, Box::new(rhs), Box::new(out));
            }
        }
        *c = out;
        return Some(Shape { depth: depth + 1, nodes });
    }
    // `tail` is the chain after the links seen so far (walking back); `run` the call-free links
    // just before it, in reverse order; `tail_value` whether `tail` can be their region's value
    let tail_value = fits(&body_shape);
    if !tail_value && body_shape.is_some_and(|s| s.nodes >= 2) {
        convert(&mut body, h);
    }
    let mut tail = (body, tail_value, body_shape.map_or(0, |s| s.nodes));
    let mut run: Vec<(LPat, Code)> = vec![];
    for l in links.into_iter().rev() {
        match l {
            L::Let(p, rhs, s) if fits(&s) => run.push((p, rhs)),
            other => {
                let rest = close(std::mem::take(&mut run), tail, h);
                let code = match other {
                    L::Let(p, mut rhs, s) => {
                        if s.is_some_and(|s| s.nodes >= 2) {
                            convert(&mut rhs, h);
                        }
                        // a curried call spine through this let is one node (`spine.rs`)
                        super::spine::form(Code::Let(p, Box::new(rhs), Box::new(rest)))
                    }
                    L::Rec(g, slots) => Code::LetRec(g, slots, Box::new(rest)),
                };
                tail = (code, false, 0);
            }
        }
    }
    *c = close(run, tail, h);
    None
}

/// The run of call-free links `run` (reversed) before `tail` as one region.
fn close(mut run: Vec<(LPat, Code)>, (tail, value, nodes): (Code, bool, u32), h: &Hints) -> Code {
    if run.is_empty() {
        let mut tail = tail;
        if value && nodes >= 2 {
            convert(&mut tail, h);
        }
        return tail;
    }
    run.reverse();
    let links = run.into_iter().map(|(pat, rhs)| link(pat, rhs, h)).collect();
    let body = match tail {
        tail if value => Body::Value(gen(tail, h)),
        Code::Let(p, rhs, rest) => Body::Let(Charge::Bind(binds(&p)), p, rhs, rest),
        tail => Body::Walk(tail),
    };
    Code::Fast(Rc::new(FastCode { links, body, lit: None }))
}

/// Compiles a region candidate in place.
fn convert(c: &mut Code, h: &Hints) {
    let code = std::mem::replace(c, Code::Tuple(Box::new([])));
    let (links, body) = unroll(code, h);
    let lit = if links.is_empty() { lit_items(&body) } else { None };
    *c = Code::Fast(Rc::new(FastCode { links: links.into(), body: Body::Value(gen(body, h)), lit }));
}

/// The items of an array literal of slots, captures and constants (`FastCode::lit`).
fn lit_items(c: &Code) -> Option<Box<[LitItem]>> {
    let Code::ArrayLit(items) = c else { return None };
    if items.is_empty() {
        return None;
    }
    let item = |c: &Code| match c {
        Code::Local(s) | Code::Move(s) => Some(LitItem::Slot(*s)),
        Code::Capture(i) => Some(LitItem::Capture(*i)),
        Code::Const(v) => Some(LitItem::Const(v.clone())),
        _ => None,
    };
    items.iter().map(item).collect()
}

// ---- compilation ----

fn link(pat: LPat, rhs: Code, h: &Hints) -> Link {
    let charge = Charge::Bind(binds(&pat));
    let arity = match &pat {
        LPat::Tuple(t) => t.0.len(),
        _ => 0,
    };
    let rhs = match rhs {
        c @ Code::Let(..) if arity > 0 => {
            let (inner, body) = unroll(c, h);
            match body {
                Code::Tuple(items) if items.len() == arity => Rhs::Spread(inner.into(), gens(items, h)),
                body => {
                    let body = gen(body, h);
                    Rhs::Gen(g(move |m| {
                        run_links(m, &inner)?;
                        body.run(m)
                    }))
                }
            }
        }
        Code::Tuple(items) if arity > 0 && items.len() == arity => Rhs::Spread(Box::new([]), gens(items, h)),
        rhs => {
            // a slot's, a last read's or a capture's tuple taken apart where it lies (`Rhs::Split`)
            let src = match rhs {
                Code::Local(s) => Some((Src::Local(s), Some(s))),
                Code::Move(s) => Some((Src::Move(s), None)),
                Code::Capture(i) => Some((Src::Capture(i), None)),
                _ => None,
            };
            match src.and_then(|(src, own)| Some((src, flat_parts(&pat, own)?))) {
                Some((src, parts)) => Rhs::Split(src, parts),
                None => Rhs::Gen(gen(rhs, h)),
            }
        }
    };
    Link { charge, pat, rhs }
}

/// A let chain's links (compiled) and its body (not yet).
fn unroll(c: Code, h: &Hints) -> (Vec<Link>, Code) {
    let mut links = vec![];
    let mut cur = c;
    loop {
        cur = match cur {
            Code::Let(p, rhs, body) => {
                links.push(link(p, *rhs, h));
                *body
            }
            other => return (links, other),
        };
    }
}

fn g(f: impl Fn(&mut Machine<'_>) -> Res<Value> + 'static) -> Gen {
    Gen::Code(Box::new(f))
}

fn rl<T>(f: impl Fn(&mut Machine<'_>) -> Result<T, Miss> + 'static) -> Unboxed<T> {
    Unboxed::Code(Box::new(f))
}

fn err<T>(span: crate::diag::Span, msg: String) -> Res<T> {
    Err(Box::new(RunError::runtime(span, msg)))
}

/// A real- or integer-typed closure's outcome as a value.
fn settle<T: Scalarlike>(r: Result<T, Miss>) -> Res<Value> {
    match r {
        Ok(x) => Ok(x.boxed()),
        Err(Miss::Val(v)) => Ok(v),
        Err(Miss::Err(e)) => Err(e),
    }
}

/// A walker operation's outcome as a real- or integer-typed closure's.
fn back<T: Scalarlike>(r: Result<Value, RunError>) -> Result<T, Miss> {
    match r {
        Ok(v) => T::of(&v).ok_or(Miss::Val(v)),
        Err(e) => Err(Miss::Err(Box::new(e))),
    }
}

/// Whether the hints say `c` is a real (arithmetic on reals: either operand a real is enough,
/// since `+ - * /` take two of the same; `real k` of an integer).
fn is_real(c: &Code, h: &Hints) -> bool {
    match c {
        Code::Const(Value::Real(_)) => true,
        Code::Local(s) | Code::Move(s) => h.slot(*s) == Scalar::Real,
        Code::Capture(i) => h.cap(*i) == Scalar::Real,
        Code::Prim1(op, a, _) if matches!(op.info().on_int, Some(OnInt::ZToR(_))) => is_int(a, h),
        Code::Prim1(op, a, _) => matches!(op.info().on_real, Some(OnReal::R1(_))) && is_real(a, h),
        Code::Prim2(op, a, b, _) => matches!(op.info().on_real, Some(OnReal::R2(_))) && (is_real(a, h) || is_real(b, h)),
        _ => false,
    }
}

/// Whether the hints say `c` is an integer (as `is_real`).
pub(super) fn is_int(c: &Code, h: &Hints) -> bool {
    match c {
        Code::Const(Value::Int(_)) => true,
        Code::Local(s) | Code::Move(s) => h.slot(*s) == Scalar::Int,
        Code::Capture(i) => h.cap(*i) == Scalar::Int,
        Code::Prim1(op, a, _) => matches!(op.info().on_int, Some(OnInt::Z1(_))) && is_int(a, h),
        Code::Prim2(op, a, b, _) => matches!(op.info().on_int, Some(OnInt::Z2(_))) && (is_int(a, h) || is_int(b, h)),
        _ => false,
    }
}

/// `c` as a closure returning an unboxed integer. Checked arithmetic that fails (overflow, division
/// by zero) hands its operands to the walker's `prim1`/`prim2`, which give its message.
fn int(c: Code, h: &Hints) -> Int {
    int_s(c, h, true)
}

/// `int`, trying a flat program (`flat.rs`) first when `flat`; a flat tree's stepwise closures (its
/// fallback) are built with `flat` off, since every subtree of it would be flat too.
fn int_s(c: Code, h: &Hints, flat: bool) -> Int {
    if flat {
        if let Some(fl) = Flat::int(&c, h) {
            return Unboxed::Flat(Box::new((fl, int_s(c, h, false))));
        }
    }
    match c {
        Code::Const(Value::Int(x)) => Unboxed::Const(x),
        Code::Local(s) | Code::Move(s) => Unboxed::Local(s),
        Code::Capture(i) => Unboxed::Capture(i),
        Code::Prim1(op, a, span) if matches!(op.info().on_int, Some(OnInt::Z1(_))) => {
            let Some(OnInt::Z1(f)) = op.info().on_int else { return wrap(Code::Prim1(op, a, span), h) };
            let a = int_s(*a, h, flat);
            rl(move |m| {
                m.step(Charge::Prim1(op))?;
                match a.run(m) {
                    Ok(x) => f(x).map_or_else(|| back(prim1(op, Value::Int(x), span, &mut m.real_ops)), Ok),
                    Err(Miss::Val(v)) => back(prim1(op, v, span, &mut m.real_ops)),
                    Err(e) => Err(e),
                }
            })
        }
        Code::Prim2(op, a, b, span) if matches!(op.info().on_int, Some(OnInt::Z2(_))) => {
            let Some(OnInt::Z2(f)) = op.info().on_int else { return wrap(Code::Prim2(op, a, b, span), h) };
            let (a, b) = (int_s(*a, h, flat), int_s(*b, h, flat));
            rl(move |m| {
                m.step(Charge::Prim2(op))?;
                let (x, y) = operands(m, &a, &b, op, span)?;
                f(x, y).or_else(|_| back(prim2(op, Value::Int(x), Value::Int(y), span, &mut m.real_ops)))
            })
        }
        c => wrap(c, h),
    }
}

/// Both operands of a binary primitive, unboxed; an operand that is not (a wrong hint) has the
/// walker's `prim2` finish the operation on values, its outcome handed back as a `Miss`.
#[inline(always)]
fn operands<T: Scalarlike>(m: &mut Machine<'_>, a: &Unboxed<T>, b: &Unboxed<T>, op: crate::prims::Prim, span: crate::diag::Span) -> Result<(T, T), Miss> {
    let finish = |r: Result<Value, RunError>| match r {
        Ok(v) => Miss::Val(v),
        Err(e) => Miss::Err(Box::new(e)),
    };
    let x = match a.run(m) {
        Ok(x) => x,
        Err(Miss::Val(va)) => {
            let vb = settle(b.run(m)).map_err(Miss::Err)?;
            return Err(finish(prim2(op, va, vb, span, &mut m.real_ops)));
        }
        Err(e) => return Err(e),
    };
    match b.run(m) {
        Ok(y) => Ok((x, y)),
        Err(Miss::Val(vb)) => Err(finish(prim2(op, x.boxed(), vb, span, &mut m.real_ops))),
        Err(e) => Err(e),
    }
}

/// `c` as a closure returning an unboxed real.
fn real(c: Code, h: &Hints) -> Real {
    real_s(c, h, true)
}

/// `real`, trying a flat program first when `flat` (as `int_s`).
fn real_s(c: Code, h: &Hints, flat: bool) -> Real {
    if flat {
        if let Some(fl) = Flat::real(&c, h) {
            return Unboxed::Flat(Box::new((fl, real_s(c, h, false))));
        }
    }
    if spine_len(&c) >= SPINE_MIN {
        return spine_real(c, h, flat);
    }
    match c {
        Code::Const(Value::Real(x)) => Real::Const(x),
        // a real is read in place (a moved slot's value is dropped with the frame)
        Code::Local(s) | Code::Move(s) => Real::Local(s),
        Code::Capture(i) => Real::Capture(i),
        // `real k` of an integer (counts no real op, as the walker's `prim1`)
        Code::Prim1(op, a, span) if matches!(op.info().on_int, Some(OnInt::ZToR(_))) && is_int(&a, h) => {
            let Some(OnInt::ZToR(f)) = op.info().on_int else { return wrap(Code::Prim1(op, a, span), h) };
            let a = int_s(*a, h, flat);
            rl(move |m| {
                m.step(Charge::Prim1(op))?;
                match a.run(m) {
                    Ok(i) => Ok(f(i)),
                    Err(Miss::Val(v)) => back(prim1(op, v, span, &mut m.real_ops)),
                    Err(e) => Err(e),
                }
            })
        }
        Code::Prim1(op, a, span) if matches!(op.info().on_real, Some(OnReal::R1(_))) => {
            let Some(OnReal::R1(f)) = op.info().on_real else { return wrap(Code::Prim1(op, a, span), h) };
            let a = real_s(*a, h, flat);
            rl(move |m| {
                m.step(Charge::Prim1(op))?;
                match a.run(m) {
                    Ok(x) => {
                        m.real_ops += 1;
                        Ok(f(x))
                    }
                    Err(Miss::Val(v)) => back(prim1(op, v, span, &mut m.real_ops)),
                    Err(e) => Err(e),
                }
            })
        }
        Code::Prim2(op, a, b, span) if matches!(op.info().on_real, Some(OnReal::R2(_))) => {
            let Some(OnReal::R2(f)) = op.info().on_real else { return wrap(Code::Prim2(op, a, b, span), h) };
            let (a, b) = (real_s(*a, h, flat), real_s(*b, h, flat));
            rl(move |m| {
                m.step(Charge::Prim2(op))?;
                let (x, y) = operands(m, &a, &b, op, span)?;
                m.real_ops += 1;
                Ok(f(x, y))
            })
        }
        c => wrap(c, h),
    }
}

/// A long left spine of real arithmetic (`spine_len` ≥ `SPINE_MIN`) as one closure that loops over
/// its nodes, counting as the nested closures of `real_s` would: each node's step top-down, then the
/// leaf, then each right operand and its operation bottom-up. An operand that is not a real (a wrong
/// hint) has the walker's `prim2` finish that node and every node above it on values.
fn spine_real(c: Code, h: &Hints, flat: bool) -> Real {
    let mut levels: Vec<SpineLevel> = vec![];
    let mut cur = c;
    let leaf = loop {
        cur = match cur {
            Code::Prim2(op, a, b, span) => match op.info().on_real {
                Some(OnReal::R2(f)) => {
                    levels.push((op, f, real_s(*b, h, flat), span));
                    *a
                }
                _ => break real_s(Code::Prim2(op, a, b, span), h, flat),
            },
            leaf => break real_s(leaf, h, flat),
        }
    };
    // bottom-up, as the operations run
    levels.reverse();
    rl(move |m| {
        for (op, ..) in levels.iter().rev() {
            m.step(Charge::Prim2(*op))?;
        }
        let mut x = match leaf.run(m) {
            Ok(x) => x,
            Err(Miss::Val(v)) => return spine_boxed(m, &levels, v),
            Err(e) => return Err(e),
        };
        for (k, (op, f, b, span)) in levels.iter().enumerate() {
            match b.run(m) {
                Ok(y) => {
                    m.real_ops += 1;
                    x = f(x, y);
                }
                Err(Miss::Val(vb)) => {
                    let v = prim2(*op, Value::Real(x), vb, *span, &mut m.real_ops).map_err(|e| Miss::Err(Box::new(e)))?;
                    return spine_boxed(m, &levels[k + 1..], v);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(x)
    })
}

/// A node of a spine (`spine_real`): its operation, the row's arithmetic, its right operand, its span.
type SpineLevel = (crate::prims::Prim, fn(f64, f64) -> f64, Real, crate::diag::Span);

/// The rest of a spine's levels on values, from `v` (after a wrong hint), as the walker runs them.
fn spine_boxed(m: &mut Machine<'_>, levels: &[SpineLevel], mut v: Value) -> Result<f64, Miss> {
    for (op, _, b, span) in levels {
        let vb = settle(b.run(m)).map_err(Miss::Err)?;
        v = prim2(*op, v, vb, *span, &mut m.real_ops).map_err(|e| Miss::Err(Box::new(e)))?;
    }
    back(Ok(v))
}

/// A general closure seen as a real- or integer-typed one.
fn wrap<T: Scalarlike>(c: Code, h: &Hints) -> Unboxed<T> {
    let gc = gen_value(c, h);
    rl(move |m| {
        let v = gc.run(m)?;
        T::of(&v).ok_or(Miss::Val(v))
    })
}

/// `c` as a closure returning a value (unboxed inside where the hints say reals).
fn gen(c: Code, h: &Hints) -> Gen {
    // (a real leaf is read in place either way)
    if !matches!(c, Code::Local(_) | Code::Move(_) | Code::Capture(_) | Code::Const(_)) {
        if is_real(&c, h) {
            return Gen::Real(real(c, h));
        }
        if is_int(&c, h) {
            return Gen::Int(int(c, h));
        }
    }
    gen_value(c, h)
}

fn gens(items: Box<[Code]>, h: &Hints) -> Box<[Gen]> {
    items.into_vec().into_iter().map(|c| gen(c, h)).collect()
}

fn gen_value(c: Code, h: &Hints) -> Gen {
    match c {
        Code::Local(s) => Gen::Local(s),
        Code::Move(s) => Gen::Move(s),
        Code::Capture(i) => Gen::Capture(i),
        Code::Sibling(k) => g(move |m| {
            m.step(Charge::Var)?;
            Ok(m.sibling(k))
        }),
        Code::Const(v) => Gen::Const(v),
        // a let-bound lambda only called in its scope (`run.rs`'s `call_local`): counted, not made,
        // as the walker counts it
        Code::Lam(l) if l.local().is_some() => g(move |m| {
            m.step(Charge::None)?;
            m.alloc(1).map_err(Box::new)?;
            Ok(Value::Unit)
        }),
        // a closure made as the walker makes it (a lambda's body has its own regions)
        Code::Lam(l) => g(move |m| {
            m.step(Charge::None)?;
            m.alloc(1).map_err(Box::new)?;
            let env: Rc<[Value]> = l.captures.iter().map(|&x| m.load(x)).collect();
            Ok(Value::Fun(Rc::new(super::lower::FunVal::Clo { code: l.clone(), env })))
        }),
        c @ Code::Let(..) => {
            let (links, body) = unroll(c, h);
            let body = gen(body, h);
            g(move |m| {
                run_links(m, &links)?;
                body.run(m)
            })
        }
        Code::Tuple(items) if items.is_empty() => g(move |m| {
            m.step(Charge::None)?;
            Ok(Value::Unit)
        }),
        Code::ArrayLit(items) if items.is_empty() => g(move |m| {
            m.step(Charge::None)?;
            Ok(Value::Array(Rc::from(vec![])))
        }),
        Code::Tuple(items) if items.len() == 2 => {
            let mut items = gens(items, h).into_vec();
            let (b, a) = (items.pop(), items.pop());
            let (Some(a), Some(b)) = (a, b) else { return g(|_| Ok(Value::Unit)) };
            g(move |m| {
                m.step(Charge::None)?;
                let x = a.run(m)?;
                let y = b.run(m)?;
                m.alloc(1).map_err(Box::new)?;
                Ok(Value::Tuple(Rc::new([x, y])))
            })
        }
        Code::Tuple(items) => collect(items, true, h),
        Code::ArrayLit(items) if items.len() == 1 => {
            // `[i]`, an index function's result per element (the array chain's gathers and
            // scatters): `collect`'s counts in its order, the element boxed directly (issue 13)
            let a = gens(items, h).into_vec().pop();
            let Some(a) = a else { return g(|_| Ok(Value::Unit)) };
            g(move |m| {
                m.step(Charge::None)?;
                let x = a.run(m)?;
                m.alloc(1).map_err(Box::new)?;
                let vs: Rc<[Value]> = Rc::new([x]);
                Ok(Value::Array(vs))
            })
        }
        Code::ArrayLit(items) => collect(items, false, h),
        Code::Fst(a, span) => proj(*a, 0, span, h),
        Code::Snd(a, span) => proj(*a, 1, span, h),
        Code::Inl(a) => inject(*a, true, h),
        Code::Inr(a) => inject(*a, false, h),
        Code::And(a, b, span) => logic(*a, *b, true, span, h),
        Code::Or(a, b, span) => logic(*a, *b, false, span, h),
        Code::Case(c) => {
            let (s, p1, e1, p2, e2, span) = *c;
            let (s, e1, e2) = (gen(s, h), gen(e1, h), gen(e2, h));
            g(move |m| {
                m.step(Charge::None)?;
                let (p, e, x) = match s.run(m)? {
                    Value::Inl(x) => (&p1, &e1, x),
                    Value::Inr(x) => (&p2, &e2, x),
                    v => return err(span, format!("`case` on {} (`{v}`), not a sum", kind(&v))),
                };
                let x = crate::value::unshared(x);
                m.bind(p, x)?;
                e.run(m)
            })
        }
        Code::If(c, t, f, span) => {
            let (c, t, f) = (gen(*c, h), gen(*t, h), gen(*f, h));
            g(move |m| {
                m.step(Charge::None)?;
                match c.run(m)? {
                    Value::Bool(true) => t.run(m),
                    Value::Bool(false) => f.run(m),
                    v => err(span, format!("`if` condition is {} (`{v}`), not a boolean", kind(&v))),
                }
            })
        }
        Code::Prim1(op, a, span) => {
            let a = gen(*a, h);
            g(move |m| {
                m.step(Charge::Prim1(op))?;
                let v = a.run(m)?;
                prim1(op, v, span, &mut m.real_ops).map_err(Box::new)
            })
        }
        Code::Prim2(op, a, b, span) => {
            // a comparison of reals or of integers: unboxed operands, a boolean result
            if let (Some(OnReal::RCmp(f)), true) = (op.info().on_real, is_real(&a, h) || is_real(&b, h)) {
                let fl = Flat::compare(&a, &b, op, true, h);
                let flat = fl.is_none();
                return compare(fl, real_s(*a, h, flat), real_s(*b, h, flat), f, 1, op, span);
            }
            if let (Some(OnInt::ZCmp(f)), true) = (op.info().on_int, is_int(&a, h) || is_int(&b, h)) {
                let fl = Flat::compare(&a, &b, op, false, h);
                let flat = fl.is_none();
                return compare(fl, int_s(*a, h, flat), int_s(*b, h, flat), f, 0, op, span);
            }
            let (a, b) = (gen(*a, h), gen(*b, h));
            g(move |m| {
                m.step(Charge::Prim2(op))?;
                let x = a.run(m)?;
                let y = b.run(m)?;
                prim2(op, x, y, span, &mut m.real_ops).map_err(Box::new)
            })
        }
        Code::CallB(b, items, span) if fusable(&b, &items, h).is_some() => {
            let (f, mut items) = (fusable(&b, &items, h), items.into_vec());
            match (f, items.pop()) {
                (Some(f), Some(Code::CallB(inner, args, ispan))) => match (f.scalar, f.scalar_cid) {
                    (Some(sf), _) if scalar_pairs::<i64>(&args, h) => fused_scalar(f.run, sf, inner, args, [ispan, span], h),
                    (_, Some(sf)) if scalar_pairs::<(i64, i64)>(&args, h) => fused_scalar(f.run, sf, inner, args, [ispan, span], h),
                    _ => fused(f.run, inner, args, [ispan, span], h),
                },
                _ => g(move |_| err(span, "internal: a fused pair is two builtin calls".into())),
            }
        }
        Code::CallB(b, items, span) if b.run as usize == super::arrays::index as super::BuiltinFn as usize && matches!(&*items, [Code::Local(_) | Code::Capture(_), _]) => {
            let mut items = gens(items, h).into_vec();
            let (i, a) = (items.pop(), items.pop());
            let a = match a {
                Some(Gen::Local(s)) => super::arrays::At::Slot(s),
                Some(Gen::Capture(k)) => super::arrays::At::Capture(k),
                _ => return g(move |_| err(span, "internal: an index in place reads a slot or a capture".into())),
            };
            let Some(i) = i else { return g(move |_| err(span, "internal: an index has two arguments".into())) };
            index_in_place(b, a, i, span)
        }
        Code::CallB(b, items, span) => {
            let items = gens(items, h);
            g(move |m| {
                m.step(Charge::None)?;
                // a buffer from the pool, as the walker's (`call_builtin_value` returns it)
                let mut args = m.arg_bufs.pop().unwrap_or_default();
                for it in items.iter() {
                    it.push_to(m, &mut args)?;
                }
                m.call_builtin_value(&b, args, span)
            })
        }
        // Not region code (`mark` keeps calls out): run it through the machine, in this frame.
        c => {
            let code = Box::new(c);
            g(move |m| {
                let at: *const Code = &*code;
                m.run_with(|_| Ok(Next::Eval(at))).map_err(Box::new)
            })
        }
    }
}

/// `a ! i` with `a` a slot or a capture (the builtin `arrays::index`): the call's steps and the
/// index's in the builtin call's order, the index run as `in_builtin` runs it, but with the array
/// read where it lies, not copied into an argument buffer (issue 13: about 300 instructions an
/// index, most of an element of `build`'s dense functional update `λj → if j == k then … else v ! j`).
fn index_in_place(b: Rc<Builtin>, a: super::arrays::At<'static>, i: Gen, span: crate::diag::Span) -> Gen {
    g(move |m| {
        m.step(Charge::None)?;
        // the array's read (`push_to`), then the index's value
        m.step(Charge::Var)?;
        let k = i.run(m)?;
        let old = std::mem::replace(&mut m.span, span);
        let old_b = std::mem::replace(&mut m.builtin, b.name);
        let r = super::arrays::index_at(m, a, &k, span);
        m.span = old;
        m.builtin = old_b;
        Ok(r?)
    })
}

/// A comparison of unboxed operands (`real_ops` counts one on reals, none on integers).
/// A flat program for it (`flat.rs`) runs first, when there is one.
fn compare<T: Scalarlike>(fl: Option<Flat<bool>>, a: Unboxed<T>, b: Unboxed<T>, f: fn(T, T) -> bool, ops: u64, op: crate::prims::Prim, span: crate::diag::Span) -> Gen {
    g(move |m| {
        if let Some(x) = fl.as_ref().and_then(|fl| fl.run(m)) {
            return Ok(Value::Bool(x));
        }
        m.step(Charge::Prim2(op))?;
        match operands(m, &a, &b, op, span) {
            Ok((x, y)) => {
                m.real_ops += ops;
                Ok(Value::Bool(f(x, y)))
            }
            Err(Miss::Val(v)) => Ok(v),
            Err(Miss::Err(e)) => Err(e),
        }
    })
}

/// The fused pair for `b (inner …)`, if the runtime offers one (`Fused`).
fn fusable(b: &Builtin, items: &[Code], h: &Hints) -> Option<Fused> {
    match items {
        [Code::CallB(inner, ..)] => super::api::find_fused(h.fused, b.name, inner.name),
        _ => None,
    }
}

/// `outer (inner a1 … an)` as one function: the two calls' steps, then the inner's arguments in
/// order (as the walker evaluates them), then the fused function in place of both calls.
fn fused(f: FusedFn, inner: Rc<Builtin>, args: Box<[Code]>, spans: [crate::diag::Span; 2], h: &Hints) -> Gen {
    let args = gens(args, h);
    g(move |m| {
        m.step(Charge::None)?;
        m.step(Charge::None)?;
        let mut buf = m.arg_bufs.pop().unwrap_or_default();
        for a in args.iter() {
            a.push_to(m, &mut buf)?;
        }
        m.call_fused(f, &inner, buf, spans)
    })
}

/// The inner's arguments are at most two (real, integer) pairs by the checker's types (`C0`, `C1 a i`,
/// `C2 a i b j`), so `fused_scalar` may run them unboxed.
fn scalar_pairs<I: FusedId>(args: &[Code], h: &Hints) -> bool {
    args.len() <= 4 && args.len() % 2 == 0 && args.chunks(2).all(|p| is_real(&p[0], h) && I::fits(&p[1], h))
}

/// An ID a fused pair may take unboxed: an integer, or a pair of integers read in place from a
/// slot or capture (its step counted as the walker's variable; not a copy of the tuple).
trait FusedId: Scalarlike {
    const ZERO: Self;
    fn fits(c: &Code, h: &Hints) -> bool;
    fn reader(c: Code, h: &Hints) -> Unboxed<Self>;
}
impl FusedId for i64 {
    const ZERO: i64 = 0;
    fn fits(c: &Code, h: &Hints) -> bool {
        is_int(c, h)
    }
    fn reader(c: Code, h: &Hints) -> Int {
        int(c, h)
    }
}
impl FusedId for (i64, i64) {
    const ZERO: (i64, i64) = (0, 0);
    // no hint says a slot holds a pair of integers: a leaf is taken on trust (the checker typed the
    // builtin's argument), and anything else in it is a miss handed to the boxed path
    fn fits(c: &Code, _: &Hints) -> bool {
        matches!(c, Code::Local(_) | Code::Move(_) | Code::Capture(_))
    }
    fn reader(c: Code, _: &Hints) -> Unboxed<(i64, i64)> {
        match c {
            Code::Capture(i) => Unboxed::Capture(i),
            Code::Local(s) | Code::Move(s) => Unboxed::Local(s),
            // not taken (`fits`)
            _ => Unboxed::Const((i64::MIN, i64::MIN)),
        }
    }
}
impl super::flat::Word for (i64, i64) {
    #[inline(always)]
    fn of(v: &Value) -> Option<(i64, i64)> {
        match v {
            Value::Tuple(vs) => match &vs[..] {
                [Value::Int(a), Value::Int(b)] => Some((*a, *b)),
                _ => None,
            },
            _ => None,
        }
    }
}
impl Scalarlike for (i64, i64) {
    fn boxed(self) -> Value {
        Value::pair(Value::Int(self.0), Value::Int(self.1))
    }
}

/// `fused` with the inner's arguments unboxed (`ScalarFusedFn`): the same steps in the same order
/// (each leaf counts its step as `push_to` does), no `Value` per argument and no argument buffer.
fn fused_scalar<I: FusedId>(f: FusedFn, sf: ScalarFusedFn<I>, inner: Rc<Builtin>, args: Box<[Code]>, spans: [crate::diag::Span; 2], h: &Hints) -> Gen {
    let mut it = args.into_vec().into_iter();
    let mut pairs = Vec::new();
    while let (Some(a), Some(j)) = (it.next(), it.next()) {
        pairs.push((real(a, h), I::reader(j, h)));
    }
    let pairs: Box<[(Real, Unboxed<I>)]> = pairs.into();
    // every argument a leaf (a slot, a capture, a constant): the steps can be counted at once
    let leaves = pairs.iter().all(|(a, j)| a.is_leaf() && j.is_leaf());
    let nsteps = 2 + 2 * pairs.len() as u64;
    g(move |m| {
        // Per-block counting: the two calls' steps and each leaf's, added at once where none of
        // them could stop the run (the budget holds them all, no 4096-step clock check falls among
        // them, no cost model) and every leaf holds its scalar; reading a leaf has no other effect,
        // so the counts seen after are the walker's. Otherwise, step by step as the walker goes.
        let end = m.steps + nsteps;
        if leaves && m.model.is_none() && end <= m.budget.steps && m.steps >> 12 == end >> 12 {
            let mut e = [(0.0, I::ZERO); 2];
            let mut all = true;
            for (k, (a, j)) in pairs.iter().enumerate() {
                match (a.peek(m), j.peek(m)) {
                    (Some(x), Some(i)) => e[k] = (x, i),
                    _ => {
                        all = false;
                        break;
                    }
                }
            }
            if all {
                m.steps = end;
                return m.call_fused_scalar(sf, &inner, &e[..pairs.len()], spans);
            }
        }
        m.step(Charge::None)?;
        m.step(Charge::None)?;
        let mut e = [(0.0, I::ZERO); 2];
        for (k, (a, j)) in pairs.iter().enumerate() {
            let x = match a.run(m) {
                Ok(x) => x,
                Err(miss) => return fused_boxed(m, f, &inner, spans, &pairs, &e[..k], None, miss),
            };
            let i = match j.run(m) {
                Ok(i) => i,
                Err(miss) => return fused_boxed(m, f, &inner, spans, &pairs, &e[..k], Some(x), miss),
            };
            e[k] = (x, i);
        }
        m.call_fused_scalar(sf, &inner, &e[..pairs.len()], spans)
    })
}

/// A wrong hint in `fused_scalar`: the arguments computed so far boxed, the one that was not a
/// scalar, the rest boxed as they are computed, and the fused function on values (`fused`'s path).
#[cold]
#[allow(clippy::too_many_arguments)]
fn fused_boxed<I: FusedId>(m: &mut Machine<'_>, f: FusedFn, inner: &Builtin, spans: [crate::diag::Span; 2], pairs: &[(Real, Unboxed<I>)], done: &[(f64, I)], x: Option<f64>, miss: Miss) -> Res<Value> {
    let v = match miss {
        Miss::Err(e) => return Err(e),
        Miss::Val(v) => v,
    };
    let k = done.len();
    let mut buf = m.arg_bufs.pop().unwrap_or_default();
    for &(a, i) in done {
        buf.push(Value::Real(a));
        buf.push(i.boxed());
    }
    // the miss was pair k's real (its integer is still to run) or, after its real `x`, its integer
    if let Some(x) = x {
        buf.push(Value::Real(x));
        buf.push(v);
    } else {
        buf.push(v);
        buf.push(settle(pairs[k].1.run(m))?);
    }
    for (a, j) in &pairs[k + 1..] {
        buf.push(settle(a.run(m))?);
        buf.push(settle(j.run(m))?);
    }
    m.call_fused(f, inner, buf, spans)
}

/// A tuple (one allocation) or an array literal (one per element) of `items`, left to right.
fn collect(items: Box<[Code]>, is_tuple: bool, h: &Hints) -> Gen {
    let items = gens(items, h);
    g(move |m| {
        m.step(Charge::None)?;
        // items wait on the machine's value stack (one allocation for the result; an error leaves
        // them to `run_with`'s clean-up, as the walker's do)
        let base = m.vals.len();
        for it in items.iter() {
            let v = it.run(m)?;
            m.vals.push(v);
        }
        m.alloc(if is_tuple { 1 } else { items.len() as u64 }).map_err(Box::new)?;
        let vs: Rc<[Value]> = m.vals.drain(base..).collect();
        Ok(if is_tuple { Value::Tuple(vs) } else { Value::Array(vs) })
    })
}

/// `fst` (i = 0) or `snd` (i = 1).
fn proj(a: Code, i: usize, span: crate::diag::Span, h: &Hints) -> Gen {
    let a = gen(a, h);
    g(move |m| {
        m.step(Charge::Proj)?;
        let v = a.run(m)?;
        match &v {
            Value::Tuple(vs) if vs.len() > i => Ok(vs[i].clone()),
            _ => err(span, format!("`{}` of {} (`{v}`)", if i == 0 { "fst" } else { "snd" }, kind(&v))),
        }
    })
}

/// `inl` or `inr`.
fn inject(a: Code, left: bool, h: &Hints) -> Gen {
    let a = gen(a, h);
    g(move |m| {
        m.step(Charge::None)?;
        let v = a.run(m)?;
        m.alloc(1).map_err(Box::new)?;
        Ok(if left { Value::Inl(Rc::new(v)) } else { Value::Inr(Rc::new(v)) })
    })
}

/// `&&` or `||`: the second operand only when the first does not decide (its value unchecked, as
/// the walker's).
fn logic(a: Code, b: Code, is_and: bool, span: crate::diag::Span, h: &Hints) -> Gen {
    let (a, b) = (gen(a, h), gen(b, h));
    g(move |m| {
        m.step(Charge::None)?;
        match a.run(m)? {
            Value::Bool(x) if x == is_and => b.run(m),
            Value::Bool(x) => Ok(Value::Bool(x)),
            v => err(span, format!("`{}` on {} (`{v}`)", if is_and { "&&" } else { "||" }, kind(&v))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::lower::{lower, Code};
    use super::{Body, FastCode};
    use crate::interp::Builtins;

    /// The regions of `src`'s lowering: (regions, of which hand a rest to the walker, links in all).
    fn regions_of(src: &str) -> (usize, usize, usize) {
        let (p, _, _) = crate::pipeline::front_end(src, &[]).expect("type-checks");
        let low = lower(&p, &Builtins::new(), true, 0).expect("lowers");
        let mut stack: Vec<&Code> = low.defs.iter().map(|d| &d.body).collect();
        let mut out = (0, 0, 0);
        // an explicit stack over the few shapes these programs have
        while let Some(c) = stack.pop() {
            match c {
                Code::Fast(f) => {
                    let FastCode { links, body, .. } = &**f;
                    out.0 += 1;
                    out.2 += links.len();
                    match body {
                        Body::Walk(rest) => {
                            out.1 += 1;
                            stack.push(rest);
                        }
                        Body::Let(_, _, rhs, rest) => {
                            out.1 += 1;
                            stack.extend([&**rhs, &**rest]);
                        }
                        Body::Value(_) => {}
                    }
                }
                Code::Lam(l) => stack.push(&l.body),
                Code::Call(cc) => stack.extend(cc.args.iter()),
                Code::App(a, b, _) | Code::Let(_, a, b) => stack.extend([&**a, &**b]),
                Code::If(a, b, c, _) => stack.extend([&**a, &**b, &**c]),
                _ => {}
            }
        }
        out
    }

    #[test]
    fn call_free_bodies_are_one_region() {
        // step's body, a let chain with tuples, is one region of two links; main's argument another
        assert_eq!(regions_of("def step (p, v) = let a = p + 0.1 * v in let b = v - a in (a, b)\ndef main x = step (x, x)"), (2, 0, 2));
    }

    #[test]
    fn a_let_chain_is_cut_at_its_calls() {
        // links before the call are a region that hands the rest to the walker; the call's argument
        // and the links after it are regions of their own
        let src = "def f y = y * y\ndef main x = let a = x * 2.0 in let b = a + 1.0 in let c = f (a * b) in let d = c * c in d + a";
        let (regions, walk, links) = regions_of(src);
        assert_eq!((regions, walk), (4, 1), "f's body, the prefix, the argument, the suffix");
        assert_eq!(links, 3);
    }

    #[test]
    fn curried_lambdas_are_one_function_and_spines_one_call_in_the_engine() {
        let (p, _, _) = crate::pipeline::front_end("def f a b c = a * b + c\ndef main x = f x x x", &[]).expect("type-checks");
        for (fast, more) in [(true, 2), (false, 0)] {
            let low = lower(&p, &Builtins::new(), fast, 0).expect("lowers");
            assert_eq!(low.defs[0].lam.as_ref().map(|l| l.more.len()), Some(more));
            let call = matches!(&low.defs[1].body, Code::Lam(l) if matches!(l.body, Code::Call(_)));
            assert_eq!(call, fast, "main's body is one call in the engine, App nodes in the walker");
        }
    }

    #[test]
    fn single_nodes_and_calls_stay_with_the_walker() {
        assert_eq!(regions_of("def g x = x\ndef main x = g x"), (0, 0, 0));
    }
}
