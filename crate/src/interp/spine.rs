//! A curried call spine through lets, as one node (issue 13, session 27).
//!
//! The monadic translations apply a curried definition an argument or two at a time through lets:
//! `let v = (let f = g a in let b = E in f b) in v c` (dualrev's `horner`: `v ← horner (k − 1);
//! v1 ← …; v v1`, then `v x`), or as one chain `let f = g a in … let f' = f b in f' c` (krawiec's),
//! each partial value read once, as the next call's head. The walker makes a partial value per
//! call, a `Let` frame per let and a trip round the loop for each; here the node runs the walker's
//! sequence in the walker's order — each let's step, the regions' links, each call's `App` and head
//! steps, its arguments and `partial_step` (the depth check as a let's right side, not a tail) —
//! keeping the arguments on `vals`, then saturates the function with all of them in one frame (or,
//! given fewer, returns one partial value). So steps, allocations, traces and budget stops are the
//! walker's, with no partial value and no frame in between.
//!
//! The node is formed at region time (`fast.rs`'s `chain`, on each let whose right side makes a
//! call) and keeps the code it replaces: when the head is not a curried function taking at least
//! all the spine's arguments (a builtin, a one-parameter closure, a partial value, a definition not
//! yet evaluated, over-application), that code runs instead, before anything is counted.

use super::fast::{FastCode, Tail};
use super::lower::{CallCode, Code, FunVal, GroupVal, Head, LPat, LamCode};
use super::run::{binds, inline_arg, Charge, Kont, Next, Res};
use super::round::RoundSrc;
use super::{Fused, Global, Machine};
use crate::value::Value;
use std::rc::Rc;

pub(crate) struct Spine {
    /// The walker's events in order.
    events: Box<[Ev]>,
    /// The first call (`g a`): its head is the function all the arguments go to.
    head: usize,
    /// All the calls' arguments.
    total: usize,
    /// The `let` this node replaces, run when the head is not such a function.
    orig: Code,
    /// Whether it has a `Bind` event (which may wait for the loop, holding the function as a value).
    binds: bool,
    /// The definition's body this spine is the recursive branch of, to compile its round from
    /// (`round.rs`; set by `attach_round`).
    round: std::cell::OnceCell<RoundSrc>,
}

#[derive(Clone)]
enum Ev {
    /// A let's step (its binding is the partial value, which the next call takes).
    Let(Charge),
    /// A region's links, before its call.
    Links(Rc<FastCode>),
    /// A call: its `App` and head steps, then its arguments (each a leaf or a region with a value).
    Call(CallCode),
    /// `let p = call in …` between the spine's calls (particle's `v1 ← step s`): the let's step and
    /// the call, run in place when it returns at once, else by the loop with a `Kont::Spine`.
    Bind(Charge, LPat, CallCode),
}

/// What follows a spine's tail call of its own definition (`Machine::round_head`).
enum Round {
    /// The body's start ran and took the branch with this spine again.
    Again,
    /// The body's start ran and took this other branch.
    Branch(*const Code),
    /// The body is not that shape: nothing ran.
    Other,
}

/// At most this many events a spine: `form` runs on every let of a chain whose right side makes a
/// call, and reads the chain after it; bounded, a chain of n lets is formed in O(n) and the
/// recursion of `seg` (a few frames an event) stays shallow (wasm's stack is small).
const MAX_EVENTS: usize = 24;
/// At most this many `Bind` events a spine (particle's round has one).
const MAX_BINDS: usize = 2;

/// `c` (a `let`) as a spine node when it is one, else `c`.
pub(crate) fn form(c: Code) -> Code {
    let Code::Let(LPat::Slot(s), rhs, rest) = &c else { return c };
    let mut ev = vec![Ev::Let(Charge::Bind(1))];
    if !producer(rhs, &mut ev) || !seg(rest, *s, &mut ev) || ev.len() > MAX_EVENTS {
        return c;
    }
    let Some(head) = ev.iter().position(|e| matches!(e, Ev::Call(_))) else { return c };
    let Ev::Call(g) = &ev[head] else { return c };
    // a local head is read when its call comes: links before it could bind its slot
    if matches!(g.head, Head::Local(_) | Head::Move(_)) && ev[..head].iter().any(|e| matches!(e, Ev::Links(_))) {
        return c;
    }
    let total = ev.iter().map(|e| if let Ev::Call(cc) = e { cc.args.len() } else { 0 }).sum();
    let binds = ev.iter().any(|e| matches!(e, Ev::Bind(..)));
    Code::Spine(Rc::new(Spine { events: ev.into(), head, total, orig: c, binds, round: std::cell::OnceCell::new() }))
}

/// A call whose arguments run in place (not a self tail call: that one jumps).
fn simple(cc: &CallCode) -> bool {
    // (a local function's call is no curried function's: it needs no spine)
    !cc.self_tail && !matches!(cc.head, Head::Fn(_)) && cc.args.iter().all(inline_arg)
}

/// The right side of the spine's first let: the first call (after a region's links), or a spine.
fn producer(c: &Code, ev: &mut Vec<Ev>) -> bool {
    match c {
        Code::Call(cc) if simple(cc) => {
            ev.push(Ev::Call((**cc).clone()));
            true
        }
        Code::Fast(f) => match f.tail() {
            Tail::Walk(Code::Call(cc)) if simple(cc) => {
                if f.has_links() {
                    ev.push(Ev::Links(f.clone()));
                }
                ev.push(Ev::Call((**cc).clone()));
                true
            }
            _ => false,
        },
        Code::Spine(s) => {
            ev.extend(s.events.iter().cloned());
            true
        }
        _ => false,
    }
}

/// The code after a let binding slot `s`: region links, then the call of `s` (the spine's end),
/// or a let whose right side is that call (the chain goes on from its slot).
fn seg(c: &Code, s: u32, ev: &mut Vec<Ev>) -> bool {
    if ev.len() > MAX_EVENTS {
        return false;
    }
    match c {
        Code::Call(cc) if matches!(cc.head, Head::Move(h) if h == s) && simple(cc) => {
            ev.push(Ev::Call((**cc).clone()));
            true
        }
        Code::Fast(f) => {
            if f.has_links() {
                ev.push(Ev::Links(f.clone()));
            }
            match f.tail() {
                Tail::Value => false,
                Tail::Walk(c) => seg(c, s, ev),
                Tail::Let(ch, p, rhs, rest) => link(ch, p, rhs, rest, s, ev),
            }
        }
        Code::Spine(sp) => seg(&sp.orig, s, ev),
        Code::Let(p, rhs, rest) => link(Charge::Bind(binds(p)), p, rhs, rest, s, ev),
        _ => false,
    }
}

/// `let p = s b in rest`: the let's step, the call, then the chain from `p`; or `let p = call in
/// rest` of another function (its value bound as the walker binds it), then the chain from `s`.
fn link(ch: Charge, p: &LPat, rhs: &Code, rest: &Code, s: u32, ev: &mut Vec<Ev>) -> bool {
    let Code::Call(cc) = rhs else { return false };
    if !simple(cc) {
        return false;
    }
    if !matches!(cc.head, Head::Move(h) if h == s) {
        // another function's call: a few at most (each `form` reads only a few links on), and none
        // reading `s` (then `s` is not the next head: its one read is this argument)
        let reads = |a: &Code| matches!(a, Code::Move(x) | Code::Local(x) if *x == s);
        if ev.iter().filter(|e| matches!(e, Ev::Bind(..))).count() >= MAX_BINDS || cc.args.iter().any(reads) {
            return false;
        }
        ev.push(Ev::Bind(ch, p.clone(), (**cc).clone()));
        return seg(rest, s, ev);
    }
    let LPat::Slot(p) = p else { return false };
    ev.push(Ev::Let(ch));
    ev.push(Ev::Call((**cc).clone()));
    seg(rest, *p, ev)
}

/// Gives the spine that is the recursive branch of a definition's compiled `body` its round's
/// source (`round.rs`): `raw`, the body before its regions were compiled.
pub(crate) fn attach_round(body: &Code, raw: &Code, pat: &LPat, more: &[LPat], fused: &[Fused], calls: Option<&'static super::RoundCalls>) {
    let cond = match body {
        Code::Fast(f) => match f.tail() {
            Tail::Walk(c @ Code::If(..)) => c,
            _ => return,
        },
        c @ Code::If(..) => c,
        _ => return,
    };
    let Code::If(_, t, e, _) = cond else { return };
    let Some(s) = branch_spine(t).or_else(|| branch_spine(e)) else { return };
    let Some(Ev::Call(CallCode { head: Head::Global(g, _), .. })) = s.events.get(s.head) else { return };
    if let Some(src) = RoundSrc::new(raw, pat, more, fused, calls, *g) {
        let _ = s.round.set(src);
    }
}

/// The spine a branch is: itself, or a region whose links come first (krawiec's `x1 ← pure (k − 1);
/// f ← horner x1; …`, issue 13, session 34).
fn branch_spine(c: &Code) -> Option<&Rc<Spine>> {
    match c {
        Code::Spine(s) => Some(s),
        Code::Fast(f) => match f.tail() {
            Tail::Walk(Code::Spine(s)) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

/// A curried function value's code, captures and group (a closure or a local recursive function
/// of more than one parameter, holding no argument yet).
fn fun_parts(f: &Value) -> Option<(&Rc<LamCode>, &Rc<[Value]>, Option<&Rc<GroupVal>>)> {
    let Value::Fun(rc) = f else { return None };
    let (lam, env, group) = match rc.downcast_ref::<FunVal>()? {
        FunVal::Clo { code, env } => (code, env, None),
        FunVal::Rec { group, idx } => (group.code.members.get(*idx as usize)?, &group.env, Some(group)),
        _ => return None,
    };
    (!lam.more.is_empty()).then_some((lam, env, group))
}

type Fun = (Rc<LamCode>, Rc<[Value]>, Option<Rc<GroupVal>>);

fn owned((lam, env, group): (&Rc<LamCode>, &Rc<[Value]>, Option<&Rc<GroupVal>>)) -> Fun {
    (lam.clone(), env.clone(), group.cloned())
}

impl Machine<'_> {
    /// Runs a spine (see the module comment).
    pub(super) fn run_spine(&mut self, s: &Spine) -> Res<Next> {
        let Ev::Call(g) = &s.events[s.head] else { return Ok(Next::Eval(&s.orig)) };
        let Some(fun) = self.spine_fun(&g.head) else { return Ok(Next::Eval(&s.orig)) };
        if fun.0.prog != self.code.prog || s.total > fun.0.more.len() + 1 {
            return Ok(Next::Eval(&s.orig));
        }
        // the function as a value only where a `Bind` may have to wait for the loop with it
        let f = if s.binds { self.spine_head(&g.head) } else { None };
        self.spine_from(s, 0, self.vals.len(), fun, f)
    }

    /// A spine's events from `from` on: `fun` is its function (`f` as a value, if made), the
    /// arguments so far on `vals` from `base`.
    #[inline(always)]
    pub(super) fn spine_from(&mut self, s: &Spine, from: usize, base: usize, fun: Fun, f: Option<Value>) -> Res<Next> {
        let (lam, env, group) = fun;
        let end = s.events.len() - 1;
        let (mut from, mut base) = (from, base);
        let global = matches!(s.events.get(s.head), Some(Ev::Call(cc)) if matches!(cc.head, Head::Global(..)));
        // a definition's spine that is its own body's recursive branch runs round after round here
        'round: loop {
            for (e, ev) in s.events.iter().enumerate().skip(from) {
                match ev {
                    Ev::Let(ch) => self.step(*ch)?,
                    Ev::Links(r) => self.region_links(r)?,
                    Ev::Bind(ch, p, cc) => {
                        // the walker's `let p = call in …` with its `Let` frame (the spine's, to resume
                        // from); a callee that returns at once (a leaf) is bound here, without the loop
                        self.step(*ch)?;
                        let fv = f.clone().unwrap_or(Value::Unit);
                        self.kont.push(Kont::Spine { s, e: e as u32, base, f: fv });
                        let top = self.kont.len();
                        match self.eval_call(cc)? {
                            Next::Ret if self.kont.len() == top => {
                                self.kont.pop();
                                let v = std::mem::replace(&mut self.acc, Value::Unit);
                                self.bind(p, v)?;
                            }
                            next => return Ok(next),
                        }
                    }
                    Ev::Call(cc) => {
                        // `eval_call`'s steps: each application's, then the head's
                        for _ in 0..cc.args.len() {
                            self.step(Charge::None)?;
                        }
                        self.step(Charge::Var)?;
                        if e == s.head {
                            match cc.head {
                                Head::Global(_, span) => self.span = span,
                                Head::Move(h) => drop(self.take(h)),
                                _ => {}
                            }
                        }
                        let n = cc.args.len();
                        for (i, a) in cc.args.iter().enumerate() {
                            let arg = self.arg_value(a)?;
                            let j = self.vals.len() - base;
                            if j == lam.more.len() {
                                // the last argument (`total` is all the parameters): one frame for all,
                                // the caller's reused in place for a definition's tail call, as
                                // `call_known` does (no captures, no group, a body that is not a leaf)
                                if group.is_none() && Rc::ptr_eq(&env, &self.no_captures) && self.tail_frame(&lam) {
                                    let next = self.reuse_frame(&lam, base, arg)?;
                                    if let (&Next::Eval(body), true) = (&next, global) {
                                        match self.round_head(s, body)? {
                                            Round::Again => {
                                                (from, base) = (0, self.vals.len());
                                                continue 'round;
                                            }
                                            Round::Branch(c) => return Ok(Next::Eval(c)),
                                            Round::Other => {}
                                        }
                                    }
                                    return Ok(next);
                                }
                                return self.saturate(&lam, env, group, base, arg, true);
                            }
                            // only the spine's last application can be a tail: the others are a let's right side
                            self.partial_step(&lam, j, &arg, e == end && i + 1 == n)?;
                            self.vals.push(arg);
                        }
                    }
                }
            }
            let part = self.new_part(&lam, &env, group.as_ref(), &[], base);
            return Ok(self.ret(part));
        }
    }

    /// A spine whose last argument has just saturated its definition in the reused frame
    /// (`reuse_frame`; its head a definition's name, so the function is the same on every round):
    /// when the body is `[links] if c then … else …` with `c` run in place and one branch this very
    /// spine (`horner k acc x = if k == 0 then pure acc else do { v ← horner (k − 1); …; v x }`,
    /// the taping stages' rounds), the body's start runs here as `eval` runs it — the region's links,
    /// the `if`'s step, the condition, the branch — and `Again` says the branch is this spine, whose
    /// events then run again with the function in hand: no trip round the loop, no head looked up
    /// and no function cloned per round (issue 13, session 31). Steps, trace and budget stops are
    /// the walker's, counted as they go. `Other`: not that shape, nothing run.
    fn round_head(&mut self, s: &Spine, body: *const Code) -> Res<Round> {
        let body = super::run::node(body);
        let (links, cond) = match body {
            Code::Fast(f) => match f.tail() {
                Tail::Walk(c @ Code::If(..)) => (Some(f), c),
                _ => return Ok(Round::Other),
            },
            c @ Code::If(..) => (None, c),
            _ => return Ok(Round::Other),
        };
        let Code::If(test, t, e, _) = cond else { return Ok(Round::Other) };
        let me = |b: &Code| branch_spine(b).is_some_and(|b| std::ptr::eq(&**b, s));
        if !inline_arg(test) || !(me(t) || me(e)) {
            return Ok(Round::Other);
        }
        if let Some(f) = links {
            self.region_links(f)?;
        }
        self.step(super::run::charge_of(cond))?;
        let v = self.arg_value(test)?;
        match self.if_branch(cond, v)? {
            Next::Eval(b) if me(super::run::node(b)) => {
                // the rounds that fit, compiled (`round.rs`); the last one may have left the loop
                if let Some(src) = s.round.get() {
                    if self.compiled_rounds(src, me(t)) == Some(true) {
                        return Ok(Round::Branch(if me(t) { &**e } else { &**t }));
                    }
                }
                // a branch that is a region's links and then the spine: the links, as `run_fast` runs them
                if let Code::Fast(f) = super::run::node(b) {
                    self.region_links(f)?;
                }
                Ok(Round::Again)
            }
            Next::Eval(b) => Ok(Round::Branch(b)),
            Next::Ret => Err(Box::new(super::RunError::runtime(crate::diag::Span::NONE, "internal: an `if` goes on to a branch"))),
        }
    }

    /// A spine's `Bind` event's call has returned `v` by the loop: bind it and go on.
    pub(super) fn spine_resume(&mut self, s: &Spine, e: usize, base: usize, f: Value, v: Value) -> Res<Next> {
        if let Some(Ev::Bind(_, p, _)) = s.events.get(e) {
            self.bind(p, v)?;
        }
        let Some(fun) = fun_parts(&f).map(owned) else { return Ok(Next::Eval(&s.orig)) };
        self.spine_from(s, e + 1, base, fun, Some(f))
    }

    /// The value a spine's head holds, read without a step: `None` for a definition not yet
    /// evaluated, and for a sibling (a member of the group, not a value; each caller reads it).
    fn head_value(&self, head: &Head) -> Option<&Value> {
        match *head {
            Head::Global(i, _) => match self.globals.get(i as usize)? {
                Global::Done(v) => Some(v),
                _ => None,
            },
            Head::Local(s) | Head::Move(s) => self.locals.get(self.bp + s as usize),
            Head::Capture(i) => self.env.get(i as usize),
            Head::Sibling(_) | Head::Fn(_) => None,
        }
    }

    /// The curried function (more than one parameter, no argument yet) a spine's head holds, read
    /// without a step; `None` for anything else.
    fn spine_fun(&self, head: &Head) -> Option<Fun> {
        if let Head::Sibling(k) = *head {
            let g = self.group.as_ref()?;
            let lam = g.code.members.get(k as usize)?;
            return (!lam.more.is_empty()).then(|| (lam.clone(), g.env.clone(), Some(g.clone())));
        }
        fun_parts(self.head_value(head)?).map(owned)
    }

    /// The function value a spine's head holds, read without a step; `None` when it is not a
    /// curried function holding no argument yet, or not yet evaluated.
    fn spine_head(&self, head: &Head) -> Option<Value> {
        if let Head::Sibling(k) = *head {
            return self.group.is_some().then(|| self.sibling(k));
        }
        let v = self.head_value(head)?;
        fun_parts(v).is_some().then(|| v.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::super::fast::Tail;
    use super::super::lower::{frame_children, lower, Code};
    use super::super::Builtins;

    /// The outermost spine nodes of each function of `src` (regions compiled at lowering), and how
    /// many calls they hold.
    fn spines(src: &str) -> Vec<usize> {
        let (p, _, _) = crate::pipeline::front_end(src, &[]).expect("type-checks");
        let low = lower(&p, &Builtins::new(), true, 0).expect("lowers");
        let mut out = vec![];
        let mut stack: Vec<Code> = low.defs.iter().map(|d| d.body.clone()).collect();
        while let Some(mut c) = stack.pop() {
            match &c {
                Code::Spine(s) => {
                    out.push(s.events.iter().filter(|e| matches!(e, super::Ev::Call(_))).count());
                    continue;
                }
                Code::Lam(l) => stack.push(l.body.clone()),
                Code::LetRec(g, _, _) => stack.extend(g.members.iter().map(|l| l.body.clone())),
                Code::Fast(f) => match f.tail() {
                    Tail::Walk(c) => stack.push(c.clone()),
                    Tail::Let(_, _, rhs, rest) => stack.extend([rhs.clone(), rest.clone()]),
                    Tail::Value => {}
                },
                _ => {}
            }
            stack.extend(frame_children(&mut c).into_iter().map(|c| c.clone()));
        }
        out
    }

    #[test]
    fn curried_calls_through_lets_are_one_node() {
        // dualrev's nested spine (three calls), krawiec's chain (three), doubling's step (two)
        let nested = "def h k acc x = if k == 0 then acc else let v = (let f = h (k - 1) in let b = acc * x + 1.0 in f b) in v x\ndef main x = h 3 0.0 x";
        assert_eq!(spines(nested), vec![3]);
        let chain = "def h k acc x = if k == 0 then acc else let k1 = k - 1 in let f = h k1 in let y = acc * x in let g = f y in g x\ndef main x = h 3 0.0 x";
        assert_eq!(spines(chain), vec![3]);
        let step = "def h k c = if k == 0 then c else let f = h (k - 1) in let c2 = c + c in f c2\ndef main x = h 3 x";
        assert_eq!(spines(step), vec![2]);
        // particle's round, another function's call bound between the calls
        let particle = "def step (p, v) = (p + 0.1 * v, v - 0.1 * p)\ndef h k s = if k == 0 then s else let f = h (k - 1) in let s1 = step s in f s1\ndef main x = h 3 (x, x)";
        assert_eq!(spines(particle), vec![2]);
        // a local head bound before the spine starts
        assert_eq!(spines("def h a b = a * b\ndef main x = let v = (let g = h in let f = g x in f 2.0) in v"), vec![2]);
        // not spines: a partial value read twice, an argument that is a call, a head bound by the links before it
        assert_eq!(spines("def h a b = a * b\ndef main x = let f = h x in f 1.0 + f 2.0"), Vec::<usize>::new());
        assert_eq!(spines("def h a b = a * b\ndef main x = let f = h x in f (h x x)"), Vec::<usize>::new());
        let bound = "def main x = let k = \\a -> \\b -> a * b in let v = (let f = (let g = k in g x) in f 2.0) in v";
        assert_eq!(spines(bound), Vec::<usize>::new());
    }
}
