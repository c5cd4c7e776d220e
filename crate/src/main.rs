//! The `cotangent` command: the same core as the page, natively, for scripting, tests and benchmarks.

mod bench;

use clap::{Parser, Subcommand};
use cotangent::diag::{render, Diagnostic};
use cotangent::pipeline::{self, Analysis, Options, Status};
use cotangent::print::PrintOptions;
use cotangent::value::{to_json, Value};
use cotangent::{limits, stages};
use serde_json::json;
use std::io::Read;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "cotangent", version, about = "Reverse-mode AD program transforms from five papers, stage by stage")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the stages: id, paper, title.
    Stages,
    /// Run stages on a program and print each one's program, primal and gradient.
    Run {
        /// A `.cot` file, or `-` for standard input.
        file: String,
        /// Stage ids to run (repeatable); default: every stage that accepts the program.
        #[arg(long = "stage")]
        stages: Vec<String>,
        /// The input point (overrides the program's `input`), e.g. `(12.0, 13.0)`.
        #[arg(long)]
        at: Option<String>,
        /// The output cotangent; default 1.0 on every real leaf of the output.
        #[arg(long)]
        seed: Option<String>,
        /// Override a `param`: NAME=INT (repeatable).
        #[arg(long = "param", value_parser = parse_param)]
        params: Vec<(String, i64)>,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
        /// What to show for each stage: program, delta, trace, cost (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "program")]
        show: Vec<String>,
        /// Print programs in ASCII instead of Unicode.
        #[arg(long)]
        ascii: bool,
        /// Line width for printed programs.
        #[arg(long, default_value_t = 80)]
        width: usize,
        /// Step budget.
        #[arg(long)]
        max_steps: Option<u64>,
    },
    /// Run every stage on every file, checking `expect` directives and agreement with `forward`.
    Check {
        files: Vec<String>,
    },
    /// Benchmark: each stage's counters, run time, and gradient/primal time ratio on program families.
    Bench {
        /// Families: doubling, straight, wide (repeatable; default all).
        #[arg(long = "family")]
        families: Vec<String>,
        /// Sizes (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "100,1000,10000,100000")]
        sizes: Vec<usize>,
        /// Stage ids (repeatable; default all).
        #[arg(long = "stage")]
        stages: Vec<String>,
        /// Step budget per run.
        #[arg(long, default_value_t = 200_000_000)]
        max_steps: u64,
        #[arg(long)]
        json: bool,
    },
}

fn parse_param(s: &str) -> Result<(String, i64), String> {
    let (name, value) = s.split_once('=').ok_or_else(|| format!("expected NAME=INT, got `{s}`"))?;
    let value = value.trim().parse::<i64>().map_err(|_| format!("`{value}` is not an integer"))?;
    Ok((name.trim().to_string(), value))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The pipeline recurses on syntax; a big native stack lets deep programs through (see limits.rs).
    ExitCode::from(limits::run_with_stack(move || run(cli)))
}

fn read_source(file: &str) -> Result<String, String> {
    if file == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map_err(|e| format!("<stdin>: error: {e}"))?;
        Ok(s)
    } else {
        std::fs::read_to_string(file).map_err(|e| format!("{file}: error: cannot read: {e}"))
    }
}

fn display_name(file: &str) -> &str {
    if file == "-" {
        "<stdin>"
    } else {
        file
    }
}

fn report(file: &str, text: &str, ds: &[Diagnostic]) {
    for d in ds {
        eprint!("{}", render(display_name(file), text, d));
    }
}

fn run(cli: Cli) -> u8 {
    match cli.cmd {
        Cmd::Stages => {
            // grouped by chain: a `# chain` line, then one `id<TAB>paper<TAB>title` line per stage
            for (k, c) in stages::CHAINS.iter().enumerate() {
                if k > 0 {
                    println!();
                }
                println!("# {}: {} ({}, {})", c.id, c.title, c.paper, c.url);
                for s in c.stages {
                    let i = s.info();
                    println!("{}\t{}\t{}", i.id, i.paper, i.title);
                }
            }
            0
        }
        Cmd::Run { file, stages, at, seed, params, json, show, ascii, width, max_steps } => {
            let text = match read_source(&file) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("{e}");
                    return 2;
                }
            };
            let mut opts = Options { at, seed, params, stages, ..Options::default() };
            opts.print = PrintOptions { width, unicode: !ascii, types: false };
            opts.trace = show.iter().any(|s| s == "trace") || json;
            if let Some(n) = max_steps {
                opts.budget.steps = n;
            }
            let a = match pipeline::analyse(&text, &opts) {
                Ok(a) => a,
                Err(ds) => {
                    report(&file, &text, &ds);
                    return 2;
                }
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&to_json_doc(&a, &show)).unwrap_or_default());
            } else {
                print_human(&file, &text, &a, &show);
            }
            exit_code(&a)
        }
        Cmd::Bench { families, sizes, stages, max_steps, json } => {
            let budget = cotangent::interp::Budget { steps: max_steps, allocs: max_steps, depth: 10_000_000, trace_steps: 0 };
            for f in bench::families().iter().filter(|f| families.is_empty() || families.iter().any(|n| n == f.name)) {
                eprintln!("{}: {}", f.name, f.what);
            }
            let rows = bench::run(&families, &sizes, &stages, &budget);
            if json {
                println!("{}", serde_json::to_string_pretty(&bench::json(&rows)).unwrap_or_default());
            } else {
                print!("{}", bench::table(&rows));
            }
            0
        }
        Cmd::Check { files } => {
            let mut status = 0;
            for file in &files {
                let text = match read_source(file) {
                    Ok(t) => t,
                    Err(e) => {
                        eprintln!("{e}");
                        status = status.max(2);
                        continue;
                    }
                };
                let opts = Options { trace: false, ..Options::default() };
                match pipeline::analyse(&text, &opts) {
                    Err(ds) => {
                        report(file, &text, &ds);
                        status = status.max(2);
                    }
                    Ok(a) => {
                        let failures = pipeline::check_expects(&a);
                        for r in &a.stages {
                            let e = r.error.as_deref().unwrap_or("");
                            let verdict = match r.status {
                                Status::Refused => format!("refused: {e}"),
                                Status::Budget => format!("budget: {e}"),
                                Status::Error => format!("error: {e}"),
                                Status::Agrees => "agrees".into(),
                                Status::Disagrees => "DISAGREES".into(),
                                Status::Unchecked => "no reference".into(),
                            };
                            println!("{file}\t{}\t{verdict}", r.id);
                        }
                        for f in &failures {
                            println!("{file}\texpect\tFAILED {f}");
                        }
                        if a.program.expects.is_empty() {
                            println!("{file}\texpect\tnone");
                        }
                        let code = exit_code(&a).max(if failures.is_empty() { 0 } else { 1 });
                        status = status.max(code);
                    }
                }
            }
            status
        }
    }
}

/// 0 when every stage that ran agrees with the reference, 1 otherwise. A stage that refused the
/// program (a located refusal, not a run) does not count against it.
fn exit_code(a: &Analysis) -> u8 {
    let bad = a.reference.is_none()
        || a.stages.iter().any(|r| r.agrees == Some(false) || (r.error.is_some() && !r.refused));
    u8::from(bad)
}

fn gradient_text(g: &[f64]) -> String {
    let parts: Vec<String> = g.iter().map(|x| cotangent::value::show_real(*x)).collect();
    format!("[{}]", parts.join(", "))
}

fn print_human(file: &str, text: &str, a: &Analysis, show: &[String]) {
    let has = |s: &str| show.iter().any(|x| x == s);
    println!("input    {}", a.input);
    println!("primal   {}", a.primal);
    if let Some(r) = &a.reference {
        println!("reference gradient {}   finite differences {}{}", gradient_text(&r.gradient), gradient_text(&r.fd), if r.fd_agrees { "" } else { "  (differ)" });
    }
    for r in &a.stages {
        let info = stages::find(&r.id).map(|s| s.info());
        println!();
        match info {
            Some(i) => println!("== {} — {} ({} {})", r.id, i.title, i.paper, i.section),
            None => println!("== {}", r.id),
        }
        if has("program") && !r.program.is_empty() {
            println!("{}", r.program.trim_end());
            println!("--");
        }
        if let Some(e) = &r.error {
            let d = Diagnostic::error(r.error_span.unwrap_or(cotangent::diag::Span::NONE), e.clone()).in_stage(&r.id);
            print!("{}", render(display_name(file), text, &d));
            continue;
        }
        let primal = r.primal.as_ref().map(Value::to_string).unwrap_or_default();
        let grad = r.gradient_value.as_ref().map(Value::to_string).unwrap_or_default();
        let verdict = match r.agrees {
            Some(true) => "agrees with forward",
            Some(false) => "DISAGREES with forward",
            None => "",
        };
        println!("primal {primal}   gradient {grad}   {verdict}");
        if has("cost") {
            let c = &r.cost;
            let extra: String = c.counters.iter().map(|(k, v)| format!("  {k} {v}")).collect();
            println!("cost: steps {}  real_ops {}  allocs {}  max_depth {}{extra}", c.steps, c.real_ops, c.allocs, c.max_depth);
        }
        if has("delta") {
            if let Some(g) = &r.graph {
                println!("graph: {} nodes, {} edges", g.nodes.len(), g.edges.len());
                for n in &g.nodes {
                    let shared = if n.shared { " (shared)" } else { "" };
                    let visits = n.visits.map(|v| format!(" visits {v}")).unwrap_or_default();
                    println!("  #{} {}{}{}", n.id, n.label, shared, visits);
                }
                for e in &g.edges {
                    println!("  #{} -> #{} {}", e.from, e.to, e.label);
                }
            }
        }
        if has("trace") {
            for (i, s) in r.trace.iter().enumerate() {
                let state: Vec<String> = s.state.iter().map(|(k, v)| format!("{k}↦{v}")).collect();
                println!("  {:>4} {:<9} {}  {{{}}}", i + 1, s.kind, s.note, state.join(", "));
            }
            if r.trace_dropped > 0 {
                println!("  … {} more steps not recorded (trace budget)", r.trace_dropped);
            }
        }
    }
}

fn to_json_doc(a: &Analysis, show: &[String]) -> serde_json::Value {
    let has = |s: &str| show.iter().any(|x| x == s);
    let stages: Vec<serde_json::Value> = a
        .stages
        .iter()
        .map(|r| {
            let mut cost = json!({ "steps": r.cost.steps, "real_ops": r.cost.real_ops, "allocs": r.cost.allocs, "max_depth": r.cost.max_depth });
            for (k, v) in &r.cost.counters {
                cost[k] = json!(v);
            }
            let mut o = json!({
                "id": r.id,
                "status": r.status,
                "contract": r.contract,
                "ok": r.ok,
                "error": r.error,
                "primal": r.primal.as_ref().map(to_json),
                "gradient": r.gradient,
                "agrees": r.agrees,
                "cost": cost,
                "program": r.program,
            });
            if !r.views.is_empty() {
                o["views"] = serde_json::to_value(&r.views).unwrap_or_default();
            }
            if has("delta") {
                o["graph"] = serde_json::to_value(&r.graph).unwrap_or_default();
            }
            if has("trace") {
                o["trace"] = serde_json::to_value(&r.trace).unwrap_or_default();
            }
            o
        })
        .collect();
    json!({
        "input": to_json(&a.input),
        "primal": to_json(&a.primal),
        "reference": a.reference.as_ref().map(|r| json!({ "gradient": r.gradient, "fd": r.fd, "fd_agrees": r.fd_agrees })),
        "stages": stages,
    })
}
