//! Every example on every stage: each stage that accepts it agrees with `forward`, the `expect`
//! directives hold, and each stage's printed program matches its golden snapshot.

use cotangent::limits::run_with_stack;
use cotangent::pipeline::{analyse, check_expects, Options};

#[path = "example_files.rs"]
mod example_files;
use example_files::examples;

#[test]
fn there_are_examples_and_each_names_its_source_and_expects_a_gradient() {
    let ex = examples();
    assert!(ex.len() >= 7, "only {} examples", ex.len());
    for (name, text) in &ex {
        assert!(text.trim_start().starts_with("--"), "{name}: must start with a comment naming its source");
        assert!(text.contains("expect grad"), "{name}: must carry an `expect grad` directive");
    }
}

#[test]
fn every_example_agrees_on_every_stage_and_meets_its_expectations() {
    for (name, text) in examples() {
        let a = run_with_stack(move || analyse(&text, &Options { trace: false, ..Options::default() }).map(|a| {
            let failures = check_expects(&a);
            let stages: Vec<(String, Option<String>, bool, Option<bool>)> =
                a.stages.iter().map(|r| (r.id.clone(), r.error.clone(), r.refused, r.agrees)).collect();
            (failures, stages, a.reference.map(|r| r.fd_agrees))
        }));
        let (failures, stages, fd) = a.unwrap_or_else(|d| panic!("{name}: {d:?}"));
        assert_eq!(fd, Some(true), "{name}: forward disagrees with finite differences");
        assert!(failures.is_empty(), "{name}: {failures:?}");
        for (id, error, refused, agrees) in stages {
            match error {
                // a located refusal of a construct the stage cannot take is allowed
                Some(e) => assert!(refused, "{name}: stage {id} failed after transforming: {e}"),
                None => assert_eq!(agrees, Some(true), "{name}: stage {id} disagrees with forward"),
            }
        }
    }
}

#[test]
fn golden_programs_of_every_stage() {
    for (name, text) in examples() {
        let stages = run_with_stack(move || {
            analyse(&text, &Options { trace: false, ..Options::default() })
                .map(|a| a.stages.into_iter().map(|r| (r.id, r.program)).collect::<Vec<_>>())
        })
        .unwrap_or_else(|d| panic!("{name}: {d:?}"));
        for (id, program) in stages {
            if program.is_empty() {
                continue; // refused
            }
            insta::assert_snapshot!(format!("{name}__{}", id.replace('/', "-")), program);
        }
    }
}
