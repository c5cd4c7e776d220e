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
        assert_eq!(s["contract"], "gradient");
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
