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
            name: "matvec",
            what: "a k×k matrix (nested arrays, n = k² elements) times a vector of k, `map (λrow. sum (map2 (*) row v)) m`",
            make: matvec,
            max: MAX_SIZE as usize,
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
            name: "ho",
            what: "P_HO(n) = t_n of Efficient CHAD §9: n − 1 nested identity applications (λx_{n−1}. ⋯ (λx1. x1) x2 ⋯) x_n (naive higher-order CHAD O(2^n), past 21 refused; closure conversion + CHAD O(n))",
            make: p_ho,
            max: 64,
        },
    ]
}

fn p_ho(n: usize) -> String {
    let n = n.max(2);
    let mut body = "x1".to_string();
    for i in 1..n {
        body = format!("(\\x{i} -> {body}) x{}", i + 1);
    }
    format!("-- P_HO(n) = t_n\ninput 0.75\ndef main x{n} = {body}\n")
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
    s
}

pub fn json(rows: &[Row]) -> serde_json::Value {
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
                o
            })
            .collect(),
    )
}
