//! The taping stages' round compiled over f64/i64 registers (issue 13; the design of bench/README.md,
//! "Session 31 (eng38)": run a round of the tape's output as `loops.rs` runs the primal's loops).
//!
//! A definition whose body is `[lets] if c then … else <spine>` (either branch), the spine a
//! curried call of the definition itself through lets (`spine.rs`; dualrev/tape's `horner k acc x =
//! … do { v ← horner (k − 1); v1 ← do { … record … }; v v1 }` then `v x`), is a loop whose round is
//! straight-line: the spine's lets, the scalar arithmetic of its do-blocks, its tuples, its fused
//! records (`Fused::round`), the curried calls, then the next body's lets and test. Such a round is
//! compiled here, from the body as lowered, into one program over two register files: every real
//! and integer a register, a tuple its items' registers (scalar-replaced: the accumulator's and the
//! input's (real, ID) pairs live across rounds in registers), a partial application the arguments
//! it holds. The program is made the first time a round runs, for the shapes the parameters hold
//! then (a real, an integer, a boolean, tuples of them); a round meets other shapes and runs as before.
//!
//! CALLS. A round may call other definitions (particle's `v1 ← step s`; issue 13, session 33): a
//! call that gives a definition all its parameters builds the callee's body as lowered (kept for
//! this where regions are compiled eagerly: `LamCode::raw`, a short straight-line body) in place,
//! in a slot file of its own, so the callee's registers are the round's; its nodes, `App` steps,
//! `partial_step`s and frame are counted as the walker counts them, the frames' nesting once a
//! round against the depth budget. A callee calling itself or in tail position is not built.
//!
//! COUNTERS. Each node's walker count is fixed by the node (a step per node, a real op per real
//! operation, an allocation per tuple and per curried application short of the last, the record's
//! own as its runtime declares them: `RoundRecord`), so a round's counters are summed when it is
//! built and added once a round has run. Rounds run only as many as the step gate (budget, clock
//! check every 4096 steps, a cost model: gate 0), the allocation budget and its memory probe, and
//! the depth budget (each curried application's frame) have room for, and only without a call
//! tracer or a lambda watcher: none of their steps could then stop the run or be seen.
//!
//! EFFECTS. A record's ID is known before it is written: the runtime reserves the round's IDs,
//! consecutive, and hands over its tape (`RoundRecord::take`), the records are written straight
//! onto it as the round computes them, and the tape is given back (`RoundRecord::put`) with the
//! IDs' spans and counters once everything has succeeded, or cut back to where it was. A failing
//! integer operation, a runtime that cannot reserve the IDs, or an edge `record` would refuse (an
//! ID out of range) leave nothing changed, and that round runs step by step as the walker runs it,
//! with the walker's message.
//!
//! CALLS OF A RUNTIME'S BUILTINS. A runtime may offer builtins a round calls (`RoundCalls`, issue
//! 13, session 34: Krawiec's monad's Delta constructors and `deltaLet`): each is an op whose result
//! is the next number of one of two sequences (a Delta node's serial, a DeltaId), reserved for the
//! round as a record's ID is, its effects (the nodes, the bindings) written at once after the
//! round; a value the runtime names by such a number (a Delta) is a handle in an integer register,
//! read from a parameter by `unbox` and boxed back by `rebox` when the rounds stop.

use super::lower::{Code, DefCode, Head, LPat};
use super::{Fused, Machine, RoundArg, RoundArgs, RoundCalls, RoundEdge, RoundItem, RoundNodeArrays, RoundNodes, RoundRecord, RoundSink, RoundTape, MAX_CALL_INTS};
use crate::diag::Span;
use crate::prims::{OnInt, OnReal, Prim};
use crate::value::Value;
use std::cell::OnceCell;
use std::rc::Rc;

/// At most this many registers of each kind, records a round, and nodes deep (the builder recurses).
const MAX_REGS: usize = 1024;
const MAX_RECS: usize = 256;
const MAX_DEPTH: u32 = 64;
/// At most this many rounds in a batch whose records are written at once (`compiled_rounds`).
const MAX_BATCH: u64 = 64;

/// A real operand: a register or a constant.
#[derive(Clone, Copy)]
enum R {
    Reg(u16),
    K(f64),
}
/// An integer (or boolean, as 0 or 1) operand.
#[derive(Clone, Copy)]
enum I {
    Reg(u16),
    K(i64),
}

/// What a slot holds while a round is built.
#[derive(Clone)]
enum Sym {
    R(R),
    I(I),
    /// A boolean in an integer register (0 or 1).
    B(u16),
    /// A handle of the runtime's (`RoundCalls`: a Delta node's serial) in an integer register.
    H(u16),
    T(Rc<[Sym]>),
    /// A definition (the loop's own, or one a round calls) applied to these arguments (fewer than
    /// all its parameters; the loop's own with all of them is the tail call's).
    Part(u32, Rc<[Sym]>),
}

/// A parameter's shape, as its value had it when the program was made.
#[derive(Clone, PartialEq)]
enum Shape {
    R,
    I,
    B,
    H,
    T(Box<[Shape]>),
}

/// An op over the two register files, its operands registers (a constant has a register of its
/// own, set once when rounds start: `RoundProg::kr`, `ki`), so an operand is read without a match and
/// an op is a few words (issue 13, session 37; `+ − × /` on reals without a call).
enum Op {
    Add(u16, u16, u16),
    Sub(u16, u16, u16),
    Mul(u16, u16, u16),
    Div(u16, u16, u16),
    R1(fn(f64) -> f64, u16, u16),
    R2(fn(f64, f64) -> f64, u16, u16, u16),
    RCmp(fn(f64, f64) -> bool, u16, u16, u16),
    ToReal(fn(i64) -> f64, u16, u16),
    Z1(fn(i64) -> Option<i64>, u16, u16),
    Z2(fn(i64, i64) -> Result<i64, crate::prims::IntError>, u16, u16, u16),
    ZCmp(fn(i64, i64) -> bool, u16, u16, u16),
    /// `+`, `−` (failing on overflow, as the prim's `checked_*`) and `==` on integers, without the
    /// call (issue 13, session 39: a loop's counter and test).
    ZAdd(u16, u16, u16),
    ZSub(u16, u16, u16),
    ZEq(u16, u16, u16),
    /// Record k (its ID, the reserved first + k, into an integer register) with these edges
    /// (partial, ID), written straight onto the runtime's tape (`RoundTape`; an ID past a `u32`
    /// fails the round, as `record` refuses it).
    Rec(u16, u8, [(u16, u16); 2]),
    /// The same for a pair ID (`RoundRecord::pairs`: its last component into the register), the
    /// edges (partial, job, seq).
    RecPair(u16, u8, [(u16, u16, u16); 2]),
    /// Call k of the round (`RoundCalls`): its arguments (reals, then integers and handles), its
    /// number the reserved first of its sequence + its place, into an integer register.
    Call(u16, u16, u8, [u16; 2], [u16; MAX_CALL_INTS]),
    /// The same written straight into the runtime's arrays (`RoundNodes`, issue 13, session 39):
    /// an ID (sequence 0) into an integer register; a node of n edges (partial, argument ID,
    /// argument's node), its number into an integer register (an ID past a `u32`, or a node not yet
    /// made, fails the round, as `write` refuses them).
    Id(u16),
    Node(u16, u8, [u16; 2], [u16; MAX_CALL_INTS]),
    /// A call of sequence `seq` handed to the runtime's store (`RoundCalls::sink`, issue 13,
    /// session 40): its number (the next of its sequence) into an integer register, its `nx` reals
    /// and `nz` integers and handles onto the batch's `RoundArgs` (checked by the store at `put`,
    /// which refuses the batch where `write` would refuse the call; session 45).
    Sink(u8, u16, u8, u8, [u16; 2], [u16; MAX_CALL_INTS]),
    /// The same for a call of no real and one, or two, integers or handles, and of one real and
    /// one (Krawiec's Var and deltaLet, Add, Scale: no loop on the counts).
    SinkZ(u8, u16, u16),
    SinkZZ(u8, u16, u16, u16),
    SinkXZ(u8, u16, u16, u16),
}

/// The runtime's `RoundNodes`, when its calls have their shape: sequence 0's take nothing, not a
/// handle (an ID); sequence 1's make a handle from (real, integer, handle) triples, at most two.
fn round_nodes(c: &RoundCalls) -> Option<RoundNodes> {
    let shaped = c.calls.iter().all(|k| match k.seq {
        0 => k.args.is_empty() && !k.handle,
        1 => k.handle && k.args.len() % 3 == 0 && k.args.len() <= 6 && k.args.chunks(3).all(|t| t == [RoundArg::Real, RoundArg::Int, RoundArg::Handle]),
        _ => false,
    });
    c.nodes.filter(|_| shaped)
}

/// A new parameter's leaf: the register it is read from.
#[derive(Clone, Copy)]
enum Out {
    R(u16),
    I(u16),
}

/// A parameter's leaf: the register its value lives in.
#[derive(Clone, Copy)]
enum Leaf {
    R(u16),
    I(u16),
    B(u16),
    H(u16),
}

/// What a definition's body needs to build its round (kept with its spine, `spine::Spine::round`).
pub(crate) struct RoundSrc {
    /// The body as lowered, before its regions were compiled.
    body: Code,
    params: Box<[u32]>,
    fused: Box<[Fused]>,
    calls: Option<&'static RoundCalls>,
    /// The spine's head: the definition called.
    def: u32,
    prog: OnceCell<Option<RoundProg>>,
}

/// A compiled round (see the module comment).
pub(crate) struct RoundProg {
    shapes: Box<[Shape]>,
    /// The parameters' leaves, in order, parameter by parameter.
    leaves: Box<[Leaf]>,
    ops: Box<[Op]>,
    /// The constants' registers and values, real and integer.
    kr: Box<[(u16, f64)]>,
    ki: Box<[(u16, i64)]>,
    /// The new parameters' leaves, in `leaves`' order.
    outs: Box<[Out]>,
    /// The same as moves into the leaves' registers, a leaf that keeps its register left out,
    /// when no move reads a register another one writes (then in any order, without `outs`' copy).
    moves: Option<Box<[(Leaf, Out)]>>,
    test: u16,
    /// The test's value that takes the spine's branch again.
    on: bool,
    rec: Option<RoundRecord>,
    spans: Box<[Span]>,
    job: Option<u16>,
    /// The round's calls (`RoundCalls`), their numbers as places in their sequences, and how many
    /// of each sequence a round takes.
    calls: Option<&'static RoundCalls>,
    items: Box<[RoundItem]>,
    nseq: [usize; 2],
    /// The calls written straight into the runtime's arrays (`round_nodes`; `items` not written
    /// then), and the spans of a round's IDs, in order.
    nodes: Option<RoundNodes>,
    ids: Box<[Span]>,
    /// Or handed straight to the runtime's store (`RoundCalls::sink`; `items` not written then).
    sink: Option<fn(&mut Machine<'_>, [usize; 2], &[RoundItem]) -> Option<Box<dyn RoundSink>>>,
    steps: u64,
    real_ops: u64,
    allocs: u64,
    /// How deep a round's frames nest (a curried application short of the last: 1; a call of
    /// another definition: 1, its own calls' deeper), the walker's depth check and `max_depth`.
    frames: u32,
    /// How many registers of each file the program uses (real, integer): those zeroed before rounds
    /// run in files a previous entry used (`RoundRegs`).
    nregs: [usize; 2],
}

impl RoundSrc {
    /// The source of a round for a body `[lets] if c then … else …` whose spine calls `def`, when
    /// it has that shape (the program itself is made when a round first runs).
    pub(crate) fn new(body: &Code, pat: &LPat, more: &[LPat], fused: &[Fused], calls: Option<&'static RoundCalls>, def: u32) -> Option<RoundSrc> {
        let params = std::iter::once(pat).chain(more).map(|p| if let LPat::Slot(s) = p { Some(*s) } else { None }).collect::<Option<Box<[u32]>>>()?;
        if params.len() < 2 {
            return None;
        }
        let mut c = body;
        while let Code::Let(_, _, rest) = c {
            c = rest;
        }
        let Code::If(..) = c else { return None };
        Some(RoundSrc { body: body.clone(), params, fused: fused.into(), calls, def, prog: OnceCell::new() })
    }
}

struct Builder<'a> {
    src: &'a RoundSrc,
    /// The program's definitions (a call of one inlines its body as lowered).
    defs: &'a [DefCode],
    slots: Vec<Option<Sym>>,
    ops: Vec<Op>,
    nr: usize,
    ni: usize,
    rec: Option<RoundRecord>,
    spans: Vec<Span>,
    steps: u64,
    real_ops: u64,
    allocs: u64,
    /// The frames open at the node being built (0: the loop's own), and the most at once.
    level: u32,
    frames: u32,
    /// The definition's calls given all its parameters (one, the tail call, in a round).
    saturated: u32,
    /// The records' builtin (one runtime writes a round's records).
    outer: Option<&'static str>,
    /// The register of the pair IDs' first component (the job: the same all round).
    job: Option<u16>,
    /// The round's calls (`RoundCalls`) so far, and how many of each sequence.
    items: Vec<RoundItem>,
    nseq: [usize; 2],
    /// The constants' registers (`Op`).
    kr: Vec<(u16, f64)>,
    ki: Vec<(u16, i64)>,
}

impl Builder<'_> {
    /// A real operand's register (a constant's own, one for each value).
    fn rreg(&mut self, x: R) -> Option<u16> {
        match x {
            R::Reg(r) => Some(r),
            R::K(c) => match self.kr.iter().find(|k| k.1.to_bits() == c.to_bits()) {
                Some(k) => Some(k.0),
                None => {
                    let r = self.real_reg()?;
                    self.kr.push((r, c));
                    Some(r)
                }
            },
        }
    }
    /// An integer operand's register (a constant's own, one for each value).
    fn ireg(&mut self, x: I) -> Option<u16> {
        match x {
            I::Reg(r) => Some(r),
            I::K(c) => match self.ki.iter().find(|k| k.1 == c) {
                Some(k) => Some(k.0),
                None => {
                    let r = self.int_reg()?;
                    self.ki.push((r, c));
                    Some(r)
                }
            },
        }
    }
    fn real_reg(&mut self) -> Option<u16> {
        self.nr += 1;
        (self.nr <= MAX_REGS).then_some(self.nr as u16 - 1)
    }
    fn int_reg(&mut self) -> Option<u16> {
        self.ni += 1;
        (self.ni <= MAX_REGS).then_some(self.ni as u16 - 1)
    }
    fn slot(&self, s: u32) -> Option<Sym> {
        self.slots.get(s as usize)?.clone()
    }
    fn bind(&mut self, p: &LPat, v: Sym) -> Option<()> {
        match (p, v) {
            (LPat::Slot(s), v) => {
                let s = *s as usize;
                if s >= self.slots.len() {
                    self.slots.resize(s + 1, None);
                }
                self.slots[s] = Some(v);
            }
            (LPat::Wild, _) => {}
            (LPat::Tuple(t), Sym::T(vs)) if t.0.len() == vs.len() => {
                for (p, v) in t.0.iter().zip(vs.iter()) {
                    self.bind(p, v.clone())?;
                }
            }
            _ => return None,
        }
        Some(())
    }
    fn real(&mut self, c: &Code, d: u32) -> Option<R> {
        match self.expr(c, d)? {
            Sym::R(r) => Some(r),
            _ => None,
        }
    }

    /// `c`'s value, its ops emitted and its walker counts added; `None`: not a round's node.
    fn expr(&mut self, c: &Code, d: u32) -> Option<Sym> {
        if d > MAX_DEPTH {
            return None;
        }
        let d = d + 1;
        self.steps += 1;
        Some(match c {
            Code::Local(s) | Code::Move(s) => self.slot(*s)?,
            Code::Const(Value::Real(x)) => Sym::R(R::K(*x)),
            Code::Const(Value::Int(k)) => Sym::I(I::K(*k)),
            Code::Let(p, rhs, rest) => {
                let v = self.expr(rhs, d)?;
                self.bind(p, v)?;
                self.expr(rest, d)?
            }
            Code::Tuple(items) => {
                let vs = items.iter().map(|c| self.expr(c, d)).collect::<Option<Rc<[Sym]>>>()?;
                self.allocs += 1;
                Sym::T(vs)
            }
            Code::Prim1(op, a, _) => match (self.expr(a, d)?, op.info().on_real, op.info().on_int) {
                (Sym::I(a), _, Some(OnInt::ZToR(f))) if *op == Prim::ToReal => {
                    let (r, a) = (self.real_reg()?, self.ireg(a)?);
                    self.ops.push(Op::ToReal(f, r, a));
                    Sym::R(R::Reg(r))
                }
                (Sym::R(a), Some(OnReal::R1(f)), _) => {
                    self.real_ops += 1;
                    let (r, a) = (self.real_reg()?, self.rreg(a)?);
                    self.ops.push(Op::R1(f, r, a));
                    Sym::R(R::Reg(r))
                }
                (Sym::I(a), _, Some(OnInt::Z1(f))) => {
                    let (r, a) = (self.int_reg()?, self.ireg(a)?);
                    self.ops.push(Op::Z1(f, r, a));
                    Sym::I(I::Reg(r))
                }
                _ => return None,
            },
            Code::Prim2(op, a, b, _) => {
                let (a, b) = (self.expr(a, d)?, self.expr(b, d)?);
                match (a, b, op.info().on_real, op.info().on_int) {
                    (Sym::R(a), Sym::R(b), Some(OnReal::R2(f)), _) => {
                        self.real_ops += 1;
                        let (r, a, b) = (self.real_reg()?, self.rreg(a)?, self.rreg(b)?);
                        self.ops.push(match op {
                            Prim::Add => Op::Add(r, a, b),
                            Prim::Sub => Op::Sub(r, a, b),
                            Prim::Mul => Op::Mul(r, a, b),
                            Prim::Div => Op::Div(r, a, b),
                            _ => Op::R2(f, r, a, b),
                        });
                        Sym::R(R::Reg(r))
                    }
                    (Sym::R(a), Sym::R(b), Some(OnReal::RCmp(f)), _) => {
                        self.real_ops += 1;
                        let (r, a, b) = (self.int_reg()?, self.rreg(a)?, self.rreg(b)?);
                        self.ops.push(Op::RCmp(f, r, a, b));
                        Sym::B(r)
                    }
                    (Sym::I(a), Sym::I(b), _, Some(OnInt::Z2(f))) => {
                        let (r, a, b) = (self.int_reg()?, self.ireg(a)?, self.ireg(b)?);
                        self.ops.push(match op {
                            Prim::Add => Op::ZAdd(r, a, b),
                            Prim::Sub => Op::ZSub(r, a, b),
                            _ => Op::Z2(f, r, a, b),
                        });
                        Sym::I(I::Reg(r))
                    }
                    (Sym::I(a), Sym::I(b), _, Some(OnInt::ZCmp(f))) => {
                        let (r, a, b) = (self.int_reg()?, self.ireg(a)?, self.ireg(b)?);
                        self.ops.push(if *op == Prim::Eq { Op::ZEq(r, a, b) } else { Op::ZCmp(f, r, a, b) });
                        Sym::B(r)
                    }
                    _ => return None,
                }
            }
            Code::CallB(b, args, span) if self.src.calls.is_some_and(|c| c.calls.iter().any(|k| k.name == b.name)) => self.round_call(b.name, args, *span, d)?,
            Code::CallB(outer, items, span) => {
                // `record (Ck a1 j1 …)`: the two calls' steps, the arguments, the record's own
                let [Code::CallB(inner, args, _)] = &items[..] else { return None };
                let f = super::api::find_fused(&self.src.fused, outer.name, inner.name)?;
                let rr = f.round?;
                if self.outer.is_some_and(|o| o != outer.name) || args.len() > 4 || args.len() % 2 != 0 || self.spans.len() >= MAX_RECS {
                    return None;
                }
                self.steps += 1;
                let mut es = [(R::K(0.0), I::K(0), I::K(0)); 2];
                for (k, p) in args.chunks(2).enumerate() {
                    let a = self.real(&p[0], d)?;
                    es[k] = match (self.expr(&p[1], d)?, rr.pairs) {
                        (Sym::I(j), false) => (a, I::K(0), j),
                        (Sym::T(js), true) => match &js[..] {
                            [Sym::I(j), Sym::I(s)] => (a, *j, *s),
                            _ => return None,
                        },
                        _ => return None,
                    };
                }
                self.steps += rr.steps;
                self.allocs += rr.allocs;
                self.rec = Some(rr);
                self.outer = Some(outer.name);
                self.spans.push(*span);
                let r = self.int_reg()?;
                let mut regs = [(0u16, 0u16, 0u16); 2];
                for (g, &(a, z, j)) in regs.iter_mut().zip(es.iter()).take(args.len() / 2) {
                    *g = (self.rreg(a)?, self.ireg(z)?, self.ireg(j)?);
                }
                let n = (args.len() / 2) as u8;
                self.ops.push(match rr.pairs {
                    true => Op::RecPair(r, n, regs),
                    false => Op::Rec(r, n, regs.map(|(a, _, j)| (a, j))),
                });
                if rr.pairs {
                    let job = match self.job {
                        Some(j) => j,
                        None => {
                            let j = self.int_reg()?;
                            *self.job.insert(j)
                        }
                    };
                    Sym::T(Rc::new([Sym::I(I::Reg(job)), Sym::I(I::Reg(r))]))
                } else {
                    Sym::I(I::Reg(r))
                }
            }
            Code::Call(cc) if !cc.self_tail => self.call(cc, d)?,
            _ => return None,
        })
    }

    /// A builtin of the runtime's `RoundCalls` (a Delta constructor, `deltaLet`): its arguments
    /// (its node's step is counted by `expr`), its own steps and allocations, its number the next of
    /// its sequence in the round.
    fn round_call(&mut self, name: &str, args: &[Code], span: Span, d: u32) -> Option<Sym> {
        let calls = self.src.calls?;
        let k = calls.calls.iter().position(|c| c.name == name)?;
        let rc = &calls.calls[k];
        if args.len() > rc.args.len() || self.items.len() >= MAX_RECS || rc.seq > 1 || k > u8::MAX as usize {
            return None;
        }
        // the arguments' leaves in order: a tuple argument (dualrev/contrib's `(ID, Contrib)`) is
        // its items, matched against the call's kinds one by one
        let mut got = vec![];
        for a in args.iter() {
            let v = self.expr(a, d)?;
            flatten(&v, &mut got, 0)?;
        }
        if got.len() != rc.args.len() {
            return None;
        }
        let (mut x, mut z, mut nx, mut nz) = ([R::K(0.0); 2], [I::K(0); MAX_CALL_INTS], 0, 0);
        for (v, kind) in got.into_iter().zip(rc.args) {
            match (v, kind) {
                (Sym::R(r), RoundArg::Real) => {
                    *x.get_mut(nx)? = r;
                    nx += 1;
                }
                (Sym::I(i), RoundArg::Int) => {
                    *z.get_mut(nz)? = i;
                    nz += 1;
                }
                (Sym::H(h), RoundArg::Handle) => {
                    *z.get_mut(nz)? = I::Reg(h);
                    nz += 1;
                }
                _ => return None,
            }
        }
        self.steps += rc.steps;
        self.allocs += rc.allocs;
        let seq = rc.seq as usize;
        let at = self.nseq[seq];
        self.nseq[seq] += 1;
        let r = self.int_reg()?;
        let mut xr = [0u16; 2];
        for (g, &v) in xr.iter_mut().zip(x.iter()) {
            *g = self.rreg(v)?;
        }
        let mut zr = [0u16; MAX_CALL_INTS];
        for (g, &v) in zr.iter_mut().zip(z.iter()) {
            *g = self.ireg(v)?;
        }
        self.ops.push(match round_nodes(calls) {
            Some(_) if rc.seq == 0 => Op::Id(r),
            Some(_) => Op::Node(r, (rc.args.len() / 3) as u8, xr, zr),
            None if calls.sink.is_some() => match (nx, nz) {
                (0, 1) => Op::SinkZ(rc.seq, r, zr[0]),
                (0, 2) => Op::SinkZZ(rc.seq, r, zr[0], zr[1]),
                (1, 1) => Op::SinkXZ(rc.seq, r, xr[0], zr[0]),
                _ => Op::Sink(rc.seq, r, nx as u8, nz as u8, xr, zr),
            },
            None => Op::Call(self.items.len() as u16, r, rc.seq, xr, zr),
        });
        self.items.push(RoundItem { call: k as u8, span, x: [0.0; 2], z: [0; MAX_CALL_INTS], at: at as i64 });
        Some(if rc.handle { Sym::H(r) } else { Sym::I(I::Reg(r)) })
    }

    /// A call of a definition (its name, or a partial value of it in a slot): `eval_call`'s `App`
    /// step per argument (the head's is counted by `expr`), the arguments, and `partial_step` for
    /// each short of the last parameter (a step, an allocation, a frame's depth check and
    /// `max_depth`). The loop's own definition is called only in the round itself (its saturated
    /// call is the tail call, `build`); another one (particle's `v1 ← step s`), once it has all
    /// its parameters, has its body as lowered built in place in a frame of its own (`enter`).
    fn call(&mut self, cc: &super::lower::CallCode, d: u32) -> Option<Sym> {
        self.steps += cc.args.len() as u64;
        let (def, mut held): (u32, Vec<Sym>) = match cc.head {
            Head::Global(g, _) => (g, vec![]),
            Head::Local(s) | Head::Move(s) => match self.slot(s)? {
                Sym::Part(g, a) => (g, a.to_vec()),
                _ => return None,
            },
            _ => return None,
        };
        let own = def == self.src.def;
        let lam = if own { None } else { Some(self.defs.get(def as usize)?.lam.clone()?) };
        if own && self.level > 0 {
            return None;
        }
        let arity = lam.as_ref().map_or(self.src.params.len(), |l| l.more.len() + 1);
        for a in cc.args.iter() {
            let v = self.expr(a, d)?;
            held.push(v);
            if held.len() < arity {
                self.steps += 1;
                self.allocs += 1;
                self.frames = self.frames.max(self.level + 1);
            }
        }
        match (held.len().cmp(&arity), lam) {
            (std::cmp::Ordering::Greater, _) => None,
            (std::cmp::Ordering::Less, _) => Some(Sym::Part(def, held.into())),
            // the loop's own call, saturated: only as the branch's tail (`build`)
            (std::cmp::Ordering::Equal, None) => {
                self.saturated += 1;
                Some(Sym::Part(def, held.into()))
            }
            (std::cmp::Ordering::Equal, Some(lam)) => self.enter(&lam, held, d),
        }
    }

    /// A definition's body as lowered, given all its arguments, in a frame of its own: the frame's
    /// depth check and `max_depth`, the parameters' patterns matched by the values' shapes (no step),
    /// the body's nodes. The call is never in tail position of an inlined body (`tail_call`: that
    /// call would reuse the frame), only a right side or an operand, so every frame opened in a
    /// round is one deeper than its caller's, as the walker opens it.
    fn enter(&mut self, lam: &super::lower::LamCode, args: Vec<Sym>, d: u32) -> Option<Sym> {
        let body = lam.lowered()?;
        if tail_call(body) {
            return None;
        }
        let caller = std::mem::replace(&mut self.slots, vec![None; lam.nslots as usize]);
        self.level += 1;
        self.frames = self.frames.max(self.level);
        for (p, v) in std::iter::once(&lam.pat).chain(lam.more.iter()).zip(args) {
            self.bind(p, v)?;
        }
        let v = self.expr(body, d)?;
        self.level -= 1;
        self.slots = caller;
        Some(v)
    }

    /// The body's start: its lets, the `if`'s step and test; the test and the spine's branch.
    fn start<'c>(&mut self, body: &'c Code) -> Option<(u16, &'c Code, &'c Code)> {
        let mut c = body;
        while let Code::Let(p, rhs, rest) = c {
            self.steps += 1;
            let v = self.expr(rhs, 0)?;
            self.bind(p, v)?;
            c = rest;
        }
        let Code::If(test, t, e, _) = c else { return None };
        self.steps += 1;
        let Sym::B(b) = self.expr(test, 0)? else { return None };
        Some((b, t, e))
    }
}

/// At most this many nodes in a body kept for inlining (`inlinable`).
const MAX_INLINE: usize = 2048;

/// Whether a function's body as lowered is one a round may inline (`Builder::inline`): only the
/// nodes a round is built from, at most `MAX_INLINE` of them (`LamCode::raw` keeps it; walked with
/// a stack of its own).
pub(crate) fn inlinable(body: &Code) -> bool {
    let (mut stack, mut n) = (vec![body], 0);
    while let Some(c) = stack.pop() {
        n += 1;
        if n > MAX_INLINE {
            return false;
        }
        match c {
            Code::Local(_) | Code::Move(_) | Code::Const(Value::Real(_) | Value::Int(_)) => {}
            Code::Let(_, a, b) | Code::Prim2(_, a, b, _) => stack.extend([&**a, &**b]),
            Code::Prim1(_, a, _) => stack.push(a),
            Code::Tuple(items) | Code::CallB(_, items, _) => stack.extend(items.iter()),
            Code::Call(cc) if matches!(cc.head, Head::Global(..) | Head::Local(_) | Head::Move(_)) && !cc.self_tail => stack.extend(cc.args.iter()),
            _ => return false,
        }
    }
    true
}

/// `v`'s leaves in order into `out` (a tuple its items'); `None` for a partial application or a
/// tuple nested deeper than a round's arguments are.
fn flatten(v: &Sym, out: &mut Vec<Sym>, depth: u32) -> Option<()> {
    match v {
        Sym::T(vs) if depth < 4 => vs.iter().try_for_each(|v| flatten(v, out, depth + 1)),
        Sym::R(_) | Sym::I(_) | Sym::B(_) | Sym::H(_) => {
            out.push(v.clone());
            Some(())
        }
        _ => None,
    }
}

/// Whether `body`'s value is a call's (its let chain's last node): a tail call, which reuses the frame.
fn tail_call(body: &Code) -> bool {
    let mut c = body;
    while let Code::Let(_, _, rest) = c {
        c = rest;
    }
    matches!(c, Code::Call(_) | Code::Spine(_) | Code::App(..))
}

/// `v`'s leaves into registers of shape `sh` (a new one each); `None` for a shape not taken.
/// (`handle`: whether a value is one of the runtime's handles, `RoundCalls::unbox`.)
fn shape_of(v: &Value, depth: u32, handle: &mut dyn FnMut(&Value) -> bool) -> Option<Shape> {
    Some(match v {
        Value::Real(_) => Shape::R,
        Value::Int(_) => Shape::I,
        Value::Bool(_) => Shape::B,
        Value::Tuple(vs) if depth < 4 => Shape::T(vs.iter().map(|v| shape_of(v, depth + 1, handle)).collect::<Option<_>>()?),
        Value::Ext(_) if handle(v) => Shape::H,
        _ => return None,
    })
}

impl RoundProg {
    fn build(src: &RoundSrc, defs: &[DefCode], shapes: Box<[Shape]>, spine_then: bool) -> Option<RoundProg> {
        let nslots = 1 + src.params.iter().copied().max()? as usize;
        let mut b = Builder { src, defs, slots: vec![None; nslots], ops: vec![], nr: 0, ni: 0, rec: None, spans: vec![], steps: 0, real_ops: 0, allocs: 0, level: 0, frames: 0, saturated: 0, outer: None, job: None, items: vec![], nseq: [0; 2], kr: vec![], ki: vec![] };
        // the parameters' leaves
        let mut leaves = vec![];
        fn leaf(b: &mut Builder, sh: &Shape, leaves: &mut Vec<Leaf>) -> Option<Sym> {
            Some(match sh {
                Shape::R => {
                    let r = b.real_reg()?;
                    leaves.push(Leaf::R(r));
                    Sym::R(R::Reg(r))
                }
                Shape::I => {
                    let r = b.int_reg()?;
                    leaves.push(Leaf::I(r));
                    Sym::I(I::Reg(r))
                }
                Shape::B => {
                    let r = b.int_reg()?;
                    leaves.push(Leaf::B(r));
                    Sym::B(r)
                }
                Shape::H => {
                    let r = b.int_reg()?;
                    leaves.push(Leaf::H(r));
                    Sym::H(r)
                }
                Shape::T(items) => Sym::T(items.iter().map(|s| leaf(b, s, leaves)).collect::<Option<_>>()?),
            })
        }
        for (s, sh) in src.params.iter().zip(shapes.iter()) {
            let v = leaf(&mut b, sh, &mut leaves)?;
            b.slots[*s as usize] = Some(v);
        }
        // a round: the spine's branch (the body's start already ran), then the next body's start;
        // the body's start is compiled once for its shape, as the branches' registers differ
        let mut probe = Builder { src, defs, slots: b.slots.clone(), ops: vec![], nr: b.nr, ni: b.ni, rec: None, spans: vec![], steps: 0, real_ops: 0, allocs: 0, level: 0, frames: 0, saturated: 0, outer: None, job: None, items: vec![], nseq: [0; 2], kr: vec![], ki: vec![] };
        let (_, t, e) = probe.start(&src.body)?;
        let branch = if spine_then { t } else { e };
        // the branch's value is the tail call's arguments; no other call of the definition is saturated
        let Sym::Part(g, new) = b.expr(branch, 0)? else { return None };
        if g != src.def || new.len() != src.params.len() || b.saturated != 1 {
            return None;
        }
        // the tail call's saturating argument is bound in the reused frame: no `partial_step`
        let mut outs = vec![];
        fn flat(v: &Sym, sh: &Shape, outs: &mut Vec<Sym>) -> Option<()> {
            match (v, sh) {
                (Sym::R(_), Shape::R) | (Sym::I(_), Shape::I) | (Sym::B(_), Shape::B) | (Sym::H(_), Shape::H) => outs.push(v.clone()),
                (Sym::T(vs), Shape::T(ss)) if vs.len() == ss.len() => {
                    for (v, s) in vs.iter().zip(ss.iter()) {
                        flat(v, s, outs)?;
                    }
                }
                _ => return None,
            }
            Some(())
        }
        for ((v, sh), s) in new.iter().zip(shapes.iter()).zip(src.params.iter()) {
            flat(v, sh, &mut outs)?;
            b.slots[*s as usize] = Some(v.clone());
        }
        let (test, _, _) = b.start(&src.body)?;
        // one runtime's effects a round: its fused records or its calls
        if b.saturated != 1 || (b.rec.is_some() && !b.items.is_empty()) {
            return None;
        }
        let outs = outs
            .into_iter()
            .map(|o| match o {
                Sym::R(r) => Some(Out::R(b.rreg(r)?)),
                Sym::I(i) => Some(Out::I(b.ireg(i)?)),
                Sym::B(r) | Sym::H(r) => Some(Out::I(r)),
                _ => None,
            })
            .collect::<Option<Box<[Out]>>>()?;
        let moves: Vec<(Leaf, Out)> = leaves.iter().zip(outs.iter()).filter(|(l, o)| reg_of(**l) != out_of(**o)).map(|(l, o)| (*l, *o)).collect();
        let direct = moves.iter().all(|(_, o)| moves.iter().all(|(l, _)| reg_of(*l) != out_of(*o)));
        Some(RoundProg {
            shapes,
            leaves: leaves.into(),
            ops: b.ops.into(),
            kr: b.kr.into(),
            ki: b.ki.into(),
            outs,
            moves: direct.then(|| moves.into()),
            test,
            on: spine_then,
            rec: b.rec,
            spans: b.spans.into(),
            job: b.job,
            calls: src.calls,
            nodes: src.calls.and_then(round_nodes),
            sink: src.calls.filter(|c| round_nodes(c).is_none()).and_then(|c| c.sink),
            ids: src.calls.map_or(vec![], |c| b.items.iter().filter(|it| c.calls.get(it.call as usize).is_some_and(|k| k.seq == 0)).map(|it| it.span).collect()).into(),
            items: b.items.into(),
            nseq: b.nseq,
            steps: b.steps,
            real_ops: b.real_ops,
            allocs: b.allocs,
            frames: b.frames,
            nregs: [b.nr, b.ni],
        })
    }
}


impl Machine<'_> {
    /// Runs compiled rounds of the loop whose body's start has just taken the spine's branch
    /// (`spine.rs`'s `round_head`), as many as fit (see the module comment). `Some(true)`: the last
    /// round's test left the loop (its other branch runs next); `Some(false)`: the spine runs its
    /// next round step by step; `None`: no round ran, nothing changed.
    pub(super) fn compiled_rounds(&mut self, src: &RoundSrc, spine_then: bool) -> Option<bool> {
        // the register files the thread's last rounds ran in, or new ones: a machine is made for
        // each run, and 16 KB allocated and zeroed each time was a quarter of a 40-operation
        // gradient's instructions, ~3 % of its time (issue 13, session 40)
        let mut regs = match SPARE_REGS.take() {
            Some(r) => r,
            None => RoundRegs::new()?,
        };
        let r = self.rounds_in(src, spine_then, &mut regs);
        SPARE_REGS.set(Some(regs));
        r
    }

    fn rounds_in(&mut self, src: &RoundSrc, spine_then: bool, regs: &mut RoundRegs) -> Option<bool> {
        if self.call_tracer.is_some() || self.lam_watcher.is_some() {
            return None;
        }
        let bp = self.bp;
        // the parameters' values (a handle is read through its runtime, which needs the machine)
        let vals = match src.calls {
            Some(_) => src.params.iter().map(|s| self.locals.get(bp + *s as usize).cloned()).collect::<Option<Vec<Value>>>()?,
            None => vec![],
        };
        let prog = src.prog.get_or_init(|| {
            let shapes = match src.calls {
                Some(c) => vals.iter().map(|v| shape_of(v, 0, &mut |v| (c.unbox)(self, v).is_some())).collect::<Option<Box<[Shape]>>>()?,
                None => src.params.iter().map(|s| shape_of(self.locals.get(bp + *s as usize)?, 0, &mut |_| false)).collect::<Option<Box<[Shape]>>>()?,
            };
            RoundProg::build(src, &self.code.defs, shapes, spine_then)
        });
        let p = prog.as_ref()?;
        if p.on != spine_then {
            return None;
        }
        // How many rounds fit: their steps within the steps budget, their allocations within the
        // allocation budget. A 4096-step clock check or a 4096-allocation memory probe the rounds
        // cross is made before they run (`'batch` below), so rounds go on across it when it passes
        // (issue 13, session 37: a round across one ran step by step, one round in twenty on
        // particle); a cost model charges every step (`step_gate` 0): no round runs.
        if self.step_gate == 0 {
            return None;
        }
        let mut fit = self.budget.steps.saturating_sub(self.steps) / p.steps.max(1);
        fit = fit.min(self.budget.allocs.saturating_sub(self.allocs).checked_div(p.allocs).unwrap_or(u64::MAX));
        // the deepest frame's check, `self.depth + p.frames - 1 >= budget` (each shallower one passes first)
        if p.frames > 0 && self.depth + p.frames as u64 > self.budget.depth {
            fit = 0;
        }
        if fit == 0 {
            return None;
        }
        // the parameters into registers, if they have the program's shapes
        let RoundRegs { rf, ri } = regs;
        // (what an earlier program left: every register is written before it is read, but a file's
        // contents stay the same from run to run whatever the build does)
        rf.0[..p.nregs[0]].fill(0.0);
        ri.0[..p.nregs[1]].fill(0);
        let mut k = 0;
        match src.calls {
            Some(c) => {
                for (v, sh) in vals.iter().zip(p.shapes.iter()) {
                    if !load(v, sh, &p.leaves, &mut k, &mut rf.0[..], &mut ri.0[..], &mut |v| (c.unbox)(self, v)) {
                        return None;
                    }
                }
            }
            None => {
                for (s, sh) in src.params.iter().zip(p.shapes.iter()) {
                    if !load(&self.locals[bp + *s as usize], sh, &p.leaves, &mut k, &mut rf.0[..], &mut ri.0[..], &mut |_| None) {
                        return None;
                    }
                }
            }
        }
        drop(vals);
        for &(r, x) in p.kr.iter() {
            rf[r] = x;
        }
        for &(r, x) in p.ki.iter() {
            ri[r] = x;
        }
        // (written straight into the runtime's arrays instead, with `RoundNodes`)
        let mut items = if p.nodes.is_some() || p.sink.is_some() { vec![] } else { p.items.to_vec() };
        let nrec = p.spans.len();
        // Rounds that only record, or whose calls are `RoundNodes`' (session 39), run in batches,
        // their records' IDs reserved once a batch (as one round's: the IDs consecutive; issue 13,
        // session 37). A batch that
        // cannot finish — a failing integer operation, IDs not reserved, a record refused, a clock
        // check or memory probe that stops — is run again round by round from its start, so
        // everything up to the round that fails is as the round-by-round run leaves it.
        let batching = (p.rec.is_some() && nrec > 0 && items.is_empty()) || p.nodes.is_some() || p.sink.is_some();
        let mut batch = if batching { fit.min(MAX_BATCH) } else { 1 };
        let spans = p.spans.repeat(batch as usize);
        let id_spans = p.ids.repeat(batch as usize);
        // a round's nodes' edges
        let nnode: usize = p.ops.iter().map(|o| if let Op::Node(_, n, _, _) = o { *n as usize } else { 0 }).sum();
        // a round's edges
        let nedge: usize = p.ops.iter().map(|o| if let Op::Rec(_, n, _) | Op::RecPair(_, n, _) = o { *n as usize } else { 0 }).sum();
        // a round's store calls' reals and integers, and the arrays a batch writes them to
        let nsink = p.ops.iter().fold([0usize; 2], |[a, b], o| match o {
            Op::Sink(_, _, x, z, _, _) => [a + *x as usize, b + *z as usize],
            Op::SinkZ(..) => [a, b + 1],
            Op::SinkZZ(..) => [a, b + 2],
            Op::SinkXZ(..) => [a + 1, b + 1],
            _ => [a, b],
        });
        let mut sargs = RoundArgs::default();
        let mut next = vec![(0.0f64, 0i64); p.outs.len()];
        let mut saved = vec![(0.0f64, 0i64); p.leaves.len()];
        let (mut done, mut left) = (0u64, false);
        'batch: while done < fit {
            let b = batch.min(fit - done);
            // the clock check and memory probe the batch's steps and allocations cross (the
            // walker's at the step, or allocation, that crosses; here before the batch runs)
            let (s0, a0) = (self.steps + done * p.steps, self.allocs + done * p.allocs);
            let (s1, a1) = (s0 + b * p.steps, a0 + b * p.allocs);
            let stops = (s0 >> 12 != s1 >> 12 && self.check_clock().is_err()) || (a0 >> 12 != a1 >> 12 && self.check_memory().is_err());
            // (a round has records or calls, not both: `build`)
            let firsts = match p.calls {
                Some(c) if !items.is_empty() && !stops => match (c.reserve)(self, p.nseq) {
                    Some(f) => f,
                    None => break,
                },
                _ => [0; 2],
            };
            // the records' IDs, and the tape they are written to (issue 13, session 39)
            let taken = match p.rec {
                Some(rr) if nrec > 0 && !stops => (rr.take)(self, nrec * b as usize),
                _ => Some((0, 0, RoundTape::default())),
            };
            let (job, first, mut tape) = match taken {
                Some(f) if !stops => f,
                _ if b > 1 => {
                    batch = 1;
                    continue;
                }
                _ => break,
            };
            // the IDs' and nodes' first numbers, and the node arrays they are written to (no tape
            // was taken above: a round has records or calls, not both)
            let (nfirsts, mut na) = match p.nodes {
                Some(nd) => match (nd.take)(self, [p.nseq[0] * b as usize, p.nseq[1] * b as usize]) {
                    Some(t) => t,
                    None if b > 1 => {
                        batch = 1;
                        continue;
                    }
                    None => break,
                },
                None => ([0; 2], RoundNodeArrays::default()),
            };
            // or the runtime's store the calls are handed to (session 40)
            let sink = match p.sink {
                Some(take) => match take(self, [p.nseq[0] * b as usize, p.nseq[1] * b as usize], &p.items) {
                    Some(s) => Some(s),
                    // (no node arrays were taken: `sink` only without `nodes`)
                    None if b > 1 => {
                        batch = 1;
                        continue;
                    }
                    None => break,
                },
                None => None,
            };
            // the calls' numbers from the store's firsts, their arguments written by index (session 45)
            let mut snum = sink.as_ref().map_or([0; 2], |s| s.firsts());
            // (grown, never cleared: the store reads only what the rounds that ran wrote)
            if sink.is_some() {
                let n = [nsink[0] * b as usize, nsink[1] * b as usize];
                if sargs.x.len() < n[0] {
                    sargs.x.resize(n[0], 0.0);
                }
                if sargs.z.len() < n[1] {
                    sargs.z.resize(n[1], 0);
                }
            }
            let (sx, sz) = (&mut sargs.x[..], &mut sargs.z[..]);
            let (mut nsx, mut nsz) = (0usize, 0usize);
            let nl = [na.starts.len(), na.edges.len()];
            if p.nodes.is_some() {
                grow(&mut na.starts, p.nseq[1] * b as usize, 0);
                grow(&mut na.edges, nnode * b as usize, RoundEdge::default());
            }
            let edge0 = na.edge0;
            let (st, ed) = (&mut na.starts[nl[0]..], &mut na.edges[nl[1]..]);
            let (mut nn, mut nne) = (0usize, 0usize);
            let (mut nid, mut node) = (nfirsts[0], nfirsts[1]);
            // the arrays grown once for the batch's records and edges (the most its rounds write:
            // `grow`), each written by index, then cut to what was written (issue 13, session 39)
            let lens = tape.lens();
            grow(&mut tape.counts, nrec * b as usize, 0);
            match p.rec {
                Some(rr) if rr.pairs => grow(&mut tape.pairs, nedge * b as usize, (0.0, 0, 0)),
                Some(_) => {
                    grow(&mut tape.partials, nedge * b as usize, 0.0);
                    grow(&mut tape.args, nedge * b as usize, 0);
                }
                None => {}
            }
            let (cs, ps, js, es) = (&mut tape.counts[lens[0]..], &mut tape.partials[lens[1]..], &mut tape.args[lens[2]..], &mut tape.pairs[lens[3]..]);
            let (mut nc, mut ne) = (0usize, 0usize);
            if let Some(j) = p.job {
                ri[j] = job;
            }
            for (x, l) in saved.iter_mut().zip(p.leaves.iter()) {
                *x = match *l {
                    Leaf::R(r) => (rf[r], 0),
                    Leaf::I(r) | Leaf::B(r) | Leaf::H(r) => (0.0, ri[r]),
                };
            }
            let mut id = first;
            let (mut ran, mut failed) = (0u64, false);
            'round: while ran < b {
                for op in p.ops.iter() {
                    match *op {
                        Op::Add(d, a, b) => rf[d] = rf[a] + rf[b],
                        Op::Sub(d, a, b) => rf[d] = rf[a] - rf[b],
                        Op::Mul(d, a, b) => rf[d] = rf[a] * rf[b],
                        Op::Div(d, a, b) => rf[d] = rf[a] / rf[b],
                        Op::R1(f, d, a) => rf[d] = f(rf[a]),
                        Op::R2(f, d, a, b) => rf[d] = f(rf[a], rf[b]),
                        Op::RCmp(f, d, a, b) => ri[d] = f(rf[a], rf[b]) as i64,
                        Op::ToReal(f, d, a) => rf[d] = f(ri[a]),
                        Op::Z1(f, d, a) => match f(ri[a]) {
                            Some(x) => ri[d] = x,
                            None => {
                                failed = true;
                                break 'round;
                            }
                        },
                        Op::Z2(f, d, a, b) => match f(ri[a], ri[b]) {
                            Ok(x) => ri[d] = x,
                            Err(_) => {
                                failed = true;
                                break 'round;
                            }
                        },
                        Op::ZCmp(f, d, a, b) => ri[d] = f(ri[a], ri[b]) as i64,
                        Op::ZAdd(d, a, b) => match ri[a].checked_add(ri[b]) {
                            Some(x) => ri[d] = x,
                            None => {
                                failed = true;
                                break 'round;
                            }
                        },
                        Op::ZSub(d, a, b) => match ri[a].checked_sub(ri[b]) {
                            Some(x) => ri[d] = x,
                            None => {
                                failed = true;
                                break 'round;
                            }
                        },
                        Op::ZEq(d, a, b) => ri[d] = (ri[a] == ri[b]) as i64,
                        Op::Rec(d, n, edges) => {
                            for &(a, j) in &edges[..n as usize] {
                                let Ok(j) = u32::try_from(ri[j]) else {
                                    failed = true;
                                    break 'round;
                                };
                                ps[ne] = rf[a];
                                js[ne] = j;
                                ne += 1;
                            }
                            cs[nc] = n;
                            nc += 1;
                            ri[d] = id;
                            id += 1;
                        }
                        Op::RecPair(d, n, edges) => {
                            for &(a, z, j) in &edges[..n as usize] {
                                es[ne] = (rf[a], ri[z] as u32, ri[j] as u32);
                                ne += 1;
                            }
                            cs[nc] = n;
                            nc += 1;
                            ri[d] = id;
                            id += 1;
                        }
                        Op::Call(k, d, seq, x, z) => {
                            let (it, at) = (&mut items[k as usize], p.items[k as usize].at + firsts[seq as usize]);
                            it.x = x.map(|x| rf[x]);
                            it.z = z.map(|z| ri[z]);
                            it.at = at;
                            ri[d] = at;
                        }
                        Op::Id(d) => {
                            ri[d] = nid;
                            nid += 1;
                        }
                        Op::Node(d, n, x, z) => {
                            // (the edges' start fits a `u32`: `take`)
                            st[nn] = edge0 + nne as u32;
                            for e in 0..n as usize {
                                let (arg, child) = (ri[z[2 * e]], ri[z[2 * e + 1]]);
                                let (Ok(arg), true) = (u32::try_from(arg), (0..node).contains(&child)) else {
                                    failed = true;
                                    break 'round;
                                };
                                ed[nne] = RoundEdge { partial: rf[x[e]], arg, child: child as u32 };
                                nne += 1;
                            }
                            nn += 1;
                            ri[d] = node;
                            node += 1;
                        }
                        Op::Sink(seq, d, nx, nz, x, z) => {
                            for &r in &x[..nx as usize] {
                                sx[nsx] = rf[r];
                                nsx += 1;
                            }
                            for &r in &z[..nz as usize] {
                                sz[nsz] = ri[r];
                                nsz += 1;
                            }
                            let n = &mut snum[(seq & 1) as usize];
                            ri[d] = *n;
                            *n += 1;
                        }
                        Op::SinkZ(seq, d, z) => {
                            sz[nsz] = ri[z];
                            nsz += 1;
                            let n = &mut snum[(seq & 1) as usize];
                            ri[d] = *n;
                            *n += 1;
                        }
                        Op::SinkZZ(seq, d, z0, z1) => {
                            sz[nsz] = ri[z0];
                            sz[nsz + 1] = ri[z1];
                            nsz += 2;
                            let n = &mut snum[(seq & 1) as usize];
                            ri[d] = *n;
                            *n += 1;
                        }
                        Op::SinkXZ(seq, d, x, z) => {
                            sx[nsx] = rf[x];
                            nsx += 1;
                            sz[nsz] = ri[z];
                            nsz += 1;
                            let n = &mut snum[(seq & 1) as usize];
                            ri[d] = *n;
                            *n += 1;
                        }
                    }
                }
                // the new parameters read before any is written (a parallel move)
                match &p.moves {
                    Some(moves) => {
                        for &(l, o) in moves.iter() {
                            match (l, o) {
                                (Leaf::R(d), Out::R(s)) => rf[d] = rf[s],
                                (Leaf::I(d) | Leaf::B(d) | Leaf::H(d), Out::I(s)) => ri[d] = ri[s],
                                _ => {}
                            }
                        }
                    }
                    None => {
                        for (x, o) in next.iter_mut().zip(p.outs.iter()) {
                            *x = match *o {
                                Out::R(r) => (rf[r], 0),
                                Out::I(i) => (0.0, ri[i]),
                            };
                        }
                        set_leaves(&p.leaves, &next, &mut rf.0[..], &mut ri.0[..]);
                    }
                }
                ran += 1;
                if (ri[p.test] != 0) != p.on {
                    left = true;
                    break;
                }
            }
            // the batch's calls written once all its rounds have run; its tape put back, cut to
            // where it was when nothing of the batch happened
            let mut written = !failed
                && match p.calls {
                    Some(c) if !items.is_empty() => (c.write)(self, &items),
                    _ => true,
                };
            // the store's calls checked and written (or the store put back as taken)
            if let Some(s) = sink {
                written = s.put(self, &sargs, ran as usize, written);
            }
            if !written {
                (nc, ne, nn, nne) = (0, 0, 0, 0);
            }
            if let Some(nd) = p.nodes {
                na.starts.truncate(nl[0] + nn);
                na.edges.truncate(nl[1] + nne);
                let ids = if written { ran as usize * p.nseq[0] } else { 0 };
                (nd.put)(self, na, &id_spans[..ids]);
            }
            tape.truncate([lens[0] + nc, lens[1] + ne, lens[2] + ne, lens[3] + ne]);
            if let Some(rr) = p.rec.filter(|_| nrec > 0) {
                (rr.put)(self, tape, &spans[..nc]);
            }
            if !written {
                // nothing of the batch happened: its parameters as they were, and round by round again
                set_leaves(&p.leaves, &saved, &mut rf.0[..], &mut ri.0[..]);
                left = false;
                if b > 1 {
                    batch = 1;
                    continue 'batch;
                }
                break;
            }
            done += ran;
            if left {
                break;
            }
        }
        if done == 0 {
            return None;
        }
        // the parameters boxed once, from their registers
        let mut k = 0;
        let rebox = p.calls.map(|c| c.rebox);
        let vs: Vec<Value> = p.shapes.iter().map(|sh| store(sh, &p.leaves, &mut k, &rf.0[..], &ri.0[..], &mut |h| rebox.map_or(Value::Unit, |f| f(self, h)))).collect();
        for (s, v) in src.params.iter().zip(vs) {
            super::run::set_slot(&mut self.locals[bp + *s as usize], v);
        }
        self.steps += done * p.steps;
        self.real_ops += done * p.real_ops;
        self.allocs += done * p.allocs;
        // the gate moved past the clock checks the rounds crossed (made above), as `step_slow` moves it
        self.step_gate = self.budget.steps.saturating_add(1).min((self.steps | 0xFFF).saturating_add(1));
        if p.frames > 0 {
            self.max_depth = self.max_depth.max(self.depth + p.frames as u64);
        }
        Some(left)
    }
}

/// `v` longer by `n` copies of `x`, its room quadrupled when it runs out rather than doubled: a
/// long loop's tape copied a third as much (issue 13, session 39: the copies were a tenth of a
/// particle gradient's instructions).
fn grow<T: Copy>(v: &mut Vec<T>, n: usize, x: T) {
    if v.capacity() - v.len() < n {
        v.reserve((3 * v.len()).max(n));
    }
    v.resize(v.len() + n, x);
}

thread_local! {
    /// The register files compiled rounds ran in last (taken while rounds run: rounds inside
    /// rounds, which do not happen, would make their own).
    static SPARE_REGS: std::cell::Cell<Option<Box<RoundRegs>>> = const { std::cell::Cell::new(None) };
}

/// The two register files compiled rounds run in, kept from one entry to the next.
struct RoundRegs {
    rf: Regs<f64>,
    ri: Regs<i64>,
}

impl RoundRegs {
    fn new() -> Option<Box<RoundRegs>> {
        Some(Box::new(RoundRegs { rf: Regs::new(0.0)?, ri: Regs::new(0)? }))
    }
}

/// A register file: `MAX_REGS` registers, a register's index masked to that (a no-op: a program has
/// at most `MAX_REGS`), so that an op's operands are read without a bounds check (issue 13, session 39).
struct Regs<T>(Box<[T; MAX_REGS]>);

const _: () = assert!(MAX_REGS.is_power_of_two() && MAX_REGS <= u16::MAX as usize + 1);

impl<T: Copy> Regs<T> {
    fn new(zero: T) -> Option<Regs<T>> {
        Some(Regs(vec![zero; MAX_REGS].into_boxed_slice().try_into().ok()?))
    }
}
impl<T> std::ops::Index<u16> for Regs<T> {
    type Output = T;
    #[inline(always)]
    fn index(&self, r: u16) -> &T {
        &self.0[r as usize & (MAX_REGS - 1)]
    }
}
impl<T> std::ops::IndexMut<u16> for Regs<T> {
    #[inline(always)]
    fn index_mut(&mut self, r: u16) -> &mut T {
        &mut self.0[r as usize & (MAX_REGS - 1)]
    }
}

/// A leaf's register and its file (real: false, integer: true).
fn reg_of(l: Leaf) -> (bool, u16) {
    match l {
        Leaf::R(r) => (false, r),
        Leaf::I(r) | Leaf::B(r) | Leaf::H(r) => (true, r),
    }
}
fn out_of(o: Out) -> (bool, u16) {
    match o {
        Out::R(r) => (false, r),
        Out::I(r) => (true, r),
    }
}

/// The parameters' leaves take these values ((real, integer) each, as the leaf's kind reads it).
#[inline(always)]
fn set_leaves(leaves: &[Leaf], vals: &[(f64, i64)], rf: &mut [f64], ri: &mut [i64]) {
    for (l, &(x, i)) in leaves.iter().zip(vals.iter()) {
        match *l {
            Leaf::R(r) => rf[r as usize] = x,
            Leaf::I(r) | Leaf::B(r) | Leaf::H(r) => ri[r as usize] = i,
        }
    }
}

/// A parameter's value into its leaves' registers (`k`: the next leaf); `false` for another shape.
/// (`handle`: a value as the runtime's handle, `RoundCalls::unbox`.)
fn load(v: &Value, sh: &Shape, leaves: &[Leaf], k: &mut usize, rf: &mut [f64], ri: &mut [i64], handle: &mut dyn FnMut(&Value) -> Option<i64>) -> bool {
    match (v, sh) {
        (Value::Tuple(vs), Shape::T(ss)) if vs.len() == ss.len() => vs.iter().zip(ss.iter()).all(|(v, s)| load(v, s, leaves, k, rf, ri, handle)),
        (_, Shape::T(_)) => false,
        (v, _) => {
            let ok = match (v, leaves.get(*k)) {
                (Value::Real(x), Some(Leaf::R(r))) => {
                    rf[*r as usize] = *x;
                    true
                }
                (Value::Int(x), Some(Leaf::I(r))) => {
                    ri[*r as usize] = *x;
                    true
                }
                (Value::Bool(x), Some(Leaf::B(r))) => {
                    ri[*r as usize] = *x as i64;
                    true
                }
                (Value::Ext(_), Some(Leaf::H(r))) => match handle(v) {
                    Some(h) => {
                        ri[*r as usize] = h;
                        true
                    }
                    None => false,
                },
                _ => false,
            };
            *k += 1;
            ok
        }
    }
}

/// A parameter's value from its leaves' registers (`rebox`: a handle's value, `RoundCalls::rebox`).
fn store(sh: &Shape, leaves: &[Leaf], k: &mut usize, rf: &[f64], ri: &[i64], rebox: &mut dyn FnMut(i64) -> Value) -> Value {
    match sh {
        Shape::T(ss) => Value::Tuple(ss.iter().map(|s| store(s, leaves, k, rf, ri, rebox)).collect()),
        _ => {
            let v = match leaves.get(*k) {
                Some(Leaf::R(r)) => Value::Real(rf[*r as usize]),
                Some(Leaf::I(r)) => Value::Int(ri[*r as usize]),
                Some(Leaf::B(r)) => Value::Bool(ri[*r as usize] != 0),
                Some(Leaf::H(r)) => rebox(ri[*r as usize]),
                None => Value::Unit,
            };
            *k += 1;
            v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `grow` gives a full tape array four times its length of room (a long loop's tape copied a
    /// third as much as by doubling; with a plain `resize` the room is only doubled), leaves one
    /// with room in place, and appends `n` copies of `x`.
    #[test]
    fn a_full_tape_array_grows_by_four_and_one_with_room_in_place() {
        let mut v: Vec<u32> = Vec::with_capacity(100);
        v.extend(0..100);
        grow(&mut v, 10, 7);
        assert!(v.capacity() >= 400, "room {}", v.capacity());
        assert_eq!((v.len(), &v[98..102]), (110, &[98, 99, 7, 7][..]));
        let (room, at) = (v.capacity(), v.as_ptr());
        grow(&mut v, 64, 8);
        assert_eq!((v.capacity(), v.as_ptr(), v.len(), v[173]), (room, at, 174, 8));
    }

    /// A register file's cells are its registers' own: each of `MAX_REGS` registers written and
    /// read back, none aliasing another under the index's mask.
    #[test]
    fn every_register_is_a_cell_of_its_own() {
        let mut r = Regs::new(0i64).unwrap();
        for k in 0..MAX_REGS as u16 {
            r[k] = k as i64 + 1;
        }
        assert!((0..MAX_REGS as u16).all(|k| r[k] == k as i64 + 1));
    }
}
