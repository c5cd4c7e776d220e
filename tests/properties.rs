//! Property tests on random well-typed programs (tests/gen), scalar and with arrays: the printer
//! round-trips (and the reprinted program computes the same value), every stage agrees with
//! `forward`, and `forward` agrees with finite differences.

mod gen;

use cotangent::interp::Budget;
use cotangent::pipeline::{analyse, front_end, run_source, Options};
use cotangent::print::{print_program, PrintOptions};
use cotangent::value::Value;
use cotangent::{limits, syntax};
use proptest::prelude::*;

/// Type-checks `src` and runs `main` at the program's input.
fn primal(src: &str) -> Result<Value, String> {
    let (p, _, _) = front_end(src, &[]).map_err(|d| format!("does not type-check: {d:?}\n{src}"))?;
    let e = p.input.as_ref().ok_or("no input")?;
    let input = syntax::value_of(e).map_err(|d| format!("{d:?}"))?;
    run_source(&p, &input, &Budget::default()).map_err(|e| format!("does not run: {}\n{src}", e.message()))
}

fn roundtrip(src: &str) -> Result<(), String> {
    let p = syntax::parse_program(src).map_err(|d| format!("{d:?}"))?;
    let value = primal(src)?;
    for opts in [PrintOptions::unicode(), PrintOptions::ascii(), PrintOptions { width: 30, ..PrintOptions::ascii() }] {
        let once = print_program(&p, &opts);
        let again = syntax::parse_program(&once).map_err(|d| format!("printed program does not parse: {d:?}\n{once}"))?;
        let twice = print_program(&again, &opts);
        if once != twice {
            return Err(format!("print(parse(print(p))) != print(p)\n--- once\n{once}\n--- twice\n{twice}"));
        }
        // The printed program means what the source means: same type, same value, bit for bit.
        let v = primal(&once)?;
        if !v.same(&value) {
            return Err(format!("the printed program computes {v}, the source {value}\n--- source\n{src}\n--- printed\n{once}"));
        }
    }
    Ok(())
}

/// An output cotangent shaped like the primal whose reals differ from each other, so that a stage
/// that mixes up two output positions cannot hide behind the default seed of all ones.
fn varied_seed(src: &str) -> Result<String, String> {
    let weights = [1.0, -0.5, 2.0, 0.25, -1.5, 0.75];
    Ok(primal(src)?.with_reals(&mut weights.iter().copied().cycle()).to_string())
}

fn agrees(src: &str, seed: Option<String>) -> Result<(), String> {
    let a = analyse(src, &Options { trace: false, seed, ..Options::default() }).map_err(|d| format!("{d:?}\n{src}"))?;
    let reference = a.reference.as_ref().ok_or_else(|| format!("no reference\n{src}"))?;
    for r in &a.stages {
        if let Some(e) = &r.error {
            // A stage may refuse what its method cannot handle (a located refusal before running).
            if r.refused {
                continue;
            }
            // §7.2: symbolic evaluation without share copies a cotangent at every Add, so its
            // gradient term grows exponentially with the program's sharing (E11, the chain's point);
            // a random program may take it past its gradient-size budget, provided the same
            // evaluation with share (§7.3) agrees.
            let share_agrees = || a.stages.iter().any(|s| s.id == "arrays/symbolic-share" && s.agrees == Some(true));
            if r.id == "arrays/symbolic" && r.status == cotangent::pipeline::Status::Budget && e.contains("gradient size") && share_agrees() {
                continue;
            }
            return Err(format!("{}: {e}\n{src}", r.id));
        }
        if r.agrees != Some(true) {
            return Err(format!("{} disagrees: {:?} vs forward {:?}\n{src}", r.id, r.gradient, reference.gradient));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn printer_round_trips(seed in any::<u64>(), arity in 1usize..4, depth in 1usize..6) {
        let src = gen::Gen::new(seed).program(arity, depth);
        let r = limits::run_with_stack(move || roundtrip(&src));
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    #[test]
    fn every_stage_agrees_with_forward(seed in any::<u64>(), arity in 1usize..4, depth in 1usize..6) {
        let src = gen::Gen::new(seed).program(arity, depth);
        let r = limits::run_with_stack(move || agrees(&src, None));
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

/// The program's input point with its reals replaced by non-finite and extreme values.
fn extreme_point(src: &str, shift: usize) -> Result<String, String> {
    let (p, _, _) = front_end(src, &[]).map_err(|d| format!("does not type-check: {d:?}\n{src}"))?;
    let e = p.input.as_ref().ok_or("no input")?;
    let input = syntax::value_of(e).map_err(|d| format!("{d:?}"))?;
    let extremes = [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e308, -0.0, 5e-324, 2.5];
    Ok(input.with_reals(&mut extremes.iter().copied().cycle().skip(shift)).to_string())
}

/// At non-finite input points the modes may differ by the README's rule ("Non-finite values":
/// forward mode seeds the other inputs with a numeric 0, so ∞ · 0 can give NaN there), so what is
/// checked is that nothing breaks: every stage runs (to any value), refuses, or stops at a budget;
/// no internal error, no unlocated message, no panic.
fn survives_extremes(src: &str, shift: usize) -> Result<(), String> {
    let at = extreme_point(src, shift)?;
    let a = match analyse(src, &Options { trace: false, at: Some(at.clone()), ..Options::default() }) {
        Ok(a) => a,
        // the source itself may fail at such a point (an integer from `floor inf`), located
        Err(ds) if ds.iter().all(|d| !d.span.is_none() && !d.message.contains("internal error")) => return Ok(()),
        Err(ds) => return Err(format!("at {at}: {ds:?}\n{src}")),
    };
    for r in &a.stages {
        if let Some(e) = &r.error {
            if e.contains("internal error") || (!r.refused && r.status != cotangent::pipeline::Status::Budget && r.error_span.is_none()) {
                return Err(format!("{} at {at}: {e}\n{src}", r.id));
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_stage_survives_non_finite_inputs(seed in any::<u64>(), arity in 1usize..4, depth in 1usize..6, shift in 0usize..7) {
        let src = gen::Gen::new(seed).program(arity, depth);
        let r = limits::run_with_stack(move || survives_extremes(&src, shift));
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    #[test]
    fn every_stage_survives_non_finite_array_inputs(seed in any::<u64>(), depth in 1usize..5, shift in 0usize..7) {
        let src = gen::Gen::new(seed).array_program(depth);
        let r = limits::run_with_stack(move || survives_extremes(&src, shift));
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

proptest! {
    // Array programs (tests/gen/arrays.rs): more cases, since they have more constructs to combine.
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn printer_round_trips_on_array_programs(seed in any::<u64>(), depth in 1usize..5) {
        let src = gen::Gen::new(seed).array_program(depth);
        let r = limits::run_with_stack(move || roundtrip(&src));
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    #[test]
    fn every_stage_agrees_with_forward_on_array_programs(seed in any::<u64>(), depth in 1usize..5) {
        let src = gen::Gen::new(seed).array_program(depth);
        let r = limits::run_with_stack(move || varied_seed(&src).and_then(|s| agrees(&src, Some(s))));
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

#[test]
fn forward_agrees_with_finite_differences_on_random_programs() {
    // The reference itself is checked independently: central differences, loosely (kinks at `if`
    // and `abs` are rare at random points; allow a few).
    let mut disagreements = 0;
    for seed in 0..40u64 {
        let src = gen::Gen::new(seed).program(2, 4);
        let a = limits::run_with_stack(move || analyse(&src, &Options { trace: false, stages: vec!["forward".into()], ..Options::default() }).map(|a| a.reference.map(|r| r.fd_agrees)));
        match a {
            Ok(Some(true)) => {}
            Ok(_) => disagreements += 1,
            Err(d) => panic!("seed {seed}: {d:?}"),
        }
    }
    assert!(disagreements <= 4, "{disagreements} of 40 random programs disagree with finite differences");
}

#[test]
fn generated_programs_are_varied_and_nontrivial() {
    // Guards the generator itself: programs use the constructs the properties are meant to cover.
    let all: String = (0..60u64).map(|s| gen::Gen::new(s).program(2, 5)).collect();
    for construct in [
        "let ", "case ", "if ", "\\", "fst ", "real ", "sin ", "exp ", "log ", "atan2 ", "abs ", " ** ", "atan ", "min ", "max ",
        "floor ", "(round ", "sinh ", "cosh ", "erf ", "log1p ", "expm1 ", "sigmoid ", " : R)", " : R + (R, Z))", ", -",
    ] {
        assert!(all.contains(construct), "no `{construct}` in 60 generated programs");
    }
    assert!(all.matches("let loop").count() > 0, "no local recursion generated");
}

#[test]
fn forward_agrees_with_finite_differences_on_random_array_programs() {
    // As above, with arrays in the input and the output, under a varied output seed.
    let mut disagreements = 0;
    for seed in 0..60u64 {
        let src = gen::Gen::new(seed).array_program(3);
        let a = limits::run_with_stack(move || {
            let seed = varied_seed(&src).unwrap_or_else(|e| panic!("{e}"));
            let opts = Options { trace: false, seed: Some(seed), stages: vec!["forward".into()], ..Options::default() };
            analyse(&src, &opts).map(|a| a.reference.map(|r| r.fd_agrees))
        });
        match a {
            Ok(Some(true)) => {}
            Ok(_) => disagreements += 1,
            Err(d) => panic!("seed {seed}: {d:?}"),
        }
    }
    assert!(disagreements <= 4, "{disagreements} of 60 random array programs disagree with finite differences");
}

#[test]
fn generated_array_programs_are_varied_and_nontrivial() {
    // Guards the array generator: programs use every array operation, arrays in main's input and
    // output, nested arrays, and in-range indexing by each of its methods.
    let all: String = (0..60u64).map(|s| gen::Gen::new(s).array_program(4)).collect();
    for construct in [
        "build ", "replicate ", "map ", "map2 ", "fold ", "reduce ", "scanl ", "scanr ", "shift1L ", "shift1R ", "sum ", "length ",
        " ! ", " mod length ", "(length ", "(min ", "[[", " : Array R)", " : Array R + R)", "ahelper ", "def main (vec0", "mat",
        "let ", "case ", "if ", "\\", "fst ", "real ", "sin ", " ||| ", "let loop", "(\\(", " in map ", "let (left", "(twice ",
    ] {
        assert!(all.contains(construct), "no `{construct}` in 60 generated array programs");
    }
    // Every output shape: a real, an array, a matrix, a tuple of them.
    let outputs: Vec<String> = (0..60u64)
        .filter_map(|s| {
            let src = gen::Gen::new(s).array_program(3);
            limits::run_with_stack(move || primal(&src).ok().map(|v| v.to_string()))
        })
        .collect();
    assert_eq!(outputs.len(), 60, "every generated array program runs");
    for (what, seen) in [
        ("a real", outputs.iter().any(|o| !o.starts_with('[') && !o.starts_with('('))),
        ("an array", outputs.iter().any(|o| o.starts_with('[') && !o.starts_with("[["))),
        ("a matrix", outputs.iter().any(|o| o.starts_with("[["))),
        ("a tuple", outputs.iter().any(|o| o.starts_with('(') && o.contains('['))),
        ("an array of pairs", outputs.iter().any(|o| o.contains("[("))),
    ] {
        assert!(seen, "no output that is {what} in 60 generated array programs");
    }
}

/// `unf/back`'s gradient (UNF, D←_ρ, UNF⁻¹) against `unf/direct`'s (Fig. 5), Huot & Shaikhha's
/// Prop. 6.14, on the random programs both accept; returns how many they both ran.
fn unf_routes_agree(src: String) -> Result<bool, String> {
    limits::run_with_stack(move || {
        let seed = varied_seed(&src).ok();
        let opts = Options { trace: false, seed, stages: vec!["unf/direct".into(), "unf/back".into()], ..Options::default() };
        let a = analyse(&src, &opts).map_err(|d| format!("{d:?}\n{src}"))?;
        let [d, b] = [&a.stages[0], &a.stages[1]];
        if d.refused != b.refused {
            return Err(format!("unf/direct refused: {}, unf/back refused: {}\n{src}", d.refused, b.refused));
        }
        if d.refused {
            return Ok(false);
        }
        if !(d.ok && b.ok) {
            return Err(format!("unf/direct: {:?}, unf/back: {:?}\n{src}", d.error, b.error));
        }
        let close = d.gradient.len() == b.gradient.len()
            && d.gradient.iter().zip(&b.gradient).all(|(x, y)| x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0));
        if !close {
            return Err(format!("unf/direct {:?} but unf/back {:?}\n{src}", d.gradient, b.gradient));
        }
        Ok(true)
    })
}

#[test]
fn unf_back_computes_unf_directs_gradient_on_random_programs() {
    let mut ran = 0;
    for seed in 0..300u64 {
        let src = if seed % 2 == 0 { gen::Gen::new(seed).program(1 + (seed as usize / 2) % 3, 4) } else { gen::Gen::new(seed).array_program(3) };
        match unf_routes_agree(src) {
            Ok(true) => ran += 1,
            Ok(false) => {}
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
    eprintln!("unf/back and unf/direct ran on {ran} of 300 random programs");
    assert!(ran >= 25, "only {ran} of 300 random programs are first-order enough for the unf chain");
}

/// Random programs in Huot & Shaikhha's source language (Fig. 2): reals, arrays of reals, arrays of
/// pairs and matrices (A.5, Fig. 17: built by map, consumed by map, map2 and reduce), let
/// (with tuple patterns), tuples and projections, real primitives, map, map2 (with free variables),
/// reduce with a closed body, sum, and the extensions: conditionals (§7.2), reduce whose function reads
/// a free variable (§7.1) and fold (A.3) — the programs the unf chain accepts, to compare its two routes.
struct Fig2 {
    state: u64,
}

impl Fig2 {
    fn below(&mut self, n: u64) -> u64 {
        // splitmix64
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }

    fn pick<'a>(&mut self, xs: &'a [String]) -> &'a str {
        &xs[self.below(xs.len() as u64) as usize]
    }

    fn real(&mut self, rs: &mut Vec<String>, arrs: &mut Vec<String>, depth: usize) -> String {
        if depth == 0 {
            return match self.below(4) {
                0 => format!("{}.5", self.below(3)),
                _ => self.pick(rs).to_string(),
            };
        }
        let d = depth - 1;
        match self.below(14) {
            0 | 1 => format!("({} {} {})", self.real(rs, arrs, d), ["+", "-", "*"][self.below(3) as usize], self.real(rs, arrs, d)),
            // §7.2: a conditional on the primal
            9 => format!(
                "(if {} {} {} then {} else {})",
                self.real(rs, arrs, 0),
                ["<", ">"][self.below(2) as usize],
                self.real(rs, arrs, 0),
                self.real(rs, arrs, d),
                self.real(rs, arrs, d)
            ),
            // §7.1 (Fig. 13): reduce whose function reads a free variable (x ⊕ y = x + y + r x y is
            // associative with unit 0, as reduce requires)
            10 => {
                let r = self.pick(rs).to_string();
                format!("reduce (\\x y -> x + y + {r} * x * y) 0.0 ({})", self.array(rs, arrs, d))
            }
            // A.3 (Fig. 16): fold, whose initial value is differentiated
            11 => {
                let r = self.pick(rs).to_string();
                format!("fold (\\acc v -> acc * {r} + sin v) ({}) ({})", self.real(rs, arrs, d), self.array(rs, arrs, d))
            }
            2 => format!("{} ({})", ["sin", "cos", "tanh"][self.below(3) as usize], self.real(rs, arrs, d)),
            3 => {
                let x = format!("r{}", rs.len());
                let e1 = self.real(rs, arrs, d);
                rs.push(x.clone());
                let e2 = self.real(rs, arrs, d);
                rs.pop();
                format!("(let {x} = {e1} in {e2})")
            }
            4 => {
                let (p, q) = (format!("r{}", rs.len()), format!("r{}", rs.len() + 1));
                let e1 = format!("({}, {})", self.real(rs, arrs, d), self.real(rs, arrs, d));
                rs.push(p.clone());
                rs.push(q.clone());
                let e2 = self.real(rs, arrs, d);
                rs.truncate(rs.len() - 2);
                format!("(let ({p}, {q}) = {e1} in {e2})")
            }
            5 => format!("{} ({}, {})", ["fst", "snd"][self.below(2) as usize], self.real(rs, arrs, d), self.real(rs, arrs, d)),
            6 | 7 => {
                let (body, unit) = [("x * y", "1.0"), ("x + y", "0.0")][self.below(2) as usize];
                format!("reduce (\\x y -> {body}) {unit} ({})", self.array(rs, arrs, d))
            }
            8 => format!("sum ({})", self.array(rs, arrs, d)),
            // A.5 (Fig. 17): an array of pairs, consumed by a reduce with a closed associative body on
            // pairs (componentwise + and *, unit (0, 1)), a map or a map2
            12 => {
                let ps = self.pairs(rs, arrs, d);
                match self.below(3) {
                    0 => format!("{} (reduce (\\p q -> (fst p + fst q, snd p * snd q)) (0.0, 1.0) ({ps}))", ["fst", "snd"][self.below(2) as usize]),
                    1 => format!("sum (map (\\p -> fst p * snd p) ({ps}))"),
                    _ => format!("sum (map2 (\\p w -> w * snd p + fst p) ({ps}) ({}))", self.array(rs, arrs, d)),
                }
            }
            // A.5: a matrix as an array of arrays, mapped over rows or its rows summed by a reduce
            // starting from the zero row (ZerosLike of an input)
            13 => {
                let m = format!("map (\\x -> map (\\y -> x * y + {}) ({})) ({})", self.pick(rs).to_string(), self.array(rs, arrs, d), self.array(rs, arrs, d));
                match self.below(2) {
                    0 => format!("sum (map (\\row -> sum (map2 (\\x y -> x * y) row ({}))) ({m}))", self.array(rs, arrs, d)),
                    _ => format!("sum (reduce (\\r1 r2 -> map2 (\\x y -> x + y) r1 r2) (map (\\x -> 0.0) {}) ({m}))", self.pick(arrs)),
                }
            }
            _ => self.real(rs, arrs, 0),
        }
    }

    /// An array of pairs (A.5), from arrays of reals.
    fn pairs(&mut self, rs: &mut Vec<String>, arrs: &mut Vec<String>, d: usize) -> String {
        match self.below(2) {
            0 => format!("map (\\x -> (x * {}, sin x)) ({})", self.pick(rs).to_string(), self.array(rs, arrs, d)),
            _ => format!("map2 (\\x y -> (x * y, x)) ({}) ({})", self.array(rs, arrs, d), self.array(rs, arrs, d)),
        }
    }

    fn array(&mut self, rs: &mut Vec<String>, arrs: &mut Vec<String>, depth: usize) -> String {
        if depth == 0 {
            return self.pick(arrs).to_string();
        }
        let d = depth - 1;
        match self.below(5) {
            0 => {
                let x = format!("e{}", rs.len());
                rs.push(x.clone());
                let body = self.real(rs, &mut arrs.clone(), d.min(2));
                rs.pop();
                format!("map (\\{x} -> {body}) ({})", self.array(rs, arrs, d))
            }
            1 => {
                let (x, y) = (format!("e{}", rs.len()), format!("e{}", rs.len() + 1));
                rs.push(x.clone());
                rs.push(y.clone());
                let body = self.real(rs, &mut arrs.clone(), d.min(2));
                rs.truncate(rs.len() - 2);
                format!("map2 (\\{x} {y} -> {body}) ({}) ({})", self.array(rs, arrs, d), self.array(rs, arrs, d))
            }
            2 => {
                let b = format!("b{}", arrs.len());
                let e1 = self.array(rs, arrs, d);
                arrs.push(b.clone());
                let e2 = self.array(rs, arrs, d);
                arrs.pop();
                format!("(let {b} = {e1} in {e2})")
            }
            _ => self.pick(arrs).to_string(),
        }
    }

    fn program(&mut self, depth: usize) -> String {
        let n = self.below(4) as usize;
        let arr = |g: &mut Fig2| format!("[{}]", (0..n).map(|_| format!("{:.2}", g.below(200) as f64 / 100.0 - 1.0 + 0.005)).collect::<Vec<_>>().join(", "));
        let (a0, a1) = (arr(self), arr(self));
        let (x0, x1) = (self.below(200) as f64 / 100.0 - 1.0 + 0.005, self.below(200) as f64 / 100.0 - 0.5);
        let mut rs = vec!["x0".to_string(), "x1".to_string()];
        let mut arrs = vec!["a0".to_string(), "a1".to_string()];
        // every input is used, so its type is fixed by the program
        let body = match self.below(3) {
            0 => format!("({} + x0 * x1 + sum a0 + sum a1, {})", self.real(&mut rs, &mut arrs, depth), self.array(&mut rs, &mut arrs, depth)),
            _ => format!("{} + x0 * x1 + sum a0 + sum a1", self.real(&mut rs, &mut arrs, depth)),
        };
        format!("input ({x0:?}, {x1:?}, {a0}, {a1})\ndef main (x0, x1, a0, a1) = {body}\n")
    }
}

#[test]
fn unf_back_computes_unf_directs_gradient_on_random_fig_2_programs() {
    let mut ran = 0;
    let mut all = String::new();
    for seed in 0..200u64 {
        let src = Fig2 { state: seed }.program(1 + (seed as usize) % 4);
        all.push_str(&src);
        // every stage that accepts it agrees with forward, the UNF route among them
        if let Err(e) = limits::run_with_stack({
            let src = src.clone();
            move || agrees(&src, varied_seed(&src).ok())
        }) {
            panic!("seed {seed}: {e}");
        }
        match unf_routes_agree(src) {
            Ok(true) => ran += 1,
            Ok(false) => {}
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
    for construct in ["map2 ", "map ", "reduce ", "sum ", "let (", "fst ", "snd ", "sin ", "if ", "fold ", "* x * y) 0.0", "(0.0, 1.0)", "\\row", "\\r1 r2"] {
        assert!(all.contains(construct), "no `{construct}` in 200 generated programs");
    }
    eprintln!("unf/back and unf/direct ran on {ran} of 200 Fig. 2 programs");
    assert!(ran >= 190, "the unf chain took only {ran} of 200 programs of its own language");
}

/// Efficient CHAD §7 (`chad/arrays`) on random array programs: it takes many of them (27 of these
/// 60; the rest use recursion, `|||` or a fold whose accumulator is not of its elements' type, all
/// outside §7), and agrees with `forward` on every one it takes (with a varied output seed).
#[test]
fn chad_arrays_takes_and_agrees_on_random_array_programs() {
    let mut taken = 0;
    for s in 0..60u64 {
        let src = gen::Gen::new(s).array_program(3);
        let ran = limits::run_with_stack(move || -> Result<bool, String> {
            let seed = varied_seed(&src)?;
            let opts = Options { trace: false, seed: Some(seed), stages: vec!["chad/arrays".into()], ..Options::default() };
            let a = analyse(&src, &opts).map_err(|d| format!("{d:?}\n{src}"))?;
            let r = a.stages.iter().find(|r| r.id == "chad/arrays").ok_or("no result")?;
            if r.refused {
                return Ok(false);
            }
            if r.agrees != Some(true) {
                return Err(format!("chad/arrays: {:?} {:?}\n{src}", r.error, r.gradient));
            }
            Ok(true)
        });
        taken += usize::from(ran.unwrap_or_else(|e| panic!("{e}")));
    }
    println!("chad/arrays took {taken} of 60");
    assert!(taken >= 20, "chad/arrays took only {taken} of 60 random array programs");
}

/// The array chain's final pipeline (Part C, `arrays/bot` → `arrays/share-to-let`) on random array
/// programs: it takes those without recursion on run-time data, arrays of pairs in main's input and output included (boundary.rs),
/// local and top-level recursion a literal bounds included (unrolled), tuples inside the program included (split by the lowering: common/core/tuples.rs), sequential
/// folds and scans included (the core's scanl: common/core/fold.rs), and every stage that takes one
/// agrees with `forward` (with a varied output seed).
#[test]
fn part_c_takes_and_agrees_on_random_array_programs() {
    let (mut taken, mut with_tuples) = (0, 0);
    // the forms taken by a documented lowering (lower.rs, soa.rs), by the generator's name prefixes
    // `acc`: a sequential fold or scanl (the generator's accumulators), its body anything
    // `loop`: a local `let rec` (the generator's local recursion), unrolled as the top-level `rep` is
    // `ifd`: a fold whose accumulator pairs a real with an integer (pack.rs `int_fold`)
    // `bfd`: a fold or scanl whose accumulator pairs a real with a boolean (pack.rs `encode_bools`)
    // `mfd`: a fold or scanl whose accumulator pairs a real with a matrix (packed row-major, pack.rs),
    // or a real with a boolean over a matrix's rows (the rows more columns of the packed elements)
    let forms = ["sel", "scn", "prs", "pfd", "acc", "par", "rep", "loop", "ifd", "bfd", "mfd"];
    let mut lowered = [0usize; 11];
    // sequential scans among them, and scanr (a reversed scanl of the reversed array)
    let mut scans = 0;
    // folds and scans whose accumulator is a pair (pack.rs packs it into an array of reals)
    let mut tuple_accs = 0;
    // arrays of pairs in main's input (`prs` parameters) or output (`map2` to pairs), converted at
    // the wrapper (boundary.rs)
    let (mut pairs_io, mut pairs_ins, mut pairs_outs) = (0, 0, 0);
    // main's output a tuple nested in a tuple (boundary.rs `flat_output`)
    let mut nested_outs = 0;
    // `ifd` folds whose real reads the integer as `real k` (a column of the integers' states)
    let mut int_reads = 0;
    // `ifd` folds whose real reads the integer in a test (pack.rs `lift_int_reads`: a column of its values)
    let mut int_terms = 0;
    // `ifd` folds whose integer component is an array of integers (pack.rs: columns of the integers' row)
    let mut int_arrays = 0;
    // `ifv` folds whose real reads the array component at the integer (`v ! (k mod n)`: pack.rs
    // `real_int_reads`, a masked sum)
    let mut int_masks = 0;
    // `ifv` folds whose real reads a row of a matrix at the integer (`m ! (k mod r)`, a masked sum of the rows)
    let mut int_rows = 0;
    // `ifd` folds whose real sums a build of the integer's size (`build (k mod 3)`: the largest size, masked)
    let mut int_sizes = 0;
    // and a `real` of a `mod` of the integer and a binder (`real ((j + k) mod 2)`: a table per element and j)
    let mut int_tables = 0;
    // `ifv` folds whose real reads the integer and the integer the real (`shadow_ints`: a real copy)
    let mut each_other = 0;
    // `ifd` folds whose build of the integer's size a map meets (`fuse_sized_builds`), whose `mod`
    // reads two binders (a table over both), whose real tests the integer its step reads the real in
    let (mut int_fused, mut int_tables2, mut each_other_test) = (0, 0, 0);
    // of those, a `div` in the integer's step (int_reads.rs `rounded`: its copy brought back by `round`)
    let mut each_other_div = 0;
    // and with an array of integers among the integers (its step reading the real: `shadow_ints`)
    let mut each_other_array = 0;
    // folds and scans whose accumulator pairs a real with an array of reals (`pfv`: pack.rs packs
    // the array's elements as more columns; `ifv`: beside an integer)
    let mut array_accs = 0;
    const N: u64 = 160;
    for s in 0..N {
        let src = gen::Gen::new(s).array_core_program(3);
        let tuples = src.contains("let (p") || src.contains(" then (");
        let has: Vec<bool> = forms.iter().map(|f| src.contains(&format!("\\{f}")) || src.contains(&format!("(\\({f}")) || src.contains(&format!("({f} ")) || src.contains(&format!("(let ({f}")) || src.contains(&format!("(let {f}"))).collect();
        let scan = src.contains("(scanl (\\acc") || (src.contains("(scanr (\\x") && src.contains(" acc"));
        let tuple_acc = src.contains(" (ta") || src.contains("(\\(ta") || src.contains("(fold (\\(p");
        let int_read = src.contains("0.25 * real ifd");
        let int_term = src.contains("(if (ifd");
        let int_array = src.contains(" ! 0 + 1]");
        let int_mask = src.contains("0.25 * ifv");
        let int_row = src.contains("(\\ifm");
        let int_size = src.contains("(\\ifb");
        let int_table = src.contains("(\\ift");
        let other = src.contains("0.375 * real ifd");
        let fused = src.contains("(map (\\ift");
        let table2 = src.contains("real ((ift") && src.contains(" * ifb");
        let other_test = src.contains(" > 1 then 0.25 * ifd");
        let other_div = src.contains(" / 2)") || src.contains(" / 3)");
        let other_array = src.contains(" then [ifd");
        let array_acc = src.contains(", pfv") || src.contains(", ifv");
        let ran = part_c_run_typed(src);
        let (took, (pairs_in, pairs_out), nested) = ran.unwrap_or_else(|e| panic!("seed {s}: {e}"));
        nested_outs += usize::from(took && nested);
        int_reads += usize::from(took && int_read);
        int_terms += usize::from(took && int_term);
        int_arrays += usize::from(took && int_array);
        int_masks += usize::from(took && int_mask);
        int_rows += usize::from(took && int_row);
        int_sizes += usize::from(took && int_size);
        int_tables += usize::from(took && int_table);
        each_other += usize::from(took && other);
        int_fused += usize::from(took && fused);
        int_tables2 += usize::from(took && table2);
        each_other_test += usize::from(took && other_test);
        each_other_div += usize::from(took && other_div);
        each_other_array += usize::from(took && other_array);
        array_accs += usize::from(took && array_acc);
        pairs_io += usize::from(took && (pairs_in || pairs_out));
        pairs_ins += usize::from(took && pairs_in);
        pairs_outs += usize::from(took && pairs_out);
        taken += usize::from(took);
        with_tuples += usize::from(took && tuples);
        scans += usize::from(took && scan);
        tuple_accs += usize::from(took && tuple_acc);
        for (n, h) in lowered.iter_mut().zip(has) {
            *n += usize::from(took && h);
        }
    }
    println!("Part C took {taken} of {N} ({with_tuples} with tuples inside; by lowered form {forms:?}: {lowered:?}; {scans} with a sequential scan; {tuple_accs} with a tuple accumulator; {pairs_io} with arrays of pairs in main's input or output, {pairs_ins} of them in its input, {pairs_outs} in its output; {nested_outs} with a nested tuple output; {int_reads} whose fold's real reads its integer, {int_terms} in a test, {int_arrays} an array of integers, {int_masks} as an index of an array component, {int_rows} of a matrix's rows, {int_sizes} as a summed build's size, {int_tables} in a `mod` with a binder, {int_tables2} of them with two, {int_fused} as the size of a build a map meets, {each_other} reading each other, {each_other_test} in a test, {each_other_div} with a `div` in the step, {each_other_array} with an array of integers; {array_accs} with an array component of a tuple accumulator)");
    assert!(taken >= 20, "Part C took only {taken} of {N} random array programs");
    assert!(with_tuples >= 2, "Part C took only {with_tuples} random array programs with tuples inside");
    for (f, n) in forms.iter().zip(lowered) {
        assert!(n >= 1, "Part C took no random program with the lowered form `{f}` ({lowered:?})");
    }
    assert!(lowered.iter().sum::<usize>() >= 8, "Part C took only {lowered:?} programs with lowered forms");
    assert!(scans >= 1, "Part C took no random program with a sequential scan");
    assert!(tuple_accs >= 1, "Part C took no random program with a fold or scan over a tuple accumulator");
    assert!(int_reads >= 1, "Part C took no random program whose fold's real reads its integer component");
    assert!(int_terms >= 1, "Part C took no random program whose fold's real reads its integer component in a test");
    assert!(int_arrays >= 1, "Part C took no random program whose fold's integer component is an array of integers");
    assert!(int_masks >= 1, "Part C took no random program whose fold's real reads its array component at its integer");
    assert!(int_rows >= 1, "Part C took no random program whose fold's real reads a matrix's row at its integer");
    assert!(int_sizes >= 1, "Part C took no random program whose fold's real sums a build of its integer's size");
    assert!(each_other >= 1, "Part C took no random program whose fold's real and integer components read each other");
    assert!(int_tables >= 1, "Part C took no random program whose fold's real reads a `mod` of its integer and a binder");
    assert!(int_tables2 >= 1, "Part C took no random program whose fold's real reads a `mod` of its integer and two binders");
    assert!(int_fused >= 1, "Part C took no random program whose fold's real maps a build of its integer's size");
    assert!(each_other_test >= 1, "Part C took no random program whose fold's real tests its integer while the integer's step reads the real");
    assert!(each_other_div >= 1, "Part C took no random program whose fold's integer step has a `div` while the two read each other");
    assert!(each_other_array >= 1, "Part C took no random program whose fold's real and array of integers read each other");
    assert!(array_accs >= 1, "Part C took no random program whose fold or scan's tuple accumulator has an array component");
    assert!(nested_outs >= 2, "Part C took only {nested_outs} random programs with a nested tuple output");
    assert!(pairs_io >= 2 && pairs_ins >= 1 && pairs_outs >= 1, "Part C took {pairs_io} random programs with arrays of pairs in main's input or output, {pairs_ins} in its input, {pairs_outs} in its output");
}

const PART_C: [&str; 5] = ["arrays/bot", "arrays/dual-arrays", "arrays/symbolic", "arrays/symbolic-share", "arrays/share-to-let"];

/// Runs a generated program through Part C's stages: whether every one took it (none refused), or
/// the first that took it and did not agree with forward mode; whether main's input and output
/// types hold arrays of tuples, and whether its output is a tuple nested in a tuple.
fn part_c_run_typed(src: String) -> Result<(bool, (bool, bool), bool), String> {
    let stages: Vec<String> = PART_C.iter().map(|s| s.to_string()).collect();
    limits::run_with_stack(move || -> Result<(bool, (bool, bool), bool), String> {
        let seed = varied_seed(&src)?;
        let opts = Options { trace: false, seed: Some(seed), stages, ..Options::default() };
        let a = analyse(&src, &opts).map_err(|d| format!("{d:?}\n{src}"))?;
        let mut all = true;
        for r in &a.stages {
            if r.refused {
                all = false;
                continue;
            }
            if r.agrees != Some(true) {
                return Err(format!("{}: {:?} {:?}\n{src}", r.id, r.error, r.gradient));
            }
        }
        // an array whose element is a tuple (an array of arrays prints `Array (Array …)`)
        let soa = |t: &cotangent::ir::Type| cotangent::print::print_type(t, &PrintOptions::unicode()).replace("(Array ", "").contains("Array (");
        let nested = matches!(&a.output_type, cotangent::ir::Type::Tuple(ts) if ts.iter().any(|t| matches!(t, cotangent::ir::Type::Tuple(_))));
        Ok((all, (soa(&a.input_type), soa(&a.output_type)), nested))
    })
}

/// What Part C did with one program (`part_c_wide`).
enum Outcome {
    /// every stage took it and agreed with forward mode
    Taken,
    /// a stage refused it (the first refusal's message)
    Refused(String),
    /// `arrays/symbolic` stopped at its gradient-size budget, every other stage agreeing: without
    /// share its term grows as 2^m (§7.2, E11), by design stopped at `MAX_TERM`
    Stopped(String),
    /// a stage failed or disagreed with forward mode
    Failed(String),
}

/// `part_c_run_typed`'s run, its result told apart as `Outcome`.
fn part_c_outcome(src: String) -> Outcome {
    let stages: Vec<String> = PART_C.iter().map(|s| s.to_string()).collect();
    limits::run_with_stack(move || -> Outcome {
        let seed = match varied_seed(&src) {
            Ok(s) => s,
            Err(e) => return Outcome::Failed(e),
        };
        let opts = Options { trace: false, seed: Some(seed), stages, ..Options::default() };
        let a = match analyse(&src, &opts) {
            Ok(a) => a,
            Err(d) => return Outcome::Failed(format!("{d:?}\n{src}")),
        };
        let (mut refused, mut stopped) = (None, None);
        for r in &a.stages {
            let why = r.error.clone().unwrap_or_default();
            if r.refused {
                refused.get_or_insert(format!("{}: {why}", r.id));
            } else if r.id == "arrays/symbolic" && why.starts_with("stopped: the gradient term passed") && why.contains("budget") {
                stopped.get_or_insert(format!("{}: {why}", r.id));
            } else if r.agrees != Some(true) {
                return Outcome::Failed(format!("{}: {:?} {:?}\n{src}", r.id, r.error, r.gradient));
            }
        }
        match (refused, stopped) {
            (Some(w), _) => Outcome::Refused(w),
            (None, Some(w)) => Outcome::Stopped(w),
            (None, None) => Outcome::Taken,
        }
    })
}

/// The Part C property test over a wide range of generator seeds (`PART_C_SEEDS=from..to`, default
/// 0..2000), collecting every failure instead of stopping at the first: run by hand
/// (`cargo test --release -p cotangent --test properties part_c_wide -- --ignored --nocapture`).
#[test]
#[ignore]
fn part_c_wide() {
    let range = std::env::var("PART_C_SEEDS").unwrap_or_else(|_| "0..2000".into());
    let (from, to) = range.split_once("..").map(|(a, b)| (a.parse::<u64>().unwrap(), b.parse::<u64>().unwrap())).unwrap();
    let dump = std::env::var("PART_C_DUMP").ok();
    let (mut taken, mut failures, mut refused, mut stopped) = (0, Vec::new(), Vec::new(), Vec::new());
    for s in from..to {
        let src = gen::Gen::new(s).array_core_program(3);
        if let Some(d) = &dump {
            std::fs::write(format!("{d}/seed{s}.cot"), &src).unwrap();
        }
        match part_c_outcome(src) {
            Outcome::Taken => taken += 1,
            Outcome::Refused(why) => refused.push(format!("seed {s}: {why}")),
            Outcome::Stopped(why) => stopped.push(format!("seed {s}: {why}")),
            Outcome::Failed(e) => failures.push(format!("seed {s}: {e}")),
        }
    }
    println!("Part C (wide, seeds {from}..{to}) took {taken} of {}; {} refused, {} stopped by a budget, {} failures", to - from, refused.len(), stopped.len(), failures.len());
    for r in refused.iter().chain(&stopped) {
        println!("not taken: {}", r.chars().take(400).collect::<String>());
    }
    for f in &failures {
        println!("--- {f}");
    }
    assert!(failures.is_empty(), "{} failures", failures.len());
}
