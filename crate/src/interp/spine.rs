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
use super::run::{binds, inline_arg, Charge, Next, Res};
use super::{Global, Machine};
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
}

#[derive(Clone)]
enum Ev {
    /// A let's step (its binding is the partial value, which the next call takes).
    Let(Charge),
    /// A region's links, before its call.
    Links(Rc<FastCode>),
    /// A call: its `App` and head steps, then its arguments (each a leaf or a region with a value).
    Call(CallCode),
}

/// `c` (a `let`) as a spine node when it is one, else `c`.
pub(crate) fn form(c: Code) -> Code {
    let Code::Let(LPat::Slot(s), rhs, rest) = &c else { return c };
    let mut ev = vec![Ev::Let(Charge::Bind(1))];
    if !producer(rhs, &mut ev) || !seg(rest, *s, &mut ev) {
        return c;
    }
    let Some(head) = ev.iter().position(|e| matches!(e, Ev::Call(_))) else { return c };
    let Ev::Call(g) = &ev[head] else { return c };
    // a local head is read when its call comes: links before it could bind its slot
    if matches!(g.head, Head::Local(_) | Head::Move(_)) && ev[..head].iter().any(|e| matches!(e, Ev::Links(_))) {
        return c;
    }
    let total = ev.iter().map(|e| if let Ev::Call(cc) = e { cc.args.len() } else { 0 }).sum();
    Code::Spine(Rc::new(Spine { events: ev.into(), head, total, orig: c }))
}

/// A call whose arguments run in place (not a self tail call: that one jumps).
fn simple(cc: &CallCode) -> bool {
    !cc.self_tail && cc.args.iter().all(inline_arg)
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

/// `let p = s b in rest`: the let's step, the call, then the chain from `p`.
fn link(ch: Charge, p: &LPat, rhs: &Code, rest: &Code, s: u32, ev: &mut Vec<Ev>) -> bool {
    let (LPat::Slot(p), Code::Call(cc)) = (p, rhs) else { return false };
    if !matches!(cc.head, Head::Move(h) if h == s) || !simple(cc) {
        return false;
    }
    ev.push(Ev::Let(ch));
    ev.push(Ev::Call((**cc).clone()));
    seg(rest, *p, ev)
}

type Fun = (Rc<LamCode>, Rc<[Value]>, Option<Rc<GroupVal>>);

impl Machine<'_> {
    /// Runs a spine (see the module comment).
    pub(super) fn run_spine(&mut self, s: &Spine) -> Res<Next> {
        let Ev::Call(g) = &s.events[s.head] else { return Ok(Next::Eval(&s.orig)) };
        let Some((lam, env, group)) = self.spine_fun(&g.head) else { return Ok(Next::Eval(&s.orig)) };
        if lam.prog != self.code.prog || s.total > lam.more.len() + 1 {
            return Ok(Next::Eval(&s.orig));
        }
        let base = self.vals.len();
        let mut j = 0;
        let end = s.events.len() - 1;
        for (e, ev) in s.events.iter().enumerate() {
            match ev {
                Ev::Let(ch) => self.step(*ch)?,
                Ev::Links(f) => self.region_links(f)?,
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
                        if j == lam.more.len() {
                            // the last argument (`total` is all the parameters): one frame for all
                            return self.saturate(&lam, env, group, base, arg, true);
                        }
                        // only the spine's last application can be a tail: the others are a let's right side
                        self.partial_step(&lam, j, &arg, e == end && i + 1 == n)?;
                        self.vals.push(arg);
                        j += 1;
                    }
                }
            }
        }
        let part = self.new_part(&lam, &env, group.as_ref(), &[], base);
        Ok(self.ret(part))
    }

    /// The curried function (more than one parameter, no argument yet) a spine's head holds, read
    /// without a step; `None` for anything else.
    fn spine_fun(&self, head: &Head) -> Option<Fun> {
        let v = match *head {
            Head::Global(i, _) => match self.globals.get(i as usize)? {
                Global::Done(v) => v,
                _ => return None,
            },
            Head::Local(s) | Head::Move(s) => self.locals.get(self.bp + s as usize)?,
            Head::Capture(i) => self.env.get(i as usize)?,
            Head::Sibling(k) => {
                let g = self.group.as_ref()?;
                let lam = g.code.members.get(k as usize)?;
                return (!lam.more.is_empty()).then(|| (lam.clone(), g.env.clone(), Some(g.clone())));
            }
        };
        let Value::Fun(rc) = v else { return None };
        match rc.downcast_ref::<FunVal>()? {
            FunVal::Clo { code, env } if !code.more.is_empty() => Some((code.clone(), env.clone(), None)),
            FunVal::Rec { group, idx } => {
                let lam = group.code.members.get(*idx as usize)?;
                (!lam.more.is_empty()).then(|| (lam.clone(), group.env.clone(), Some(group.clone())))
            }
            _ => None,
        }
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
        // a local head bound before the spine starts
        assert_eq!(spines("def h a b = a * b\ndef main x = let v = (let g = h in let f = g x in f 2.0) in v"), vec![2]);
        // not spines: a partial value read twice, an argument that is a call, a head bound by the links before it
        assert_eq!(spines("def h a b = a * b\ndef main x = let f = h x in f 1.0 + f 2.0"), Vec::<usize>::new());
        assert_eq!(spines("def h a b = a * b\ndef main x = let f = h x in f (h x x)"), Vec::<usize>::new());
        let bound = "def main x = let k = \\a -> \\b -> a * b in let v = (let f = (let g = k in g x) in f 2.0) in v";
        assert_eq!(spines(bound), Vec::<usize>::new());
    }
}
