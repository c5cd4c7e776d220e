//! Self-tail-recursive loops run a round at a time (issue 13, item 1: "count per basic block at
//! lowering time rather than per step at run time").
//!
//! A definition whose body is `if test then exit else f a1 … an` (or the branches swapped), where
//! `f` is the definition itself called with all its parameters in tail position (`CallCode::self_tail`),
//! the test a comparison and every argument a flat scalar tree (`flat.rs`) or a leaf, and whose
//! parameters are variables, is the peers' loop (`horner k acc x`, `double k c`). One round of it —
//! the `if`, the test, the call's `App` and head steps, its arguments, the curried application of
//! each argument short of the last (`run.rs`'s `partial_step`: a step, an allocation, the depth
//! check) and the parameters rebound — has fixed counters, known here. So once a self tail call has
//! reset the frame (`run.rs`'s `self_tail`), `Machine::rounds` runs whole rounds in place: when the
//! step gate has room for a round's steps (no budget stop, no 4096-step clock check, no cost model:
//! the gate is 0 under one), the allocation budget for its allocations (and no memory probe falls in
//! it), no call is traced, the test says "go on", every leaf holds a scalar and no checked integer
//! operation fails, the new parameter values are written into their slots (scalars: nothing to
//! drop or clone) and the round's counters added at once. Otherwise nothing has changed and the
//! body runs as before for that round (the exit, a budget stop, a wrong hint, an overflow's
//! message), exactly as the walker would.
//!
//! An argument `g s` where `s` is the argument's own parameter, a tuple, and `g` a definition
//! `g (p1, …, pm) = (e1, …, em)` of flat real trees (particle's `sim (k - 1) (step s)`) is run too:
//! while rounds run, `s` is scalar-replaced by `g`'s parameters in a scratch frame above the loop's
//! (the frame `run_leaf` would open), `g`'s items computed there and written back as reals, and
//! the call's steps, its frame's depth check and its tuple's allocation counted per round; the
//! tuple is boxed once, when the rounds stop.

use super::fast::{is_int, Hints};
use super::flat::Flat;
use super::lower::{Code, Head, LPat};
use super::Machine;
use crate::value::Value;
use std::rc::Rc;

/// At most this many parameters (the new values wait in an array on the stack).
const MAX_ARGS: usize = 8;

/// One argument of the self call: computed by a flat tree, or read (a leaf).
enum Arg {
    Real(Flat<f64>),
    Int(Flat<i64>),
    Slot(u32),
    Cap(u32),
    Const(Word),
    /// `g s`, `s` this argument's own parameter (a tuple, scalar-replaced while rounds run) and `g`
    /// a definition whose body is a tuple of flat trees (`PureLeaf`): particle's `sim (k - 1) (step s)`.
    Leaf,
}

/// A scalar on its way into a parameter's slot.
#[derive(Clone, Copy)]
enum Word {
    R(f64),
    I(i64),
    B(bool),
}

impl Word {
    #[inline(always)]
    fn of(v: &Value) -> Option<Word> {
        match v {
            Value::Real(x) => Some(Word::R(*x)),
            Value::Int(x) => Some(Word::I(*x)),
            Value::Bool(x) => Some(Word::B(*x)),
            _ => None,
        }
    }
    #[inline(always)]
    fn value(self) -> Value {
        match self {
            Word::R(x) => Value::Real(x),
            Word::I(x) => Value::Int(x),
            Word::B(x) => Value::Bool(x),
        }
    }
}

/// A self-tail-recursive loop's round, with the counters it adds.
pub(crate) struct SelfLoop {
    test: Flat<bool>,
    /// The test's value that takes the branch with the self call.
    on: bool,
    args: Box<[Arg]>,
    /// Each parameter's slot (`None`: a wildcard, its argument computed and dropped, or the `Leaf`
    /// argument's, written to the scratch frame).
    params: Box<[Option<u32>]>,
    steps: u64,
    real_ops: u64,
    /// One per argument short of the last (the walker's closure per curried application).
    allocs: u64,
    /// The `Leaf` argument: its index, its parameter's slot and the definition it calls.
    leaf: Option<(usize, u32, u32)>,
}

/// A definition `g (p1, …, pm) = (e1, …, em)` whose items are flat real trees: a loop's argument
/// `g s` runs it with `s`'s items in a scratch frame above the loop's own, as `run_leaf` would.
pub(crate) struct PureLeaf {
    slots: Box<[u32]>,
    nslots: u32,
    items: Box<[Flat<f64>]>,
    /// The call's `App` node and head, its argument, the tuple and its items.
    steps: u64,
    real_ops: u64,
}

impl PureLeaf {
    pub(crate) fn build(pat: &LPat, body: &Code, nslots: u32, h: &Hints) -> Option<PureLeaf> {
        let LPat::Tuple(t) = pat else { return None };
        let slots = t.0.iter().map(|p| if let LPat::Slot(s) = p { Some(*s) } else { None }).collect::<Option<Box<[u32]>>>()?;
        let Code::Tuple(items) = body else { return None };
        if items.len() != slots.len() || slots.len() > MAX_ARGS {
            return None;
        }
        let items = items.iter().map(|c| Flat::real(c, h)).collect::<Option<Box<[_]>>>()?;
        let steps = 4 + items.iter().map(|f| f.steps()).sum::<u64>();
        let real_ops = items.iter().map(|f| f.real_ops()).sum();
        Some(PureLeaf { slots, nslots, items, steps, real_ops })
    }
}

/// Whether `c` reads slot `s`.
fn reads(c: &Code, s: u32) -> bool {
    match c {
        Code::Local(x) | Code::Move(x) => *x == s,
        Code::Prim1(_, a, _) => reads(a, s),
        Code::Prim2(_, a, b, _) => reads(a, s) || reads(b, s),
        Code::Const(_) | Code::Capture(_) => false,
        _ => true,
    }
}

/// The loop of a function body with parameters `pat`, `more`, if it is one (see the module comment).
/// `body` is the lowered body before its regions are compiled (the flat trees are made from it).
pub(crate) fn build(body: &Code, pat: &LPat, more: &[LPat], h: &Hints) -> Option<SelfLoop> {
    let Code::If(cond, t, f, _) = body else { return None };
    let (on, call) = match (&**t, &**f) {
        (Code::Call(cc), _) if cc.self_tail => (true, cc),
        (_, Code::Call(cc)) if cc.self_tail => (false, cc),
        _ => return None,
    };
    let n = call.args.len();
    if n != 1 + more.len() || n > MAX_ARGS {
        return None;
    }
    let params = std::iter::once(pat)
        .chain(more)
        .map(|p| match p {
            LPat::Slot(s) => Some(Some(*s)),
            LPat::Wild => Some(None),
            _ => None,
        })
        .collect::<Option<Box<[_]>>>()?;
    let Code::Prim2(op, a, b, _) = &**cond else { return None };
    let test = Flat::compare(a, b, *op, !(is_int(a, h) || is_int(b, h)), h)?;
    // the `if` node, the call's `App` nodes and head, and one curried application per argument but the last
    let mut steps = 1 + test.steps() + n as u64 + 1 + (n as u64 - 1);
    let mut real_ops = test.real_ops();
    let mut args = Vec::with_capacity(n);
    let mut leaf = None;
    for (j, a) in call.args.iter().enumerate() {
        let arg = match a {
            Code::Call(g) if leaf.is_none() && !g.self_tail && g.args.len() == 1 => {
                let (Head::Global(def, _), Code::Local(s) | Code::Move(s)) = (&g.head, &g.args[0]) else { return None };
                if params[j] != Some(*s) {
                    return None;
                }
                leaf = Some((j, *s, *def));
                args.push(Arg::Leaf);
                continue;
            }
            Code::Local(s) | Code::Move(s) => Arg::Slot(*s),
            Code::Capture(i) => Arg::Cap(*i),
            Code::Const(v) => Arg::Const(Word::of(v)?),
            a if is_int(a, h) => Arg::Int(Flat::int(a, h)?),
            a => Arg::Real(Flat::real(a, h)?),
        };
        match &arg {
            Arg::Real(fl) => (steps, real_ops) = (steps + fl.steps(), real_ops + fl.real_ops()),
            Arg::Int(fl) => (steps, real_ops) = (steps + fl.steps(), real_ops + fl.real_ops()),
            _ => steps += 1,
        }
        args.push(arg);
    }
    // the scalar-replaced tuple is read by its `Leaf` argument alone
    let mut params = params;
    if let Some((j, s, _)) = leaf {
        if reads(cond, s) || call.args.iter().enumerate().any(|(i, a)| i != j && reads(a, s)) {
            return None;
        }
        // its parameter lives in the scratch frame while rounds run
        params[j] = None;
    }
    Some(SelfLoop { test, on, args: args.into(), params, steps, real_ops, allocs: n as u64 - 1, leaf })
}

/// Hands `lp` to the self call of `body` (the same body with its regions compiled).
pub(crate) fn attach(body: &mut Code, lp: SelfLoop) {
    let Code::If(_, t, f, _) = body else { return };
    let call = if lp.on { &mut **t } else { &mut **f };
    if let Code::Call(cc) = call {
        if cc.self_tail {
            cc.lp = Some(Rc::new(lp));
        }
    }
}

/// `fast::regions`, and the body's loop when it is one.
pub(crate) fn regions(body: &mut Code, h: &Hints, pat: &LPat, more: &[LPat]) {
    let lp = build(body, pat, more, h);
    // a body that may be a taping loop (`round.rs`) is kept as lowered, to compile its round from
    let raw = (h.rounds() && may_round(body)).then(|| body.clone());
    super::fast::regions(body, h);
    if let Some(lp) = lp {
        attach(body, lp);
    }
    if let Some(raw) = raw {
        super::spine::attach_round(body, &raw, pat, more, h.fused, h.calls);
    }
}

/// `[a few lets] if c then … else …` with a branch a let (a spine's shape).
fn may_round(body: &Code) -> bool {
    let mut c = body;
    for _ in 0..8 {
        match c {
            Code::Let(_, _, rest) => c = rest,
            Code::If(_, t, e, _) => return matches!((&**t, &**e), (Code::Let(..), _) | (_, Code::Let(..))),
            _ => return false,
        }
    }
    false
}

impl Machine<'_> {
    /// Runs whole rounds of `lp` while they fit (see the module comment), in the frame a self tail
    /// call has just reset; the body then runs the next round itself.
    pub(super) fn rounds(&mut self, lp: &SelfLoop) {
        if self.call_tracer.is_some() || self.lam_watcher.is_some() {
            return;
        }
        let (mut steps, mut real_ops, mut allocs) = (lp.steps, lp.real_ops, lp.allocs);
        // a `Leaf` argument: its definition's items, and its parameter's tuple in a scratch frame
        let mut leaf = None;
        if let Some((j, s, g)) = lp.leaf {
            let Some(pl) = self.code.defs.get(g as usize).and_then(|d| d.lam.as_ref()).and_then(|l| l.pure.clone()) else { return };
            let base = self.locals.len();
            let Value::Tuple(vs) = &self.locals[self.bp + s as usize] else { return };
            if vs.len() != pl.slots.len() || !vs.iter().all(|v| matches!(v, Value::Real(_))) {
                return;
            }
            let vs = vs.clone();
            self.grow_scratch(pl.nslots);
            for (q, v) in pl.slots.iter().zip(vs.iter()) {
                self.locals[base + *q as usize] = v.clone();
            }
            (steps, real_ops, allocs) = (steps + pl.steps, real_ops + pl.real_ops, allocs + 1);
            leaf = Some((j, s, pl, base));
        }
        // How many rounds fit: none of their steps may reach the step gate (a budget stop, the
        // 4096-step clock check, a cost model), nor their allocations the budget or `alloc`'s
        // memory probe every 4096; `partial_step`'s and `open_frame`'s depth check (a frame pushed
        // not in tail position) is the same in every round. The gates and budgets do not move
        // while rounds run (nothing but the counters added at the end), so this is counted once.
        let mut fit = self.step_gate.saturating_sub(self.steps + 1) / steps;
        if allocs > 0 {
            fit = fit.min(self.budget.allocs.saturating_sub(self.allocs) / allocs);
            if self.memory.is_some() {
                fit = fit.min(((self.allocs | 0xFFF) - self.allocs) / allocs);
            }
            if self.depth >= self.budget.depth {
                fit = 0;
            }
        }
        let mut new = [Word::B(false); MAX_ARGS];
        let mut items = [0.0f64; MAX_ARGS];
        let mut done = 0;
        'round: while done < fit {
            match lp.test.get(self) {
                Some(b) if b == lp.on => {}
                _ => break,
            }
            for (w, a) in new.iter_mut().zip(lp.args.iter()) {
                let v = match a {
                    Arg::Real(fl) => fl.get(self).map(Word::R),
                    Arg::Int(fl) => fl.get(self).map(Word::I),
                    Arg::Slot(s) => Word::of(&self.locals[self.bp + *s as usize]),
                    Arg::Cap(i) => Word::of(&self.env[*i as usize]),
                    Arg::Const(c) => Some(*c),
                    Arg::Leaf => Some(Word::B(false)),
                };
                match v {
                    Some(v) => *w = v,
                    None => break 'round,
                }
            }
            if let Some((_, _, pl, base)) = &leaf {
                // the callee's items read its scratch frame, as its own frame would hold them
                let bp = std::mem::replace(&mut self.bp, *base);
                let mut ok = true;
                for (x, fl) in items.iter_mut().zip(pl.items.iter()) {
                    match fl.get(self) {
                        Some(v) => *x = v,
                        None => {
                            ok = false;
                            break;
                        }
                    }
                }
                self.bp = bp;
                if !ok {
                    break;
                }
                for (q, x) in pl.slots.iter().zip(items) {
                    super::run::set_slot(&mut self.locals[*base + *q as usize], Value::Real(x));
                }
            }
            let frame = &mut self.locals[self.bp..];
            for (p, w) in lp.params.iter().zip(new) {
                if let Some(s) = p {
                    super::run::set_slot(&mut frame[*s as usize], w.value());
                }
            }
            done += 1;
        }
        if let Some((_, s, pl, base)) = leaf {
            // the tuple boxed once, from the scratch frame (each round's allocation is counted below)
            if done > 0 {
                let t: Rc<[Value]> = pl.slots.iter().map(|q| self.locals[base + *q as usize].clone()).collect();
                self.locals[self.bp + s as usize] = Value::Tuple(t);
            }
            super::run::clear_slots(&mut self.locals, base);
        }
        if done > 0 {
            self.steps += done * steps;
            self.real_ops += done * real_ops;
            if allocs > 0 {
                self.allocs += done * allocs;
                self.max_depth = self.max_depth.max(self.depth + 1);
            }
        }
    }

    fn grow_scratch(&mut self, nslots: u32) {
        self.locals.extend(std::iter::repeat_with(|| Value::Unit).take(nslots as usize));
    }
}
