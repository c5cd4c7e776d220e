//! The `cotangent` command, end to end: output formats, exit codes, located errors.

use std::io::Write;
use std::process::{Command, Stdio};

fn cot(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cotangent"));
    cmd.args(args).current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run cotangent");
    if let Some(s) = stdin {
        child.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn stages_lists_id_paper_title_with_forward_first() {
    let (code, out, _) = cot(&["stages"], None);
    assert_eq!(code, 0);
    let stage_lines: Vec<&str> = out.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let cols: Vec<&str> = stage_lines[0].split('\t').collect();
    assert_eq!(cols.len(), 3, "{}", stage_lines[0]);
    assert_eq!(cols[0], "forward");
    assert!(stage_lines.iter().all(|l| l.split('\t').count() == 3));
    // grouped by chain, each under its `# id: title` line, in the registry's order
    let chains: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("# ")).map(|l| l.split(':').next().unwrap()).collect();
    assert_eq!(chains, cotangent::stages::CHAINS.iter().map(|c| c.id).collect::<Vec<_>>());
    let n: usize = cotangent::stages::CHAINS.iter().map(|c| c.stages.len()).sum();
    assert_eq!(stage_lines.len(), n);
}

#[test]
fn run_json_gives_the_running_example_gradient() {
    let (code, out, err) = cot(&["run", "examples/running-example.cot", "--json"], None);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["input"], serde_json::json!([12.0, 13.0]));
    assert_eq!(doc["primal"], serde_json::json!(300.0));
    assert_eq!(doc["reference"]["gradient"], serde_json::json!([37.0, 12.0]));
    let stages = doc["stages"].as_array().unwrap();
    assert!(!stages.is_empty());
    for s in stages {
        assert!(s["id"].is_string() && s["program"].is_string() && s["cost"]["steps"].is_u64() && s["cost"]["real_ops"].is_u64());
        if s["ok"] == true {
            assert_eq!(s["gradient"], serde_json::json!([37.0, 12.0]), "{}", s["id"]);
            assert_eq!(s["agrees"], true);
            assert_eq!(s["status"], "agrees", "{}", s["id"]);
        } else {
            assert!(["refused", "budget", "error"].contains(&s["status"].as_str().unwrap()), "{}", s["status"]);
        }
        // unf/source, arrays/bot and chad/cc are same-function stages (main is compared, forward mode gives the gradient)
        assert!(s["contract"] == "gradient" || (s["contract"] == "same-function" && ["unf/source", "arrays/bot", "chad/cc"].contains(&s["id"].as_str().unwrap())), "{}", s["id"]);
    }
}

#[test]
fn run_reads_stdin_and_takes_at_seed_and_params() {
    let src = "param n = 2\ndef main (x, y) = x * y * real n\n";
    let (code, out, err) = cot(&["run", "-", "--stage", "forward", "--at", "(2.0, 5.0)", "--seed", "10.0", "--param", "n=3", "--json"], Some(src));
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["primal"], serde_json::json!(30.0));
    assert_eq!(doc["reference"]["gradient"], serde_json::json!([150.0, 60.0]));
}

#[test]
fn integer_leaves_have_no_gradient_entry_and_sums_are_json_objects() {
    let (code, out, err) = cot(&["run", "examples/sum-input-output.cot", "--stage", "forward", "--json"], None);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["input"], serde_json::json!([{"inl": 2.0}, 3.0]));
    assert_eq!(doc["primal"], serde_json::json!({"inl": [6.0, 2]}));
    assert_eq!(doc["reference"]["gradient"], serde_json::json!([3.0, 2.0]));
}

#[test]
fn a_syntax_error_is_located_with_line_and_caret_and_exits_2() {
    let (code, out, err) = cot(&["run", "-"], Some("def main x =\n  (x + 1.0\n"));
    assert_eq!(code, 2);
    assert!(out.is_empty());
    let first = err.lines().next().unwrap();
    assert!(first.starts_with("<stdin>:"), "{err}");
    assert!(first.contains(": error: "), "{err}");
    assert!(err.contains('^'), "{err}");
}

#[test]
fn a_type_error_is_located() {
    let (code, _, err) = cot(&["run", "-", "--at", "1.0"], Some("def main x = sin x * 2\n"));
    assert_eq!(code, 2);
    assert!(err.starts_with("<stdin>:1:"), "{err}");
    assert!(err.contains("R") && err.contains("Z"), "{err}");
}

#[test]
fn a_runaway_program_stops_at_a_named_budget() {
    let (code, _, err) = cot(&["run", "-", "--at", "1.0", "--max-steps", "100000"], Some("def f x = f x\ndef main x = f x\n"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("budget"), "{err}");
}

#[test]
fn check_passes_on_all_examples() {
    let files: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
        .unwrap()
        .map(|e| format!("examples/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|f| f.ends_with(".cot"))
        .collect();
    let args: Vec<&str> = std::iter::once("check").chain(files.iter().map(String::as_str)).collect();
    let (code, out, err) = cot(&args, None);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!out.contains("DISAGREES") && !out.contains("FAILED"), "{out}");
}

#[test]
fn check_fails_on_a_wrong_expectation() {
    let dir = std::env::temp_dir().join(format!("cot-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("wrong.cot");
    std::fs::write(&f, "-- wrong on purpose\ninput 2.0\ndef main x = x * x\nexpect grad 5.0\n").unwrap();
    let (code, out, _) = cot(&["check", f.to_str().unwrap()], None);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAILED"), "{out}");
}

/// Writes `bytes` to a fresh temporary file and returns its path.
fn temp_file(name: &str, bytes: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("cot-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join(name);
    std::fs::write(&f, bytes).unwrap();
    f.to_str().unwrap().to_string()
}

#[test]
fn a_closed_stdout_ends_the_output_quietly() {
    // `cotangent run f.cot --json | head -c 10`: the output (80 kB) is larger than a pipe holds.
    let mut child = Command::new(env!("CARGO_BIN_EXE_cotangent"))
        .args(["run", "examples/running-example.cot", "--json", "--show", "trace,delta"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 10];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(&first[..1], b"{");
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn unknown_show_values_are_rejected_with_the_valid_ones() {
    let (code, _, err) = cot(&["run", "examples/running-example.cot", "--show", "program,bogus"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bogus") && err.contains("program, delta, trace, cost"), "{err}");
}

#[test]
fn invalid_utf8_is_located_at_its_byte() {
    let f = temp_file("latin1.cot", b"input 1.0\n-- caf\xe9\ndef main x = x\n");
    let (code, _, err) = cot(&["run", &f], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("latin1.cot:2:7: error: the file is not valid UTF-8 (byte offset 16)"), "{err}");
    assert!(err.contains("      |       ^"), "{err}");
}

#[test]
fn at_and_seed_errors_point_into_the_argument() {
    let (code, _, err) = cot(&["run", "examples/running-example.cot", "--at", "(1.0, x)"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("--at:1:7: error: the input point `(1.0, x)`: unknown name `x`\n    1 | (1.0, x)\n      |       ^\n"), "{err}");
    let (code, _, err) = cot(&["run", "examples/running-example.cot", "--seed", "(1.0, 2.0)"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("--seed:1:1: error: the output cotangent `(1.0, 2.0)`: does not have type R"), "{err}");
}

#[test]
fn no_reference_has_its_own_status_and_exit_code() {
    // The source runs in 10 steps, forward mode does not: nothing can be checked (exit 3, not 1).
    let (code, out, err) = cot(&["run", "examples/running-example.cot", "--max-steps", "10", "--json"], None);
    assert_eq!(code, 3, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(doc["reference"].is_null());
    for s in doc["stages"].as_array().unwrap() {
        assert!(["budget", "unchecked", "refused"].contains(&s["status"].as_str().unwrap()), "{s}");
    }
    let (code, out, _) = cot(&["run", "examples/running-example.cot", "--max-steps", "10"], None);
    assert_eq!(code, 3);
    assert!(out.contains("reference none: forward mode failed: stopped: the steps budget (10)"), "{out}");
    let (code, out, _) = cot(&["check", "examples/running-example.cot"], None);
    assert_eq!(code, 0);
    assert!(out.contains("\tforward\tagrees"), "{out}");
}

/// `run --json` on `src`: the exit code and the document.
fn run_json(src: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let mut args = vec!["run", "-", "--json"];
    args.extend_from_slice(extra);
    let (code, out, err) = cot(&args, Some(src));
    (code, serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}")))
}

/// Every stage that ran agrees, with this gradient.
fn all_agree(doc: &serde_json::Value, gradient: serde_json::Value) {
    assert_eq!(doc["reference"]["gradient"], gradient);
    for s in doc["stages"].as_array().unwrap() {
        if s["status"] != "refused" {
            assert_eq!((&s["status"], &s["gradient"]), (&serde_json::json!("agrees"), &gradient), "{}", s["id"]);
        }
    }
}

#[test]
fn non_finite_values_follow_one_rule_in_every_stage_and_are_named_in_json() {
    // A constant's zero tangent is not multiplied by ∞: forward mode agrees with the reverse stages.
    let (code, doc) = run_json("input 1e300\ndef main a = (a * a) * 1.0\n", &[]);
    assert_eq!(code, 0);
    assert_eq!(doc["primal"], "Infinity");
    all_agree(&doc, serde_json::json!([2e300]));
    // 1/x at 0: −(1/0²)·dx = −∞ everywhere (d(a/b) = da/b − (a/b²) db with da a structural zero).
    let (code, doc) = run_json("input 0.0\ndef main x = 1.0 / x\n", &[]);
    assert_eq!(code, 0);
    all_agree(&doc, serde_json::json!(["-Infinity"]));
    // An infinite seed scales the gradient; no stage turns a one-hot's zeros into NaN.
    let (code, out, err) = cot(&["run", "examples/running-example.cot", "--seed", "inf", "--json"], None);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    all_agree(&doc, serde_json::json!(["Infinity", "Infinity"]));
    assert_eq!(doc["reference"]["fd"], serde_json::json!(["Infinity", "Infinity"]));
    // NaN where the derivative is 0 · ∞ (|x| at 0 through sqrt): every stage alike, and named.
    let (code, doc) = run_json("input 0.0\ndef main x = sqrt (x * x)\n", &[]);
    assert_eq!(code, 0);
    all_agree(&doc, serde_json::json!(["NaN"]));
}

#[test]
fn bench_rejects_huge_sizes_and_stops_at_its_wall_clock_limit() {
    for size in ["1000000000", "18446744073709551615", "0", "-1"] {
        let (code, out, err) = cot(&["bench", "--family", "doubling", &format!("--sizes={size}")], None);
        assert_eq!(code, 2, "{size}: {out}{err}");
        assert!(err.contains("1..=1000000") || err.contains("not a size"), "{err}");
    }
    // A wall-clock limit far below the run time stops the case and says which budget.
    let (code, out, err) = cot(&["bench", "--family", "doubling", "--sizes", "20000", "--stage", "forward", "--max-seconds", "0.000001"], None);
    assert_eq!(code, 0, "{err}");
    assert!(format!("{out}{err}").contains("wall-clock seconds budget"), "{out}\n{err}");
}

#[test]
fn negative_at_and_seed_values_are_values_not_options() {
    let src = "def main x = x * x * x\n";
    let (code, doc) = run_json(src, &["--at", "-0.5", "--seed", "-2.0"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["input"], serde_json::json!(-0.5));
    // -2 · 3x² at x = -0.5
    all_agree(&doc, serde_json::json!([-1.5]));
    let (code, doc) = run_json("def main x = x * 3.0\n", &["--at=-1.0e0", "--seed", "-inf"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["input"], serde_json::json!(-1.0));
    assert_eq!(doc["reference"]["gradient"], serde_json::json!(["-Infinity"]));
}

#[test]
fn a_seed_line_weights_the_output_unless_seed_is_given() {
    let src = "input (1.0, 2.0)\nseed (1.0, -2.0)\ndef main (x, y) = (x * y, x + y)\n";
    // y - 2 and x - 2
    all_agree(&run_json(src, &[]).1, serde_json::json!([0.0, -1.0]));
    all_agree(&run_json(src, &["--seed", "(0.0, 1.0)"]).1, serde_json::json!([1.0, 1.0]));
    // an array output: the seed picks the second element
    let src = "input [1.0, 2.0, 3.0]\nseed [0.0, 1.0, 0.0]\ndef main a = map (\\x -> x * x) a\n";
    all_agree(&run_json(src, &[]).1, serde_json::json!([0.0, 4.0, 0.0]));
}

#[test]
fn a_seed_that_does_not_fit_the_output_is_located_in_the_file() {
    let path = temp_file("bad-seed.cot", b"input (1.0, 2.0)\nseed 1.0\ndef main (x, y) = (x * y, x + y)\n");
    let (code, _, err) = cot(&["run", &path], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad-seed.cot:2:6: error: the seed 1.0 does not have main's output type (R, R)\n    2 | seed 1.0\n      |      ^^^"), "{err}");
    let path = temp_file("short-seed.cot", b"input [1.0, 2.0]\nseed [1.0]\ndef main a = map (\\x -> x * x) a\n");
    let (code, _, err) = cot(&["run", &path], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("short-seed.cot:2:6: error: the seed [1.0] has 1 element where main's output [1.0, 4.0] has 2\n"), "{err}");
    let (code, _, err) = cot(&["run", &path, "--seed", "[1.0, 2.0, 3.0]"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("--seed:1:1: error: the output cotangent `[1.0, 2.0, 3.0]` has 3 elements where main's output"), "{err}");
}

#[test]
fn at_types_an_input_component_main_never_uses() {
    // `n` is not used: its type comes from the point, here from `--at` (the file has no input)
    let (code, doc) = run_json("def main (x, n) = x * 2.0\n", &["--at", "(1.0, 3)"]);
    assert_eq!(code, 0, "{doc}");
    all_agree(&doc, serde_json::json!([2.0]));
}

#[test]
fn bench_p1_counts_eval3_and_share_visits() {
    let (code, out, err) = cot(&["bench", "--family", "p1", "--sizes", "3,10", "--stage", "arrays/eval3", "--stage", "arrays/share", "--json"], None);
    assert_eq!(code, 0, "{err}");
    // one JSON object per line
    let rows: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let visits = |stage: &str, n: u64| {
        let row = rows.iter().find(|r| r["stage"] == stage && r["n"] == n).unwrap_or_else(|| panic!("{stage} {n}: {out}"));
        row["eval_visits"].as_u64().unwrap()
    };
    // the array paper's E1: 2^(n+1) − 1 visits of the Delta tree, 3n + 1 eval calls with Share
    assert_eq!((visits("arrays/eval3", 3), visits("arrays/share", 3)), (15, 10));
    assert_eq!((visits("arrays/eval3", 10), visits("arrays/share", 10)), (2047, 31));
}

/// Issue 14: `run` and `check` stay within `--max-mb` (default 1 GiB). A stage whose run passes 3/4 of
/// it stops with a named budget and the others still run; a phase that grows past the whole of it
/// between two checks stops the process with a message naming the stage and the phase.
#[test]
fn runs_stay_within_their_memory_budget() {
    // particle at n = 2·10^5: the source and forward mode run in little memory, a reverse stage's
    // Delta or tape takes ~100 MB; 48 MiB stops it. (At 10^5 krawiec/monadic's Delta arena fits in
    // 48 MiB since session 32, and the run goes on to draw the graph.)
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/peers/particle.cot"))
        .unwrap()
        .replace("param n = 100\n", "param n = 200000\n");
    assert!(text.contains("param n = 200000"));
    let f = temp_file("particle-2e5.cot", text.as_bytes());
    let (code, out, err) = cot(&["run", &f, "--json", "--max-mb", "96", "--stage", "forward", "--stage", "krawiec/monadic"], None);
    assert_eq!(code, 1, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let st = |id: &str| doc["stages"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap().clone();
    assert_eq!(st("forward")["status"], "agrees");
    assert_eq!(st("krawiec/monadic")["status"], "budget");
    let why = st("krawiec/monadic")["error"].as_str().unwrap().to_string();
    assert!(why.starts_with("stopped: the memory budget (48 MiB of live heap for the run) ran out after"), "{why}");

    // The source program's own run stops at the budget too, located (a user error: exit 2).
    let f = temp_file("huge-array.cot", b"input 1.0\ndef main x = sum (build 20000000 (\\i -> x))\n");
    let (code, _, err) = cot(&["run", &f, "--max-mb", "96"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("huge-array.cot:2:18: error: running the program: stopped: the memory budget (48 MiB of live heap for the run)"), "{err}");

    // A transform or printer that passes the whole budget between two checks: the process stops,
    // naming the stage and what it was doing (a 5,000-line program in 16 MiB).
    let f = temp_file("chain-5000.cot", chain(5000).as_bytes());
    let (code, _, err) = cot(&["run", &f, "--max-mb", "16", "--stage", "dualrev/staged"], None);
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with("cotangent: error: stopped: the memory budget (16 MiB, `--max-mb`) ran out while `"), "{err}");
    assert!(err.contains("` was "), "{err}");

    // chad's transform checks the heap at each term (`limits::memory_running_out`): it stops at the
    // term where the heap is a quarter past the budget, located, and the other stages still run
    // (here the process's last resort, while chad/monadic was transforming, until session 41).
    let f = temp_file("chain-2500.cot", chain(2500).as_bytes());
    let (code, out, err) = cot(&["run", &f, "--max-mb", "16", "--stage", "chad/monadic", "--stage", "forward"], None);
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("chain-2500.cot:1896:15: error: [chad/monadic] stopped: the memory budget (8 MiB, `--max-mb`) ran out while transforming the program"), "{out}{err}");
    assert!(out.contains("== forward") && out.contains("agrees with forward"), "{out}");

    // A chain's own pass before the transform (chad/arrays lowers the arrays in its `accepts`) is
    // named as that stage's: it was blamed on the phase before it, `forward` drawing its graph. Since
    // session 33 an instantiated type shares its closed parts (`types::rename`), and that pass takes
    // 1 MiB here where it took 62 (a copy of the nested pair type per use): the process stops in
    // the stage's transform, still named as the stage's (since session 41 by the stage's own
    // budget stop: chad's transform checks the heap at each term, and no longer reaches the last resort).
    let n = 1000;
    let pairs = format!("input 1.5\ndef main x = {}x{}\n", "(".repeat(n), ", 1.0)".repeat(n));
    let f = temp_file("pairs-1000.cot", pairs.as_bytes());
    let (code, out, err) = cot(&["run", &f, "--max-mb", "48", "--stage", "chad/arrays"], None);
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("[chad/arrays] stopped: the memory budget (24 MiB, `--max-mb`) ran out while transforming the program"), "{out}{err}");

    // arrays/symbolic-share writes one new definition: its transform copied its whole input
    // (dual-arrays' output, ~3.7 KB a line) to replace the definitions (peak 108 MiB on 10^4 lines,
    // over 96, the process's last resort at `--max-mb 128`); it copies the rest only (79 MiB).
    let f = temp_file("chain-10000.cot", chain(10000).as_bytes());
    let (code, out, err) = cot(&["run", &f, "--json", "--max-mb", "128", "--stage", "arrays/symbolic-share"], None);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["stages"][0]["status"], "agrees", "{out}");
}

/// Issue 14: a stop inside a stage's generated code (most of chad/naive-ho's first-order source, most
/// of any stage's output) is located: at the last node the check met that was made from the source
/// text (types.rs), else at `def main` (pipeline.rs; chad/naive-ho's code is all generated, 2:1 here).
/// It had no line:col ("chain-10000.cot: error: [chad/naive-ho] stopped: …").
#[test]
fn a_budget_stop_in_generated_code_is_located() {
    let f = temp_file("chain-10000-located.cot", chain(10000).as_bytes());
    let located = |text: &str, what: &str| {
        text.lines().any(|l| {
            let Some(rest) = l.split("chain-10000-located.cot:").nth(1) else { return false };
            let mut parts = rest.splitn(3, ':');
            let number = |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
            number(parts.next()) && number(parts.next()) && parts.next().is_some_and(|m| m.contains(what))
        })
    };
    // chad/naive-ho's transform (its terms made by `with_lambdas` and `first_order`)
    let (code, out, err) = cot(&["run", &f, "--max-mb", "80", "--stage", "chad/naive-ho"], None);
    assert_eq!(code, 1, "{err}");
    let both = format!("{out}{err}");
    assert!(both.contains("[chad/naive-ho] stopped: the memory budget (40 MiB, `--max-mb`) ran out while transforming the program"), "{both}");
    assert!(located(&both, "[chad/naive-ho] stopped: the memory budget (40 MiB"), "{both}");
    // its output's type check
    let (code, out, err) = cot(&["run", &f, "--max-mb", "96", "--stage", "chad/naive-ho"], None);
    assert_eq!(code, 1, "{err}");
    let both = format!("{out}{err}");
    assert!(both.contains("[chad/naive-ho] stopped: the memory budget (48 MiB, `--max-mb`) ran out while type-checking its output"), "{both}");
    assert!(located(&both, "ran out while type-checking its output"), "{both}");
}

/// Issue 14 item 7: a stage's run that stops at a budget is located, where it stopped if that node
/// came from the source text, else at `def main` (the wrapper: 6:1 here). It had no line:col
/// ("examples/running-example.cot: error: [dualrev/tape] stopped: the steps budget (10) …"), while the
/// source program's own stop had one.
#[test]
fn a_stages_run_stopped_by_its_budget_is_located() {
    let (code, out, err) = cot(&["run", "examples/running-example.cot", "--max-steps", "10", "--stage", "dualrev/tape"], None);
    assert_eq!(code, 3, "the reference stopped too: {out}{err}");
    let both = format!("{out}{err}");
    assert!(both.contains("examples/running-example.cot:6:1: error: [dualrev/tape] stopped: the steps budget (10) ran out"), "{both}");
    assert!(both.contains("    6 | def main (x, y) = let z = x + y in x * z"), "{both}");
    let (_, json, _) = cot(&["run", "examples/running-example.cot", "--max-steps", "10", "--stage", "dualrev/tape", "--json"], None);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["stages"][0]["status"], "budget", "{json}");
}

/// Runs `stage` then `forward` on `text` at `--max-mb mb`: the stage stops with `message` (located:
/// it includes the file's `line:col`), not at the process's last resort, and forward still runs after it.
fn stops_located_and_the_run_goes_on(file: &str, text: &str, mb: &str, stage: &str, message: &str) {
    let f = temp_file(file, text.as_bytes());
    let (code, out, err) = cot(&["run", &f, "--max-mb", mb, "--stage", stage, "--stage", "forward"], None);
    let both = format!("{out}{err}");
    assert_eq!(code, 1, "{both}");
    assert!(!both.contains("nothing more is printed"), "{both}");
    assert!(both.contains(&format!("{file}:{message}")), "{both}");
    let stop = both.find(&format!("[{stage}]")).unwrap_or(usize::MAX);
    assert!(out.rfind("== forward").is_some_and(|at| at > stop), "forward still runs after it: {both}");
}

/// A pair nested `n` deep (scripts/shapes.sh's pairs-n).
fn pairs(n: usize) -> String {
    format!("input 1.5\ndef main x = {}x{}\n", "(".repeat(n), ", 1.0)".repeat(n))
}

/// Issue 14 item 4: `twice` nested 16 deep makes 65,536 doublings, whose array-chain Delta runs
/// arrays/dual-numbers past `--max-mb 64`'s run budget. The stage then drew its graph from that DAG
/// anyway, every node walked, and met the process's last resort ("… ran out while
/// `arrays/dual-numbers` was drawing its graph; nothing more is printed"). A run that left the heap
/// past its budget draws none: the stage stops, located, and the next stage runs.
#[test]
fn a_run_past_its_memory_budget_draws_no_graph() {
    // (17 deep: since session 46 a scalar's Delta node is smaller, and 16 deep runs inside the budget)
    let n = 17;
    let text = format!("input 1.5\ndef twice f x = f (f x)\ndef double x = 2.0 * x\ndef main x = {}double{} x\n", "twice (".repeat(n), ")".repeat(n));
    stops_located_and_the_run_goes_on("twice-16.cot", &text, "64", "arrays/dual-numbers", "4:1: error: [arrays/dual-numbers] stopped: the memory budget (32 MiB");
}

/// A run just inside its memory budget draws its graph inside the process's: the Delta explosion
/// of `twice` nested 16 deep (262,144 Delta nodes) at `--max-mb 64` ran in 31 MiB, then drawing its
/// graph (2,000 nodes shown) listed every reachable node beside a seen set and an in-degree map and
/// met the process's last resort ("nothing more is printed"); it now keeps one map of in-degrees
/// up to 2 and the shown nodes only.
#[test]
fn the_graph_of_a_run_inside_its_memory_budget_is_drawn_inside_the_process_budget() {
    let n = 16;
    let text = format!("input 1.5\ndef twice f x = f (f x)\ndef double x = 2.0 * x\ndef main x = {}double{} x\n", "twice (".repeat(n), ")".repeat(n));
    let f = temp_file("twice-16-graph.cot", text.as_bytes());
    let (code, out, err) = cot(&["run", &f, "--max-mb", "64", "--stage", "arrays/dual-numbers", "--stage", "forward"], None);
    let both = format!("{out}{err}");
    assert_eq!(code, 0, "{both}");
    assert!(!both.contains("nothing more is printed"), "{both}");
    assert!(out.contains("== forward"), "{both}");
}

/// Issue 14 item 4: arrays/dual-arrays prints a pair nested n deep as `soaGet` paths as long as the
/// nesting, one expression of O(n^2) text; its document grew past the process's last resort while
/// printing (pairs-4000 at the default budget; pairs-1000 at `--max-mb 64`). The printer stops
/// building it where the heap would run out (the arena's next chunk as large as all before it),
/// and the stage stops, located; the next stage runs.
#[test]
fn a_quadratic_output_stops_while_printing_located() {
    let message = "2:1: error: [arrays/dual-arrays] stopped: the memory budget (32 MiB, `--max-mb`) ran out while printing its output";
    stops_located_and_the_run_goes_on("pairs-1000-printing.cot", &pairs(1000), "64", "arrays/dual-arrays", message);
}

/// Issue 14: a pair nested 1,000 deep (scripts/shapes.sh's pairs-1000) names CHAD instances whose
/// types are as deep as their level, O(n^2) in all. Their schemes were made after the transform's
/// last check of the heap, so at `--max-mb 128` chad/basic met the process's last resort ("nothing
/// more is printed"); and a stage whose input stopped so was reported without line:col
/// ("pairs-1000.cot: error: [chad/sparse] its input, …").
#[test]
fn nested_pairs_stop_chad_at_its_budget_located() {
    let message = "2:1: error: [chad/sparse] its input, the output of chad/basic, is not available: stopped: the memory budget (64 MiB";
    stops_located_and_the_run_goes_on("pairs-1000-budget.cot", &pairs(1000), "128", "chad/sparse", message);
}

/// A straight program of `n` lines, `let vi = v(i-1) * 1.01 + 0.5` (scripts/shapes.sh's chain-n).
/// Issue 14 item 4: the plain output writes a stage's program as it is printed, so that its text is
/// not held beside the output's tree. Here the text is 14 MB (names of 2,000 characters on 3,000
/// lines), the tree and the source ~30 MiB: held whole (sessions up to 35), the text took the stage
/// past half of `--max-mb 80` "while printing its output" (44 MiB live); written as printed, the
/// stage runs. What is written is the program printed: `--json`'s text of it.
#[test]
fn a_stages_program_is_written_as_it_is_printed() {
    let name = |i: usize| format!("v{}{i}", "q".repeat(2000));
    let mut text = format!("input 1.5\ndef main x =\n  let {} = x * 1.01 + 0.5 in\n", name(0));
    for i in 1..3000 {
        text.push_str(&format!("  let {} = {} * 1.01 + 0.5 in\n", name(i), name(i - 1)));
    }
    text.push_str(&format!("  {}\n", name(2999)));
    let f = temp_file("long-names-3000.cot", text.as_bytes());
    let (code, out, err) = cot(&["run", &f, "--max-mb", "80", "--stage", "dualrev/cayley"], None);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("agrees with forward"), "{}", &out[out.len().saturating_sub(400)..]);
    let (code, json, err) = cot(&["run", &f, "--json", "--stage", "dualrev/cayley"], None);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let program = doc["stages"][0]["program"].as_str().unwrap();
    assert!(program.len() > 12_000_000, "{} bytes", program.len());
    let shown = format!("(Smeding & Vákár 2025 §7, Fig. 9)\n{}\n--\nprimal ", program.trim_end());
    assert!(out.contains(&shown), "the program written is the one printed");
}

fn chain(n: usize) -> String {
    let mut text = String::from("input 1.5\ndef main x =\n  let v0 = x * 1.01 + 0.5 in\n");
    for i in 1..n {
        text.push_str(&format!("  let v{i} = v{} * 1.01 + 0.5 in\n", i - 1));
    }
    text + &format!("  v{}\n", n - 1)
}

/// Issue 14: chad/cc-chad type-checks its output inside its transform (what it refuses shows only
/// once typed); a memory stop of that check was reported as a refusal, "a closed code's parameter
/// type is left open", on a 10^5-line straight program. It is a budget stop, as the pipeline's is.
/// (At 100 MiB: since the transform lets its closure-converted program go before that check,
/// session 37, chain-10000 gets through it at 120.)
#[test]
fn a_budget_stop_inside_a_transform_is_not_a_refusal() {
    let f = temp_file("chain-10000.cot", chain(10000).as_bytes());
    let (_, out, err) = cot(&["run", &f, "--json", "--max-mb", "100", "--stage", "chad/cc-chad"], None);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
    let st = doc["stages"].as_array().unwrap().iter().find(|s| s["id"] == "chad/cc-chad").unwrap().clone();
    assert_eq!(st["status"], "budget", "{st}");
    let why = st["error"].as_str().unwrap();
    assert!(why.starts_with("stopped: the memory budget (50 MiB, `--max-mb`) ran out while type-checking its output"), "{why}");
}

/// Issue 14: arrays/bot's transform copies each node of a deep nesting once. It copied the whole
/// subtree below each level (`tuples::Sra::shape`), Θ(n²): sin nested 3,000 deep took ~500 MB and
/// stopped at this budget; now it takes ~90 MB.
#[test]
fn a_deep_nesting_goes_through_arrays_bot_in_linear_memory() {
    let n = 3000;
    let src = format!("input 0.5\ndef main x = {}x{}\n", "sin (".repeat(n), ")".repeat(n));
    let f = temp_file("sin-3000.cot", src.as_bytes());
    let (code, out, err) = cot(&["run", &f, "--json", "--max-mb", "256", "--stage", "arrays/bot"], None);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let bot = doc["stages"].as_array().unwrap().iter().find(|s| s["id"] == "arrays/bot").unwrap().clone();
    assert_eq!(bot["status"], "agrees", "{bot}");
}

/// Issue 14: `run` prints each stage as soon as it is done and lets its result go. It used to hold
/// every stage's program text, views and graph until the end: `x + … + x` with 1,500 terms through
/// the nine dualrev stages (27 MB of JSON) then passed 96 MiB at the last stage and printed nothing.
#[test]
fn run_prints_each_stage_as_it_finishes_within_the_memory_budget() {
    let src = format!("input 1.5\ndef main x = {}\n", vec!["x"; 1500].join(" + "));
    let f = temp_file("plus-1500.cot", src.as_bytes());
    let ids = ["naive", "staged", "cayley", "sparse", "mutable", "no-collector", "contrib", "tape", "parallel"].map(|s| format!("dualrev/{s}"));
    let mut args = vec!["run".to_string(), f, "--json".into(), "--max-mb".into(), "64".into()];
    for id in &ids {
        args.extend(["--stage".to_string(), id.clone()]);
    }
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let (code, out, err) = cot(&args, None);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let got: Vec<(&str, &str)> = doc["stages"].as_array().unwrap().iter().map(|s| (s["id"].as_str().unwrap(), s["status"].as_str().unwrap())).collect();
    assert_eq!(got, ids.iter().map(|id| (id.as_str(), "agrees")).collect::<Vec<_>>());
    assert!(out.len() > 20_000_000, "every program printed: {} bytes", out.len());
}

/// `COTANGENT_TRACE_MEMORY` prints the live heap at each phase to stderr (issue 14: where a long
/// program's memory goes), and changes nothing on stdout.
#[test]
fn trace_memory_prints_the_live_heap_per_phase_on_stderr_only() {
    let run = |trace: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cotangent"));
        cmd.args(["run", "-", "--stage", "forward"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        if trace {
            cmd.env("COTANGENT_TRACE_MEMORY", "1");
        } else {
            cmd.env_remove("COTANGENT_TRACE_MEMORY");
        }
        let mut child = cmd.spawn().expect("run cotangent");
        child.stdin.take().unwrap().write_all(b"input 1.5\ndef main x = let y = x * x in y + 1.0\n").unwrap();
        let out = child.wait_with_output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (plain, traced) = (run(false), run(true));
    assert_eq!(plain.0, Some(0));
    assert_eq!(traced.0, plain.0);
    assert_eq!(traced.1, plain.1);
    assert!(!plain.2.contains("MiB live"), "{}", plain.2);
    for phase in ["`source` starts reading the program", "`forward` starts transforming the program", "`forward` starts running"] {
        assert!(traced.2.lines().any(|l| l.starts_with("memory: ") && l.contains(phase)), "no line for {phase}:\n{}", traced.2);
    }
    // each line also gives the peak since the one before: what a phase took at most, not only what it left
    assert!(traced.2.lines().filter(|l| l.starts_with("memory: ")).all(|l| l.contains(" MiB since the line before)")), "{}", traced.2);
}

#[test]
fn a_transforms_budget_stop_has_the_budget_status() {
    // E11 at depth 24 (§7.2): without share the gradient term has 2^24 nodes, past arrays/symbolic's
    // `gradient size` budget, which stops the transform; with share it is linear and agrees.
    let mut src = String::from("input 1.0\ndef main inp =\n");
    let mut prev = "inp".to_string();
    for k in 1..=24 {
        src.push_str(&format!("  let x{k} = {prev} + {prev} in\n"));
        prev = format!("x{k}");
    }
    src.push_str(&format!("  {prev}\n"));
    let (code, out, err) = cot(&["run", "-", "--stage", "arrays/symbolic", "--stage", "arrays/symbolic-share", "--json"], Some(&src));
    assert_eq!(code, 1, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let st = |id: &str| doc["stages"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap().clone();
    assert_eq!(st("arrays/symbolic")["status"], "budget");
    assert!(st("arrays/symbolic")["error"].as_str().unwrap().contains("`gradient size` budget"));
    assert_eq!(st("arrays/symbolic-share")["status"], "agrees");
}

/// The CLI turns transparent huge pages off for itself (`alloc::no_huge_pages`): read off
/// `/proc/PID/status` while it waits for its program on stdin (Linux kernels that show the field).
#[cfg(target_os = "linux")]
#[test]
fn the_cli_runs_without_transparent_huge_pages() {
    if !std::fs::read_to_string("/proc/self/status").is_ok_and(|s| s.contains("THP_enabled:")) {
        return; // a kernel older than 5.0 shows no such field (and has the prctl all the same)
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_cotangent"))
        .args(["run", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let field = |s: &str| s.lines().find_map(|l| l.strip_prefix("THP_enabled:")).map(|v| v.trim().to_string());
    // the process sets it first thing in `main`, before it reads stdin, which stays open meanwhile;
    // polled (a fresh process shows 1 until then), waiting at most a minute on a loaded machine
    let mut seen = None;
    for _ in 0..600 {
        seen = std::fs::read_to_string(&status).ok().as_deref().and_then(field);
        if seen.as_deref() == Some("0") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.stdin.take().unwrap().write_all(b"input 1.5\ndef main x = x * x\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(seen.as_deref(), Some("0"), "THP_enabled of the running CLI");
}
