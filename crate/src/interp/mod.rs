//! The one interpreter: call-by-value, for source programs and every stage's output.
//!
//! CONTRACT (the signatures below are used by the stages, the pipeline and the CLI):
//! - `Machine::new(program, builtins, budget)` prepares a program (resolving names to slots).
//! - `machine.call(name, args)` applies top-level definition `name` to `args` in turn (curried).
//! - Costs accumulate over calls; `cost()`, `take_trace()`, `state::<T>()` read them out.
//! - Builtins use `tick`, `alloc`, `real_op`, `count`, `trace`, `tracing`, `state` and `apply`.
//! - No native recursion proportional to the program's depth of calls or data: the machine keeps
//!   its control stack on the heap, so a depth budget stops runaway recursion cleanly, in wasm too.
//!
//! DESIGN: `Machine::new` lowers the IR to slot-resolved code (see `lower.rs`): per-call frames of
//! local slots on one heap `Vec`, flat closures that copy their free variables when created, LetRec
//! groups as one shared object (no Rc cycles), globals in a table (lambdas made up front, other
//! defs evaluated on first use). `run.rs` is a CEK-style loop over that code with an explicit
//! continuation stack (`Kont`) on the heap; calls in tail position reuse the caller's frame, so
//! `depth` counts the call frames actually kept. Function values only run in the machine (lowering)
//! that created them. The call-free parts of each body are compiled to closures (`fast.rs`) that
//! the loop runs as one node each, and curried lambdas are functions of several parameters called
//! with one frame (`Code::Call`, `run.rs`'s `call_go`), with the same counters; `Budget::walker`
//! turns both off.

pub mod api;
pub(crate) mod arrays;
mod fast;
mod flat;
mod loops;
mod lower;
mod prim;
mod round;
mod run;
mod spine;
#[cfg(test)]
mod tests;

pub use api::*;

use crate::diag::Span;
use crate::ir::Program;
use crate::value::Value;
use lower::{FunVal, GroupVal, Lowered};
use run::Kont;
use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::rc::Rc;

/// How deeply builtins may re-enter the machine through `apply`. Each level uses native stack
/// (measured natively: ~1.3 KB per level in release, ~8 KB in debug, plus the builtin's own frame;
/// see the ignored test `measure_nesting_stack`), so natively this relies on the pipeline's big
/// stack (`limits::run_with_stack`); wasm's stack is about 1 MB.
const MAX_NESTING: u64 = if cfg!(target_arch = "wasm32") { 300 } else { 10_000 };

/// A function an array operation applies per element (`Machine::each`): a closure or group member
/// of this lowering of one parameter, with its code and captures, if it is one.
pub(crate) struct Each<'f> {
    f: &'f Value,
    #[allow(clippy::type_complexity)]
    lam: Option<(&'f lower::LamCode, &'f Rc<[Value]>, Option<&'f Rc<GroupVal>>)>,
}

/// `Each` for two arguments (`Machine::each2`): `two_short` of the function, if it takes them.
pub(crate) struct Each2<'f> {
    f: &'f Value,
    #[allow(clippy::type_complexity)]
    short: Option<(&'f Rc<lower::LamCode>, &'f Rc<[Value]>, Option<&'f Rc<GroupVal>>, &'f [Value])>,
}

enum Global {
    Unevaluated,
    InProgress,
    Done(Value),
}

pub struct Machine<'p> {
    /// The program being run, where the machine was given it to keep (`new`); a machine made by
    /// `lowered` runs its code alone, so that the caller may let the IR go (issue 14).
    program: Option<&'p Program>,
    /// The name of the program's wrapper definition (`Role::Wrapper`), if it has one.
    wrapper: Option<Box<str>>,
    /// Shared by the machines `rerun` makes (a second run of the same program, lowered once).
    code: Rc<Lowered>,
    globals: Vec<Global>,
    budget: Budget,
    steps: u64,
    /// The step count from which `step` takes its slow path (`step_slow`): the next 4096-step clock
    /// check or the step past the budget, whichever comes first; 0 under a cost model (every step
    /// charges it). It may lag behind (a `tick` past a boundary): then one step is slow needlessly,
    /// never fast wrongly, since `steps` only grows.
    step_gate: u64,
    /// Raised by a flat tree's pure closure that misses (`flat.rs`), lowered by the tree's caller.
    flat_miss: std::cell::Cell<bool>,
    real_ops: u64,
    allocs: u64,
    depth: u64,
    max_depth: u64,
    /// Stage counters by index: a name is interned on its first `count`, and the hot path adds to
    /// `counter_vals` (found from the last hit, else by a short scan: a run has a handful of counters).
    counter_names: Vec<Box<str>>,
    counter_vals: Vec<u64>,
    last_counter: usize,
    /// The address and length of the name last looked up: the same string literal again is found
    /// without comparing its text.
    last_counter_key: (usize, usize),
    /// The paper's cost model being charged, and what it has counted (`set_cost_model`).
    model: Option<&'static CostModel>,
    model_cost: [u64; 4],
    /// Under a cost model, the steps of each charge class run so far (`run.rs` `charge_class`): a
    /// step counts its class, and `model_cost` multiplies the model out when read.
    charged: Vec<u64>,
    /// Which named functions' calls to record as trace steps, and at which graph node.
    call_tracer: Option<fn(&str) -> Option<u64>>,
    /// Told of every entry into a lambda whose parameter is one variable (`watch_lambdas`).
    lam_watcher: Option<LamWatcher>,
    trace_steps: Vec<TraceStep>,
    trace_dropped: u64,
    trace_on: bool,
    /// Whether a graph will be drawn from the run's state (`set_draws_graph`): if not, the Delta
    /// evaluators keep no visits per node, only their count (issue 13: 4 bytes a node).
    draws_graph: bool,
    /// Stage runtimes' states by type: a few per run, found from the two last hits or by a short
    /// scan (no hashing on every builtin call).
    states: Vec<(TypeId, Box<dyn Any>)>,
    /// The two states used last, most recent first: a tape stage's `record` alternates between the
    /// ID counter's and the tape's, so one entry missed on every call (issue 13).
    recent: [usize; 2],
    span: Span,
    /// When the `seconds` budget runs out (natively, when set).
    deadline: Option<std::time::Instant>,
    /// The memory budget of the run: a probe of the process's live bytes, the live bytes when the
    /// run's budget was set (the program, its lowered code and the pipeline's other outputs, which
    /// are not the run's), and how many bytes more the run may hold (`set_memory_limit`).
    memory: Option<(fn() -> u64, u64, u64)>,
    nesting: u64,
    // The running state: continuation stack, local slots, current frame.
    kont: Vec<Kont>,
    locals: Vec<Value>,
    vals: Vec<Value>,
    bp: usize,
    env: Rc<[Value]>,
    group: Option<Rc<GroupVal>>,
    /// The captures of a definition's closure (none), for calls of known definitions.
    no_captures: Rc<[Value]>,
    /// Spent argument buffers of builtin calls, reused so that a call does not allocate one.
    arg_bufs: Vec<Vec<Value>>,
    /// A spent partial value (`FunVal::Part`) no one else held, emptied: the next one is made in it,
    /// so that `v ← f a; …; v b` (the monadic translations' calls) allocates nothing per call.
    spare_part: Option<Value>,
    /// The value being returned (see `run::Next::Ret`).
    acc: Value,
    /// The name of the builtin running (type-indexed builtins such as `0_τ` read their index from it).
    builtin: &'static str,
}

/// The name of `program`'s wrapper (`Role::Wrapper`), if it has one.
fn wrapper_of(program: &Program) -> Option<Box<str>> {
    program.defs.iter().find(|d| d.role == crate::ir::Role::Wrapper).map(|d| (*d.name.text).into())
}

thread_local! {
    /// The emptied stacks of the thread's last machine dropped, for its next: a machine is made for
    /// each run, and growing its stacks from empty again was ~10 % of a short gradient's
    /// instructions (issue 13, peer-doubling at n = 1). Kept only when small (`SPARE_MAX`), so a
    /// deep run's stacks are not held after it.
    static SPARE_STACKS: std::cell::Cell<Option<Stacks>> = const { std::cell::Cell::new(None) };
}

/// A machine's control stack and value stacks (`SPARE_STACKS`).
#[derive(Default)]
struct Stacks {
    kont: Vec<Kont>,
    locals: Vec<Value>,
    vals: Vec<Value>,
}

/// The most elements a stack kept for the next machine may have room for.
const SPARE_MAX: usize = 1 << 10;

impl Drop for Machine<'_> {
    fn drop(&mut self) {
        if self.kont.capacity().max(self.locals.capacity()).max(self.vals.capacity()) > SPARE_MAX {
            return;
        }
        let mut s = Stacks { kont: std::mem::take(&mut self.kont), locals: std::mem::take(&mut self.locals), vals: std::mem::take(&mut self.vals) };
        s.kont.clear();
        s.locals.clear();
        s.vals.clear();
        SPARE_STACKS.set(Some(s));
    }
}

/// A fresh state of type `T` for `Machine::state`.
fn new_state<T: Default + 'static>() -> Box<dyn Any> {
    Box::new(T::default())
}

impl<'p> Machine<'p> {
    pub fn new(program: &'p Program, builtins: &Builtins, budget: Budget) -> Result<Machine<'p>, RunError> {
        let code = lower::lower(program, builtins, !budget.walker, budget.regions_after)?;
        let mut m = Machine::of_code(Rc::new(code), wrapper_of(program), budget);
        m.program = Some(program);
        Ok(m)
    }
    /// A fresh machine (no globals evaluated, no states, no counts) on this one's lowered code and
    /// budget: the same program run again without lowering it again (chad/arrays runs its output a
    /// second time with §8.1's BArray; lowering took most of that second run's time).
    pub fn rerun(&self) -> Machine<'p> {
        let mut m = Machine::of_code(self.code.clone(), self.wrapper.clone(), self.budget.clone());
        m.program = self.program;
        m
    }
    /// `new`, taking the program and letting it go as it is lowered (`lower::lower_consuming`: a
    /// definition, and a let chain's link, at a time): the machine runs its lowered code, which owns
    /// what it needs (names, spans). Issue 14: on a 100,000-line program a stage's output IR is
    /// ~4.5 KB a line, twice its lowered code, and the two were whole together while lowering.
    /// `program()` is None on it.
    pub fn lowered(program: Program, builtins: &Builtins, budget: Budget) -> Result<Machine<'p>, RunError> {
        let wrapper = wrapper_of(&program);
        let code = lower::lower_consuming(program, builtins, !budget.walker, budget.regions_after)?;
        Ok(Machine::of_code(Rc::new(code), wrapper, budget))
    }

    fn of_code(code: Rc<lower::Lowered>, wrapper: Option<Box<str>>, budget: Budget) -> Machine<'p> {
        let empty: Rc<[Value]> = Rc::new([]);
        let Stacks { kont, locals, vals } = SPARE_STACKS.take().unwrap_or_default();
        let globals = code
            .defs
            .iter()
            .map(|d| match &d.lam {
                Some(l) => Global::Done(Value::Fun(Rc::new(FunVal::Clo { code: l.clone(), env: empty.clone() }))),
                None => Global::Unevaluated,
            })
            .collect();
        Machine {
            program: None,
            wrapper,
            code,
            globals,
            steps: 0,
            step_gate: 0,
            flat_miss: std::cell::Cell::new(false),
            real_ops: 0,
            allocs: 0,
            depth: 0,
            max_depth: 0,
            counter_names: vec![],
            counter_vals: vec![],
            last_counter: 0,
            last_counter_key: (0, 0),
            model: None,
            model_cost: [0; 4],
            charged: vec![],
            call_tracer: None,
            lam_watcher: None,
            trace_steps: vec![],
            trace_dropped: 0,
            trace_on: true,
            draws_graph: true,
            states: vec![],
            recent: [0, 0],
            span: Span::NONE,
            deadline: budget
                .seconds
                .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok())
                .and_then(|d| std::time::Instant::now().checked_add(d)),
            budget,
            // Issue 14: the budget counts what the run allocates (its values, frames, tape), taken
            // from here, after lowering: a long program's own code is the pipeline's (checked after
            // each phase and bounded by the CLI's allocator), and counting it stopped a 10^5-line
            // program whose values are small at its first check.
            memory: crate::limits::memory_budget().map(|(live, limit)| (live, live(), limit)),
            nesting: 0,
            kont,
            locals,
            vals,
            bp: 0,
            no_captures: empty.clone(),
            env: empty,
            group: None,
            arg_bufs: vec![],
            spare_part: None,
            acc: Value::Unit,
            builtin: "",
        }
    }
    /// `new` on the reference walker alone, without compiled regions (`Budget::walker`): what the
    /// tests compare the engine with.
    pub fn new_reference(program: &'p Program, builtins: &Builtins, budget: Budget) -> Result<Machine<'p>, RunError> {
        Machine::new(program, builtins, Budget { walker: true, ..budget })
    }
    /// The name of the program's wrapper (the definition whose role is `Role::Wrapper`), if it has one.
    pub fn wrapper_name(&self) -> Option<String> {
        self.wrapper.as_deref().map(str::to_string)
    }
    /// Applies top-level definition `name` to `args`, one at a time.
    pub fn call(&mut self, name: &str, args: Vec<Value>) -> Result<Value, RunError> {
        let Some(&i) = self.code.index.get(name) else {
            return Err(RunError::runtime(Span::NONE, format!("no definition named `{name}`")));
        };
        let mut f = self.run_with(|m| m.enter_global(i))?;
        for a in args {
            f = self.apply(f, a)?;
        }
        Ok(f)
    }
    /// Applies a function value to an argument (re-entrant: builtins call back through this).
    pub fn apply(&mut self, f: Value, arg: Value) -> Result<Value, RunError> {
        if let Some((lam, fc, env, group)) = self.leaf_one(&f) {
            return self.apply_leaf(lam, fc, env, group, arg);
        }
        let span = self.span;
        self.run_with(|m| m.apply_fun(f, arg, span))
    }
    /// `f a b` (the array builtins' `map2`, `fold`, `scanl`, …): `apply` twice, with the same
    /// steps, allocations, checks and trace. When `b` saturates a curried lambda `f` (a closure, a
    /// group member or a partial value of one), the two applications are one run: `a` counted as the
    /// walker's partial application (`partial_step`) and both bound in one frame, as a call spine
    /// does (`run.rs`'s `apply_fun2`), with no partial value built between them (issue 13: the
    /// partial value, its box and the second run were a third of `map2`'s time per element).
    pub fn apply2(&mut self, f: &Value, a: Value, b: Value) -> Result<Value, RunError> {
        let Some((lam, env, group, prior)) = self.two_short(f) else {
            let g = self.apply(f.clone(), a)?;
            return self.apply(g, b);
        };
        if let Some(fc) = run::leaf(lam.code()) {
            return self.apply2_leaf(lam, fc, env, group, prior, a, b);
        }
        let span = self.span;
        self.run_with(|m| m.apply_fun2(f, a, b, span))
    }
    /// What `apply` finds out about `f` before running it, found once for an array operation that
    /// applies `f` to each element (`apply_each`) rather than once per element (issue 13).
    pub(crate) fn each<'f>(&self, f: &'f Value) -> Each<'f> {
        let lam = match f {
            Value::Fun(rc) => match rc.downcast_ref::<FunVal>() {
                Some(FunVal::Clo { code, env }) => Some((&**code, env, None)),
                Some(FunVal::Rec { group, idx }) => group.code.members.get(*idx as usize).map(|l| (&**l, &group.env, Some(group))),
                _ => None,
            },
            _ => None,
        };
        Each { f, lam: lam.filter(|(l, ..)| l.prog == self.code.prog && l.more.is_empty()) }
    }
    /// `apply(f, arg)` for the `f` of `e`: the same frames, counts, checks and trace, with `f` not
    /// looked into again (nor copied) per element, and a body `if c then …` run in place
    /// (`run.rs`'s `apply_entered`).
    pub(crate) fn apply_each(&mut self, e: &Each<'_>, arg: Value) -> Result<Value, RunError> {
        match e.lam {
            Some((lam, env, group)) if self.lam_watcher.is_none() => match run::leaf(lam.code()) {
                Some(fc) => self.apply_leaf(lam, fc, env, group, arg),
                None => self.apply_entered(lam, env, group, arg),
            },
            _ => self.apply(e.f.clone(), arg),
        }
    }
    /// `each` for `apply2`: the curried lambda `f` is when two more arguments saturate it (`two_short`).
    pub(crate) fn each2<'f>(&self, f: &'f Value) -> Each2<'f> {
        Each2 { f, short: self.two_short(f) }
    }
    /// `apply2(f, a, b)` for the `f` of `e`, with `f` not looked into again per element.
    pub(crate) fn apply2_each(&mut self, e: &Each2<'_>, a: Value, b: Value) -> Result<Value, RunError> {
        let Some((lam, env, group, prior)) = e.short else {
            let g = self.apply(e.f.clone(), a)?;
            return self.apply(g, b);
        };
        if let Some(fc) = run::leaf(lam.code()) {
            return self.apply2_leaf(lam, fc, env, group, prior, a, b);
        }
        let span = self.span;
        self.run_with(|m| m.apply_fun2(e.f, a, b, span))
    }
    /// Adds `n` work units to the step counter, failing when the steps budget is exceeded.
    #[inline]
    pub fn tick(&mut self, n: u64) -> Result<(), RunError> {
        let before = self.steps;
        self.steps += n;
        if self.steps > self.budget.steps {
            return Err(self.budget_error(BudgetKind::Steps, self.budget.steps));
        }
        // the clock (and memory probe) as the interpreter reads them: once per 4096 steps, not on
        // every tick (reading the clock per builtin call was 5 % of a tape stage's run)
        if (before ^ self.steps) >> 12 != 0 {
            self.check_clock()?;
        }
        Ok(())
    }
    /// How many `tick(1)`s can follow from here with none of them past the steps budget or at a
    /// 4096-step clock check: a builtin's loop may count that many at once (`tick_fitting`) and
    /// stop exactly where `tick(1)` per item would, taking the item at the edge with `tick(1)`.
    #[inline]
    pub fn tick_room(&self) -> u64 {
        let to_budget = self.budget.steps.saturating_sub(self.steps);
        let to_clock = (self.steps | 0xFFF) - self.steps;
        to_budget.min(to_clock)
    }
    /// Counts `n ≤ tick_room()` steps at once (the same counts as `n` calls of `tick(1)`).
    #[inline]
    pub fn tick_fitting(&mut self, n: u64) {
        debug_assert!(n <= self.tick_room());
        self.steps += n;
    }
    /// Counts `n` primitive operations on reals (`real_op` `n` times).
    #[inline]
    pub fn real_ops_n(&mut self, n: u64) {
        self.real_ops += n;
    }
    /// How many `alloc(1)`s can follow from here with none of them past the allocation budget or
    /// at a 4096-allocation memory probe (as `tick_room` for steps): a builtin's loop may count
    /// that many at once (`alloc_fitting`), taking the one at the edge with `alloc(1)`.
    #[inline]
    pub fn alloc_room(&self) -> u64 {
        let to_budget = self.budget.allocs.saturating_sub(self.allocs);
        let to_probe = (self.allocs | 0xFFF) - self.allocs;
        to_budget.min(to_probe)
    }
    /// Counts `n ≤ alloc_room()` allocations at once (the same counts as `n` calls of `alloc(1)`).
    #[inline]
    pub fn alloc_fitting(&mut self, n: u64) {
        debug_assert!(n <= self.alloc_room());
        self.allocs += n;
    }
    /// Counts `n` allocations against the allocs budget.
    #[inline]
    pub fn alloc(&mut self, n: u64) -> Result<(), RunError> {
        let before = self.allocs;
        self.allocs += n;
        if self.allocs > self.budget.allocs {
            return Err(self.budget_error(BudgetKind::Allocs, self.budget.allocs));
        }
        // the memory probe every 4096 allocations too: a builtin can allocate much between steps
        if (before ^ self.allocs) >> 12 != 0 {
            self.check_memory()?;
        }
        Ok(())
    }
    /// Counts one primitive operation on reals.
    #[inline]
    pub fn real_op(&mut self) {
        self.real_ops += 1;
    }
    /// Adds `n` to a stage counter (`eval_visits`, ...). The name is a literal: the one last counted
    /// is found again by its address (a static string's address stands for its text).
    pub fn count(&mut self, counter: &'static str, n: u64) {
        let key = (counter.as_ptr() as usize, counter.len());
        let i = match self.counter_vals.get(self.last_counter) {
            Some(_) if key == self.last_counter_key => self.last_counter,
            _ => {
                let i = self.counter_id(counter);
                self.last_counter_key = key;
                i
            }
        };
        self.counter_vals[i] += n;
    }
    /// The index of a counter (interned, starting at 0, on first use): `count_at` adds to it directly.
    pub fn counter_id(&mut self, counter: &str) -> usize {
        if self.counter_names.get(self.last_counter).is_some_and(|c| **c == *counter) {
            return self.last_counter;
        }
        let i = match self.counter_names.iter().position(|c| **c == *counter) {
            Some(i) => i,
            None => {
                self.counter_names.push(counter.into());
                self.counter_vals.push(0);
                self.counter_names.len() - 1
            }
        };
        self.last_counter = i;
        self.last_counter_key = (0, 0);
        i
    }
    /// Adds `n` to the counter `counter_id` returned.
    #[inline]
    pub fn count_at(&mut self, id: usize, n: u64) {
        if let Some(c) = self.counter_vals.get_mut(id) {
            *c += n;
        }
    }
    /// Whether trace steps are being recorded (false once the trace budget is full, or when off).
    pub fn tracing(&self) -> bool {
        self.trace_on && self.trace_steps.len() < self.budget.trace_steps
    }
    /// Records a trace step (dropped, but counted, past the trace budget).
    pub fn trace(&mut self, step: TraceStep) {
        if !self.trace_on {
            return;
        }
        if self.trace_steps.len() < self.budget.trace_steps {
            self.trace_steps.push(step);
        } else {
            self.trace_dropped += 1;
        }
    }
    /// Turns trace recording on or off (on by default).
    pub fn set_tracing(&mut self, on: bool) {
        self.trace_on = on;
    }
    /// Whether the stage's graph will be drawn from this run (on by default; `bench` draws none).
    pub fn draws_graph(&self) -> bool {
        self.draws_graph
    }
    pub fn set_draws_graph(&mut self, on: bool) {
        self.draws_graph = on;
    }
    /// The per-run state of a stage's runtime (its tape, its DeltaMap, ...), created on first use.
    #[inline]
    pub fn state<T: Default + 'static>(&mut self) -> &mut T {
        let id = TypeId::of::<T>();
        let [a, b] = self.recent;
        let i = if self.states.get(a).is_some_and(|(k, _)| *k == id) {
            a
        } else if self.states.get(b).is_some_and(|(k, _)| *k == id) {
            b
        } else {
            let i = self.find_state(id, new_state::<T>);
            self.recent = [i, a];
            i
        };
        let any: &mut dyn Any = &mut *self.states[i].1;
        // SAFETY: slot `i` is keyed by `TypeId::of::<T>()` and was created as a `T` (`find_state`),
        // so this is `downcast_mut` without its second look at the type (a virtual call per builtin call).
        unsafe { &mut *(any as *mut dyn Any as *mut T) }
    }
    /// Two states of different types at once (`None` only if `A` and `B` are the same type), for a
    /// builtin that updates both on every call: the tape's `record` writes the ID counter's and the
    /// tape's, and two `state` calls cost two lookups, the second of them a miss of the first
    /// recent entry (issue 13, session 16). Found, like `state`'s, from the two used last.
    #[inline]
    pub fn states<A: Default + 'static, B: Default + 'static>(&mut self) -> Option<(&mut A, &mut B)> {
        let (ia, ib) = (TypeId::of::<A>(), TypeId::of::<B>());
        if ia == ib {
            return None;
        }
        let [a, b] = self.recent;
        let key = |i: usize| self.states.get(i).map(|(k, _)| *k);
        let (i, j) = if key(a) == Some(ia) && key(b) == Some(ib) {
            (a, b)
        } else if key(a) == Some(ib) && key(b) == Some(ia) {
            (b, a)
        } else {
            let i = self.find_state(ia, new_state::<A>);
            let j = self.find_state(ib, new_state::<B>);
            self.recent = [i, j];
            (i, j)
        };
        let p = self.states.as_mut_ptr();
        // SAFETY: `i` and `j` are slots of `states` (found above) keyed by `TypeId::of::<A>()` and
        // `TypeId::of::<B>()`, which differ, so they are two distinct slots: the two borrows are
        // disjoint, and each slot was created as its type (`find_state`), as in `state`.
        unsafe {
            let x: &mut dyn Any = &mut *(*p.add(i)).1;
            let y: &mut dyn Any = &mut *(*p.add(j)).1;
            Some((&mut *(x as *mut dyn Any as *mut A), &mut *(y as *mut dyn Any as *mut B)))
        }
    }
    /// The slot of the state keyed `id`, made by `new` if there is none: out of line, so the hits
    /// above stay a few instructions with no register spills.
    #[inline(never)]
    fn find_state(&mut self, id: TypeId, new: fn() -> Box<dyn Any>) -> usize {
        match self.states.iter().position(|(k, _)| *k == id) {
            Some(i) => i,
            None => {
                self.states.push((id, new()));
                self.states.len() - 1
            }
        }
    }
    pub fn cost(&self) -> Cost {
        let mut counters: BTreeMap<String, u64> =
            self.counter_names.iter().zip(&self.counter_vals).map(|(k, v)| (k.to_string(), *v)).collect();
        if let Some(model) = self.model {
            for (name, n) in model.counters.iter().zip(self.model_cost()) {
                *counters.entry(name.to_string()).or_default() += n;
            }
        }
        Cost { steps: self.steps, real_ops: self.real_ops, allocs: self.allocs, max_depth: self.max_depth, counters }
    }
    /// Records every call of a let-bound function whose name `node` maps to a graph node, as a trace
    /// step `call` with the argument's components by parameter name (a chain of continuations
    /// `Y4(0, 0, 0, 0, 1) → Y3(…)`, where the argument is the cotangent stack).
    pub fn trace_calls(&mut self, node: fn(&str) -> Option<u64>) {
        self.call_tracer = Some(node);
    }
    /// Calls `watcher` on every entry into a lambda whose parameter is one variable, once its frame
    /// is set up (`call_depth` is the callee's): a stage's runtime can follow which closures run
    /// inside which (chad's backpropagator tree) without the program saying so.
    pub fn watch_lambdas(&mut self, watcher: LamWatcher) {
        self.lam_watcher = Some(watcher);
    }
    /// How many call frames are live (a tail call reuses its caller's).
    pub fn call_depth(&self) -> u64 {
        self.depth
    }
    /// The program this machine runs, where it was given it to keep (`new`, not `lowered`: a chain
    /// whose runs read it says so, `Chain::run_reads_program`).
    pub fn program(&self) -> Option<&'p Program> {
        self.program
    }
    /// Whether the program defines a top-level `name`.
    pub fn defines(&self, name: &str) -> bool {
        self.code.index.contains_key(name)
    }
    /// The budgets this machine runs under (a stage that runs its output a second time, in another
    /// representation, gives that run the same).
    pub fn budget(&self) -> Budget {
        self.budget.clone()
    }
    /// Charges `model` for everything this machine evaluates from now on; its counters join the run's.
    pub fn set_cost_model(&mut self, model: &'static CostModel) {
        self.model = Some(model);
        self.step_gate = 0;
        self.charged = vec![0; run::CHARGE_CLASSES];
    }
    /// What the cost model has counted so far (zeros without one): the array operations' charges,
    /// and each class of step (`charged`) times what the model charges for it.
    pub fn model_cost(&self) -> [u64; 4] {
        let mut cost = self.model_cost;
        if let Some(model) = self.model {
            for (class, &n) in self.charged.iter().enumerate() {
                if n > 0 {
                    for (k, x) in cost.iter_mut().zip(run::class_charge(model, class)) {
                        *k = k.saturating_add(x.saturating_mul(n));
                    }
                }
            }
        }
        cost
    }
    /// Charges the cost model, if there is one, for an array operation on `n` elements.
    pub(crate) fn charge_array(&mut self, op: crate::prims::Prim, n: usize) {
        if let Some(model) = self.model {
            self.charge((model.array)(op, n as u64));
        }
    }
    #[inline]
    fn charge(&mut self, c: [u64; 4]) {
        for (k, x) in self.model_cost.iter_mut().zip(c) {
            *k += x;
        }
    }
    /// The recorded trace, and how many steps were dropped past the trace budget.
    pub fn take_trace(&mut self) -> (Vec<TraceStep>, u64) {
        (std::mem::take(&mut self.trace_steps), std::mem::take(&mut self.trace_dropped))
    }
    /// The name of the builtin currently running: one implementation can serve a family of
    /// type-indexed builtins (`0_τ`, `one_x`), each looking up what its name stands for.
    pub fn builtin_name(&self) -> &'static str {
        self.builtin
    }
    /// A fused pair's switch to its outer builtin (`Fused`): from here on the builtin running is
    /// `name`, applied at `span`, as if it had been called on the inner one's value.
    pub fn enter_builtin(&mut self, name: &'static str, span: Span) {
        self.builtin = name;
        self.span = span;
    }
    /// The span of the application currently running (for builtins' messages).
    pub fn current_span(&self) -> Span {
        self.span
    }

    /// Stops the run (a `Memory` budget error) once `live()` exceeds its value now by more than
    /// `limit` bytes, checked with the clock. The core has no allocator of its own: the CLI's bench
    /// passes its counting allocator's probe, so one case cannot take the machine's memory.
    pub fn set_memory_limit(&mut self, live: fn() -> u64, limit: u64) {
        self.memory = Some((live, live(), limit));
    }

    /// Whether this run's entries of functions count toward compiling their regions (on the code it
    /// shares with `rerun`s: set for the run that needs it, and back). A second run on the same code,
    /// counted, made the functions entered once or twice a run pass `Budget::regions_after` and
    /// keep a compiled copy of their bodies (chad/arrays' BArray run: ~1.5 KB a line on a let chain,
    /// issue 14 item 4). Off, functions run as lowered (until counted again); counters are the same.
    pub fn count_entries(&self, on: bool) {
        self.code.count_entries(on);
    }

    /// Starts the `seconds` budget again from now: a stage that runs another machine before this
    /// one's run (chad/arrays' BArray run) gives this run its own allowance, as when it ran first.
    pub fn restart_clock(&mut self) {
        self.deadline = self.budget.seconds.and_then(|s| std::time::Duration::try_from_secs_f64(s).ok()).and_then(|d| std::time::Instant::now().checked_add(d));
    }

    /// The `seconds` budget (reads the clock only when one is set) and the memory limit, if any.
    #[inline]
    pub(crate) fn check_clock(&self) -> Result<(), RunError> {
        self.check_memory()?;
        match self.deadline {
            Some(d) if std::time::Instant::now() >= d => {
                Err(self.budget_error(BudgetKind::Seconds, self.budget.seconds.unwrap_or(0.0).ceil() as u64))
            }
            _ => Ok(()),
        }
    }

    fn check_memory(&self) -> Result<(), RunError> {
        match self.memory {
            Some((live, base, limit)) if live().saturating_sub(base) > limit => Err(self.budget_error(BudgetKind::Memory, limit)),
            _ => Ok(()),
        }
    }

    #[cold]
    #[inline(never)]
    fn budget_error(&self, budget: BudgetKind, limit: u64) -> RunError {
        RunError::Budget { budget, limit, cost: self.cost(), span: self.span }
    }
}
