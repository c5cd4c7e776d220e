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
        "floor ", "sinh ", "cosh ", "erf ", "log1p ", "expm1 ", "sigmoid ", " : R)", " : R + (R, Z))", ", -",
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
