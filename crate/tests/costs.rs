//! Every counter of every stage on every example, against golden values: the interpreter's and the
//! stage runtimes' bookkeeping (`steps`, `real_ops`, `allocs`, `max_depth`, each stage's own counters)
//! stays exact when their implementation changes (issue 13: counters by index, states in slots).

use cotangent::limits::run_with_stack;
use cotangent::pipeline::{analyse, Options};
use std::fmt::Write;

#[path = "../../tests/example_files.rs"]
mod example_files;
use example_files::examples;

#[test]
fn every_counter_of_every_stage_on_every_example() {
    let mut all = String::new();
    for (name, text) in examples() {
        let rows = run_with_stack(move || {
            analyse(&text, &Options { trace: false, ..Options::default() }).map(|a| {
                a.stages
                    .iter()
                    .filter(|r| !r.refused)
                    .map(|r| {
                        let c = &r.cost;
                        let mut line = format!("{} steps={} real_ops={} allocs={} max_depth={}", r.id, c.steps, c.real_ops, c.allocs, c.max_depth);
                        for (k, v) in &c.counters {
                            let _ = write!(line, " {k}={v}");
                        }
                        line
                    })
                    .collect::<Vec<_>>()
            })
        })
        .unwrap_or_else(|d| panic!("{name}: {d:?}"));
        let _ = writeln!(all, "# {name}");
        for r in rows {
            let _ = writeln!(all, "{r}");
        }
    }
    assert!(all.lines().count() > 500, "too few rows: every example should run on most stages");
    insta::assert_snapshot!(all);
}
