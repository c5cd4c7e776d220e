//! Primitive operations. R is f64 with IEEE semantics (NaN and infinities propagate, x/0 is ±inf or
//! NaN); Z is i64 with checked arithmetic: overflow and division/`mod` by zero are located runtime
//! errors. `/` on Z truncates toward zero and `mod` is the truncating remainder (Rust's `%`: the result
//! has the sign of the dividend), so `a == (a / b) * b + a mod b` always holds.
//! Which domain is used is read off the argument values; what a primitive does on each is its row in
//! the table of primitives (prims.rs). Every operation whose arguments are reals
//! counts one `real_ops` (arithmetic, comparisons and the named functions; `real : Z -> R` does not).

use super::RunError;
use crate::diag::Span;
use crate::ir::Prim;
use crate::prims::{IntError, OnBool, OnInt, OnReal, Syntax};
use crate::value::Value;

fn show(v: &Value) -> String {
    match v {
        Value::Real(_) => format!("{v} : R"),
        Value::Int(_) => format!("{v} : Z"),
        Value::Bool(_) => format!("{v} : Bool"),
        v => v.to_string(),
    }
}

fn type_error(op: Prim, args: &[&Value], span: Span) -> RunError {
    let shown: Vec<String> = args.iter().map(|v| show(v)).collect();
    RunError::runtime(span, format!("primitive `{}` cannot be applied to {}", op.symbol(), shown.join(" and ")))
}

fn int_error(op: Prim, e: IntError, args: &[i64], span: Span) -> RunError {
    let shown = match (op.info().syntax, args) {
        (Syntax::Prefix(_), [a]) => format!("{}({a})", op.symbol()),
        (Syntax::Infix(..), [a, b]) => format!("{a} {} {b}", op.symbol()),
        (_, args) => {
            let args: Vec<String> = args.iter().map(|a| format!("({a})")).collect();
            format!("{} {}", op.symbol(), args.join(" "))
        }
    };
    let what = match e {
        IntError::Overflow => "integer overflow",
        IntError::DivisionByZero => "division by zero",
    };
    RunError::runtime(span, format!("{what} in `{shown}`"))
}

/// `op` on one value, by the implementation in its row (prims.rs).
pub(crate) fn prim1(op: Prim, a: Value, span: Span, real_ops: &mut u64) -> Result<Value, RunError> {
    let row = op.info();
    match (&a, row.on_real, row.on_int, row.on_bool) {
        (Value::Real(x), Some(OnReal::R1(f)), _, _) => {
            *real_ops += 1;
            Ok(Value::Real(f(*x)))
        }
        (Value::Real(x), Some(OnReal::RToZ(f)), _, _) => {
            *real_ops += 1;
            f(*x).map(Value::Int).ok_or_else(|| RunError::runtime(span, format!("no integer is `{} ({})`: {}", op.symbol(), Value::Real(*x), if x.is_finite() { "beyond the integers' range" } else { "not a finite real" })))
        }
        (Value::Int(i), _, Some(OnInt::Z1(f)), _) => f(*i).map(Value::Int).ok_or_else(|| int_error(op, IntError::Overflow, &[*i], span)),
        (Value::Int(i), _, Some(OnInt::ZToR(f)), _) => Ok(Value::Real(f(*i))),
        (Value::Bool(b), _, _, Some(OnBool::B1(f))) => Ok(Value::Bool(f(*b))),
        _ => Err(type_error(op, &[&a], span)),
    }
}

/// `op` on two values, by the implementation in its row (prims.rs).
pub(crate) fn prim2(op: Prim, a: Value, b: Value, span: Span, real_ops: &mut u64) -> Result<Value, RunError> {
    let row = op.info();
    match (&a, &b) {
        (Value::Real(x), Value::Real(y)) => {
            let r = match row.on_real {
                Some(OnReal::R2(f)) => Value::Real(f(*x, *y)),
                Some(OnReal::RCmp(f)) => Value::Bool(f(*x, *y)),
                _ => return Err(type_error(op, &[&a, &b], span)),
            };
            *real_ops += 1;
            Ok(r)
        }
        (Value::Int(x), Value::Int(y)) => match row.on_int {
            Some(OnInt::Z2(f)) => f(*x, *y).map(Value::Int).map_err(|e| int_error(op, e, &[*x, *y], span)),
            Some(OnInt::ZCmp(f)) => Ok(Value::Bool(f(*x, *y))),
            _ => Err(type_error(op, &[&a, &b], span)),
        },
        (Value::Bool(x), Value::Bool(y)) => match row.on_bool {
            Some(OnBool::B2(f)) => Ok(Value::Bool(f(*x, *y))),
            _ => Err(type_error(op, &[&a, &b], span)),
        },
        _ => Err(type_error(op, &[&a, &b], span)),
    }
}
