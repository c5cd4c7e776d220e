//! Fuzzing the whole pipeline (parser, type checker, every stage, its output's type check, printing,
//! running) with mutations of the examples. A fixed number of cases runs in CI; more on demand:
//!
//!     COTANGENT_FUZZ_CASES=20000 cargo test --release -p cotangent --test fuzz -- --ignored
//!
//! A case fails if anything panics, if a stage reports an internal error, or if an error has no
//! location. Each finding becomes a regression row in `tests/bad_input.rs`.
//! (`cargo fuzz` needs a nightly toolchain, which these machines do not have: hence a seeded,
//! deterministic mutator over the examples here.)

use cotangent::interp::Budget;
use cotangent::limits::run_with_stack;
use cotangent::pipeline::{analyse, Options, Status};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Pieces of the language (and some hostile bytes) spliced into the corpus.
const TOKENS: &[&str] = &[
    "(", ")", "[", "]", ",", "let ", " in ", "\\x -> ", "\\(a, b) -> ", " ! ", " + ", " * ", " - ", " / ", " ** ", "-",
    "1e308", "-0.0", "0.0", "1e-320", "9223372036854775807", "3", "inl ", "inr ", "case ", " of ", "if ", " then ", " else ",
    "def ", "main", "input ", "seed ", "param n = 3\n", "x", "y", "λ", "→", "∞", "\u{0}", "\n", "  ", "sum ", "map2 ",
    "map ", "build ", "reduce ", "fold ", "scanl ", "scanr ", "shift1L ", "length ", "replicate ", "fst ", "snd ",
    "sin ", "exp ", "log ", "sqrt ", "real ", "(x : R)", "(1.0, 2.0)", "[1.0, 2.0]", "[]", "and ", "|||", "--", "{-",
];

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn corpus() -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "cot")).collect();
    files.sort();
    files.iter().map(|p| std::fs::read_to_string(p).unwrap()).collect()
}

/// The nearest char boundary at or before `i`.
fn floor(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// One to four mutations of a corpus file: deleting, duplicating or moving a range, inserting a
/// token, or splicing in part of another file.
fn mutate(rng: &mut Rng, corpus: &[String]) -> String {
    let mut s = corpus[rng.below(corpus.len())].clone();
    for _ in 0..1 + rng.below(4) {
        let a = floor(&s, rng.below(s.len() + 1));
        let b = floor(&s, (a + 1 + rng.below(40)).min(s.len()));
        match rng.below(5) {
            0 => s.replace_range(a..b, ""),
            1 => {
                let piece = s[a..b].to_string();
                s.insert_str(a, &piece);
            }
            2 => s.insert_str(a, TOKENS[rng.below(TOKENS.len())]),
            3 => {
                let other = &corpus[rng.below(corpus.len())];
                let c = floor(other, rng.below(other.len() + 1));
                let d = floor(other, (c + rng.below(200)).min(other.len()));
                s.insert_str(a, &other[c..d]);
            }
            _ => {
                // a number's digits replaced by an extreme one
                let t = ["0", "1e308", "-1e308", "1e-320", "0.0", "-0.0", "123456789012345678901234567890"][rng.below(7)];
                s.replace_range(a..b, t);
            }
        }
    }
    s
}

/// What the cases did: programs the front end rejected, programs analysed, stage runs that finished.
#[derive(Default, Debug)]
struct Tally {
    rejected: u64,
    analysed: u64,
    stage_runs: u64,
}

/// Runs `cases` mutated programs through every stage; returns the failures (program, what).
fn run_cases(cases: u64, seed: u64) -> (Vec<(String, String)>, Tally) {
    let corpus = corpus();
    let mut rng = Rng(seed | 1);
    let budget = Budget { steps: 300_000, allocs: 300_000, depth: 10_000, trace_steps: 100, seconds: Some(5.0), walker: false, ..Budget::default() };
    let mut failures = vec![];
    let mut tally = Tally::default();
    for _ in 0..cases {
        let text = mutate(&mut rng, &corpus);
        let opts = Options { budget: budget.clone(), trace: false, ..Options::default() };
        let t = text.clone();
        let outcome = run_with_stack(move || {
            catch_unwind(AssertUnwindSafe(|| match analyse(&t, &opts) {
                Err(diags) => (diags.iter().filter(|d| d.span.is_none() && d.origin.is_none()).map(|d| format!("unlocated: {}", d.message)).collect::<Vec<_>>(), None),
                Ok(a) => (
                    a.stages
                        .iter()
                        .filter(|r| r.status == Status::Error && r.error.as_deref().is_some_and(|e| e.contains("internal error")))
                        .map(|r| format!("{}: {}", r.id, r.error.clone().unwrap_or_default()))
                        .collect(),
                    Some(a.stages.iter().filter(|r| r.ok).count() as u64),
                ),
            }))
            .map_err(|p| p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default())
        });
        match outcome {
            Err(panic) => failures.push((text, format!("panic: {panic}"))),
            Ok((problems, ran)) => {
                match ran {
                    Some(n) => {
                        tally.analysed += 1;
                        tally.stage_runs += n;
                    }
                    None => tally.rejected += 1,
                }
                failures.extend(problems.into_iter().map(|p| (text.clone(), p)));
            }
        }
    }
    (failures, tally)
}

fn report(failures: &[(String, String)]) -> String {
    failures.iter().take(5).map(|(t, w)| format!("{w}\n--- program:\n{t}\n")).collect()
}

#[test]
fn mutated_examples_never_panic_nor_fail_internally_and_every_error_is_located() {
    let (failures, tally) = run_cases(300, 0x00C0_7A46_E47);
    assert!(failures.is_empty(), "{} failing cases, the first:\n{}", failures.len(), report(&failures));
    // the mutations reach both the front end's errors and the stages
    assert!(tally.rejected > 30 && tally.analysed > 30 && tally.stage_runs > 300, "{tally:?}");
}

#[test]
#[ignore]
fn fuzz_longer() {
    let cases = std::env::var("COTANGENT_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let seed = std::env::var("COTANGENT_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5EED);
    let (failures, tally) = run_cases(cases, seed);
    eprintln!("{cases} cases: {tally:?}");
    assert!(failures.is_empty(), "{} failing cases of {cases}, the first:\n{}", failures.len(), report(&failures));
}
