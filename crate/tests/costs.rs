//! Every counter of every stage on every example, against golden values: the interpreter's and the
//! stage runtimes' bookkeeping (`steps`, `real_ops`, `allocs`, `max_depth`, each stage's own counters)
//! stays exact when their implementation changes (issue 13: counters by index, states in slots).

use cotangent::limits::run_with_stack;
use cotangent::pipeline::{analyse, Options};
use std::fmt::Write;

#[path = "../../tests/example_files.rs"]
mod example_files;
use example_files::examples;

/// Each stage's row: its counters, and (for the comparison below, not the snapshot) its outcome.
fn rows(text: &str, opts: &Options) -> Result<Vec<(String, String)>, Vec<cotangent::diag::Diagnostic>> {
    analyse(text, opts).map(|a| {
        a.stages
            .iter()
            .filter(|r| !r.refused)
            .map(|r| {
                let c = &r.cost;
                let mut line = format!("{} steps={} real_ops={} allocs={} max_depth={}", r.id, c.steps, c.real_ops, c.allocs, c.max_depth);
                for (k, v) in &c.counters {
                    let _ = write!(line, " {k}={v}");
                }
                (line, format!("{:?} {:?} {:?} {:?}", r.status, r.gradient, r.agrees, r.error))
            })
            .collect::<Vec<_>>()
    })
}

#[test]
fn every_counter_of_every_stage_on_every_example() {
    let mut all = String::new();
    for (name, text) in examples() {
        let (shown, unshown) = run_with_stack(move || {
            let shown = rows(&text, &Options { trace: false, ..Options::default() });
            // as the page runs the stages it does not show: not printed, no views or step texts
            let unshown = rows(&text, &Options { trace: false, traced: Some(vec![]), ..Options::default() });
            (shown, unshown)
        });
        let shown = shown.unwrap_or_else(|d| panic!("{name}: {d:?}"));
        // a stage not shown runs, counts and agrees exactly as when it is shown
        assert_eq!(Ok(&shown), unshown.as_ref(), "{name}: a stage not shown ran differently");
        let _ = writeln!(all, "# {name}");
        for (r, _) in shown {
            let _ = writeln!(all, "{r}");
        }
    }
    assert!(all.lines().count() > 500, "too few rows: every example should run on most stages");
    insta::assert_snapshot!(all);
}
