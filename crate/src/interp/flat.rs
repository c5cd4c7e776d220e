//! Flat scalar trees: a region's arithmetic on unboxed reals and integers counted per block (issue 13,
//! item 1, "count per basic block at lowering time rather than per step at run time").
//!
//! A subtree that `fast.rs` would compile to unboxed closures all the way down (constants, slots and
//! captures read as reals or integers, `real k`, the reals' and integers' arithmetic, a comparison at
//! the top) is also compiled here to one postfix program over a small stack of 64-bit words: one
//! closure and one loop instead of a closure per node. Such a tree has no effect but its counters
//! (a step per node, a real op per real operation), and both are known at lowering. So it runs the
//! flat program only when the step gate has room for all its steps — none of them would have met the
//! budget, the 4096-step clock check or a cost model (`Machine::step_gate` is 0 under one) — and every
//! leaf holds the scalar its hint says and no checked integer operation fails; then it adds its steps
//! and real ops at once. Otherwise (a budget stop, a wrong hint, an overflow: the walker's message) it
//! has changed nothing and runs the stepwise closures, which stop and fail exactly where the walker does.

use super::fast::Hints;
use super::lower::Code;
use super::Machine;
use crate::prims::{OnInt, OnReal, Prim};
use crate::value::Value;

/// The deepest operand stack a flat program may use (a deeper tree keeps its closures).
const STACK: usize = 8;

#[derive(Clone, Copy)]
enum Op {
    Real(f64),
    Int(i64),
    SlotReal(u32),
    SlotInt(u32),
    CapReal(u32),
    CapInt(u32),
    Add,
    Sub,
    Mul,
    Div,
    R1(fn(f64) -> f64),
    R2(fn(f64, f64) -> f64),
    RCmp(fn(f64, f64) -> bool),
    Z1(fn(i64) -> Option<i64>),
    Z2(fn(i64, i64) -> Result<i64, crate::prims::IntError>),
    ZCmp(fn(i64, i64) -> bool),
    ZToR(fn(i64) -> f64),
}

/// A tree's postfix program, with the steps and real ops it counts.
pub(super) struct Flat {
    ops: Box<[Op]>,
    pub steps: u64,
    pub real_ops: u64,
}

struct Builder {
    ops: Vec<Op>,
    depth: usize,
    max: usize,
    real_ops: u64,
}

impl Builder {
    fn push(&mut self, op: Op, pops: usize) -> bool {
        self.ops.push(op);
        self.depth = self.depth + 1 - pops;
        self.max = self.max.max(self.depth);
        self.max <= STACK
    }

    /// `c` as `fast::real` compiles it, if it compiles to unboxed closures all the way down.
    fn real(&mut self, c: &Code, h: &Hints) -> bool {
        match c {
            Code::Const(Value::Real(x)) => self.push(Op::Real(*x), 0),
            Code::Local(s) | Code::Move(s) => self.push(Op::SlotReal(*s), 0),
            Code::Capture(i) => self.push(Op::CapReal(*i), 0),
            Code::Prim1(op, a, _) => match (op.info().on_int, op.info().on_real) {
                (Some(OnInt::ZToR(f)), _) if super::fast::is_int(a, h) => self.int(a, h) && self.push(Op::ZToR(f), 1),
                (_, Some(OnReal::R1(f))) => {
                    self.real_ops += 1;
                    self.real(a, h) && self.push(Op::R1(f), 1)
                }
                _ => false,
            },
            Code::Prim2(op, a, b, _) => match op.info().on_real {
                Some(OnReal::R2(f)) => {
                    self.real_ops += 1;
                    let op = match op {
                        Prim::Add => Op::Add,
                        Prim::Sub => Op::Sub,
                        Prim::Mul => Op::Mul,
                        Prim::Div => Op::Div,
                        _ => Op::R2(f),
                    };
                    self.real(a, h) && self.real(b, h) && self.push(op, 2)
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// `c` as `fast::int` compiles it, if it compiles to unboxed closures all the way down.
    fn int(&mut self, c: &Code, h: &Hints) -> bool {
        match c {
            Code::Const(Value::Int(x)) => self.push(Op::Int(*x), 0),
            Code::Local(s) | Code::Move(s) => self.push(Op::SlotInt(*s), 0),
            Code::Capture(i) => self.push(Op::CapInt(*i), 0),
            Code::Prim1(op, a, _) => match op.info().on_int {
                Some(OnInt::Z1(f)) => self.int(a, h) && self.push(Op::Z1(f), 1),
                _ => false,
            },
            Code::Prim2(op, a, b, _) => match op.info().on_int {
                Some(OnInt::Z2(f)) => self.int(a, h) && self.int(b, h) && self.push(Op::Z2(f), 2),
                _ => false,
            },
            _ => false,
        }
    }

    fn done(self) -> Flat {
        Flat { steps: self.ops.len() as u64, ops: self.ops.into(), real_ops: self.real_ops }
    }
}

fn builder() -> Builder {
    Builder { ops: Vec::new(), depth: 0, max: 0, real_ops: 0 }
}

/// Whether a tree is worth a flat program: a leaf is read in place already.
fn worth(c: &Code) -> bool {
    !matches!(c, Code::Const(_) | Code::Local(_) | Code::Move(_) | Code::Capture(_))
}

impl Flat {
    /// `c` compiled as `fast::real` would compile it, flat.
    pub(super) fn real(c: &Code, h: &Hints) -> Option<Flat> {
        let mut b = builder();
        (worth(c) && b.real(c, h)).then(|| b.done())
    }

    /// `c` compiled as `fast::int` would compile it, flat.
    pub(super) fn int(c: &Code, h: &Hints) -> Option<Flat> {
        let mut b = builder();
        (worth(c) && b.int(c, h)).then(|| b.done())
    }

    /// A comparison `a op b` of reals (`real`) or integers, as `fast::compare` runs it.
    pub(super) fn compare(a: &Code, b: &Code, op: Prim, real: bool, h: &Hints) -> Option<Flat> {
        let mut bl = builder();
        let ok = match (real, op.info().on_real, op.info().on_int) {
            (true, Some(OnReal::RCmp(f)), _) => {
                bl.real_ops += 1;
                bl.real(a, h) && bl.real(b, h) && bl.push(Op::RCmp(f), 2)
            }
            (false, _, Some(OnInt::ZCmp(f))) => bl.int(a, h) && bl.int(b, h) && bl.push(Op::ZCmp(f), 2),
            _ => false,
        };
        ok.then(|| bl.done())
    }

    /// The tree's result as a word (an `f64`'s or `i64`'s bits, a boolean as 0 or 1), its steps and
    /// real ops counted at once; `None` (nothing counted, nothing changed) when the step gate has no
    /// room for them all, a leaf does not hold its hinted scalar, or integer arithmetic fails.
    #[inline]
    pub(super) fn run(&self, m: &mut Machine<'_>) -> Option<u64> {
        if m.steps + self.steps >= m.step_gate {
            return None;
        }
        let r = self.eval(m)?;
        m.steps += self.steps;
        m.real_ops += self.real_ops;
        Some(r)
    }

    fn eval(&self, m: &Machine<'_>) -> Option<u64> {
        let (locals, env) = (&m.locals[m.bp..], &*m.env);
        let mut st = [0u64; STACK];
        let mut sp = 0usize;
        let real = |v: &Value| match v {
            Value::Real(x) => Some(x.to_bits()),
            _ => None,
        };
        let int = |v: &Value| match v {
            Value::Int(x) => Some(*x as u64),
            _ => None,
        };
        let f = f64::from_bits;
        for op in self.ops.iter() {
            let (x, y) = if sp >= 2 { (st[sp - 2], st[sp - 1]) } else { (0, 0) };
            let (r, pops) = match *op {
                Op::Real(x) => (x.to_bits(), 0),
                Op::Int(x) => (x as u64, 0),
                Op::SlotReal(s) => (real(locals.get(s as usize)?)?, 0),
                Op::SlotInt(s) => (int(locals.get(s as usize)?)?, 0),
                Op::CapReal(i) => (real(env.get(i as usize)?)?, 0),
                Op::CapInt(i) => (int(env.get(i as usize)?)?, 0),
                Op::Add => ((f(x) + f(y)).to_bits(), 2),
                Op::Sub => ((f(x) - f(y)).to_bits(), 2),
                Op::Mul => ((f(x) * f(y)).to_bits(), 2),
                Op::Div => ((f(x) / f(y)).to_bits(), 2),
                Op::R2(g) => (g(f(x), f(y)).to_bits(), 2),
                Op::RCmp(g) => (g(f(x), f(y)) as u64, 2),
                Op::Z2(g) => (g(x as i64, y as i64).ok()? as u64, 2),
                Op::ZCmp(g) => (g(x as i64, y as i64) as u64, 2),
                Op::R1(g) => (g(f(st[sp - 1])).to_bits(), 1),
                Op::Z1(g) => (g(st[sp - 1] as i64)? as u64, 1),
                Op::ZToR(g) => (g(st[sp - 1] as i64).to_bits(), 1),
            };
            sp -= pops;
            *st.get_mut(sp)? = r;
            sp += 1;
        }
        Some(st[0])
    }
}
