//! Property tests on random well-typed programs (tests/gen): the printer round-trips, and every
//! stage agrees with `forward` at random points.

mod gen;

use cotangent::pipeline::{analyse, Options};
use cotangent::print::{print_program, PrintOptions};
use cotangent::{limits, syntax};
use proptest::prelude::*;

fn roundtrip(src: &str) -> Result<(), String> {
    let p = syntax::parse_program(src).map_err(|d| format!("{d:?}"))?;
    for opts in [PrintOptions::unicode(), PrintOptions::ascii(), PrintOptions { width: 30, ..PrintOptions::ascii() }] {
        let once = print_program(&p, &opts);
        let again = syntax::parse_program(&once).map_err(|d| format!("printed program does not parse: {d:?}\n{once}"))?;
        let twice = print_program(&again, &opts);
        if once != twice {
            return Err(format!("print(parse(print(p))) != print(p)\n--- once\n{once}\n--- twice\n{twice}"));
        }
    }
    Ok(())
}

fn agrees(src: &str) -> Result<(), String> {
    let a = analyse(src, &Options { trace: false, ..Options::default() }).map_err(|d| format!("{d:?}\n{src}"))?;
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
        let r = limits::run_with_stack(move || agrees(&src));
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
