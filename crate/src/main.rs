//! The `cotangent` command: the same core as the page, natively, for scripting, tests and benchmarks.

mod alloc;
mod bench;

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

use clap::{Parser, Subcommand};
use cotangent::diag::{render, Diagnostic};
use cotangent::pipeline::{self, Analysis, Options, Status};
use cotangent::print::PrintOptions;
use cotangent::value::{json_real, to_json, Value};
use cotangent::{limits, stages};
use serde_json::json;
use std::io::{Read, Write};
use std::process::ExitCode;

/// `writeln!` to the output, returning from the printing function when it fails: a closed pipe
/// (`cotangent run f.cot | head`) ends the printing quietly instead of panicking like `println!`.
macro_rules! out {
    ($o:expr) => { writeln!($o)? };
    ($o:expr, $($t:tt)*) => { writeln!($o, $($t)*)? };
}

/// Exit statuses (README, "The command line").
const EXIT_DISAGREES: u8 = 1;
const EXIT_USER_ERROR: u8 = 2;
const EXIT_NO_REFERENCE: u8 = 3;

/// `run` and `check` hold at most this many MiB (issue 14: at most 1 GiB on the CLI).
const DEFAULT_MAX_MB: u64 = 1024;

/// The memory budget of `run` and `check`, `mb` MiB of resident memory: stages stop cleanly (a named
/// budget stop) at 1/2 of it in live heap bytes, checked after each phase of a stage, and a run at
/// 1/2 of it in the live heap bytes it adds (checked by the machines; the program's code is not the
/// run's); the allocator stops the process at 3/4 of it if a phase grows past that between two checks
/// (the gap leaves room for a growing array's reallocation, which holds its old and new buffers at
/// once). Live bytes, not resident memory, are what the allocator can count on every call, and the
/// allocator holds more than is live (fragmentation, freed pages kept for reuse): 1.39× the live
/// bytes at a hard stop (session 11, chain-100000: 1,421 MB resident at 1,024 MiB live).
fn memory_budget(mb: u64) {
    let bytes = mb << 20;
    limits::set_memory_budget(alloc::live, bytes / 2);
    limits::set_peak_probe(alloc::peak, alloc::reset_peak);
    alloc::set_hard_limit(bytes / 4 * 3, mb);
}

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
        /// The input point (overrides the program's `input`), e.g. `(12.0, 13.0)` or `-0.5`.
        #[arg(long, allow_hyphen_values = true)]
        at: Option<String>,
        /// The output cotangent (overrides the program's `seed`); default 1.0 on every real leaf of the output.
        #[arg(long, allow_hyphen_values = true)]
        seed: Option<String>,
        /// Override a `param`: NAME=INT (repeatable).
        #[arg(long = "param", value_parser = parse_param)]
        params: Vec<(String, i64)>,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
        /// What to show for each stage: program, delta, trace, cost (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "program", value_parser = ["program", "delta", "trace", "cost"])]
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
        /// Memory budget of the whole run in MiB: a stage that would take more stops, named.
        #[arg(long, default_value_t = DEFAULT_MAX_MB, value_parser = clap::value_parser!(u64).range(16..=1 << 20))]
        max_mb: u64,
    },
    /// Run every stage on every file, checking `expect` directives and agreement with `forward`.
    Check {
        files: Vec<String>,
        /// Memory budget of the whole run in MiB: a stage that would take more stops, named.
        #[arg(long, default_value_t = DEFAULT_MAX_MB, value_parser = clap::value_parser!(u64).range(16..=1 << 20))]
        max_mb: u64,
    },
    /// Benchmark: each stage's counters, run time, and gradient/primal time ratio on program families.
    Bench {
        /// Families: peers (particle, horner, peer-doubling, quaternion: the peer AD tools' programs), doubling, p1,
        /// straight, inputs, wide, dot, matvec, program-size, sum, magic, zero, ... (repeatable; default all).
        #[arg(long = "family")]
        families: Vec<String>,
        /// Sizes (comma-separated), each from 1 to 1000000 (bench::MAX_SIZE; the program-size families stop at 100000).
        /// Default: each family's own modest sizes (100 for most; 100 to 10000 for particle and horner).
        #[arg(long, value_delimiter = ',', value_parser = bench::parse_size)]
        sizes: Option<Vec<usize>>,
        /// Stage ids (repeatable; default all).
        #[arg(long = "stage")]
        stages: Vec<String>,
        /// Step budget per run.
        #[arg(long, default_value_t = 200_000_000)]
        max_steps: u64,
        /// Wall-clock limit per run (one stage at one size), in seconds.
        #[arg(long, default_value_t = 5.0, value_parser = parse_seconds)]
        max_seconds: f64,
        /// Memory limit per case: how many MB one run may add to the live heap before it is stopped.
        #[arg(long, default_value_t = 1024)]
        max_mb: u64,
        /// Runs per timing (primal and gradient each); the best is reported.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=1000))]
        repeat: u64,
        /// One JSON object per line, each printed as its row finishes.
        #[arg(long)]
        json: bool,
        /// Run on the reference walker alone, without the compiled fast regions (to compare engines).
        #[arg(long)]
        walker: bool,
        /// Time with the thread's CPU clock instead of the wall clock (on a loaded machine the wall
        /// clock also counts waiting for a core).
        #[arg(long)]
        cpu: bool,
        /// Time a run shorter than this many milliseconds many to a sample, each on its own machine
        /// made before the clock starts, and divide (as the page's engine is timed in wasm:
        /// `scripts/bench-wasm.mjs`); 0, the default, times every run alone.
        #[arg(long, default_value_t = 0.0, value_parser = parse_sample_ms)]
        sample_ms: f64,
    },
}

fn parse_sample_ms(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=1000.0).contains(&x) => Ok(x),
        _ => Err(format!("`{s}` is not a number of milliseconds from 0 to 1000")),
    }
}

fn parse_param(s: &str) -> Result<(String, i64), String> {
    let (name, value) = s.split_once('=').ok_or_else(|| format!("expected NAME=INT, got `{s}`"))?;
    let value = value.trim().parse::<i64>().map_err(|_| format!("`{value}` is not an integer"))?;
    Ok((name.trim().to_string(), value))
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x > 0.0 && x.is_finite() => Ok(x),
        _ => Err(format!("`{s}` is not a positive number of seconds")),
    }
}

fn main() -> ExitCode {
    alloc::no_huge_pages();
    let cli = Cli::parse();
    // The pipeline recurses on syntax; a big native stack lets deep programs through (see limits.rs).
    ExitCode::from(limits::run_with_stack(move || run(cli)))
}

/// The program text, or the rendered error: unreadable, or not UTF-8 (located at the first bad byte).
fn read_source(file: &str) -> Result<String, String> {
    let mut bytes = vec![];
    if file == "-" {
        std::io::stdin().read_to_end(&mut bytes).map_err(|e| format!("<stdin>: error: {e}"))?;
    } else {
        bytes = std::fs::read(file).map_err(|e| format!("{file}: error: cannot read: {e}"))?;
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        // The text up to the bad byte is valid, so offsets there are the file's own.
        let text = String::from_utf8_lossy(e.as_bytes());
        let d = Diagnostic::error(cotangent::diag::Span::new(at, at + 1), format!("the file is not valid UTF-8 (byte offset {at})"));
        render(display_name(file), &text, &d).trim_end().to_string()
    })
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
        // `--at` and `--seed` errors point into the argument, not the file.
        match &d.origin {
            Some((name, arg)) => eprint!("{}", render(name, arg, d)),
            None => eprint!("{}", render(display_name(file), text, d)),
        }
    }
}

fn run(cli: Cli) -> u8 {
    let mut o = std::io::BufWriter::new(std::io::stdout().lock());
    let mut code = 0;
    // A write error (stdout closed early) only stops the printing; the status stays the command's.
    let _ = run_to(cli, &mut o, &mut code).and_then(|()| o.flush());
    code
}

fn run_to(cli: Cli, o: &mut impl Write, code: &mut u8) -> std::io::Result<()> {
    match cli.cmd {
        Cmd::Stages => {
            // grouped by chain: a `# chain` line, then one `id<TAB>paper<TAB>title` line per stage
            for (k, c) in stages::CHAINS.iter().enumerate() {
                if k > 0 {
                    out!(o);
                }
                out!(o, "# {}: {} ({}, {})", c.id, c.title, c.paper, c.url);
                for s in c.stages {
                    let i = s.info();
                    out!(o, "{}\t{}\t{}", i.id, i.paper, i.title);
                }
            }
        }
        Cmd::Run { file, stages, at, seed, params, json, show, ascii, width, max_steps, max_mb } => {
            memory_budget(max_mb);
            let text = match read_source(&file) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("{e}");
                    *code = EXIT_USER_ERROR;
                    return Ok(());
                }
            };
            let mut opts = Options { at, seed, params, stages, ..Options::default() };
            opts.print = PrintOptions { width, unicode: !ascii, types: false };
            opts.trace = show.iter().any(|s| s == "trace") || json;
            // views and rewrite step texts are printed only in JSON and with the trace
            opts.views = opts.trace;
            // Only the stages asked for are shown (printed, traced): one that another takes as its input
            // (chad/monadic for chad/mutable) is prepared, not printed (issue 14 item 4: on a 10^5-line
            // program its text beside its tree took chad/mutable's input past the memory budget).
            if !opts.stages.is_empty() {
                opts.traced = Some(opts.stages.clone());
            }
            if let Some(n) = max_steps {
                opts.budget.steps = n;
            }
            // Each stage is printed (and flushed) as soon as it has run, and its result let go: holding
            // every stage's program text, views and graph until the end took a 10^4-term program's
            // `--json` past the memory budget at the last stage, and then nothing at all was printed.
            // The plain output writes each stage's program as it is printed (`Streamer`).
            let mut bad = false;
            let streamer = Streamer::new(o);
            let sink = (!json && show.iter().any(|s| s == "program")).then_some(&streamer as &dyn pipeline::ProgramSink);
            let phases = one_stage_a_phase(&opts.stages);
            let analysed = pipeline::analyse_streaming(&text, &opts, &phases, &mut |a, results| {
                bad |= results.iter().any(failed);
                streamer.write(|o| {
                    if !streamer.started.replace(true) {
                        if json {
                            write!(o, "{}", json_head(a))?;
                        } else {
                            let forward_error = results.iter().find(|r| r.id == "forward").and_then(|r| r.error.clone());
                            print_head(o, a, forward_error)?;
                        }
                    } else if json && !results.is_empty() {
                        write!(o, ",")?;
                    }
                    for (k, r) in results.iter().enumerate() {
                        if json {
                            let item = serde_json::to_string_pretty(&stage_json(r, &show)).unwrap_or_default();
                            let item: Vec<String> = item.lines().map(|l| format!("    {l}")).collect();
                            write!(o, "{}\n{}", if k > 0 { "," } else { "" }, item.join("\n"))?;
                        } else {
                            let streamed = streamer.streamed.borrow().contains(&r.id);
                            print_stage(o, &file, &text, r, &show, streamed)?;
                        }
                    }
                    o.flush()
                });
            }, sink);
            let (o, written) = (streamer.o.into_inner(), streamer.written.into_inner());
            let a = match analysed {
                Ok(a) => a,
                Err(ds) => {
                    report(&file, &text, &ds);
                    *code = EXIT_USER_ERROR;
                    return Ok(());
                }
            };
            *code = status(&a, bad);
            written?;
            if json {
                out!(o, "\n  ]\n}}");
            }
        }
        Cmd::Bench { families, sizes, stages, max_steps, max_seconds, max_mb, repeat, json, walker, cpu, sample_ms } => {
            let budget = cotangent::interp::Budget {
                steps: max_steps,
                allocs: max_steps,
                depth: 10_000_000,
                trace_steps: 0,
                seconds: Some(max_seconds),
                walker,
                // every function's regions compiled before the clock starts: the primal is timed
                // without lowering
                regions_after: 0,
            };
            let set = bench::Settings { budget, repeat: repeat as usize, max_bytes: max_mb.saturating_mul(1 << 20), cpu, min_sample: sample_ms / 1e3 };
            if let Some(bad) = families.iter().find(|n| *n != "peers" && !bench::families().iter().any(|f| f.name == n.as_str())) {
                eprintln!("error: no bench family `{bad}` (see `cotangent bench --help`)");
                *code = EXIT_USER_ERROR;
                return Ok(());
            }
            for f in bench::chosen_families(&families) {
                eprintln!("{}: {}", f.name, f.what);
            }
            if !json {
                out!(o, "{}", bench::header());
                o.flush()?;
            }
            // each row as it finishes (a long run prints as it goes); the rows are kept for the exponents
            let mut rows = vec![];
            let mut failed: std::io::Result<()> = Ok(());
            bench::run(&families, sizes.as_deref(), &stages, &set, &mut |r| {
                if failed.is_ok() {
                    let line = if json { bench::json_line(r) } else { bench::table_line(r) };
                    failed = writeln!(o, "{line}").and_then(|()| o.flush());
                }
                rows.push(r.clone());
            });
            failed?;
            for line in bench::exponent_lines(&rows, json) {
                out!(o, "{line}");
            }
        }
        Cmd::Check { files, max_mb } => {
            memory_budget(max_mb);
            let status = code;
            for file in &files {
                let text = match read_source(file) {
                    Ok(t) => t,
                    Err(e) => {
                        eprintln!("{e}");
                        *status = (*status).max(EXIT_USER_ERROR);
                        continue;
                    }
                };
                let opts = Options { trace: false, views: false, ..Options::default() };
                match pipeline::analyse(&text, &opts) {
                    Err(ds) => {
                        report(file, &text, &ds);
                        *status = (*status).max(EXIT_USER_ERROR);
                    }
                    Ok(a) => {
                        let failures = pipeline::check_expects(&a);
                        let c = exit_code(&a).max(if failures.is_empty() { 0 } else { EXIT_DISAGREES });
                        *status = (*status).max(c);
                        for r in &a.stages {
                            let e = r.error.as_deref().unwrap_or("");
                            let verdict = match r.status {
                                Status::Refused => format!("refused: {e}"),
                                Status::Error => format!("error: {e}"),
                                Status::Budget => format!("budget: {e}"),
                                Status::Agrees => "agrees".into(),
                                Status::Disagrees => "DISAGREES".into(),
                                Status::Unchecked => "unchecked (no reference: forward mode failed)".into(),
                            };
                            out!(o, "{file}\t{}\t{verdict}", r.id);
                        }
                        for f in &failures {
                            out!(o, "{file}\texpect\tFAILED {f}");
                        }
                        if a.program.expects.is_empty() {
                            out!(o, "{file}\texpect\tnone");
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// 3 when there is no reference (forward mode itself failed, e.g. at its budget), so no stage could
/// be checked; else 1 when a stage disagrees with it or failed (an error, a budget stop); else 0. A
/// stage that refused the program (a located refusal by design, not a run) does not count.
fn exit_code(a: &Analysis) -> u8 {
    status(a, a.stages.iter().any(failed))
}

/// A stage that disagrees with the reference or failed (an error, a budget stop): exit status 1.
fn failed(r: &pipeline::StageResult) -> bool {
    matches!(r.status, Status::Disagrees | Status::Error | Status::Budget)
}

/// The exit status (README, "The command line"): no reference, a stage that disagrees or failed, or 0.
fn status(a: &Analysis, bad: bool) -> u8 {
    if a.reference.is_none() {
        EXIT_NO_REFERENCE
    } else if bad {
        EXIT_DISAGREES
    } else {
        0
    }
}

fn gradient_text(g: &[f64]) -> String {
    let parts: Vec<String> = g.iter().map(|x| cotangent::value::show_real(*x)).collect();
    format!("[{}]", parts.join(", "))
}

/// The stages to run as phases of one stage each (`pipeline::analyse_in_phases`), so that each is
/// printed as soon as it is done; the first phase runs up to `forward`, whose error the head reports.
fn one_stage_a_phase(chosen: &[String]) -> Vec<Vec<String>> {
    let ids: Vec<String> = if chosen.is_empty() { stages::all().into_iter().map(|s| s.info().id.to_string()).collect() } else { chosen.to_vec() };
    let first = ids.iter().position(|id| id == "forward").map_or(1, |k| k + 1).min(ids.len());
    let mut phases = vec![ids[..first].to_vec()];
    phases.extend(ids[first..].iter().map(|id| vec![id.clone()]));
    phases
}

/// The lines before the stages: the input, the primal and the reference.
fn print_head(o: &mut impl Write, a: &Analysis, forward_error: Option<String>) -> std::io::Result<()> {
    out!(o, "input    {}", a.input);
    out!(o, "primal   {}", a.primal);
    if a.reference.is_none() {
        let why = forward_error.map(|e| format!(": forward mode failed: {e}")).unwrap_or_default();
        out!(o, "reference none{why}; no stage could be checked (exit status {EXIT_NO_REFERENCE})");
    }
    if let Some(r) = &a.reference {
        out!(o, "reference gradient {}   finite differences {}{}", gradient_text(&r.gradient), gradient_text(&r.fd), if r.fd_agrees { "" } else { "  (differ)" });
    }
    Ok(())
}

/// The line before a stage's output: a blank line, then its id, title and paper.
fn stage_header(o: &mut impl Write, id: &str) -> std::io::Result<()> {
    out!(o);
    match stages::find(id).map(|s| s.info()) {
        Some(i) => out!(o, "== {} — {} ({} {})", id, i.title, i.paper, i.section),
        None => out!(o, "== {}", id),
    }
    Ok(())
}

/// The plain output's `ProgramSink`: the head, then each stage run's header and program, written
/// as the program is printed, so that its text is not held beside the output's tree (issue 14 item
/// 4: four stages' outputs of a 10^5-line program went past the memory budget with it). The bytes
/// written are `print_stage`'s: the program trimmed at its end, then `--`.
struct Streamer<'o, W: Write> {
    o: std::cell::RefCell<&'o mut W>,
    /// The head is written.
    started: std::cell::Cell<bool>,
    /// The stages whose header and program are written (`print_stage` writes the rest).
    streamed: std::cell::RefCell<Vec<String>>,
    /// The program's whitespace since its last other character, held back until more follows.
    held: std::cell::RefCell<String>,
    /// Whether the program has any text.
    any: std::cell::Cell<bool>,
    /// The first write error (stdout closed early): nothing more is written.
    written: std::cell::RefCell<std::io::Result<()>>,
}

impl<'o, W: Write> Streamer<'o, W> {
    fn new(o: &'o mut W) -> Self {
        Streamer { o: o.into(), started: false.into(), streamed: Default::default(), held: Default::default(), any: false.into(), written: Ok(()).into() }
    }
    fn write(&self, f: impl FnOnce(&mut W) -> std::io::Result<()>) {
        let mut w = self.written.borrow_mut();
        if w.is_ok() {
            *w = f(&mut self.o.borrow_mut());
        }
    }
}

impl<W: Write> pipeline::ProgramSink for Streamer<'_, W> {
    fn head(&self, a: &Analysis, forward_error: Option<&str>) {
        self.started.set(true);
        self.write(|o| print_head(o, a, forward_error.map(str::to_string)).and_then(|()| o.flush()));
    }
    fn begin(&self, id: &str) {
        self.streamed.borrow_mut().push(id.to_string());
        self.held.borrow_mut().clear();
        self.any.set(false);
        self.write(|o| stage_header(o, id));
    }
    fn text(&self, _: &str, chunk: String) {
        self.any.set(self.any.get() || !chunk.is_empty());
        let kept = chunk.trim_end().len();
        let mut held = self.held.borrow_mut();
        if kept == 0 {
            held.push_str(&chunk);
            return;
        }
        let before = std::mem::replace(&mut *held, chunk[kept..].to_string());
        self.write(|o| o.write_all(before.as_bytes()).and_then(|()| o.write_all(&chunk.as_bytes()[..kept])));
    }
    fn end(&self, _: &str) {
        self.held.borrow_mut().clear();
        if self.any.get() {
            self.write(|o| {
                out!(o);
                out!(o, "--");
                o.flush()
            });
        }
    }
}

/// One stage's result, as `show` asks; its header and program already written where `streamed`.
fn print_stage(o: &mut impl Write, file: &str, text: &str, r: &pipeline::StageResult, show: &[String], streamed: bool) -> std::io::Result<()> {
    let has = |s: &str| show.iter().any(|x| x == s);
    if !streamed {
        stage_header(o, &r.id)?;
    }
    if has("program") && !r.program.is_empty() {
        out!(o, "{}", r.program.trim_end());
        out!(o, "--");
    }
    if let Some(e) = &r.error {
        let d = Diagnostic::error(r.error_span.unwrap_or(cotangent::diag::Span::NONE), e.clone()).in_stage(&r.id);
        write!(o, "{}", render(display_name(file), text, &d))?;
        return Ok(());
    }
    let primal = r.primal.as_ref().map(Value::to_string).unwrap_or_default();
    let grad = r.gradient_value.as_ref().map(Value::to_string).unwrap_or_default();
    let verdict = match r.agrees {
        Some(true) => "agrees with forward",
        Some(false) => "DISAGREES with forward",
        None => "",
    };
    out!(o, "primal {primal}   gradient {grad}   {verdict}");
    if has("cost") {
        let c = &r.cost;
        let extra: String = c.counters.iter().map(|(k, v)| format!("  {k} {v}")).collect();
        out!(o, "cost: steps {}  real_ops {}  allocs {}  max_depth {}{extra}", c.steps, c.real_ops, c.allocs, c.max_depth);
    }
    if has("delta") {
        if let Some(g) = &r.graph {
            out!(o, "graph: {} nodes, {} edges", g.nodes.len(), g.edges.len());
            for n in &g.nodes {
                let shared = if n.shared { " (shared)" } else { "" };
                let visits = n.visits.map(|v| format!(" visits {v}")).unwrap_or_default();
                out!(o, "  #{} {}{}{}", n.id, n.label, shared, visits);
            }
            for e in &g.edges {
                out!(o, "  #{} -> #{} {}", e.from, e.to, e.label);
            }
        }
    }
    if has("trace") {
        for (i, s) in r.trace.iter().enumerate() {
            let state: Vec<String> = s.state.iter().map(|(k, v)| format!("{k}↦{v}")).collect();
            out!(o, "  {:>4} {:<9} {}  {{{}}}", i + 1, s.kind, s.note, state.join(", "));
        }
        if r.trace_dropped > 0 {
            out!(o, "  … {} more steps not recorded (trace budget)", r.trace_dropped);
        }
    }
    Ok(())
}

/// The JSON document up to its `stages` array's first item (the items follow as each stage is done,
/// then `\n  ]\n}`): `--json`'s output is the pretty-printed document whole.
fn json_head(a: &Analysis) -> String {
    let head = json!({
        "input": to_json(&a.input),
        "primal": to_json(&a.primal),
        "reference": a.reference.as_ref().map(|r| json!({ "gradient": json_real::values(&r.gradient), "fd": json_real::values(&r.fd), "fd_agrees": r.fd_agrees })),
        "stages": [],
    });
    let text = serde_json::to_string_pretty(&head).unwrap_or_default();
    // `"stages": []` is the last key
    format!("{}[", text.trim_end_matches("[]\n}"))
}

/// One stage's JSON object, with what `show` asks.
fn stage_json(r: &pipeline::StageResult, show: &[String]) -> serde_json::Value {
    let has = |s: &str| show.iter().any(|x| x == s);
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
        "gradient": json_real::values(&r.gradient),
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
}
