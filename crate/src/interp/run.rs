//! The run loop: a CEK-style machine over lowered code with its continuation stack on the heap.
//!
//! State: `kont` (continuation frames), `locals` (all call frames' slots; the current frame starts
//! at `bp`), `vals` (evaluated items of a tuple or builtin call in progress), `env` (the running
//! closure's captures) and `group` (the running LetRec member's group, for sibling references).
//! A call pushes `Kont::Ret` with the caller's `bp`/`env`/`group` unless the top frame already is a
//! `Ret` (a tail call), in which case the callee reuses the frame. `depth` counts `Ret` frames.
//!
//! Calls (`Code::Call`, `call_go`): the arguments of a multi-parameter function wait on `vals` until
//! it has them all, then one frame binds them; each argument short of the last is counted as the
//! walker's curried application of it (`partial_step`), so counters, budgets and traces agree.
//!
//! Code pointers in frames (`*const Code`) point into the machine's `Lowered` tree, which is
//! immutable and owned by the machine for its whole life; function values are checked to come from
//! this lowering before their code is entered, so every pointer stays valid while it is used.

use super::lower::{CallCode, Code, FunVal, GroupVal, Head, LPat, LamCode, LocalHead, Loc};
use super::fast::FastCode;
use super::prim::{prim1, prim2};
use super::{BudgetKind, Builtin, CostModel, Global, Machine, RunError, Shown, TraceStep, MAX_NESTING};
use crate::diag::Span;
use crate::value::Value;
use std::rc::Rc;

/// Internal results box the (large) error so the hot path moves small values.
pub(super) type Res<T> = Result<T, Box<RunError>>;

pub(super) enum Kont {
    /// Bottom of one (possibly nested) run: its value is the run's result.
    Stop,
    /// Return from a call: restore the caller's frame.
    Ret { bp: usize, env: Rc<[Value]>, group: Option<Rc<GroupVal>> },
    /// The function of an application was being evaluated; the argument comes next.
    AppFun(*const Code, Span),
    /// The argument was being evaluated; then apply the function.
    AppArg(Value, Span),
    Let(*const LPat, *const Code),
    /// Item `i` of a `Tuple`, `CallB` or `CallLazy` node was being evaluated (earlier ones on `vals`).
    Collect(*const Code, u32),
    Fst(Span),
    Snd(Span),
    Inl,
    Inr,
    Case(*const Code),
    If(*const Code),
    /// The first operand of a `Prim1`/`Prim2` node was being evaluated.
    PrimL(*const Code),
    /// The second operand of a `Prim2` node was being evaluated.
    PrimR(*const Code, Value),
    And(*const Code),
    Or(*const Code),
    SetGlobal(u32),
    /// A `Call`'s head (a definition not yet evaluated) was being evaluated.
    CallHead(*const CallCode),
    /// Argument `i` of a `Call` was being evaluated, for `f`; `f`'s arguments so far are on `vals`
    /// from `base` (see `call_go`).
    CallArg { c: *const CallCode, i: u32, f: Value, base: usize },
    /// A function that took arguments before `i` was called; its result takes the rest.
    CallRest(*const CallCode, u32),
    /// Item `i` of a function body's `Tuple` node was being evaluated, rebuilding in place the
    /// tuple `t` its parameter was given (`update_items`).
    Update(*const Code, u32, Rc<[Value]>),
    /// Argument `i` of a call of a known definition (`call_known`) was being evaluated; its
    /// arguments so far are on `vals` from `base`.
    CallKnown { c: *const CallCode, lam: *const LamCode, i: u32, base: usize },
    /// A call spine's event `e` (a `let p = call`) was being evaluated; `f` is the spine's function,
    /// its arguments so far on `vals` from `base` (`spine.rs`).
    Spine { s: *const super::spine::Spine, e: u32, base: usize, f: Value },
}

/// What the loop does next: evaluate a node, or return the value in `Machine::acc` to the top
/// frame. (The value is kept out of this enum: moving it through nested enums was the hot spot.)
pub(super) enum Next {
    Eval(*const Code),
    Ret,
}

/// What the cost model charges for evaluating one node (its children are charged as they are
/// evaluated); read off the node by `charge_of`, and fixed at lowering for fast regions.
#[derive(Clone, Copy)]
pub(super) enum Charge {
    None,
    Var,
    /// A `let` binding this many variables (a tuple pattern binds one per component).
    Bind(u32),
    Proj,
    Prim1(crate::prims::Prim),
    Prim2(crate::prims::Prim),
}

/// The classes of step a cost model charges (`Machine::charged`): reading a variable, binding one,
/// a projection, then each primitive as a unary and as a binary operation. Counting a step's class
/// and multiplying out when the cost is read, rather than adding four counters through the
/// model's functions each step, took a charged step from 36 instructions to 21 (`step_slow`; the
/// unf chain's runs charge every step: unf/target's gradient on `dot`, n = 1,000, 86.4 M → 78.4 M
/// with its untraced runs' named calls no longer looked up; issue 13, session 45).
pub(super) const CHARGE_CLASSES: usize = 3 + 2 * crate::prims::PRIMS.len();

/// What `model` charges for one step of `class` (see `CHARGE_CLASSES`).
pub(super) fn class_charge(model: &CostModel, class: usize) -> [u64; 4] {
    let n = crate::prims::PRIMS.len();
    match class {
        0 => model.var,
        1 => model.bind,
        2 => model.proj,
        c if c < 3 + n => (model.prim1)(crate::prims::PRIMS[c - 3].prim),
        c if c < 3 + 2 * n => (model.prim2)(crate::prims::PRIMS[c - 3 - n].prim),
        _ => [0; 4],
    }
}

/// Whether a call's argument runs in place (`Machine::arg_value`), not by the loop.
pub(super) fn inline_arg(c: &Code) -> bool {
    match c {
        Code::Local(_) | Code::Move(_) | Code::Capture(_) | Code::Const(_) => true,
        Code::Fast(f) => f.has_value(),
        _ => false,
    }
}

/// Writes `v` into a slot. A slot about to be bound mostly holds `()` or a scalar, which own
/// nothing: those are overwritten in place, without the out-of-line `drop_in_place::<Value>` call an
/// assignment makes; anything else is assigned (and dropped) as usual.
#[inline(always)]
pub(super) fn set_slot(slot: &mut Value, v: Value) {
    match slot {
        // SAFETY: these variants own nothing, so not dropping the old value leaks nothing.
        Value::Unit | Value::Real(_) | Value::Int(_) | Value::Bool(_) => unsafe { std::ptr::write(slot, v) },
        _ => *slot = v,
    }
}

/// Shortens `locals` (or the value stack) to `to`, dropping the slots past it. A slot mostly holds `()` or a scalar,
/// which own nothing: only the others go through the drop glue (`Vec::truncate` called the
/// out-of-line `drop_in_place::<Value>` once per slot, about a tenth of a call's cost when a frame
/// closes: issue 13, session 15).
#[inline(always)]
pub(super) fn clear_slots(locals: &mut Vec<Value>, to: usize) {
    let len = locals.len();
    if to >= len {
        return;
    }
    // SAFETY: the length is set first, so a drop that panicked would leak the rest rather than
    // drop a slot twice; each slot in `to..len` is initialised and is dropped once, here.
    unsafe {
        locals.set_len(to);
        let base = locals.as_mut_ptr();
        for k in to..len {
            let slot = base.add(k);
            if !matches!(*slot, Value::Unit | Value::Real(_) | Value::Int(_) | Value::Bool(_)) {
                std::ptr::drop_in_place(slot);
            }
        }
    }
}

/// A function body that is one region with a value: it makes no call, so it runs in place
/// (`Machine::run_leaf`).
#[inline(always)]
pub(super) fn leaf(body: &Code) -> Option<&FastCode> {
    match body {
        Code::Fast(f) if f.has_value() => Some(f),
        _ => None,
    }
}

/// Parameter `k` of a (multi-parameter) lambda.
fn param(lam: &LamCode, k: usize) -> &LPat {
    if k == 0 {
        &lam.pat
    } else {
        lam.more.get(k - 1).unwrap_or(&LPat::Wild)
    }
}

/// The arguments a partial value `f` (`FunVal::Part`) holds, appended to `out`: moved out when no one
/// else holds `f` (a slot's last read), else copied.
fn part_args_into(f: &mut Value, out: &mut Vec<Value>) {
    let Value::Fun(rc) = f else { return };
    if let Some(FunVal::Part { args, .. }) = Rc::get_mut(rc).and_then(|a| a.downcast_mut::<FunVal>()) {
        out.append(args);
    } else if let Some(FunVal::Part { args, .. }) = rc.downcast_ref::<FunVal>() {
        out.extend_from_slice(args);
    }
}

/// Whether item `it` of a function body's tuple is the one read of the slot parameter part `p`
/// binds: its component stays where it is (`Machine::enter_update`).
#[inline(always)]
fn kept(p: &LPat, it: &Code) -> bool {
    matches!((p, it), (LPat::Slot(a), Code::Move(b)) if a == b)
}

/// Writes `v` as component `i` of `t`, in place when no one else holds `t` (`update_items` holds it
/// alone), else into a copy.
fn put(t: &mut Rc<[Value]>, i: usize, v: Value) {
    if let Some(slot) = Rc::get_mut(t).and_then(|c| c.get_mut(i)) {
        *slot = v;
        return;
    }
    let mut c = t.to_vec();
    if let Some(slot) = c.get_mut(i) {
        *slot = v;
    }
    *t = c.into();
}

/// Whether `f` is a function value no one else holds.
fn unique(f: &Value) -> bool {
    matches!(f, Value::Fun(rc) if Rc::strong_count(rc) == 1 && Rc::weak_count(rc) == 0)
}

/// The function value `f` for update in place, when no one else holds it.
fn fun_mut(f: &mut Value) -> Option<&mut FunVal> {
    match f {
        Value::Fun(rc) => Rc::get_mut(rc).and_then(|a| a.downcast_mut::<FunVal>()),
        _ => None,
    }
}

/// The error `bind` would give matching `v` against `p` (nothing is bound).
fn check_pat(p: &LPat, v: &Value) -> Res<()> {
    match (p, v) {
        (LPat::Slot(_) | LPat::Wild, _) | (LPat::Unit(_), Value::Unit) => Ok(()),
        (LPat::Unit(span), v) => Err(Box::new(RunError::runtime(*span, format!("pattern `()` does not match {} (`{v}`)", kind(v))))),
        (LPat::Tuple(t), Value::Tuple(vs)) if vs.len() == t.0.len() => t.0.iter().zip(vs.iter()).try_for_each(|(p, v)| check_pat(p, v)),
        (LPat::Tuple(t), v) => Err(Box::new(RunError::runtime(
            t.1,
            format!("a {}-tuple pattern does not match {} (`{v}`)", t.0.len(), kind(v)),
        ))),
    }
}

pub(super) fn binds(p: &LPat) -> u32 {
    match p {
        LPat::Tuple(t) => t.2,
        _ => 1,
    }
}

pub(super) fn charge_of(c: &Code) -> Charge {
    match c {
        Code::Local(_) | Code::Move(_) | Code::Capture(_) | Code::Sibling(_) | Code::Global(..) | Code::Const(_) => Charge::Var,
        Code::Let(p, ..) => Charge::Bind(binds(p)),
        Code::Fst(..) | Code::Snd(..) => Charge::Proj,
        Code::Prim1(op, ..) => Charge::Prim1(*op),
        Code::Prim2(op, ..) => Charge::Prim2(*op),
        _ => Charge::None,
    }
}

/// A code node behind a frame's pointer (see the module comment for why this is valid).
#[inline(always)]
pub(super) fn node<'a>(c: *const Code) -> &'a Code {
    unsafe { &*c }
}

pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Real(_) => "a real",
        Value::Int(_) => "an integer",
        Value::Bool(_) => "a boolean",
        Value::Unit => "()",
        Value::Tuple(_) => "a tuple",
        Value::Array(_) => "an array",
        Value::Inl(_) | Value::Inr(_) => "a sum",
        Value::Fun(_) => "a function",
        Value::Ext(e) => e.type_name(),
    }
}

impl Machine<'_> {
    /// Runs to completion from the state `start` sets up; re-entrant (nested runs share the stacks).
    /// On error the stacks and the current frame are restored to what they were on entry.
    pub(super) fn run_with(
        &mut self,
        start: impl FnOnce(&mut Self) -> Res<Next>,
    ) -> Result<Value, RunError> {
        if self.nesting >= MAX_NESTING {
            return Err(self.budget_error(BudgetKind::Depth, MAX_NESTING));
        }
        let (kbase, lbase, vbase, bp, depth, span) =
            (self.kont.len(), self.locals.len(), self.vals.len(), self.bp, self.depth, self.span);
        let (env, group) = (self.env.clone(), self.group.clone());
        self.nesting += 1;
        self.kont.push(Kont::Stop);
        let r = match start(self) {
            Ok(next) => self.run_loop(next),
            Err(e) => Err(e),
        }
        .map_err(|e| *e);
        self.nesting -= 1;
        if r.is_err() {
            self.unwind(kbase, lbase, vbase);
            self.bp = bp;
            self.depth = depth;
            self.env = env;
            self.group = group;
        }
        self.span = span;
        r
    }

    /// A one-parameter closure or group member of this lowering whose body is a leaf (`leaf`): what
    /// `apply_fun` would `enter` and run in place (no lambda watcher, which is handed the closure).
    #[allow(clippy::type_complexity)]
    pub(super) fn leaf_one<'f>(&self, f: &'f Value) -> Option<(&'f LamCode, &'f FastCode, &'f Rc<[Value]>, Option<&'f Rc<GroupVal>>)> {
        if self.lam_watcher.is_some() {
            return None;
        }
        let Value::Fun(rc) = f else { return None };
        let (lam, env, group): (&LamCode, _, _) = match rc.downcast_ref::<FunVal>()? {
            FunVal::Clo { code, env } => (code, env, None),
            FunVal::Rec { group, idx } => (group.code.members.get(*idx as usize)?, &group.env, Some(group)),
            _ => return None,
        };
        if lam.prog != self.code.prog || !lam.more.is_empty() {
            return None;
        }
        Some((lam, leaf(lam.code())?, env, group))
    }

    /// `run_with(apply_fun(f, arg))` for an `f` that `leaf_one` took: the same trace, frame, binding
    /// and region in the same order, without the loop (its `Stop` frame, the state it saves to
    /// restore on an error, the result through `acc`). Every array operation's element and every
    /// runtime's callback to a small closure comes through here (issue 13).
    pub(super) fn apply_leaf(&mut self, lam: &LamCode, fc: &FastCode, env: &Rc<[Value]>, group: Option<&Rc<GroupVal>>, arg: Value) -> Result<Value, RunError> {
        if self.nesting >= MAX_NESTING {
            return Err(self.budget_error(BudgetKind::Depth, MAX_NESTING));
        }
        self.trace_named(lam, &arg);
        let vbase = self.vals.len();
        self.leaf_frame(fc, env.clone(), group.cloned(), lam.nslots, vbase, |m| m.bind(&lam.pat, arg))
    }

    /// `run_with(apply_fun2(f, a, b))` for an `f` that `two_short` took and whose body is a leaf:
    /// `partial_step` for `a` as a run's first application counts it (the run's `Stop` frame on top,
    /// so never a tail), then `saturate`'s frame for the region, as `apply_leaf` runs one.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply2_leaf(&mut self, lam: &LamCode, fc: &FastCode, env: &Rc<[Value]>, group: Option<&Rc<GroupVal>>, prior: &[Value], a: Value, b: Value) -> Result<Value, RunError> {
        if self.nesting >= MAX_NESTING {
            return Err(self.budget_error(BudgetKind::Depth, MAX_NESTING));
        }
        let vbase = self.vals.len();
        self.vals.extend(prior.iter().cloned());
        if let Err(e) = self.partial_step(lam, prior.len(), &a, false) {
            self.unwind(self.kont.len(), self.locals.len(), vbase);
            return Err(*e);
        }
        self.vals.push(a);
        self.leaf_frame(fc, env.clone(), group.cloned(), lam.nslots, vbase, |m| m.bind_params(lam, vbase, b))
    }

    /// A leaf's frame opened, its parameters bound (`bind`), its region run and the frame closed
    /// (`run_leaf` below a `Stop`); on an error the machine is put back as `run_with` puts it.
    fn leaf_frame(&mut self, fc: &FastCode, env: Rc<[Value]>, group: Option<Rc<GroupVal>>, nslots: u32, vbase: usize, bind: impl FnOnce(&mut Self) -> Res<()>) -> Result<Value, RunError> {
        let (kbase, lbase, depth, span) = (self.kont.len(), self.locals.len(), self.depth, self.span);
        self.nesting += 1;
        let r = match self.open_frame(env, group, nslots) {
            Ok((bp, env, group)) => match bind(self).and_then(|()| self.fast_value(fc)) {
                Ok(v) => {
                    self.close_frame(bp, env, group);
                    Ok(v)
                }
                Err(e) => {
                    self.unwind_frame((kbase, lbase, vbase), bp, depth, env, group);
                    Err(e)
                }
            },
            Err(e) => {
                self.unwind(kbase, lbase, vbase);
                Err(e)
            }
        };
        self.nesting -= 1;
        self.span = span;
        r.map_err(|e| *e)
    }

    /// `run_with(enter(lam, …))`: `apply` of a closure or group member of this lowering, of one
    /// parameter, whose body `lam.code()` (read here, once, as `enter` reads it) is no leaf, with no
    /// lambda watcher. A body `if c then x else y` whose condition runs in place runs its frame as
    /// `leaf_frame` does when the branch taken is a leaf (`build`'s `λj → if j == k then f (v ! j)
    /// else v ! j`, issue 13): the `if` node's step, the condition, the branch, in the walker's order,
    /// without the `Stop` and `Ret` frames and the trip round the loop. Any other branch goes on in
    /// the loop below the `Stop` and `Ret` frames `run_with` and `enter` would have pushed (its tail
    /// calls reuse the frame); an error leaves the machine as `run_with` leaves it.
    pub(super) fn apply_entered(&mut self, lam: &LamCode, env: &Rc<[Value]>, group: Option<&Rc<GroupVal>>, arg: Value) -> Result<Value, RunError> {
        let body = lam.code();
        let s = match body {
            // (not on the walker, the tests' reference, which has no leaves)
            Code::If(s, ..) if inline_arg(s) && self.nesting < MAX_NESTING && !self.budget.walker => s,
            _ => return self.run_with(|m| m.enter_code(lam, body, env.clone(), group.cloned(), arg)),
        };
        self.trace_named(lam, &arg);
        let (kbase, lbase, vbase, depth, span) = (self.kont.len(), self.locals.len(), self.vals.len(), self.depth, self.span);
        self.nesting += 1;
        let r = match self.open_frame(env.clone(), group.cloned(), lam.nslots) {
            Ok((bp, env, group)) => {
                let next = self.bind(&lam.pat, arg).and_then(|()| self.step(charge_of(body))).and_then(|()| self.arg_value(s)).and_then(|v| self.if_branch(body, v));
                let fc = match &next {
                    Ok(Next::Eval(b)) => leaf(node(*b)),
                    _ => None,
                };
                match (next, fc) {
                    (Ok(_), Some(fc)) => match self.fast_value(fc) {
                        Ok(v) => {
                            self.close_frame(bp, env, group);
                            Ok(v)
                        }
                        Err(e) => {
                            self.unwind_frame((kbase, lbase, vbase), bp, depth, env, group);
                            Err(e)
                        }
                    },
                    (Ok(next), None) => {
                        // the caller's registers kept for an error: the `Ret` frame goes with the unwinding
                        let (env0, group0) = (env.clone(), group.clone());
                        self.kont.push(Kont::Stop);
                        self.kont.push(Kont::Ret { bp, env, group });
                        let r = self.run_loop(next);
                        if r.is_err() {
                            self.unwind_frame((kbase, lbase, vbase), bp, depth, env0, group0);
                        }
                        r
                    }
                    (Err(e), _) => {
                        self.unwind_frame((kbase, lbase, vbase), bp, depth, env, group);
                        Err(e)
                    }
                }
            }
            Err(e) => {
                self.unwind(kbase, lbase, vbase);
                Err(e)
            }
        };
        self.nesting -= 1;
        self.span = span;
        r.map_err(|e| *e)
    }

    /// `unwind`, then the caller's frame registers put back: what an error undoes in a frame opened
    /// in place (`leaf_frame`, `apply_entered`), as `run_with` does for its own.
    fn unwind_frame(&mut self, (kbase, lbase, vbase): (usize, usize, usize), bp: usize, depth: u64, env: Rc<[Value]>, group: Option<Rc<GroupVal>>) {
        self.unwind(kbase, lbase, vbase);
        (self.bp, self.depth, self.env, self.group) = (bp, depth, env, group);
    }

    /// What `run_with` undoes after an error, but the frame's registers: the continuations pushed
    /// since (a definition being evaluated left unevaluated), the slots and pending values.
    fn unwind(&mut self, kbase: usize, lbase: usize, vbase: usize) {
        let mut unfinished = vec![];
        for k in self.kont.drain(kbase..) {
            if let Kont::SetGlobal(i) = k {
                unfinished.push(i);
            }
        }
        for i in unfinished {
            self.globals[i as usize] = Global::Unevaluated;
        }
        clear_slots(&mut self.locals, lbase);
        self.vals.truncate(vbase);
        self.acc = Value::Unit;
    }

    fn run_loop(&mut self, mut next: Next) -> Res<Value> {
        loop {
            next = match next {
                Next::Eval(c) => self.eval(c)?,
                Next::Ret => {
                    let v = std::mem::replace(&mut self.acc, Value::Unit);
                    match self.kont.pop() {
                        Some(Kont::Stop) | None => return Ok(v),
                        Some(k) => self.cont(k, v)?,
                    }
                }
            }
        }
    }

    #[inline(always)]
    pub(super) fn ret(&mut self, v: Value) -> Next {
        self.acc = v;
        Next::Ret
    }

    /// The value of a node read straight from a slot or a constant, charged its step as `eval`
    /// charges it, without a continuation's round trip; None (nothing charged) for any other node.
    #[inline]
    fn immediate(&mut self, c: &Code) -> Res<Option<Value>> {
        if !matches!(c, Code::Local(_) | Code::Move(_) | Code::Capture(_) | Code::Const(_)) {
            return Ok(None);
        }
        self.step(Charge::Var)?;
        Ok(match c {
            Code::Local(s) => Some(self.locals[self.bp + *s as usize].clone()),
            Code::Move(s) => Some(self.take(*s)),
            Code::Capture(k) => Some(self.env[*k as usize].clone()),
            Code::Const(v) => Some(v.clone()),
            _ => None,
        })
    }

    /// The value of a slot read for the last time (`Code::Move`), moved out.
    #[inline(always)]
    pub(super) fn take(&mut self, s: u32) -> Value {
        std::mem::replace(&mut self.locals[self.bp + s as usize], Value::Unit)
    }

    #[inline]
    pub(super) fn load(&self, l: Loc) -> Value {
        match l {
            Loc::Local(s) => self.locals[self.bp + s as usize].clone(),
            Loc::Capture(i) => self.env[i as usize].clone(),
            Loc::Sibling(k) => self.sibling(k),
        }
    }

    pub(super) fn sibling(&self, k: u32) -> Value {
        let group = self.group.clone().expect("a sibling reference runs inside its group");
        Value::Fun(Rc::new(FunVal::Rec { group, idx: k }))
    }

    /// Pushes a call frame for a function with `nslots` locals (reusing the current one in tail
    /// position when `tail_ok`).
    fn push_frame(
        &mut self,
        env: Rc<[Value]>,
        group: Option<Rc<GroupVal>>,
        nslots: u32,
        tail_ok: bool,
    ) -> Res<()> {
        if tail_ok && matches!(self.kont.last(), Some(Kont::Ret { .. })) {
            clear_slots(&mut self.locals, self.bp);
            self.env = env;
            self.group = group;
            self.grow_frame(nslots);
        } else {
            let (bp, env, group) = self.open_frame(env, group, nslots)?;
            self.kont.push(Kont::Ret { bp, env, group });
        }
        Ok(())
    }

    /// A new call frame (depth budget, `max_depth`) whose caller's frame is handed back rather than
    /// pushed as a `Kont::Ret`: `close_frame` restores it.
    #[inline(always)]
    fn open_frame(&mut self, env: Rc<[Value]>, group: Option<Rc<GroupVal>>, nslots: u32) -> Res<(usize, Rc<[Value]>, Option<Rc<GroupVal>>)> {
        if self.depth >= self.budget.depth {
            return Err(Box::new(self.budget_error(BudgetKind::Depth, self.budget.depth)));
        }
        self.depth += 1;
        if self.depth > self.max_depth {
            self.max_depth = self.depth;
        }
        let env = std::mem::replace(&mut self.env, env);
        let group = std::mem::replace(&mut self.group, group);
        let bp = std::mem::replace(&mut self.bp, self.locals.len());
        self.grow_frame(nslots);
        Ok((bp, env, group))
    }

    /// Back to the caller's frame (what returning through a `Kont::Ret` does).
    #[inline(always)]
    fn close_frame(&mut self, bp: usize, env: Rc<[Value]>, group: Option<Rc<GroupVal>>) {
        clear_slots(&mut self.locals, self.bp);
        self.bp = bp;
        self.env = env;
        self.group = group;
        self.depth -= 1;
    }

    /// The frame's slots, empty (`extend` writes them in one pass: `resize` clones a `Unit` per
    /// slot through `Value::clone`, 5 % of a primal run).
    #[inline(always)]
    fn grow_frame(&mut self, nslots: u32) {
        let grow = (self.bp + nslots as usize).saturating_sub(self.locals.len());
        self.locals.extend(std::iter::repeat_with(|| Value::Unit).take(grow));
    }

    /// Calls a function whose body is one region with a value (a leaf: it makes no call), running
    /// the body in place: the frame is opened, `bind` binds the parameters, the region runs and the
    /// frame is closed here, with no `Kont::Ret` and no trip round the loop. Depth, budgets, step
    /// order and a tail call's reuse of the frame are the walker's (a builtin in the region that
    /// re-enters the machine starts a run of its own, as before; an error unwinds in `run_with`).
    fn run_leaf(
        &mut self,
        f: &FastCode,
        env: Rc<[Value]>,
        group: Option<Rc<GroupVal>>,
        nslots: u32,
        tail_ok: bool,
        bind: impl FnOnce(&mut Self) -> Res<()>,
    ) -> Res<Next> {
        if tail_ok && matches!(self.kont.last(), Some(Kont::Ret { .. })) {
            self.push_frame(env, group, nslots, true)?;
            bind(self)?;
            let v = self.fast_value(f)?;
            return Ok(self.ret(v));
        }
        let (bp, env, group) = self.open_frame(env, group, nslots)?;
        bind(self)?;
        let v = self.fast_value(f)?;
        self.close_frame(bp, env, group);
        Ok(self.ret(v))
    }

    fn enter(&mut self, lam: *const LamCode, env: Rc<[Value]>, group: Option<Rc<GroupVal>>, arg: Value) -> Res<Next> {
        // Valid: `lam` belongs to this machine's lowering (checked by the caller).
        let lam: &LamCode = unsafe { &*lam };
        self.enter_code(lam, lam.code(), env, group, arg)
    }

    /// `enter` with the body `lam.code()` gave (read once: reading it counts an entry, `LamCode::code`).
    fn enter_code(&mut self, lam: &LamCode, body: &Code, env: Rc<[Value]>, group: Option<Rc<GroupVal>>, arg: Value) -> Res<Next> {
        self.trace_named(lam, &arg);
        if let (Code::Tuple(items), LPat::Tuple(t), Value::Tuple(vs)) = (body, &lam.pat, &arg) {
            let fits = !items.is_empty() && items.len() == t.0.len() && vs.len() == items.len();
            if fits && Rc::strong_count(vs) == 1 && Rc::weak_count(vs) == 0 && !self.budget.walker && self.lam_watcher.is_none() && lam.more.is_empty() {
                if let Value::Tuple(vs) = arg {
                    return self.enter_update(lam, body, env, group, vs);
                }
                unreachable!("matched as a tuple above");
            }
        }
        if let (Some(f), None) = (leaf(body), self.lam_watcher) {
            return self.run_leaf(f, env, group, lam.nslots, true, |m| m.bind(&lam.pat, arg));
        }
        self.push_frame(env, group, lam.nslots, true)?;
        self.bind(&lam.pat, arg)?;
        Ok(Next::Eval(body))
    }

    /// `enter_code` of `λ(p1, …, pn) → (e1, …, en)` given an n-tuple `vs`: when no one else holds
    /// `vs`, the result is built in its allocation. An item `ek` that is the one read of the slot
    /// `pk` binds (`Code::Move`) keeps its component where it is, charged the step reading it
    /// charges; the others' components are bound and their items written back as evaluated. The
    /// steps, checks, allocation count and their order are the walker's (frame, binding, the
    /// tuple's step, each item's, `alloc(1)`), without binding, reading and gathering every
    /// component (issue 13: the Cayley wrapper's `λ(v, v1, …, vn) → (v, …, f vi, …)` per input).
    fn enter_update(&mut self, lam: &LamCode, body: &Code, env: Rc<[Value]>, group: Option<Rc<GroupVal>>, mut vs: Rc<[Value]>) -> Res<Next> {
        self.push_frame(env, group, lam.nslots, true)?;
        let (Code::Tuple(items), LPat::Tuple(t), Some(comps)) = (body, &lam.pat, Rc::get_mut(&mut vs)) else {
            // (not reached: `enter_code` checks all three) bound and built as the walker does
            self.bind(&lam.pat, Value::Tuple(vs))?;
            return Ok(Next::Eval(body));
        };
        for ((p, it), v) in t.0.iter().zip(items.iter()).zip(comps.iter_mut()) {
            if !kept(p, it) {
                self.bind(p, std::mem::replace(v, Value::Unit))?;
            }
        }
        self.step(charge_of(body))?;
        self.update_items(body, vs, 0)
    }

    /// The items of the `Tuple` node `c` from `i` on, written into `t` (`enter_update`), then `t`.
    fn update_items(&mut self, c: *const Code, mut t: Rc<[Value]>, mut i: usize) -> Res<Next> {
        let Code::Tuple(items) = node(c) else { unreachable!("Update frames are only pushed for tuples") };
        while let Some(it) = items.get(i) {
            // A component still there is one `kept` left in place (the others were moved out to be
            // bound); one kept that is `()` is read from its slot, unbound and so `()` as well.
            if matches!(it, Code::Move(_)) && matches!(t.get(i), Some(v) if !matches!(v, Value::Unit)) {
                self.step(Charge::Var)?;
            } else if let Some(v) = self.immediate(it)? {
                put(&mut t, i, v);
            } else {
                self.kont.push(Kont::Update(c, i as u32, t));
                return Ok(Next::Eval(it));
            }
            i += 1;
        }
        self.alloc(1)?;
        Ok(self.ret(Value::Tuple(t)))
    }

    pub(super) fn enter_global(&mut self, i: u32) -> Res<Next> {
        match &self.globals[i as usize] {
            Global::Done(v) => Ok(self.ret(v.clone())),
            Global::InProgress => Err(Box::new(RunError::runtime(
                self.span,
                format!("definition `{}` needs its own value", self.code.defs[i as usize].name),
            ))),
            Global::Unevaluated => {
                self.globals[i as usize] = Global::InProgress;
                self.kont.push(Kont::SetGlobal(i));
                let d = &self.code.defs[i as usize];
                let (body, nslots): (*const Code, u32) = (&d.body, d.nslots);
                let empty: Rc<[Value]> = Rc::new([]);
                self.push_frame(empty, None, nslots, false)?;
                Ok(Next::Eval(body))
            }
        }
    }

    fn foreign() -> RunError {
        RunError::runtime(Span::NONE, "a function value from another program or machine cannot be applied here")
    }

    pub(super) fn apply_fun(&mut self, f: Value, arg: Value, span: Span) -> Res<Next> {
        let fv = match &f {
            Value::Fun(rc) => rc.downcast_ref::<FunVal>(),
            _ => None,
        };
        let Some(fv) = fv else {
            return Err(Box::new(RunError::runtime(span, format!("cannot apply {} (`{f}`): it is not a function", kind(&f)))));
        };
        match fv {
            FunVal::Clo { code, env } => {
                if code.prog != self.code.prog {
                    return Err(Box::new(Self::foreign()));
                }
                if !code.more.is_empty() {
                    return self.apply_lam(code, env, None, &[], arg, true);
                }
                let lam: *const LamCode = &**code;
                if let (Some(watch), Some(param)) = (self.lam_watcher, code.var_param()) {
                    let captures = env.clone();
                    let next = self.enter(lam, env.clone(), None, arg)?;
                    watch(self, super::Entered { closure: f.clone(), param, captures });
                    return Ok(next);
                }
                self.enter(lam, env.clone(), None, arg)
            }
            FunVal::Rec { group, idx } => {
                let lam = &group.code.members[*idx as usize];
                if lam.prog != self.code.prog {
                    return Err(Box::new(Self::foreign()));
                }
                if !lam.more.is_empty() {
                    return self.apply_lam(lam, &group.env, Some(group), &[], arg, true);
                }
                let lam: *const LamCode = &**lam;
                self.enter(lam, group.env.clone(), Some(group.clone()), arg)
            }
            FunVal::Part { code, env, group, args } => {
                if code.prog != self.code.prog {
                    return Err(Box::new(Self::foreign()));
                }
                self.apply_lam(code, env, group.as_ref(), args, arg, true)
            }
            FunVal::Partial { b, args } => {
                let mut args = args.clone();
                args.push(arg);
                let b = b.clone();
                drop(f);
                if args.len() >= b.arity {
                    self.call_builtin(&b, args, span)
                } else {
                    self.alloc(1)?;
                    Ok(self.ret(Value::Fun(Rc::new(FunVal::Partial { b, args }))))
                }
            }
        }
    }

    /// The curried lambda `f` is (with the arguments it holds) when two more arguments give it all its
    /// parameters: `apply2`'s one run.
    #[allow(clippy::type_complexity)]
    pub(super) fn two_short<'f>(&self, f: &'f Value) -> Option<(&'f Rc<LamCode>, &'f Rc<[Value]>, Option<&'f Rc<GroupVal>>, &'f [Value])> {
        let fv = match f {
            Value::Fun(rc) => rc.downcast_ref::<FunVal>()?,
            _ => return None,
        };
        let (lam, env, group, prior): (_, _, _, &[Value]) = match fv {
            FunVal::Clo { code, env } => (code, env, None, &[]),
            FunVal::Rec { group, idx } => (&group.code.members[*idx as usize], &group.env, Some(group), &[]),
            FunVal::Part { code, env, group, args } => (code, env, group.as_ref(), args),
            FunVal::Partial { .. } => return None,
        };
        (lam.prog == self.code.prog && prior.len() + 1 == lam.more.len()).then_some((lam, env, group, prior))
    }

    /// `apply_fun` of `f` to `a`, then of its result to `b`, for an `f` that `two_short` takes: what the
    /// first does (`apply_lam` short of the last: `partial_step`, tail position as a run's first
    /// application is) and then the second (all parameters bound in one frame), without the partial
    /// value between them: the same counts, checks and trace as the two.
    pub(super) fn apply_fun2(&mut self, f: &Value, a: Value, b: Value, span: Span) -> Res<Next> {
        let Some((lam, env, group, prior)) = self.two_short(f) else {
            return Err(Box::new(RunError::runtime(span, "apply2 of a function it does not take")));
        };
        let (lam, env, group, j) = (lam.clone(), env.clone(), group.cloned(), prior.len());
        let base = self.vals.len();
        self.vals.extend(prior.iter().cloned());
        self.partial_step(&lam, j, &a, true)?;
        self.vals.push(a);
        self.saturate(&lam, env, group, base, b, true)
    }

    /// Applies a multi-parameter lambda holding `prior` arguments to one more: a partial value
    /// until the last, then one frame for all (`tail_ok`: this application is in tail position).
    fn apply_lam(
        &mut self,
        lam: &Rc<LamCode>,
        env: &Rc<[Value]>,
        group: Option<&Rc<GroupVal>>,
        prior: &[Value],
        arg: Value,
        tail_ok: bool,
    ) -> Res<Next> {
        let j = prior.len();
        if j < lam.more.len() {
            self.partial_step(lam, j, &arg, tail_ok)?;
            let base = self.vals.len();
            self.vals.push(arg);
            let part = self.new_part(lam, env, group, prior, base);
            return Ok(self.ret(part));
        }
        if j == 0 {
            self.trace_named(lam, &arg);
        }
        self.push_frame(env.clone(), group.cloned(), lam.nslots, tail_ok)?;
        for (k, v) in prior.iter().enumerate() {
            self.bind(param(lam, k), v.clone())?;
        }
        self.bind(param(lam, j), arg)?;
        Ok(Next::Eval(lam.code()))
    }

    /// What the walker does when it applies a curried lambda to its `j`-th argument, short of the
    /// last: the call's trace step (first argument), a frame pushed (depth budget, `max_depth`) and
    /// popped, the argument matched against the parameter, the inner `Lam` node's step and the
    /// closure it allocates. The engine builds no closure (or one `Part`) but counts the same.
    pub(super) fn partial_step(&mut self, lam: &LamCode, j: usize, arg: &Value, tail_ok: bool) -> Res<()> {
        if j == 0 {
            self.trace_named(lam, arg);
        }
        if !(tail_ok && matches!(self.kont.last(), Some(Kont::Ret { .. }))) {
            if self.depth >= self.budget.depth {
                return Err(Box::new(self.budget_error(BudgetKind::Depth, self.budget.depth)));
            }
            self.max_depth = self.max_depth.max(self.depth + 1);
        }
        let p = param(lam, j);
        // a variable parameter matches anything: no call out of line
        if !matches!(p, LPat::Slot(_) | LPat::Wild) {
            check_pat(p, arg)?;
        }
        self.step(Charge::None)?;
        self.alloc(1)?;
        Ok(())
    }

    #[inline(always)]
    pub(super) fn trace_named(&mut self, lam: &LamCode, arg: &Value) {
        // (a run not traced records nothing: `trace` drops every step then, so neither the name's
        // look-up nor the step is made; the unf chain's runs call a named continuation per element)
        if !self.trace_on {
            return;
        }
        if let (Some(tracer), Some(named)) = (self.call_tracer, &lam.named) {
            if let Some(node) = tracer(&named.name) {
                self.trace_call(node, named, arg);
            }
        }
    }

    /// Evaluates a `Call` node: the walker's steps for its `App` nodes and its head, then `call_go`.
    pub(super) fn eval_call(&mut self, cc: &CallCode) -> Res<Next> {
        // (one per application: a local call's spread tuple has more items than applications)
        for _ in 0..cc.spans.len() {
            self.step(Charge::None)?;
        }
        self.step(Charge::Var)?;
        let f = match cc.head {
            Head::Local(s) => self.locals[self.bp + s as usize].clone(),
            Head::Move(s) => self.take(s),
            Head::Capture(i) => self.env[i as usize].clone(),
            Head::Sibling(k) => self.sibling(k),
            Head::Fn(ref h) => {
                // the walker's `Tuple` step for the argument the items were spread from
                if h.spread {
                    self.step(Charge::None)?;
                }
                return self.call_local(cc, h, 0, self.vals.len(), None);
            }
            Head::Global(i, span) => {
                self.span = span;
                if let Some(lam) = self.known(i, cc.args.len()) {
                    if cc.self_tail && matches!(self.kont.last(), Some(Kont::Ret { .. })) {
                        return self.self_tail(cc, lam);
                    }
                    return self.call_known(cc, lam, 0, self.vals.len(), None);
                }
                match &self.globals[i as usize] {
                    Global::Done(v) => v.clone(),
                    _ => {
                        self.kont.push(Kont::CallHead(cc));
                        return self.enter_global(i);
                    }
                }
            }
        };
        self.call_go(cc, f, 0, self.vals.len(), None)
    }

    /// The code of definition `i` when a call with `n` arguments gives it exactly all its parameters:
    /// a definition that is a lambda is the closure made up front (`Machine::new`) for good, so the
    /// call needs no function value (no clone, no downcast; `call_known`). Not with a lambda watcher
    /// on a one-parameter function: the watcher is handed the closure.
    #[inline(always)]
    fn known(&self, i: u32, n: usize) -> Option<*const LamCode> {
        let lam = self.code.defs.get(i as usize)?.lam.as_deref()?;
        (lam.more.len() + 1 == n && !(lam.more.is_empty() && self.lam_watcher.is_some())).then_some(lam as *const LamCode)
    }

    /// `call_go` for a known definition given all its parameters (`known`): the same steps, checks
    /// and trace in the same order, its arguments from `i` on (`v` is argument `i` when evaluated).
    fn call_known(&mut self, cc: &CallCode, lam: *const LamCode, mut i: usize, base: usize, mut v: Option<Value>) -> Res<Next> {
        // (a local function's call resumes here after an argument the loop ran: `call_local`)
        if let Head::Fn(h) = &cc.head {
            return self.call_local(cc, h, i, base, v);
        }
        // Valid: `known` took it from this machine's lowering (see the module comment).
        let code: &LamCode = unsafe { &*lam };
        let n = cc.args.len();
        loop {
            let arg = match v.take() {
                Some(v) => v,
                None if inline_arg(&cc.args[i]) => self.arg_value(&cc.args[i])?,
                None => {
                    self.kont.push(Kont::CallKnown { c: cc, lam, i: i as u32, base });
                    return Ok(Next::Eval(&cc.args[i]));
                }
            };
            if i + 1 < n {
                self.partial_step(code, i, &arg, false)?;
                self.vals.push(arg);
                i += 1;
                continue;
            }
            if i == 0 {
                self.trace_named(code, &arg);
            }
            // A tail call (issue 13: the peers' `f (k - 1) …`) whose body is not a leaf: the
            // frame is reused in place as `push_frame` does, without its generic moves (a known
            // definition has no captures and no group, so a frame already holding none keeps them).
            if self.tail_frame(code) {
                return self.reuse_frame(code, base, arg);
            }
            let env = self.no_captures.clone();
            return self.saturate(code, env, None, base, arg, true);
        }
    }

    /// A call of a let-bound lambda only called in its scope (`Head::Fn`, `lower.rs`'s `LocalHead`),
    /// without a closure: its arguments from `i` on (a spread tuple's items; `v` is item `i` when
    /// evaluated), then what the walker's application of the closure does — the tuple's allocation
    /// counted, the `call` trace step, a frame pushed (or the caller's reused in tail position) — with
    /// the parameter bound and the captures, read here, written into the frame's slots from
    /// `LamCode::local` on. The walker counts the closure's allocation at its `let`
    /// (`eval`'s `Code::Lam`, which makes none here).
    fn call_local(&mut self, cc: &CallCode, h: &LocalHead, mut i: usize, base: usize, mut v: Option<Value>) -> Res<Next> {
        while let Some(a) = cc.args.get(i) {
            let x = match v.take() {
                Some(x) => x,
                // (the usual items read in place: `arg_value` out of line was a call each)
                None if matches!(a, Code::Local(_) | Code::Move(_) | Code::Const(_)) => {
                    self.step(Charge::Var)?;
                    match a {
                        Code::Local(s) => self.locals[self.bp + *s as usize].clone(),
                        Code::Move(s) => self.take(*s),
                        Code::Const(c) => c.clone(),
                        _ => Value::Unit,
                    }
                }
                None if inline_arg(a) => self.arg_value(a)?,
                None => {
                    let lam: *const LamCode = &*h.lam;
                    self.kont.push(Kont::CallKnown { c: cc, lam, i: i as u32, base });
                    return Ok(Next::Eval(a));
                }
            };
            self.vals.push(x);
            i += 1;
        }
        let lam = &*h.lam;
        if h.spread {
            self.alloc(1)?;
        }
        if self.trace_on && self.call_tracer.is_some() && lam.named.is_some() {
            let arg = if h.spread { Value::Tuple(self.vals[base..].iter().cloned().collect()) } else { self.vals[base].clone() };
            self.trace_named(lam, &arg);
        }
        for &l in h.caps.iter() {
            let x = self.load(l);
            self.vals.push(x);
        }
        let body = lam.code();
        // in tail position the frame on top is reused (as `push_frame` would), else one is opened
        let tail = matches!(self.kont.last(), Some(Kont::Ret { .. }));
        if tail {
            self.reuse_local_frame(lam);
        }
        if let (Some(f), None) = (leaf(body), self.lam_watcher) {
            if tail {
                self.bind_local(h, base)?;
                let v = self.fast_value(f)?;
                return Ok(self.ret(v));
            }
            let env = self.no_captures.clone();
            let (bp, env, group) = self.open_frame(env, None, lam.nslots)?;
            self.bind_local(h, base)?;
            let v = self.fast_value(f)?;
            self.close_frame(bp, env, group);
            return Ok(self.ret(v));
        }
        if !tail {
            let env = self.no_captures.clone();
            self.push_frame(env, None, lam.nslots, false)?;
        }
        self.bind_local(h, base)?;
        Ok(Next::Eval(body))
    }

    /// The frame on top made `lam`'s for a tail call (`call_local`), as `reuse_frame` makes it for a
    /// known definition's: the slots past its size dropped, only those the types do not say hold a
    /// scalar emptied (`LamCode::owning`; every slot is written by its binder before it is read), no
    /// captures and no group.
    fn reuse_local_frame(&mut self, lam: &LamCode) {
        let (bp, n) = (self.bp, lam.nslots as usize);
        match &lam.owning {
            Some(owning) if self.locals.len() >= bp + n => {
                clear_slots(&mut self.locals, bp + n);
                let frame = &mut self.locals[bp..];
                for &s in owning.iter() {
                    if let Some(slot) = frame.get_mut(s as usize) {
                        set_slot(slot, Value::Unit);
                    }
                }
            }
            _ => {
                clear_slots(&mut self.locals, bp);
                self.grow_frame(lam.nslots);
            }
        }
        if !Rc::ptr_eq(&self.env, &self.no_captures) {
            self.env = self.no_captures.clone();
        }
        self.group = None;
    }

    /// `call_local`'s binds in the callee's new frame: the captures (on `vals` above the argument)
    /// into their slots, then the argument, or a spread tuple's items each to its part of the
    /// parameter, as `bind_pat` binds a tuple's (the walker's order of errors), all from `base`.
    fn bind_local(&mut self, h: &LocalHead, base: usize) -> Res<()> {
        let lam = &*h.lam;
        let at = self.bp + lam.local().unwrap_or(0) as usize;
        let top = self.vals.len() - h.caps.len();
        for (j, k) in (top..self.vals.len()).enumerate() {
            let v = std::mem::replace(&mut self.vals[k], Value::Unit);
            set_slot(&mut self.locals[at + j], v);
        }
        match (&lam.pat, h.spread) {
            (LPat::Tuple(t), true) => {
                for (k, p) in (base..top).zip(t.0.iter()) {
                    let v = std::mem::replace(&mut self.vals[k], Value::Unit);
                    self.bind(p, v)?;
                }
            }
            (p, _) => {
                let v = std::mem::replace(&mut self.vals[base], Value::Unit);
                self.bind(p, v)?;
            }
        }
        // (every value moved out: nothing to drop)
        clear_slots(&mut self.vals, base);
        Ok(())
    }

    /// A known definition's saturated call of itself in tail position (`CallCode::self_tail`, the
    /// peers' loops), its frame on top: `call_known`'s steps, checks and trace in the same order,
    /// then the parameters rebound in the frame, reset in place, and the body's code to run again.
    /// An argument that is a call runs in place (`sim (k - 1) (step s)`) when its callee returns at
    /// once (a leaf: nothing left on the stack above the `CallKnown` frame pushed for it); any other
    /// argument that the loop must run goes on as `call_known`, from that frame.
    fn self_tail(&mut self, cc: &CallCode, lam: *const LamCode) -> Res<Next> {
        // Valid: `known` took it from this machine's lowering (see the module comment).
        let code: &LamCode = unsafe { &*lam };
        let n = cc.args.len();
        let base = self.vals.len();
        for (i, a) in cc.args.iter().enumerate() {
            let arg = if let Code::Fast(f) = a {
                if f.has_value() {
                    self.fast_value(f)?
                } else {
                    self.kont.push(Kont::CallKnown { c: cc, lam, i: i as u32, base });
                    return Ok(Next::Eval(a));
                }
            } else if inline_arg(a) {
                self.arg_value(a)?
            } else {
                self.kont.push(Kont::CallKnown { c: cc, lam, i: i as u32, base });
                let Code::Call(inner) = a else { return Ok(Next::Eval(a)) };
                let top = self.kont.len();
                match self.eval_call(inner)? {
                    Next::Ret if self.kont.len() == top => {
                        self.kont.pop();
                        std::mem::replace(&mut self.acc, Value::Unit)
                    }
                    next => return Ok(next),
                }
            };
            if i + 1 < n {
                self.partial_step(code, i, &arg, false)?;
            } else if i == 0 {
                self.trace_named(code, &arg);
            }
            self.vals.push(arg);
        }
        let body = code.code();
        let arg = self.vals.pop().unwrap_or(Value::Unit);
        if leaf(body).is_some() {
            let env = self.no_captures.clone();
            return self.saturate(code, env, None, base, arg, true);
        }
        let next = self.reuse_frame(code, base, arg)?;
        if let Some(lp) = &cc.lp {
            self.rounds(lp);
        }
        Ok(next)
    }

    /// Whether a saturated call of `code` in tail position may reuse the frame on top
    /// (`reuse_frame`): its body is not a leaf and the frame is a call's (a `Kont::Ret` above it).
    #[inline(always)]
    pub(super) fn tail_frame(&self, code: &LamCode) -> bool {
        leaf(code.code()).is_none() && matches!(self.kont.last(), Some(Kont::Ret { .. }))
    }

    /// A known definition's tail call (`call_known`, `self_tail`) reuses the frame on top as
    /// `push_frame` would leave it for a tail call: the body's slots empty (reset in place when the
    /// frame already has its size), no captures and no group (a known definition has neither), the
    /// parameters bound from `vals[base..]` and `arg`; then its body runs.
    pub(super) fn reuse_frame(&mut self, code: &LamCode, base: usize, arg: Value) -> Res<Next> {
        let (bp, nslots) = (self.bp, code.nslots as usize);
        if self.locals.len() == bp + nslots {
            match &code.owning {
                // only the slots that may own something (`LamCode::owning`)
                Some(owning) => {
                    let frame = &mut self.locals[bp..];
                    for &s in owning.iter() {
                        if let Some(slot) = frame.get_mut(s as usize) {
                            set_slot(slot, Value::Unit);
                        }
                    }
                }
                None => {
                    for slot in &mut self.locals[bp..] {
                        set_slot(slot, Value::Unit);
                    }
                }
            }
        } else {
            clear_slots(&mut self.locals, bp);
            self.grow_frame(code.nslots);
        }
        if !Rc::ptr_eq(&self.env, &self.no_captures) {
            self.env = self.no_captures.clone();
        }
        self.group = None;
        self.bind_params(code, base, arg)?;
        Ok(Next::Eval(code.code()))
    }

    /// Applies `f` to the arguments of `cc` from `i` on, in the walker's order: each argument is
    /// evaluated (in place when it is a leaf or a region, else by the loop with a `CallArg` frame),
    /// then applied. A multi-parameter lambda keeps its arguments on `vals` (from `base`) until it
    /// has them all, then runs its body in one frame; `v` is argument `i` when already evaluated.
    /// A partial value of `lam` holding `prior`, then the arguments on `vals` from `base` (drained),
    /// with room for all its parameters but one (so later arguments extend it in place). Made in the
    /// spare one when there is one (`recycle_part`): no allocation.
    pub(super) fn new_part(&mut self, lam: &Rc<LamCode>, env: &Rc<[Value]>, group: Option<&Rc<GroupVal>>, prior: &[Value], base: usize) -> Value {
        if let Some(mut f) = self.spare_part.take() {
            if let Some(FunVal::Part { code, env: e, group: g, args }) = fun_mut(&mut f) {
                // the spare's fields hold nothing of a program's (see `recycle_part`): plain assignment
                (*code, *e, *g) = (lam.clone(), env.clone(), group.cloned());
                args.reserve(lam.more.len());
                args.extend_from_slice(prior);
                args.extend(self.vals.drain(base..));
                return f;
            }
        }
        let mut args = Vec::with_capacity(lam.more.len());
        args.extend_from_slice(prior);
        args.extend(self.vals.drain(base..));
        Value::Fun(Rc::new(FunVal::Part { code: lam.clone(), env: env.clone(), group: group.cloned(), args }))
    }

    /// Keeps a partial value whose arguments were moved out (no one else holds it) as the spare for
    /// `new_part`. Its captures and group go now, through `FunVal`'s own drop (which takes long
    /// chains apart without recursing); the box and the argument buffer stay.
    fn recycle_part(&mut self, mut f: Value) {
        let Some(part) = fun_mut(&mut f) else { return };
        let FunVal::Part { code, args, .. } = part else { return };
        if !args.is_empty() {
            return;
        }
        let spent = FunVal::Part { code: code.clone(), env: self.no_captures.clone(), group: None, args: std::mem::take(args) };
        drop(std::mem::replace(part, spent));
        self.spare_part = Some(f);
    }

    fn call_go(&mut self, cc: &CallCode, mut f: Value, mut i: usize, base: usize, mut v: Option<Value>) -> Res<Next> {
        let n = cc.args.len();
        loop {
            let arg = match v.take() {
                Some(v) => v,
                None if inline_arg(&cc.args[i]) => self.arg_value(&cc.args[i])?,
                None => {
                    self.kont.push(Kont::CallArg { c: cc, i: i as u32, f, base });
                    return Ok(Next::Eval(&cc.args[i]));
                }
            };
            let last = i + 1 == n;
            let fv = match &f {
                Value::Fun(rc) => rc.downcast_ref::<FunVal>(),
                _ => None,
            };
            let (lam, env, group, prior): (&Rc<LamCode>, &Rc<[Value]>, Option<&Rc<GroupVal>>, &[Value]) = match fv {
                Some(FunVal::Clo { code, env }) if !code.more.is_empty() => (code, env, None, &[]),
                Some(FunVal::Rec { group, idx }) if !group.code.members[*idx as usize].more.is_empty() => {
                    (&group.code.members[*idx as usize], &group.env, Some(group), &[])
                }
                Some(FunVal::Part { code, env, group, args }) => (code, env, group.as_ref(), &args[..]),
                // one parameter, a builtin or not a function: the walker's application
                _ => {
                    if !last {
                        self.kont.push(Kont::CallRest(cc, i as u32 + 1));
                    }
                    return self.apply_fun(f, arg, cc.spans[i]);
                }
            };
            if lam.prog != self.code.prog {
                return Err(Box::new(Self::foreign()));
            }
            let j = prior.len() + (self.vals.len() - base);
            if j < lam.more.len() {
                self.partial_step(lam, j, &arg, last)?;
                self.vals.push(arg);
                if last {
                    // A partial value no one else holds (a slot's last read: `v ← f a; …; v b`
                    // in the monadic translations) takes its new arguments in place: no new
                    // value, no copies (the walker's counts are `partial_step`'s, not these).
                    if !prior.is_empty() && unique(&f) {
                        // (only a `Part` has prior arguments)
                        let Some(FunVal::Part { args, .. }) = fun_mut(&mut f) else {
                            return Err(Box::new(RunError::runtime(cc.spans[i], "internal: prior arguments outside a partial value")));
                        };
                        args.extend(self.vals.drain(base..));
                        return Ok(self.ret(f));
                    }
                    // room for as many arguments as a partial value holds (all parameters but
                    // one), so later arguments extend it in place
                    let part = self.new_part(lam, env, group, prior, base);
                    return Ok(self.ret(part));
                }
                i += 1;
                continue;
            }
            // saturated: one frame for all the parameters
            if j == 0 {
                self.trace_named(lam, &arg);
            }
            if !last {
                self.kont.push(Kont::CallRest(cc, i as u32 + 1));
            }
            if prior.is_empty() {
                return self.saturate(lam, env.clone(), group.cloned(), base, arg, last);
            }
            // the arguments in parameter order on `vals`: the prior ones (moved out of a partial
            // value no one else holds, else copied), then those pending
            let (lam, env, group) = (lam.clone(), env.clone(), group.cloned());
            let pending = self.vals.len() - base;
            part_args_into(&mut f, &mut self.vals);
            self.recycle_part(f);
            self.vals[base..].rotate_left(pending);
            return self.saturate(&lam, env, group, base, arg, last);
        }
    }

    /// Enters `lam` with all its arguments: those on `vals` from `base`, then `arg`, in one frame.
    pub(super) fn saturate(&mut self, lam: &LamCode, env: Rc<[Value]>, group: Option<Rc<GroupVal>>, base: usize, arg: Value, last: bool) -> Res<Next> {
        let body = lam.code();
        if let Some(f) = leaf(body) {
            return self.run_leaf(f, env, group, lam.nslots, last, |m| m.bind_params(lam, base, arg));
        }
        self.push_frame(env, group, lam.nslots, last)?;
        self.bind_params(lam, base, arg)?;
        Ok(Next::Eval(body))
    }

    /// Binds `lam`'s parameters in the new frame: those waiting on `vals` from `base`, then `arg`.
    #[inline(always)]
    fn bind_params(&mut self, lam: &LamCode, base: usize, arg: Value) -> Res<()> {
        let total = self.vals.len() - base;
        for k in 0..total {
            let v = std::mem::replace(&mut self.vals[base + k], Value::Unit);
            self.bind(param(lam, k), v)?;
        }
        clear_slots(&mut self.vals, base);
        self.bind(param(lam, total), arg)
    }

    /// An argument evaluated without the loop (`inline_arg`): a leaf or a region with a value.
    /// (Plain `Res<Value>`: an `Option` inside made the compiler shuffle the value through
    /// misaligned stack slots, a tenth of `call_go`'s time.)
    pub(super) fn arg_value(&mut self, c: &Code) -> Res<Value> {
        match c {
            Code::Local(s) => {
                self.step(Charge::Var)?;
                Ok(self.locals[self.bp + *s as usize].clone())
            }
            Code::Move(s) => {
                self.step(Charge::Var)?;
                Ok(self.take(*s))
            }
            Code::Capture(i) => {
                self.step(Charge::Var)?;
                Ok(self.env[*i as usize].clone())
            }
            Code::Const(v) => {
                self.step(Charge::Var)?;
                Ok(v.clone())
            }
            Code::Fast(f) => self.fast_value(f),
            _ => Err(Box::new(RunError::runtime(Span::NONE, "internal: an argument run in place is a leaf or a region"))),
        }
    }

    fn call_builtin(&mut self, b: &Builtin, args: Vec<Value>, span: Span) -> Res<Next> {
        let r = self.call_builtin_value(b, args, span)?;
        Ok(self.ret(r))
    }

    /// Runs a saturated builtin on `args` (a buffer that goes back to the pool).
    pub(super) fn call_builtin_value(&mut self, b: &Builtin, args: Vec<Value>, span: Span) -> Res<Value> {
        let run = b.run;
        self.in_builtin(b.name, span, args, |m, args| run(m, args, span))
    }

    /// Runs a fused pair `outer (inner args)` (`Fused`) as the inner builtin's call; the fused
    /// function switches to the outer one itself (`Machine::enter_builtin`).
    pub(super) fn call_fused(&mut self, f: super::FusedFn, inner: &Builtin, args: Vec<Value>, spans: [Span; 2]) -> Res<Value> {
        self.in_builtin(inner.name, spans[0], args, |m, args| f(m, args, spans))
    }

    /// `call_fused` for a fused pair given unboxed (real, integer) pairs (`ScalarFusedFn`): run as
    /// the inner builtin at its span, as `in_builtin` runs it, with no argument buffer.
    #[inline]
    pub(super) fn call_fused_scalar<I>(&mut self, f: super::ScalarFusedFn<I>, inner: &Builtin, args: &[(f64, I)], spans: [Span; 2]) -> Res<Value> {
        let old = std::mem::replace(&mut self.span, spans[0]);
        let old_b = std::mem::replace(&mut self.builtin, inner.name);
        let r = f(self, args, spans);
        self.span = old;
        self.builtin = old_b;
        Ok(r?)
    }

    /// Runs `f` as builtin `name` at `span` (the machine's current span and builtin restored after),
    /// then gives the argument buffer back to the pool (builtins re-enter, so one buffer is not enough).
    fn in_builtin(&mut self, name: &'static str, span: Span, mut args: Vec<Value>, f: impl FnOnce(&mut Self, &mut Vec<Value>) -> Result<Value, RunError>) -> Res<Value> {
        let old = std::mem::replace(&mut self.span, span);
        let old_b = std::mem::replace(&mut self.builtin, name);
        let r = f(self, &mut args);
        self.span = old;
        self.builtin = old_b;
        args.clear();
        if self.arg_bufs.len() < 64 {
            self.arg_bufs.push(args);
        }
        Ok(r?)
    }

    fn call_lazy(&mut self, b: &Builtin, mut args: Vec<Value>, thunk: &Rc<LamCode>, span: Span) -> Res<Next> {
        self.alloc(1)?;
        let env: Rc<[Value]> = thunk.captures.iter().map(|&l| self.load(l)).collect();
        args.push(Value::Fun(Rc::new(FunVal::Clo { code: thunk.clone(), env })));
        self.call_builtin(b, args, span)
    }

    /// Binds `v` to `p` in the current frame (a slot in place; patterns by `bind_pat`).
    #[inline(always)]
    pub(super) fn bind(&mut self, p: &LPat, v: Value) -> Res<()> {
        match p {
            LPat::Slot(s) => {
                set_slot(&mut self.locals[self.bp + *s as usize], v);
                Ok(())
            }
            p => self.bind_pat(p, v),
        }
    }

    fn bind_pat(&mut self, p: &LPat, v: Value) -> Res<()> {
        match p {
            LPat::Slot(s) => {
                self.locals[self.bp + *s as usize] = v;
                Ok(())
            }
            LPat::Wild => Ok(()),
            LPat::Unit(span) => match v {
                Value::Unit => Ok(()),
                v => Err(Box::new(RunError::runtime(*span, format!("pattern `()` does not match {} (`{v}`)", kind(&v))))),
            },
            LPat::Tuple(t) => match v {
                Value::Tuple(mut vs) if vs.len() == t.0.len() => {
                    let ps = &t.0;
                    // a tuple no one else holds gives its components away (no clone and drop each)
                    if let Some(items) = Rc::get_mut(&mut vs) {
                        for (p, v) in ps.iter().zip(items.iter_mut()) {
                            self.bind(p, std::mem::replace(v, Value::Unit))?;
                        }
                    } else {
                        for (p, v) in ps.iter().zip(vs.iter()) {
                            self.bind(p, v.clone())?;
                        }
                    }
                    Ok(())
                }
                v => Err(Box::new(RunError::runtime(
                    t.1,
                    format!("a {}-tuple pattern does not match {} (`{v}`)", t.0.len(), kind(&v)),
                ))),
            },
        }
    }

    /// One evaluation step of a node whose cost-model charge is `ch`: the step counter, the steps
    /// budget, the clock every 4096 steps, the cost model. The walker and the fast regions
    /// (`fast.rs`) both count through here, so the counters and the budget errors agree exactly.
    /// The three checks share one comparison with `step_gate` (issue 13: a step is a few
    /// instructions, and a primal horner iteration makes about twenty).
    #[inline(always)]
    pub(super) fn step(&mut self, ch: Charge) -> Res<()> {
        self.steps += 1;
        if self.steps >= self.step_gate {
            return self.step_slow(ch);
        }
        Ok(())
    }

    /// `step`'s checks in full, then the gate moved to the next step that needs them. Under a cost
    /// model every step comes here (its gate stays 0): the budget and clock checks are out of line so
    /// that a step that only charges the model is a short call (issue 13: the `unf` chain's runs).
    #[inline(never)]
    fn step_slow(&mut self, ch: Charge) -> Res<()> {
        if self.steps > self.budget.steps || self.steps & 0xFFF == 0 {
            // (out of line, so that a step that only charges the model calls nothing and saves no
            // registers)
            return self.step_checked(ch);
        }
        self.step_gated(ch);
        Ok(())
    }

    /// `step_slow` at a budget or clock check.
    #[cold]
    #[inline(never)]
    fn step_checked(&mut self, ch: Charge) -> Res<()> {
        self.step_checks()?;
        self.step_gated(ch);
        Ok(())
    }

    /// A step past its checks: charged to the cost model, or, without one, the gate moved to the
    /// next step that needs `step_slow`.
    #[inline(always)]
    fn step_gated(&mut self, ch: Charge) {
        match self.model {
            Some(_) => self.charge_model(ch),
            None => self.step_gate = self.budget.steps.saturating_add(1).min((self.steps | 0xFFF).saturating_add(1)),
        }
    }

    /// The steps budget, then the clock every 4096 steps.
    #[cold]
    #[inline(never)]
    fn step_checks(&mut self) -> Res<()> {
        if self.steps > self.budget.steps {
            return Err(Box::new(self.budget_error(BudgetKind::Steps, self.budget.steps)));
        }
        if self.steps & 0xFFF == 0 {
            self.check_clock().map_err(Box::new)?;
        }
        Ok(())
    }

    /// A step of class `ch` counted (`class_charge` says what the model charges for each); a `let`
    /// counts one per variable it binds, as the model charges per variable.
    #[inline(always)]
    fn charge_model(&mut self, ch: Charge) {
        let (class, n) = match ch {
            Charge::None => return,
            Charge::Var => (0, 1),
            Charge::Bind(k) => (1, k as u64),
            Charge::Proj => (2, 1),
            Charge::Prim1(op) => (3 + op as usize, 1),
            Charge::Prim2(op) => (3 + crate::prims::PRIMS.len() + op as usize, 1),
        };
        if let Some(c) = self.charged.get_mut(class) {
            *c += n;
        }
    }

    /// A `call` trace step: the function's name with its argument, one row per parameter.
    fn trace_call(&mut self, node: u64, named: &super::lower::Named, arg: &Value) {
        if !self.tracing() {
            self.trace(TraceStep::default());
            return;
        }
        let parts: Vec<Value> = match arg {
            Value::Tuple(vs) if vs.len() == named.params.len() => vs.to_vec(),
            v => vec![v.clone()],
        };
        let shown = |v: &Value| match v {
            Value::Real(x) => Shown::from(*x),
            v => Shown::text(v.to_string()),
        };
        let state: Vec<(String, Shown)> = named.params.iter().map(|p| p.to_string()).zip(parts.iter().map(shown)).collect();
        let factor = parts.last().map(shown);
        let args: Vec<String> = parts.iter().map(|v| v.to_string()).collect();
        self.trace(TraceStep {
            kind: "call".into(),
            node: Some(node),
            span: None,
            factor,
            note: format!("{}({})", named.name, args.join(", ")),
            state,
            ..TraceStep::default()
        });
    }

    fn eval(&mut self, mut c: *const Code) -> Res<Next> {
        // an `if` or `case` whose condition runs in place goes on to its branch here, without a trip
        // round the loop (issue 13: a recursive function's body is mostly `if k == 0 then … else f …`)
        loop {
            // a fast region counts its own nodes' steps (it is not a node of the walker's)
            match node(c) {
                Code::Fast(f) => return self.run_fast(f),
                // a self tail call jumps back to the body here, without a trip round the loop
                Code::Call(cc) if cc.self_tail => match self.eval_call(cc)? {
                    Next::Eval(b) => {
                        c = b;
                        continue;
                    }
                    n => return Ok(n),
                },
                Code::Call(cc) => return self.eval_call(cc),
                Code::Spine(s) => return self.run_spine(s),
                _ => {}
            }
            self.step(charge_of(node(c)))?;
            return Ok(match node(c) {
                Code::Fast(f) => return self.run_fast(f),
                Code::Call(cc) => return self.eval_call(cc),
                Code::Spine(s) => return self.run_spine(s),
                Code::Local(s) => self.ret(self.locals[self.bp + *s as usize].clone()),
                Code::Move(s) => {
                    let v = self.take(*s);
                    self.ret(v)
                }
                Code::Capture(i) => self.ret(self.env[*i as usize].clone()),
                Code::Sibling(k) => self.ret(self.sibling(*k)),
                Code::Global(i, span) => {
                    self.span = *span;
                    return self.enter_global(*i);
                }
                Code::Const(v) => self.ret(v.clone()),
                // a let-bound lambda only called in its scope: counted, not made (`call_local`)
                Code::Lam(l) if l.local().is_some() => {
                    self.alloc(1)?;
                    self.ret(Value::Unit)
                }
                Code::Lam(l) => {
                    self.alloc(1)?;
                    let env: Rc<[Value]> = l.captures.iter().map(|&x| self.load(x)).collect();
                    self.ret(Value::Fun(Rc::new(FunVal::Clo { code: l.clone(), env })))
                }
                Code::App(f, a, span) => {
                    self.kont.push(Kont::AppFun(&**a, *span));
                    Next::Eval(&**f)
                }
                // a let-bound lambda only called in its scope (`call_local`): its step and the
                // closure's allocation counted, nothing made, and on to the body without a trip
                // round the loop
                Code::Let(p, rhs, body) if matches!(&**rhs, Code::Lam(l) if l.local().is_some()) => {
                    self.step(Charge::None)?;
                    self.alloc(1)?;
                    self.bind(p, Value::Unit)?;
                    c = &**body;
                    continue;
                }
                Code::Let(p, rhs, body) => {
                    self.kont.push(Kont::Let(p, &**body));
                    Next::Eval(&**rhs)
                }
                Code::LetRec(g, slots, body) => {
                    self.alloc(slots.len() as u64)?;
                    let env: Rc<[Value]> = g.captures.iter().map(|&x| self.load(x)).collect();
                    let gv = Rc::new(GroupVal { code: g.clone(), env });
                    for (k, s) in slots.iter().enumerate() {
                        self.locals[self.bp + *s as usize] =
                            Value::Fun(Rc::new(FunVal::Rec { group: gv.clone(), idx: k as u32 }));
                    }
                    Next::Eval(&**body)
                }
                Code::Tuple(items) | Code::ArrayLit(items) | Code::CallB(_, items, _) if !items.is_empty() => {
                    self.kont.push(Kont::Collect(c, 0));
                    Next::Eval(&items[0])
                }
                Code::CallLazy(lazy) if !lazy.1.is_empty() => {
                    self.kont.push(Kont::Collect(c, 0));
                    Next::Eval(&lazy.1[0])
                }
                Code::Tuple(_) => self.ret(Value::Unit),
                Code::ArrayLit(_) => self.ret(Value::Array(Rc::from(vec![]))),
                Code::CallB(b, _, span) => return self.call_builtin(b, vec![], *span),
                Code::CallLazy(lazy) => return self.call_lazy(&lazy.0, vec![], &lazy.2, lazy.3),
                Code::Fst(a, span) => {
                    self.kont.push(Kont::Fst(*span));
                    Next::Eval(&**a)
                }
                Code::Snd(a, span) => {
                    self.kont.push(Kont::Snd(*span));
                    Next::Eval(&**a)
                }
                Code::Inl(a) => {
                    self.kont.push(Kont::Inl);
                    Next::Eval(&**a)
                }
                Code::Inr(a) => {
                    self.kont.push(Kont::Inr);
                    Next::Eval(&**a)
                }
                // a scrutinee or condition that is a leaf or a region with a value runs in place (the
                // same steps in the same order, without a frame and a trip round the loop)
                Code::Case(cs) if inline_arg(&cs.0) => {
                    let v = self.arg_value(&cs.0)?;
                    match self.case_branch(c, v)? {
                        Next::Eval(b) => {
                            c = b;
                            continue;
                        }
                        n => return Ok(n),
                    }
                }
                Code::If(s, ..) if inline_arg(s) => {
                    let v = self.arg_value(s)?;
                    match self.if_branch(c, v)? {
                        Next::Eval(b) => {
                            c = b;
                            continue;
                        }
                        n => return Ok(n),
                    }
                }
                Code::Case(cs) => {
                    self.kont.push(Kont::Case(c));
                    Next::Eval(&cs.0)
                }
                Code::If(cond, ..) => {
                    self.kont.push(Kont::If(c));
                    Next::Eval(&**cond)
                }
                Code::Prim1(_, a, _) | Code::Prim2(_, a, _, _) => {
                    self.kont.push(Kont::PrimL(c));
                    Next::Eval(&**a)
                }
                Code::And(a, ..) => {
                    self.kont.push(Kont::And(c));
                    Next::Eval(&**a)
                }
                Code::Or(a, ..) => {
                    self.kont.push(Kont::Or(c));
                    Next::Eval(&**a)
                }
            });
        }
    }

    /// A `case` node's branch for the scrutinee's value `v`, its pattern bound.
    fn case_branch(&mut self, c: *const Code, v: Value) -> Res<Next> {
        let Code::Case(cs) = node(c) else { unreachable!("Case frames are only pushed for case nodes") };
        let (_, p1, e1, p2, e2, span) = &**cs;
        let (p, e, x) = match v {
            Value::Inl(x) => (p1, e1, x),
            Value::Inr(x) => (p2, e2, x),
            v => return Err(Box::new(RunError::runtime(*span, format!("`case` on {} (`{v}`), not a sum", kind(&v))))),
        };
        let x = crate::value::unshared(x);
        self.bind(p, x)?;
        Ok(Next::Eval(e))
    }

    /// An `if` node's branch for the condition's value `v`.
    pub(super) fn if_branch(&mut self, c: *const Code, v: Value) -> Res<Next> {
        let Code::If(_, t, f, span) = node(c) else { unreachable!("If frames are only pushed for if nodes") };
        match v {
            Value::Bool(true) => Ok(Next::Eval(&**t)),
            Value::Bool(false) => Ok(Next::Eval(&**f)),
            v => Err(Box::new(RunError::runtime(*span, format!("`if` condition is {} (`{v}`), not a boolean", kind(&v))))),
        }
    }

    fn cont(&mut self, k: Kont, v: Value) -> Res<Next> {
        Ok(match k {
            Kont::Stop => unreachable!("handled by run_loop"),
            Kont::Ret { bp, env, group } => {
                self.close_frame(bp, env, group);
                self.ret(v)
            }
            Kont::AppFun(a, span) => {
                self.kont.push(Kont::AppArg(v, span));
                Next::Eval(a)
            }
            Kont::AppArg(f, span) => return self.apply_fun(f, v, span),
            Kont::Let(p, body) => {
                self.bind(unsafe { &*p }, v)?;
                Next::Eval(body)
            }
            Kont::Update(c, i, mut t) => {
                put(&mut t, i as usize, v);
                return self.update_items(c, t, i as usize + 1);
            }
            Kont::Collect(c, i) => {
                self.vals.push(v);
                let code = node(c);
                let items = match code {
                    Code::Tuple(items) | Code::ArrayLit(items) | Code::CallB(_, items, _) => items,
                    Code::CallLazy(lazy) => &lazy.1,
                    _ => unreachable!("Collect frames are only pushed for tuples, arrays and builtin calls"),
                };
                let mut i = i as usize + 1;
                // the items read straight from a slot or a constant are pushed here, each charged
                // its step as `eval` charges it, without a continuation's round trip (issue 13: the
                // Cayley wrapper's backpropagators rebuild an n-tuple of variables around one call)
                while let Some(v) = match items.get(i) {
                    Some(it) => self.immediate(it)?,
                    None => None,
                } {
                    self.vals.push(v);
                    i += 1;
                }
                if i < items.len() {
                    self.kont.push(Kont::Collect(c, i as u32));
                    return Ok(Next::Eval(&items[i]));
                }
                let from = self.vals.len() - items.len();
                match code {
                    Code::Tuple(_) => {
                        self.alloc(1)?;
                        // straight into the tuple's one allocation (a Vec first would be a second)
                        let vs: Rc<[Value]> = self.vals.drain(from..).collect();
                        return Ok(self.ret(Value::Tuple(vs)));
                    }
                    Code::ArrayLit(_) => {
                        self.alloc(items.len() as u64)?;
                        let vs: Rc<[Value]> = self.vals.drain(from..).collect();
                        return Ok(self.ret(Value::Array(vs)));
                    }
                    _ => {}
                }
                // a builtin's arguments, in a buffer from the pool (`call_builtin` returns it)
                let mut vs = self.arg_bufs.pop().unwrap_or_default();
                vs.extend(self.vals.drain(from..));
                match code {
                    Code::CallB(b, _, span) => return self.call_builtin(b, vs, *span),
                    Code::CallLazy(lazy) => return self.call_lazy(&lazy.0, vs, &lazy.2, lazy.3),
                    _ => unreachable!(),
                }
            }
            Kont::Fst(span) | Kont::Snd(span) => {
                let i = usize::from(matches!(k, Kont::Snd(_)));
                match &v {
                    Value::Tuple(vs) if vs.len() > i => self.ret(vs[i].clone()),
                    _ => {
                        let what = if i == 0 { "fst" } else { "snd" };
                        return Err(Box::new(RunError::runtime(span, format!("`{what}` of {} (`{v}`)", kind(&v)))));
                    }
                }
            }
            Kont::Inl => {
                self.alloc(1)?;
                self.ret(Value::Inl(Rc::new(v)))
            }
            Kont::Inr => {
                self.alloc(1)?;
                self.ret(Value::Inr(Rc::new(v)))
            }
            Kont::Case(c) => return self.case_branch(c, v),
            Kont::If(c) => return self.if_branch(c, v),
            Kont::PrimL(c) => match node(c) {
                Code::Prim1(op, _, span) => {
                    let r = prim1(*op, v, *span, &mut self.real_ops)?;
                    self.ret(r)
                }
                // a second operand read straight from a slot or a constant: the operation at once
                Code::Prim2(op, _, b, span) => match self.immediate(b)? {
                    Some(w) => {
                        let r = prim2(*op, v, w, *span, &mut self.real_ops)?;
                        self.ret(r)
                    }
                    None => {
                        self.kont.push(Kont::PrimR(c, v));
                        Next::Eval(&**b)
                    }
                },
                _ => unreachable!(),
            },
            Kont::PrimR(c, a) => {
                let Code::Prim2(op, _, _, span) = node(c) else { unreachable!() };
                let r = prim2(*op, a, v, *span, &mut self.real_ops)?;
                self.ret(r)
            }
            Kont::And(c) | Kont::Or(c) => {
                let (Code::And(_, b, span) | Code::Or(_, b, span)) = node(c) else { unreachable!() };
                let is_and = matches!(k, Kont::And(_));
                match v {
                    Value::Bool(x) if x == is_and => Next::Eval(&**b),
                    Value::Bool(x) => self.ret(Value::Bool(x)),
                    v => {
                        let op = if is_and { "&&" } else { "||" };
                        return Err(Box::new(RunError::runtime(*span, format!("`{op}` on {} (`{v}`)", kind(&v)))));
                    }
                }
            }
            Kont::SetGlobal(i) => {
                self.globals[i as usize] = Global::Done(v.clone());
                self.ret(v)
            }
            // Valid: call nodes of this machine's lowering (see the module comment).
            Kont::CallHead(cc) => return self.call_go(unsafe { &*cc }, v, 0, self.vals.len(), None),
            Kont::CallArg { c, i, f, base } => return self.call_go(unsafe { &*c }, f, i as usize, base, Some(v)),
            Kont::CallRest(cc, i) => return self.call_go(unsafe { &*cc }, v, i as usize, self.vals.len(), None),
            Kont::CallKnown { c, lam, i, base } => return self.call_known(unsafe { &*c }, lam, i as usize, base, Some(v)),
            Kont::Spine { s, e, base, f } => return self.spine_resume(unsafe { &*s }, e as usize, base, f, v),
        })
    }
}
