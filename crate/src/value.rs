//! Runtime values of the one interpreter, for source programs and every stage's output alike.

use std::any::Any;
use std::fmt;
use std::rc::Rc;

/// A value a stage's runtime defines (a Delta term, a DeltaMap, a Staged object, an array, ...).
/// The stage's builtins downcast it with `as_any`.
pub trait ExtValue: fmt::Debug {
    /// The type name shown in messages (`Delta`).
    fn type_name(&self) -> &'static str;
    /// A short rendering for values, traces and hover text.
    fn show(&self) -> String;
    fn as_any(&self) -> &dyn Any;
}

/// An empty array that keeps the shape of its (absent) elements. The array paper's arrays have a
/// static rank and a runtime shape (§3.2): a 0×k array is not a 0×0 one, and a transpose or a sum
/// over the outer dimension brings the k back to the front. Nested arrays alone lose every size
/// after an empty dimension, so an operation that knows the element's shape (`replicate 0 x`, the
/// array core's gather, scatter and transpose) keeps it here: `elem` stands for the element (its
/// values are never read, only its shape). It is `[]` everywhere else: its length is 0, it prints
/// as `[]` and compares equal to `[]`; a runtime reads arrays through `Value::elems`, not by matching
/// `Value::Array`, so that it reads this one too.
#[derive(Debug)]
pub struct EmptyArray {
    pub elem: Value,
}

impl ExtValue for EmptyArray {
    fn type_name(&self) -> &'static str {
        "Array"
    }
    fn show(&self) -> String {
        "[]".into()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `repr(u64)`: the tag is a whole word, so every payload starts at offset 8. With the default
/// layout a `Bool`'s payload sat at offset 1 and moving a `Value` copied bytes 1..8 as two
/// overlapping 4-byte moves, which the next 8-byte load could not forward from (a store-forwarding
/// stall on every value moved through a `Result`: a tenth of a run's time, issue 13). Same size
/// (24 bytes) and the same niche for `Result<Value, _>`.
#[derive(Clone, Debug)]
#[repr(u64)]
pub enum Value {
    Real(f64),
    Int(i64),
    Bool(bool),
    Unit,
    Tuple(Rc<[Value]>),
    /// An array (any length, elements of one type).
    Array(Rc<[Value]>),
    Inl(Rc<Value>),
    Inr(Rc<Value>),
    /// A function value; its representation belongs to the interpreter.
    Fun(Rc<dyn Any>),
    Ext(Rc<dyn ExtValue>),
}

impl Value {
    pub fn tuple(vs: Vec<Value>) -> Value {
        match vs.len() {
            0 => Value::Unit,
            _ => Value::Tuple(vs.into()),
        }
    }
    pub fn pair(a: Value, b: Value) -> Value {
        // one allocation (`Rc::from(vec![…])` made a Vec and then copied it into the Rc)
        Value::Tuple(Rc::new([a, b]))
    }
    #[inline]
    pub fn as_real(&self) -> Option<f64> {
        match self {
            Value::Real(r) => Some(*r),
            _ => None,
        }
    }
    #[inline]
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
    /// An empty array whose elements are shaped like `elem`: a shaped `EmptyArray` when `elem` has
    /// a shape to keep (an array or a tuple, e.g. forward mode's dual number), else the plain `[]`.
    pub fn empty_of(elem: Value) -> Value {
        match &elem {
            // an empty array too: `replicate 0 (replicate 0 x)` is 0×0×…, not a plain `[]` whose
            // rows would be read as scalars (a wide property run's case, a gather of its rows)
            Value::Array(_) => Value::Ext(Rc::new(EmptyArray { elem })),
            Value::Tuple(_) => Value::Ext(Rc::new(EmptyArray { elem })),
            Value::Ext(e) if e.as_any().is::<EmptyArray>() => Value::Ext(Rc::new(EmptyArray { elem })),
            _ => Value::Array(Rc::from(Vec::new())),
        }
    }
    /// An empty array whose elements are shaped like `elem`, whatever `elem` is (the array core's
    /// operations, which know every element's shape: a pair of a dual number included).
    pub fn empty_keeping(elem: Value) -> Value {
        Value::Ext(Rc::new(EmptyArray { elem }))
    }
    /// The element shape an `EmptyArray` keeps.
    pub fn empty_elem(&self) -> Option<&Value> {
        self.ext::<EmptyArray>().map(|e| &e.elem)
    }
    /// The elements of an array (none for an `EmptyArray`).
    pub fn elems(&self) -> Option<&[Value]> {
        match self {
            Value::Array(xs) => Some(xs),
            _ if self.empty_elem().is_some() => Some(&[]),
            _ => None,
        }
    }
    pub fn ext<T: 'static>(&self) -> Option<&T> {
        match self {
            Value::Ext(e) => e.as_any().downcast_ref::<T>(),
            _ => None,
        }
    }

    /// The real leaves, left to right (the coordinates a gradient is indexed by).
    pub fn real_leaves(&self) -> Vec<f64> {
        let mut out = vec![];
        self.for_each_leaf(&mut |v| {
            if let Value::Real(r) = v {
                out.push(*r)
            }
        });
        out
    }

    /// The path of each real leaf, left to right (as `real_leaves`): a tuple component is `.k`, an
    /// array element `[i]`, a sum's side `.inl`/`.inr`; a real on its own has the empty path.
    /// E.g. `([1.0, 2.0], 3.0)` gives `.0[0]`, `.0[1]`, `.1`. The page labels gradient rows with them.
    pub fn leaf_paths(&self) -> Vec<String> {
        let mut out = vec![];
        // Explicit stack of (value, its path), as `for_each_leaf`: values can be deep.
        let mut stack = vec![(self, String::new())];
        while let Some((v, path)) = stack.pop() {
            match v {
                Value::Real(_) => out.push(path),
                Value::Tuple(vs) => stack.extend(vs.iter().enumerate().rev().map(|(i, v)| (v, format!("{path}.{i}")))),
                Value::Array(vs) => stack.extend(vs.iter().enumerate().rev().map(|(i, v)| (v, format!("{path}[{i}]")))),
                Value::Inl(v) => stack.push((v, format!("{path}.inl"))),
                Value::Inr(v) => stack.push((v, format!("{path}.inr"))),
                _ => {}
            }
        }
        out
    }

    /// Visits the first-order leaves left to right (reals, integers, booleans, units, functions, ext).
    pub fn for_each_leaf(&self, f: &mut dyn FnMut(&Value)) {
        // Explicit stack: values can be deep (long sums), and wasm's native stack is small. It holds
        // the unfinished item lists of the enclosing values only, not each value: a flat tuple or
        // array, or the last item's nesting (a long sum, a right-nested tuple), needs no allocation
        // (issue 13: the dense cotangents' `size`, per operation in dualrev's naive and staged
        // runtimes, allocated and grew a vector each call).
        let mut outer: Vec<std::slice::Iter<'_, Value>> = Vec::new();
        let mut cur = std::slice::from_ref(self).iter();
        loop {
            let inner = match cur.next() {
                Some(Value::Tuple(vs) | Value::Array(vs)) => vs.iter(),
                Some(Value::Inl(v) | Value::Inr(v)) => std::slice::from_ref(&**v).iter(),
                Some(v) => {
                    f(v);
                    continue;
                }
                None => match outer.pop() {
                    Some(rest) => {
                        cur = rest;
                        continue;
                    }
                    None => return,
                },
            };
            let rest = std::mem::replace(&mut cur, inner);
            if rest.len() > 0 {
                outer.push(rest);
            }
        }
    }

    /// Rebuilds this first-order value with its real leaves replaced, left to right, from `reals`.
    /// Integer and boolean leaves and sum tags are kept: this is how gradients take the input's shape.
    pub fn with_reals(&self, reals: &mut dyn Iterator<Item = f64>) -> Value {
        match self {
            Value::Real(_) => Value::Real(reals.next().unwrap_or(0.0)),
            Value::Tuple(vs) => Value::Tuple(vs.iter().map(|v| v.with_reals(reals)).collect()),
            Value::Array(vs) => Value::Array(vs.iter().map(|v| v.with_reals(reals)).collect()),
            Value::Inl(v) => Value::Inl(Rc::new(v.with_reals(reals))),
            Value::Inr(v) => Value::Inr(Rc::new(v.with_reals(reals))),
            v => v.clone(),
        }
    }

    /// Structural equality on first-order values; reals compare bitwise-equal or both NaN.
    pub fn same(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Real(a), Value::Real(b)) => a == b || (a.is_nan() && b.is_nan()),
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Unit, Value::Unit) => true,
            (Value::Tuple(a), Value::Tuple(b)) | (Value::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.same(y))
            }
            (Value::Inl(a), Value::Inl(b)) | (Value::Inr(a), Value::Inr(b)) => a.same(b),
            // an EmptyArray is `[]`
            (a, b) if a.empty_elem().is_some() || b.empty_elem().is_some() => a.elems().is_some_and(|x| x.is_empty()) && b.elems().is_some_and(|y| y.is_empty()),
            _ => false,
        }
    }
}

/// The value under an `Rc`, moved out where nothing else holds it, else a copy.
pub fn unshared(v: Rc<Value>) -> Value {
    Rc::try_unwrap(v).unwrap_or_else(|v| (*v).clone())
}

/// Item `k` of a tuple's or array's items, moved out where nothing else holds them (a `Unit` left
/// in its place), else a copy; `Unit` past the end. Whoever holds the items alone can take them
/// apart this way item by item without copying them (chad's `+`, `map`'s elements: issue 13).
pub fn take_item(xs: &mut Rc<[Value]>, k: usize) -> Value {
    match Rc::get_mut(xs) {
        Some(vs) => vs.get_mut(k).map(|v| std::mem::replace(v, Value::Unit)),
        None => xs.get(k).cloned(),
    }
    .unwrap_or(Value::Unit)
}

/// Reals print so that they read back as reals: always with a `.` or an exponent; NaN and infinities
/// print as `nan`, `inf` and `-inf`.
pub fn show_real(r: f64) -> String {
    if r.is_nan() {
        "nan".into()
    } else if r.is_infinite() {
        if r > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        let s = format!("{r:?}");
        if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
            s
        } else {
            format!("{s}.0")
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Real(r) => write!(f, "{}", show_real(*r)),
            Value::Int(i) => write!(f, "{i}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Unit => write!(f, "()"),
            Value::Tuple(vs) => seq(f, "(", vs, ")"),
            Value::Array(vs) => seq(f, "[", vs, "]"),
            Value::Inl(v) => write!(f, "inl {}", Paren(v)),
            Value::Inr(v) => write!(f, "inr {}", Paren(v)),
            Value::Fun(_) => write!(f, "<function>"),
            Value::Ext(e) => write!(f, "{}", e.show()),
        }
    }
}

/// `open v1, …, vn close`
fn seq(f: &mut fmt::Formatter<'_>, open: &str, vs: &[Value], close: &str) -> fmt::Result {
    write!(f, "{open}")?;
    for (i, v) in vs.iter().enumerate() {
        if i > 0 {
            write!(f, ", ")?;
        }
        write!(f, "{v}")?;
    }
    write!(f, "{close}")
}

struct Paren<'a>(&'a Value);
impl fmt::Display for Paren<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Value::Inl(_) | Value::Inr(_) => write!(f, "({})", self.0),
            Value::Real(r) if *r < 0.0 => write!(f, "({})", self.0),
            Value::Int(i) if *i < 0 => write!(f, "({})", self.0),
            v => write!(f, "{v}"),
        }
    }
}

/// A value as JSON: reals and integers as numbers (non-finite reals as the strings "NaN", "Infinity",
/// "-Infinity", see `json_real`), tuples and arrays as arrays, `inl v` as `{"inl": v}`, unit as `[]`, booleans as booleans.
pub fn to_json(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::Real(r) => json_real::value(*r),
        Value::Int(i) => J::from(*i),
        Value::Bool(b) => J::Bool(*b),
        Value::Unit => J::Array(vec![]),
        Value::Tuple(vs) | Value::Array(vs) => J::Array(vs.iter().map(to_json).collect()),
        Value::Inl(v) => serde_json::json!({ "inl": to_json(v) }),
        Value::Inr(v) => serde_json::json!({ "inr": to_json(v) }),
        Value::Fun(_) => J::String("<function>".into()),
        Value::Ext(_) if v.empty_elem().is_some() => J::Array(vec![]),
        Value::Ext(e) => J::String(e.show()),
    }
}

/// Reals in JSON. JSON has no NaN or infinities (serde_json writes all three as `null`), so they are
/// written as the strings "NaN", "Infinity" and "-Infinity" (JavaScript's names: `Number(s)` reads
/// them back). Use with `#[serde(serialize_with = "json_real::…")]` on f64 fields.
pub mod json_real {
    use serde::{Serialize, Serializer};

    /// One real, written as a number or one of the three strings.
    pub struct Real(pub f64);

    impl Serialize for Real {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match name(self.0) {
                Some(n) => s.serialize_str(n),
                None => s.serialize_f64(self.0),
            }
        }
    }

    /// "NaN", "Infinity" or "-Infinity" for a non-finite real.
    pub fn name(r: f64) -> Option<&'static str> {
        if r.is_nan() {
            Some("NaN")
        } else if r == f64::INFINITY {
            Some("Infinity")
        } else if r == f64::NEG_INFINITY {
            Some("-Infinity")
        } else {
            None
        }
    }

    pub fn value(r: f64) -> serde_json::Value {
        match name(r) {
            Some(n) => serde_json::Value::String(n.into()),
            None => serde_json::Number::from_f64(r).map_or(serde_json::Value::Null, serde_json::Value::Number),
        }
    }

    pub fn values(rs: &[f64]) -> serde_json::Value {
        serde_json::Value::Array(rs.iter().map(|r| value(*r)).collect())
    }

    pub fn one<S: Serializer>(r: &f64, s: S) -> Result<S::Ok, S::Error> {
        Real(*r).serialize(s)
    }

    pub fn opt<S: Serializer>(r: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        r.map(Real).serialize(s)
    }

    pub fn vec<S: Serializer>(rs: &[f64], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(rs.iter().map(|r| Real(*r)))
    }

    /// `[(name, real)]`, as a trace step's cotangent map.
    pub fn named<S: Serializer>(rs: &[(String, f64)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(rs.iter().map(|(k, r)| (k, Real(*r))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reals_print_as_reals() {
        assert_eq!(show_real(2.0), "2.0");
        assert_eq!(show_real(0.1), "0.1");
        assert_eq!(show_real(1e-30), "1e-30");
        assert_eq!(show_real(f64::NAN), "nan");
        assert_eq!(show_real(f64::NEG_INFINITY), "-inf");
    }

    #[test]
    fn non_finite_reals_are_named_in_json() {
        let v = Value::tuple(vec![Value::Real(f64::NAN), Value::Real(f64::INFINITY), Value::Real(f64::NEG_INFINITY), Value::Real(1.5)]);
        assert_eq!(to_json(&v), serde_json::json!(["NaN", "Infinity", "-Infinity", 1.5]));
        #[derive(serde::Serialize)]
        struct G {
            #[serde(serialize_with = "json_real::vec")]
            g: Vec<f64>,
            #[serde(serialize_with = "json_real::opt")]
            f: Option<f64>,
        }
        let j = serde_json::to_string(&G { g: vec![f64::NAN, -0.5], f: Some(f64::NEG_INFINITY) }).unwrap();
        assert_eq!(j, r#"{"g":["NaN",-0.5],"f":"-Infinity"}"#);
    }

    #[test]
    fn leaf_paths_name_tuple_components_and_array_indices() {
        let arr = |xs: &[f64]| Value::Array(xs.iter().map(|x| Value::Real(*x)).collect());
        let v = Value::pair(arr(&[1.0, 2.0]), Value::pair(Value::Int(3), Value::Real(4.0)));
        assert_eq!(v.leaf_paths(), vec![".0[0]", ".0[1]", ".1.1"]);
        let nested = Value::Array(vec![arr(&[1.0, 2.0]), arr(&[3.0])].into());
        assert_eq!(nested.leaf_paths(), vec!["[0][0]", "[0][1]", "[1][0]"]);
        assert_eq!(Value::Real(1.0).leaf_paths(), vec![""]);
        assert_eq!(Value::Inr(Rc::new(Value::pair(Value::Real(1.0), arr(&[2.0])))).leaf_paths(), vec![".inr.0", ".inr.1[0]"]);
        // One path per real leaf, in the order of `real_leaves`.
        assert_eq!(Value::Array(vec![].into()).leaf_paths().len(), 0);
    }

    #[test]
    fn leaves_are_visited_left_to_right_at_any_nesting() {
        let leaves = |v: &Value| {
            let mut out = vec![];
            v.for_each_leaf(&mut |l| out.push(l.to_string()));
            out
        };
        let r = Value::Real;
        let arr = |xs: Vec<Value>| Value::Array(xs.into());
        // nested on the left, in the middle and on the right; sums, units and empty parts between
        let v = Value::tuple(vec![
            Value::pair(Value::pair(r(1.0), Value::Int(2)), arr(vec![])),
            Value::Inr(Rc::new(arr(vec![r(3.0), Value::pair(Value::Bool(true), r(4.0))]))),
            Value::Unit,
            Value::tuple(vec![]),
            Value::pair(r(5.0), Value::Inl(Rc::new(Value::pair(r(6.0), r(7.0))))),
        ]);
        // (`Value::tuple` of no items is the unit: a leaf)
        assert_eq!(leaves(&v), ["1.0", "2", "3.0", "true", "4.0", "()", "()", "5.0", "6.0", "7.0"]);
        assert_eq!(leaves(&r(8.0)), ["8.0"]);
        assert!(leaves(&arr(vec![])).is_empty());
        // deep on either side: a long sum and a left-nested tuple (deep enough to test the order;
        // dropping a value recurses, so not as deep as a run's)
        let (mut deep_sum, mut deep_left) = (r(0.0), r(0.0));
        for k in 1..2_000 {
            deep_sum = Value::Inl(Rc::new(Value::pair(r(k as f64), deep_sum)));
            deep_left = Value::pair(deep_left, r(k as f64));
        }
        let (mut n, mut last) = (0, -1.0);
        deep_left.for_each_leaf(&mut |l| {
            let x = l.as_real().unwrap_or(-2.0);
            assert!(x > last, "left to right: {x} after {last}");
            (n, last) = (n + 1, x);
        });
        assert_eq!(n, 2_000);
        let mut first = vec![];
        deep_sum.for_each_leaf(&mut |l| if first.len() < 3 { first.push(l.to_string()) });
        assert_eq!(first, ["1999.0", "1998.0", "1997.0"]);
    }

    #[test]
    fn with_reals_keeps_shape_and_integers() {
        let v = Value::pair(Value::Inl(Rc::new(Value::Real(1.0))), Value::pair(Value::Int(3), Value::Real(2.0)));
        let g = v.with_reals(&mut [10.0, 20.0].into_iter());
        assert_eq!(g.to_string(), "(inl 10.0, (3, 20.0))");
        assert_eq!(v.real_leaves(), vec![1.0, 2.0]);
    }
}
