//! `cotangent bench --json`: one JSON object per line, each carrying the fields the peers' table
//! needs; a case past its memory limit is stopped and says so. (No timing is asserted.)

use std::process::Command;

fn bench(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cotangent")).arg("bench").args(args).output().expect("run cotangent");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn rows(out: &str) -> Vec<serde_json::Value> {
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not one JSON object per line: {e}: {l}"))).collect()
}

#[test]
fn peers_rows_parse_and_carry_the_fields() {
    let (code, out, err) = bench(&["--family", "peers", "--sizes", "100", "--stage", "dualrev/tape", "--stage", "forward", "--repeat", "1", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows = rows(&out);
    // particle, horner and peer-doubling at n = 100, quaternion once: two stages each
    assert_eq!(rows.len(), 8, "{out}");
    for r in &rows {
        for f in ["family", "stage", "n", "ops", "primal_ns_per_op", "grad_ns_per_op", "ratio", "bytes_per_op", "outcome"] {
            assert!(r.get(f).is_some(), "{f} missing: {r}");
        }
        assert_eq!(r["outcome"], "ok", "{r}");
        assert!(r["ratio"].as_f64().is_some_and(|x| x > 0.0), "{r}");
        assert!(r["grad_ns_per_op"].as_f64().is_some_and(|x| x > 0.0), "{r}");
        assert!(r["bytes_per_op"].as_f64().is_some_and(|x| x >= 0.0), "{r}");
    }
    let ops = |fam: &str| rows.iter().find(|r| r["family"] == fam).map(|r| (r["n"].as_u64().unwrap(), r["ops"].as_u64().unwrap()));
    // the primal operations as the peers count them (bench/peers/README.md)
    assert_eq!(ops("particle"), Some((100, 702)));
    assert_eq!(ops("horner"), Some((100, 200)));
    assert_eq!(ops("peer-doubling"), Some((100, 101)));
    assert_eq!(ops("quaternion"), Some((1, 22)));
    // the stage's own counters ride along: one ID per real made, each resolved once
    let tape = rows.iter().find(|r| r["family"] == "peer-doubling" && r["stage"] == "dualrev/tape").unwrap();
    assert_eq!(tape["ids_allocated"], 102, "{tape}");
}

/// Issue 13's bytes per primal op of the Krawiec chain's efficient stages (deterministic: the live
/// heap's peak). Horner at 10^5 took 244 (krawiec/array) and 230 (krawiec/monadic) in session 31's
/// base; 134 with the 16-byte Delta node, eval's Let spine as one frame, no visits per node when no
/// graph is drawn and 8-byte bindings (session 31, eng39). Also: the counters are the stage's.
#[test]
fn the_krawiec_stages_hold_under_150_bytes_per_primal_op_on_horner() {
    let (code, out, err) =
        bench(&["--family", "horner", "--sizes", "100000", "--stage", "krawiec/array", "--stage", "krawiec/monadic", "--repeat", "1", "--max-seconds", "120", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows = rows(&out);
    assert_eq!(rows.len(), 2, "{out}\n{err}");
    for r in &rows {
        assert_eq!(r["outcome"], "ok", "{r}");
        let b = r["bytes_per_op"].as_f64().unwrap_or(f64::NAN);
        assert!(b < 150.0, "{} B/op: {r}", b);
        // 7.5 Delta nodes a primal op, each visited (a Let spine's body and its right-hand side)
        assert_eq!((r["delta_nodes"].as_u64(), r["eval_visits"].as_u64()), (Some(1_500_002), Some(1_600_001)), "{r}");
    }
}

#[test]
fn a_case_past_its_memory_limit_is_stopped_and_says_so() {
    // the primal (a tail loop) stays under 1 MB; the tape of 140,000 operations does not
    let (code, out, err) = bench(&["--family", "particle", "--sizes", "20000", "--stage", "dualrev/tape", "--repeat", "1", "--max-mb", "1", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows = rows(&out);
    assert_eq!(rows.len(), 1, "{out}\n{err}");
    assert_eq!(rows[0]["outcome"], "stopped by the memory budget (1 MB per case)", "{out}");
}

/// `--sample-ms`: short runs timed many to a sample (as the wasm timing is) give the same rows and
/// counters as runs timed alone; a value outside 0–1000 ms is a user error.
/// Every timed run starts a fresh machine on code lowered once (`bench::again`): a taping loop's
/// round program, built in the first run and kept with the code, serves the later runs. Their rows
/// (the last run's counters and outcome) are the same as one run's, stage by stage. With a step
/// added when a round program built earlier is found (`rounds_in`), the `--repeat 3` rows' steps
/// differ by one (krawiec/monadic on particle: 8,297 against 8,296).
#[test]
fn runs_on_code_lowered_once_count_as_one_run() {
    let args = |repeat: &'static str| {
        let mut a = vec!["--family", "peer-doubling", "--family", "particle", "--sizes", "40", "--repeat", repeat, "--json"];
        for s in ["forward", "dualrev/tape", "dualrev/parallel", "dualrev/contrib", "krawiec/array", "krawiec/monadic"] {
            a.extend(["--stage", s]);
        }
        a
    };
    let (code, once, err) = bench(&args("1"));
    assert_eq!(code, 0, "{err}");
    let (code, thrice, err) = bench(&args("3"));
    assert_eq!(code, 0, "{err}");
    let (once, thrice) = (rows(&once), rows(&thrice));
    assert_eq!(once.len(), 12, "{once:?}");
    let strip = |r: &serde_json::Value| {
        let mut r = r.clone();
        for timed in ["primal_ns_per_op", "grad_ns_per_op", "ratio", "bytes_per_op", "primal_secs", "grad_secs"] {
            r.as_object_mut().map(|o| o.remove(timed));
        }
        r
    };
    for (a, b) in once.iter().zip(&thrice) {
        assert_eq!(a["outcome"], "ok", "{a}");
        assert_eq!(strip(a), strip(b));
    }
}

#[test]
fn short_runs_timed_many_to_a_sample_keep_the_rows() {
    let args = ["--family", "quaternion", "--stage", "dualrev/tape", "--stage", "forward", "--repeat", "2", "--json"];
    let (code, alone, err) = bench(&args);
    assert_eq!(code, 0, "{err}");
    let (code, many, err) = bench(&[&args[..], &["--sample-ms", "1"]].concat());
    assert_eq!(code, 0, "{err}");
    let (alone, many) = (rows(&alone), rows(&many));
    assert_eq!(alone.len(), 2);
    for (a, m) in alone.iter().zip(&many) {
        assert_eq!((&a["stage"], &a["outcome"], &a["steps"], &a["real_ops"]), (&m["stage"], &m["outcome"], &m["steps"], &m["real_ops"]), "{a}\n{m}");
        assert!(m["grad_ns_per_op"].as_f64().is_some_and(|x| x > 0.0) && m["primal_ns_per_op"].as_f64().is_some_and(|x| x > 0.0), "{m}");
    }
    for bad in ["-1", "1001", "x"] {
        let (code, _, err) = bench(&["--family", "quaternion", &format!("--sample-ms={bad}")]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("not a number of milliseconds from 0 to 1000"), "{err}");
    }
}

#[test]
fn an_unknown_family_is_a_user_error() {
    let (code, _, err) = bench(&["--family", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("no bench family `nope`"), "{err}");
}

/// The array paper's families in `cotangent bench` (issue 12's checks): t_dot and t_sc (§4.1,
/// Fig. 18) cost 5n + 1 scalar Delta constructors on arrays/dual-numbers, 4n² + 5n + 1 cotangent
/// cells on arrays/onehot (§4.4's one-hot problem), and a fixed number of array-level Delta nodes
/// on arrays/dual-arrays at any n (12 and 11; t_sc's two gathers of n each, scattered back); E11's
/// gradient program grows by doubling increments on arrays/symbolic (§7.2, footnote 30) and by a
/// constant one with share (§7.3). P1 is `tests/cli.rs` `bench_p1_counts_eval3_and_share_visits`.
#[test]
fn the_array_papers_families_count_the_delta_explosion_and_its_cures() {
    let stages = ["--stage", "arrays/dual-numbers", "--stage", "arrays/onehot", "--stage", "arrays/dual-arrays"];
    for (family, nodes) in [("t_dot", 12), ("t_sc", 11)] {
        let mut args = vec!["--family", family, "--sizes", "10,40", "--repeat", "1", "--json"];
        args.extend(stages);
        let (code, out, err) = bench(&args);
        assert_eq!(code, 0, "{err}");
        let rows = rows(&out);
        let count = |stage: &str, n: u64, key: &str| {
            let r = rows.iter().find(|r| r["stage"] == stage && r["n"] == n).unwrap_or_else(|| panic!("{family} {stage} {n}: {out}"));
            assert_eq!(r["outcome"], "ok", "{r}");
            r[key].as_u64().unwrap_or_else(|| panic!("{key} missing: {r}"))
        };
        for n in [10u64, 40] {
            assert_eq!(count("arrays/dual-numbers", n, "inner_nodes"), 5 * n + 1, "{family} n = {n}");
            assert_eq!(count("arrays/onehot", n, "ct_cells"), 4 * n * n + 5 * n + 1, "{family} n = {n}");
            assert_eq!((count("arrays/dual-arrays", n, "delta_nodes"), count("arrays/dual-arrays", n, "backprop_ids")), (nodes, 4), "{family} n = {n}");
        }
        if family == "t_sc" {
            assert_eq!((count("arrays/dual-arrays", 40, "gathered"), count("arrays/dual-arrays", 40, "scattered")), (80, 80));
        }
    }
    let (code, out, err) = bench(&["--family", "e11", "--sizes", "2,3,4,5,6,7", "--stage", "arrays/symbolic", "--stage", "arrays/symbolic-share", "--repeat", "1", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows = rows(&out);
    let sizes = |stage: &str| -> Vec<u64> { (2..=7u64).map(|m| rows.iter().find(|r| r["stage"] == stage && r["n"] == m).and_then(|r| r["gradient_size"].as_u64()).unwrap_or_else(|| panic!("{stage} {m}: {out}"))).collect() };
    let steps = |s: Vec<u64>| -> Vec<u64> { s.windows(2).map(|w| w[1] - w[0]).collect() };
    let plain = steps(sizes("arrays/symbolic"));
    assert!(plain.windows(2).all(|w| w[1] + 4 >= 2 * w[0]), "{plain:?}");
    let shared = steps(sizes("arrays/symbolic-share"));
    assert!(shared.iter().all(|&s| s == shared[0]), "{shared:?}");
}
