//! Cross-cutting checks over the whole registry: every stage copes with what any source may do.

use cotangent::limits::run_with_stack;
use cotangent::pipeline::{analyse, Options};
use cotangent::stage::RESERVED;

/// Every stage that does not refuse the program agrees with forward; returns the ids that ran.
fn all_agree(src: String) -> Vec<String> {
    run_with_stack(move || {
        let a = analyse(&src, &Options { trace: false, ..Options::default() }).unwrap_or_else(|d| panic!("{d:?}\n{src}"));
        let mut ran = vec![];
        for r in &a.stages {
            if r.refused {
                continue;
            }
            assert!(r.error.is_none(), "{}: {:?}\n{src}", r.id, r.error);
            assert_eq!(r.agrees, Some(true), "{} disagrees\n{src}", r.id);
            ran.push(r.id.clone());
        }
        ran
    })
}

#[test]
fn user_definitions_named_like_generated_ones_are_renamed_not_clashed() {
    let mut src = String::from("input (1.5, 2.5)\n");
    for name in RESERVED {
        src.push_str(&format!("def {name} x = x * 2.0\n"));
    }
    let uses: Vec<String> = RESERVED.iter().map(|n| format!("{n} x")).collect();
    src.push_str(&format!("def main (x, y) = y * ({})\n", uses.join(" + ")));
    let ran = all_agree(src);
    assert!(ran.len() >= 10, "only {ran:?} ran");
}

#[test]
fn a_main_that_is_not_a_lambda_works_on_every_stage() {
    let src = "input 1.5\ndef sq x = x * x\ndef compose f g x = f (g x)\ndef main = compose sq sin\n".to_string();
    let ran = all_agree(src);
    assert!(ran.len() >= 10, "only {ran:?} ran");
}

#[test]
fn a_long_straight_line_program_runs_on_every_stage() {
    let mut src = String::from("input (0.5, 0.25)\ndef main (x, y) =\n  let a0 = x in\n");
    for i in 1..=3000 {
        src.push_str(&format!("  let a{i} = a{} * 0.999 + y * 0.001 in\n", i - 1));
    }
    src.push_str("  a3000\n");
    let ran = all_agree(src);
    assert!(ran.iter().any(|s| s == "krawiec/monadic") && ran.iter().any(|s| s == "dualrev/tape"), "{ran:?}");
}
