//! The interpreter's public contract: budgets, costs, trace steps, Delta-DAG graphs, run errors, and
//! the builtin table through which stages add their runtime (eval, resolve, maps, ...).

use crate::diag::Span;
use crate::interp::Machine;
use crate::ir::Scheme;
use crate::value::Value;
use serde::Serialize;
use std::collections::BTreeMap;
use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

/// Limits checked while a program runs. Exceeding one stops the run with `RunError::Budget`.
#[derive(Clone, Debug, Serialize)]
pub struct Budget {
    /// Interpreter steps plus the work units builtins report through `Machine::tick`.
    pub steps: u64,
    /// Allocated values (tuples, closures, sums, ext values).
    pub allocs: u64,
    /// Depth of the interpreted program's call stack (kept on the heap, never on the native stack).
    pub depth: u64,
    /// Trace steps recorded; further steps are counted but not stored.
    pub trace_steps: usize,
    /// Wall-clock seconds per run (`Machine`), checked every few thousand steps; natively only (the
    /// CLI's `bench --max-seconds`): wasm has no clock here, and the page stops its worker instead.
    #[serde(skip)]
    pub seconds: Option<f64>,
    /// Run on the walker alone, without the compiled fast regions (`interp/fast.rs`): the reference
    /// the tests compare the fast engine with. Counters and results are the same either way.
    #[serde(skip)]
    pub walker: bool,
    /// The engine compiles a function's call-free regions on its `regions_after`-th entry (0: when
    /// the program is lowered; `LamCode::code`). Counters and results are the same either way.
    #[serde(skip)]
    pub regions_after: u32,
}

/// Most functions of a stage's output run once or twice per run (continuations, backpropagators,
/// wrappers), and compiling their regions costs more than the walker steps it saves: the page's
/// per-keystroke analysis of the quaternion spent more instructions compiling regions than running
/// (issue 15). A function entered this often is worth compiling; loops and recursion reach it at once.
pub const REGIONS_AFTER: u32 = 3;

impl Default for Budget {
    fn default() -> Budget {
        Budget { steps: 50_000_000, allocs: 50_000_000, depth: 1_000_000, trace_steps: 5_000, seconds: None, walker: false, regions_after: REGIONS_AFTER }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BudgetKind {
    Steps,
    Allocs,
    Depth,
    /// Wall-clock seconds (`Budget::seconds`).
    Seconds,
    /// Bytes of memory, as a probe set by `Machine::set_memory_limit` reads them (the CLI's bench).
    Memory,
}

impl BudgetKind {
    pub fn name(self) -> &'static str {
        match self {
            BudgetKind::Steps => "steps",
            BudgetKind::Allocs => "allocs",
            BudgetKind::Depth => "depth",
            BudgetKind::Seconds => "wall-clock seconds",
            BudgetKind::Memory => "memory",
        }
    }
}

/// A paper's cost model, charged by the machine as it evaluates (Huot & Shaikhha's Fig. 11: MOVES,
/// ADDS, MULTS, NLOPS). Each evaluated construct adds a vector; `counters` names its components, which
/// the run reports beside the stage's own counters. Lambdas, applications and tuples cost nothing of
/// their own: what they move is the variables they read (so a continuation called with the whole
/// context tuple costs one move per slot, the O(|Γ|) of §5.3's proof).
pub struct CostModel {
    pub counters: [&'static str; 4],
    /// Reading a variable or a constant.
    pub var: [u64; 4],
    /// Binding one variable of a `let` (a tuple pattern binds one per component).
    pub bind: [u64; 4],
    /// A projection `fst`/`snd`.
    pub proj: [u64; 4],
    pub prim1: fn(crate::prims::Prim) -> [u64; 4],
    pub prim2: fn(crate::prims::Prim) -> [u64; 4],
    /// What an array operation on `n` elements costs beyond its function's body (which is charged as
    /// it runs).
    pub array: fn(crate::prims::Prim, u64) -> [u64; 4],
}

/// Cost counters of a run. `counters` holds the ones stages add (`eval_visits`, `delta_nodes`,
/// `backprop_calls`, `ids_allocated`, `vector_elem_ops`, ...).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Cost {
    pub steps: u64,
    pub real_ops: u64,
    pub allocs: u64,
    pub max_depth: u64,
    pub counters: BTreeMap<String, u64>,
}

impl Cost {
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum RunError {
    /// A budget ran out; `cost` holds the counts reached, `span` the application that was running.
    Budget { budget: BudgetKind, limit: u64, cost: Cost, span: Span },
    /// A runtime error of the program (integer overflow, division by zero on Z, ...), located.
    Runtime { message: String, span: Span },
}

impl RunError {
    pub fn runtime(span: Span, message: impl Into<String>) -> RunError {
        RunError::Runtime { message: message.into(), span }
    }
    pub fn message(&self) -> String {
        match self {
            RunError::Budget { budget, limit, cost, .. } => format!(
                "stopped: the {} budget ({}) ran out after {} steps, {} real ops, {} allocations, depth {}{}",
                budget.name(),
                match budget {
                    BudgetKind::Memory => format!("{} MiB of live heap for the run", limit >> 20),
                    _ => limit.to_string(),
                },
                cost.steps,
                cost.real_ops,
                cost.allocs,
                cost.max_depth,
                cost.counters.iter().map(|(k, v)| format!(", {k} {v}")).collect::<String>()
            ),
            RunError::Runtime { message, .. } => message.clone(),
        }
    }
    pub fn span(&self) -> Span {
        match self {
            RunError::Runtime { span, .. } | RunError::Budget { span, .. } => *span,
        }
    }
}

/// One step of a stage's runtime (eval, addDelta, resolve, ...), for replaying a backward pass.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TraceStep {
    /// What happened: `eval`, `addDelta`, `skip`, `resolve`, `call`, ...
    pub kind: String,
    /// The graph node this step is at (`GraphNode::id`), if any.
    pub node: Option<u64>,
    /// The source span this step is about, if known.
    pub span: Option<Span>,
    /// The incoming scale factor or cotangent.
    pub factor: Option<Shown>,
    /// A one-line human description.
    pub note: String,
    /// The cotangent map or array after the step, as `key -> value` rows.
    pub state: Vec<(String, Shown)>,
    /// A `note` made when read (a rewrite step's, from its printed terms; see `print::Later`):
    /// `materialise` makes it.
    #[serde(skip)]
    pub note_later: Option<crate::print::Later>,
    /// Rows of `state` made when read (a rewrite step's terms), which follow `state`'s own:
    /// `materialise` makes them and appends them to `state`.
    #[serde(skip)]
    pub state_later: Vec<(String, crate::print::Later)>,
}

/// A value as a trace step or graph node shows it: the number when it is one real, its text otherwise.
/// Any value fits (an array cotangent, a sparse map, a rewrite step); a real serialises as a JSON
/// number, anything else as its text. A real's text is made only when it is displayed (traces hold
/// many rows, and formatting every real made the page's runs measurably slower).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shown {
    /// The text of a value that is not one real (empty for a real).
    pub text: String,
    pub num: Option<f64>,
}

impl Shown {
    /// A value that is not one real, by its text.
    pub fn text(text: impl Into<String>) -> Shown {
        Shown { text: text.into(), num: None }
    }
    /// Rows of reals as rows of shown values.
    pub fn rows(rows: Vec<(String, f64)>) -> Vec<(String, Shown)> {
        rows.into_iter().map(|(k, v)| (k, v.into())).collect()
    }
}

impl From<f64> for Shown {
    fn from(x: f64) -> Shown {
        Shown { text: String::new(), num: Some(x) }
    }
}

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self.num {
            Some(x) => f.write_str(&crate::value::show_real(x)),
            None => f.write_str(&self.text),
        }
    }
}

impl Serialize for Shown {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.num {
            // NaN, ∞ and −∞ as "NaN", "Infinity", "-Infinity", as every real the CLI writes
            Some(x) => crate::value::json_real::Real(x).serialize(s),
            None => s.serialize_str(&self.text),
        }
    }
}

impl TraceStep {
    /// Makes the step's `later` note and rows now (its `state_later` rows join `state`, after it).
    pub fn materialise(&mut self) {
        if let Some(l) = self.note_later.take() {
            self.note = l.text();
        }
        for (k, l) in std::mem::take(&mut self.state_later) {
            self.state.push((k, Shown::text(l.text())));
        }
    }
}

/// The graph a stage's forward pass builds (the Delta DAG, backpropagators, Contribs), every node once.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Graph {
    pub nodes: Vec<GraphNode>,
    pub edges: Vec<GraphEdge>,
    /// Node groups (jobs of a parallel run), with the edges between groups.
    pub groups: Vec<GraphGroup>,
    /// Nodes left out because the graph was larger than the drawing limit.
    pub omitted: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GraphNode {
    pub id: u64,
    /// Constructor or kind: `Var`, `Add`, `Scale`, `Let`, `Zero`, `OneHot`, `Contrib`, `input`, ...
    pub ctor: String,
    /// What to draw inside the node.
    pub label: String,
    /// The DeltaId (or staging ID) where the node has one.
    pub delta_id: Option<i64>,
    /// The scale factor or primal value the node carries.
    pub value: Option<Shown>,
    /// Referenced from more than one place.
    pub shared: bool,
    /// How many times the backward pass visited it (eval2's unfolding shows here).
    pub visits: Option<u64>,
    pub group: Option<String>,
    pub span: Option<Span>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GraphEdge {
    pub from: u64,
    pub to: u64,
    pub label: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GraphGroup {
    pub name: String,
    pub label: String,
    /// Groups that must finish before this one (the job graph).
    pub after: Vec<String>,
}

/// A lambda entered (`Machine::watch_lambdas`): the closure, its parameter's id and its captures.
pub struct Entered {
    pub closure: Value,
    pub param: u32,
    pub captures: Rc<[Value]>,
}

/// Told of each lambda entered (`Machine::watch_lambdas`).
pub type LamWatcher = fn(&mut Machine<'_>, Entered);

/// The same function value (a closure is one allocation: its identity).
pub fn same_fun(a: &Value, b: &Value) -> bool {
    matches!((a, b), (Value::Fun(x), Value::Fun(y)) if Rc::ptr_eq(x, y))
}

/// A builtin's implementation. It receives all its arguments at once (builtins are curried in the IR
/// and run when saturated) and the span of the application. It may call back into the interpreter
/// with `Machine::apply`.
pub type BuiltinFn = fn(&mut Machine<'_>, &mut Vec<Value>, Span) -> Result<Value, RunError>;

/// A family of builtins by name (a stage's type-indexed instances, `0_{EV Γ}`, `split_{Γ,τ}`, ...):
/// the builtin `name` stands for, typed (its scheme) or not (for running only), if it is one.
pub type BuiltinFamily = fn(&str, bool) -> Option<Builtin>;

/// A target-language builtin: a typed constant of the IR with a Rust implementation.
#[derive(Clone)]
pub struct Builtin {
    pub name: &'static str,
    pub scheme: Scheme,
    pub arity: usize,
    /// The last argument is passed unevaluated, as a function of `()` the builtin forces with
    /// `Machine::apply(thunk, Value::Unit)`. For runners of the monad (`runDelta n m`), which must set
    /// up the state before `m` runs. Such a builtin must be applied to all its arguments syntactically.
    pub lazy_last: bool,
    pub run: BuiltinFn,
}

/// `outer (inner a1 … an)` run as one function (a stage runtime's lowering hook, issue 13): where the
/// engine's compiled regions meet that nesting of two saturated builtins, they call `run` with the
/// inner builtin's arguments, the inner application's span and the outer's, instead of building the
/// inner's value only for the outer to take apart (the taping stages' `record (C2 …)`: no Contrib
/// allocated per operation). `run` must count, fail and answer exactly as the two calls in turn;
/// the machine runs it as the inner builtin, and `Machine::enter_builtin` switches to the outer.
/// The walker (the tests' reference) never fuses, so `crate/tests/engine.rs` checks that it does.
pub type FusedFn = fn(&mut Machine<'_>, &mut Vec<Value>, [Span; 2]) -> Result<Value, RunError>;

/// A fused pair whose inner builtin takes (real, integer) pairs (`C2 a i b j`: partials and IDs), given
/// them unboxed: no `Value` is built, pushed or dropped per argument (issue 13: the tape's `record`
/// path). The engine uses it where the checker's types say each pair is a real and an integer; a
/// wrong hint falls back to `Fused::run` with the arguments boxed. Same contract as `FusedFn`.
/// The ID is `I`: an integer (`dualrev/tape`) or a pair of integers (`dualrev/parallel`'s CID, read
/// in place from its slot).
pub type ScalarFusedFn<I = i64> = fn(&mut Machine<'_>, &[(f64, I)], [Span; 2]) -> Result<Value, RunError>;

#[derive(Clone, Copy)]
pub struct Fused {
    pub outer: &'static str,
    pub inner: &'static str,
    pub run: FusedFn,
    /// The same pair with the inner's arguments as unboxed (real, integer) pairs, if offered.
    pub scalar: Option<ScalarFusedFn>,
    /// The same pair with the inner's arguments as unboxed (real, (integer, integer)) pairs.
    pub scalar_cid: Option<ScalarFusedFn<(i64, i64)>>,
    /// The pair as a compiled round runs it (`interp/round.rs`), if the runtime offers it.
    pub round: Option<RoundRecord>,
}

/// A fused `record (Ck …)` in a compiled round (`interp/round.rs`, issue 13): what one record
/// counts besides the two calls' steps and its arguments, and the runtime's tape, taken out of its
/// state for a batch of rounds so that their records are written straight into its arrays, and put
/// back cut to its length at `take` when the batch cannot finish, so that it changes nothing.
#[derive(Clone, Copy)]
pub struct RoundRecord {
    /// Steps and allocations each record counts itself (`genID`'s tick, the Contrib's allocation).
    pub steps: u64,
    pub allocs: u64,
    /// A record's ID is a pair (job, sequence number), `dualrev/parallel`'s CIDs, not an integer.
    pub pairs: bool,
    /// The ID the first of the next `n` records returns, when all `n` fit (no ID or tape past its
    /// range, no entry out of ID order): (0, i) for an integer i, or (job, seq); the others follow
    /// it, the last component counting up. And the tape they are written to, taken out of the
    /// runtime's state until `put`. `None`: nothing taken, run them one by one.
    pub take: fn(&mut Machine<'_>, n: usize) -> Option<(i64, i64, RoundTape)>,
    /// The tape back, with a record for each of `spans` (in order, from the ID `take` gave) written
    /// on it; the stage's own counters added. Every record's edge count is at most 2 and, without
    /// `pairs`, every argument ID fits a `u32` (the round checks them as it writes).
    pub put: fn(&mut Machine<'_>, RoundTape, spans: &[Span]),
}

/// A runtime's tape as a batch of compiled rounds writes it (`RoundRecord::take`, issue 13, session
/// 39: the records were staged and copied at the batch's end): per record its edge count, and its
/// edges as (partial, argument ID) in two flat arrays (`dualrev/tape`), or as (partial, job, seq)
/// (`pairs`: `dualrev/parallel`'s CIDs).
#[derive(Default)]
pub struct RoundTape {
    pub counts: Vec<u8>,
    pub partials: Vec<f64>,
    pub args: Vec<u32>,
    pub pairs: Vec<(f64, u32, u32)>,
}

impl RoundTape {
    /// The arrays' lengths, to cut them back to (`truncate`).
    pub fn lens(&self) -> [usize; 4] {
        [self.counts.len(), self.partials.len(), self.args.len(), self.pairs.len()]
    }
    pub fn truncate(&mut self, [c, p, a, e]: [usize; 4]) {
        self.counts.truncate(c);
        self.partials.truncate(p);
        self.args.truncate(a);
        self.pairs.truncate(e);
    }
}

/// Builtins besides a fused record that a compiled round may call (`interp/round.rs`, issue 13,
/// session 34): constructors whose result is the next number of a sequence the runtime hands out
/// in order — a Delta node's serial in the run's arena, a `deltaLet`'s DeltaId — so that, as for
/// `RoundRecord`, a round reserves its numbers, computes everything in registers and writes its
/// calls' effects at once when all of it has succeeded. A value the runtime names by such a number
/// (a Delta) is a handle: an integer register in the round, boxed again by `rebox` when rounds stop.
pub struct RoundCalls {
    pub calls: &'static [RoundCall],
    /// The first numbers of the two sequences for a round making `n[0]` and `n[1]` of them, when
    /// all fit (no effect); `None`: the round runs step by step.
    pub reserve: fn(&mut Machine<'_>, n: [usize; 2]) -> Option<[i64; 2]>,
    /// The round's calls in order, each at the number `reserve` gave it; the runtime's own counters
    /// added. `false`, and nothing written, when one of them would fail.
    pub write: fn(&mut Machine<'_>, &[RoundItem]) -> bool,
    /// A value as the handle it is (`None`: not one of the runtime's, or not of this run).
    pub unbox: fn(&mut Machine<'_>, &Value) -> Option<i64>,
    /// A handle as the value it names.
    pub rebox: fn(&mut Machine<'_>, i64) -> Value,
    /// The runtime's nodes written straight into its arrays, if it offers them (`RoundNodes`).
    pub nodes: Option<RoundNodes>,
    /// Otherwise the calls handed straight to the runtime's store as a batch of rounds computes
    /// them, if it offers that (`RoundSink`): for `n` calls of each sequence by rounds whose calls
    /// are `items` (one round's, in order), the store taken out of the runtime's state when all fit
    /// (room, numbers, what the calls need); `None`: nothing taken.
    pub sink: Option<fn(&mut Machine<'_>, n: [usize; 2], items: &[RoundItem]) -> Option<Box<dyn RoundSink>>>,
}

/// A runtime's store as a batch of compiled rounds writes its calls into it (`RoundCalls::sink`,
/// issue 13, session 40: Krawiec's Delta nodes and bindings, which `write` checked and copied from
/// `RoundItem`s staged a round). The rounds give each call its number (the next of its sequence,
/// from `firsts`) and write its arguments by index onto `RoundArgs`; the store checks and writes
/// them all at `put` (session 45: a call through the trait object, one a node, was a quarter of
/// krawiec/array's gradient).
pub trait RoundSink {
    /// The numbers the batch's first call of each sequence takes.
    fn firsts(&self) -> [i64; 2];
    /// The store back in the runtime's state: with the calls of `rounds` rounds of `items` whose
    /// arguments are `args` written and counted (`keep`), or as it was when taken. `false`, and
    /// the store as it was when taken, when kept calls hold one `write` would refuse (a child
    /// not made).
    fn put(self: Box<Self>, m: &mut Machine<'_>, args: &RoundArgs, rounds: usize, keep: bool) -> bool;
}

/// The arguments of a batch of rounds' `RoundSink` calls, call after call in the order the rounds
/// make them: each call's reals on `x`, its integers and handles on `z` (as many as its
/// `RoundCall::args` lists), from the start of each (what follows the batch's is not its own).
#[derive(Default)]
pub struct RoundArgs {
    pub x: Vec<f64>,
    pub z: Vec<i64>,
}

/// `RoundCalls` whose sequence-0 calls take nothing (an ID) and whose sequence-1 calls make a node
/// of up to two edges (partial, argument ID, argument's node: `RoundArg::Real, Int, Handle` each),
/// `dualrev/contrib`'s `genID` and Contribs: a batch of rounds writes its nodes straight into the
/// runtime's arrays, taken out of its state, as `RoundRecord`'s tape (issue 13, session 39: the
/// rounds staged `RoundItem`s, checked and copied by `write` a round).
#[derive(Clone, Copy)]
pub struct RoundNodes {
    /// The first numbers of the two sequences for `n[0]` IDs and `n[1]` nodes (of at most two
    /// edges) when all fit, and the arrays they are written to; `None`: nothing taken.
    pub take: fn(&mut Machine<'_>, n: [usize; 2]) -> Option<([i64; 2], RoundNodeArrays)>,
    /// The arrays back with the nodes written on them, and an ID made for each of `ids` (their
    /// spans, in order); the runtime's counters added.
    pub put: fn(&mut Machine<'_>, RoundNodeArrays, ids: &[Span]),
}

/// A runtime's node arrays as a batch of compiled rounds writes them (`RoundNodes::take`): per node
/// where its edges start (an index into the runtime's whole edge array, `edge0` the one at
/// `edges`' end when taken), and the edges.
#[derive(Default)]
pub struct RoundNodeArrays {
    pub starts: Vec<u32>,
    pub edges: Vec<RoundEdge>,
    pub edge0: u32,
}

/// A node's edge: the partial, the argument's ID and the argument's node (16 bytes).
#[derive(Clone, Copy, Debug, Default)]
pub struct RoundEdge {
    pub partial: f64,
    pub arg: u32,
    pub child: u32,
}

/// What a builtin of `RoundCalls` takes: a real, an integer, or a handle.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum RoundArg {
    Real,
    Int,
    Handle,
}

/// A builtin a compiled round may call (`RoundCalls`): its arguments, which sequence its result is
/// the next number of and whether that number is a handle, and the steps and allocations the call
/// counts itself (besides its node's step and its arguments').
pub struct RoundCall {
    pub name: &'static str,
    /// The arguments' leaves in order (a tuple argument as its items: `(ID, Contrib)` is `Int, Handle`).
    pub args: &'static [RoundArg],
    pub seq: u8,
    pub handle: bool,
    pub steps: u64,
    pub allocs: u64,
}

/// At most this many integer and handle arguments a `RoundCalls` builtin takes (dualrev/contrib's
/// `C2 a (i, c) b (j, c')`: two IDs and two Contribs; at most two reals).
pub const MAX_CALL_INTS: usize = 4;

/// One call of a compiled round (`RoundCalls::write`): the call (its index in `calls`), its
/// span, its real arguments and its integer and handle arguments, each in order (a tuple argument
/// as its items: `RoundCall::args` lists the leaves), and its number.
#[derive(Clone, Copy, Debug)]
pub struct RoundItem {
    pub call: u8,
    pub span: Span,
    pub x: [f64; 2],
    pub z: [i64; MAX_CALL_INTS],
    pub at: i64,
}

pub(crate) fn find_fused(fs: &[Fused], outer: &str, inner: &str) -> Option<Fused> {
    fs.iter().find(|f| f.outer == outer && f.inner == inner).copied()
}

/// The builtins a program may use, by name.
#[derive(Clone, Default)]
pub struct Builtins {
    table: HashMap<&'static str, Rc<Builtin>>,
    /// A family of builtins made by name when asked (`Stage::builtin_family`), not one entry each.
    family: Option<BuiltinFamily>,
    fused: Vec<Fused>,
    /// The builtins a compiled round may call (`RoundCalls`), if the stage's runtime offers them.
    round_calls: Option<&'static RoundCalls>,
}

impl Builtins {
    pub fn new() -> Builtins {
        Builtins::default()
    }
    pub fn add(&mut self, b: Builtin) {
        self.table.insert(b.name, Rc::new(b));
    }
    pub fn extend(&mut self, bs: impl IntoIterator<Item = Builtin>) {
        bs.into_iter().for_each(|b| self.add(b));
    }
    /// `name`'s builtin: from the table, else made by the family (anew on each call: the caller
    /// keeps what it needs).
    pub fn get(&self, name: &str) -> Option<Rc<Builtin>> {
        self.get_typed(name, true)
    }
    /// `get` for running only: a family's builtin without its type (`Scheme::mono(Unknown)`), which
    /// the lowered code that holds it never reads.
    pub fn get_to_run(&self, name: &str) -> Option<Rc<Builtin>> {
        self.get_typed(name, false)
    }
    fn get_typed(&self, name: &str, typed: bool) -> Option<Rc<Builtin>> {
        match self.table.get(name) {
            Some(b) => Some(b.clone()),
            None => self.family.and_then(|f| f(name, typed)).map(Rc::new),
        }
    }
    /// Sets the family of builtins made by name (`Stage::builtin_family`).
    pub fn set_family(&mut self, family: Option<BuiltinFamily>) {
        self.family = family;
    }
    /// Adds fused pairs (`Stage::fused`).
    pub fn fuse(&mut self, fs: impl IntoIterator<Item = Fused>) {
        self.fused.extend(fs);
    }
    /// The fused function for `outer (inner …)`, if one was added.
    pub fn fused(&self, outer: &str, inner: &str) -> Option<Fused> {
        find_fused(&self.fused, outer, inner)
    }
    /// Sets the builtins a compiled round may call (`Stage::round_calls`).
    pub fn set_round_calls(&mut self, calls: Option<&'static RoundCalls>) {
        self.round_calls = calls;
    }
    pub(crate) fn round_calls(&self) -> Option<&'static RoundCalls> {
        self.round_calls
    }
    pub(crate) fn all_fused(&self) -> &[Fused] {
        &self.fused
    }
}
