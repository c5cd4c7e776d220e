//! The one interpreter: call-by-value, for source programs and every stage's output.
//!
//! CONTRACT (the signatures below are used by the stages, the pipeline and the CLI):
//! - `Machine::new(program, builtins, budget)` prepares a program (resolving names to slots).
//! - `machine.call(name, args)` applies top-level definition `name` to `args` in turn (curried).
//! - Costs accumulate over calls; `cost()`, `take_trace()`, `state::<T>()` read them out.
//! - Builtins use `tick`, `alloc`, `real_op`, `count`, `trace`, `tracing`, `state` and `apply`.
//! - No native recursion proportional to the program's depth of calls or data: the machine keeps
//!   its control stack on the heap, so a depth budget stops runaway recursion cleanly, in wasm too.

pub mod api;

pub use api::*;

use crate::diag::Span;
use crate::ir::Program;
use crate::value::Value;

pub struct Machine<'p> {
    _program: &'p Program,
}

impl<'p> Machine<'p> {
    pub fn new(program: &'p Program, builtins: &Builtins, budget: Budget) -> Result<Machine<'p>, RunError> {
        let _ = (builtins, budget);
        Ok(Machine { _program: program })
    }
    /// Applies top-level definition `name` to `args`, one at a time.
    pub fn call(&mut self, name: &str, args: Vec<Value>) -> Result<Value, RunError> {
        let _ = (name, args);
        todo!()
    }
    /// Applies a function value to an argument (re-entrant: builtins call back through this).
    pub fn apply(&mut self, f: Value, arg: Value) -> Result<Value, RunError> {
        let _ = (f, arg);
        todo!()
    }
    /// Adds `n` work units to the step counter, failing when the steps budget is exceeded.
    pub fn tick(&mut self, n: u64) -> Result<(), RunError> {
        let _ = n;
        todo!()
    }
    /// Counts `n` allocations against the allocs budget.
    pub fn alloc(&mut self, n: u64) -> Result<(), RunError> {
        let _ = n;
        todo!()
    }
    /// Counts one primitive operation on reals.
    pub fn real_op(&mut self) {
        todo!()
    }
    /// Adds `n` to a stage counter (`eval_visits`, ...).
    pub fn count(&mut self, counter: &str, n: u64) {
        let _ = (counter, n);
        todo!()
    }
    /// Whether trace steps are being recorded (false once the trace budget is full, or when off).
    pub fn tracing(&self) -> bool {
        todo!()
    }
    /// Records a trace step (dropped, but counted, past the trace budget).
    pub fn trace(&mut self, step: TraceStep) {
        let _ = step;
        todo!()
    }
    /// Turns trace recording on or off (on by default).
    pub fn set_tracing(&mut self, on: bool) {
        let _ = on;
        todo!()
    }
    /// The per-run state of a stage's runtime (its tape, its DeltaMap, ...), created on first use.
    pub fn state<T: Default + 'static>(&mut self) -> &mut T {
        todo!()
    }
    pub fn cost(&self) -> Cost {
        todo!()
    }
    /// The recorded trace, and how many steps were dropped past the trace budget.
    pub fn take_trace(&mut self) -> (Vec<TraceStep>, u64) {
        todo!()
    }
    /// The span of the application currently running (for builtins' messages).
    pub fn current_span(&self) -> Span {
        todo!()
    }
}
