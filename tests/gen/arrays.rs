//! Random array programs (issue 9): `main` takes and returns arrays (`Array R`, rectangular
//! `Array (Array R)`, tuples of them and reals). Every array expression is made at a length the
//! generator knows (inputs, literals and `build`/`replicate` sizes are literals; `map`, `map2`,
//! `scanl`, `shift1L`, ... change lengths by known amounts), so `map2` only meets equal lengths and
//! every `a ! i` is in range: a literal below the length, a `build` index whose bound fits,
//! `i mod length a` or `length a - 1` (an out-of-range index is a runtime error, not what the
//! properties test). Sizes stay at 0–4 so that every stage runs fast.

use super::{Gen, Scope};

/// Most elements an array gets (lengths are 0..=MAX_LEN).
const MAX_LEN: usize = 4;

impl Scope {
    fn with_vec(&self, v: &str, n: usize) -> Scope {
        let mut s = self.clone();
        s.vecs.push((v.to_string(), n));
        s
    }
    fn with_mat(&self, m: &str, r: usize, c: usize) -> Scope {
        let mut s = self.clone();
        s.mats.push((m.to_string(), r, c));
        s
    }
    fn with_index(&self, i: &str, bound: usize) -> Scope {
        let mut s = self.clone();
        s.ints.push(i.to_string());
        s.idx.push((i.to_string(), bound));
        s
    }
}

/// The shape of a component of `main`'s input or output.
#[derive(Clone, Copy)]
enum Shape {
    Real,
    Vec(usize),
    Mat(usize, usize),
    /// `Array (R, R)`: its cotangent interleaves the two components, element by element.
    Pairs(usize),
}

impl Gen {
    /// A length: empty one time in ten (empty arrays are an edge case, not the common one).
    fn len(&mut self) -> usize {
        if self.below(10) == 0 {
            0
        } else {
            1 + self.below(MAX_LEN)
        }
    }

    /// A length for a new array: often one of the arrays in scope, so that they meet (`map2`, a
    /// shared index, a variable used whole).
    fn len_in(&mut self, s: &Scope) -> usize {
        let mut known: Vec<usize> = s.vecs.iter().map(|(_, n)| *n).collect();
        known.extend(s.mats.iter().flat_map(|(_, r, c)| [*r, *c]));
        known.extend(s.idx.iter().map(|(_, b)| *b));
        if !known.is_empty() && self.below(2) == 0 {
            *self.pick(&known)
        } else {
            self.len()
        }
    }

    /// A real read from an array variable in scope (an element, or a sum), if there is one.
    pub(super) fn array_leaf(&mut self, s: &Scope) -> Option<String> {
        let mut options = vec![];
        for (v, n) in s.vecs.clone() {
            if n > 0 {
                let i = self.index(s, &v, n);
                options.push(format!("({v} ! {i})"));
            } else {
                options.push(format!("(sum {v})"));
            }
        }
        for (m, r, c) in s.mats.clone() {
            if r > 0 && c > 0 {
                let i = self.index(s, &m, r);
                let j = self.index(s, &format!("({m} ! {i})"), c);
                options.push(format!("({m} ! {i} ! {j})"));
            }
        }
        if options.is_empty() {
            None
        } else {
            Some(self.pick(&options).clone())
        }
    }

    /// An integer expression in range for the array variable `a` of length `n` > 0.
    fn index(&mut self, s: &Scope, a: &str, n: usize) -> String {
        let mut options = vec![format!("{}", self.below(n)), format!("(length {a} - 1)")];
        for (i, bound) in &s.idx {
            options.push(format!("({i} mod length {a})"));
            options.push(format!("(min {i} (length {a} - 1))"));
            if *bound <= n {
                options.push(i.clone());
                options.push(format!("(length {a} - 1 - {i})"));
            }
        }
        self.pick(&options).clone()
    }

    /// Names `e` (an array of length `n`) if it is not a variable already, for indexing it.
    fn named_vec(&mut self, s: &Scope, n: usize, d: usize) -> (String, String) {
        let here: Vec<String> = s.vecs.iter().filter(|(_, k)| *k == n).map(|(v, _)| v.clone()).collect();
        if !here.is_empty() && self.below(3) > 0 {
            return (self.pick(&here).clone(), String::new());
        }
        let v = self.fresh("v");
        let e = self.vec(s, n, d);
        (v.clone(), format!("let {v} = {e} in "))
    }

    /// A real-valued expression that consumes arrays.
    pub(super) fn array_real(&mut self, s: &Scope, d: usize) -> String {
        // drawn only when asked, so that other programs' random streams are unchanged
        if s.core_forms && self.below(2) == 0 {
            return self.array_core_real(s, d);
        }
        match self.below(12) {
            0 | 1 => {
                let n = self.len_in(s);
                format!("(sum {})", self.vec(s, n, d))
            }
            2 | 3 => {
                let n = self.len_in(s).max(1);
                let (v, bind) = self.named_vec(s, n, d);
                let sv = s.with_vec(&v, n);
                let i = self.index(&sv, &v, n);
                format!("({bind}{v} ! {i})")
            }
            4 => {
                let (acc, x) = (self.fresh("acc"), self.fresh("x"));
                let f = self.real_in(&s.with_real(&acc).with_real(&x), d);
                let n = self.len_in(s);
                format!("(fold (\\{acc} {x} -> {f}) {} {})", self.real_in(s, d), self.vec(s, n, d))
            }
            5 => {
                // Huot & Shaikhha's reduce: an associative f with its unit
                let n = self.len_in(s);
                let a = self.vec(s, n, d);
                match self.below(3) {
                    0 => format!("(reduce (\\p q -> p + q) 0.0 {a})"),
                    1 => format!("(reduce (\\p q -> p * q) 1.0 {a})"),
                    _ => {
                        // over an array of pairs: componentwise sum and product
                        let x = self.fresh("x");
                        let sx = s.with_real(&x);
                        let (e1, e2) = (self.real_in(&sx, d), self.real_in(&sx, d));
                        let proj = self.pick(&["fst", "snd"]);
                        format!("({proj} (reduce (\\p q -> (fst p + fst q, snd p * snd q)) (0.0, 1.0) (map (\\{x} -> ({e1}, {e2})) {a})))")
                    }
                }
            }
            6 => {
                let n = self.len_in(s);
                format!("(real (length {}) * {})", self.vec(s, n, d), self.real_in(s, d))
            }
            7 => {
                // an element of a matrix: m ! i ! j
                let (r, c) = (self.len_in(s).max(1), self.len_in(s).max(1));
                let here: Vec<String> = s.mats.iter().filter(|(_, a, b)| (*a, *b) == (r, c)).map(|(m, _, _)| m.clone()).collect();
                let (m, bind) = if here.is_empty() {
                    let m = self.fresh("m");
                    let e = self.mat(s, r, c, d);
                    (m.clone(), format!("let {m} = {e} in "))
                } else {
                    (self.pick(&here).clone(), String::new())
                };
                let sm = s.with_mat(&m, r, c);
                let i = self.index(&sm, &m, r);
                let row = format!("({m} ! {i})");
                let j = match self.below(3) {
                    0 => format!("{}", self.below(c)),
                    _ => self.index(&sm, &row, c),
                };
                format!("({bind}{m} ! {i} ! {j})")
            }
            8 => {
                // a fold over a matrix's rows
                let (r, c) = (self.len_in(s), self.len_in(s));
                let (acc, row) = (self.fresh("acc"), self.fresh("row"));
                let f = self.real_in(&s.with_real(&acc).with_vec(&row, c), d);
                format!("(fold (\\{acc} {row} -> {acc} * 0.5 + {f}) {} {})", self.real_in(s, d), self.mat(s, r, c, d))
            }
            9 if self.below(2) == 0 => {
                // a fold whose accumulator is a pair, taken apart by a lambda's tuple pattern
                let (p, q, x) = (self.fresh("p"), self.fresh("q"), self.fresh("x"));
                let f = self.real_in(&s.with_real(&p).with_real(&q).with_real(&x), d);
                let n = self.len_in(s);
                let proj = self.pick(&["fst", "snd"]);
                format!("({proj} (fold (\\({p}, {q}) {x} -> ({q} * 0.5 + {x}, {f})) ({}, {}) {}))", self.real_in(s, d), self.real_in(s, d), self.vec(s, n, d))
            }
            9 if s.ahelper.is_some() => {
                let n = s.ahelper.unwrap_or(0);
                format!("(ahelper {})", self.vec(s, n, d))
            }
            10 if self.below(2) == 0 => {
                // the polymorphic top-level `twice`, here at type R
                let x = self.fresh("x");
                let f = self.real_in(&s.with_real(&x), d.min(2));
                format!("(twice (\\{x} -> {f}) {})", self.real_in(s, d))
            }
            11 => {
                // tuples inside the program: a tuple pattern over a (real, array) pair, or a
                // tuple-typed `if` projected (the array chain splits both: tuples.rs)
                let (p, q) = (self.fresh("p"), self.fresh("q"));
                let (e1, e2) = (self.real_in(s, d), self.real_in(s, d));
                if self.below(2) == 0 {
                    let n = self.len_in(s);
                    format!("(let ({p}, {q}) = ({e1}, {}) in {p} * sum {q})", self.vec(s, n, d))
                } else {
                    let c = self.cond(s, d);
                    format!("(let {p} = (if {c} then ({e1}, {e2}) else ({e2}, {e1})) in fst {p} * snd {p})")
                }
            }
            _ => {
                let n = self.len_in(s);
                format!("(sum (map (\\y -> y * y) {}))", self.vec(s, n, d))
            }
        }
    }

    /// A real from a form the array core takes by lowering (lower.rs, soa.rs): a `max`/`min` fold
    /// (a selection), an additive scan (masked prefix sums), an array of pairs mapped, indexed and
    /// mapped again, a fold over pairs whose components are sums.
    /// Also a parallel pair taken apart (`par`) and a call of the recursive `rep`, unrolled for its
    /// literal depth (`rep`).
    /// A fold or scanl whose accumulator pairs a real with an array of reals (`pfv`: packed, pack.rs).
    /// A fold whose accumulator pairs a real with an integer (`ifd`: the integer a loop of its own,
    /// pack.rs `int_fold`): a counter, read as `real k` or in a test choosing the real's step, or a
    /// count of the elements passing a test on the real.
    /// A fold or scanl whose accumulator pairs a real with a boolean (`bfd`: the boolean rides in the
    /// loop as a number, pack.rs `encode_bools`), the real's step chosen by it, or beside an integer
    /// the boolean reads (then it rides with the integers), or over boolean elements; or with an
    /// array of booleans (an array of numbers packed with the real).
    /// A fold or scanl whose accumulator pairs a real with a matrix (`mfd`: packed row-major,
    /// pack.rs), or pairs a real with a boolean over a matrix's rows (the rows more columns of the
    /// packed elements).
    /// Variable prefixes (`sel`, `scn`, `prs`, `pfd`, `par`, `ifd`, `bfd`, `mfd`) mark each in the program text.
    fn array_core_real(&mut self, s: &Scope, d: usize) -> String {
        let n = self.len_in(s);
        match self.below(9) {
            8 => {
                let (p, q, x, y, a, b) = (self.fresh("mfd"), self.fresh("mfd"), self.fresh("mfd"), self.fresh("mfd"), self.fresh("mfd"), self.fresh("mfd"));
                let (r, c) = (self.len_in(s), self.len_in(s));
                let z = self.real_in(s, d);
                if self.below(2) == 0 {
                    // a matrix component: each step maps its elements, reading the real and the element
                    let sm = s.with_real(&p).with_mat(&q, r, c).with_real(&x);
                    let (e1, e2) = (self.real_in(&sm, d.min(2)), self.real_in(&sm.with_real(&y), d.min(2)));
                    let (m0, xs) = (self.mat(s, r, c, d), self.vec(s, n, d));
                    let body = format!("(\\({p}, {q}) {x} -> ({p} * 0.5 + {e1}, map (\\{a} -> map (\\{y} -> {e2}) {a}) {q}))");
                    let f = self.real_in(&s.with_real(&a).with_mat(&b, r, c), d.min(2));
                    if self.below(2) == 0 {
                        format!("(let ({a}, {b}) = fold {body} ({z}, {m0}) {xs} in {f} + sum (map (\\{y} -> sum {y}) {b}))")
                    } else {
                        format!("(sum (map (\\({a}, {b}) -> {a} * sum (map (\\{y} -> sum {y}) {b})) (scanl {body} ({z}, {m0}) {xs})))")
                    }
                } else {
                    // over a matrix's rows, a boolean choosing the step
                    let sr = s.with_real(&p).with_vec(&x, c);
                    let (e1, e2) = (self.real_in(&sr, d.min(2)), self.real_in(&sr, d.min(2)));
                    let test = if c > 0 { format!("{x} ! {} > {p}", self.below(c)) } else { format!("{p} > 0.5") };
                    let (m, f) = (self.mat(s, r, c, d), self.real_in(&s.with_real(&a), d.min(2)));
                    format!("(let ({a}, {b}) = fold (\\({p}, {q}) {x} -> (if {q} then {e1} else {e2}, {test})) ({z}, false) {m} in if {b} then {f} else 0.5 * {a})")
                }
            }
            7 => {
                let (p, b, x, a, u) = (self.fresh("bfd"), self.fresh("bfd"), self.fresh("bfd"), self.fresh("bfd"), self.fresh("bfd"));
                let sx = s.with_real(&p).with_real(&x);
                let (e1, e2) = (self.real_in(&sx, d.min(2)), self.real_in(&sx, d.min(2)));
                let b0 = match self.below(3) {
                    0 => "true".to_string(),
                    1 => "false".to_string(),
                    _ => format!("{} > 0.0", self.real_in(s, 0)),
                };
                let step = match self.below(3) {
                    0 => format!("{x} > {p}"),
                    1 => format!("not {b}"),
                    _ => format!("{b} || {x} > 0.5"),
                };
                let f = self.real_in(&s.with_real(&a), d.min(2));
                let (z, xs) = (self.real_in(s, d), self.vec(s, n, d));
                match self.below(5) {
                    4 => {
                        // an array of booleans: an array of numbers packed with the real (pack.rs), elementwise
                        let scan = self.below(2) == 0;
                        let body = format!("(\\({p}, {b}) {x} -> (if {b} ! 0 then {e1} else {e2}, [{x} > {p}, {b} ! 0]))");
                        if scan {
                            format!("(sum (map (\\({a}, {u}) -> if {u} ! 1 then {f} else 0.5 * {a}) (scanl {body} ({z}, [{b0}, false]) {xs})))")
                        } else {
                            format!("(let ({a}, {u}) = fold {body} ({z}, [{b0}, true]) {xs} in if {u} ! 1 then {f} else 0.5 * {a})")
                        }
                    }
                    3 => {
                        // boolean elements: a column of the packed elements
                        let (c, y) = (self.fresh("bfd"), self.fresh("bfd"));
                        format!("(let ({a}, {u}) = fold (\\({p}, {b}) ({x}, {c}) -> (if {c} then {e1} else {e2}, {c} || {b})) ({z}, {b0}) (map (\\{y} -> ({y}, {y} > 0.5)) {xs}) in if {u} then {f} else 0.5 * {a})")
                    }
                    0 => format!("(let ({a}, {u}) = fold (\\({p}, {b}) {x} -> (if {b} then {e1} else {e2}, {step})) ({z}, {b0}) {xs} in if {u} then {f} else 0.5 * {a})"),
                    1 => format!("(sum (map (\\({a}, {u}) -> if {u} then {f} else 0.5 * {a}) (scanl (\\({p}, {b}) {x} -> (if {b} then {e1} else {e2}, {step})) ({z}, {b0}) {xs})))"),
                    _ => {
                        let (k, m, j) = (self.fresh("bfd"), self.fresh("bfd"), self.below(3));
                        format!("(let ({a}, {m}, {u}) = fold (\\({p}, {k}, {b}) {x} -> (if {b} then {e1} else {e2}, {k} + 1, {k} > {j})) ({z}, 0, {b0}) {xs} in if {u} then {f} + real {m} else {f})")
                    }
                }
            }
            6 if self.below(3) == 0 => {
                // an array of reals beside the integer (`ifv`: packed with the real, pack.rs)
                let (p, v, k, x, y) = (self.fresh("ifd"), self.fresh("ifv"), self.fresh("ifd"), self.fresh("ifd"), self.fresh("ifd"));
                let len = self.len_in(s);
                let sv = s.with_real(&p).with_vec(&v, len).with_real(&x);
                let (e1, e2) = (self.real_in(&sv, d.min(2)), self.real_in(&sv.with_real(&y), d.min(2)));
                let counts = self.below(2) == 0;
                // (by the name's parity, not a draw:) a `div` in the step that reads the real, which
                // the real reads too (int_reads.rs `rounded`: the copy brought back by `round`)
                let step = if counts { format!("{k} + 1") } else if second_bit(&y) { format!("if {x} > {p} then {k} + 1 else {k} / 2") } else { format!("if {x} > {p} then {k} + 1 else {k}") };
                // a counting integer read as an index of the array component (pack.rs
                // `real_int_reads`: a masked sum, its `real` a column of the integers' states); the
                // other step reads the real, and the two read each other (below). Only of a
                // short component (the masked sum is O(len) per read): a read of a length-3
                // component in a large program took arrays/symbolic past its gradient-size budget
                // (§7.2's growth without share; wide-run seed 1541, whose fold with `v ! 1` did too)
                // or a row of a small matrix at the integer, met by the real (a masked sum of the
                // rows, `real_int_reads`)
                let read = if counts && self.below(2) == 0 {
                    let (r, c, z) = (1 + self.below(2), 1 + self.below(2), self.fresh("ifm"));
                    let mm = self.mat(s, r, c, 0);
                    format!(" + 0.25 * sum (map (\\{z} -> {z} * {p}) ({mm} ! ({k} mod {r})))")
                } else if counts && (1..3).contains(&len) {
                    format!(" + 0.25 * {v} ! ({k} mod {len})")
                } else if !counts {
                    // the step reads the real and the real the integer: read each other (pack.rs
                    // `shadow_ints`: the integer a real copy in the reals' row)
                    // (and, by the name's parity, a test of the integer: `real_int_reads` before the copies)
                    if v.ends_with(['1', '3', '5', '7', '9']) {
                        format!(" + 0.375 * real {k} + (if {k} > 1 then 0.25 * {x} else 0.0)")
                    } else {
                        format!(" + 0.375 * real {k}")
                    }
                } else {
                    String::new()
                };
                let (a, b, m) = (self.fresh("ifd"), self.fresh("ifv"), self.fresh("ifd"));
                let f = self.real_in(&s.with_real(&a).with_vec(&b, len), d.min(2));
                let (z, v0, xs) = (self.real_in(s, d), self.vec(s, len, d), self.vec(s, n, d));
                format!("(let ({a}, {b}, {m}) = fold (\\({p}, {v}, {k}) {x} -> ({p} * 0.5 + {e1}{read}, map (\\{y} -> {e2}) {v}, {step})) ({z}, {v0}, 0) {xs} in {f} + real {m})")
            }
            6 => {
                let (p, k, x, a, m) = (self.fresh("ifd"), self.fresh("ifd"), self.fresh("ifd"), self.fresh("ifd"), self.fresh("ifd"));
                let e1 = self.real_in(&s.with_real(&p).with_real(&x), d.min(2));
                // a counter the real may read as `real k` (a column of the integers' states), or in a
                // test choosing its step (a column of the test's values, pack.rs `lift_int_reads`),
                // or a summed build of its size, or a count of the elements passing a test on the real
                // or an array of integers (more columns of the integers' row)
                let (mut z0, mut fin) = ("0".to_string(), format!("real {m}"));
                let (step, real) = match self.below(4) {
                    // (chosen by the name's parity, not a draw: the other programs stay as drawn)
                    0 if k.ends_with(['1', '3', '5', '7', '9']) => (format!("{k} + 1"), format!("{p} * 0.5 + {e1} + 0.25 * real {k}")),
                    // or a summed build of the integer's size (pack.rs `masked_sizes`: the largest size, masked)
                    0 => {
                        // and a `real` of a `mod` of the integer and a binder (`binder_tables`)
                        let (j, t) = (self.fresh("ifb"), self.fresh("ift"));
                        // (by the names' parity, not a draw:) the build met by a map (pack.rs
                        // `fuse_sized_builds`), the mod of the integer and two binders (a table over both)
                        let odd = |v: &str| v.ends_with(['1', '3', '5', '7', '9']);
                        let sized = if odd(&j) { format!("sum (map (\\{t} -> {t} * {p}) (build ({k} mod 3) (\\{j} -> {x})))") } else { format!("sum (build ({k} mod 3) (\\{j} -> {p} * {x}))") };
                        let table = if odd(&t) { format!("sum (build 2 (\\{t} -> sum (build 2 (\\{j} -> real (({t} * {j} + {k}) mod 2) * {p}))))") } else { format!("sum (build 2 (\\{t} -> real (({t} + {k}) mod 2) * {p}))") };
                        (format!("{k} + 1"), format!("{p} * 0.5 + {e1} + 0.25 * {sized} + 0.125 * {table}"))
                    }
                    // the real reading the integer in a test while its step reads the real (pack.rs
                    // `shadow_ints` after `real_int_reads`), by the name's parity
                    // (and, by another name's parity, a `div` in the step: `rounded`)
                    1 if p.ends_with(['1', '3', '5', '7', '9']) => {
                        let other = if second_bit(&x) { format!("{k} / 3") } else { k.clone() };
                        (format!("if {x} > {p} then {k} + 1 else {other}"), format!("{p} * 0.5 + {e1} + (if {k} > 1 then 0.25 * {x} else 0.0)"))
                    }
                    1 => (format!("if {x} > {p} then {k} + 1 else {k}"), format!("{p} * 0.5 + {e1}")),
                    2 => (format!("{k} + 1"), format!("(if ({k} > {}) then {p} * 0.5 + {e1} else {p} + 0.25)", self.below(3))),
                    _ => {
                        (z0, fin) = ("[0, 1]".to_string(), format!("real ({m} ! 1)"));
                        // (by the name's second bit, not a draw:) the array's step reading the real,
                        // so the two read each other (int_reads.rs `shadow_ints`: the array a real
                        // copy of its shape in the reals' row)
                        let step = if second_bit(&m) { format!("if {x} > {p} then [{k} ! 1, {k} ! 0 + 1] else {k}") } else { format!("[{k} ! 1, {k} ! 0 + 1]") };
                        (step, format!("{p} * 0.5 + {e1} + 0.25 * real ({k} ! 0)"))
                    }
                };
                let f = self.real_in(&s.with_real(&a), d.min(2));
                format!("(let ({a}, {m}) = fold (\\({p}, {k}) {x} -> ({real}, {step})) ({}, {z0}) {} in {f} + {fin})", self.real_in(s, d), self.vec(s, n, d))
            }
            4 => {
                let (a, b) = (self.fresh("par"), self.fresh("par"));
                let (e1, e2) = (self.array_real(s, d.saturating_sub(1)), self.real_in(s, d.min(2)));
                let f = self.real_in(&s.with_real(&a).with_real(&b), d.min(2));
                format!("(let ({a}, {b}) = {e1} ||| {e2} in {f})")
            }
            5 => {
                let k = self.below(4);
                format!("(rep {k} {})", self.vec(s, n, d))
            }
            0 => {
                let (a, b) = (self.fresh("sel"), self.fresh("sel"));
                let t = self.real_in(&s.with_real(&b), d.min(2));
                let op = self.pick(&["max", "min"]).to_string();
                let body = if self.below(2) == 0 { format!("{op} {a} ({t})") } else { format!("{op} ({t}) {a}") };
                let f = self.pick(&["fold", "reduce"]).to_string();
                format!("({f} (\\{a} {b} -> {body}) {} {})", self.real_in(s, d), self.vec(s, n, d))
            }
            1 => {
                let (acc, c) = (self.fresh("scn"), self.fresh("scn"));
                let t = self.real_in(&s.with_real(&c), d.min(2));
                let (z, a) = (self.real_in(s, d), self.vec(s, n, d));
                let scan = if self.below(2) == 0 { format!("scanl (\\{acc} {c} -> {acc} + {t}) {z} {a}") } else { format!("scanr (\\{c} {acc} -> {t} + {acc}) {z} {a}") };
                let (x, y) = (self.fresh("x"), self.fresh("y"));
                format!("(sum (map2 (\\{x} {y} -> {x} * {y}) ({scan}) {}))", self.vec(s, n + 1, d))
            }
            2 => {
                let (x, u, w) = (self.fresh("prs"), self.fresh("prs"), self.fresh("prs"));
                let sx = s.with_real(&x);
                let (e1, e2) = (self.real_in(&sx, d.min(2)), self.real_in(&sx, d.min(2)));
                let f = self.real_in(&s.with_real(&u).with_real(&w), d.min(2));
                let ps = format!("(map (\\{x} -> ({e1}, {e2})) {})", self.vec(s, n, d));
                let v = self.fresh("prs");
                let pick = if n > 0 { format!(" + {} ({v} ! {})", self.pick(&["fst", "snd"]), self.below(n)) } else { String::new() };
                format!("(let {v} = {ps} in sum (map (\\({u}, {w}) -> {f}) {v}){pick})")
            }
            _ if self.below(3) > 0 => {
                // a fold or scanl whose accumulator pairs a real with an array of reals (`pfv`: pack.rs
                // packs the array's elements as more columns of the loop's row, its length fixed)
                let (p, v, x, y) = (self.fresh("pfd"), self.fresh("pfv"), self.fresh("pfd"), self.fresh("pfd"));
                let k = self.len_in(s);
                let sv = s.with_real(&p).with_vec(&v, k).with_real(&x);
                let (e1, e2) = (self.real_in(&sv, d.min(2)), self.real_in(&sv.with_real(&y), d.min(2)));
                let (z, v0, xs) = (self.real_in(s, d), self.vec(s, k, d), self.vec(s, n, d));
                let body = format!("(\\({p}, {v}) {x} -> ({p} * 0.5 + {e1}, map (\\{y} -> {e2}) {v}))");
                let (a, b) = (self.fresh("pfd"), self.fresh("pfv"));
                if self.below(2) == 0 {
                    format!("(let ({a}, {b}) = fold {body} ({z}, {v0}) {xs} in {a} + sum {b})")
                } else {
                    format!("(sum (map (\\({a}, {b}) -> {a} * sum {b}) (scanl {body} ({z}, {v0}) {xs})))")
                }
            }
            _ => {
                let (p, q, x) = (self.fresh("pfd"), self.fresh("pfd"), self.fresh("pfd"));
                let sx = s.with_real(&x);
                let (e1, e2) = (self.real_in(&sx, d.min(2)), self.real_in(&sx, d.min(2)));
                let proj = self.pick(&["fst", "snd"]).to_string();
                format!("({proj} (fold (\\({p}, {q}) {x} -> ({p} + {e1}, {e2} + {q})) ({}, {}) {}))", self.real_in(s, d), self.real_in(s, d), self.vec(s, n, d))
            }
        }
    }

    /// An expression of type `Array R` and length `n`.
    pub fn vec(&mut self, s: &Scope, n: usize, depth: usize) -> String {
        let here: Vec<String> = s.vecs.iter().filter(|(_, k)| *k == n).map(|(v, _)| v.clone()).collect();
        if depth == 0 || self.below(8) == 0 {
            if !here.is_empty() && self.below(4) > 0 {
                return self.pick(&here).clone();
            }
            if self.below(3) == 0 {
                return format!("(replicate {n} {})", self.real_in(s, 0));
            }
            let xs: Vec<String> = (0..n).map(|_| self.real_in(s, 0)).collect();
            return format!("[{}]", xs.join(", "));
        }
        let d = depth - 1;
        match self.below(22) {
            0 => {
                let xs: Vec<String> = (0..n).map(|_| self.real_in(s, d)).collect();
                format!("[{}]", xs.join(", "))
            }
            1 | 2 => {
                let i = self.fresh("i");
                format!("(build {n} (\\{i} -> {}))", self.real_in(&s.with_index(&i, n), d))
            }
            3 => format!("(replicate {n} {})", self.real_in(s, d)),
            4 | 5 => {
                let x = self.fresh("x");
                let f = self.real_in(&s.with_real(&x), d);
                format!("(map (\\{x} -> {f}) {})", self.vec(s, n, d))
            }
            6 => {
                let (x, y) = (self.fresh("x"), self.fresh("y"));
                let f = self.real_in(&s.with_real(&x).with_real(&y), d);
                format!("(map2 (\\{x} {y} -> {f}) {} {})", self.vec(s, n, d), self.vec(s, n, d))
            }
            7 if n >= 1 => {
                let (acc, x) = (self.fresh("acc"), self.fresh("x"));
                let f = self.real_in(&s.with_real(&acc).with_real(&x), d);
                let (z, a) = (self.real_in(s, d), self.vec(s, n - 1, d));
                match self.below(3) {
                    0 => format!("(scanl (\\{acc} {x} -> {f}) {z} {a})"),
                    1 => format!("(scanr (\\{x} {acc} -> {f}) {z} {a})"),
                    _ => {
                        // a scan whose accumulator is a pair (`ta`, `tb`), its states mapped
                        // (the array chain packs the pair into an array of reals: soa.rs)
                        let (ta, tb) = (self.fresh("ta"), self.fresh("tb"));
                        let sc = s.with_real(&ta).with_real(&tb).with_real(&x);
                        let (f1, g) = (self.real_in(&sc, d), self.real_in(&sc, d));
                        let z2 = self.real_in(s, d);
                        let (p, q) = (self.fresh("p"), self.fresh("q"));
                        let h = self.real_in(&s.with_real(&p).with_real(&q), d);
                        let body = format!("({tb} * 0.5 + {f1}, {g})");
                        if self.below(2) == 0 {
                            format!("(map (\\({p}, {q}) -> {h}) (scanl (\\({ta}, {tb}) {x} -> {body}) ({z}, {z2}) {a}))")
                        } else {
                            format!("(map (\\({p}, {q}) -> {h}) (scanr (\\{x} ({ta}, {tb}) -> {body}) ({z}, {z2}) {a}))")
                        }
                    }
                }
            }
            8 if n < MAX_LEN => {
                let op = self.pick(&["shift1L", "shift1R"]);
                format!("({op} {})", self.vec(s, n + 1, d))
            }
            9 => {
                // a row of a matrix
                let r = self.len_in(s).max(1);
                let here: Vec<String> = s.mats.iter().filter(|(_, a, b)| (*a, *b) == (r, n)).map(|(m, _, _)| m.clone()).collect();
                let (m, bind) = if here.is_empty() {
                    let m = self.fresh("m");
                    let e = self.mat(s, r, n, d);
                    (m.clone(), format!("let {m} = {e} in "))
                } else {
                    (self.pick(&here).clone(), String::new())
                };
                let i = self.index(&s.with_mat(&m, r, n), &m, r);
                format!("({bind}{m} ! {i})")
            }
            10 => {
                // a fold with an array accumulator
                let (acc, x) = (self.fresh("acc"), self.fresh("x"));
                let f = self.vec(&s.with_vec(&acc, n).with_real(&x), n, d);
                let m = self.len_in(s);
                format!("(fold (\\{acc} {x} -> {f}) {} {})", self.vec(s, n, d), self.vec(s, m, d))
            }
            11 => {
                // sharing an array
                let (v, m) = (self.fresh("v"), self.len_in(s));
                let e = self.vec(s, m, d);
                format!("(let {v} = {e} in {})", self.vec(&s.with_vec(&v, m), n, d))
            }
            12 => {
                let c = self.cond(s, d);
                format!("(if {c} then {} else {})", self.vec(s, n, d), self.vec(s, n, d))
            }
            13 => {
                // an array inside a sum, and an annotation naming the array type
                let (a, y) = (self.fresh("a"), self.fresh("y"));
                let c = self.cond(s, d);
                format!(
                    "(case (if {c} then inl {} else inr {} : Array R + R) of inl {a} -> {} | inr {y} -> {})",
                    self.vec(s, n, d),
                    self.real_in(s, d),
                    self.vec(&s.with_vec(&a, n), n, d),
                    self.vec(&s.with_real(&y), n, d)
                )
            }
            14 => format!("({} : Array R)", self.vec(s, n, d)),
            17 => {
                // a function value named by let, then mapped
                let (f, x) = (self.fresh("f"), self.fresh("x"));
                let body = self.real_in(&s.with_real(&x), d);
                format!("(let {f} = \\{x} -> {body} in map {f} {})", self.vec(s, n, d))
            }
            18 => {
                // local recursion over an array accumulator
                let (f, k, acc) = (self.fresh("loop"), self.fresh("k"), self.fresh("acc"));
                let step = self.vec(&s.with_vec(&acc, n), n, d.min(2));
                let times = self.below(3);
                format!("(let {f} {k} {acc} = if {k} == 0 then {acc} else {f} ({k} - 1) ({step}) in {f} {times} {})", self.vec(s, n, d))
            }
            19 => {
                // an array of integers, made real elementwise (its elements have no cotangent)
                let (i, k) = (self.fresh("i"), self.fresh("k"));
                let f = self.real_in(&s.with_int(&k), d);
                format!("(map (\\{k} -> real {k} * {f}) (build {n} (\\{i} -> {i} * {i} - 1)))")
            }
            21 => {
                // the polymorphic top-level `twice`, here at type Array R
                let v = self.fresh("v");
                let f = self.vec(&s.with_vec(&v, n), n, d.min(2));
                format!("(twice (\\{v} -> {f}) {})", self.vec(s, n, d))
            }
            20 => {
                // the parallel pair of Smeding & Vákár §12, over two arrays
                let (p, q, x, y) = (self.fresh("p"), self.fresh("q"), self.fresh("x"), self.fresh("y"));
                let f = self.real_in(&s.with_real(&x).with_real(&y), d);
                format!("(let ({p}, {q}) = ({} ||| {}) in map2 (\\{x} {y} -> {f}) {p} {q})", self.vec(s, n, d), self.vec(s, n, d))
            }
            15 => {
                // one real per row of a matrix
                let (row, c) = (self.fresh("row"), self.len_in(s));
                let f = self.real_in(&s.with_vec(&row, c), d);
                format!("(map (\\{row} -> {f}) {})", self.mat(s, n, c, d))
            }
            _ => {
                // the sum of a matrix's rows, by reduce with the zero row as unit
                let r = self.len_in(s);
                format!("(reduce (\\u w -> map2 (\\p q -> p + q) u w) (replicate {n} 0.0) {})", self.mat(s, r, n, d))
            }
        }
    }

    /// An expression of type `Array (Array R)` with `r` rows of length `c`.
    pub fn mat(&mut self, s: &Scope, r: usize, c: usize, depth: usize) -> String {
        let here: Vec<String> = s.mats.iter().filter(|(_, a, b)| (*a, *b) == (r, c)).map(|(m, _, _)| m.clone()).collect();
        if depth == 0 || self.below(8) == 0 {
            if !here.is_empty() && self.below(4) > 0 {
                return self.pick(&here).clone();
            }
            let rows: Vec<String> = (0..r).map(|_| self.vec(s, c, 0)).collect();
            return format!("[{}]", rows.join(", "));
        }
        let d = depth - 1;
        match self.below(10) {
            0 => {
                let rows: Vec<String> = (0..r).map(|_| self.vec(s, c, d)).collect();
                format!("[{}]", rows.join(", "))
            }
            1 => {
                let i = self.fresh("i");
                format!("(build {r} (\\{i} -> {}))", self.vec(&s.with_index(&i, r), c, d))
            }
            2 => {
                // build over both indices, e.g. a transpose or an outer product
                let (i, j) = (self.fresh("i"), self.fresh("j"));
                let f = self.real_in(&s.with_index(&i, r).with_index(&j, c), d);
                format!("(build {r} (\\{i} -> build {c} (\\{j} -> {f})))")
            }
            3 => format!("(replicate {r} {})", self.vec(s, c, d)),
            4 => {
                let x = self.fresh("x");
                let f = self.vec(&s.with_real(&x), c, d);
                format!("(map (\\{x} -> {f}) {})", self.vec(s, r, d))
            }
            5 => {
                let (row, c2) = (self.fresh("row"), self.len_in(s));
                let f = self.vec(&s.with_vec(&row, c2), c, d);
                format!("(map (\\{row} -> {f}) {})", self.mat(s, r, c2, d))
            }
            6 if r >= 1 => {
                // scanl with an array accumulator: a matrix of its states
                let (acc, x) = (self.fresh("acc"), self.fresh("x"));
                let f = self.vec(&s.with_vec(&acc, c).with_real(&x), c, d);
                format!("(scanl (\\{acc} {x} -> {f}) {} {})", self.vec(s, c, d), self.vec(s, r - 1, d))
            }
            7 if r < MAX_LEN => {
                let op = self.pick(&["shift1L", "shift1R"]);
                format!("({op} {})", self.mat(s, r + 1, c, d))
            }
            8 => {
                let (u, w) = (self.fresh("u"), self.fresh("w"));
                let (p, q) = (self.fresh("p"), self.fresh("q"));
                let f = self.real_in(&s.with_real(&p).with_real(&q), d);
                format!("(map2 (\\{u} {w} -> map2 (\\{p} {q} -> {f}) {u} {w}) {} {})", self.mat(s, r, c, d), self.mat(s, r, c, d))
            }
            _ => {
                let c2 = self.cond(s, d);
                format!("(if {c2} then {} else {})", self.mat(s, r, c, d), self.mat(s, r, c, d))
            }
        }
    }

    fn input_value(&mut self) -> String {
        format!("{:?}", (self.below(300) as f64 - 150.0) / 100.0 + 0.005)
    }

    fn input_of(&mut self, shape: Shape) -> String {
        match shape {
            Shape::Real => self.input_value(),
            Shape::Vec(n) => format!("[{}]", (0..n).map(|_| self.input_value()).collect::<Vec<_>>().join(", ")),
            Shape::Mat(r, c) => format!("[{}]", (0..r).map(|_| self.input_of(Shape::Vec(c))).collect::<Vec<_>>().join(", ")),
            Shape::Pairs(n) => format!("[{}]", (0..n).map(|_| format!("({}, {})", self.input_value(), self.input_value())).collect::<Vec<_>>().join(", ")),
        }
    }

    fn shape(&mut self) -> Shape {
        match self.below(7) {
            0 | 1 => Shape::Real,
            2 | 3 => Shape::Vec(self.len()),
            4 | 5 => Shape::Mat(self.len(), self.len()),
            _ => Shape::Pairs(self.len()),
        }
    }

    fn output_of(&mut self, s: &Scope, shape: Shape, depth: usize) -> String {
        match shape {
            Shape::Real => self.real_in(s, depth),
            Shape::Vec(n) => self.vec(s, n, depth),
            Shape::Mat(r, c) => self.mat(s, r, c, depth),
            Shape::Pairs(n) => {
                let (x, y) = (self.fresh("x"), self.fresh("y"));
                let sxy = s.with_real(&x).with_real(&y);
                let (e1, e2) = (self.real_in(&sxy, depth.saturating_sub(1)), self.real_in(&sxy, depth.saturating_sub(1)));
                let (a, b) = (self.vec(s, n, depth.saturating_sub(1)), self.vec(s, n, depth.saturating_sub(1)));
                format!("(map2 (\\{x} {y} -> ({e1}, {e2})) {a} {b})")
            }
        }
    }

    /// A whole program over arrays: `main`'s input is a tuple of 1–3 components (reals, `Array R`,
    /// rectangular `Array (Array R)`, `Array (R, R)`; at least one array), its output one or two
    /// such components
    /// (or, one program in four, reals in and a real out, with arrays only inside);
    /// beside it `helper : R -> R`, sometimes `ahelper : Array R -> R`, and the polymorphic
    /// `twice`, which `main` may use at `R` and at `Array R`.
    pub fn array_program(&mut self, depth: usize) -> String {
        self.array_program_with(depth, false)
    }

    /// `array_program`, with the forms the array core takes by lowering (`Scope::core_forms`) and
    /// `Array (R, R)` in main's input or output (which Part C refuses) drawn as `Array R`.
    pub fn array_core_program(&mut self, depth: usize) -> String {
        self.array_program_with(depth, true)
    }

    fn array_program_with(&mut self, depth: usize, core: bool) -> String {
        let arity = 1 + self.below(3);
        // One program in four keeps arrays inside: reals in, a real out (main : R^a → R), the
        // interface that the Krawiec stages' R^a → R wrappers accept.
        let inside = self.below(4) == 0;
        let mut shapes: Vec<Shape> = (0..arity).map(|_| if inside { Shape::Real } else { self.shape() }).collect();
        if !inside && shapes.iter().all(|s| matches!(s, Shape::Real)) {
            shapes[0] = Shape::Vec(self.len());
        }
        // (arrays of pairs in main's input and output reach Part C, taken apart and zipped back at
        // its wrapper: boundary.rs; issue 12)
        let mut s = Scope { arrays: true, core_forms: core, ..Scope::default() };
        let (mut names, mut uses, mut unzips) = (vec![], vec![], String::new());
        for (k, shape) in shapes.iter().enumerate() {
            // Not prefixes `fresh` makes, so an input is never shadowed at another type.
            let name = match *shape {
                Shape::Real => format!("x{k}"),
                Shape::Vec(_) => format!("vec{k}"),
                Shape::Mat(..) => format!("mat{k}"),
                Shape::Pairs(_) => format!("prs{k}"),
            };
            // Every input is used, so its type is fixed by the program (an unused one would default to R).
            uses.push(match *shape {
                Shape::Real => name.clone(),
                Shape::Vec(_) => format!("sum {name}"),
                Shape::Mat(..) => format!("sum (map (\\r -> sum r) {name})"),
                Shape::Pairs(_) => format!("sum (map (\\p -> fst p * snd p) {name})"),
            });
            match *shape {
                Shape::Real => s.reals.push(name.clone()),
                Shape::Vec(n) => s.vecs.push((name.clone(), n)),
                Shape::Mat(r, c) => s.mats.push((name.clone(), r, c)),
                Shape::Pairs(n) => {
                    // taken apart into two arrays by `map`
                    unzips.push_str(&format!("let (left{k}, right{k}) = (map (\\p -> fst p) {name}, map (\\p -> snd p) {name}) in\n  "));
                    s.vecs.push((format!("left{k}"), n));
                    s.vecs.push((format!("right{k}"), n));
                }
            }
            names.push(name);
        }
        let helper = self.real(&["u".to_string()], &[], 2);
        let ahelper = if self.below(2) == 0 {
            let n = self.len();
            let hs = Scope { arrays: true, vecs: vec![("w".into(), n)], ..Scope::default() };
            let body = self.real_in(&hs, 2);
            s.ahelper = Some(n);
            format!("def ahelper w = {body} + sum w\n\n")
        } else {
            String::new()
        };
        s.reals.push("h".into());
        let outs: Vec<Shape> = if inside { vec![Shape::Real] } else { (0..1 + self.below(2)).map(|_| self.shape()).collect() };
        let mut body: Vec<String> = outs.iter().map(|o| if inside { self.array_real(&s, depth) } else { self.output_of(&s, *o, depth) }).collect();
        // one core program in four with an output of arrays nests it in a tuple beside an integer
        // (Part C returns the leaves as one flat tuple: boundary.rs `flat_output`)
        if core && !inside && self.below(4) == 0 {
            let n = s.vecs.first().map_or_else(|| "2".to_string(), |(v, _)| format!("length {v}"));
            let first = body.remove(0);
            body.insert(0, format!("({first}, {n})"));
            if body.len() == 1 {
                body.push(self.real_in(&s, 1));
            }
        }
        let input: Vec<String> = shapes.iter().map(|sh| self.input_of(*sh)).collect();
        // recursion on a literal depth, over a vector (Part C unrolls it: App. B's staging)
        let rep = if core { "def rep k v = if k == 0 then sum v else rep (k - 1) (map (\\x -> x * 0.5 + 1.0) v)\n\n" } else { "" };
        let tuple = |v: &[String]| if v.len() == 1 { v[0].clone() } else { format!("({})", v.join(", ")) };
        format!(
            "input {}\n\ndef helper u = {helper}\n\n{ahelper}def twice f z = f (f z)\n\n{rep}def main {} =\n  let h = helper ({}) in\n  {unzips}{}\n",
            tuple(&input),
            tuple(&names),
            uses.join(" + "),
            tuple(&body)
        )
    }
}

/// Whether a fresh name's number has its second bit set (`n mod 4 ≥ 2`): a choice by the name, not
/// a draw (the other programs stay as drawn), that its parity, tied to its neighbours' (they are
/// numbered in a row), cannot make.
fn second_bit(name: &str) -> bool {
    name.trim_start_matches(|c: char| c.is_ascii_alphabetic()).parse::<u64>().is_ok_and(|n| n % 4 >= 2)
}
