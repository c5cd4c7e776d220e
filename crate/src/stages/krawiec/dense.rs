//! `krawiec/dense`: reverse mode #1, Krawiec et al. §5, Figs. 5–6. Each real is paired with a dense
//! vector of type δS (S the input type of `main`) holding the derivative of that real with respect to
//! every real of the input. Like `forward`, everything but real literals and real primitives is
//! translated homomorphically; `+R` and `×R` combine the vectors with ⊕S and ⊗S, each O(|S|).

use crate::kit::delta::int_arg;
use crate::kit::delta::dual::{dual_program, dual_stated_types, Companion};
use super::common::wrapper::require_ra_to_r;
use crate::build::*;
use crate::diag::{Diagnostic, Span};
use crate::interp::{Builtin, Machine, RunError};
use crate::ir::*;
use crate::kit::polytypic::{count_reals, ra_expr, ra_pat};
use crate::stage::{Output, Source, Stage, StageInfo, WRAPPER};
use crate::value::{show_real, ExtValue, Value};
use std::any::Any;
use std::rc::Rc;

pub struct Dense;

static INFO: StageInfo = StageInfo {
    id: "krawiec/dense",
    paper: "Krawiec et al. 2022",
    section: "§5, Figs. 5–6",
    title: "Reverse mode #1: one pass with dense δS vectors",
    explanation: "Instead of running forward mode once per input (the Forward Plan), pair each real with a whole \
vector δS of derivatives, one entry per real of the input S: the type translation is Drev1_S{R} = R × δS, and the \
translation is indexed by S. Literals get zero_S; +R adds the vectors with ⊕S (addS) and ×R scales them with ⊗S \
(scaleS) before adding; everything else is translated homomorphically, exactly as in forward mode, so closures, \
recursion, sums and integers come for free. The wrapper R1{e} seeds input i with dt ⊗ onehot i and reads the \
gradient off the vector of the result, in one run. The catch: every ⊕S and ⊗S touches all a entries, so each \
floating-point operation of the program costs O(a) (counter vector_elem_ops), and the seeds alone are quadratic in a. \
zero_S must also be produced out of thin air; for S = R^a it is just a zeros (for sums its shape would depend on the \
input value, §6, which is why this stage, like the paper's Fig. 6, takes main : R^a → R).",
    complexity: "O(a·T) time for a program of T operations on a reals of input; O(a) memory per live real.",
    accepts: "the whole scalar language inside main; main itself must have type R^a → R (Fig. 6)",
};

// ---------------------------------------------------------------------------------------------
// The dense vectors δS and their builtins
// ---------------------------------------------------------------------------------------------

/// A value of δS for S = R^a: the a reals of a small change to the input, left to right.
#[derive(Debug)]
/// The entries, and the index when made by `onehot` (so that `dt ⊗ onehot i` is dt at i and exactly
/// 0 elsewhere even for dt = ∞: the other inputs' entries are structural zeros, README "Non-finite values").
pub struct DenseVec(pub Vec<f64>, pub Option<usize>);

impl ExtValue for DenseVec {
    fn type_name(&self) -> &'static str {
        "δS"
    }
    fn show(&self) -> String {
        let mut s: Vec<String> = self.0.iter().take(8).map(|r| show_real(*r)).collect();
        if self.0.len() > 8 {
            s.push(format!("… ({} entries)", self.0.len()));
        }
        format!("[{}]", s.join(", "))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The type δS (a synonym for S in the paper; a flat vector of S's reals here).
pub fn ds_type() -> Type {
    Type::con("δS", vec![])
}

fn vec_arg(v: &Value, span: Span, what: &str) -> Result<Rc<dyn ExtValue>, RunError> {
    match v {
        Value::Ext(e) if e.as_any().is::<DenseVec>() => Ok(e.clone()),
        other => Err(RunError::runtime(span, format!("{what} expects a δS vector, got {other}"))),
    }
}

fn dense(e: &Rc<dyn ExtValue>) -> &[f64] {
    &e.as_any().downcast_ref::<DenseVec>().expect("checked").0
}

/// Pays for `n` element operations: the steps budget (so an exploding run stops cleanly), the
/// `vector_elem_ops` counter, and `n` real operations.
fn pay(m: &mut Machine, n: usize, arithmetic: bool) -> Result<(), RunError> {
    m.count("vector_elem_ops", n as u64);
    if arithmetic {
        for _ in 0..n {
            m.real_op();
        }
    }
    m.tick(n as u64)?;
    m.alloc(1)
}

fn b_zeros(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let n = int_arg(&args[0], span, "zeros")?.max(0) as usize;
    pay(m, n, false)?;
    Ok(Value::Ext(Rc::new(DenseVec(vec![0.0; n], None))))
}

fn b_onehot(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let n = int_arg(&args[0], span, "onehot")?.max(0) as usize;
    let i = int_arg(&args[1], span, "onehot")?;
    if i < 1 || i as usize > n {
        return Err(RunError::runtime(span, format!("onehot {n} {i}: the index is outside 1..{n}")));
    }
    pay(m, n, false)?;
    let mut v = vec![0.0; n];
    v[i as usize - 1] = 1.0;
    Ok(Value::Ext(Rc::new(DenseVec(v, Some(i as usize - 1)))))
}

fn b_add(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let (a, b) = (vec_arg(&args[0], span, "addS (⊕S)")?, vec_arg(&args[1], span, "addS (⊕S)")?);
    let (a, b) = (dense(&a), dense(&b));
    if a.len() != b.len() {
        return Err(RunError::runtime(span, format!("addS (⊕S): vectors of lengths {} and {} differ in shape", a.len(), b.len())));
    }
    pay(m, a.len(), true)?;
    Ok(Value::Ext(Rc::new(DenseVec(a.iter().zip(b).map(|(x, y)| x + y).collect(), None))))
}

fn b_scale(m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let k = args[0].as_real().ok_or_else(|| RunError::runtime(span, "scaleS (⊗S) expects a real factor"))?;
    let v = vec_arg(&args[1], span, "scaleS (⊗S)")?;
    let onehot = v.as_any().downcast_ref::<DenseVec>().and_then(|d| d.1);
    let v = dense(&v);
    pay(m, v.len(), true)?;
    let scaled = match onehot {
        Some(i) => (0..v.len()).map(|j| if j == i { k } else { 0.0 }).collect(),
        None => v.iter().map(|x| k * x).collect(),
    };
    Ok(Value::Ext(Rc::new(DenseVec(scaled, None))))
}

fn b_component(_m: &mut Machine, args: &mut Vec<Value>, span: Span) -> Result<Value, RunError> {
    let v = vec_arg(&args[0], span, "component")?;
    let v = dense(&v);
    let i = int_arg(&args[1], span, "component")?;
    if i < 1 || i as usize > v.len() {
        return Err(RunError::runtime(span, format!("component {i}: the index is outside 1..{}", v.len())));
    }
    Ok(Value::Real(v[i as usize - 1]))
}

struct DenseCompanion;

impl Companion for DenseCompanion {
    fn ty(&self) -> Type {
        ds_type()
    }
    fn zero(&self) -> Expr {
        global("zero_S")
    }
    fn add(&self, a: Expr, b: Expr) -> Expr {
        apps(builtin("addS"), [a, b])
    }
    fn scale(&self, c: Expr, d: Expr) -> Expr {
        apps(builtin("scaleS"), [c, d])
    }
    fn names(&self) -> &'static [(&'static str, &'static str)] {
        &[("x", "dx"), ("y", "dy")]
    }
    fn skips_constants(&self) -> bool {
        true
    }
}

impl Stage for Dense {
    fn info(&self) -> &'static StageInfo {
        &INFO
    }

    fn builtins(&self) -> Vec<Builtin> {
        let (z, ds, r) = (Type::Int, ds_type(), Type::Real);
        let mono = |t: Type| Scheme::mono(t);
        vec![
            Builtin { name: "zeros", scheme: mono(Type::fun(z.clone(), ds.clone())), arity: 1, lazy_last: false, run: b_zeros },
            Builtin {
                name: "onehot",
                scheme: mono(Type::fun(z.clone(), Type::fun(z.clone(), ds.clone()))),
                arity: 2,
                lazy_last: false,
                run: b_onehot,
            },
            Builtin {
                name: "addS",
                scheme: mono(Type::fun(ds.clone(), Type::fun(ds.clone(), ds.clone()))),
                arity: 2,
                lazy_last: false,
                run: b_add,
            },
            Builtin {
                name: "scaleS",
                scheme: mono(Type::fun(r.clone(), Type::fun(ds.clone(), ds.clone()))),
                arity: 2,
                lazy_last: false,
                run: b_scale,
            },
            Builtin { name: "component", scheme: mono(Type::fun(ds, Type::fun(z, r))), arity: 2, lazy_last: false, run: b_component },
        ]
    }

    fn accepts(&self, src: &Source) -> Result<(), Diagnostic> {
        require_ra_to_r(src, "krawiec/dense", "Fig. 6 (R1{e})")
    }

    fn transform(&self, src: &Source) -> Result<Output, Diagnostic> {
        let mut fr = Fresh::new(src.program);
        let mut out = dual_program(src, &mut fr, &DenseCompanion);
        let s = src.input_type;
        let a = count_reals(s) as i64;
        // zero_S and onehot_S for S = R^a (Fig. 5's zero_S, Fig. 6's onehot_{R^a}); indices are 1-based.
        // §6: zero_S must be produced "out of thin air"; for S = S1 + S2 its shape (inl or inr) would
        // depend on the input value, not only on S. Fig. 6 is given for S = R^a only, and so is this
        // stage (accepts), where zero_S is simply a zeros: the shape problem cannot arise. Sums in the
        // input are handled by krawiec/general, whose Delta needs no zero of S's shape at all.
        out.defs.push(def("zero_S", app(builtin("zeros"), int(a))));
        out.defs.push(def("onehot_S", app(builtin("onehot"), int(a))));
        // R1{e} = λ((..., s_i, ...), dt). snd (Drev1{e} (..., (s_i, dt ⊗ onehot i), ...)),
        // extended to return the primal and to read the vector back into S's shape.
        let names: Vec<Name> = (1..=a).map(|_| fr.name("s")).collect();
        let (dt, t, ds) = (fr.name("dt"), fr.name("t"), fr.name("ds"));
        let s0 = ra_expr(s, &mut 0, &mut |i| {
            pair(var(&names[i as usize - 1]), apps(builtin("scaleS"), [var(&dt), app(global("onehot_S"), int(i))]))
        });
        let grad_s = ra_expr(s, &mut 0, &mut |i| apps(builtin("component"), [var(&ds), int(i)]));
        let body = let_(ppair(pvar(&t), pvar(&ds)), app(global("main"), s0), pair(var(&t), grad_s));
        let param = ppair(ra_pat(s, &mut names.iter().cloned()), pvar(&dt));
        out.defs.push(def(WRAPPER, lam(param, body)));
        out.next_id = fr.next_id;
        Ok(Output::from(out))
    }

    fn stated_types(&self, src: &Source) -> Vec<(String, Type)> {
        dual_stated_types(src, &DenseCompanion)
    }
}
