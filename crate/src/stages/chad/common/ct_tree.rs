//! A cotangent in a step's state as a tree of rows (issue 11: "sparse cotangents are drawn as
//! trees with the elided zeros shown as such"). §4.1's sparse linear types make a zero one node:
//! `τ ×_L σ = 1 ⊔ (τ × σ)`, the `1` being the universal zero `inl ()`. So after the cell's own row
//! (its whole value, as before), a pair or sum has one row per part, keyed by its path
//! (`p ▸ fst ▸ linl`); a sparse zero is a leaf `0 (pruned)`: its parts were never built.

use super::runtime::shown;
use crate::interp::Shown;
use crate::value::Value;

/// Rows of parts drawn per cell at most; the rest are counted in one row.
const TREE_ROWS: usize = 24;

/// What separates a path's parts in a row's key (the page indents a row by their number).
pub const STEP: &str = " ▸ ";

fn is_zero(v: &Value) -> bool {
    matches!(v, Value::Inl(u) if matches!(**u, Value::Unit))
}

/// The parts of a cotangent node, named: a linear pair's components (a tuple, dense or under
/// `inr`), a linear sum's payload under its tag. Reals, units, zeros and runtime values (Bags,
/// maps, logs) have none.
fn parts(v: &Value) -> Vec<(String, &Value)> {
    match v {
        Value::Tuple(vs) => components(vs),
        Value::Inr(x) => match &**x {
            Value::Tuple(vs) => components(vs),
            Value::Inl(y) => vec![("linl".into(), &**y)],
            Value::Inr(y) => vec![("linr".into(), &**y)],
            _ => vec![],
        },
        _ => vec![],
    }
}

/// A pair's `fst` and `snd`, a wider tuple's 1, 2, ….
fn components(vs: &[Value]) -> Vec<(String, &Value)> {
    let name = |k: usize| match (vs.len(), k) {
        (2, 0) => "fst".to_string(),
        (2, _) => "snd".to_string(),
        _ => format!("{}", k + 1),
    };
    vs.iter().enumerate().map(|(k, x)| (name(k), x)).collect()
}

/// `name` with `v`, then (for a pair or a sum) each part under it, depth first (an explicit stack;
/// a cotangent is as deep as its type).
pub fn ct_rows(name: &str, v: &Value, out: &mut Vec<(String, Shown)>) {
    out.push((name.to_string(), shown(v)));
    let mut stack: Vec<(String, &Value)> = parts(v).into_iter().rev().map(|(k, x)| (format!("{name}{STEP}{k}"), x)).collect();
    let mut drawn = 0;
    while let Some((key, x)) = stack.pop() {
        if drawn == TREE_ROWS {
            out.push((format!("{name}{STEP}…"), Shown::text(format!("{} more parts", stack.len() + 1))));
            return;
        }
        drawn += 1;
        let text = if is_zero(x) { Shown::text("0 (pruned)") } else { shown(x) };
        out.push((key.clone(), text));
        stack.extend(parts(x).into_iter().rev().map(|(k, y)| (format!("{key}{STEP}{k}"), y)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::chad::common::runtime::show_ct;
    use std::rc::Rc;

    fn zero() -> Value {
        Value::Inl(Rc::new(Value::Unit))
    }
    fn spair(a: Value, b: Value) -> Value {
        Value::Inr(Rc::new(Value::tuple(vec![a, b])))
    }

    #[test]
    fn a_sparse_pair_shows_its_parts_and_prunes_its_zero() {
        // ⟨⟨0, ⟨⟨2, linl 3⟩⟩⟩⟩: the first component a sparse zero, never built
        let v = spair(zero(), spair(Value::Real(2.0), Value::Inr(Rc::new(Value::Inl(Rc::new(Value::Real(3.0)))))));
        let mut out = vec![];
        ct_rows("p", &v, &mut out);
        let rows: Vec<String> = out.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        assert_eq!(
            rows,
            [
                "p = ⟨⟨0, ⟨⟨2.0, linl 3.0⟩⟩⟩⟩",
                "p ▸ fst = 0 (pruned)",
                "p ▸ snd = ⟨⟨2.0, linl 3.0⟩⟩",
                "p ▸ snd ▸ fst = 2.0",
                "p ▸ snd ▸ snd = linl 3.0",
                "p ▸ snd ▸ snd ▸ linl = 3.0",
            ]
        );
        assert_eq!(show_ct(&v), "⟨⟨0, ⟨⟨2.0, linl 3.0⟩⟩⟩⟩");
    }

    #[test]
    fn reals_zeros_and_wide_tuples() {
        let mut out = vec![];
        ct_rows("x", &Value::Real(1.5), &mut out);
        ct_rows("z", &zero(), &mut out);
        assert_eq!(out.len(), 2, "a real and a whole zero are one row each");
        let wide = Value::Inr(Rc::new(Value::tuple((0..40).map(|k| Value::Real(k as f64)).collect())));
        let mut out = vec![];
        ct_rows("w", &wide, &mut out);
        assert_eq!(out.len(), 1 + TREE_ROWS + 1);
        assert_eq!(out[1].0, "w ▸ 1");
        assert_eq!(out.last().map(|(k, v)| (k.as_str(), v.to_string())), Some(("w ▸ …", "16 more parts".to_string())));
    }
}
