//! The rules for reals that several stages share. From Fig. 8 to §10.1 a backpropagator stages
//! calls of its arguments' backpropagators and sums them in the stage's monoid (`SCallRule`); from
//! §10.3 on an operation records its Contrib and a real carries only its ID (`RecordRule`).

use super::*;
use crate::build::*;
use crate::deriv::Partial;
use crate::ir::*;

/// Figs. 8–10: `D[r] = genID >>= λi. pure (r, (i, linλz. 0))` and
/// `D[op(t1..tn)] = … genID >>= λi. pure (op(x…), (i, linλz. SCall d1 (∂1 op(x)(z)) + … + SCall dn (∂n op(x)(z))))`,
/// with `0` and `+` those of the stage's monoid (`combine`); the backpropagators' bodies are `counted`.
pub struct SCallRule {
    pub real: fn(&Type) -> Type,
    pub combine: fn(Vec<Expr>, &mut Fresh) -> Expr,
}

impl RealRule for SCallRule {
    fn real_ty(&self, c: &Type) -> Type {
        (self.real)(c)
    }
    fn constant(&self, fr: &mut Fresh, r: Expr) -> Expr {
        let (i, z) = (fr.name("i"), fr.name("z"));
        let bp = linlam(pvar(&z), app(builtin("counted"), (self.combine)(vec![], fr)));
        bind(pvar(&i), builtin("genID"), pure(pair(r, pair(var(&i), bp))))
    }
    fn op(&self, fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial]) -> Expr {
        let (i, z) = (fr.name("i"), fr.name("z"));
        let parts: Vec<Expr> = partials.iter().zip(ds).map(|(p, d)| apps(builtin("SCall"), [d.clone(), scale(p, var(&z))])).collect();
        let bp = linlam(pvar(&z), app(builtin("counted"), (self.combine)(parts, fr)));
        bind(pvar(&i), builtin("genID"), pure(pair(y, pair(var(&i), bp))))
    }
}

/// `Staged c → Staged c`, the Cayley-transformed monoid of Fig. 9.
pub fn upd_ty(c: &Type) -> Type {
    Type::fun(staged_ty(c.clone()), staged_ty(c.clone()))
}

/// D³_c[R] = (R, (Z, dR ⊸ (Staged c → Staged c)))  (Fig. 9; also §8's)
pub fn real_ty_cayley(c: &Type) -> Type {
    Type::tup(vec![Type::Real, Type::tup(vec![Type::Int, Type::lin(Type::Real, upd_ty(c))])])
}

/// Fig. 9: "as D², with id for 0_Staged and ∘ for +_Staged"; shared with §8.
pub const CAYLEY_RULE: SCallRule = SCallRule { real: real_ty_cayley, combine: combine_cayley };

/// `Staged c → IO ()`, the monoid of Fig. 10.
pub fn io_ty(c: &Type) -> Type {
    Type::fun(staged_ty(c.clone()), m_ty(Type::Unit))
}

/// D⁴_c[R] = (R, (Z, dR ⊸ (Staged c → IO ())))  (Fig. 10; also §10.1's)
pub fn real_ty_io(c: &Type) -> Type {
    Type::tup(vec![Type::Real, Type::tup(vec![Type::Int, Type::lin(Type::Real, io_ty(c))])])
}

/// Fig. 10: "same as D², with λ_. return () for 0_Staged and λf g x. f x >> g x for +_Staged";
/// shared with §10.1.
pub const IO_RULE: SCallRule = SCallRule { real: real_ty_io, combine: combine_io };

/// §10.3 (and §12 with compound IDs): `D[r] = record [] >>= λi. pure (r, i)` and
/// `D[op(t1..tn)] = … record [(∂1 op(x)(1), i1), …, (∂n op(x)(1), in)] >>= λi. pure (op(x…), i)`:
/// a real is `(R, id)`, its Contrib written on the tape as its ID is generated.
pub struct RecordRule {
    pub real: fn(&Type) -> Type,
}

impl RealRule for RecordRule {
    fn real_ty(&self, c: &Type) -> Type {
        (self.real)(c)
    }
    fn constant(&self, fr: &mut Fresh, r: Expr) -> Expr {
        let i = fr.name("i");
        bind(pvar(&i), app(builtin("record"), builtin("C0")), pure(pair(r, var(&i))))
    }
    fn op(&self, fr: &mut Fresh, y: Expr, ds: &[Expr], partials: &[Partial]) -> Expr {
        let i = fr.name("i");
        let name = if ds.len() == 1 { "C1" } else { "C2" };
        let args: Vec<Expr> = partials.iter().zip(ds).flat_map(|(p, d)| [at_one(p), d.clone()]).collect();
        bind(pvar(&i), app(builtin("record"), apps(builtin(name), args)), pure(pair(y, var(&i))))
    }
}
