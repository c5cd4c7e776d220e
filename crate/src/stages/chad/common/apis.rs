//! The two environment-vector APIs the CHAD rules are written over (`chad.rs`): Fig. 2's `EV Γ`
//! (basic, sparse, naive higher-order) and Fig. 7's local accumulation monad `EVM Γ` (monadic,
//! mutable, closure-converted).

use super::chad::EnvApi;
use super::ops::{self, CtxS, Entry};
use crate::build::*;
use crate::ir::*;

/// Fig. 2 over Fig. 4's `EV Γ`: `0`, `+`, `one_x`, `split`.
pub struct Fig2;

impl EnvApi for Fig2 {
    fn nothing(&self, g: &CtxS) -> Expr {
        builtin(ops::zero_env(g))
    }
    fn both(&self, a: Expr, b: Expr) -> Expr {
        apps(builtin(ops::PLUS), [a, b])
    }
    fn one(&self, g: &CtxS, pos: usize, d: Expr) -> Expr {
        app(builtin(ops::one_hot(g, pos)), d)
    }
    fn scoped(&self, g: &CtxS, x: &Entry, call: Expr, k: Expr, fr: &mut Fresh) -> Expr {
        let (d1, d2) = (fr.name("d1"), fr.name("d2"));
        let_(ppair(pvar(&d1), pvar(&d2)), app(builtin(ops::split(g, x)), call), self.both(var(&d1), app(k, var(&d2))))
    }
    fn finish(&self, g: &CtxS, call: Expr) -> Expr {
        app(builtin(ops::env_tuple(g)), call)
    }
}

/// Fig. 7: `return ⟨⟩`, `>>`, `one`, `scope`, `run`.
pub struct Fig7;

impl EnvApi for Fig7 {
    fn nothing(&self, _: &CtxS) -> Expr {
        pure(unit())
    }
    fn both(&self, a: Expr, b: Expr) -> Expr {
        bind(pwild(), a, b)
    }
    fn one(&self, g: &CtxS, pos: usize, d: Expr) -> Expr {
        app(builtin(ops::one_m(g, pos)), d)
    }
    /// `do ⟨⟨⟩, dx⟩ ← scope (y' d); k dx`, with `scope m` written out as Table 2 defines it
    /// (`push0; m; pop`), so that the body's backpropagator runs in the interpreter's own loop and
    /// nested scopes never nest native calls: `do push0_x; y' d; dx ← pop_x; k dx`.
    fn scoped(&self, _: &CtxS, xe: &Entry, call: Expr, k: Expr, fr: &mut Fresh) -> Expr {
        let (x, ct) = (&xe.0, &xe.1);
        let dx = fr.name(&format!("d{}", x.text));
        let rest = bind(pvar(&dx), builtin(ops::pop(x, ct)), app(k, var(&dx)));
        bind(pwild(), builtin(ops::push0(x, ct)), bind(pwild(), call, rest))
    }
    fn finish(&self, g: &CtxS, call: Expr) -> Expr {
        snd(app(builtin(ops::run(g)), call))
    }
}

