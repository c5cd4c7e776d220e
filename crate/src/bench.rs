//! `cotangent bench`: each stage's counters and run time on program families at growing sizes, with the
//! ratio of gradient time to primal time measured in the same run (machines are shared and noisy, so
//! ratios, not absolute times, are the figures to compare). Not a test: nothing here asserts speed.

use cotangent::interp::{Budget, Builtins, Machine};
use cotangent::pipeline::{self, Options};
use cotangent::stage::{Contract, RunCtx, Source, Stage};
use cotangent::stages;
use cotangent::value::Value;
use std::fmt::Write;
use cotangent::value::json_real;
use std::time::Instant;

/// The largest size `bench --sizes` accepts: the array families' inputs have n elements.
pub const MAX_SIZE: u64 = 1_000_000;
/// The largest size of the families whose programs have about n lines: the transforms are not all
/// linear yet (issue 14), so larger programs would take minutes and gigabytes.
pub const MAX_PROGRAM_SIZE: usize = 100_000;

/// Parses one `--sizes` entry: an integer in 1..=MAX_SIZE.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let n: u64 = s.trim().parse().map_err(|_| format!("`{s}` is not a size (an integer from 1 to {MAX_SIZE})"))?;
    if n == 0 || n > MAX_SIZE {
        return Err(format!("size {n} is outside 1..={MAX_SIZE} (the largest program size bench builds)"));
    }
    Ok(n as usize)
}

/// A benchmark program family: source text at size n.
pub struct Family {
    pub name: &'static str,
    pub what: &'static str,
    pub make: fn(usize) -> String,
    /// The largest n this family is run at.
    pub max: usize,
}

pub fn families() -> Vec<Family> {
    vec![
        Family {
            name: "doubling",
            what: "the straight-line doubling chain `let x1 = x + x in … in xn + xn` (Krawiec et al. §6, Smeding–Vákár Fig. 2)",
            make: doubling,
            max: MAX_PROGRAM_SIZE,
        },
        Family {
            name: "p1",
            what: "the array paper's sharing chain P1 (§2.5, note E1), `let x1 = x + x in … in xn`, for n = 1..20: arrays/eval3 visits the Delta as a tree, 2^(n+1) − 1 times, arrays/share 3n + 1 times (`--stage arrays/eval3 --stage arrays/share --sizes 1,2,…,20`)",
            make: p1,
            max: 20,
        },
        Family {
            name: "straight",
            what: "a long straight-line program over two inputs mixing + * sin (each value used once or twice)",
            make: straight,
            max: MAX_PROGRAM_SIZE,
        },
        Family {
            name: "inputs",
            what: "a straight line over n inputs, each used once (the input grows with n: krawiec/dense pays O(n) per operation, Krawiec et al. §5.2)",
            make: inputs,
            max: MAX_PROGRAM_SIZE,
        },
        Family {
            name: "wide",
            what: "n independent products summed in a tree (a wide program for the parallel resolve)",
            make: wide,
            max: MAX_PROGRAM_SIZE,
        },
        Family {
            name: "dot",
            what: "the dot product of two input arrays of n reals, `sum (map2 (*) a b)` (the array paper's §4.1 example: arrays of dual numbers cost one Delta node per scalar operation)",
            make: dot,
            max: MAX_SIZE as usize,
        },
        Family {
            name: "t_dot",
            what: "t_dot of the array paper (§4.1), `sum (build (length a) (λi. a ! i * b ! i))` over two arrays of n reals: arrays/dual-numbers builds 5n+1 scalar Delta constructors (inner_nodes), arrays/onehot writes 4n² + 5n + 1 cotangent cells (ct_cells, §4.4's one-hot problem)",
            make: t_dot,
            max: 10_000,
        },
        Family {
            name: "matvec",
            what: "a k×k matrix (nested arrays, n = k² elements) times a vector of k, `map (λrow. sum (map2 (*) row v)) m`",
            make: matvec,
            max: MAX_SIZE as usize,
        },
        Family {
            name: "program-size",
            what: "the pipeline against program size: a straight let chain of n lines over one input; times the front end (parse, types) and each stage's preparation (transform, print, type check of its output) and reports each one's growth exponent",
            make: size_chain,
            max: MAX_PROGRAM_SIZE,
        },
        Family {
            name: "sum",
            what: "P_sum(n) of Efficient CHAD §5: ((x1 + x2) + x3) + … + xn over n inputs (dense CHAD O(n²), sparse maps O(n log n), cells O(n))",
            make: p_sum,
            max: 5_000,
        },
        Family {
            name: "magic",
            what: "t_magic of Efficient CHAD App. A: a complete binary tree of + over n = 2^r distinct inputs (n rounded down to a power of two; any union of maps costs O(n log n) in all)",
            make: p_magic,
            max: 1 << 14,
        },
        Family {
            name: "zero",
            what: "P_zero(n, 8) of Efficient CHAD §4: fst x + … + fst x (n times) with x : R × τ_8, an 8-fold nested product (each dense zero of τ_8 costs 17 nodes)",
            make: p_zero,
            max: 5_000,
        },
        Family {
            name: "t_dot_arrays",
            what: "t_dot of the array paper §4.1, `sum (build n (\\i -> a ! i * b ! i))`: arrays/dual-arrays builds 12 array-level Delta nodes at any n (delta_nodes)",
            make: t_dot_arrays,
            max: MAX_SIZE as usize,
        },
        Family {
            name: "t_sc",
            what: "t_sc of the array paper's Fig. 18, `sum (build n (\\i -> a ! i * a ! (n - 1 - i)))`: one gather per index, one scatter back",
            make: t_sc,
            max: MAX_SIZE as usize,
        },
        Family {
            name: "e11",
            what: "E11 of the array paper (§7.2, footnote 30) at depth m: `let x1 = inp + inp in … xm`; the gradient program's size (gradient_size) is 2^m on arrays/symbolic, linear with share",
            make: e11,
            max: 20,
        },
        Family {
            name: "ho",
            what: "P_HO(n) = t_n of Efficient CHAD §9: n − 1 nested identity applications (λx_{n−1}. ⋯ (λx1. x1) x2 ⋯) x_n (naive higher-order CHAD O(2^n), past 21 refused; closure conversion + CHAD O(n))",
            make: p_ho,
            max: 64,
        },
        Family {
            name: "gather",
            what: "P_gather(n) of Efficient CHAD §8.1 (Eq. 15): let a = build n (i. v!i · v!i) in build (length a) (i. a!i · 2) over n inputs; chad/arrays makes 3n BOne's (bag_ones), with BArray none past n = 1 (bag_ones_barray)",
            make: p_gather,
            max: 1_000_000,
        },
    ]
}

/// `let v0 = x * 1.01 + 0.5 in let v1 = v0 * 1.01 + 0.5 in …`: n lines, each value used once.
fn size_chain(n: usize) -> String {
    let mut s = String::from("-- a straight let chain of n lines\ninput 1.5\ndef main x =\n");
    for i in 0..n.max(1) {
        let prev = if i == 0 { "x".to_string() } else { format!("v{}", i - 1) };
        let _ = writeln!(s, "  let v{i} = {prev} * 1.01 + 0.5 in");
    }
    let _ = writeln!(s, "  v{}", n.max(1) - 1);
    s
}

/// The array paper's t_dot (§4.1), with `build` and `!`.
fn t_dot_arrays(n: usize) -> String {
    format!(
        "-- t_dot over arrays of {n} reals\ninput ({}, {})\ndef main (a, b) = sum (build (length a) (\\i -> a ! i * b ! i))\n",
        reals(n, 0),
        reals(n, 3)
    )
}

/// The array paper's t_sc (Fig. 18).
fn t_sc(n: usize) -> String {
    format!("-- t_sc over an array of {n} reals\ninput {}\ndef main a = let n = length a in sum (build n (\\i -> a ! i * a ! (n - 1 - i)))\n", reals(n, 0))
}

/// E11 at depth m.
fn e11(m: usize) -> String {
    let mut s = String::from("-- E11: a doubling chain of depth m\ninput 1.0\ndef main inp =\n");
    let mut prev = "inp".to_string();
    for k in 1..=m {
        s.push_str(&format!("  let x{k} = {prev} + {prev} in\n"));
        prev = format!("x{k}");
    }
    s.push_str(&format!("  {prev}\n"));
    s
}

fn p_ho(n: usize) -> String {
    let n = n.max(2);
    let mut body = "x1".to_string();
    for i in 1..n {
        body = format!("(\\x{i} -> {body}) x{}", i + 1);
    }
    format!("-- P_HO(n) = t_n\ninput 0.75\ndef main x{n} = {body}\n")
}

fn p_gather(n: usize) -> String {
    let n = n.max(1);
    format!("-- P_gather(n)\ninput {}\ndef main v = let a = build (length v) (\\i -> (v ! i) * (v ! i)) in build (length a) (\\i -> (a ! i) * 2.0)\n", reals(n, 0))
}

fn n_inputs(n: usize) -> (Vec<String>, String) {
    let xs: Vec<String> = (1..=n).map(|i| format!("x{i}")).collect();
    let point: Vec<String> = (1..=n).map(|i| format!("{:?}", 0.5 + (i % 7) as f64 * 0.125)).collect();
    (xs, point.join(", "))
}

fn p_sum(n: usize) -> String {
    let (xs, point) = n_inputs(n.max(2));
    format!("-- P_sum(n)\ninput ({point})\ndef main ({}) = {}\n", xs.join(", "), xs.join(" + "))
}

fn p_magic(n: usize) -> String {
    let n = 1usize << (usize::BITS - 1 - n.max(2).leading_zeros());
    let (xs, point) = n_inputs(n);
    let mut level = xs.clone();
    while level.len() > 1 {
        level = level.chunks(2).map(|p| format!("({} + {})", p[0], p[1])).collect();
    }
    format!("-- t_magic over n = 2^r inputs\ninput ({point})\ndef main ({}) = {}\n", xs.join(", "), level[0])
}

fn p_zero(n: usize) -> String {
    let mut ty = String::from("R");
    let mut val = String::from("0.5");
    for _ in 0..8 {
        ty = format!("(R, {ty})");
        val = format!("(0.25, {val})");
    }
    let uses: Vec<&str> = (0..n.max(1)).map(|_| "fst y").collect();
    format!("-- P_zero(n, 8)\ninput (1.5, {val})\ndef main x = let y = (x : (R, {ty})) in {}\n", uses.join(" + "))
}

/// `[r1, ..., rn]`, reals in [0.5, 1.25].
fn reals(n: usize, salt: usize) -> String {
    let mut s = String::with_capacity(n * 6 + 2);
    s.push('[');
    for i in 0..n {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{:?}", 0.5 + ((i + salt) % 7) as f64 * 0.125);
    }
    s.push(']');
    s
}

fn dot(n: usize) -> String {
    format!(
        "-- the dot product of two arrays of {n} reals\ninput ({}, {})\ndef main (a, b) = sum (map2 (\\x y -> x * y) a b)\n",
        reals(n, 0),
        reals(n, 3)
    )
}

fn t_dot(n: usize) -> String {
    format!(
        "-- t_dot over two arrays of {n} reals\ninput ({}, {})\ndef main (a, b) = sum (build (length a) (\\i -> a ! i * b ! i))\n",
        reals(n, 0),
        reals(n, 3)
    )
}

fn matvec(n: usize) -> String {
    let k = ((n as f64).sqrt() as usize).max(1);
    let rows: Vec<String> = (0..k).map(|i| reals(k, i)).collect();
    format!(
        "-- a {k}×{k} matrix times a vector\ninput ([{}], {})\ndef main (m, v) = map (\\row -> sum (map2 (\\x y -> x * y) row v)) m\n",
        rows.join(", "),
        reals(k, 5)
    )
}

fn doubling(n: usize) -> String {
    let mut s = String::from("-- the doubling chain\ninput 1.0\ndef main x0 =\n");
    for i in 1..=n {
        let _ = writeln!(s, "  let x{i} = x{} + x{} in", i - 1, i - 1);
    }
    let _ = writeln!(s, "  x{n} + x{n}");
    s
}

/// P1 (the array paper §2.5): like `doubling`, but the result is xn itself.
fn p1(n: usize) -> String {
    let mut s = String::from("-- the sharing chain P1\ninput 1.5\ndef main x0 =\n");
    for i in 1..=n {
        let _ = writeln!(s, "  let x{i} = x{} + x{} in", i - 1, i - 1);
    }
    let _ = writeln!(s, "  x{n}");
    s
}

fn straight(n: usize) -> String {
    let mut s = String::from("-- a long straight-line program\ninput (0.3, 0.7)\ndef main (x, y) =\n  let a0 = x in\n");
    for i in 1..=n {
        let p = i - 1;
        let line = match i % 4 {
            0 => format!("  let a{i} = a{p} * 0.999 + y in"),
            1 => format!("  let a{i} = sin a{p} + a{p} * 0.5 in"),
            2 => format!("  let a{i} = a{p} * y * 0.9 in"),
            _ => format!("  let a{i} = a{p} + x * 0.001 in"),
        };
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(s, "  a{n}");
    s
}

fn inputs(n: usize) -> String {
    let n = n.max(2);
    let xs: Vec<String> = (1..=n).map(|i| format!("x{i}")).collect();
    let point: Vec<String> = (1..=n).map(|i| format!("{:?}", 0.5 + (i % 7) as f64 * 0.125)).collect();
    let mut s = format!("-- a straight line over n inputs\ninput ({})\ndef main ({}) =\n  let a1 = x1 in\n", point.join(", "), xs.join(", "));
    for i in 2..=n {
        let _ = writeln!(s, "  let a{i} = a{} * 0.999 + x{i} in", i - 1);
    }
    let _ = writeln!(s, "  a{n}");
    s
}

fn wide(n: usize) -> String {
    // A balanced sum of n products: `sum lo hi` recursion keeps the program small.
    format!(
        "-- n independent products, summed as a balanced tree\nparam n = {n}\ninput (1.5, 0.5)\n\
def sum lo hi x y = if hi - lo == 1 then sin (x * real lo) * y else let mid = (lo + hi) / 2 in sum lo mid x y + sum mid hi x y\n\
def main (x, y) = sum 0 n x y\n"
    )
}

pub struct Row {
    pub family: String,
    pub n: usize,
    pub stage: String,
    pub outcome: String,
    pub counters: Vec<(String, u64)>,
    pub primal_secs: f64,
    pub grad_secs: f64,
}

/// Runs `stage_ids` (all when empty) on each family at each size.
pub fn run(family_names: &[String], sizes: &[usize], stage_ids: &[String], budget: &Budget) -> Vec<Row> {
    let mut rows = vec![];
    let chosen: Vec<&dyn Stage> = stages::all().into_iter().filter(|s| stage_ids.is_empty() || stage_ids.iter().any(|id| id == s.info().id)).collect();
    for fam in families().into_iter().filter(|f| family_names.is_empty() || family_names.iter().any(|n| n == f.name)) {
        for &n in sizes {
            if n > fam.max {
                eprintln!("{} n={n}: skipped (this family runs up to n = {})", fam.name, fam.max);
                continue;
            }
            let text = (fam.make)(n);
            if fam.name == "program-size" {
                rows.extend(program_size(&text, n, &chosen, budget));
                continue;
            }
            let (program, s, t) = match pipeline::front_end(&text, &[]) {
                Ok(x) => x,
                Err(ds) => {
                    eprintln!("{} n={n}: {}", fam.name, ds.iter().map(|d| d.message.clone()).collect::<Vec<_>>().join("; "));
                    continue;
                }
            };
            let input = program.input.as_ref().and_then(|e| cotangent::syntax::value_of(e).ok()).unwrap_or(Value::Unit);
            // primal time, measured in the same run as the stages below
            // best of 5: the primal is the denominator of every ratio
            let mut primal = pipeline::run_source(&program, &input, budget);
            let mut primal_secs = f64::INFINITY;
            for _ in 0..5 {
                let t0 = Instant::now();
                primal = pipeline::run_source(&program, &input, budget);
                primal_secs = primal_secs.min(t0.elapsed().as_secs_f64());
            }
            let primal = match primal {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("{} n={n}: the primal stopped: {}", fam.name, e.message());
                    continue;
                }
            };
            let seed = primal.with_reals(&mut std::iter::repeat(1.0));
            let no_builtins = Builtins::new();
            let src = Source { program: &program, input_type: &s, output_type: &t, builtins: &no_builtins };
            let opts = Options { trace: false, budget: budget.clone(), ..Options::default() };
            let outputs = pipeline::Outputs::new(&src, &opts);
            for st in &chosen {
                let row = |outcome: String, counters, grad_secs| Row {
                    family: fam.name.into(),
                    n,
                    stage: st.info().id.into(),
                    outcome,
                    counters,
                    primal_secs,
                    grad_secs,
                };
                let out = match outputs.get(*st) {
                    Ok(x) => x,
                    Err(d) => {
                        rows.push(row(format!("refused: {}", d.message), vec![], f64::NAN));
                        continue;
                    }
                };
                let mut m = match Machine::new(&out.program, &out.builtins, budget.clone()) {
                    Ok(m) => m,
                    Err(e) => {
                        rows.push(row(e.message(), vec![], f64::NAN));
                        continue;
                    }
                };
                m.set_tracing(false);
                let lookup = |_: &str| None;
                let t1 = Instant::now();
                // the timed run: a same-function stage's output is timed as it runs main
                let res = outputs.with_input(*st, |src| {
                    let cx = RunCtx { src, origin: outputs.source(), input: &input, seed: &seed, outputs: &lookup };
                    let r = match st.contract() {
                        Contract::Gradient => pipeline::run_output(*st, &mut m, &cx).map(|_| ()),
                        Contract::SameFunction => pipeline::run_main(*st, &mut m, &cx).map(|_| ()),
                    };
                    let secs = t1.elapsed().as_secs_f64();
                    // the chain's report (a cost model's bound) is not timed
                    if r.is_ok() {
                        if let Some(chain) = stages::chain_of(st.info().id) {
                            (chain.after_run)(&mut m, &cx);
                        }
                    }
                    (r, secs)
                });
                let (res, grad_secs) = match res {
                    Ok((r, secs)) => (r, secs),
                    Err(d) => {
                        rows.push(row(format!("refused: {}", d.message), vec![], f64::NAN));
                        continue;
                    }
                };
                let c = m.cost();
                let mut counters = vec![("steps".to_string(), c.steps), ("real_ops".to_string(), c.real_ops)];
                counters.extend(c.counters.iter().map(|(k, v)| (k.clone(), *v)));
                let outcome = match res {
                    Ok(_) => "ok".to_string(),
                    Err(e) => match e {
                        cotangent::interp::RunError::Budget { budget, .. } => format!("stopped by the {} budget", budget.name()),
                        other => format!("error: {}", other.message()),
                    },
                };
                rows.push(row(outcome, counters, grad_secs));
            }
        }
    }
    rows
}

/// One size of the `program-size` family: a row for the front end (its time as `grad s`), then one
/// per stage with the time of its preparation (transform, print, type check of the output; a stage
/// that follows another is timed on its own, the one before it being prepared first).
fn program_size(text: &str, n: usize, chosen: &[&'static dyn Stage], budget: &Budget) -> Vec<Row> {
    let row = |stage: &str, outcome: String, counters: Vec<(String, u64)>, secs: f64| Row {
        family: "program-size".into(),
        n,
        stage: stage.into(),
        outcome,
        counters,
        primal_secs: f64::NAN,
        grad_secs: secs,
    };
    let t0 = Instant::now();
    let (program, s, t) = match pipeline::front_end(text, &[]) {
        Ok(x) => x,
        Err(ds) => return vec![row("(front end)", format!("refused: {}", ds[0].message), vec![], f64::NAN)],
    };
    let mut rows = vec![row("(front end)", "ok".into(), vec![("bytes".into(), text.len() as u64)], t0.elapsed().as_secs_f64())];
    let no_builtins = Builtins::new();
    let src = Source { program: &program, input_type: &s, output_type: &t, builtins: &no_builtins };
    let opts = Options { trace: false, budget: budget.clone(), ..Options::default() };
    let outputs = pipeline::Outputs::new(&src, &opts);
    for st in chosen {
        if let cotangent::stage::Input::After(before) = st.input() {
            if let Some(prev) = stages::find(before) {
                let _ = outputs.get(prev);
            }
        }
        let t1 = Instant::now();
        let got = outputs.get(*st);
        let secs = t1.elapsed().as_secs_f64();
        rows.push(match got {
            Ok(p) => row(st.info().id, "ok".into(), vec![("printed_bytes".into(), p.printed.len() as u64)], secs),
            Err(d) => row(st.info().id, format!("refused: {}", d.message.lines().next().unwrap_or("")), vec![], f64::NAN),
        });
    }
    rows
}

/// The growth exponent of each (family, stage)'s time in n: the least-squares slope of log time
/// against log n over the sizes it ran at (the program-size family's figure; time ∝ n^k).
pub fn exponents(rows: &[Row]) -> Vec<(String, String, f64)> {
    let mut keys: Vec<(String, String)> = vec![];
    for r in rows.iter().filter(|r| r.family == "program-size") {
        let k = (r.family.clone(), r.stage.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .filter_map(|(f, st)| {
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.family == f && r.stage == st && r.grad_secs.is_finite() && r.grad_secs > 0.0)
                .map(|r| ((r.n as f64).ln(), r.grad_secs.ln()))
                .collect();
            if pts.len() < 2 {
                return None;
            }
            let m = pts.len() as f64;
            let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / m, pts.iter().map(|p| p.1).sum::<f64>() / m);
            let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
            let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
            (sxx > 0.0).then(|| (f, st, sxy / sxx))
        })
        .collect()
}

pub fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{:<9} {:>7} {:<22} {:>10} {:>10} {:>9}  {:<28} counters", "family", "n", "stage", "primal s", "grad s", "ratio", "outcome");
    for r in rows {
        let counters: Vec<String> = r.counters.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            s,
            "{:<9} {:>7} {:<22} {:>10.6} {:>10.6} {:>9.2}  {:<28} {}",
            r.family,
            r.n,
            r.stage,
            r.primal_secs,
            r.grad_secs,
            r.grad_secs / r.primal_secs,
            r.outcome,
            counters.join(" ")
        );
    }
    let exps = exponents(rows);
    if !exps.is_empty() {
        let _ = writeln!(s, "\ngrowth exponents (time ∝ n^k, least squares over the sizes run):");
        for (f, st, k) in exps {
            let _ = writeln!(s, "  {f:<13} {st:<22} k = {k:.2}");
        }
    }
    s
}

pub fn json(rows: &[Row]) -> serde_json::Value {
    let exps = exponents(rows);
    serde_json::Value::Array(
        rows.iter()
            .map(|r| {
                let mut o = serde_json::json!({
                    "family": r.family, "n": r.n, "stage": r.stage, "outcome": r.outcome,
                    "primal_secs": json_real::value(r.primal_secs), "grad_secs": json_real::value(r.grad_secs),
                    "ratio": json_real::value(r.grad_secs / r.primal_secs),
                });
                for (k, v) in &r.counters {
                    o[k] = serde_json::json!(v);
                }
                if let Some((_, _, k)) = exps.iter().find(|(f, st, _)| *f == r.family && *st == r.stage) {
                    o["exponent"] = json_real::value(*k);
                }
                o
            })
            .collect(),
    )
}
