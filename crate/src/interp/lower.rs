//! Lowering of resolved IR to slot-resolved code (`Code`), done once in `Machine::new`.
//!
//! - Every function body (a `Lam`, a LetRec member, a lazy builtin's thunk, a top-level def's body)
//!   gets a frame of `nslots` local slots; every binder inside the body (lambda parameter, let, case
//!   arm, LetRec name) gets its own slot (slots are never reused; ids are unique anyway).
//! - Free variables of a lambda are copied into the closure when it is created (flat closures):
//!   `LamCode::captures` says where to read each one in the creating frame.
//! - A LetRec group is one shared object holding the captures of all members; a member refers to a
//!   sibling as `Sibling(j)`, which builds the closure `(group, j)` on use: no Rc cycles.
//! - Top-level defs are `Global(i)`; params are constants.
//! - Saturated builtin spines become `CallB` (no partial applications allocated); lazy builtins become
//!   `CallLazy` whose last argument is a thunk `\() -> e`.
//! - In the engine (not the walker): `\a -> \b -> body` is one function of two parameters bound in
//!   one frame (`LamCode::more`), and a spine `f a1 … an` with a variable head is one `Call`.
//!
//! Lowering recurses on the syntax tree (the native pipeline runs on a big stack); running does not.

use super::fast::{FastCode, Hints, Scalar};
use super::Fused;
use super::{Builtin, Builtins, RunError};
use crate::diag::Span;
use crate::ir::{Expr, ExprKind, FunDef, Pat, Prim, Program, Scheme, Type};
use crate::value::Value;
use rustc_hash::FxHashMap as HashMap;
use rustc_hash::FxHashSet as HashSet;
use std::cell::{Cell, OnceCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_PROG: AtomicU64 = AtomicU64::new(1);

/// A lowered binding pattern: 16 bytes, one in every `Let` (a tuple's parts and span behind one
/// pointer: inline they made every `Code` node 96 bytes; issue 14, memory per line).
#[derive(Clone)]
pub(crate) enum LPat {
    Slot(u32),
    Wild,
    Unit(Span),
    /// The parts, the pattern's span, and how many variables it binds (`run.rs`'s `binds`: a `let`'s
    /// step is charged that many, and recounting a 1,000-part pattern at every `let` was 3 % of
    /// forward on P_sum).
    Tuple(Box<(Box<[LPat]>, Span, u32)>),
}

/// Where a captured variable is read from in the frame that creates the closure.
#[derive(Clone, Copy)]
pub(crate) enum Loc {
    Local(u32),
    Capture(u32),
    Sibling(u32),
}

pub(crate) struct LamCode {
    /// The lowering (program) this code belongs to: function values only run in their own machine.
    pub prog: u64,
    pub pat: LPat,
    /// The further parameters of a curried lambda `\p -> \q -> … -> body`, bound in the same frame
    /// (the engine's multi-parameter functions; empty in the walker and for one parameter).
    pub more: Box<[LPat]>,
    pub nslots: u32,
    pub body: Code,
    /// Empty for LetRec members (their group holds the captures).
    pub captures: Box<[Loc]>,
    /// The name a `let` binds this lambda to, and its parameters' names (a tracer may ask for the
    /// calls of functions so named: `Machine::trace_calls`, a chain of continuations).
    pub named: Option<Rc<Named>>,
    /// The id of the parameter when it is one variable (`Machine::watch_lambdas` reports it), or
    /// where the captures' slots start in a let-bound lambda run without a closure (one field:
    /// such a lambda's parameter is never one variable, and `LamCode` stays 168 bytes).
    pub param: Param,
    /// The body with its regions compiled, once made (`code`); boxed, as most functions of a
    /// stage's output never make it and the node inline was 32 bytes more in every lambda's code
    /// (issue 14 item 4: a 10^5-line program's lowered code has ~6·10^5 lambdas).
    pub hot: OnceCell<Box<Code>>,
    /// Entries so far, while `hot` waits to be made.
    pub entries: Cell<u32>,
    /// What making `hot` needs; `None` when the regions are compiled in `body` already, or never.
    pub deferred: Option<Box<Deferred>>,
    /// A definition `f (p1, …, pm) = (e1, …, em)` whose items are flat real trees, as a loop that
    /// calls it runs it (`loops.rs`'s `PureLeaf`; engine only).
    pub pure: Option<Rc<super::loops::PureLeaf>>,
    /// The slots a tail call reusing the frame must empty (`run.rs`'s `reuse_frame`): those the
    /// checker's types do not say hold a real or an integer (engine only; `None`: every slot).
    pub owning: Option<Box<[u32]>>,
    /// The body as lowered, kept beside regions compiled eagerly where a taping loop's round may
    /// inline a call of it (`round.rs`: a short straight-line definition, no captures; engine only).
    pub raw: Option<Box<Code>>,
}

/// `LamCode::param`.
#[derive(Clone, Copy)]
pub(crate) enum Param {
    Other,
    /// The parameter is this one variable.
    Var(u32),
    /// A let-bound lambda only called in its scope (`LocalHead`): its captures are slots of its own
    /// frame from this one on, written by each call; its `let` makes no closure (engine only).
    Local(u32),
}

/// A function body's region hints (`fast::Hints`), kept to compile its regions on a later entry.
/// (32 bytes: the slots' hints, then the captures', in one slice, and what every function of the
/// lowering shares behind one pointer; issue 14 item 4, a lambda's lowered code.)
pub(crate) struct Deferred {
    /// The slots' hints, then the captures' (from `caps_at`).
    scalars: Box<[Scalar]>,
    caps_at: u32,
    after: u32,
    runtime: Rc<Runtime>,
}

/// What the regions of every function of a lowering are compiled with: the runtime's fused pairs
/// of builtins and the builtins a compiled round may call.
struct Runtime {
    fused: Rc<[Fused]>,
    calls: Option<&'static super::RoundCalls>,
    /// Whether entries count toward compiling regions (`Machine::count_entries`).
    counted: Cell<bool>,
}

impl LamCode {
    fn new(prog: u64, pat: LPat, more: Box<[LPat]>, nslots: u32, body: Code, captures: Box<[Loc]>) -> LamCode {
        LamCode { prog, pat, more, nslots, body, captures, named: None, param: Param::Other, hot: OnceCell::new(), entries: Cell::new(0), deferred: None, pure: None, owning: None, raw: None }
    }

    /// The body to run on this entry: with its regions compiled once the function has been entered
    /// `Budget::regions_after` times (a copy of `body`, so the activations running `body` keep it),
    /// else as lowered. Counters and results are the same either way.
    #[inline]
    pub(crate) fn code(&self) -> &Code {
        match (self.hot.get(), &self.deferred) {
            (Some(hot), _) => &**hot,
            (None, None) => &self.body,
            (None, Some(d)) => self.enter_cold(d),
        }
    }

    /// The parameter's id when it is one variable.
    pub(crate) fn var_param(&self) -> Option<u32> {
        match self.param {
            Param::Var(id) => Some(id),
            _ => None,
        }
    }

    /// Where the captures' slots start, in a let-bound lambda run without a closure (`Head::Fn`).
    #[inline(always)]
    pub(crate) fn local(&self) -> Option<u32> {
        match self.param {
            Param::Local(at) => Some(at),
            _ => None,
        }
    }

    /// The body as lowered (before its regions were compiled), when it is still at hand.
    pub(crate) fn lowered(&self) -> Option<&Code> {
        match (&self.raw, &self.deferred) {
            (Some(raw), _) => Some(raw),
            (None, Some(_)) => Some(&self.body),
            (None, None) => None,
        }
    }

    #[inline(never)]
    fn enter_cold(&self, d: &Deferred) -> &Code {
        if !d.runtime.counted.get() {
            return &self.body;
        }
        let n = self.entries.get().saturating_add(1);
        self.entries.set(n);
        if n < d.after {
            return &self.body;
        }
        let mut hot = self.body.clone();
        let (slots, caps) = d.scalars.split_at(d.caps_at as usize);
        super::loops::regions(&mut hot, &Hints { slots, caps, fused: &d.runtime.fused, calls: d.runtime.calls }, &self.pat, &self.more);
        self.hot.get_or_init(|| Box::new(hot))
    }
}

pub(crate) struct Named {
    pub name: Rc<str>,
    pub params: Box<[Rc<str>]>,
}

pub(crate) struct GroupCode {
    pub members: Box<[Rc<LamCode>]>,
    pub captures: Box<[Loc]>,
}

#[derive(Clone)]
pub(crate) enum Code {
    Local(u32),
    /// The only read of a local slot in its function body (engine only, `moves`): the value is
    /// moved out, not cloned, so a tuple or closure that only it holds is taken apart in place.
    Move(u32),
    Capture(u32),
    Sibling(u32),
    Global(u32, Span),
    Const(Value),
    Lam(Rc<LamCode>),
    App(Box<Code>, Box<Code>, Span),
    Let(LPat, Box<Code>, Box<Code>),
    /// The group, the slots its members are bound to in the current frame, the body.
    LetRec(Rc<GroupCode>, Box<[u32]>, Box<Code>),
    Tuple(Box<[Code]>),
    /// `[e1, ..., en]`
    ArrayLit(Box<[Code]>),
    Fst(Box<Code>, Span),
    Snd(Box<Code>, Span),
    Inl(Box<Code>),
    Inr(Box<Code>),
    /// `(scrutinee, p1, e1, p2, e2, span)`, boxed whole like `ExprKind::Case`: inline, the largest
    /// variant made every node 96 bytes instead of 40 (issue 14: a stage's lowered code per line).
    Case(Box<(Code, LPat, Code, LPat, Code, Span)>),
    If(Box<Code>, Box<Code>, Box<Code>, Span),
    Prim1(Prim, Box<Code>, Span),
    Prim2(Prim, Box<Code>, Box<Code>, Span),
    And(Box<Code>, Box<Code>, Span),
    Or(Box<Code>, Box<Code>, Span),
    /// A saturated (non-lazy) builtin application; the span is the saturating application's.
    CallB(Rc<Builtin>, Box<[Code]>, Span),
    /// A lazy builtin applied to its first `arity - 1` arguments and the thunk of its last.
    /// (Behind one pointer, as `Case`: the node's size is its largest variant's.)
    CallLazy(Box<(Rc<Builtin>, Box<[Code]>, Rc<LamCode>, Span)>),
    /// A call-free region compiled to closures (`fast.rs`); it counts its nodes' steps itself.
    Fast(Rc<FastCode>),
    /// An application spine `f a1 … an` whose head is a variable (engine only; `run.rs`'s `call_go`):
    /// no `App` frames, and no partial closures when `f` takes all the arguments at once.
    Call(Box<CallCode>),
    /// `let v = (let f = g a in … f b) in … v c`, a curried call spine through lets whose partial
    /// values are each read once as the next call's head, run as one node (engine only; `spine.rs`).
    Spine(Rc<super::spine::Spine>),
}

#[derive(Clone)]
pub(crate) enum Head {
    Local(u32),
    Move(u32),
    Capture(u32),
    Sibling(u32),
    Global(u32, Span),
    /// A let-bound lambda only called in its scope, called without a closure (`run.rs`'s `call_local`).
    Fn(Box<LocalHead>),
}

/// The callee of a call of a let-bound lambda whose every use is a saturated call (`local_lambdas`):
/// its code, and where the caller reads each of its captures (written into the callee's frame, from
/// `LamCode::local` on). With `spread`, the call's argument is a tuple literal matched by the
/// parameter's tuple pattern: `CallCode::args` are its items, bound straight to the pattern's parts.
#[derive(Clone)]
pub(crate) struct LocalHead {
    pub lam: Rc<LamCode>,
    pub caps: Box<[Loc]>,
    pub spread: bool,
}

#[derive(Clone)]
pub(crate) struct CallCode {
    pub head: Head,
    pub args: Box<[Code]>,
    /// The span of each application, innermost first (the walker's `App` spans).
    pub spans: Box<[Span]>,
    /// A definition's saturated call of itself in tail position of its own body (`mark_self_tail`):
    /// the peers' loops, run by `run.rs`'s `self_tail` as a jump back to the body.
    pub self_tail: bool,
    /// The loop the self call closes, run a round at a time (`loops.rs`; set with the regions).
    pub lp: Option<Rc<super::loops::SelfLoop>>,
}

pub(crate) struct DefCode {
    pub name: Rc<str>,
    pub nslots: u32,
    pub body: Code,
    /// The def's body is a lambda: its value is that closure (no captures), made up front.
    pub lam: Option<Rc<LamCode>>,
}

pub(crate) struct Lowered {
    pub prog: u64,
    pub defs: Vec<DefCode>,
    pub index: HashMap<Rc<str>, u32>,
    /// What its functions' deferred regions share (none when no function defers them).
    runtime: Option<Rc<Runtime>>,
}

impl Lowered {
    /// Whether entries count toward compiling the functions' regions (`Machine::count_entries`).
    pub fn count_entries(&self, on: bool) {
        if let Some(r) = &self.runtime {
            r.counted.set(on);
        }
    }
}

/// A function value (the payload of `Value::Fun`).
pub(crate) enum FunVal {
    Clo { code: Rc<LamCode>, env: Rc<[Value]> },
    Rec { group: Rc<GroupVal>, idx: u32 },
    /// A builtin applied to fewer than `arity` arguments.
    Partial { b: Rc<Builtin>, args: Vec<Value> },
    /// A multi-parameter lambda (`LamCode::more`) applied to fewer than all its parameters: what the
    /// walker's curried reading holds as the closure of the inner lambda.
    Part { code: Rc<LamCode>, env: Rc<[Value]>, group: Option<Rc<GroupVal>>, args: Vec<Value> },
}

/// Dropping a closure drops its captures, which may be closures capturing closures: a backpropagator
/// of dual-numbers reverse AD holds the one before it, a chain as long as the run. Dropped by the
/// compiler's glue that chain recurses once per link and overflows a small stack (wasm's), so what
/// only this closure holds is moved out and taken apart on a work list instead. The list is the
/// thread's, kept between drops (a closure is dropped per backpropagator call: allocating a list
/// for each was a tenth of a dense dualrev stage's run).
impl Drop for FunVal {
    fn drop(&mut self) {
        // (`try_with`: a closure dropped while the thread ends finds no list and makes its own)
        let mut work = DROP_WORK.try_with(|c| c.take()).unwrap_or_default();
        match self {
            FunVal::Clo { env, .. } => take_unique(env, &mut work),
            FunVal::Partial { args, .. } => work.append(args),
            FunVal::Rec { group, .. } => {
                if let Some(g) = Rc::get_mut(group) {
                    take_unique(&mut g.env, &mut work);
                }
            }
            FunVal::Part { env, group, args, .. } => {
                work.append(args);
                take_unique(env, &mut work);
                if let Some(g) = group.as_mut().and_then(Rc::get_mut) {
                    take_unique(&mut g.env, &mut work);
                }
            }
        }
        while let Some(v) = work.pop() {
            dismantle(v, &mut work);
        }
        // (a closure dropped inside `dismantle` took an empty list and gave it back empty)
        let _ = DROP_WORK.try_with(|c| c.set(work));
    }
}

thread_local! {
    static DROP_WORK: std::cell::Cell<Vec<Value>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The values of a slice only this `Rc` holds, moved out onto `work` (leaving `()`), so dropping it
/// is shallow. Scalars stay: they hold nothing, and a backpropagator's captures are mostly reals.
fn take_unique(xs: &mut Rc<[Value]>, work: &mut Vec<Value>) {
    if let Some(xs) = Rc::get_mut(xs) {
        for x in xs.iter_mut() {
            if !matches!(x, Value::Real(_) | Value::Int(_) | Value::Bool(_) | Value::Unit) {
                work.push(std::mem::replace(x, Value::Unit));
            }
        }
    }
}

/// Drops `v` without recursing: the values only it holds go to `work` first.
fn dismantle(mut v: Value, work: &mut Vec<Value>) {
    match &mut v {
        Value::Tuple(xs) | Value::Array(xs) => take_unique(xs, work),
        Value::Inl(x) | Value::Inr(x) => {
            if let Some(x) = Rc::get_mut(x) {
                work.push(std::mem::replace(x, Value::Unit));
            }
        }
        Value::Fun(f) => {
            if let Some(f) = Rc::get_mut(f).and_then(|f| f.downcast_mut::<FunVal>()) {
                match f {
                    FunVal::Clo { env, .. } => take_unique(env, work),
                    FunVal::Partial { args, .. } => work.append(args),
                    FunVal::Rec { group, .. } => {
                        if let Some(g) = Rc::get_mut(group) {
                            take_unique(&mut g.env, work);
                        }
                    }
                    FunVal::Part { env, group, args, .. } => {
                        work.append(args);
                        take_unique(env, work);
                        if let Some(g) = group.as_mut().and_then(Rc::get_mut) {
                            take_unique(&mut g.env, work);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

pub(crate) struct GroupVal {
    pub code: Rc<GroupCode>,
    pub env: Rc<[Value]>,
}

#[derive(Default)]
struct FunCtx {
    locals: HashMap<u32, u32>,
    nslots: u32,
    siblings: HashMap<u32, u32>,
    captures: Vec<Loc>,
    cap_index: HashMap<u32, u32>,
    /// Which slots and captures hold reals or integers by the checker's types (hints for fast regions).
    real: Vec<Scalar>,
    real_caps: Vec<Scalar>,
    /// The reads of each slot in this frame's code so far (`Code::Local`, a call's head, a capture
    /// of a function made here), counted as the code is made: `moves` needs no walk to count them.
    reads: Vec<u32>,
}

impl FunCtx {
    fn hints<'a>(&'a self, fused: &'a [Fused], calls: Option<&'static super::RoundCalls>) -> Hints<'a> {
        Hints { slots: &self.real, caps: &self.real_caps, fused, calls }
    }
}

struct Lowerer<'a> {
    prog: u64,
    builtins: &'a Builtins,
    globals: &'a HashMap<Rc<str>, u32>,
    params: HashMap<Rc<str>, i64>,
    ctxs: Vec<FunCtx>,
    /// The let-bound lambdas met and not yet lowered, with their names.
    names: HashMap<*const Expr, Rc<Named>>,
    /// Compile call-free regions to closures (off: the walker alone, the tests' reference).
    fast: bool,
    /// A function's regions are compiled on this entry (0: now); `Budget::regions_after`.
    regions_after: u32,
    fused: Rc<[Fused]>,
    calls: Option<&'static super::RoundCalls>,
    /// `fused` and `calls` for the deferred regions, shared by every function (made on first use).
    runtime: OnceCell<Rc<Runtime>>,
    /// The definition whose own lambda is lowered next (its self tail calls are marked).
    def_lam: Option<u32>,
    /// Contexts of functions lowered, emptied, for the next functions: a stage's output has a
    /// lambda or more a line, and each one's tables made anew were a tenth of the lowering.
    spare: Vec<FunCtx>,
    /// The let-bound lambdas whose every use is a saturated call (`local_lambdas`), by variable id.
    local_ok: HashSet<u32>,
    /// Those lowered so far: their code and the ids of their captures, in order.
    local_fns: HashMap<u32, (Rc<LamCode>, Box<[u32]>)>,
}

/// The parameter type of a function type (`Unknown` for anything else).
fn param_type(t: &Type) -> &Type {
    match t {
        Type::Fun(ab) | Type::Lin(ab) => &ab.0,
        _ => &Type::Unknown,
    }
}

fn strip_ann(e: &Expr) -> &Expr {
    let mut e = e;
    while let ExprKind::Ann(inner_x) = &e.kind {
        let (inner, _) = &**inner_x;
        e = inner;
    }
    e
}

/// `program` lowered for the walker (`fast` off) or the engine, which compiles a function's regions
/// on its `regions_after`-th entry (0: here).
pub(crate) fn lower(program: &Program, builtins: &Builtins, fast: bool, regions_after: u32) -> Result<Lowered, RunError> {
    let defs = program.defs.iter().map(|d| (Rc::from(&d.name.text), Src::Ref(&d.body)));
    lower_defs(defs, &program.params, builtins, fast, regions_after)
}

/// `lower`, letting the IR go as it is lowered: a definition at a time, and the links of a let chain
/// that is a definition's body (or its lambda's) one at a time, so that the IR and its lowered code
/// are not both whole at once (issue 14: at 10^5 lines the IR is ~4.5 KB a line, its code ~2.4).
pub(crate) fn lower_consuming(program: Program, builtins: &Builtins, fast: bool, regions_after: u32) -> Result<Lowered, RunError> {
    let Program { params, defs, .. } = program;
    let defs = defs.into_iter().map(|d| (Rc::from(&d.name.text), Src::Own(d.body)));
    lower_defs(defs, &params, builtins, fast, regions_after)
}

/// A body to lower: borrowed (the caller keeps the IR) or owned (let go as it is lowered).
enum Src<'e> {
    Ref(&'e Expr),
    Own(Expr),
}

fn lower_defs<'e>(defs: impl ExactSizeIterator<Item = (Rc<str>, Src<'e>)>, params: &[crate::ir::Param], builtins: &Builtins, fast: bool, regions_after: u32) -> Result<Lowered, RunError> {
    let prog = NEXT_PROG.fetch_add(1, Ordering::Relaxed);
    let mut index = HashMap::default();
    let mut bodies = Vec::with_capacity(defs.len());
    for (i, (name, body)) in defs.enumerate() {
        index.entry(name.clone()).or_insert(i as u32);
        bodies.push((name, body));
    }
    let params = params.iter().map(|p| (Rc::from(&p.name.text), p.value)).collect();
    let local_ok = if fast {
        local_lambdas(bodies.iter().map(|(_, b)| match b {
            Src::Ref(e) => *e,
            Src::Own(e) => e,
        }))
    } else {
        HashSet::default()
    };
    let mut lw = Lowerer { prog, builtins, globals: &index, params, ctxs: vec![], names: HashMap::default(), fast, regions_after, fused: builtins.all_fused().into(), calls: builtins.round_calls(), runtime: OnceCell::new(), def_lam: None, spare: vec![], local_ok, local_fns: HashMap::default() };
    let mut defs = Vec::with_capacity(bodies.len());
    // drained front to back: an owned definition's IR goes as soon as it is lowered
    for (i, (name, d)) in bodies.drain(..).enumerate() {
        lw.push_ctx();
        let own_lam = match &d {
            Src::Ref(e) => matches!(strip_ann(e).kind, ExprKind::Lam(..)),
            Src::Own(e) => matches!(strip_ann(e).kind, ExprKind::Lam(..)),
        };
        lw.def_lam = own_lam.then_some(i as u32);
        let mut body = lw.src(d)?;
        lw.def_lam = None;
        let ctx = lw.ctxs.pop().unwrap();
        // a definition's own body runs once per machine: its regions only when compiling eagerly
        let _ = lw.regions(&mut body, &ctx, &LPat::Wild, &[]);
        let lam = match &body {
            Code::Lam(l) if l.captures.is_empty() => Some(l.clone()),
            _ => None,
        };
        defs.push(DefCode { name, nslots: ctx.nslots, body, lam });
        lw.recycle(ctx);
    }
    let runtime = lw.runtime.take();
    drop(lw);
    Ok(Lowered { prog, defs, index, runtime })
}

/// The lambda a `let f = rhs` binds, when it may run without a closure: one parameter that is not a
/// variable (a lambda watcher, `Machine::watch_lambdas`, is handed the closure of those) and a body
/// that is not another lambda (the engine makes `\p -> \q -> e` one function of two parameters).
fn local_candidate(rhs: &Expr) -> Option<&Expr> {
    let lam = strip_ann(rhs);
    let ExprKind::Lam(_, p_body) = &lam.kind else { return None };
    let mut b = strip_ann(&p_body.1);
    while let ExprKind::Pure(inner) = &b.kind {
        b = strip_ann(inner);
    }
    (!matches!(p_body.0, Pat::Var(..)) && !matches!(b.kind, ExprKind::Lam(..))).then_some(lam)
}

/// The ids of the let-bound lambdas (`local_candidate`) whose every use is a saturated call `f a`:
/// never read as a value (passed, returned, stored, over-applied), so no closure of them is needed
/// (issue 13: the unf chain's continuations `Y4 (0.0, 0.0, 1.0)`). A use inside another lambda is
/// fine: that lambda captures the callee's captures instead. An id bound twice anywhere is left
/// out, so a call's id names one lambda. Two walks with their own stacks (a chain may be 10^5 links).
fn local_lambdas<'e>(bodies: impl Iterator<Item = &'e Expr> + Clone) -> HashSet<u32> {
    let mut cands: HashMap<u32, u32> = HashMap::default();
    let mut stack: Vec<&Expr> = bodies.clone().collect();
    while let Some(e) = stack.pop() {
        if let ExprKind::Let(l) = &e.kind {
            if let (Pat::Var(n, _), Some(_)) = (&l.0, local_candidate(&l.1 .0)) {
                cands.insert(n.id, 0);
            }
        }
        push_children(e, &mut stack);
    }
    if cands.is_empty() {
        return HashSet::default();
    }
    // each candidate's binders counted; a use other than a call's head takes it out
    let mut bad: HashSet<u32> = HashSet::default();
    let mut pats: Vec<&Pat> = vec![];
    stack.extend(bodies);
    while let Some(e) = stack.pop() {
        match &e.kind {
            ExprKind::Var(n) => {
                if cands.contains_key(&n.id) {
                    bad.insert(n.id);
                }
                continue;
            }
            ExprKind::App(_) => {
                // the whole spine at once: only a head given exactly one argument is a call of it
                let (mut head, mut n) = (e, 0);
                while let ExprKind::App(f_a) = &head.kind {
                    stack.push(&f_a.1);
                    head = strip_ann(&f_a.0);
                    n += 1;
                }
                match &head.kind {
                    ExprKind::Var(v) if n == 1 && cands.contains_key(&v.id) => {}
                    _ => stack.push(head),
                }
                continue;
            }
            ExprKind::Lam(_, pb) => pats.push(&pb.0),
            ExprKind::Let(l) | ExprKind::Bind(l) => pats.push(&l.0),
            ExprKind::Case(c) => pats.extend([&c.1, &c.3]),
            ExprKind::LetRec(fb) => {
                for d in fb.0.iter() {
                    if let Some(k) = cands.get_mut(&d.name.id) {
                        *k += 1;
                    }
                }
            }
            _ => {}
        }
        while let Some(p) = pats.pop() {
            match p {
                Pat::Var(n, _) => {
                    if let Some(k) = cands.get_mut(&n.id) {
                        *k += 1;
                    }
                }
                Pat::Tuple(ps, _) => pats.extend(ps.iter()),
                Pat::Wild(_) | Pat::Unit(_) => {}
            }
        }
        push_children(e, &mut stack);
    }
    cands.into_iter().filter(|&(id, k)| k == 1 && !bad.contains(&id)).map(|(id, _)| id).collect()
}

/// Pushes the direct sub-expressions of `e` that have any (`ir::each_child`), no leaf pushed only
/// to be popped: `local_lambdas` walks every program lowered.
fn push_children<'e>(e: &'e Expr, stack: &mut Vec<&'e Expr>) {
    crate::ir::each_child(e, &mut |c| {
        if !matches!(c.kind, ExprKind::Real(_) | ExprKind::Int(_) | ExprKind::Bool(_) | ExprKind::Unit | ExprKind::Builtin(_)) {
            stack.push(c);
        }
    });
}

/// The type a let chain's link binds, from its right side's type `t`: a monadic bind's right side
/// has type `M a`, and runs as the `a` it binds (the monads run as their values; `pure` is transparent).
fn link_type(bind: bool, t: &Type) -> &Type {
    match t {
        _ if !bind => t,
        Type::Con(c) if &*c.name == "M" && c.args.len() == 1 => &c.args[0],
        _ => &Type::Unknown,
    }
}

impl Lowerer<'_> {
    fn top(&mut self) -> &mut FunCtx {
        self.ctxs.last_mut().unwrap()
    }

    fn new_slot(&mut self, id: u32) -> u32 {
        let c = self.top();
        let s = c.nslots;
        c.nslots += 1;
        c.locals.insert(id, s);
        c.real.push(Scalar::Other);
        c.reads.push(0);
        s
    }

    /// A context for a function about to be lowered (a spare one when there is one).
    fn push_ctx(&mut self) {
        let c = self.spare.pop().unwrap_or_default();
        self.ctxs.push(c);
    }

    /// `c`, done with, emptied for a later function. A big frame's tables are let go instead:
    /// emptying them costs their size, and the functions after are mostly small.
    fn recycle(&mut self, mut c: FunCtx) {
        if c.locals.capacity() > 64 || c.cap_index.capacity() > 64 || c.siblings.capacity() > 64 || c.real.capacity() > 64 || c.real_caps.capacity() > 64 {
            return;
        }
        c.locals.clear();
        c.nslots = 0;
        c.siblings.clear();
        c.captures.clear();
        c.cap_index.clear();
        c.real.clear();
        c.real_caps.clear();
        c.reads.clear();
        self.spare.push(c);
    }

    /// Notes which slots of `p` receive reals or integers, by the type `ty` of the value bound.
    fn hint(&mut self, p: &LPat, ty: &Type) {
        match (p, ty) {
            (LPat::Slot(s), Type::Real | Type::Int) => {
                if let Some(r) = self.top().real.get_mut(*s as usize) {
                    *r = if *ty == Type::Real { Scalar::Real } else { Scalar::Int };
                }
            }
            (LPat::Tuple(t), Type::Tuple(ts)) if t.0.len() == ts.len() => {
                for (p, t) in t.0.iter().zip(ts.iter()) {
                    self.hint(p, t);
                }
            }
            _ => {}
        }
    }

    /// `pat` with hints from the type of the value it binds.
    fn pat_typed(&mut self, p: &Pat, ty: &Type) -> LPat {
        let lp = self.pat(p);
        self.hint(&lp, ty);
        lp
    }

    /// Compiles the call-free regions of a function body just lowered in `ctx`, after turning the
    /// only read of each slot into a move.
    /// With `regions_after` above 0 the regions wait for the function's `regions_after`-th entry (the
    /// returned `Deferred`, for `LamCode::code`).
    fn regions(&self, body: &mut Code, ctx: &FunCtx, pat: &LPat, more: &[LPat]) -> Option<Box<Deferred>> {
        if !self.fast {
            return None;
        }
        moves_counted(body, &ctx.reads);
        if self.regions_after == 0 {
            super::loops::regions(body, &ctx.hints(&self.fused, self.calls), pat, more);
            return None;
        }
        let scalars = ctx.real.iter().chain(&ctx.real_caps).copied().collect();
        let runtime = self.runtime.get_or_init(|| Rc::new(Runtime { fused: self.fused.clone(), calls: self.calls, counted: Cell::new(true) })).clone();
        Some(Box::new(Deferred { scalars, caps_at: ctx.real.len() as u32, after: self.regions_after, runtime }))
    }

    /// A function's code: its regions compiled now or on a later entry.
    fn lam_code(&self, pat: LPat, more: Box<[LPat]>, mut body: Code, c: &FunCtx, captures: Box<[Loc]>) -> LamCode {
        // a round of a taping loop may call this function (particle's `v1 ← step s`): its body as
        // lowered is kept when the regions are compiled now (deferred, `body` stays as lowered)
        let keep = self.fast && self.regions_after == 0 && captures.is_empty() && (self.calls.is_some() || self.fused.iter().any(|f| f.round.is_some())) && super::round::inlinable(&body);
        let raw = keep.then(|| Box::new(body.clone()));
        let deferred = self.regions(&mut body, c, &pat, &more);
        // A slot the types say holds a real or an integer owns nothing, so a frame reused in place
        // need not empty it: every slot is written by its binder before it is read in an activation,
        // and a wrong hint, or a tail call from another function that left something owning in a slot
        // that is a scalar here, only keeps that value alive until its slot is written again or the
        // frame closes (issue 13, session 31: the tape's horner round −78 instructions).
        let owns = |s: &u32| c.real.get(*s as usize).is_none_or(|h| *h == Scalar::Other);
        // (counted first: collecting the filter grew a vector and shrank it into the box)
        let owning = self.fast.then(|| {
            let mut v = Vec::with_capacity((0..c.nslots).filter(owns).count());
            v.extend((0..c.nslots).filter(owns));
            v.into_boxed_slice()
        });
        LamCode { deferred, owning, raw, ..LamCode::new(self.prog, pat, more, c.nslots, body, captures) }
    }

    /// Records the lambdas `let p = rhs` binds to a name: `let Y = λ…` and, in a tuple,
    /// `let (x, Y) = (e, λ…)`, also at the end of a let chain.
    fn name_lambdas(&mut self, p: &Pat, rhs: &Expr) {
        let mut rhs = strip_ann(rhs);
        // `let (x, Y) = (let … in (e, λ…))`: the value is the let chain's last body
        while let ExprKind::Let(body_pair_x) = &rhs.kind {
            let (_, body_pair) = &**body_pair_x;
            let (_, body) = body_pair;
            rhs = strip_ann(body);
        }
        match (p, &rhs.kind) {
            (Pat::Var(n, _), ExprKind::Lam(_, params_body)) => {
                let params: Box<[Rc<str>]> = match &params_body.0 {
                    // the usual one parameter: no work list
                    Pat::Var(v, _) => Box::new([Rc::from(&v.text)]),
                    p => {
                        let mut ps = vec![];
                        let mut stack: Vec<&Pat> = vec![p];
                        while let Some(q) = stack.pop() {
                            match q {
                                Pat::Var(v, _) => ps.push(Rc::from(&v.text)),
                                Pat::Tuple(qs, _) => stack.extend(qs.iter().rev()),
                                Pat::Wild(_) | Pat::Unit(_) => ps.push(Rc::from("_")),
                            }
                        }
                        ps.into()
                    }
                };
                self.names.insert(rhs as *const Expr, Rc::new(Named { name: Rc::from(&n.text), params }));
            }
            (Pat::Tuple(ps, _), ExprKind::Tuple(es)) if ps.len() == es.len() => {
                for (q, e) in ps.iter().zip(es) {
                    self.name_lambdas(q, e);
                }
            }
            _ => {}
        }
    }

    fn pat(&mut self, p: &Pat) -> LPat {
        match p {
            Pat::Var(n, _) => LPat::Slot(self.new_slot(n.id)),
            Pat::Wild(_) => LPat::Wild,
            Pat::Unit(s) => LPat::Unit(*s),
            Pat::Tuple(ps, s) => {
                let parts: Box<[LPat]> = ps.iter().map(|p| self.pat(p)).collect();
                let n = parts.iter().map(|p| match p {
                    LPat::Tuple(t) => t.2,
                    _ => 1,
                }).fold(0u32, u32::saturating_add);
                LPat::Tuple(Box::new((parts, *s, n)))
            }
        }
    }

    fn lookup(&mut self, level: usize, id: u32) -> Option<Loc> {
        let c = &self.ctxs[level];
        if let Some(&s) = c.locals.get(&id) {
            return Some(Loc::Local(s));
        }
        if let Some(&k) = c.siblings.get(&id) {
            return Some(Loc::Sibling(k));
        }
        if let Some(&i) = c.cap_index.get(&id) {
            return Some(Loc::Capture(i));
        }
        if level == 0 {
            return None;
        }
        let outer = self.lookup(level - 1, id)?;
        let o = &mut self.ctxs[level - 1];
        if let Loc::Local(s) = outer {
            // the closure made in the outer frame reads the slot there
            if let Some(r) = o.reads.get_mut(s as usize) {
                *r = r.saturating_add(1);
            }
        }
        let real = match outer {
            Loc::Local(s) => o.real.get(s as usize).copied().unwrap_or(Scalar::Other),
            Loc::Capture(i) => o.real_caps.get(i as usize).copied().unwrap_or(Scalar::Other),
            Loc::Sibling(_) => Scalar::Other,
        };
        let c = &mut self.ctxs[level];
        let i = c.captures.len() as u32;
        c.captures.push(outer);
        c.real_caps.push(real);
        c.cap_index.insert(id, i);
        Some(Loc::Capture(i))
    }

    /// A lambda `\p -> body` whose parameter has type `param` (from the lambda's type).
    fn lam(&mut self, p: &Pat, param: &Type, body: Src, named: Option<Rc<Named>>) -> Result<Rc<LamCode>, RunError> {
        self.lam_in(p, param, body, named, None)
    }

    /// `lam`; with `local`, the id a `let` binds it to, whose every use is a saturated call
    /// (`local_lambdas`): its captures become slots of its frame, each call writes them there, and
    /// the calls lowered after it find it in `local_fns` (`Head::Fn`).
    fn lam_in(&mut self, p: &Pat, param: &Type, body: Src, named: Option<Rc<Named>>, local: Option<u32>) -> Result<Rc<LamCode>, RunError> {
        // only a definition's own lambda (not one inside it) is that definition's body
        let own = self.def_lam.take();
        self.push_ctx();
        let pat = self.pat_typed(p, param);
        let (more, body) = self.more_params_src(body);
        let body = self.src(body);
        let mut c = self.ctxs.pop().unwrap();
        let mut body = body?;
        let local = match local {
            Some(id) if own.is_none() && more.is_empty() && caps_to_slots(&mut body, c.nslots, false) => {
                caps_to_slots(&mut body, c.nslots, true);
                let mut ids = vec![0; c.captures.len()];
                for (&id, &i) in &c.cap_index {
                    if let Some(x) = ids.get_mut(i as usize) {
                        *x = id;
                    }
                }
                // the captures' slots follow the body's, with their hints; never moved (each call
                // writes them, and a read in a function made here is not counted as one)
                let at = c.nslots;
                c.nslots += c.captures.len() as u32;
                let caps = std::mem::take(&mut c.real_caps);
                c.real.extend(caps);
                c.reads.resize(c.nslots as usize, 2);
                c.captures.clear();
                c.cap_index.clear();
                Some((id, at, ids.into_boxed_slice()))
            }
            _ => None,
        };
        if let Some(def) = own {
            mark_self_tail(&mut body, def, 1 + more.len());
        }
        let param = match p {
            Pat::Var(n, _) => Param::Var(n.id),
            _ => Param::Other,
        };
        let captures = c.captures.clone().into();
        let pure = match own {
            Some(_) if self.fast && more.is_empty() && c.captures.is_empty() => super::loops::PureLeaf::build(&pat, &body, c.nslots, &c.hints(&self.fused, self.calls)).map(Rc::new),
            _ => None,
        };
        let code = self.lam_code(pat, more, body, &c, captures);
        self.recycle(c);
        let Some((id, at, ids)) = local else { return Ok(Rc::new(LamCode { named, param, pure, ..code })) };
        let l = Rc::new(LamCode { named, param: Param::Local(at), pure, ..code });
        self.local_fns.insert(id, (l.clone(), ids));
        Ok(l)
    }

    /// In the engine, the lambdas directly inside a lambda's body are further parameters of one
    /// function (one frame for all): returns their patterns (bound in the current frame) and the
    /// innermost body. The walker keeps them nested.
    fn more_params<'e>(&mut self, body: &'e Expr) -> (Box<[LPat]>, &'e Expr) {
        let mut more = vec![];
        let mut body = body;
        while self.fast {
            // `pure` is transparent at run time (the monads run as their values)
            let mut b = strip_ann(body);
            while let ExprKind::Pure(inner) = &b.kind {
                b = strip_ann(inner);
            }
            let ExprKind::Lam(_, q_inner) = &b.kind else { break };
            let (q, inner) = &**q_inner;
            more.push(self.pat_typed(q, param_type(&b.ty)));
            body = inner;
        }
        (more.into(), body)
    }

    /// `more_params` on a body that is borrowed or owned; an owned one's lambdas (and the
    /// annotations and `pure`s around them, transparent here) go as their patterns are taken.
    fn more_params_src<'e>(&mut self, body: Src<'e>) -> (Box<[LPat]>, Src<'e>) {
        let mut e = match body {
            Src::Ref(e) => {
                let (more, body) = self.more_params(e);
                return (more, Src::Ref(body));
            }
            Src::Own(e) => e,
        };
        let mut more = vec![];
        while self.fast {
            e = match e.kind {
                ExprKind::Ann(inner) => inner.0, ExprKind::Pure(inner) => *inner,
                ExprKind::Lam(_, q_inner) => {
                    let (q, inner) = *q_inner;
                    more.push(self.pat_typed(&q, param_type(&e.ty)));
                    inner
                }
                kind => {
                    e.kind = kind;
                    break;
                }
            };
        }
        (more.into(), Src::Own(e))
    }

    fn src(&mut self, s: Src) -> Result<Code, RunError> {
        match s {
            Src::Ref(e) => self.expr(e),
            Src::Own(e) => self.owned(e),
        }
    }

    /// `expr` on IR the lowerer owns (a definition's body, the run's own output): a lambda's body
    /// and a let chain's links are let go as they are lowered. It reaches only what no lambda's
    /// name is recorded for (`names` holds the lambdas of a link's right side, lowered borrowed).
    fn owned(&mut self, e: Expr) -> Result<Code, RunError> {
        let mut e = e;
        loop {
            if matches!(e.kind, ExprKind::App(..)) && self.saturated_builtin(&e) {
                return self.call_owned(e);
            }
            e = match e.kind {
                ExprKind::Ann(inner) => inner.0, ExprKind::Pure(inner) => *inner,
                ExprKind::Lam(_, p_body) => { let (p, body) = *p_body; return Ok(Code::Lam(self.lam(&p, param_type(&e.ty), Src::Own(body), None)?)) },
                ExprKind::Let(..) | ExprKind::Bind(..) | ExprKind::LetRec(..) => return self.spine_owned(e),
                kind => {
                    e.kind = kind;
                    return self.expr(&e);
                }
            };
        }
    }

    /// `spine` on an owned chain: each link's right side is lowered (borrowed: `name_lambdas` keys
    /// its lambdas by address) and let go before the next.
    fn spine_owned(&mut self, e: Expr) -> Result<Code, RunError> {
        let mut links = vec![];
        let mut cur = e;
        loop {
            let bind = matches!(cur.kind, ExprKind::Bind(..));
            cur = match cur.kind {
                ExprKind::Let(p_rhs_body) | ExprKind::Bind(p_rhs_body) => {
                    let (p, rhs_body) = *p_rhs_body;
                    let (rhs, body) = rhs_body;
                    self.name_lambdas(&p, &rhs);
                    let ty = rhs.ty.clone();
                    let code = if let Some(code) = self.local_link(&p, &rhs) {
                        code?
                    } else if self.names.is_empty() {
                        // no lambda to name by address: the right side is let go as it is lowered
                        // too (arrays/dual-arrays' whole forward pass is one link's `runIds (…)`)
                        self.owned(rhs)?
                    } else {
                        let code = self.expr(&rhs)?;
                        // every lambda `name_lambdas` recorded in `rhs` was lowered with it
                        self.names.clear();
                        code
                    };
                    let p = self.pat_typed(&p, link_type(bind, &ty));
                    links.push(Link::Let(p, code));
                    body
                }
                ExprKind::LetRec(fs_body) => {
                    let (fs, body) = *fs_body;
                    let (group, slots) = self.letrec(&fs)?;
                    links.push(Link::Rec(group, slots));
                    drop(fs);
                    body
                }
                kind => {
                    cur.kind = kind;
                    break;
                }
            };
        }
        let code = self.owned(cur)?;
        Ok(Link::chain(links, code))
    }

    /// A link `let f = λp → body` whose `f` is only called (`local_lambdas`): the lambda lowered to
    /// run without a closure (`lam_in`). `None` for any other link.
    fn local_link(&mut self, p: &Pat, rhs: &Expr) -> Option<Result<Code, RunError>> {
        let Pat::Var(n, _) = p else { return None };
        if !self.local_ok.contains(&n.id) {
            return None;
        }
        let lam = local_candidate(rhs)?;
        let ExprKind::Lam(_, p_body) = &lam.kind else { return None };
        let named = self.names.remove(&(lam as *const Expr));
        Some(self.lam_in(&p_body.0, param_type(&lam.ty), Src::Ref(&p_body.1), named, Some(n.id)).map(Code::Lam))
    }

    fn thunk(&mut self, body: Src) -> Result<Rc<LamCode>, RunError> {
        self.push_ctx();
        let body = self.src(body);
        let c = self.ctxs.pop().unwrap();
        let captures = c.captures.clone().into();
        let code = self.lam_code(LPat::Wild, Box::new([]), body?, &c, captures);
        self.recycle(c);
        Ok(Rc::new(code))
    }

    /// A chain of lets, binds and local recursive groups, walked in a loop rather than by recursion
    /// on the body, so that long straight-line programs do not exhaust the stack (wasm's is small).
    fn spine(&mut self, e: &Expr) -> Result<Code, RunError> {
        let mut links = vec![];
        let mut cur = e;
        loop {
            match &cur.kind {
                ExprKind::Let(p_rhs_body) | ExprKind::Bind(p_rhs_body) => {
                    let (p, rhs_body) = &**p_rhs_body;
                    let (rhs, body) = rhs_body;
                    self.name_lambdas(p, rhs);
                    let code = match self.local_link(p, rhs) {
                        Some(code) => code?,
                        None => self.expr(rhs)?,
                    };
                    let p = self.pat_typed(p, link_type(matches!(cur.kind, ExprKind::Bind(..)), &rhs.ty));
                    links.push(Link::Let(p, code));
                    cur = body;
                }
                ExprKind::LetRec(fs_body) => {
                    let (fs, body) = &**fs_body;
                    let (group, slots) = self.letrec(fs)?;
                    links.push(Link::Rec(group, slots));
                    cur = body;
                }
                _ => break,
            }
        }
        let code = self.expr(cur)?;
        Ok(Link::chain(links, code))
    }

    /// A local recursive group: the shared group object and the slots its members are bound to.
    fn letrec(&mut self, fs: &[FunDef]) -> Result<(Rc<GroupCode>, Box<[u32]>), RunError> {
        let slots: Box<[u32]> = fs.iter().map(|f| self.new_slot(f.name.id)).collect();
        let siblings: HashMap<u32, u32> = fs.iter().enumerate().map(|(k, f)| (f.name.id, k as u32)).collect();
        let mut captures = vec![];
        let mut cap_index = HashMap::default();
        let mut real_caps = vec![];
        let mut members = Vec::with_capacity(fs.len());
        for f in fs {
            let lam = strip_ann(&f.body);
            let ExprKind::Lam(_, p_b) = &lam.kind else {
                return Err(RunError::runtime(f.span, format!("local recursive definition `{}` is not a function", f.name.text)));
            };
            let (p, b) = &**p_b;
            self.ctxs.push(FunCtx { siblings: siblings.clone(), captures, cap_index, real_caps, ..FunCtx::default() });
            let pat = self.pat_typed(p, param_type(&lam.ty));
            let (more, b) = self.more_params(b);
            let b = self.expr(b);
            let c = self.ctxs.pop().unwrap();
            members.push(Rc::new(self.lam_code(pat, more, b?, &c, Box::new([]))));
            captures = c.captures;
            cap_index = c.cap_index;
            real_caps = c.real_caps;
        }
        let group = Rc::new(GroupCode { members: members.into(), captures: captures.into() });
        Ok((group, slots))
    }

    fn builtin(&self, name: &str, span: Span) -> Result<Rc<Builtin>, RunError> {
        self.builtins.get_to_run(name).ok_or_else(|| RunError::runtime(span, format!("unknown builtin `{name}`")))
    }

    /// Whether `e` is a builtin applied to exactly its arity of arguments: `app` lowers it to one
    /// `CallB` of its arguments (or `CallLazy`, with its last as a thunk), which `call_owned` can
    /// lower owned.
    fn saturated_builtin(&self, e: &Expr) -> bool {
        let mut n = 0;
        let mut head = e;
        while let ExprKind::App(f_x) = &head.kind {
            let (f, _) = &**f_x;
            n += 1;
            head = strip_ann(f);
        }
        match &head.kind {
            ExprKind::Builtin(name) => self.builtins.get_to_run(name).is_some_and(|b| b.arity == n),
            _ => false,
        }
    }

    /// `app` of a `saturated_builtin` the lowerer owns: each argument lowered by `owned`, so that a
    /// long one (a whole forward pass under `runIds`) is let go link by link as it is lowered.
    fn call_owned(&mut self, e: Expr) -> Result<Code, RunError> {
        let mut args: Vec<(Expr, Span)> = vec![];
        let mut head = e;
        loop {
            head = match head.kind {
                ExprKind::App(f_a) => {
                    let (f, a) = *f_a;
                    args.push((a, head.span));
                    f
                }
                ExprKind::Ann(inner_x) if !args.is_empty() => { let (inner, _) = *inner_x; inner },
                kind => {
                    head.kind = kind;
                    break;
                }
            };
        }
        args.reverse();
        let ExprKind::Builtin(name) = &head.kind else {
            return Err(RunError::runtime(head.span, "internal error: a saturated builtin call lost its builtin".to_string()));
        };
        let b = self.builtin(name, head.span)?;
        let span = args.last().map_or(head.span, |(_, s)| *s);
        if b.lazy_last {
            let last = args.pop().map(|(a, _)| a);
            let first = args.into_iter().map(|(a, _)| self.owned(a)).collect::<Result<_, _>>()?;
            let Some(last) = last else {
                return Err(RunError::runtime(span, format!("builtin `{}` must be applied to all its {} arguments", b.name, b.arity)));
            };
            let thunk = self.thunk(Src::Own(last))?;
            return Ok(Code::CallLazy(Box::new((b, first, thunk, span))));
        }
        let all = args.into_iter().map(|(a, _)| self.owned(a)).collect::<Result<_, _>>()?;
        Ok(Code::CallB(b, all, span))
    }

    fn app(&mut self, e: &Expr) -> Result<Code, RunError> {
        // The spine f a1 ... an, with the span of each application (counted first: one allocation).
        let mut n = 0;
        let mut head = e;
        while let ExprKind::App(f_a) = &head.kind {
            n += 1;
            head = strip_ann(&f_a.0);
        }
        let mut args: Vec<(&Expr, Span)> = Vec::with_capacity(n);
        let mut head = e;
        while let ExprKind::App(f_a) = &head.kind {
            let (f, a) = &**f_a;
            args.push((a, head.span));
            head = strip_ann(f);
        }
        args.reverse();
        let mut rest = &args[..];
        let mut code = match &head.kind {
            ExprKind::Builtin(name) => {
                let b = self.builtin(name, head.span)?;
                if b.lazy_last && (b.arity == 0 || args.len() < b.arity) {
                    return Err(RunError::runtime(
                        e.span,
                        format!("builtin `{name}` must be applied to all its {} arguments", b.arity),
                    ));
                }
                if args.len() >= b.arity {
                    let n = b.arity;
                    let span = if n == 0 { head.span } else { args[n - 1].1 };
                    rest = &args[n..];
                    if b.lazy_last {
                        let first = self.exprs(args[..n - 1].iter().map(|(a, _)| *a))?;
                        let thunk = self.thunk(Src::Ref(args[n - 1].0))?;
                        Code::CallLazy(Box::new((b, first, thunk, span)))
                    } else {
                        let all = self.exprs(args[..n].iter().map(|(a, _)| *a))?;
                        Code::CallB(b, all, span)
                    }
                } else {
                    Code::Const(Value::Fun(Rc::new(FunVal::Partial { b, args: vec![] })))
                }
            }
            ExprKind::Var(n) if args.len() == 1 && self.local_fns.contains_key(&n.id) => return self.call_local(n.id, args[0]),
            ExprKind::Var(n) if self.fast && !args.is_empty() && !(n.is_global() && self.params.contains_key(&*n.text)) => {
                let head = match self.expr(head)? {
                    Code::Local(s) => Head::Local(s),
                    Code::Move(s) => Head::Move(s),
                    Code::Capture(i) => Head::Capture(i),
                    Code::Sibling(k) => Head::Sibling(k),
                    Code::Global(i, span) => Head::Global(i, span),
                    _ => return Err(RunError::runtime(head.span, "a variable lowers to a variable".to_string())),
                };
                let all = self.exprs(args.iter().map(|(a, _)| *a))?;
                let spans = args.iter().map(|(_, s)| *s).collect();
                return Ok(Code::Call(Box::new(CallCode { head, args: all, spans, self_tail: false, lp: None })));
            }
            _ => self.expr(head)?,
        };
        for (a, span) in rest {
            code = Code::App(Box::new(code), Box::new(self.expr(a)?), *span);
        }
        Ok(code)
    }

    /// `f a` where `f` is a let-bound lambda only called (`local_fns`): a `Call` of it as `Head::Fn`,
    /// its captures read where this call is, and a tuple literal given to a tuple parameter of
    /// its length spread into its items (bound to the parts without making the tuple).
    fn call_local(&mut self, id: u32, (a, span): (&Expr, Span)) -> Result<Code, RunError> {
        let Some((lam, ids)) = self.local_fns.get(&id).map(|(l, ids)| (l.clone(), ids.clone())) else {
            return Err(RunError::runtime(span, "internal: a local function called before it is lowered".to_string()));
        };
        let level = self.ctxs.len() - 1;
        let mut caps = Vec::with_capacity(ids.len());
        for id in ids.iter() {
            let Some(loc) = self.lookup(level, *id) else {
                return Err(RunError::runtime(span, "internal: a local function's capture is out of scope".to_string()));
            };
            if let Loc::Local(s) = loc {
                if let Some(r) = self.top().reads.get_mut(s as usize) {
                    *r = r.saturating_add(1);
                }
            }
            caps.push(loc);
        }
        let items = match (&strip_ann(a).kind, &lam.pat) {
            (ExprKind::Tuple(es), LPat::Tuple(t)) if t.0.len() == es.len() => Some(es),
            _ => None,
        };
        let spread = items.is_some();
        let args = match items {
            Some(es) => self.exprs(es.iter())?,
            None => Box::new([self.expr(a)?]),
        };
        let head = Head::Fn(Box::new(LocalHead { lam, caps: caps.into(), spread }));
        Ok(Code::Call(Box::new(CallCode { head, args, spans: Box::new([span]), self_tail: false, lp: None })))
    }

    /// `expr` of each item, into a slice allocated once at its size (collecting the `Result`s grew
    /// a vector from nothing and shrank it into the box: a reallocation per tuple and call).
    fn exprs<'e>(&mut self, es: impl ExactSizeIterator<Item = &'e Expr>) -> Result<Box<[Code]>, RunError> {
        let mut out = Vec::with_capacity(es.len());
        for e in es {
            out.push(self.expr(e)?);
        }
        Ok(out.into_boxed_slice())
    }

    fn expr(&mut self, e: &Expr) -> Result<Code, RunError> {
        let bx = |c| Box::new(c);
        Ok(match &e.kind {
            ExprKind::Var(n) if n.is_global() => {
                if let Some(&v) = self.params.get(&*n.text) {
                    Code::Const(Value::Int(v))
                } else if let Some(&i) = self.globals.get(&*n.text) {
                    Code::Global(i, e.span)
                } else {
                    return Err(RunError::runtime(e.span, format!("unknown definition `{}`", n.text)));
                }
            }
            ExprKind::Var(n) => {
                let level = self.ctxs.len() - 1;
                match self.lookup(level, n.id) {
                    Some(Loc::Local(s)) => {
                        if let Some(r) = self.top().reads.get_mut(s as usize) {
                            *r = r.saturating_add(1);
                        }
                        Code::Local(s)
                    }
                    Some(Loc::Capture(i)) => Code::Capture(i),
                    Some(Loc::Sibling(k)) => Code::Sibling(k),
                    None => return Err(RunError::runtime(e.span, format!("unbound variable `{}`", n.text))),
                }
            }
            ExprKind::Real(r) => Code::Const(Value::Real(*r)),
            ExprKind::Int(i) => Code::Const(Value::Int(*i)),
            ExprKind::Bool(b) => Code::Const(Value::Bool(*b)),
            ExprKind::Unit => Code::Const(Value::Unit),
            ExprKind::Lam(_, p_body) => {
                let (p, body) = &**p_body;
                let named = self.names.remove(&(e as *const Expr));
                Code::Lam(self.lam(p, param_type(&e.ty), Src::Ref(body), named)?)
            }
            ExprKind::App(..) => self.app(e)?,
            ExprKind::Let(..) | ExprKind::Bind(..) | ExprKind::LetRec(..) => self.spine(e)?,
            ExprKind::Tuple(es) => Code::Tuple(self.exprs(es.iter())?),
            ExprKind::Array(es) => Code::ArrayLit(self.exprs(es.iter())?),
            // `e1 ||| e2` runs as the pair (e1, e2), left to right
            ExprKind::Par(a_b) => { let (a, b) = &**a_b; Code::Tuple(vec![self.expr(a)?, self.expr(b)?].into()) },
            ExprKind::Fst(a) => Code::Fst(bx(self.expr(a)?), e.span),
            ExprKind::Snd(a) => Code::Snd(bx(self.expr(a)?), e.span),
            ExprKind::Inl(a) => Code::Inl(bx(self.expr(a)?)),
            ExprKind::Inr(a) => Code::Inr(bx(self.expr(a)?)),
            ExprKind::Case(c) => {
                let (s, p1, e1, p2, e2) = &**c;
                let (t1, t2) = match &s.ty {
                    Type::Sum(ab) => (&ab.0, &ab.1),
                    _ => (&Type::Unknown, &Type::Unknown),
                };
                let s = self.expr(s)?;
                let p1 = self.pat_typed(p1, t1);
                let e1 = self.expr(e1)?;
                let p2 = self.pat_typed(p2, t2);
                let e2 = self.expr(e2)?;
                Code::Case(Box::new((s, p1, e1, p2, e2, e.span)))
            }
            ExprKind::If(c_t_f) => {
                let (c, t_f) = &**c_t_f;
                let (t, f) = t_f;
                Code::If(bx(self.expr(c)?), bx(self.expr(t)?), bx(self.expr(f)?), e.span)
            }
            ExprKind::Prim(op, args) => {
                if args.len() != op.arity() {
                    return Err(RunError::runtime(
                        e.span,
                        format!("primitive `{}` expects {} arguments, got {}", op.symbol(), op.arity(), args.len()),
                    ));
                }
                if let Some(run) = op.info().on_array {
                    // an array operation runs like a builtin (its functions are called back)
                    let b = Rc::new(Builtin { name: op.symbol(), scheme: Scheme::mono(Type::Unknown), arity: args.len(), lazy_last: false, run });
                    let all = self.exprs(args.iter())?;
                    return Ok(Code::CallB(b, all, e.span));
                }
                match (op, &args[..]) {
                    (Prim::And, [a, b]) => Code::And(bx(self.expr(a)?), bx(self.expr(b)?), e.span),
                    (Prim::Or, [a, b]) => Code::Or(bx(self.expr(a)?), bx(self.expr(b)?), e.span),
                    (_, [a]) => Code::Prim1(*op, bx(self.expr(a)?), e.span),
                    (_, [a, b]) => Code::Prim2(*op, bx(self.expr(a)?), bx(self.expr(b)?), e.span),
                    _ => unreachable!(),
                }
            }
            ExprKind::Ann(a) => self.expr(&a.0)?, ExprKind::Pure(a) => self.expr(a)?,
            ExprKind::Builtin(name) => {
                let b = self.builtin(name, e.span)?;
                if b.lazy_last {
                    return Err(RunError::runtime(
                        e.span,
                        format!("builtin `{name}` must be applied to all its {} arguments", b.arity),
                    ));
                }
                if b.arity == 0 {
                    Code::CallB(b, Box::new([]), e.span)
                } else {
                    Code::Const(Value::Fun(Rc::new(FunVal::Partial { b, args: vec![] })))
                }
            }
        })
    }
}

/// A link of a let chain, lowered: the chain is walked in a loop, and its code built from the end.
enum Link {
    Let(LPat, Code),
    Rec(Rc<GroupCode>, Box<[u32]>),
}

impl Link {
    fn chain(links: Vec<Link>, body: Code) -> Code {
        let mut code = body;
        for link in links.into_iter().rev() {
            code = match link {
                Link::Let(p, rhs) => Code::Let(p, Box::new(rhs), Box::new(code)),
                Link::Rec(group, slots) => Code::LetRec(group, slots, Box::new(code)),
            };
        }
        code
    }
}

/// Turns a function body's reads of its captures into reads of slots `at + i` of its own frame (a
/// let-bound lambda run without a closure, `Lowerer::lam_in`): its nodes, its calls' heads and local
/// callees' captures, and what the functions it makes capture from it. With `apply` off, only
/// checks that every function made here whose captures change is held by this code alone.
fn caps_to_slots(body: &mut Code, at: u32, apply: bool) -> bool {
    let slot = |l: &mut Loc| {
        if let Loc::Capture(i) = *l {
            *l = Loc::Local(at + i);
        }
    };
    let reads = |ls: &[Loc]| ls.iter().any(|l| matches!(l, Loc::Capture(_)));
    let mut stack = vec![body];
    while let Some(c) = stack.pop() {
        match c {
            Code::Capture(i) => {
                if apply {
                    *c = Code::Local(at + *i);
                }
                continue;
            }
            Code::Call(cc) => {
                if apply {
                    match &mut cc.head {
                        Head::Capture(i) => cc.head = Head::Local(at + *i),
                        Head::Fn(h) => h.caps.iter_mut().for_each(slot),
                        _ => {}
                    }
                }
            }
            Code::Lam(l) if reads(&l.captures) => match Rc::get_mut(l) {
                Some(l) if apply => l.captures.iter_mut().for_each(slot),
                Some(_) => {}
                None => return false,
            },
            Code::LetRec(g, _, _) if reads(&g.captures) => match Rc::get_mut(g) {
                Some(g) if apply => g.captures.iter_mut().for_each(slot),
                Some(_) => {}
                None => return false,
            },
            Code::CallLazy(cl) if reads(&cl.2.captures) => match Rc::get_mut(&mut cl.2) {
                Some(l) if apply => l.captures.iter_mut().for_each(slot),
                Some(_) => {}
                None => return false,
            },
            _ => {}
        }
        push_frame_children(c, &mut stack);
    }
    true
}

/// Marks the calls of definition `def` with all its `arity` parameters in tail position of its body
/// (the branches of `if` and `case`, the body of a `let` or `let rec`): the loops written as self
/// tail recursion. Only where to jump: `run.rs` still checks the callee and the frame at run time.
fn mark_self_tail(body: &mut Code, def: u32, arity: usize) {
    let mut stack = vec![body];
    while let Some(c) = stack.pop() {
        match c {
            Code::Call(cc) => {
                if matches!(cc.head, Head::Global(g, _) if g == def) && cc.args.len() == arity {
                    cc.self_tail = true;
                }
            }
            Code::If(_, t, f, _) => stack.extend([&mut **t, &mut **f]),
            Code::Case(cs) => {
                let (_, _, t, _, f, _) = &mut **cs;
                stack.extend([t, f]);
            }
            Code::Let(_, _, b) | Code::LetRec(_, _, b) => stack.push(&mut **b),
            _ => {}
        }
    }
}

/// Turns the only read of a slot in a function body into a move (`Code::Move`, `Head::Move`). Each
/// node of a body runs at most once per activation of its frame (there are no loops; recursion and
/// the functions a body creates get frames of their own, and a closure copies what it captures when
/// it is made, which counts as a read here), so after its only read a slot's value is dead: moving
/// it saves a clone and a drop, and lets `bind` take a tuple apart without cloning its items.
/// The lowering counts the reads as it makes the code (`FunCtx::reads`); this counts them by a walk.
#[cfg(test)]
fn moves(body: &mut Code, nslots: u32) {
    let mut reads = vec![0u32; nslots as usize];
    let mut count = |s: u32, reads: &mut Vec<u32>| {
        if let Some(r) = reads.get_mut(s as usize) {
            *r = r.saturating_add(1);
        }
    };
    let caps = |locs: &[Loc], reads: &mut Vec<u32>, count: &mut dyn FnMut(u32, &mut Vec<u32>)| {
        for l in locs {
            if let Loc::Local(s) = l {
                count(*s, reads);
            }
        }
    };
    let mut stack: Vec<&mut Code> = vec![&mut *body];
    while let Some(c) = stack.pop() {
        match &*c {
            Code::Local(s) | Code::Move(s) => count(*s, &mut reads),
            Code::Lam(l) => caps(&l.captures, &mut reads, &mut count),
            Code::LetRec(g, _, _) => caps(&g.captures, &mut reads, &mut count),
            Code::CallLazy(c) => caps(&c.2.captures, &mut reads, &mut count),
            Code::Call(cc) => {
                if let Head::Local(s) | Head::Move(s) = cc.head {
                    count(s, &mut reads);
                }
            }
            _ => {}
        }
        push_frame_children(c, &mut stack);
    }
    moves_counted(body, &reads);
}

/// `moves` with each slot's reads in `body` counted already. Explicit stack: a body can be a let
/// chain thousands of links long.
fn moves_counted(body: &mut Code, reads: &[u32]) {
    if !reads.contains(&1) {
        return;
    }
    let once = |s: u32| reads.get(s as usize) == Some(&1);
    let mut stack: Vec<&mut Code> = vec![body];
    while let Some(c) = stack.pop() {
        match c {
            Code::Local(s) if once(*s) => *c = Code::Move(*s),
            Code::Call(cc) => {
                if let Head::Local(s) = cc.head {
                    if once(s) {
                        cc.head = Head::Move(s);
                    }
                }
            }
            _ => {}
        }
        push_frame_children(c, &mut stack);
    }
}

/// The children of a node evaluated in its frame (a lambda's body is its own function's frame; a
/// letrec's functions likewise, its body is in this frame).
pub(super) fn frame_children(c: &mut Code) -> Vec<&mut Code> {
    let mut out = vec![];
    push_frame_children(c, &mut out);
    out
}

/// `frame_children` pushed onto a walk's stack (no vector per node).
fn push_frame_children<'a>(c: &'a mut Code, out: &mut Vec<&'a mut Code>) {
    match c {
        Code::Local(_) | Code::Move(_) | Code::Capture(_) | Code::Sibling(_) | Code::Global(..) | Code::Const(_) | Code::Lam(_) | Code::Fast(_) | Code::Spine(_) => {}
        Code::App(a, b, _) | Code::Let(_, a, b) | Code::Prim2(_, a, b, _) | Code::And(a, b, _) | Code::Or(a, b, _) => out.extend([&mut **a, &mut **b]),
        Code::LetRec(_, _, a) | Code::Fst(a, _) | Code::Snd(a, _) | Code::Inl(a) | Code::Inr(a) | Code::Prim1(_, a, _) => out.push(&mut **a),
        Code::Tuple(xs) | Code::ArrayLit(xs) | Code::CallB(_, xs, _) => out.extend(xs.iter_mut()),
        Code::CallLazy(c) => out.extend(c.1.iter_mut()),
        Code::Call(cc) => out.extend(cc.args.iter_mut()),
        Code::Case(c) => {
            let (s, _, a, _, b, _) = &mut **c;
            out.extend([s, a, b])
        }
        Code::If(s, a, b, _) => out.extend([&mut **s, &mut **a, &mut **b]),
    }
}

#[cfg(test)]
mod tests {
    /// Issue 14 (memory per line): a stage's lowered code is a `Code` node or two per IR node, so
    /// its size is the lowering's memory; `Case` and `CallLazy` boxed, `LPat`'s tuple behind one
    /// pointer, keep it at 40 bytes (it was 96).
    #[test]
    fn lowered_nodes_stay_small() {
        assert!(std::mem::size_of::<super::LPat>() <= 16, "LPat is {} bytes", std::mem::size_of::<super::LPat>());
        assert!(std::mem::size_of::<super::Code>() <= 40, "Code is {} bytes", std::mem::size_of::<super::Code>());
        // and a lambda's: its compiled regions boxed, its deferred hints in one slice (issue 14 item 4)
        assert!(std::mem::size_of::<super::LamCode>() <= 168, "LamCode is {} bytes", std::mem::size_of::<super::LamCode>());
        assert!(std::mem::size_of::<super::Deferred>() <= 32, "Deferred is {} bytes", std::mem::size_of::<super::Deferred>());
    }

    use super::{frame_children, lower, moves, Code, Head};
    use crate::interp::Builtins;
    use std::rc::Rc;

    #[test]
    fn a_slot_read_once_is_moved_and_one_read_twice_or_captured_is_not() {
        let src = "def main x = let a = (x, x) in let b = (x, x) in let c = (x, x) in let f = \\y -> c in (fst a, b, b, f 1.0, c)";
        let (p, _, _) = crate::pipeline::front_end(src, &[]).expect("type-checks");
        // lowered for the walker (no moves, no regions), then `moves` on main's frame
        let mut low = lower(&p, &Builtins::new(), false, 0).expect("lowers");
        low.defs[0].lam = None;
        let Code::Lam(l) = &mut low.defs[0].body else { panic!("main is a lambda") };
        let l = Rc::get_mut(l).expect("only the def holds main's code");
        moves(&mut l.body, l.nslots);
        let (mut moved, mut cloned) = (0, 0);
        let mut stack = vec![&mut l.body];
        while let Some(c) = stack.pop() {
            match c {
                Code::Move(_) => moved += 1,
                Code::Local(_) => cloned += 1,
                c => stack.extend(frame_children(c)),
            }
        }
        // moved: `fst a` and the head `f`; cloned: x six times, b twice, c once (also captured by f)
        assert_eq!((moved, cloned), (2, 9));
    }

    /// The reads counted while lowering (`FunCtx::reads`) are the reads in the code: in every
    /// function body of a lowering, a slot is moved exactly where it is read once (a capture by a
    /// closure made in the frame, a call's head, a local read).
    #[test]
    fn the_reads_counted_while_lowering_move_exactly_the_slots_read_once() {
        let src = "def main x = let a = (x, x) in let b = (x, x) in let c = (x, x) in let f = \\y -> c in \
                   let g = \\z -> let w = (z, a) in fst w in let h = \\u -> (u, g u) in (fst a, b, b, f 1.0, c, h 2.0)";
        let (p, _, _) = crate::pipeline::front_end(src, &[]).expect("type-checks");
        // regions deferred: the bodies are as lowered, after `moves`
        let low = lower(&p, &Builtins::new(), true, 3).expect("lowers");
        let mut bodies: Vec<(Code, u32)> = low.defs.iter().map(|d| (d.body.clone(), d.nslots)).collect();
        let (mut frames, mut moved) = (0, 0);
        while let Some((mut body, nslots)) = bodies.pop() {
            frames += 1;
            let mut reads = vec![0u32; nslots as usize];
            let mut read_as_move = vec![false; nslots as usize];
            // a read by a capture is no node to turn into a move
            let mut captured = vec![false; nslots as usize];
            let mut stack = vec![&mut body];
            while let Some(c) = stack.pop() {
                let mut caps = |locs: &[super::Loc]| {
                    for l in locs {
                        if let super::Loc::Local(s) = l {
                            reads[*s as usize] += 1;
                            captured[*s as usize] = true;
                        }
                    }
                };
                match &*c {
                    Code::Local(s) => reads[*s as usize] += 1,
                    Code::Move(s) => {
                        reads[*s as usize] += 1;
                        read_as_move[*s as usize] = true;
                        moved += 1;
                    }
                    Code::Call(cc) => match cc.head {
                        Head::Local(s) => reads[s as usize] += 1,
                        Head::Move(s) => {
                            reads[s as usize] += 1;
                            read_as_move[s as usize] = true;
                            moved += 1;
                        }
                        _ => {}
                    },
                    Code::Lam(l) => {
                        caps(&l.captures);
                        bodies.push((l.body.clone(), l.nslots));
                    }
                    Code::LetRec(g, _, _) => {
                        caps(&g.captures);
                        bodies.extend(g.members.iter().map(|l| (l.body.clone(), l.nslots)));
                    }
                    Code::CallLazy(cl) => {
                        caps(&cl.2.captures);
                        bodies.push((cl.2.body.clone(), cl.2.nslots));
                    }
                    _ => {}
                }
                stack.extend(frame_children(c));
            }
            for s in 0..nslots as usize {
                assert_eq!(read_as_move[s], reads[s] == 1 && !captured[s], "slot {s} of a frame read {} times: {reads:?}", reads[s]);
            }
        }
        // the def, main, f, g, h; moved: f (the head of `f 1.0`), h, g's z and w, and h's g? no, a capture
        assert_eq!((frames, moved), (5, 4));
    }

    /// Issue 13 (the unf chain's continuations): a let-bound lambda whose every use is a saturated
    /// call is lowered to run without a closure (`LamCode::local`, its calls `Head::Fn`, a tuple
    /// literal given to its tuple parameter spread); one read as a value anywhere, over-applied, or
    /// with a variable parameter (a lambda watcher is handed those) stays a closure.
    #[test]
    fn only_let_bound_lambdas_only_called_run_without_closures() {
        let cases: [(&str, (usize, usize, usize)); 6] = [
            // f called three times (once with a variable), g once; g captures f's captures
            ("def main (x, y) = let f = \\(a, b) -> a * x - b in let g = \\(c, d) -> f (c, d) + f (d, c) in let t = (x, y) in g (x, y) + f t", (2, 4, 3)),
            // called inside a lambda passed to `map`
            ("def main (x, y) = let f = \\(a, b) -> a * x - b in sum (map (\\v -> f (v, y)) [x])", (1, 1, 1)),
            // read as a value: in a tuple, passed, over-applied
            ("def main (x, y) = let f = \\(a, b) -> a * x - b in let p = (f, 1.0) in (fst p) (y, x)", (0, 0, 0)),
            ("def main (x, y) = let f = \\(a, b) -> a * x - b in let app = \\k -> k (x, y) in app f", (0, 0, 0)),
            ("def main (x, y) = let h = \\e -> e * x in let f = \\(a, b) -> h in f (x, y) 2.0", (0, 0, 0)),
            // a variable parameter
            ("def main (x, y) = let f = \\a -> a * x in f y", (0, 0, 0)),
        ];
        for (src, want) in cases {
            let (p, _, _) = crate::pipeline::front_end(src, &[]).expect("type-checks");
            // regions deferred: the bodies are as lowered
            let low = lower(&p, &Builtins::new(), true, 3).expect("lowers");
            let (mut local, mut calls, mut spread) = (0, 0, 0);
            let mut stack: Vec<Code> = low.defs.iter().map(|d| d.body.clone()).collect();
            while let Some(mut c) = stack.pop() {
                match &c {
                    Code::Lam(l) => {
                        local += usize::from(l.local().is_some());
                        stack.push(l.body.clone());
                    }
                    Code::Call(cc) => {
                        if let Head::Fn(h) = &cc.head {
                            calls += 1;
                            spread += usize::from(h.spread);
                        }
                    }
                    _ => {}
                }
                stack.extend(frame_children(&mut c).into_iter().map(|c| c.clone()));
            }
            assert_eq!((local, calls, spread), want, "{src}");
            // and the walker's lowering makes none
            let walk = lower(&p, &Builtins::new(), false, 0).expect("lowers");
            assert!(walk.defs.iter().all(|d| !matches!(&d.body, Code::Lam(l) if l.local().is_some())));
        }
    }

    #[test]
    fn only_a_definitions_saturated_calls_of_itself_in_tail_position_are_marked() {
        let src = "def go k acc = if k == 0 then acc else if k == 1 then go 0 (acc + go 0 acc) else \
                   let f = go (k - 1) in case inl acc of inl a -> go (k - 1) a | inr b -> f b\n\
                   def main x = go 3 x + (let g y = go 2 y in g x)";
        let (p, _, _) = crate::pipeline::front_end(src, &[]).expect("type-checks");
        // regions deferred, so the calls are plain `Code::Call` nodes in the bodies
        let low = lower(&p, &Builtins::new(), true, 3).expect("lowers");
        let (mut calls, mut marked) = (0, 0);
        let mut stack: Vec<Code> = low.defs.iter().map(|d| d.body.clone()).collect();
        while let Some(mut c) = stack.pop() {
            match &c {
                Code::Call(cc) if matches!(cc.head, Head::Global(0, _)) => {
                    calls += 1;
                    marked += usize::from(cc.self_tail);
                }
                Code::Lam(l) => stack.push(l.body.clone()),
                // `let g y = …` is a local recursive group of one
                Code::LetRec(g, _, _) => stack.extend(g.members.iter().map(|l| l.body.clone())),
                _ => {}
            }
            stack.extend(frame_children(&mut c).into_iter().map(|c| c.clone()));
        }
        // go's four calls of itself: `go 0 (…)` and `go (k - 1) a` are marked; `go 0 acc` is an
        // argument, `go (k - 1)` partial, and main's and g's calls are not go's own
        assert_eq!((calls, marked), (6, 2));
    }
}
