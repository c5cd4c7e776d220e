//! Primitive operations. R is f64 with IEEE semantics (NaN and infinities propagate, x/0 is ±inf or
//! NaN); Z is i64 with checked arithmetic: overflow and division/`mod` by zero are located runtime
//! errors. `/` on Z truncates toward zero and `mod` is the truncating remainder (Rust's `%`: the result
//! has the sign of the dividend), so `a == (a / b) * b + a mod b` always holds.
//! Which domain is used is read off the argument values. Every operation whose arguments are reals
//! counts one `real_ops` (arithmetic, comparisons and the named functions; `real : Z -> R` does not).

use super::RunError;
use crate::diag::Span;
use crate::ir::Prim;
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

fn overflow(op: Prim, a: i64, b: i64, span: Span) -> RunError {
    RunError::runtime(span, format!("integer overflow in `{a} {} {b}`", op.symbol()))
}

pub(crate) fn prim1(op: Prim, a: Value, span: Span, real_ops: &mut u64) -> Result<Value, RunError> {
    match (op, &a) {
        (Prim::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
        (Prim::ToReal, Value::Int(i)) => Ok(Value::Real(*i as f64)),
        (Prim::Neg, Value::Int(i)) => i
            .checked_neg()
            .map(Value::Int)
            .ok_or_else(|| RunError::runtime(span, format!("integer overflow in `-({i})`"))),
        (Prim::Abs, Value::Int(i)) => i
            .checked_abs()
            .map(Value::Int)
            .ok_or_else(|| RunError::runtime(span, format!("integer overflow in `abs ({i})`"))),
        (_, Value::Real(x)) => {
            let x = *x;
            let r = match op {
                Prim::Neg => -x,
                Prim::Sin => x.sin(),
                Prim::Cos => x.cos(),
                Prim::Tan => x.tan(),
                Prim::Exp => x.exp(),
                Prim::Log => x.ln(),
                Prim::Sqrt => x.sqrt(),
                Prim::Tanh => x.tanh(),
                Prim::Abs => x.abs(),
                _ => return Err(type_error(op, &[&a], span)),
            };
            *real_ops += 1;
            Ok(Value::Real(r))
        }
        _ => Err(type_error(op, &[&a], span)),
    }
}

pub(crate) fn prim2(op: Prim, a: Value, b: Value, span: Span, real_ops: &mut u64) -> Result<Value, RunError> {
    match (&a, &b) {
        (Value::Real(x), Value::Real(y)) => {
            let (x, y) = (*x, *y);
            let r = match op {
                Prim::Add => Value::Real(x + y),
                Prim::Sub => Value::Real(x - y),
                Prim::Mul => Value::Real(x * y),
                Prim::Div => Value::Real(x / y),
                Prim::Mod => Value::Real(x % y),
                Prim::Atan2 => Value::Real(x.atan2(y)),
                Prim::Lt => Value::Bool(x < y),
                Prim::Le => Value::Bool(x <= y),
                Prim::Gt => Value::Bool(x > y),
                Prim::Ge => Value::Bool(x >= y),
                Prim::Eq => Value::Bool(x == y),
                Prim::Ne => Value::Bool(x != y),
                _ => return Err(type_error(op, &[&a, &b], span)),
            };
            *real_ops += 1;
            Ok(r)
        }
        (Value::Int(x), Value::Int(y)) => {
            let (x, y) = (*x, *y);
            let arith = |r: Option<i64>| r.map(Value::Int).ok_or_else(|| overflow(op, x, y, span));
            match op {
                Prim::Add => arith(x.checked_add(y)),
                Prim::Sub => arith(x.checked_sub(y)),
                Prim::Mul => arith(x.checked_mul(y)),
                Prim::Div | Prim::Mod if y == 0 => {
                    Err(RunError::runtime(span, format!("division by zero in `{x} {} 0`", op.symbol())))
                }
                Prim::Div => arith(x.checked_div(y)),
                Prim::Mod => arith(x.checked_rem(y)),
                Prim::Lt => Ok(Value::Bool(x < y)),
                Prim::Le => Ok(Value::Bool(x <= y)),
                Prim::Gt => Ok(Value::Bool(x > y)),
                Prim::Ge => Ok(Value::Bool(x >= y)),
                Prim::Eq => Ok(Value::Bool(x == y)),
                Prim::Ne => Ok(Value::Bool(x != y)),
                _ => Err(type_error(op, &[&a, &b], span)),
            }
        }
        (Value::Bool(x), Value::Bool(y)) => match op {
            Prim::Eq => Ok(Value::Bool(x == y)),
            Prim::Ne => Ok(Value::Bool(x != y)),
            // Only reached when a caller evaluates both operands itself (the machine short-circuits).
            Prim::And => Ok(Value::Bool(*x && *y)),
            Prim::Or => Ok(Value::Bool(*x || *y)),
            _ => Err(type_error(op, &[&a, &b], span)),
        },
        (Value::Unit, Value::Unit) => match op {
            Prim::Eq => Ok(Value::Bool(true)),
            Prim::Ne => Ok(Value::Bool(false)),
            _ => Err(type_error(op, &[&a, &b], span)),
        },
        _ => Err(type_error(op, &[&a, &b], span)),
    }
}
