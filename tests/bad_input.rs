//! Broken programs and their located messages. None may panic; each message names the place
//! (`file:line:col`), shows the line, and puts a caret under the culprit.

use cotangent::diag::render;
use cotangent::limits::run_with_stack;
use cotangent::pipeline::{analyse, Options};

/// (what, program, `--at` override, expected `line:col` (or `--at:line:col` for a place in the
/// `--at` text), expected message fragment)
const CASES: &[(&str, &str, Option<&str>, &str, &str)] = &[
    ("unbalanced parenthesis", "input 1.0\ndef main x =\n  (x + 1.0\n", None, "", "`)`"),
    ("unknown name", "input 1.0\ndef main x = x + y\n", None, "2:18", "unknown name `y`"),
    ("type mismatch R and Z", "input 1.0\ndef main x = sin x * 2\n", None, "2:22", "expected R, found Z"),
    ("if branches disagree", "input 1.0\ndef main x = if x > 0.0 then x else (x, x)\n", None, "2:37", "type mismatch: expected R, found (R, R)"),
    ("condition not Bool", "input 1.0\ndef main x = if sin x then x else x\n", None, "2:17", "expected Bool, found R"),
    ("applying a non-function", "input 1.0\ndef main x = let y = 2.0 in y x\n", None, "2:29", "not a function"),
    ("main takes a function", "input 1.0\ndef main x = x 3.0\n", None, "2:1", "first-order"),
    ("main not first-order", "input 1.0\ndef main x = \\y -> x * y\n", None, "2:1", "first-order"),
    // located at the end of the last line, where a `def main` would go
    ("main missing", "input 1.0\ndef f x = x\n", None, "2:12", "no `def main`"),
    // located at `def main`, whose input it is
    ("no input point", "\ndef main x = x * x\n", None, "2:1", "no input point"),
    ("input of the wrong type", "input (1.0, 2.0)\ndef main x = x * x\n", None, "1:7", "does not have main's input type"),
    ("--at of the wrong type", "input 1.0\ndef main x = x * x\n", Some("(1.0, 2.0)"), "--at:1:1", "`(1.0, 2.0)`: does not have type R"),
    ("--at with an unknown name", "input 1.0\ndef main x = x * x\n", Some("(1.0,  y)"), "--at:1:8", "unknown name `y`"),
    ("--at that does not parse", "input 1.0\ndef main x = x * x\n", Some("  1.0 +"), "--at:1:8", ""),
    ("--at not a constant", "input 1.0\ndef main x = x * x\n", Some("sin 1.0"), "--at:1:1", ""),
    ("integer division by zero", "input 1.0\ndef main x = real (1 / (2 - 2)) * x\n", None, "2:19", "division by zero"),
    ("integer overflow", "input 1.0\ndef main x = real (9223372036854775807 + 1) * x\n", None, "2:19", "integer overflow"),
    // the program's own budget stops are located at the application that was running
    ("runaway recursion", "input 1.0\ndef f x = f x\ndef main x = f x\n", None, "2:11", "running the program: stopped: the steps budget"),
    ("deep runaway recursion", "input 1.0\ndef f x = 1.0 + f x\ndef main x = f x\n", None, "2:", "depth budget"),
    ("empty file", "", None, "1:1", "the program is empty"),
    ("no main", "input 1.0\ndef f x = x\n\n\n", None, "2:12", "no `def main`"),
    ("junk after a definition", "input 1.0\ndef main x = x )\n", None, "2:16", ""),
    ("chained comparison", "input 1.0\ndef main x = if 0.0 < x < 1.0 then x else x\n", None, "2:", ""),
    ("missing in", "input 1.0\ndef main x = let y = x\n", None, "", "in"),
    ("fst of a non-pair", "input 1.0\ndef main x = fst (sin x)\n", None, "2:18", "type mismatch"),
    ("case on a non-sum", "input 1.0\ndef main x = case sin x of inl a -> a | inr b -> b\n", None, "2:19", "type mismatch"),
    ("mod on reals", "input 1.0\ndef main x = x mod 2.0\n", None, "2:20", "expected Z, found R"),
    ("floor of an integer", "input 1.0\ndef main x = floor 3 * x\n", None, "2:20", "expected R, found Z"),
    ("** on integers", "input 1.0\ndef main x = real (2 ** 3) * x\n", None, "2:20", "expected R, found Z"),
    ("min of booleans", "input 1.0\ndef main x = if min true false then x else x\n", None, "2:17", "`min` works on R and Z, not on Bool"),
    ("log1p of a pair", "input (1.0, 2.0)\ndef main x = log1p (1.0, 2.0) * fst x\n", None, "2:20", "expected R, found (R, R)"),
    ("sigmoid redefined", "input 1.0\ndef sigmoid x = x\ndef main x = x\n", None, "2:5", "`sigmoid` is built in"),
    ("duplicate definition", "input 1.0\ndef main x = x\ndef main x = x\n", None, "3:", "twice"),
    ("bad number", "input 1.0\ndef main x = x * 1.0e\n", None, "2:", ""),
    ("stray character", "input 1.0\ndef main x = x $ x\n", None, "2:16", ""),
    ("seed of the wrong type", "input 1.0\nseed (1.0, 2.0)\ndef main x = x * x\n", None, "2:6", "the seed (1.0, 2.0) does not have main's output type R"),
    ("seed of the wrong length", "input [1.0]\nseed [1.0, 2.0]\ndef main a = map (\\x -> x) a\n", None, "2:6", "has 2 elements where main's output [1.0] has 1"),
    ("seed twice", "input 1.0\nseed 1.0\nseed 2.0\ndef main x = x\n", None, "3:1", "`seed` is given twice"),
    ("seed not a constant", "input 1.0\nseed sin 1.0\ndef main x = x\n", None, "2:6", ""),
    ("and without let", "input 1.0\ndef main x = x and x\n", None, "2:16", "`and`"),
];

/// Array errors (issue 9): (what, program, `--at` override, the whole rendered message: place,
/// message, the line and the caret under the culprit).
const ARRAY_CASES: &[(&str, &str, Option<&str>, &str)] = &[
    (
        "index out of range",
        "input [1.0, 2.0]\ndef main a = a ! 2 * 3.0\n",
        None,
        "bad.cot:2:14: error: index 2 is out of range for an array of length 2\n    2 | def main a = a ! 2 * 3.0\n      |              ^^^^^\n",
    ),
    (
        "negative index",
        "input [1.0, 2.0]\ndef main a = a ! (0 - 1) * 3.0\n",
        None,
        "bad.cot:2:14: error: index -1 is out of range for an array of length 2\n    2 | def main a = a ! (0 - 1) * 3.0\n      |              ^^^^^^^^^^^\n",
    ),
    (
        "map2 on arrays of different lengths",
        "input [1.0, 2.0]\ndef main a = sum (map2 (\\x y -> x * y) a (shift1L a))\n",
        None,
        "bad.cot:2:18: error: `map2` on arrays of different lengths (2 and 1)\n    2 | def main a = sum (map2 (\\x y -> x * y) a (shift1L a))\n      |                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n",
    ),
    (
        "negative build size",
        "input 1.0\ndef main x = sum (build 3 (\\i -> x)) + sum (build (0 - 2) (\\i -> x))\n",
        None,
        "bad.cot:2:44: error: `build`: negative size -2\n    2 | def main x = sum (build 3 (\\i -> x)) + sum (build (0 - 2) (\\i -> x))\n      |                                            ^^^^^^^^^^^^^^^^^^^^^^^^^\n",
    ),
    (
        "literal with elements of different types",
        "input 1.0\ndef main x = sum [1.0, 2] * x\n",
        None,
        "bad.cot:2:24: error: type mismatch: expected R, found Z (write a real literal with a point, e.g. `2.0`, or convert with `real`)\n    2 | def main x = sum [1.0, 2] * x\n      |                        ^\n",
    ),
    (
        "ragged input",
        "input [[1.0, 2.0], [3.0]]\ndef main m = sum (map sum m)\n",
        None,
        "bad.cot:1:20: error: the input [[1.0, 2.0], [3.0]]: ragged array: row 1 has length 1, but row 0 has length 2 (the rows of an array of arrays all have one length)\n    1 | input [[1.0, 2.0], [3.0]]\n      |                    ^^^^^\n",
    ),
    (
        "ragged inner array of an input",
        "input ([[[1.0], [2.0]], [[3.0], [4.0, 5.0]]], 2.0)\ndef main (m, x) = x\n",
        None,
        "bad.cot:1:33: error: the input ([[[1.0], [2.0]], [[3.0], [4.0, 5.0]]], 2.0): ragged array: row 1 has length 2, but row 0 has length 1 (the rows of an array of arrays all have one length)\n    1 | input ([[[1.0], [2.0]], [[3.0], [4.0, 5.0]]], 2.0)\n      |                                 ^^^^^^^^^^\n",
    ),
    (
        "ragged --at",
        "input [[1.0, 2.0], [3.0, 4.0]]\ndef main m = sum (map sum m)\n",
        Some("[[1.0], [2.0, 3.0, 4.0]]"),
        "--at:1:9: error: the input point `[[1.0], [2.0, 3.0, 4.0]]`: ragged array: row 1 has length 3, but row 0 has length 1 (the rows of an array of arrays all have one length)\n    1 | [[1.0], [2.0, 3.0, 4.0]]\n      |         ^^^^^^^^^^^^^^^\n",
    ),
    (
        "huge build",
        "input 1.0\ndef main x = sum (build 1000000000000 (\\i -> 1.0)) * x\n",
        None,
        "bad.cot:2:18: error: running the program: stopped: the allocs budget (50000000) ran out after 5 steps, 0 real ops, 1000000000001 allocations, depth 1\n    2 | def main x = sum (build 1000000000000 (\\i -> 1.0)) * x\n      |                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n",
    ),
    (
        "huge replicate",
        "input 1.0\ndef main x = sum (replicate 1000000000000 x)\n",
        None,
        "bad.cot:2:18: error: running the program: stopped: the allocs budget (50000000) ran out after 4 steps, 0 real ops, 1000000000000 allocations, depth 1\n    2 | def main x = sum (replicate 1000000000000 x)\n      |                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^\n",
    ),
    (
        "unmatched [",
        "input [1.0\ndef main x = sum x\n",
        None,
        "bad.cot:2:1: error: expected `]` to close the `[` opened at line 1, found `def`\n    2 | def main x = sum x\n      | ^^^\n",
    ),
    (
        "unmatched [ at the end",
        "input 1.0\ndef main x = sum [1.0, x\n",
        None,
        "bad.cot:3:1: error: unexpected end of input: expected `]` to close the `[` opened at line 2\n    3 | \n      | ^\n",
    ),
    (
        "unmatched ]",
        "input 1.0\ndef main x = sum [1.0, x] ]\n",
        None,
        "bad.cot:2:27: error: unmatched `]`: no `[` is open here\n    2 | def main x = sum [1.0, x] ]\n      |                           ^\n",
    ),
];

/// The rendered diagnostics of a program that fails before any stage runs, or None if it runs.
fn rendered(src: &'static str, at: Option<&'static str>) -> Option<String> {
    run_with_stack(move || {
        let opts = Options { at: at.map(str::to_string), trace: false, ..Options::default() };
        match analyse(src, &opts) {
            Ok(_) => None,
            Err(ds) => Some(
                ds.iter()
                    .map(|d| match &d.origin {
                        Some((name, text)) => render(name, text, d),
                        None => render("bad.cot", src, d),
                    })
                    .collect::<String>(),
            ),
        }
    })
}

#[test]
fn array_errors_get_exact_located_messages() {
    let mut failures = vec![];
    for &(what, src, at, want) in ARRAY_CASES {
        match rendered(src, at) {
            Some(got) if got == want => {}
            got => failures.push(format!("{what}: expected\n{want}got\n{}", got.unwrap_or_else(|| "(accepted)\n".into()))),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn broken_programs_get_located_messages_and_never_panic() {
    let mut failures = vec![];
    for &(what, src, at, line_col, fragment) in CASES {
        let Some(rendered) = rendered(src, at) else {
            failures.push(format!("{what}: accepted, expected an error"));
            continue;
        };
        let first = rendered.lines().next().unwrap_or("");
        let place = if line_col.starts_with("--") { line_col.to_string() } else { format!("bad.cot:{line_col}") };
        let located = line_col.is_empty() || first.starts_with(&place);
        if !located || !rendered.contains(fragment) || !first.contains("error:") {
            failures.push(format!("{what}: expected bad.cot:{line_col} … {fragment:?}, got:\n{rendered}"));
        }
        if !line_col.is_empty() && !rendered.contains('^') {
            failures.push(format!("{what}: no caret in:\n{rendered}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn deep_programs_are_run_or_stopped_by_a_budget() {
    // A 10^5-deep let chain runs (natively the pipeline has a big stack; the interpreter none).
    let mut src = String::from("input 1.0\ndef main x0 =\n");
    for i in 1..=100_000 {
        src.push_str(&format!("  let x{i} = x{} * 1.0000001 in\n", i - 1));
    }
    src.push_str("  x100000\n");
    let r = run_with_stack(move || analyse(&src, &Options { trace: false, stages: vec!["forward".into()], ..Options::default() }).map(|a| a.stages[0].agrees));
    assert_eq!(r.map_err(|d| format!("{d:?}")), Ok(Some(true)));
    // Recursion 10^6 deep in the interpreted program: run within, or stopped by, the depth budget.
    let src = "input 1.0\ndef f n x = if n == 0 then x else x + f (n - 1) x\ndef main x = f 1000000 x\n";
    let r = run_with_stack(move || analyse(src, &Options { trace: false, stages: vec!["forward".into()], ..Options::default() }).map(|a| a.primal.as_real()));
    match r {
        Ok(v) => assert_eq!(v, Some(1000001.0)),
        Err(ds) => assert!(ds[0].message.contains("budget"), "{:?}", ds),
    }
}

#[test]
fn a_construct_a_stage_refuses_gets_a_located_reason() {
    // krawiec/monadic's wrapper (Fig. 11) is given for R^a → R only; a sum in the input is refused,
    // at `main`, pointing to the stage that handles it, while the other stages still run.
    let src = "input (inl 2.0, 3.0)\ndef main (s, y) = case s of inl x -> x * y | inr z -> z\n";
    let (refused, span, error, general_agrees) = run_with_stack(move || {
        let a = analyse(src, &Options { trace: false, ..Options::default() }).expect("analyses");
        let r = a.stages.iter().find(|r| r.id == "krawiec/monadic").expect("registered");
        let general = a.stages.iter().find(|r| r.id == "krawiec/general").expect("registered");
        (r.refused, r.error_span, r.error.clone(), general.agrees)
    });
    assert!(refused, "{error:?}");
    assert_eq!(general_agrees, Some(true));
    let d = cotangent::diag::Diagnostic::error(span.expect("located"), error.unwrap()).in_stage("krawiec/monadic");
    let text = render("bad.cot", src, &d);
    assert!(text.starts_with("bad.cot:2:1: error: [krawiec/monadic] "), "{text}");
    assert!(text.contains("krawiec/general") && text.contains('^'), "{text}");
}

// 250,000 nested parentheses need the release build's stack frames (a debug build's are ~45 kB each).
#[test]
#[cfg_attr(debug_assertions, ignore = "needs release-sized stack frames")]
fn each_parenthesis_is_one_nesting_level() {
    // The `nesting` budget counts brackets: max_nesting() parentheses parse, one more does not.
    let max = cotangent::limits::max_nesting();
    let parens = |n: usize| format!("input 1.0\ndef main x = {}x{}\n", "(".repeat(n), ")".repeat(n));
    let (ok, too_deep) = run_with_stack(move || {
        let ok = cotangent::syntax::parse_program(&parens(max - 1)).map(|_| ()).map_err(|d| d[0].message.clone());
        let too_deep = cotangent::syntax::parse_program(&parens(max + 1)).map(|_| ()).map_err(|d| d[0].message.clone());
        (ok, too_deep)
    });
    assert_eq!(ok, Ok(()));
    assert!(too_deep.is_err_and(|m| m.contains("nesting")));
}

#[test]
fn deeply_nested_programs_print_in_linear_space_and_rewrites_stop_at_their_budget() {
    // `x + x + … + x` (3000 terms, left-nested): forward's output nests 3000 lets deep. Indentation
    // is capped (print::MAX_INDENT), so the printed program grows linearly (uncapped: 81 MB here).
    let src = format!("input 1.5\ndef main x = {}\n", vec!["x"; 3000].join(" + "));
    let (printed, agrees, pe_error) = run_with_stack(move || {
        let a = analyse(&src, &Options { trace: false, stages: vec!["forward".into(), "unf/pe".into()], ..Options::default() }).expect("analyses");
        let fwd = a.stages.iter().find(|r| r.id == "forward").expect("ran");
        let pe = a.stages.iter().find(|r| r.id == "unf/pe").expect("ran");
        (fwd.program.len(), fwd.agrees, pe.error.clone())
    });
    assert_eq!(agrees, Some(true));
    assert!(printed < 3000 * 1500, "{printed} bytes for 3000 terms");
    assert!(printed > 3000 * 20, "the whole program is printed: {printed} bytes");
    // unf/pe's rewrite is quadratic in visits on this program: it stops at the engine's budget.
    let e = pe_error.expect("stopped");
    assert!(e.contains("the rewrite visits budget"), "{e}");
}

#[test]
fn a_rewrite_quadratic_in_its_rules_walks_stops_at_its_budget_located() {
    // `sin (sin (… x))` 4000 deep: unf/pe visits ~17 nodes a level, but each continuation it inlines
    // renames through all those inlined before it, so its rules walk Θ(n²) nodes. Those walks count
    // against the visits budget (kit::rewrite::charge); uncounted, this ran to the end (and 10,000
    // deep ran over a minute). The stop points at `def main`.
    let src = format!("input 0.5\ndef main x = {}x{}\n", "sin (".repeat(4000), ")".repeat(4000));
    let (error, span) = run_with_stack(move || {
        let a = analyse(&src, &Options { trace: false, stages: vec!["unf/pe".into()], ..Options::default() }).expect("analyses");
        let pe = a.stages.iter().find(|r| r.id == "unf/pe").expect("ran");
        (pe.error.clone(), pe.error_span)
    });
    let e = error.expect("stopped");
    assert!(e.contains("the rewrite visits budget") && e.contains("nodes walked by the rules"), "{e}");
    let span = span.expect("located");
    assert_eq!(span.start, "input 0.5\n".len() as u32, "at `def main`: {span:?}");
}
