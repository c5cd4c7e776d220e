//! Part C of the array dual-numbers chain (Smeding et al. §5–7): bot's worked examples (E8, the
//! notes' E15), the dual-arrays Delta and reverse pass (E7), and the symbolic stages (E10, E11).

use cotangent::limits::run_with_stack;
use cotangent::pipeline::{analyse, Options};

/// What a test reads of a stage's result (sendable across the big-stack thread).
#[derive(Debug)]
struct StageResult {
    program: String,
    views: Vec<(String, String)>,
    agrees: Option<bool>,
    error: Option<String>,
    refused: bool,
    /// The error's source range (start, end), bytes.
    error_span: Option<(usize, usize)>,
    primal: String,
    gradient: Vec<f64>,
    /// Each trace step's kind and note.
    trace: Vec<(String, String)>,
    /// Each trace step's state rows, values as text.
    states: Vec<Vec<(String, String)>>,
    counters: Vec<(String, u64)>,
}

/// The results of `stages` on `text`.
fn run(text: &str, stages: &[&str]) -> Vec<StageResult> {
    let text = text.to_string();
    let stages: Vec<String> = stages.iter().map(|s| s.to_string()).collect();
    run_with_stack(move || {
        analyse(&text, &Options { stages, ..Options::default() }).map(|a| {
            a.stages
                .into_iter()
                .map(|r| StageResult {
                    program: r.program,
                    views: r.views.into_iter().map(|v| (v.name, v.text)).collect(),
                    agrees: r.agrees,
                    error: r.error,
                    refused: r.refused,
                    error_span: r.error_span.map(|s| (s.start as usize, s.end as usize)),
                    primal: r.primal.map(|p| p.to_string()).unwrap_or_default(),
                    gradient: r.gradient,
                    states: r.trace.iter().map(|t| t.state.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()).collect(),
                    trace: r.trace.into_iter().map(|t| (t.kind, t.note)).collect(),
                    counters: r.cost.counters.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                })
                .collect::<Vec<_>>()
        })
        .map_err(|d| format!("{d:?}"))
    })
    .unwrap_or_else(|d| panic!("{d}"))
}

fn one(text: &str, stage: &str) -> StageResult {
    let mut rs = run(text, &[stage]);
    assert_eq!(rs.len(), 1);
    rs.pop().unwrap()
}

/// bot's output on `text`: it agrees with forward mode (primal and gradient), and its program
/// (one line) and rewrite trace view.
fn bot(text: &str) -> (String, String) {
    let r = one(text, "arrays/bot");
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.agrees, Some(true), "bot's output disagrees with forward on {text}");
    let flat = r.program.split_whitespace().collect::<Vec<_>>().join(" ");
    let trace = r.views.iter().find(|v| v.0.contains("trace")).map(|v| v.1.clone()).unwrap_or_default();
    (flat, trace)
}

fn fired(trace: &str, rules: &[&str]) {
    for r in rules {
        assert!(trace.contains(r), "rule {r} did not fire:\n{trace}");
    }
}

#[test]
fn e8_build1_of_index_plus_one_becomes_gather_plus_replicate() {
    let (p, trace) = bot("input [1.0, 2.0, 3.0]\ndef main a = sum (build (length a) (\\i -> a ! i + 1.0))\nexpect primal 9.0\nexpect grad [1.0, 1.0, 1.0]");
    assert!(p.contains("sum (map2 (λx y → x + y) (gather11 (length a) a (λi → [i])) (replicate (length a) 1.0))"), "{p}");
    fired(&trace, &["B5", "BI1", "B2"]);
}

#[test]
fn e10_self_convolution_after_bot_is_fig_18() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/arrays-self-convolution.cot")).unwrap();
    let (p, _) = bot(&src);
    assert!(p.contains("sum (map2 (λx y → x * y) (gather11 n a (λi → [i])) (gather11 n a (λi → [n - 1 - i])))"), "{p}");
}

#[test]
fn e15_relu_uses_b3_b4_bi3_b10() {
    let (p, trace) = bot("input [-1.0, 2.0, -3.0, 4.0]\ndef main a = sum (build 4 (\\i -> let y = a ! i in if y < 0.0 then 0.0 else y))\nexpect primal 6.0\nexpect grad [0.0, 1.0, 0.0, 1.0]");
    fired(&trace, &["B3", "B4", "BI3", "B10", "BI1"]);
    assert!(p.contains("tr [1, 0] [replicate 4 0.0"), "{p}");
}

#[test]
fn e15_row_sums_squared_uses_b7() {
    let (p, trace) = bot("input [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]\ndef main m = sum (build 2 (\\i -> let r = sum (m ! i) in r * r))\nexpect primal 261.0");
    fired(&trace, &["B7", "BI1"]);
    assert!(p.contains("sumOuter (tr [1, 0] (gather11 2 m (λi → [i])))"), "{p}");
}

#[test]
fn e15_replicate_in_build_uses_b11() {
    let (p, trace) = bot("input ([1.0, 2.0, 3.0], [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])\ndef main (a, w) = sum (build 3 (\\i -> sum (map2 (\\x y -> x * y) (replicate 2 (a ! i)) (w ! i))))\nexpect primal 50.0\nexpect grad ([3.0, 7.0, 11.0], [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])");
    fired(&trace, &["B11"]);
    assert!(!p.contains("build"), "{p}");
}

#[test]
fn e15_index_of_replicate_uses_i9() {
    let (p, trace) = bot("input [5.0, 7.0]\ndef main a = sum (build 2 (\\i -> replicate 3 a ! i ! i))\nexpect primal 12.0\nexpect grad [1.0, 1.0]");
    fired(&trace, &["I9", "BI1"]);
    assert!(p.contains("sum (gather11 2 a (λi → [i]))"), "{p}");
}

#[test]
fn e15_computed_index_uses_i5_and_b1() {
    let (p, trace) =
        bot("input ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])\ndef main (a, b) = sum (build 3 (\\i -> map2 (\\x y -> x * y) a b ! (2 - i)))\nexpect primal 32.0\nexpect grad ([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])");
    // as the notes' E15 row: `let i5 = replicate 3 2 - [0,1,2] in gather [3] a (λ[i].[index i5 [i]])`
    fired(&trace, &["I5", "B3", "B5", "B2", "B1", "BI1"]);
    assert!(p.contains("let j = map2 (λx y → x - y) (replicate 3 2) (iota 3)"), "{p}");
    assert!(p.contains("gather11 3 a (λi → [index j i])"), "{p}");
}

#[test]
fn e15_two_dimensional_literal_uses_i8_and_bi3() {
    let (_, trace) = bot("input ([[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]])\ndef main (m, m2) = sum (build 2 (\\i -> [m, m2] ! 1 ! i ! i))\nexpect primal 13.0\nexpect grad ([[0.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]])");
    fired(&trace, &["I8", "BI3", "B10", "BI1"]);
}

#[test]
fn e15_silly_alt_nested_maps() {
    let (p, _) = bot("input [1.0, 2.0]\ndef main v = sum (map (\\x -> x + 1.0) (map (\\x -> 2.0 * x) (map (\\x -> x + 1.0) v)))\nexpect primal 12.0\nexpect grad [2.0, 2.0]");
    assert!(!p.contains("build"), "{p}");
}

#[test]
fn e9_concatenation_by_strict_cond_needs_total_index() {
    let (p, trace) = bot("input [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]\ndef main a = sum (build 20 (\\i -> if i < 10 then a ! i else a ! (i - 10)))\nexpect primal 110.0");
    fired(&trace, &["B4", "BI3", "B10", "BI1"]);
    assert!(p.contains("gather11 20 a (λi → [i - 10])"), "{p}");
}

#[test]
fn e4_matrix_product_is_build1_free_and_agrees() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/arrays-matmul.cot")).unwrap();
    let (p, trace) = bot(&src);
    assert!(!p.contains("build"), "{p}");
    fired(&trace, &["B5", "B7", "B8", "B12"]);
}

fn dot(n: usize) -> String {
    let a: Vec<String> = (1..=n).map(|k| format!("{k}.0")).collect();
    let b: Vec<String> = (n + 3..=2 * n + 2).map(|k| format!("{k}.0")).collect();
    format!("input ([{}], [{}])\ndef main (a, b) = sum (build (length a) (\\i -> a ! i * b ! i))", a.join(", "), b.join(", "))
}

fn counter(r: &StageResult, name: &str) -> u64 {
    r.counters.iter().find(|(k, _)| k == name).map(|(_, v)| *v).unwrap_or(0)
}

#[test]
fn e7_dot_product_on_dual_arrays() {
    let r = one(&dot(3).replace("[4.0, 5.0, 6.0]", "[4.0, 5.0, 6.0]").replace("[6.0, 7.0, 8.0]", "[4.0, 5.0, 6.0]"), "arrays/dual-arrays");
    assert_eq!(r.agrees, Some(true), "{r:?}");
    assert_eq!(r.primal, "32.0");
    assert_eq!(r.gradient, vec![4.0, 5.0, 6.0, 1.0, 2.0, 3.0]);
    assert_eq!(counter(&r, "delta_nodes"), 12);
    // the backprop pops IDs 4, 3, 2, 1 with accumulators 1.0, [1,1,1], [1,2,3], [4,5,6]
    let pops: Vec<&str> = r.trace.iter().filter(|(k, _)| k == "backprop").map(|(_, n)| n.as_str()).collect();
    let want = ["pop ID 4 with cotangent 1.0", "pop ID 3 with cotangent [1.0, 1.0, 1.0]", "pop ID 2 with cotangent [1.0, 2.0, 3.0]", "pop ID 1 with cotangent [4.0, 5.0, 6.0]"];
    assert_eq!(pops.len(), 4, "{pops:?}");
    for (p, w) in pops.iter().zip(want) {
        assert!(p.starts_with(w), "{p} (wanted {w})");
    }
}

#[test]
fn e7_twelve_array_delta_nodes_at_any_length() {
    for n in [1, 2, 5, 40, 300] {
        let r = one(&dot(n), "arrays/dual-arrays");
        assert_eq!(r.agrees, Some(true), "n = {n}: {r:?}");
        assert_eq!(counter(&r, "delta_nodes"), 12, "n = {n}");
        assert_eq!(counter(&r, "backprop_ids"), 4, "n = {n}");
    }
}

#[test]
fn e10_self_convolution_after_d_is_fig_18_middle() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/arrays-self-convolution.cot")).unwrap();
    let r = one(&src, "arrays/dual-arrays");
    assert_eq!(r.agrees, Some(true), "{r:?}");
    let p: String = r.program.split_whitespace().collect();
    // D[t'_sc]: two gathers, each shared with its own ID, then the product's Add of Scales, then SumOuter
    for piece in [
        "(x, d) ← pure a; id ← genID (); pure ( gather11 n x (λi → [i]), Share id (Gather n d (λi → [i])) )",
        "gather11 n x (λi → [n - 1 - i]), Share id (Gather n d (λi → [n - 1 - i]))",
        "Share id (Add (Scale x1 d) (Scale x d1))",
        "pure (sum x, Share id (SumOuter d))",
    ] {
        let piece: String = piece.split_whitespace().collect();
        assert!(p.contains(&piece), "missing {piece} in {p}");
    }
    assert_eq!(r.gradient, vec![8.0, 6.0, 4.0, 2.0]);
}

#[test]
fn e9_concatenation_gradient_needs_dropped_scatter_entries() {
    let r = one("input [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]\ndef main a = sum (build 20 (\\i -> if i < 10 then a ! i else a ! (i - 10)))", "arrays/dual-arrays");
    assert_eq!(r.agrees, Some(true), "{r:?}");
    assert_eq!(r.gradient, vec![2.0; 10]);
}

fn view<'a>(r: &'a StageResult, name: &str) -> &'a str {
    r.views.iter().find(|v| v.0.contains(name)).map(|v| v.1.as_str()).unwrap_or("")
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect()
}

#[test]
fn e10_self_convolution_simplified_and_shared_as_fig_18() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/arrays-self-convolution.cot")).unwrap();
    let r = one(&src, "arrays/symbolic");
    assert_eq!(r.agrees, Some(true), "{r:?}");
    // Fig. 18's bottom box: the primal lets, four IDs, and the symbolic Delta
    let eq6 = squash(view(&r, "Eq. 6"));
    for piece in [
        "let x2 = gather11 n a (λi → [i])",
        "let x3 = gather11 n a (λi → [n - 1 - i])",
        "id1 ← genID; id2 ← genID; id3 ← genID; id4 ← genID",
        "Share4 (SumOuter (Share3 (Add (Scale x3 (Share1 (Gather (Input 0) (λi → [i])))) (Scale x2 (Share2 (Gather (Input 0) (λi → [n - 1 - i])))))))",
    ] {
        assert!(eq6.contains(&squash(piece)), "missing {piece} in {eq6}");
    }
    // §7.4: shareToLet (reversePass [1.0] s) = let shared1 = replicate n c in scatter (x2 ·→ shared1) … +→ scatter (x1 ·→ shared1) …
    let r = one(&src, "arrays/share-to-let");
    assert_eq!(r.agrees, Some(true), "{r:?}");
    let p = squash(&r.program);
    assert!(p.contains(&squash("let shared1 = replicate (length x4) seed1 in")), "{p}");
    assert!(
        p.contains(&squash("plus (scatter11 (length a) (times x3 shared1) (λi → [i])) (scatter11 (length a) (times x2 shared1) (λi → [n - 1 - i]))")),
        "{p}"
    );
}

#[test]
fn e7_final_program_of_share_to_let() {
    let r = one(&dot(3).replace("[6.0, 7.0, 8.0]", "[4.0, 5.0, 6.0]"), "arrays/share-to-let");
    assert_eq!(r.agrees, Some(true), "{r:?}");
    assert_eq!(r.gradient, vec![4.0, 5.0, 6.0, 1.0, 2.0, 3.0]);
    let p = squash(&r.program);
    // the notes' E7: p1, p2 gathers, p3 = p1 * p2, p4 = sumOuter p3, one shared replicate of c used by both
    for piece in [
        "let x1 = gather11 (length a) a (λi → [i]) in",
        "let x2 = gather11 (length a) b (λi → [i]) in",
        "let x3 = map2 (λx y → x * y) x1 x2 in",
        "let x4 = sum x3 in",
        "let shared1 = replicate (length x3) seed1 in",
        "(x4, (scatter11 (length a) (times x2 shared1) (λi → [i]), scatter11 (length b) (times x1 shared1) (λi → [i])))",
    ] {
        assert!(p.contains(&squash(piece)), "missing {piece} in {p}");
    }
}

/// E11 generalised: `let x1 = inp + inp in … let xm = x(m-1) + x(m-1) in xm`.
fn chain(m: usize) -> String {
    let mut body = String::new();
    let mut prev = "inp".to_string();
    for k in 1..=m {
        body.push_str(&format!("let x{k} = {prev} + {prev} in "));
        prev = format!("x{k}");
    }
    format!("input 1.0\ndef main inp = {body}{prev}")
}

#[test]
fn e11_symbolic_term_doubles_without_share_and_grows_linearly_with_it() {
    let sizes = |stage: &str| -> Vec<u64> {
        (1..=8)
            .map(|m| {
                let r = one(&chain(m), stage);
                assert_eq!(r.agrees, Some(true), "{stage} at m = {m}: {r:?}");
                assert_eq!(r.gradient, vec![(1u64 << m) as f64]);
                counter(&r, "gradient_size")
            })
            .collect()
    };
    let plain = sizes("arrays/symbolic");
    // the cotangent term has 2^m leaves: the program's growth doubles at each step (beside the
    // primal's linear part)
    let growth: Vec<u64> = plain.windows(2).map(|w| w[1] - w[0]).collect();
    for w in growth.windows(2) {
        assert!(w[1] + 4 >= 2 * w[0], "{plain:?}");
    }
    assert!(plain[7] > 1 << 10, "{plain:?}");
    for stage in ["arrays/symbolic-share", "arrays/share-to-let"] {
        let shared = sizes(stage);
        // linear: constant increments
        let steps: Vec<u64> = shared.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(steps.iter().all(|&s| s == steps[2]), "{stage}: {shared:?}");
    }
    // the notes' E11 program: let shared1 = c + c in …
    let r = one(&chain(3), "arrays/share-to-let");
    let p = squash(&r.program);
    assert!(p.contains(&squash("let shared1 = plus seed1 seed1 in let shared2 = plus shared1 shared1 in")), "{p}");
}

/// A step's row `key`, if it has one.
fn row<'a>(r: &'a StageResult, step: usize, key: &str) -> Option<&'a str> {
    r.states[step].iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

#[test]
fn e7_symbolic_share_steps_walk_the_reverse_pass_rule_by_rule() {
    let r = one(&dot(3), "arrays/symbolic-share");
    assert_eq!(r.agrees, Some(true), "{r:?}");
    let kinds: Vec<&str> = r.trace.iter().map(|(k, _)| k.as_str()).collect();
    // Fig. 17's loop over the 12-node Delta: each eval rule, and each ID popped largest first
    let want = [
        "eval Share", "pop ID 4", "eval SumOuter", "eval Share", "pop ID 3", "eval Add", "eval Scale", "eval Share",
        "eval Scale", "eval Share", "pop ID 2", "eval Gather", "eval Input", "pop ID 1", "eval Gather", "eval Input",
    ];
    assert_eq!(kinds, want);
    // each step shows the terms after it: Add's cotangent is shared (Fig. 19) and both summands get the reference
    let add = kinds.iter().position(|k| *k == "eval Add").unwrap();
    assert_eq!(row(&r, add, "share 1"), Some("replicate (length x3) seed"));
    assert_eq!((row(&r, add, "sent 1"), row(&r, add, "sent 2")), (Some("shared 1"), Some("shared 1")));
    assert_eq!(row(&r, add + 1, "sent"), Some("times x2 (shared 1)"));
    assert_eq!(row(&r, add + 2, "accum[1]"), Some("times x2 (shared 1)"));
    // the last step holds both gradients as the program prints them
    let last = r.trace.len() - 1;
    assert_eq!(row(&r, last, "grad a"), Some("scatter11 (length a) (times x2 (shared 1)) (λi → [i])"));
    assert_eq!(row(&r, last, "grad b"), Some("scatter11 (length b) (times x1 (shared 1)) (λi → [i])"));
}

#[test]
fn e11_symbolic_steps_print_a_cut_term_and_keep_a_bounded_number() {
    // without share the gradient term has 2^16 leaves; each step prints a screenful of it
    let r = one(&chain(16), "arrays/symbolic");
    assert_eq!(r.agrees, Some(true), "{r:?}");
    let last = r.trace.len() - 1;
    let g = row(&r, last, "grad inp").unwrap();
    assert!(g.contains('…') && g.len() < 8_000, "{} chars: {}", g.len(), &g[..200]);
    // with share the steps hold references, whole
    let r = one(&chain(16), "arrays/symbolic-share");
    assert_eq!(row(&r, r.trace.len() - 1, "grad inp"), Some("plus (shared 15) (shared 15)"));
    // a long chain: the first 2000 steps are kept, then one step says how many more were taken
    let r = one(&chain(800), "arrays/symbolic-share");
    assert_eq!(r.agrees, Some(true));
    assert_eq!(r.trace.len(), 2_001);
    let (kind, note) = &r.trace[2_000];
    assert_eq!(kind, "end");
    assert!(note.starts_with("1201 more rule applications"), "{note}");
    assert_eq!(row(&r, 2_000, "grad inp"), Some("plus (shared 799) (shared 799)"));
}

/// A property-test case: an output holding `build 0 (\i -> h)` sends the cotangent of an empty
/// array to `h`; `sumOuter` of it is `[]` (nested arrays lose the inner dimension), which is the
/// zero of R here and must add as one, not fail "cannot add [] and 0.0".
#[test]
fn an_empty_build_in_the_output_sends_a_zero_cotangent() {
    let text = "def main m = let h = sum (map (\\r -> sum r) m) in [build 0 (\\i -> h * h), replicate 0 (m ! 0 ! 0)]\n\
                input [[-0.565], [-0.095], [-0.865]]\n";
    for id in ["arrays/symbolic", "arrays/symbolic-share", "arrays/share-to-let"] {
        let r = one(text, id);
        assert_eq!(r.error, None, "{id}");
        assert_eq!(r.agrees, Some(true), "{id}");
        assert_eq!(r.gradient, [0.0, 0.0, 0.0], "{id}");
    }
}

/// Property-test cases: an empty gather never calls its index function (at 0 it may index an empty
/// array), neither does its transpose, and a cotangent `[]` that lost its inner dimensions (the
/// output's 0×3 array) is read as the node's zero.
#[test]
fn an_empty_map_whose_body_indexes_its_row_runs_on_dual_arrays() {
    let text = "input ([[0.625], [0.595]], 1.085)\n\
                def main (mat0, x1) =\n  let h = sum (map (\\r -> sum r) mat0) + x1 in\n  map (\\row3 -> [row3 ! (length row3 - 1), x1, h]) []\n";
    let r = one(text, "arrays/dual-arrays");
    assert_eq!(r.error, None);
    assert_eq!(r.agrees, Some(true));
    assert_eq!(r.gradient, [0.0, 0.0, 0.0]);
}

/// A map over an empty array of rows whose body reads a row's length: bot reads that length at row 0
/// (rule l0), which an empty array does not have; the total `index` gives `[]` there (length 0), so
/// every stage of Part C runs it (a property-test case: they all failed "`length` expects an array").
/// The same program indexing the row with a real around it, and with the rows' map in the output.
#[test]
fn a_row_length_read_in_a_map_over_no_rows_runs_on_every_part_c_stage() {
    let texts = [
        "input [1.395, 0.785, -0.765]\ndef main v = map (\\row -> map (\\x -> row ! (length row - 1)) row) []\n",
        "input ([[1.0, 2.0]], 3.0)\ndef main (m, h) = sum (map (\\row -> sum [row ! (length row - 1), h, h]) (build 0 (\\i -> m ! 0)))\n",
        "input ([[1.0, 2.0]], 3.0)\ndef main (m, h) = map (\\row -> [row ! (length row - 1), h, h]) (build 0 (\\i -> m ! 0))\n",
    ];
    for text in texts {
        for stage in ["arrays/bot", "arrays/dual-arrays", "arrays/symbolic", "arrays/symbolic-share", "arrays/share-to-let"] {
            let r = one(text, stage);
            assert_eq!(r.error, None, "{stage}\n{text}");
            assert_eq!(r.agrees, Some(true), "{stage}\n{text}");
        }
    }
}

const PART_C: [&str; 5] = ["arrays/bot", "arrays/dual-arrays", "arrays/symbolic", "arrays/symbolic-share", "arrays/share-to-let"];

/// Every Part C stage accepts `text` and agrees with forward mode.
fn part_c_agrees(text: &str) {
    for (stage, r) in PART_C.iter().zip(run(text, &PART_C)) {
        assert_eq!(r.error, None, "{stage}\n{text}");
        assert_eq!(r.agrees, Some(true), "{stage}\n{text}");
    }
}

fn example(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../examples/{name}.cot", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// Scalar replacement of tuples (common/core/tuples.rs): tuple patterns, projections of known
/// tuples, tuple-typed lets and ifs, and main's tuple input split per leaf reach share-to-let.
#[test]
fn tuples_inside_first_order_programs_reach_share_to_let() {
    for name in ["arrays-mlp", "chad-e2-sparse-pair", "chad-e3-big-zero", "krawiec-fig12-quaternion"] {
        part_c_agrees(&example(name));
    }
    let texts = [
        // a tuple-typed if split per component, its branches' lets hoisted
        "input ([1.0, 2.0, 3.0], 0.5)\ndef main (v, c) =\n  let (s, t) = if c > 0.0 then (let q = sum v in (q * c, q)) else (c, sum (map (\\x -> x * x) v)) in\n  s * t\n",
        // a tuple-typed let and a tuple built inside a map's body, projected there
        "input (([1.0, 2.0], [3.0, 4.0]), 2.0)\ndef main (uv, k) =\n  let p = (fst uv, map (\\x -> x * k) (snd uv)) in\n  sum (map (\\x -> let w = (x, x * x) in fst w * snd w) (snd p)) + sum (fst p)\n",
        // a wildcard over a tuple in main's input: its leaves get zero cotangents
        "input ((1.0, (2.0, 3.0)), 4.0)\ndef main ((a, _), b) = a * b\n",
    ];
    for t in texts {
        part_c_agrees(t);
    }
}

/// Issue 12: an array of tuples in main's input is taken apart at the wrapper (boundary.rs): each
/// component array is an input of its own, and the gradient is zipped back into the input's type
/// (nested tuples, arrays of arrays of tuples, an array component, an integer component, a wildcard,
/// an indexed read). These were refused ("arrays of tuples in main's input").
#[test]
fn arrays_of_tuples_in_mains_input_reach_share_to_let_in_the_users_shape() {
    part_c_agrees(&example("arrays-tuple-input"));
    let texts = [
        "input [(1.0, 2.0), (3.0, -0.5)]\ndef main ps = sum (map (\\p -> fst p * snd p) ps)\n",
        "input ([(1.0, (2.0, 0.5)), (3.0, (-0.5, 2.0))], 0.7)\ndef main (ps, y) = sum (map (\\(a, (b, c)) -> a * b + sin c * y) ps) * y\n",
        "input [[(1.0, 2.0), (3.0, 4.0)], [(0.5, 0.1), (2.0, 1.5)]]\ndef main m = sum (map (\\row -> sum (map (\\(a, b) -> a * b) row)) m)\n",
        "input ([(1.0, [2.0, 3.0]), (0.5, [1.0, -1.0])], 2.0)\ndef main (ps, y) = sum (map (\\(a, v) -> a * sum v * y) ps)\n",
        "input ([(2, 1.5), (3, 0.5)], 2.0)\ndef main (ps, y) = sum (map (\\(k, x) -> real k * x * y) ps)\n",
        "input ([(1.0, 2.0)], 3.0)\ndef main (_, y) = y * y\n",
        "input ([(1.0, 2.0), (3.0, 4.0)], 3.0)\ndef main (ps, y) = y * fst (ps ! 1)\n",
    ];
    for t in texts {
        part_c_agrees(t);
    }
    // the gradient program takes and gives the user's shape: its gradient is an array of pairs
    let r = one(texts[0], "arrays/share-to-let");
    assert!(r.program.contains("soaZip") && r.program.contains("soaGet"), "{}", r.program);
}

/// Arrays of tuples in main's output (issue 12): the core returns their component arrays, the primal
/// is zipped back into the user's shape and the seed taken apart at the wrapper (boundary.rs), so
/// they reach share-to-let with the user's shapes: pairs, tuples inside the element, arrays of
/// arrays of tuples, a tuple output with an array of tuples inside, the input itself returned.
#[test]
fn arrays_of_tuples_in_mains_output_reach_share_to_let_in_the_users_shape() {
    part_c_agrees(&example("arrays-tuple-output"));
    let texts = [
        "input [1.0, 2.0]\ndef main a = map (\\x -> (x, x)) a\n",
        "input [1.0, 2.0]\nseed [(1.0, (0.5, -2.0)), (3.0, (1.0, 0.25))]\ndef main xs = map (\\x -> (x * x, (3.0 * x, sin x))) xs\n",
        "input [[1.0, 2.0], [0.5, -1.0]]\ndef main xss = map (\\xs -> map (\\x -> (x * x, 3.0 * x)) xs) xss\n",
        "input [1.0, 2.0]\nseed ((1.0, -1.0), (2.0, [(0.5, 1.5), (-1.0, 2.0)]))\ndef main xs = ((xs ! 0, xs ! 1), (sum xs, map (\\x -> (x * x, x)) xs))\n",
        "input ([(1.0, 2.0), (3.0, -0.5)], 2.0)\nseed [(1.0, 2.0), (-1.0, 0.5)]\ndef main (ps, y) = map (\\(a, b) -> (b * y, a * a)) ps\n",
        "input [(1.0, 2.0), (3.0, -0.5)]\ndef main ps = ps\n",
        "input [1.0, 2.0]\ndef main xs = [(xs ! 0, xs ! 1), (sum xs, 1.0)]\n",
    ];
    for t in texts {
        part_c_agrees(t);
    }
    // the gradient program gives the primal in the user's shape and reads the seed's parts from it
    let r = one(texts[0], "arrays/share-to-let");
    assert!(r.program.contains("soaZip 1") && r.program.contains("soaGet [1] seed"), "{}", r.program);
}

/// A fold or reduce whose body adds the accumulator to a term free of it is a sumOuter, and the
/// shifts are gathers (lower.rs): they reach share-to-let; a shift of an empty or one-element array
/// is empty.
#[test]
fn additive_folds_and_shifts_reach_share_to_let() {
    for name in ["unf-ex1.2-dot", "unf-ex1.2-sum", "arrays-shift-differences"] {
        part_c_agrees(&example(name));
    }
    let texts = [
        "input ([1.0, 2.0, 3.0], 2.0)\ndef main (xs, k) = reduce (\\a b -> b * k + a) k xs\n",
        "input [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]\ndef main m = sum (map (\\r -> sum r) (shift1R (shift1L m)))\n",
        "input [4.0]\ndef main xs = sum (shift1L xs) + sum (shift1R xs) + xs ! 0\n",
        "input [4.0]\ndef main xs = let ys = shift1L xs in sum (shift1R ys) + 1.0\n",
    ];
    for t in texts {
        part_c_agrees(t);
    }
    let (p, _) = bot("input [1.0, 2.0, 3.0]\ndef main xs = sum (shift1L xs)\n");
    assert!(p.contains("gather11 (max (length xs - 1) 0) xs (λi → [i + 1])"), "{p}");
}

/// A sequential fold, reduce or scan (fold.rs, beyond the paper's §2.3, as horde-ad): the core's
/// `scanl`, one `ScanL` Delta per loop whose transpose folds back over the primal accumulators with
/// the body's vjp. Horner, products, Fig. 13's `x + y + t·x·y`, a scanr, a fold over rows with an
/// array accumulator, a fold nested in a fold's body, Int elements and empty arrays, on every Part C
/// stage against forward mode.
#[test]
fn sequential_folds_reach_share_to_let() {
    for name in [
        "arrays-horner",
        "arrays-horner-fold",
        "arrays-reduce-product",
        "arrays-prod-gradient-by-scans",
        "chad-e9-fold-tree",
        "unf-ex1.2-prod",
        "unf-fig13-reduce-free-variables",
        "unf-fig16-foldl-map",
        "unf-fig17-matrix-rows",
    ] {
        part_c_agrees(&example(name));
    }
    let texts = [
        "input ([], 1.5)\ndef main (cs, x) = fold (\\acc c -> acc * x + c) 0.5 cs\n",
        "input ([1.0, 2.0, 3.0], [0.5, -1.0])\ndef main (xs, ws) = fold (\\acc c -> acc * fold (\\p q -> p * q + c) 1.0 ws) 1.0 xs\n",
        "input [1.0, 2.0, 3.0]\ndef main a = sum (scanr (\\x p -> x * p + 1.0) 1.0 a)\n",
        "input (2.0, 3)\ndef main (x, n) = fold (\\acc i -> acc * x + 1.0) 1.0 (build n (\\i -> i))\n",
        "input ([[1.0, 2.0], [3.0, 4.0], [0.5, 0.25]], [1.0, -1.0])\ndef main (m, v) = sum (fold (\\acc r -> map2 (\\a b -> a * b) acc (map2 (\\x y -> x + y) r v)) v m)\n",
        "input ([], [1.0, -1.0])\ndef main (m, v) = sum (fold (\\acc r -> map2 (\\a b -> a * b) acc (map2 (\\x y -> x + y) r v)) v m)\n",
        "input [2.0, 3.0]\ndef main a = fold (\\p q -> p * q) 1.0 a * fold (\\p q -> p * q) 1.0 a + sum (scanl (\\p q -> sin (p * q)) 0.5 a)\n",
    ];
    for t in texts {
        part_c_agrees(t);
    }
}

/// One Delta node per loop, not per iteration: Horner's dual-arrays Delta has the same number of
/// nodes at every length; the gradient program keeps the primal scan and folds back with a scanr.
#[test]
fn a_sequential_fold_is_one_delta_node_and_a_scanr_in_the_gradient_program() {
    let horner = |n: usize| {
        let cs: Vec<String> = (0..n).map(|k| format!("{}.5", k % 3)).collect();
        format!("input ([{}], 0.5)\ndef main (cs, x) = fold (\\acc c -> acc * x + c) 0.0 cs\n", cs.join(", "))
    };
    let nodes: Vec<u64> = [3, 12, 40].iter().map(|&n| counter(&one(&horner(n), "arrays/dual-arrays"), "delta_nodes")).collect();
    assert!(nodes.iter().all(|&k| k == nodes[0]), "{nodes:?}");
    let r = one(&horner(4), "arrays/share-to-let");
    assert_eq!(r.agrees, Some(true));
    for op in ["scanl (λacc c → acc * x + c) 0.0 cs", "scanr", "build", "times x seed"] {
        assert!(r.program.contains(op), "{op}: {}", r.program);
    }
}

/// What is still refused, located: a fold over pairs whose real component uses its integer
/// component other than as `real k` (the integers are a loop of their own beside the reals' packed
/// loop: pack.rs `int_fold`; `real k` is read from a column of its states; such folds are taken, `integer_components_of_a_tuple_accumulator_reach_share_to_let`;
/// a fold over pairs of reals whose component multiplies is taken
/// since issue 12's tuple accumulators, `tuple_accumulators_in_folds_and_scans_reach_share_to_let`;
/// a fold inside a map whose array depends on the map's index, refused here before bot's B-scan,
/// is `a_fold_inside_a_map_is_one_scan_over_arrays_of_accumulators`).
#[test]
fn bot_refuses_a_fold_over_pairs_with_an_integer_component() {
    part_c_agrees("input [1.0, 2.0]\ndef main a = snd (fold (\\(p, q) x -> (p + x, q * x)) (0.0, 1.0) a)");
    part_c_agrees("input [1.0, 2.0]\ndef main a = fst (fold (\\(p, k) x -> (p * x + 1.0, k + 1)) (0.5, 0) a)");
    part_c_agrees("input [1.0, 2.0]\ndef main a = fst (fold (\\(p, k) x -> (p * x + real k, k + 1)) (0.5, 0) a)");
    // was refused ("other than as `real m`"): `k > 0` a column of the integers' states, 1.0 for true
    part_c_agrees("input [1.0, 2.0]\ndef main a = fst (fold (\\(p, k) x -> (if k > 0 then p * x else p, k + 1)) (0.5, 0) a)");
    // was refused ("a variable bound in the body"): `j < k` is `real j < real k` (pack.rs
    // `real_int_reads`); p = 0.5 · 2 · (x1 + 1) = 3
    part_c_by_hand("input [1.0, 2.0]\ndef main a = fst (fold (\\(p, k) x -> (p * sum (build 2 (\\j -> if j < k then x else 1.0)), k + 1)) (0.5, 0) a)", "3.0", &[0.0, 1.0]);
    // was refused ("the size of a `build`"): `sum (build k f)` a build of the largest size, masked
    // (pack.rs `masked_sizes`); p stays 0 after its first step (an empty sum)
    part_c_by_hand("input [1.0, 2.0]\ndef main a = fst (fold (\\(p, k) x -> (p * sum (build k (\\j -> p)), k + 1)) (0.5, 0) a)", "0.0", &[0.0, 0.0]);
    // were refused ("the size of a `build` not summed at once", "Static shapes"): `length` fused with
    // the build (pack.rs `fuse_sized_builds`), a size reading a binder of a build of a fixed size the
    // largest over the states and the binder's range (`masked_sizes`)
    part_c_agrees("input [1.0, 2.0]\ndef main a = fst (fold (\\(p, k) x -> (p * real (length (build k (\\j -> p))), k + 1)) (0.5, 0) a)");
    part_c_agrees("input [1.0, 2.0]\ndef main a = fst (fold (\\(p, k) x -> (p * sum (build 2 (\\i -> sum (build (i + k) (\\j -> p)))), k + 1)) (0.5, 0) a)");
    // a build of the integer's size as an array component's new value (was refused, "Static
    // shapes"): the integer rides in the reals' row as a real copy, `round`ed back for the size
    // (pack.rs `shadowed`), and the component's length is checked each step as any array
    // component's is (`sameLength`): kept, it runs; changed, it stops at run time, located
    part_c_agrees("input [1.0, 2.0]\ndef main a = let (p, v, k) = fold (\\(p, v, k) x -> (p + sum v, build k (\\j -> x), k)) (0.5, [1.0], 1) a in p");
    let text = "input [1.0, 2.0]\ndef main a = let (p, v, k) = fold (\\(p, v, k) x -> (p + sum v, build k (\\j -> x), k + 1)) (0.5, [1.0], 1) a in p";
    let r = one(text, "arrays/bot");
    assert!(!r.refused && r.error.as_deref().unwrap_or("").contains("of length 1 at the start and of length 2 after a step"), "{r:?}");
    let (start, end) = r.error_span.unwrap_or_else(|| panic!("no span: {r:?}"));
    assert!(text[start..end].starts_with("fold"), "{:?}", &text[start..end]);
}

/// `a ||| b` is the pair (a, b) in Part C (tuples.rs): its parallelism is an evaluation strategy.
#[test]
fn a_parallel_pair_is_a_pair_in_part_c() {
    part_c_agrees(&example("dualrev-parallel"));
    part_c_agrees("input ([1.0, 2.0, 3.0], 0.5)\ndef main (v, y) = let (a, b) = map (\\x -> x * y) v ||| sum v in sum a * b\n");
}

/// Recursion whose depth params and literals decide is unrolled before the lowering (App. B's
/// staging: the host language's static control flow), on every Part C stage; recursion on run-time
/// data is a dynamic loop, refused, located, citing §2.3 and App. B; unrolling past its budget is
/// refused, located, naming the budget.
#[test]
fn recursion_on_params_and_literals_is_unrolled_for_part_c() {
    for name in ["doubling-chain", "dualrev-long-chain", "dualrev-parallel-tree", "krawiec-recursion", "recursion", "unf-s8-unrolled-recursion"] {
        part_c_agrees(&example(name));
    }
    part_c_agrees("param n = 3\ninput ([1.0, 2.0], 0.5)\ndef go k v = if k == 0 then v else go (k - 1) (map (\\x -> x * x + 0.5) v)\ndef main (v, y) = sum (go n v) * y\n");
    for (text, why) in [
        (example("integer-input"), "App. B"),
        ("param n = 1000\ninput 1.5\ndef double k x = if k == 0 then x else double (k - 1) (x + x)\ndef main x = double n x\n".to_string(), "the unrolling budget"),
    ] {
        let r = one(&text, "arrays/bot");
        assert!(r.refused, "{r:?}");
        let msg = r.error.as_deref().unwrap_or("");
        assert!(msg.contains(why) && msg.contains("§2.3"), "{r:?}");
        assert!(r.error_span.is_some());
    }
    // recursion on a run-time value is the paper's documented boundary (issue 12): the message says
    // the core has no recursion, quoting App. B, and points at the recursive call `pow (k - 1) x`
    let text = example("integer-input");
    let r = one(&text, "arrays/bot");
    let msg = r.error.as_deref().unwrap_or("");
    assert!(msg.contains("its core (§3.2, Figs. 7–8) has no recursion") && msg.contains("Loops of statically unknown length are currently unsupported"), "{r:?}");
    let span = r.error_span.expect("located");
    assert_eq!(&text[span.0..span.1], "pow (k - 1) x");
}

/// An empty literal in a program whose input has no array: its scalars' zero is read from the
/// program's array types (runtime.rs `scalar_zero`: a dual number under forward mode, which checks
/// bot; was "a 2-tuple pattern does not match a real" on an additive scanr of `[]`, a property case).
#[test]
fn an_empty_literal_without_array_inputs_gets_the_programs_scalar_zero() {
    part_c_agrees("input (1.085, 1.025)\ndef main (x0, x1) = sum (map2 (\\x y -> x * y) (scanr (\\c a -> sin c + a) x0 []) (replicate 1 x1))\n");
}

/// An empty fold's zero in a program whose input is an array of pairs: main is typed `a` through
/// `soaGet` (boundary.rs), and the type forward mode uses it at names a pair of dual numbers, not
/// the scalar; the zero is read from the component arrays (runtime.rs `scalar_zero`; was "primitive
/// `+` cannot be applied to -1.185 : R and (0.0, 0.0)" on bot, wide-run seeds 531 and 2791).
#[test]
fn an_input_array_of_pairs_gives_the_scalar_zero_not_a_pairs() {
    part_c_agrees("input [(-1.255, -1.185)]\ndef main prs0 =\n  let (left0, right0) = (map (\\p -> fst p) prs0, map (\\p -> snd p) prs0) in\n  map (\\x -> x) (build 2 (\\i9 -> (fst (fold (\\(pfd10, pfd11) pfd12 -> (pfd10 + pfd12, (right0 ! (min i9 (length right0 - 1))) + pfd11)) ((right0 ! (i9 mod length right0)), 1.0) []))))\n");
}

/// A fold inside a map over no rows, its body returning a free array: the vjp's part for that
/// array, `sumOuter` of a 0×k cotangent, is the scalar zero where k is not carried (runtime.rs
/// `add`; `scalar_zero` no longer takes a vjp's result tuple for it), and ScanL's transpose reads
/// each empty accumulator cotangent at its own accumulator's shape, which may change length in
/// the body (delta.rs `scanl_back`). Wide-run seeds 1332 and 2417: "cannot add [0.0, 0.0] and
/// [0.0, 0.0, 0.0]" on dual-arrays, "… and (0.0, 0.0, 0.0, 0.0)" on the symbolic stages.
#[test]
fn a_fold_in_a_map_over_no_rows_reaches_share_to_let() {
    for init in ["replicate 3 (row ! 0)", "replicate 2 (row ! 0)"] {
        part_c_agrees(&format!("input ([-1.445], [-0.585, -0.975])\ndef main (left0, left1) = map (\\row -> fold (\\acc x -> left1) ({init}) [left0 ! 0, row ! 0]) (build 0 (\\i -> left0))\n"));
    }
    // with an array of pairs in main's input too
    part_c_agrees("input [(-1.445, 0.5), (0.25, -0.75)]\ndef main prs = let (l, r) = (map (\\p -> fst p) prs, map (\\p -> snd p) prs) in map (\\row -> fold (\\acc x -> r) (replicate 3 (row ! 0)) [l ! 0, row ! 0]) (build 0 (\\i -> l))\n");
}

/// A sum of no elements replicated by a map (bot's B2): the sum's Delta has an empty array that
/// keeps its element as its zero, which the Replicate's transpose adds to the scalar cotangents
/// (runtime.rs `add`; was "cannot add [] and 1.0" on dual-arrays, a property case).
#[test]
fn a_replicated_sum_of_no_elements_runs_on_dual_arrays() {
    part_c_agrees("input (1.5, 2.0)\ndef main (x0, x1) = sum (map (\\p -> sum (map (\\x -> x * 0.5 + 1.0) (shift1R [x0]))) [x1, x1, x1])\n");
}

/// Sums inside the program are a tag and both sides (tuples.rs): `case` computes both branches and
/// selects by the tag, as the strict `cond` does (§5.2); in a map's body and around arrays too. A
/// sum in main's input or output is refused, located.
#[test]
fn sums_inside_the_program_reach_share_to_let() {
    for name in ["chad-e4-case", "chad-e5-sign", "krawiec-case", "sums"] {
        part_c_agrees(&example(name));
    }
    part_c_agrees("input ([1.0, -2.0, 3.0], 0.5)\ndef classify x = if x > 0.0 then inl x else inr (x * x)\ndef main (v, y) = sum (map (\\x -> case classify x of inl a -> a * y | inr b -> b + y) v)\n");
    part_c_agrees("input ([1.0, -2.0, 3.0], 0.5)\ndef main (v, y) = let s = (if y > 0.0 then inl (map (\\x -> x * y) v) else inr ()) in case s of inl w -> sum w | inr u -> y\n");
    for name in ["krawiec-sum-input", "sum-input-output"] {
        let r = one(&example(name), "arrays/bot");
        assert!(r.refused, "{r:?}");
        // named with the paper's reason: the wrapper's inputs and cotangents are arrays of reals
        assert!(r.error.as_deref().unwrap_or("").contains("sums in main's") && r.error.as_deref().unwrap_or("").contains("§6.5"), "{r:?}");
        // the documented boundary (issue 12), quoting the paper's wrapper type and §3.2
        assert!(r.error.as_deref().unwrap_or("").contains("x1 : Array sh1 ρ1") && r.error.as_deref().unwrap_or("").contains("re-differentiate and re-compile"), "{r:?}");
        assert!(r.error_span.is_some());
    }
}

/// `cond` with real branches outside any build1 reaches the symbolic stages: Delta extraction
/// selects by B4's `index [u, v] [cond b 0 1]` (notes §8.3), on both sides of the condition.
#[test]
fn cond_with_real_branches_reaches_share_to_let() {
    for name in ["dualrev-sign", "unf-s7.2-conditionals"] {
        part_c_agrees(&example(name));
    }
    let text = |x: &str| format!("input ([1.0, -2.0, 3.0], {x})\ndef main (v, x) = if x > 0.0 then sum (map (\\a -> a * x) v) else x * x * (v ! 1)\n");
    for x in ["2.0", "-2.0"] {
        part_c_agrees(&text(x));
    }
    let r = one(&text("2.0"), "arrays/share-to-let");
    assert!(r.program.contains("oneHot ["), "{}", r.program);
    assert!(r.program.contains("(cond (x > 0.0) 0 1)"), "{}", r.program);
}

/// main's tuple output: D pairs up the components' primals and Deltas, reversePass seeds each
/// with its part of the seed, and the symbolic stages take the seed apart by a pattern.
#[test]
fn tuple_outputs_reach_share_to_let() {
    for name in ["dualrev-output-is-input", "krawiec-int-input", "unf-ex4.1"] {
        part_c_agrees(&example(name));
    }
    part_c_agrees("input ([1.0, 2.0, 3.0], 0.5)\ndef main (v, c) = (map (\\x -> x * c) v, sum v * c, c)\n");
    let r = one(&example("unf-ex4.1"), "arrays/share-to-let");
    assert!(r.program.contains("(input1, (seed1, seed2))"), "{}", r.program);
}

/// An integer component of main's tuple output has no cotangent (dual.rs `discrete`): D′ keeps it
/// with the Delta Zero, so its part of the seed sends nothing back and its primal is returned as
/// forward mode returns it (was "a term without real elements" on dual-arrays). First, last, with
/// an array of pairs beside it, an array of integers and of booleans (a nested tuple holding an
/// integer: `nested_tuple_outputs_reach_share_to_let`).
#[test]
fn integer_components_of_a_tuple_output_reach_share_to_let() {
    let text = example("arrays-integer-output");
    part_c_agrees(&text);
    for r in run(&text, &PART_C) {
        assert_eq!(r.primal, "(63.0, 4, [3.0, 6.0, 12.0])", "{r:?}");
        assert_eq!(r.gradient, vec![15.0, 24.0, 45.0, 39.0], "{r:?}");
    }
    for body in ["(sum xs, length xs)", "(length xs, sum xs)", "(map (\\x -> (x, x * x)) xs, length xs)", "(sum xs, map (\\x -> length xs) xs)", "(sum xs, map (\\x -> x > 1.0) xs)", "let n = length xs in (sum xs * 2.0, n * n)"] {
        part_c_agrees(&format!("input [1.0, 2.0, 4.0]\ndef main xs = {body}\n"));
    }
}

/// A tuple nested in main's tuple output (`((sum xs, length xs), 1.0)`) is returned by the core as
/// the flat tuple of its leaves and put back into the user's shape after bot (boundary.rs
/// `flat_output`), so each leaf is an output component with its own Delta and part of the seed:
/// symbolic had "no rule for this pattern" (§7.1) on the nested pair. Reals, integers, arrays and
/// arrays of pairs among the leaves, nested two and three deep, and the example worked by hand;
/// share-to-let's gradient program reads the seed leaf by leaf and gives the nested primal.
#[test]
fn nested_tuple_outputs_reach_share_to_let() {
    let text = example("arrays-nested-output");
    part_c_agrees(&text);
    for r in run(&text, &PART_C) {
        assert_eq!(r.primal, "((12.0, 3), (4.0, [1.0, 4.0, 9.0]))", "{r:?}");
        assert_eq!(r.gradient, vec![4.0, 2.0, -4.0, 8.0], "{r:?}");
    }
    for body in [
        "((sum xs, length xs), 1.0)",
        "(sum xs, (map (\\x -> x * x) xs, (length xs, sum xs * 2.0)))",
        "((map (\\x -> (x, x * 3.0)) xs, sum xs), (length xs, xs))",
        "let p = (sum xs, xs ! 0) in (p, (fst p * snd p, map (\\x -> x > 1.0) xs))",
    ] {
        part_c_agrees(&format!("input [1.0, 2.0, 4.0]\ndef main xs = {body}\n"));
    }
    let r = one("input [1.0, 2.0]\ndef main xs = ((sum xs, length xs), 1.0)\n", "arrays/share-to-let");
    assert!(r.program.contains("soaGet [0, 0] seed"), "{}", r.program);
    assert_eq!(r.primal, "((3.0, 2), 1.0)", "{r:?}");
}

/// A property-test case: a shift of a literal matrix to an empty output; the reverse pass's zero
/// for its rows is a scalar 0.0, which the literal's transpose indexes (runtime.rs `index`).
#[test]
fn a_shift_of_a_literal_matrix_to_an_empty_output_runs_on_every_part_c_stage() {
    part_c_agrees("input [-0.395, -0.485, 0.665]\ndef main v = let h = sum v in shift1L [[h, v ! 0]]\n");
}

/// Arrays keep their shape when empty (value.rs `EmptyArray`): `build 4 (\i -> build 0 …)` stays
/// 4×0 through bot's B2/B11 (`tr (replicate 0 …)`: a 0×4 transposed), and its row sums are four
/// zeros, on every Part C stage (found by property seeds 42, 2026, 14045542811763966563).
#[test]
fn an_empty_inner_dimension_keeps_its_shape_through_bot() {
    let text = "input [1.0, 2.0, 3.0, 4.0]\ndef main v = (build 4 (\\i -> build 0 (\\j -> v ! i)), map (\\r -> sum r) (build 4 (\\i -> build 0 (\\j -> v ! i * 2.0))))\n";
    part_c_agrees(text);
    let r = one(text, "arrays/bot");
    assert_eq!(r.primal, "([[], [], [], []], [0.0, 0.0, 0.0, 0.0])", "{r:?}");
    assert!(r.program.contains("tr [1, 0] (replicate 0"), "{}", r.program);
}

/// A matrix input with no columns: its row sums are a transpose to 0×2 and a sumOuter, whose
/// zeros are the program's scalars (main's element type; dual numbers under forward mode), and a
/// `map2` of them with a 2-vector (was "`map2` on arrays of different lengths (2 and 0)").
#[test]
fn row_sums_of_a_matrix_without_columns_are_zeros_on_every_part_c_stage() {
    part_c_agrees("input (0.5, [[], []])\ndef main (x, m) = map (\\s -> s + x) (map (\\r -> sum r) m)\n");
    part_c_agrees("input (0.5, [])\ndef main (x, v) = map2 (\\a b -> a * b + x) (map (\\r -> sum r) [[], v]) [x, x]\n");
}

/// B8′ (bot.rs, derived from B8, B2 + I9 and BI1 + gather∘gather): a build1 over a gather whose
/// array is free of the build's index, or indexes an array free of it (`index m i`), gathers from
/// that array directly. Nested maps over a rank-3 array with a shift inside stayed with a build1
/// (B8's extra dimension past the three a gather takes), now they reach share-to-let.
#[test]
fn b8_prime_fuses_a_build1_over_a_gather_of_an_indexed_array() {
    let text = "input [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[7.0, 8.0, 9.0], [1.0, 2.0, 3.0]]]\ndef main t = sum (map (\\mm -> sum (map (\\r -> sum (shift1L r)) mm)) t)\nexpect primal 36.0\nexpect grad [[[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]], [[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]]\n";
    let (p, trace) = bot(text);
    fired(&trace, &["B8′"]);
    assert!(p.contains("gather33"), "{p}");
    part_c_agrees(text);
    // the issue's form: the gathered array read through the build's index
    let (p, trace) = bot("input ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [1, 0])\ndef main (m, ks) = sum (build 2 (\\i -> sum (shift1L (m ! (ks ! i)))))\nexpect primal 16.0\n");
    fired(&trace, &["B8′"]);
    assert!(!p.contains("build"), "{p}");
}

/// A property case: `shift1L` of a one-row matrix is the output (0×4): its seed is an empty array,
/// whose scatter back has rows of a lost shape (a scalar zero), summed by sumOuter to itself.
#[test]
fn a_shift_of_a_one_row_matrix_as_the_output_runs_on_every_part_c_stage() {
    part_c_agrees("input [1.0, -0.5, 2.0]\ndef main v = let h = 3.0 * sum v in shift1L (map2 (\\a b -> map2 (\\p q -> h) a b) [replicate 4 (v ! 2)] [[v ! 1, h, h, h]])\n");
}

/// Arrays of tuples as tuples of arrays (soa.rs): maps to and from pairs, map2 over pairs, literals,
/// replicate, build, `!`, length and shifts of pair arrays, nested arrays of pairs, and a fold over
/// pairs whose used components are sums, reach share-to-let and agree with forward mode.
#[test]
fn arrays_of_tuples_lower_to_tuples_of_arrays_and_reach_share_to_let() {
    part_c_agrees(&example("unf-fig17-arrays-of-tuples"));
    let texts = [
        "input [1.0, 2.0, 3.0]\ndef main a =\n  let ps = map (\\x -> (x, x * x)) a in\n  let qs = map2 (\\p q -> (snd p, fst q + fst p)) ps (shift1R (replicate (length a + 1) (a ! 0, 2.0))) in\n  sum (map (\\(u, v) -> u * v) qs) + fst (ps ! 1) + real (length qs)\nexpect primal 55.0\n",
        "input ([1.0, 2.0], 0.5)\ndef main (a, t) =\n  let ps = [(t, a ! 0), (a ! 1, t * t)] in\n  let bs = build 2 (\\i -> (fst (ps ! i) * t, snd (ps ! (1 - i)))) in\n  fst (fold (\\(p, q) (x, y) -> (p + x * y, q * x)) (0.0, 1.0) bs) + sum (map (\\(x, y) -> x) (shift1L bs))\n",
        "input []\ndef main a = sum (map (\\(x, y) -> x * y) (map (\\x -> (x, sin x)) a)) + fold (\\acc p -> acc + fst p) 0.0 (map (\\x -> (x, x)) a)\n",
        "input [[1.0, 2.0], [3.0, 4.0]]\ndef main m =\n  let pm = map (\\r -> map (\\x -> (x, x * x)) r) m in\n  sum (map (\\row -> sum (map (\\p -> fst p * snd p) row)) pm) + (if m ! 0 ! 0 > 0.0 then fst (pm ! 1 ! 0) else snd (pm ! 0 ! 1))\nexpect primal 103.0\nexpect grad [[3.0, 12.0], [28.0, 48.0]]\n",
    ];
    for t in texts {
        part_c_agrees(t);
    }
    // the lowering's core program has no tuple left: a map to pairs is two builds
    let r = one("input [1.0, 2.0]\ndef main a = let ps = map (\\x -> (x, x * x)) a in sum (map (\\p -> fst p + snd p) ps)\n", "arrays/bot");
    let core = view(&r, "core program before bot (the lowering)");
    assert!(!core.contains("fst") && !core.contains("snd"), "{core}");
    assert_eq!(core.matches("build").count(), 3, "{core}");
}

/// Additive scans (lower.rs): `scanl (\acc c -> acc + t) z xs` is a masked sumOuter per prefix,
/// `scanr` per suffix; values and gradients as forward mode's, by hand for the running sum.
#[test]
fn additive_scans_are_masked_prefix_sums_on_every_part_c_stage() {
    part_c_agrees("input ([1.0, 2.0, 3.0], [0.5, 1.0, -1.0, 2.0])\ndef main (xs, ws) = sum (map2 (\\x y -> x * y) (scanl (\\acc c -> acc + c * c) 1.0 xs) ws)\nexpect primal 26.5\nexpect grad ([4.0, 4.0, 12.0], [1.0, 2.0, 6.0, 15.0])\n");
    part_c_agrees("input ([1.0, 2.0, 3.0], [0.5, 1.0, -1.0, 2.0])\ndef main (xs, ws) = sum (map2 (\\x y -> x * y) (scanr (\\c acc -> sin c + acc) 0.0 xs) ws)\n");
    part_c_agrees("input []\ndef main xs = sum (scanr (\\c acc -> c + acc) 2.0 xs)\n");
    let r = one("input [1.0, 2.0, 3.0]\ndef main xs = scanl (\\acc c -> acc + c) 0.0 (shift1L xs)\n", "arrays/share-to-let");
    assert_eq!(r.agrees, Some(true));
    assert_eq!(r.primal, "[0.0, 2.0, 5.0]");
    assert_eq!(r.gradient, [0.0, 2.0, 1.0]);
}

/// `max`/`min` folds (lower.rs): the selected term is the one no other beats (ties to the
/// accumulator's side, as `max acc t` gives them to the earlier element), and its gradient is the
/// fold's: to the first maximum for `max a b`, to the last for `max b a`, to `z` when it wins.
#[test]
fn max_and_min_folds_are_selections_with_the_folds_tie_rule() {
    for name in ["arrays-logsumexp", "arrays-softmax-xent"] {
        part_c_agrees(&example(name));
    }
    let cases = [
        ("input [1.0, 3.0, 3.0, 2.0]\ndef main xs = fold (\\a b -> max a b) 0.0 xs\n", vec![0.0, 1.0, 0.0, 0.0]),
        ("input [1.0, 3.0, 3.0, 2.0]\ndef main xs = fold (\\a b -> max b a) 0.0 (map (\\x -> x * x) xs)\n", vec![0.0, 0.0, 6.0, 0.0]),
        ("input [1.0, 3.0, 2.0]\ndef main xs = fold (\\a b -> max a (b * 2.0)) (xs ! 1 * 2.0) xs + reduce (\\a b -> min a b) 5.0 xs\n", vec![1.0, 2.0, 0.0]),
        ("input []\ndef main xs = fold (\\a b -> max a b) 2.0 xs\n", vec![]),
    ];
    for (text, grad) in cases {
        part_c_agrees(text);
        assert_eq!(one(text, "arrays/share-to-let").gradient, grad, "{text}");
    }
    part_c_agrees("input ([[1.0, -2.0], [0.5, 4.0]], 1.5)\ndef main (m, z) = sum (map (\\r -> reduce (\\a b -> min b a) z r) m)\n");
}

/// Session 10's gap: bot's output `sumOuter (tr [1, 0] (gather … m …))` is generic in its element
/// type, so under forward mode (how a same-function stage is checked) the rows of `[[], []]` summed
/// to real zeros where dual numbers were meant ("`fst` of a real"); the zero is now read from the
/// type main is used at.
#[test]
fn rows_of_no_columns_summed_by_bot_alone_agree_under_forward_mode() {
    part_c_agrees("input [[], []]\ndef main m = map (\\r -> sum r) m\n");
    part_c_agrees("input [[], []]\ndef main m = map (\\r -> fold (\\a b -> max a b) 1.0 r) m\n");
}

/// Session 44's property cases: an empty literal of arrays keeps the shape of its rows (core/lower.rs
/// `empty_literal`), so a gather of it (`map (\\r -> r) []`) has rows, not scalar zeros, and bot's
/// shape term `length (index xs 0)` reads 0 (was "`length` expects an array" on bot, dual-arrays and
/// symbolic); and a zero cotangent scaled by an empty array that keeps its rows is that array
/// (runtime.rs `scale_by`; was "·→: shapes differ (0.0 and [])" on the symbolic stages).
#[test]
fn empty_arrays_of_arrays_keep_their_rows_shape_on_every_part_c_stage() {
    part_c_agrees("input 1.5\ndef main x = x + sum (map (\\u -> real (length u)) (map (\\r -> r) []))\n");
    part_c_agrees("input ([0.785, -0.355], 0.675)\ndef main (v, x) = map (\\a -> fold (\\acc r -> acc * 0.5 + a) 0.5 (map2 (\\u w -> map2 (\\p q -> q * x) u w) (build 0 (\\i -> build 3 (\\j -> x))) (build 0 (\\i -> build 3 (\\j -> 1.1))))) v\n");
}

/// A random-program case of the new forms: a map to pairs over `[]` whose pair components are not
/// read; each component's build keeps only the lets it needs (soa.rs), so no gather of the empty
/// pairs is left. (The same program without tuples: the next test.)
#[test]
fn unused_components_of_an_empty_array_of_pairs_are_not_read() {
    part_c_agrees("input (1.5, -0.5)\ndef main (x0, h) = sum (map (\\x4 -> (let ps = map (\\y -> (1.96, x4)) [] in sum (map (\\(u, v) -> h) ps))) [x0, h])\n");
}

/// Issue 12: bot's output is checked under forward mode, where `replicate 0` of a dual number (a
/// pair) was a plain `[]` that lost its element, and `sumOuter` of its transpose summed to a real
/// ("a 2-tuple pattern does not match a real"); `Value::empty_of` now keeps a tuple's shape.
#[test]
fn an_empty_array_of_dual_numbers_keeps_its_element_under_forward_mode() {
    let text = "input (1.5, -0.5)\ndef main (x0, h) = sum (map (\\x4 -> (let p = build 0 (\\i -> x4) in sum (map (\\z -> let w = z * 2.0 in h) p))) [x0, h])\n";
    part_c_agrees(text);
    let r = one(text, "arrays/bot");
    assert!(r.program.contains("replicate 0"), "{}", r.program);
    assert_eq!(r.primal, "0.0", "{r:?}");
    assert_eq!(r.gradient, [0.0, 0.0], "{r:?}");
}

/// A fold whose body applies a unary primitive to the accumulator is not a selection (found by the
/// property tests: the selection's match read a second operand that a unary one has not); it is a
/// sequential fold now, on every Part C stage.
#[test]
fn a_fold_of_a_unary_primitive_of_the_accumulator_is_a_sequential_fold() {
    part_c_agrees("input [1.0, 2.0]\ndef main xs = fold (\\a b -> sin a) 0.5 xs");
}

/// An `else if` chain keeps dozens of cotangents waiting in `accum`: each step shows the 40 with the
/// highest IDs and counts the rest, and an entry added to again (here `grad x`, from every branch)
/// is shown anew (its printed text is kept only until it changes).
#[test]
fn symbolic_steps_show_a_bounded_window_of_accum_and_reprint_what_changed() {
    let mut text = String::from("input 0.5\ndef main x =\n  if x < 0.0 then 0.0\n");
    for i in 1..80 {
        text.push_str(&format!("  else if x < {i}.0 then x * {i}.0\n"));
    }
    text.push_str("  else x\n");
    for id in ["arrays/symbolic", "arrays/symbolic-share"] {
        let r = one(&text, id);
        assert_eq!(r.agrees, Some(true), "{id}: {:?}", r.error);
        let accum_rows = |s: usize| r.states[s].iter().filter(|(k, _)| k.starts_with("accum[")).count();
        assert!((0..r.states.len()).all(|s| accum_rows(s) <= 40), "{id}");
        assert!((0..r.states.len()).any(|s| row(&r, s, "accum …").is_some_and(|v| v.ends_with("more entries, lower IDs"))), "{id}");
        // every step that adds to an entry already waiting shows the sum, not the text kept from before
        let mut readded = 0;
        for (s, (_, note)) in r.trace.iter().enumerate().skip(1) {
            let key = match note.strip_prefix("the cotangent is added to ") {
                Some(g) if g.starts_with("grad ") => g.to_string(),
                Some(a) => a.split(',').next().unwrap_or(a).to_string(),
                None => continue,
            };
            if let (Some(before), Some(after)) = (row(&r, s - 1, &key), row(&r, s, &key)) {
                assert_ne!(before, after, "{id}: step {s} added to {key}");
                assert!(after.starts_with("plus"), "{id}: step {s}: {after}");
                readded += 1;
            }
        }
        assert!(readded > 0, "{id}: no entry was added to twice");
    }
}

/// A wide property run's case (seed 1015): a broadcast op over a 2×0×1 array (`replicate 0 [x]`
/// inside the rows of `[[], []]`) kept its inner 1 only if `map`/`map2` over an empty array keep the
/// shape of their function's result (interp/arrays.rs, `empty_image`); without it the following
/// `tr`/`sumOuter` read a 2-vector where a 2×0 matrix was, and every Part C stage failed
/// "`map2` expects an array".
#[test]
fn a_broadcast_op_over_rows_of_no_columns_keeps_the_inner_shape() {
    let text = "input [[0.875, 1.275], [-1.06, 0.34]]\n\
                def rep k v = if k == 0 then sum v else rep (k - 1) (map (\\x -> x * 0.5 + 1.0) v)\n\
                def main mat0 =\n  map2 (\\u1 w2 -> map2 (\\p3 q4 -> (rep 1 [(mat0 ! 0 ! 0)]) * q4) u1 w2) [[], []] (shift1R (map (\\u7 -> map (\\p9 -> 1.0) u7) [[], [], []]))\n";
    part_c_agrees(text);
}

/// A wide property run's case (seeds 370, 686, 1068): the unused side of a sum is `[]` (lower.rs's
/// tag and both sides), so a fold over copies of it gathers out of range of an empty array; that
/// zero must be the program's scalar zero (a dual number under forward mode, which checks bot's
/// output), not `0.0` (runtime.rs, `sub_zero`): bot failed "a 2-tuple pattern does not match a real".
#[test]
fn a_fold_over_the_unused_side_of_a_sum_gathers_dual_zeros_under_forward_mode() {
    let text = "input ([0.145, 0.405, -1.145], 0.725)\n\
                def main (vec0, x1) =\n  case (if vec0 ! 1 <= 0.0 then inl (map (\\x -> x * x1) vec0) else inr (vec0 ! 0) : Array R + R) of inl a1 -> reduce (\\u w -> map2 (\\p q -> p + q) u w) (replicate 3 0.0) (replicate 4 a1) | inr y2 -> replicate 3 y2\n";
    part_c_agrees(text);
}

/// A wide property run's case (seed 1537): `replicate 0 (replicate 0 x)` in rows is 0×0 in each row
/// (value.rs `empty_of` keeps an empty element too); as a plain `[]` its rows were read as
/// scalars and bot's broadcast op failed "`map2` expects an array".
#[test]
fn an_empty_array_of_empty_arrays_keeps_its_rank_through_part_c() {
    let text = "input [[-1.075], [0.375], [-1.335]]\n\
                def main mat1 = build 3 (\\i5 -> build 0 (\\j6 -> sin (let (p7, q8) = ((mat1 ! i5 ! (length (mat1 ! i5) - 1 - j6)), (replicate 0 1.43)) in p7 * sum q8)))\n";
    part_c_agrees(text);
}

/// A wide property run's case (seed 1537): the integer inside a sum's side is an Int `cond` after
/// the lowering (both branches primal); Delta extraction (§7.1) takes it as a primal term instead of
/// failing "cond with a dual and a non-dual branch".
#[test]
fn an_integer_cond_is_a_primal_term_in_delta_extraction() {
    let text = "input 0.7\n\
                def main u = case (if 1.91 < 1.28 then inl u else inr (u, -2) : R + (R, Z)) of inl a2 -> a2 | inr (b3, k4) -> b3 * real k4 + u\n";
    part_c_agrees(text);
}

/// Wide property run's cases (seeds 787, 1651): a scan over an empty array in a program without an
/// array input; the gradient program's only arrays of known element are the loop's per-element vjp
/// tuples, which must not be taken for the scalar zero (runtime.rs `scalar_zero`): symbolic-share
/// failed "cannot add (0.0, 0.0, 0.0) and 0.0".
#[test]
fn a_scan_over_no_elements_without_an_array_input_reaches_share_to_let() {
    let text = "input (-0.755, -0.895)\n\
                def main (x0, x1) =\n  sum (scanr (\\x12 acc11 -> x12 * acc11 + x0) x1 (shift1R [x0]))\n";
    part_c_agrees(text);
}

/// Wide property run's case (seed 2887), reported as a wrong `arrays/dual-arrays` gradient: a sum
/// of arrays of two lengths inside a map. The absent `inl` side was `[]` beside the `inr` branch's
/// 4-element array, and B4's literal `[u, v]` of the two (Fig. 10) is not a regular array: the Delta's
/// transpose read both rows' shape from the first. Now the absent side is the side the `if` computes
/// anyway (tuples.rs `split_if`) and a condition free of the build's index is chosen outside it (B4′).
#[test]
fn a_sum_of_arrays_of_two_lengths_inside_a_map_agrees_on_dual_arrays() {
    let text = "input (0.315, 0.795, 1.155)\n\
                def main (x0, x1, x2) = sum (map (\\p -> sum (map (\\q -> q * p) (case (if x1 > 5.0 then inl [x1, 1.41, x1, x0] else inr 1.53 : Array R + R) of inl a -> a | inr y -> [x2, 0.69, p, x0]))) [x0, x1])\n";
    part_c_agrees(text);
}

/// A map whose rows have lengths that depend on the element (`if p > 0.5 then [p] else [p, x0]`) is a
/// ragged array, outside the paper's regular arrays: bot stacks the two sides in one literal (B4)
/// and reads the rows' length at index 0 (L0), and dual-arrays gave the gradient (1.2, 1.4) where
/// forward mode gives (1.6, 1.4). Every Part C stage now stops at the ragged `tr`, named, rather
/// than give a wrong gradient. The `tr` is bot's (B7/B10 on the outer map), and bot's terms carry
/// the span of the source term they come from (rewrite.rs `normalise_located`; D keeps them), so
/// the error points at the outer `map`, line 2, where the message had no line before.
#[test]
fn a_ragged_array_inside_a_map_stops_part_c_with_a_named_error_not_a_wrong_gradient() {
    let text = "input (0.4, 0.7)\n\
                def main (x0, x1) = sum (map (\\p -> sum (map (\\q -> q * p) (if p > 0.5 then [p] else [p, x0]))) [x0, x1])\n";
    let outer_map = text.find("map (\\p").unwrap();
    for stage in ["arrays/bot", "arrays/dual-arrays", "arrays/symbolic", "arrays/symbolic-share", "arrays/share-to-let"] {
        let r = one(text, stage);
        let e = r.error.as_deref().unwrap_or_else(|| panic!("{stage}: no error (agrees: {:?})", r.agrees));
        assert!(e.contains("not regular") && e.contains("lengths 1 and 2"), "{stage}: {e}");
        assert_ne!(r.agrees, Some(false), "{stage}");
        let (start, end) = r.error_span.unwrap_or_else(|| panic!("{stage}: the error has no span: {e}"));
        assert!(start <= outer_map && outer_map < end && end <= text.len(), "{stage}: {:?} is not the outer map's", &text[start.min(text.len())..end.min(text.len())]);
        let lc = cotangent::diag::line_col(text, start);
        assert_eq!(lc.line, 2, "{stage}: {lc:?}");
    }
}

/// B4′ (bot.rs): `if` on a condition free of the map's element, its branches of two lengths; B4's
/// literal of the two builds (2×0 and 2×2) gave dual-arrays the gradient (0.8, 0.7), not (1.9, 1.0).
#[test]
fn a_cond_free_of_the_build_index_is_chosen_outside_the_build() {
    let text = "input (0.4, 0.3)\n\
                def main (x0, x1) = sum (map (\\p -> sum (map (\\q -> q * p) (if x1 > 5.0 then replicate 0 x0 else [x0, p]))) [x0, x1])\n";
    part_c_agrees(text);
    let bot = one(text, "arrays/bot");
    assert!(bot.trace.iter().any(|(k, n)| k.contains("B4′") || n.contains("B4′")), "{:?}", bot.trace);
}

/// Wide property run's cases (seeds 784, 2569, 2809): `case` computes both branches (lower.rs), and
/// the branch of the side that is not there read its `[]` (`a ! 1 <= h`: "primitive `<=` cannot be
/// applied to [] and 0.3"). A sum made by `if c then inl u else inr v` has both sides computed, so
/// its absent side is the other branch's (tuples.rs `split_if`), read only when the tag chooses it;
/// a sum made by `inl`/`inr` alone has a constant tag, and its `case` is the chosen branch.
#[test]
fn the_branch_of_a_sums_absent_side_reads_no_empty_array() {
    let texts = [
        "input (0.4, 0.3)\ndef main (x0, x1) = case (if x0 < 0.0 then inl [x0, x1] else inr x1 : Array R + R) of inl a -> (if a ! 1 <= x1 then a ! 0 else x1) | inr y -> y * x0\n",
        // the tag depends on the map's element: symbolic gave the gradient (0.256, 0.0)
        "input (0.4, 0.3)\ndef main (x0, x1) = sum (map (\\p -> case (if p < 0.35 then inl [p, x1] else inr (p * x0) : Array R + R) of inl a -> a ! 1 * a ! 0 | inr y -> y * y) [x0, x1])\n",
        "input (0.4, 0.3)\ndef main (x0, x1) = case (inr x1 : Array R + R) of inl a -> a ! 1 / x0 | inr y -> y * x0\n",
    ];
    for text in texts {
        part_c_agrees(text);
    }
}

/// A local `let rec` group is unrolled as a recursive top-level definition is (inline.rs
/// `Val::Rec`: each function's closure made at each call, the group in scope): dualrev-letrec, a
/// mutually recursive pair over arrays, and one capturing a map's element; one on a run-time value
/// stays refused, located (App. B).
#[test]
fn local_recursion_bounded_by_params_is_unrolled_for_part_c() {
    part_c_agrees(&example("dualrev-letrec"));
    part_c_agrees("param n = 3\ninput ([1.0, 2.0], 0.5)\ndef main (v, y) =\n  let ev k w = if k == 0 then w else od (k - 1) (map (\\x -> x * y) w)\n  and od k w = if k == 0 then w else ev (k - 1) (map (\\x -> x + y) w) in\n  sum (ev n v)\n");
    part_c_agrees("input ([1.0, 2.0], 0.5)\ndef main (v, y) = sum (map (\\p -> let go k a = if k == 0 then a else go (k - 1) (a * p + y) in go 2 p) v)\n");
    let r = one("input 1.5\ndef main x =\n  let go a = if a > 10.0 then a else go (a * x) in\n  go 1.0\n", "arrays/bot");
    assert!(r.refused, "{r:?}");
    let msg = r.error.as_deref().unwrap_or("");
    assert!(msg.contains("run-time value") && msg.contains("§2.3"), "{r:?}");
    assert!(r.error_span.is_some());
}

/// Issue 12: a fold or scan whose accumulator is a tuple, its components not sums (§2.3 has no
/// loop; the core's one loop, fold.rs, takes a real or an array of reals): the tuple is packed into
/// an array of reals (pack.rs `packed_fold`), one loop for all components; fold, scanl and scanr, over
/// reals and over an array of pairs, on no elements too. These were refused ("no sequential fold or
/// reduce with this body on this component", "not a scan"). An integer component stays refused,
/// located.
#[test]
fn tuple_accumulators_in_folds_and_scans_reach_share_to_let() {
    let texts = [
        "input ([0.5, 1.5, -0.7], 0.3)\ndef main (xs, y) =\n  let (p, q) = fold (\\(a, b) x -> (b * 0.5 + x, a * b + sin x)) (y, 1.0) xs in\n  p * q\n",
        "input ([0.5, 1.5, -0.7], 0.3)\ndef main (xs, y) =\n  let ss = scanl (\\(a, b) x -> (b * 0.5 + x, a * b + sin x)) (y, 1.0) xs in\n  sum (map (\\(p, q) -> p * q) ss)\n",
        "input ([0.5, 1.5, -0.7], [0.2, 0.4, 0.9], 0.3)\ndef main (xs, ys, y) =\n  let ps = map2 (\\a b -> (a, b)) xs ys in\n  let rs = scanr (\\(u, v) (a, b) -> (a * u + v, b * v - a)) (y, 1.0) ps in\n  let ls = scanl (\\s (u, v) -> s * u + v) y ps in\n  sum (map (\\(p, q) -> p * q) rs) + sum ls\n",
        "input ([0.5, 1.5, -0.7], [0.2, 0.4, 0.9], 0.3)\ndef main (xs, ys, y) =\n  let ps = map2 (\\a b -> (a, b)) xs ys in\n  let (p, q) = fold (\\(a, b) (u, v) -> (b * u + a, max a (v * b))) (y, 1.0) ps in\n  let (s, t) = fold (\\(s, t) x -> (s * t + x, t * y)) (y, 0.5) (scanl (\\a x -> a * x) 1.0 xs) in\n  p * q + s * t\n",
        "input (0.4, 0.3)\ndef main (x, y) = let (p, q) = fold (\\(a, b) z -> (a * b * z, b + a)) (x, y) (shift1R [x]) in p * q\n",
    ];
    for text in texts {
        part_c_agrees(text);
    }
    // one loop for the pair: bot's output has one scanl, its accumulator `[y, 1.0]`
    let (p, _) = bot(texts[0]);
    assert_eq!(p.matches("scanl").count(), 1, "{p}");
    assert!(p.contains("[y, 1.0]"), "{p}");
    // an integer component beside them: a loop of its own (pack.rs `int_fold`)
    part_c_agrees("input ([0.5, 1.5], 0.3)\ndef main (xs, y) =\n  let (s, k) = fold (\\(s, k) x -> (s * x + y, k + 1)) (y, 0) xs in\n  s\n");
}

/// Issue 12: bot's B-scan (bot.rs; ours, the paper's core has no loop): a fold inside a map whose
/// array depends on the map's index (`arrays-fold-per-row`: Horner on each row; a fold over
/// `map (\y -> y * x) a` with x the map's element) is one `scanl` over arrays of the k loops'
/// accumulators, the build1 pushed into its body; these were refused ("a build1 is left", Theorem
/// 5.1). Rows of different lengths are not regular: the `tr` of the k arrays stops, located at the
/// map.
#[test]
fn a_fold_inside_a_map_is_one_scan_over_arrays_of_accumulators() {
    part_c_agrees(&example("arrays-fold-per-row"));
    let text = "input [1.0, 2.0]\ndef main a = sum (map (\\x -> fold (\\p q -> p * q + x) 1.0 (map (\\y -> y * x) a)) a)\n";
    part_c_agrees(text);
    let (p, trace) = bot(&example("arrays-fold-per-row"));
    fired(&trace, &["B-scan build1-scanl"]);
    assert_eq!(p.matches("scanl").count(), 1, "{p}");
    let ragged = "input [1.0, 2.0]\ndef main a = sum (map (\\x -> fold (\\p q -> p * q + x) 1.0 (if x > 1.5 then [x] else [x, x])) a)\n";
    let r = one(ragged, "arrays/bot");
    let e = r.error.as_deref().unwrap_or("");
    assert!(e.contains("not regular"), "{r:?}");
    let (start, end) = r.error_span.expect("located");
    let map = ragged.find("map (").unwrap();
    assert!(start <= map && map < end && ragged[start..end].contains("fold"), "{r:?}");
}

/// A fold or scan over a tuple with integer components (pack.rs `int_fold`): an integer carries no
/// cotangent, so the integers are a loop of their own over the elements' indexes (an `Array Int`
/// accumulator, kept by D′ with no Delta), reading the reals' states when they use them, and the
/// reals stay one packed loop, one ScanL Delta, or their sums. Was refused ("sequential fold …")
/// or, for `(s + x, n + 1)`, an ill-typed `sum` of integers ("internal error: the output does not
/// type-check"). Counters, an argmax, scans both ways, a fold per row inside a map, integer
/// elements, integers only, and reals reading the integers as `real i` (the integer loop first, its
/// states a column of the packed elements). A real component using an integer one otherwise, the
/// two reading each other, and an array of arrays beside an integer (an array of reals is packed:
/// `array_components_of_a_tuple_accumulator_reach_share_to_let`), are refused, located at the
/// fold, with the reason.
#[test]
fn integer_components_of_a_tuple_accumulator_reach_share_to_let() {
    let progs = [
        ("[1.0, 3.0, 2.0]", "xs = fold (\\(s, n) x -> (s + x * x, n + 1)) (0.0, 0) xs"),
        ("[1.0, 3.0, 2.0]", "xs = fold (\\(best, bi, i) x -> if x > best then (x, i, i + 1) else (best, bi, i + 1)) (0.0, 0, 0) xs"),
        ("[1.0, 3.0, 2.0]", "xs = let (p, n) = fold (\\(p, n) x -> (p * x + 1.0, n + 1)) (1.0, 0) xs in p * real n"),
        ("[1.0, 3.0, 2.0]", "xs = let (s, n) = fold (\\(s, n) x -> (s + x, n + 1)) (0.0, 0) xs in s / real n"),
        ("[1.0, 3.0, 2.0]", "xs = fold (\\(s, n, t) x -> (s * x, n + 1, t + x * s)) (1.0, 0, 0.0) xs"),
        ("[1.0, 3.0, 2.0]", "xs = scanl (\\(best, bi, i) x -> if x > best then (x, i, i + 1) else (best, bi, i + 1)) (0.0, 0, 0) xs"),
        ("[1.0, 3.0, 2.0]", "xs = scanr (\\x (best, bi) -> if x > best then (x, bi + 1) else (best * x, bi)) (0.5, 0) xs"),
        ("[[1.0, 3.0], [2.0, 0.5]]", "m = map (\\row -> let (p, n) = fold (\\(p, n) x -> (p * x + 1.0, if x > p then n + 1 else n)) (1.0, 0) row in p * 2.0) m"),
        ("[[1.0, 3.0], [2.0, 0.5]]", "m = map (\\row -> fold (\\(p, n) x -> (p * x + 1.0, n + 1)) (1.0, 0) row) m"),
        ("([1.0, 3.0, 2.0], [1, 2, 3])", "(xs, ks) = fold (\\(s, n) (x, k) -> (s * x + 1.0, n + k)) (1.0, 0) (map2 (\\x k -> (x, k)) xs ks)"),
        ("[1.0, 3.0, 2.0]", "xs = (fold (\\(a, b) x -> (a + 1, b * 2)) (0, 1) xs, sum xs)"),
        ("[1.0, 3.0, 2.0]", "xs = fold (\\(s, i) x -> (s + x * real i, i + 1)) (0.0, 0) xs"),
        ("[1.0, 3.0, 2.0]", "xs = fold (\\(s, i) x -> (s * x + real i, i + 1)) (1.0, 0) xs"),
        ("[1.0, 3.0, 2.0]", "xs = scanl (\\(s, i) x -> (s * x + real i, i + 2)) (1.0, 1) xs"),
        ("[1.0, 3.0, 2.0]", "xs = scanr (\\x (s, i) -> (s * x + real i, i + 2)) (1.0, 1) xs"),
        ("[[1.0, 3.0], [2.0, 0.5]]", "m = map (\\row -> fst (fold (\\(s, i) x -> (s * x + real i, i + 1)) (1.0, 0) row)) m"),
    ];
    for (input, main) in progs {
        part_c_agrees(&format!("input {input}\ndef main {main}\n"));
    }
    // an array of arrays beside the integer: packed with the reals, row-major (was refused)
    part_c_agrees("input [1.0, 3.0, 2.0]\ndef main xs = let (s, v, n) = fold (\\(s, v, n) x -> (s * x, map (\\r -> map (\\y -> y + x) r) v, n + 1)) (1.0, [[0.0, 1.0]], 0) xs in s + sum (map (\\r -> sum r) v) * real n\n");
    // the reals are one loop: one ScanL Delta beside the integers' loop
    let r = one("input [1.0, 3.0, 2.0]\ndef main xs = fold (\\(p, n, q) x -> (p * x + 1.0, n + 1, q * p)) (1.0, 0, 2.0) xs\n", "arrays/dual-arrays");
    assert_eq!(r.program.matches("ScanL").count(), 1, "{}", r.program);
    // (was refused, "an integer's step with no form in reals": a `mod`, now on the copy `round`ed)
    part_c_agrees("input [1.0, 3.0, 2.0]\ndef main xs = fold (\\(s, i) x -> (s * x + real i, if x > s then i + 1 else i mod 2)) (1.0, 0) xs\n");
    // an array of integers among them (was the one form left refused):
    // `arrays_of_integers_read_by_the_reals_ride_as_real_copies`
    // was refused ("other than as `real m`")
    part_c_agrees("input [1.0, 3.0, 2.0]\ndef main xs = fold (\\(s, i) x -> (if i > 1 then s * x else s, i + 1)) (1.0, 0) xs\n");
}

/// A fold or scan whose real and integer components read each other with an array of integers
/// among the integers (int_reads.rs `shadow_ints`, pack.rs `shadowed`): the array rides in the reals'
/// row as an array of reals of its shape (more columns, its length fixed by its start and checked
/// each step: §5's static shapes), its step computed on the integers brought back by §2's `round`
/// (`exactInt (round ..)` elementwise) and made reals again. Was refused ("read each other, with an
/// array of integers among the integers"), so each of these fails on the base. By hand, with
/// x = (a, b, c) = (1, 3, 2):
#[test]
fn arrays_of_integers_read_by_the_reals_ride_as_real_copies() {
    // the brief's program: the test x > s holds at b only (3 > 1), so v = [0], [0], [1], [1] and
    // s3 = ((1·a + 0)·b + 0)·c + 1 = abc + 1 = 7; ∂s3 = (bc, ac, ab) = (6, 2, 3)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fold (\\(s, v) x -> (s * x + real (v ! 0), if x > s then [v ! 0 + 1] else v)) (1.0, [0]) xs\n", "(7.0, [1])", &[6.0, 2.0, 3.0]);
    // read by index in the real's step, an index of the input: v = [0, 2] swapped at b (3 > 2):
    // s3 = ((a0 + a0)·a1 + a0)·a2 + a2 = 16; ∂s3 = (2a1a2 + a2, 2a0a2, 2a0a1 + a0 + 1) = (14, 4, 8)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main a = fst (fold (\\(s, v) x -> (s * x + a ! (v ! 0), if x > s then [v ! 1, v ! 0] else v)) (1.0, [0, 2]) a)\n", "16.0", &[14.0, 4.0, 8.0]);
    // updated by a map: v = [0, 1] doubled at a (1 > 1 fails), then + 1 at b: [0, 2], [1, 3], [2, 6];
    // s3 = ((a + 1)·b + 2)·c + 3 = 19; ∂s3 = (bc, (a + 1)c, (a + 1)b + 2) = (6, 4, 8)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fold (\\(s, v) x -> (s * x + real (v ! 1), if x > s then map (\\k -> k + 1) v else map (\\k -> k * 2) v)) (1.0, [0, 1]) xs\n", "(19.0, [2, 6])", &[6.0, 4.0, 8.0]);
    // of rank 2 (a matrix, k·w columns row-major): m + 1 at a (1 > 0.5) and b (3 > 2.5), so
    // m ! 1 ! 0 = 2, 3, 4, 4; s3 = ((0.5a + 2)·b + 3)·c + 4 = 25;
    // ∂s3 = (0.5bc, 0.5ac + 2c, 0.5ab + 2b + 3) = (3, 5, 10.5)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fold (\\(s, m) x -> (s * x + real (m ! 1 ! 0), if x > s then map (\\r -> map (\\k -> k + 1) r) m else m)) (0.5, [[0, 1], [2, 3]]) xs\n", "(25.0, [[2, 3], [4, 5]])", &[3.0, 5.0, 10.5]);
    let progs = [
        // a scanl with a `div` in the array's step, a scanr, a fold per row inside a map, and a
        // second array of integers beside a scalar integer (all three copied)
        ("[1.0, 3.0, 2.0]", "xs = sum (map (\\(s, v) -> s) (scanl (\\(s, v) x -> (s * x + real (v ! 0), if x > s then [v ! 0 / 2 + 3] else v)) (1.0, [0]) xs))"),
        ("[1.0, 3.0, 2.0]", "xs = sum (map (\\(v, s) -> s) (scanr (\\x (v, s) -> (if x > s then map (\\k -> k + 1) v else v, s * x + real (v ! 1))) ([0, 1], 1.0) xs))"),
        ("[[1.0, 3.0], [2.0, 0.5]]", "m = map (\\row -> fst (fold (\\(s, v) x -> (s * x + real (v ! 0), if x > s then [v ! 0 + 1] else v)) (0.5, [0]) row)) m"),
        ("[1.0, 3.0, 2.0]", "xs = fold (\\(s, v, w, k) x -> (s * x + real (v ! 0 + k) + real (w ! 1), if x > s then [v ! 0 + 1] else v, if x > s then map (\\q -> q + k) w else w, k + 1)) (1.0, [0], [1, 2], 0) xs"),
    ];
    for (input, main) in progs {
        part_c_agrees(&format!("input {input}\ndef main {main}\n"));
    }
    // a step that changes the array's length stops at the fold, located (a loop keeps its shape)
    let text = "input [1.0, 3.0, 2.0]\ndef main xs = fold (\\(s, v) x -> (s * x + real (v ! 0), if x > s then [v ! 0, 1] else v)) (1.0, [0]) xs\n";
    let r = one(text, "arrays/share-to-let");
    assert!(!r.refused && r.error.as_deref().unwrap_or("").contains("keeps its accumulator's shape"), "{r:?}");
    let (start, end) = r.error_span.unwrap_or_else(|| panic!("no span: {r:?}"));
    assert!(text[start..end].starts_with("fold"), "{:?}", &text[start..end]);
}

/// A real component of a fold or scan's tuple accumulator that reads an integer component inside a
/// term that also reads a real component or a binder of the body (pack.rs `real_int_reads`): `v ! k`
/// of an array component is the masked sum `sum (build (length v) (\q -> v ! q * (if real q ==
/// real k then 1.0 else 0.0)))` (§4.4's one-hot Index; the integer primal in the condition, as §5.2's gather
/// functions), a comparison `j < k` with a binder is `real j < real k`, `real (j + k)` is
/// `real j + real k`; each `real k` then a column of the integers' states. Each was refused ("also
/// reads a real component or a variable bound in the body"). Every Part C stage agrees with forward
/// mode, and by hand:
#[test]
fn integer_reads_meeting_a_real_or_a_binder_are_real_terms_of_the_integers_states() {
    // v ! k of the array component v (the refused program of session 26): with x = (a, b, c) =
    // (1, 3, 2), v_i = v0 · a..x_i, s1 = 0.5 + a, s2 = s1 · 2a + b, s3 = s2 · ab + c:
    // f = s3 + sum v3 = a²b + 2a³b + ab² + c + 3.5abc = 20 + 21;
    // ∂f = (2ab + 6a²b + b² + 3.5bc, a² + 2a³ + 2ab + 3.5ac, 1 + 3.5ab) = (54, 16, 11.5)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = let (s, v, k) = fold (\\(s, v, k) x -> (s * v ! k + x, map (\\y -> y * x) v, k + 1)) (1.0, [0.5, 2.0, 1.0], 0) xs in s + sum v\n", "41.0", &[54.0, 16.0, 11.5]);
    // a comparison of a binder with the integer, beside the real component:
    // s1 = a + 3, s2 = s1 (b + 2) + b, s3 = s2 (c + 1) + 2c = 23 · 3 + 4 = 73;
    // ∂f = ((b + 2)(c + 1), (a + 4)(c + 1), s2 + 2) = (15, 15, 25)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fst (fold (\\(s, k) x -> (s * x + sum (build 3 (\\j -> if j < k then x else s)), k + 1)) (1.0, 0) xs)\n", "73.0", &[15.0, 15.0, 25.0]);
    // an index of the input at a binder plus the integer (a window): s1 = 2a0 + a1,
    // s2 = s1 a1 + a1 + a2 = 13; ∂f = (2a1, 2a0 + 2a1 + 1, 1) = (4, 7, 1)
    part_c_by_hand("input [1.0, 2.0, 3.0]\ndef main a = fst (fold (\\(s, k) x -> (s * x + sum (build 2 (\\j -> a ! (j + k))), k + 1)) (1.0, 0) [a ! 0, a ! 1])\n", "13.0", &[4.0, 7.0, 1.0]);
    let progs = [
        // a scanl, a scanr, a let of the index, `==` with a binder, inside a map, `real (j * k + 1)`
        "sum (map (\\(s, v, k) -> s) (scanl (\\(s, v, k) x -> (s + v ! k * x, map (\\y -> y + x) v, k + 1)) (0.0, [1.0, 2.0, 3.0, 4.0], 0) a))",
        "sum (map (\\(k, v, s) -> s) (scanr (\\x (k, v, s) -> (k + 1, map (\\y -> y * x) v, s * x + v ! k)) (0, [0.5, 1.0, 1.5, 2.0], 1.0) a))",
        "let (s, v, k) = fold (\\(s, v, k) x -> (let m = k + 1 in s * x + v ! m, v, k + 1)) (1.0, [0.5, 1.0, 1.5, 2.0], 0) a in s",
        "map (\\y -> fst (fold (\\(s, k) x -> (s * x + sum (build 2 (\\j -> if j == k then y else s)), k + 1)) (y, 0) a)) a",
        "fst (fold (\\(s, k) x -> (s * x + sum (build 3 (\\j -> real (j * k + 1) * s)), k + 1)) (1.0, 0) a)",
    ];
    for main in progs {
        part_c_agrees(&format!("input [1.0, 2.0, 3.0]\ndef main a = {main}\n"));
    }
}

/// A row of an array of arrays at an integer component of a fold or scan's tuple accumulator (`m ! k`,
/// `m : [[R]]` a component or a free array) met by a real component or a binder of the body
/// (pack.rs `real_int_reads`): each entry of the row the masked sum of that entry of every row,
/// `build d (\p -> sum (build (length m) (\q -> m ! q ! p * (if real q == real k then 1.0 else 0.0))))`
/// (§4.4's one-hot Index, the integer primal in the mask as §5.2's gather functions keep theirs).
/// Was refused ("an index of an array of arrays"). Every Part C stage agrees with forward mode, and by hand:
#[test]
fn a_row_of_an_array_of_arrays_at_an_integer_component_is_a_masked_sum_of_rows() {
    // x = (a, b, c) = (1, 3, 2), m_i = m0 · x_0 .. x_(i-1): s1 = 1.5 + a, s2 = s1 · 2.5a + b,
    // s3 = s2 · 2ab + c = 9.25 · 6 + 2 = 57.5; ∂s2/∂a = 3.75 + 5a = 8.75, so
    // ∂f = (8.75 · 2ab + 2b s2, 2ab + 2a s2, 1) = (108, 24.5, 1)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = let (s, m, k) = fold (\\(s, m, k) x -> (s * sum (m ! k) + x, map (\\r -> map (\\y -> y * x) r) m, k + 1)) (1.0, [[0.5, 1.0], [2.0, 0.5], [1.0, 1.0]], 0) xs in s\n", "57.5", &[108.0, 24.5, 1.0]);
    // a free matrix read at the integer beside a binder and the real, x = (a, b, c) = (2, 3, 2):
    // s1 = s0 a + s0 (vs00 + vs01) = 3.5, s2 = s1 b + s1 (vs10 + vs11) = 3.5 · 5.5 = 19.25;
    // ∂x = (b + 2.5, s1, 0) = (5.5, 3.5, 0), ∂vs = [[5.5, 5.5], [3.5, 3.5]] (each row's entries alike)
    part_c_by_hand("input ([2.0, 3.0, 2.0], [[0.5, 1.0], [2.0, 0.5]])\ndef main (xs, vs) = fst (fold (\\(s, k) x -> (s * x + sum (build 2 (\\j -> vs ! k ! j * s)), k + 1)) (1.0, 0) [xs ! 0, xs ! 1])\n", "19.25", &[5.5, 3.5, 0.0, 5.5, 5.5, 3.5, 3.5]);
    let progs = [
        // the refused program of session 27 (an entry of the row), a scanl, a scanr, rank 3,
        // inside a map, after the loop, in an array component's new value
        "let (s, m, k) = fold (\\(s, m, k) x -> (s * m ! k ! 0 + x, map (\\r -> map (\\y -> y * x) r) m, k + 1)) (1.0, [[0.5], [2.0], [1.0]], 0) xs in s",
        "sum (map (\\(s, m, k) -> s) (scanl (\\(s, m, k) x -> (s + sum (map (\\y -> y * x) (m ! k)), map (\\r -> map (\\y -> y + x) r) m, k + 1)) (0.0, [[1.0, 2.0], [3.0, 4.0], [0.5, 1.0], [2.0, 2.0]], 0) xs))",
        "sum (map (\\(k, m, s) -> s) (scanr (\\x (k, m, s) -> (k + 1, map (\\r -> map (\\y -> y * x) r) m, s * x + sum (m ! k))) (0, [[0.5, 1.0], [1.0, 1.5], [2.0, 0.5], [1.0, 1.0]], 1.0) xs))",
        "let (s, t, k) = fold (\\(s, t, k) x -> (s * x + sum (map (\\r -> sum r) (t ! k)), map (\\m -> map (\\r -> map (\\y -> y * x) r) m) t, k + 1)) (1.0, [[[0.5, 1.0], [2.0, 0.5]], [[1.0, 1.0], [0.5, 0.5]], [[1.0, 2.0], [3.0, 4.0]]], 0) xs in s",
        "sum (map (\\y -> let (s, m, k) = fold (\\(s, m, k) x -> (s * x + sum (m ! k), map (\\r -> map (\\v -> v * x + s) r) m, k + 1)) (y, [[0.5, 1.0], [2.0, 0.5], [1.0, 1.0]], 0) xs in s) xs)",
        "let (s, m, k) = fold (\\(s, m, k) x -> (s * x, map (\\r -> map (\\y -> y * x) r) m, k + 1)) (1.0, [[0.5], [2.0], [1.0]], 0) xs in s + sum (m ! (k - 1))",
        "let (s, m, k) = fold (\\(s, m, k) x -> (s * x, map (\\r -> map (\\y -> y * x + sum (m ! k)) r) m, k + 1)) (1.0, [[0.5, 0.25], [2.0, 1.0], [1.0, 0.0]], 0) xs in s + sum (map (\\r -> sum r) m)",
    ];
    for main in progs {
        part_c_agrees(&format!("input [1.0, 3.0, 2.0]\ndef main xs = {main}\n"));
    }
}

/// A build whose size reads an integer component of a fold or scan's tuple accumulator, summed at
/// once, beside a real component or a binder (pack.rs `masked_sizes`): the paper's shapes are static
/// ("all the intermediate values computed in a build1-lambda must have shapes that are independent
/// of the index at which the lambda is called", §5), so the body's build has the largest size over
/// the integers' states (a fold of `max` over them, before the loop), each entry past the step's
/// size masked to zero, which the sum adds away. Was refused ("the size of a `build`"). Every Part C
/// stage agrees with forward mode, and by hand:
#[test]
fn a_summed_build_of_an_integer_components_size_is_a_masked_build_of_the_largest_size() {
    // x = (a, b, c) = (1, 3, 2): s1 = s0 a, s2 = s1 b + s1, s3 = s2 c + 2 s2 = a (b + 1)(c + 2) = 16;
    // ∂f = ((b + 1)(c + 2), a (c + 2), a (b + 1)) = (16, 4, 4)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fst (fold (\\(s, k) x -> (s * x + sum (build k (\\j -> s)), k + 1)) (1.0, 0) xs)\n", "16.0", &[16.0, 4.0, 4.0]);
    // the size k + 1 beside a binder: s = 1 + a · 1 + b (1 + 2) + c (1 + 2 + 3) = 23; ∂f = (1, 3, 6)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fst (fold (\\(s, k) x -> (s + sum (build (k + 1) (\\j -> x * real (j + 1))), k + 1)) (1.0, 0) xs)\n", "23.0", &[1.0, 3.0, 6.0]);
    let progs = [
        // a scanl, a scanr (its states from the right), a size that falls (k * k, k = 2, 1, 2), a
        // let of the size (`mod`, of the integers alone)
        "sum (map (\\(s, k) -> s) (scanl (\\(s, k) x -> (s * 0.5 + sum (build k (\\j -> s * x)), k + 2)) (1.0, 1) xs))",
        "sum (map (\\(k, s) -> s) (scanr (\\x (k, s) -> (k + 1, s * 0.5 + sum (build k (\\j -> xs ! j * x)))) (0, 1.0) xs))",
        "fst (fold (\\(s, k) x -> (s + sum (build (k * k) (\\j -> x * s)), 3 - k)) (1.0, 2) xs)",
        "fst (fold (\\(s, k) x -> (let m = k mod 2 in s + sum (build m (\\j -> x * s)), k + 1)) (1.0, 0) xs)",
    ];
    for main in progs {
        part_c_agrees(&format!("input [1.0, 3.0, 2.0]\ndef main xs = {main}\n"));
    }
    // inside a map the largest size was the row's own, and bot refused the map's build1 of arrays of
    // a size that depends on its index (§5, Static shapes); bot's P0 pads it to the largest over the
    // rows (session 29). By hand, per row s = (1 + x1)(1 + 2 x2): 14 + 6 = 20, ∂ = (1 + 2 x2, 2 (1 + x1))
    let text = "input [[1.0, 3.0], [2.0, 0.5]]\ndef main a = sum (map (\\row -> fst (fold (\\(s, k) x -> (s + sum (build k (\\j -> s * x)), k + 1)) (1.0, 1) row)) a)\n";
    part_c_by_hand(text, "20.0", &[7.0, 4.0, 2.0, 6.0]);
}

/// A `real` of a term of an integer component of a fold or scan's tuple accumulator and one binder j
/// of a `build` of a fixed size (`real ((j + k) mod 3)`, the masked read's `real q == real ((j + k)
/// mod 3)`): `div`/`mod` have no exact form in reals, so the term is a table of its values per element
/// and j, computed from the integers' states before the reals' loop, a row of its packed elements
/// (pack.rs `binder_tables`). Was refused ("`div`/`mod` of the two"). Every Part C stage agrees with
/// forward mode, and by hand:
#[test]
fn div_and_mod_of_an_integer_component_and_a_binder_are_tables_per_element() {
    // x = (a, b, c) = (1, 3, 2): the mods (j + k) mod 2 over j < 3 are 0 1 0, 1 0 1, 0 1 0, so
    // s = (a + 1)(b + 2)(c + 1) = 30, ∂f = ((b + 2)(c + 1), (a + 1)(c + 1), (a + 1)(b + 2)) = (15, 6, 10)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fst (fold (\\(s, k) x -> (s * x + sum (build 3 (\\j -> real ((j + k) mod 2) * s)), k + 1)) (1.0, 0) xs)\n", "30.0", &[15.0, 6.0, 10.0]);
    // v ! ((j + k) mod 3) of the array component, v_i = v0 · x_0 .. x_(i-1), v0 = [0.5, 2, 1]:
    // s1 = a + 2.5, s2 = s1 b + 3a, s3 = s2 c + 1.5ab = 31.5;
    // ∂f = ((b + 3)c + 1.5b, (a + 2.5)c + 1.5a, s2) = (16.5, 8.5, 13.5)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = let (s, v, k) = fold (\\(s, v, k) x -> (s * x + sum (build 2 (\\j -> v ! ((j + k) mod 3))), map (\\y -> y * x) v, k + 1)) (1.0, [0.5, 2.0, 1.0], 0) xs in s\n", "31.5", &[16.5, 8.5, 13.5]);
    let progs = [
        // integer division in a test, a scanl over the input's indexes, a scanr, inside a map
        "fst (fold (\\(s, k) x -> (s * x + sum (build 4 (\\j -> if (j * k) / 3 > 0 then s else x)), k + 1)) (1.0, 0) xs)",
        "sum (map (\\(s, k) -> s) (scanl (\\(s, k) x -> (s * 0.5 + sum (build (length xs) (\\j -> xs ! ((j + k) mod length xs) * s)), k + 1)) (1.0, 0) xs))",
        "sum (map (\\(k, s) -> s) (scanr (\\x (k, s) -> (k + 1, s * x + sum (build 2 (\\j -> real ((k - j) mod 2) * x)))) (0, 1.0) xs))",
        "sum (map (\\y -> fst (fold (\\(s, k) x -> (s * x + sum (build 3 (\\j -> real ((j + k) mod 2) * s * y)), k + 1)) (1.0, 0) xs)) xs)",
    ];
    for main in progs {
        part_c_agrees(&format!("input [1.0, 3.0, 2.0]\ndef main xs = {main}\n"));
    }
}

/// `div`/`mod` of an integer component and two (or more) binders of builds of fixed sizes
/// (`real ((i * j + k) / 2)`): a table per element over both binders, an array of rank 2 for each
/// element, row-major columns of the packed elements (pack.rs `binder_tables`). Was refused ("two
/// binders"). Every Part C stage agrees with forward mode, and by hand:
#[test]
fn div_and_mod_of_an_integer_component_and_two_binders_are_tables_per_element() {
    // x = (a, b, c) = (1, 3, 2): i j over {0, 1}² gives i * j = 0 0 0 1, so the sum of
    // (i * j + k) / 2 is 0 at k = 0, 1 at k = 1, 4 at k = 2: s = a (b + 1)(c + 4) = 24,
    // ∂f = ((b + 1)(c + 4), a (c + 4), a (b + 1)) = (24, 6, 4)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fst (fold (\\(s, k) x -> (s * x + sum (build 2 (\\i -> sum (build 2 (\\j -> real ((i * j + k) / 2) * s)))), k + 1)) (1.0, 0) xs)\n", "24.0", &[24.0, 6.0, 4.0]);
    let progs = [
        // the refused program of session 28, three binders, an index of the array component at
        // two binders and the integer, a scanl, inside a map
        "fst (fold (\\(s, k) x -> (s * x + sum (build 2 (\\i -> sum (build 2 (\\j -> real ((i + j + k) mod 2) * s)))), k + 1)) (1.0, 0) xs)",
        "fst (fold (\\(s, k) x -> (s * x + sum (build 2 (\\i -> sum (build 2 (\\j -> sum (build 2 (\\q -> real ((i + j * q + k) mod 3) * s)))))), k + 1)) (1.0, 0) xs)",
        "let (s, v, k) = fold (\\(s, v, k) x -> (s * x + sum (build 2 (\\i -> sum (build 3 (\\j -> v ! ((i + j + k) mod 3) * x)))), map (\\y -> y * x) v, k + 1)) (1.0, [0.5, 2.0, 1.0], 0) xs in s",
        "sum (map (\\(s, k) -> s) (scanl (\\(s, k) x -> (s * 0.5 + sum (build 2 (\\i -> sum (build 2 (\\j -> real ((i * j + k) mod 2) * x)))), k + 1)) (1.0, 0) xs))",
        "sum (map (\\y -> fst (fold (\\(s, k) x -> (s * x + sum (build 2 (\\i -> sum (build 2 (\\j -> real ((i + j + k) / 2) * s * y)))), k + 1)) (1.0, 0) xs)) xs)",
    ];
    for main in progs {
        part_c_agrees(&format!("input [1.0, 3.0, 2.0]\ndef main xs = {main}\n"));
    }
}

/// A build whose size reads an integer component of a fold or scan's tuple accumulator, not summed at
/// once: `map`, `map2`, `length` and `!` of it fused with it, exactly (pack.rs `fuse_sized_builds`),
/// so its sum is a sum of a build, masked to the largest size (`masked_sizes`: the mask carried to
/// the build's consumer); a size reading binders of builds of fixed sizes too (`build (j + k) f`
/// inside `build 3 (\j -> ..)`: the largest over the states and the binders' ranges, so the inner
/// build has one size at every index, as §5's static shapes ask). Each was refused ("the size of a
/// `build` not summed at once or reading a binder"). Every Part C stage agrees with forward mode,
/// and by hand:
#[test]
fn a_build_of_an_integer_components_size_is_fused_with_its_consumer_and_masked() {
    // sum (map (\y -> y * s) (build k (\j -> x))) = k x s: s' = s x (1 + k), x = (a, b, c) = (1, 3, 2):
    // s = 6abc = 36, ∂f = (6bc, 6ac, 6ab) = (36, 12, 18)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fst (fold (\\(s, k) x -> (s * x + sum (map (\\y -> y * s) (build k (\\j -> x))), k + 1)) (1.0, 0) xs)\n", "36.0", &[36.0, 12.0, 18.0]);
    // build (k + 1) (\j -> s * real j) ! k = s k: s' = s (x + k), s = a (b + 1)(c + 2) = 16,
    // ∂f = ((b + 1)(c + 2), a (c + 2), a (b + 1)) = (16, 4, 4)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fst (fold (\\(s, k) x -> (s * x + (build (k + 1) (\\j -> s * real j)) ! k, k + 1)) (1.0, 0) xs)\n", "16.0", &[16.0, 4.0, 4.0]);
    // length: s' = s x + k, s = (ab + 1)c + 2 = 10, ∂f = (bc, ac, ab + 1) = (6, 2, 4)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fst (fold (\\(s, k) x -> (s * x + real (length (build k (\\j -> x))), k + 1)) (1.0, 0) xs)\n", "10.0", &[6.0, 2.0, 4.0]);
    // a size reading a binder: sum over j < 3 of (j + k) = 3 + 3k, s' = s x + (3 + 3k) s,
    // s = (a + 3)(b + 6)(c + 9) = 4 · 9 · 11 = 396, ∂f = (99, 44, 36)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fst (fold (\\(s, k) x -> (s * x + sum (build 3 (\\j -> sum (build (j + k) (\\q -> s)))), k + 1)) (1.0, 0) xs)\n", "396.0", &[99.0, 44.0, 36.0]);
    let progs = [
        // maps of maps, a map2 of two such builds, one reading the input, a scanl, a scanr, inside a map
        "fst (fold (\\(s, k) x -> (s * x + sum (map (\\y -> y * s) (map (\\z -> z + 1.0) (build k (\\j -> x * real j)))), k + 1)) (1.0, 0) xs)",
        "fst (fold (\\(s, k) x -> (s * x + sum (map2 (\\a b -> a * b) (build k (\\j -> x)) (build k (\\j -> s))), k + 1)) (1.0, 0) xs)",
        "fst (fold (\\(s, k) x -> (s * x + sum (map2 (\\a b -> a * b) (build k (\\j -> s)) (build k (\\j -> xs ! j))), k + 1)) (1.0, 0) xs)",
        "sum (map (\\(s, k) -> s) (scanl (\\(s, k) x -> (s * 0.5 + sum (map (\\y -> y * x) (build k (\\j -> s))), k + 1)) (1.0, 0) xs))",
        "sum (map (\\(k, s) -> s) (scanr (\\x (k, s) -> (k + 1, s * 0.5 + sum (build 2 (\\j -> sum (build (j + k) (\\q -> x * s)))))) (0, 1.0) xs))",
        "sum (map (\\y -> fst (fold (\\(s, k) x -> (s * x + real (length (map (\\z -> z * y) (build k (\\j -> x)))), k + 1)) (1.0, 0) xs)) xs)",
    ];
    for main in progs {
        part_c_agrees(&format!("input [1.0, 3.0, 2.0]\ndef main xs = {main}\n"));
    }
}

/// A tuple accumulator whose real and integer components read each other (`if x > s then i + 1 else
/// i` beside `s * x + real i`): the integers the reals read ride in the reals' row as real copies (pack.rs
/// `shadow_ints`: the step in reals, `if x > s then i′ + 1.0 else i′`, its Delta zero, as §5.2's
/// integers are primal), and the integers, which then alone read the reals, are their loop after the
/// reals', over the reals' states. Was refused ("read each other"). Every Part C stage agrees with
/// forward mode, and by hand:
#[test]
fn real_and_integer_components_reading_each_other_carry_the_integers_as_real_copies() {
    // x = (a, b, c) = (1, 3, 2): s1 = a = 1 (i stays 0: 1 > 1 fails), s2 = s1 b = 3 (i = 1: 3 > 1),
    // s3 = s2 c + 1 = 7 (2 > 3 fails); ∂f = (bc, ac, ab) = (6, 2, 3), the integer's part zero
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fold (\\(s, i) x -> (s * x + real i, if x > s then i + 1 else i)) (1.0, 0) xs\n", "(7.0, 1)", &[6.0, 2.0, 3.0]);
    let progs = [
        // a scanl with a compound test and step, a scanr, two integers (one reading the other)
        // inside a map, read by the real as real (i - j)
        ("[1.0, 3.0, 0.5]", "sum (map (\\(s, i) -> s * real i) (scanl (\\(s, i) x -> (s * x + real i * x, if x > s && i < 2 then i + 2 else i - 1)) (1.0, 0) xs))"),
        ("[1.0, 3.0, 0.5, 2.0]", "sum (map (\\(i, s) -> s) (scanr (\\x (i, s) -> (if x < s then i + 1 else i, s * x + real i)) (0, 1.0) xs))"),
        ("[[1.0, 3.0, 0.5], [2.0, 0.5, 4.0]]", "sum (map (\\row -> let (s, i, j) = fold (\\(s, i, j) x -> (s * x + real (i - j), if x > s then i + 1 else i, if i > j then j + 1 else j)) (1.0, 0, 0) row in s + real i) xs)"),
    ];
    for (input, main) in progs {
        part_c_agrees(&format!("input {input}\ndef main xs = {main}\n"));
    }
}

/// The two reading each other where the reals read an integer otherwise than as `real m` (`v ! k`,
/// `if i > 0`), or an integer's step reads an index (`ks ! i`, `xs ! i > s`): the reals' reads made
/// real terms of `real k` first (pack.rs `real_int_reads`, every read, since the integers' states
/// come after the reals' loop), then the copies read them; an index in a step a masked read at the
/// copy (`masked_read`). Each was refused ("read each other"); `div`/`mod` in a step: see
/// `div_and_mod_in_a_step_read_by_the_reals_are_made_on_the_rounded_copies`. Every Part C stage
/// agrees with forward mode, and by hand:
#[test]
fn components_reading_each_other_through_indexes_and_tests_carry_real_copies() {
    // v ! k beside a step reading the real: x = (a, b, c) = (1, 3, 2), k = 0, 0, 1:
    // s1 = a + 0.5, s2 = s1 b + 0.5a, s3 = s2 c + 2ab = 16, f = s3 + 3.5abc = 37;
    // ∂f = (bc + 0.5c + 2b + 3.5bc, (a + 0.5)c + 2a + 3.5ac, (a + 0.5)b + 0.5a + 3.5ab) = (34, 12, 15.5)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = let (s, v, k) = fold (\\(s, v, k) x -> (s * x + v ! k, map (\\y -> y * x) v, if x > s then k + 1 else k)) (1.0, [0.5, 2.0, 1.0], 0) xs in s + sum v\n", "37.0", &[34.0, 12.0, 15.5]);
    // an index in the integer's step: i = 0, 2, 2, s = (ab)c + 2 = 8, ∂xs = (bc, ac, ab) = (6, 2, 3)
    part_c_by_hand("input ([1.0, 3.0, 2.0], [2, 0, 1])\ndef main (xs, ks) = fold (\\(s, i) x -> (s * x + real i, if x > s then ks ! i else i)) (1.0, 0) xs\n", "(8.0, 2)", &[6.0, 2.0, 3.0]);
    // a test of the integer in the real, a read of the input at it in the step: i = 1, 2, 2,
    // s1 = 0.5a + 1, s2 = (s1 + 1)b, s3 = (s2 + 1)c = 17; ∂f = (0.5bc, (s1 + 1)c, s2 + 1) = (3, 5, 8.5)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = fold (\\(s, i) x -> (s * x + (if i > 0 then x else 1.0), if xs ! i > s then i + 1 else i)) (0.5, 0) xs\n", "(17.0, 2)", &[3.0, 5.0, 8.5]);
    let progs = [
        // a scanl, a scanr, a comparison with a binder, inside a map
        "sum (map (\\(s, v, k) -> s) (scanl (\\(s, v, k) x -> (s * x + v ! k, map (\\y -> y + x) v, if x > s then k + 1 else k)) (1.0, [0.5, 1.0, 1.5, 2.0], 0) xs))",
        "sum (map (\\(k, s) -> s) (scanr (\\x (k, s) -> (if x > s then k + 1 else k, s * x + (if k > 0 then x else 0.5))) (0, 1.0) xs))",
        "fst (fold (\\(s, k) x -> (s * x + sum (build 3 (\\j -> if j < k then x else s)), if x > s then k + 1 else k)) (1.0, 0) xs)",
        "sum (map (\\y -> fst (fold (\\(s, k) x -> (s * x + xs ! k * y, if x * y > s then k + 1 else k)) (1.0, 0) xs)) xs)",
    ];
    for main in progs {
        part_c_agrees(&format!("input [1.0, 3.0, 2.0]\ndef main xs = {main}\n"));
    }
}

/// The length of an array built inside a build1 of a size that reads its index (`length (build k
/// f)` in a map over `ks`) is that size (bot.rs `L0`): read at i = 0, as other lengths are (§5.2's
/// index-independent shapes), it was row 0's for every row, a silent wrong gradient on every Part C
/// stage (and a fold's integer size in a column per element, before pack.rs fused `length` with its
/// build). f = a0 · (1 + 2 + 3) = 12, ∂a = 6. Likewise through a map, a map2 or a let of such a
/// build (`map g (build k f)` lowers to a let of the build and a build1 of its length): the size is
/// the let's body's with the let's value put in (bot.rs `outer_size`); read at i = 0 they gave 3 a0
/// for 6 a0 (session 28).
#[test]
fn the_length_of_a_build_sized_by_the_index_is_its_size() {
    part_c_by_hand("input ([2.0], [1, 2, 3])\ndef main (a, ks) = sum (map (\\k -> a ! 0 * real (length (build k (\\j -> a ! 0)))) ks)\n", "12.0", &[6.0]);
    part_c_agrees("input ([2.0], [1, 2, 3])\ndef main (a, ks) = sum (map (\\k -> a ! 0 * real (length (replicate (k + 1) 1.0))) ks)\n");
    part_c_by_hand("input ([2.0], [1, 2, 3])\ndef main (a, ks) = sum (map (\\k -> a ! 0 * real (length (map (\\x -> x + 1.0) (build k (\\i -> real i))))) ks)\n", "12.0", &[6.0]);
    part_c_by_hand("input ([2.0], [1, 2, 3])\ndef main (a, ks) = sum (map (\\k -> a ! 0 * real (length (map (\\x -> x * 2.0) (map (\\x -> x + 1.0) (build k (\\i -> real i)))))) ks)\n", "12.0", &[6.0]);
}

/// A fold inside a map whose accumulator changes length from one step to the next (`replicate 3 r`,
/// then a vector of length 2; arr16's reproducer m7 over a non-empty array) is outside the paper's
/// language: its arrays are regular (§3) and a loop keeps its accumulator's shape (horde-ad's fold,
/// whose type fixes it), and bot's B-scan stacks the k loops' states step by step, which is then
/// not regular. Every Part C stage stops at that `tr` with one message naming this cause, located at
/// the fold (it named only a map whose rows differ per element, located at the map). The same fold
/// outside a map stores its states unstacked and agrees.
#[test]
fn a_fold_in_a_map_whose_accumulator_changes_length_stops_part_c_at_the_fold() {
    let text = "input ([-1.445, 0.5], [-0.585, -0.975])\n\
                def main (a, b) = map (\\r -> fold (\\acc x -> map (\\y -> y * x) b) (replicate 3 r) [r, 2.0 * r]) a\n";
    let fold = text.find("fold").unwrap();
    for stage in PART_C {
        let r = one(text, stage);
        let e = r.error.as_deref().unwrap_or_else(|| panic!("{stage}: no error (agrees: {:?})", r.agrees));
        assert!(e.contains("not regular") && e.contains("lengths 3 and 2") && e.contains("accumulator changes length"), "{stage}: {e}");
        let (start, _) = r.error_span.unwrap_or_else(|| panic!("{stage}: no span: {e}"));
        assert_eq!(start, fold, "{stage}: {:?}", &text[start..]);
    }
    part_c_agrees("input ([-1.445], [-0.585, -0.975])\ndef main (a, b) = fold (\\acc x -> b) (replicate 3 (a ! 0)) [a ! 0, b ! 0]\n");
}

/// bot's gathers and scatters take any rank (they took 3, then 5): a fold inside three nested maps
/// reads its states with a gather of rank 4, a scan inside four with one of rank 5, a scan inside six
/// with one of rank 6 (refused until session 29 as "6 dimensions deep, past the 5 …").
#[test]
fn folds_and_scans_in_maps_nested_four_deep_reach_share_to_let() {
    part_c_agrees(
        "input [[[[1.0, 2.0], [3.0, 0.5]], [[5.0, 0.25], [7.0, 2.0]]], [[[0.5, 1.5], [2.5, 3.5]], [[1.25, 0.75], [0.125, 4.0]]]]\n\
         def main x4 = map (\\x3 -> map (\\xss -> map (\\xs -> fold (\\a x -> a * x + sin a) 0.5 xs) xss) x3) x4\n",
    );
    part_c_agrees(
        "input [[[[[1.0, 2.0], [3.0, 0.5]]], [[[5.0, 0.25], [7.0, 2.0]]]]]\n\
         def main x5 = map (\\x4 -> map (\\x3 -> map (\\xss -> map (\\xs -> scanl (\\a x -> a * x + sin a) 0.5 xs) xss) x3) x4) x5\n",
    );
    let six = "input [[[[[[[1.0, 2.0], [3.0, 0.5]]]]]]]\n\
               def main x7 = map (\\x6 -> map (\\x5 -> map (\\x4 -> map (\\x3 -> map (\\xss -> map (\\xs -> scanl (\\a x -> a * x + sin a) 0.5 xs) xss) x3) x4) x5) x6) x7\n";
    let (p, _) = bot(six);
    assert!(p.contains("gather66") && !p.contains("build"), "{p}");
    part_c_agrees(six);
}

/// Fig. 10's gather rule and B8′ take a gather of any rank under a build1 (Part C seed 180: folds
/// packed three deep left `build1 k (λi. gather54 … (index r i) …)`, refused as "a build1 is left",
/// since the gathers stopped at rank 5). Five maps over a rank-6 array with a shift inside: bot's
/// output has no build1 (Theorem 5.1) and reads the rows with a gather of rank 6 (`gather66`), built
/// up by B8′ a rank at a time; the gradient is the hand one (a row's first entry is shifted out) on
/// every Part C stage, which agrees with forward mode.
#[test]
fn a_build1_over_a_gather_of_rank_five_becomes_a_gather_of_rank_six() {
    let text = "input [[[[[[1.0, 2.0, 3.0]], [[4.0, 5.0, 6.0]]]]], [[[[[7.0, 8.0, 9.0]], [[1.5, 2.5, 3.5]]]]]]\n\
                def main t = sum (map (\\a -> sum (map (\\b -> sum (map (\\c -> sum (map (\\d -> sum (map (\\xs -> sum (shift1L xs)) d)) c)) b)) a)) t)\n\
                expect primal 39.0\n";
    let (p, trace) = bot(text);
    fired(&trace, &["B8′"]);
    assert!(!p.contains("build"), "a build1 is left: {p}");
    assert!(p.contains("gather66"), "{p}");
    let hand: Vec<f64> = (0..4).flat_map(|_| [0.0, 1.0, 1.0]).collect();
    for (stage, r) in PART_C.iter().zip(run(text, &PART_C)) {
        assert_eq!(r.error, None, "{stage}");
        assert_eq!(r.agrees, Some(true), "{stage}");
        assert_eq!(r.gradient, hand, "{stage}");
    }
}

/// A tuple accumulator with array-of-reals components (pack.rs `packed_fold`; beyond the paper,
/// §2.3, as horde-ad): each array is more columns of the one loop's packed row, after the reals,
/// its length the length of its initial value (known at run time), read back with a build. These
/// were refused ("sequential fold or reduce with this body on this component"; for a scan, "an
/// array component would make it ragged"). A fold, a scanl, a scanr, the array first or last, two
/// arrays, only arrays, a fold and a scan inside maps (the array per row, nested two deep), no
/// elements and an empty array, and beside integer components (`int_fold`; refused before as "an
/// integer component beside a component of type Array R"): every Part C stage agrees, with one
/// loop and one ScanL Delta. A
/// body that changes the array's length stops every stage at run time, located at the fold, inside
/// a map too; an array of arrays is refused, located.
#[test]
fn array_components_of_a_tuple_accumulator_reach_share_to_let() {
    let progs = [
        ("([1.0, 2.0, 3.0], [0.5, 0.25])", "(xs, w) = let (s, v) = fold (\\(s, v) x -> (s + x * v ! 0, map (\\y -> y * x) v)) (0.0, w) xs in s + sum v"),
        ("([1.0, 2.0, 3.0], [0.5, 0.25])", "(xs, w) = let ss = scanl (\\(s, v) x -> (s + x * v ! 0, map (\\y -> y * x + s) v)) (0.0, w) xs in sum (map (\\p -> fst p) ss) + sum (map (\\p -> sum (snd p)) ss)"),
        ("([1.0, 2.0, 3.0], [0.5, 0.25])", "(xs, w) = let ss = scanr (\\x (v, s) -> (map (\\y -> sin (y * x) + s) v, s * x + v ! 1)) (w, 1.0) xs in sum (map (\\p -> sum (fst p)) ss) + sum (map (\\p -> snd p) ss)"),
        ("([1.0, 2.0, 3.0], [0.5, 0.25], [2.0, 1.0, 3.0])", "(xs, w, u) = let (v, s, q) = fold (\\(v, s, q) x -> (map (\\y -> y * x + q ! 2) v, s * x, map (\\a -> a * x + s) q)) (w, 1.0, u) xs in sum v + s + sum q"),
        ("([1.0, 2.0], [0.5, 0.25], [2.0, 1.0, 3.0])", "(xs, w, u) = let (v, q) = fold (\\(v, q) x -> (map (\\y -> y * x + q ! 0) v, map (\\a -> a * v ! 1) q)) (w, u) xs in sum v * sum q"),
        ("([[1.0, 2.0], [3.0, 4.0], [0.5, 1.5]], [0.5, 0.25])", "(m, w) = sum (map (\\row -> let (s, v) = fold (\\(s, v) x -> (s + x * v ! 1, map (\\y -> y * x + s) v)) (0.0, w) row in s * sum v) m)"),
        ("[[1.0, 2.0, 0.5], [3.0, 4.0, 1.5]]", "m = sum (map (\\row -> let ss = scanl (\\(v, s) x -> (map (\\y -> y * x + s) v, s + x * v ! 0)) (map (\\y -> y * 2.0) row, 1.0) row in sum (map (\\p -> sum (fst p) * snd p) ss)) m)"),
        ("([[[1.0, 2.0], [3.0, 4.0]], [[0.5, 1.0], [2.0, 0.1]]], [0.5, 0.25, 2.0])", "(t, w) = sum (map (\\mm -> sum (map (\\row -> let (v, s) = fold (\\(v, s) x -> (map (\\y -> y * x + s) v, s * x + v ! 2)) (w, 1.0) row in s + sum v) mm)) t)"),
        ("([], [0.5, 0.25])", "(xs, w) = let (s, v) = fold (\\(s, v) x -> (s + x * v ! 0, map (\\y -> y * x) v)) (0.0, w) xs in s + sum v"),
        ("([1.0, 2.0], [])", "(xs, w) = let (s, v) = fold (\\(s, v) x -> (s * x + 1.0, map (\\y -> y * x) v)) (0.5, w) xs in s + sum v"),
    ];
    for (input, main) in progs {
        part_c_agrees(&format!("input {input}\ndef main {main}\n"));
    }
    // beside integer components (pack.rs `int_fold`: the integers a loop of their own): a counter,
    // a count reading the array's states, in a scan, in a map, the array reading `real k` (the
    // integer loop first) in a scanr, and beside a real that is a sum
    let with_ints = [
        "(xs, w) = let (k, v) = fold (\\(k, v) x -> (k + 1, map (\\y -> y * x) v)) (0, w) xs in real k + sum v",
        "(xs, w) = let (v, k) = fold (\\(v, k) x -> (map (\\y -> y * x) v, if x > v ! 0 then k + 1 else k)) (w, 0) xs in sum v * real k",
        "(xs, w) = let ss = scanl (\\(v, k) x -> (map (\\y -> y * x) v, if x > v ! 0 then k + 1 else k)) (w, 0) xs in sum (map (\\p -> sum (fst p) * real (snd p)) ss)",
        "(xs, w) = let ss = scanr (\\x (k, v) -> (k + 2, map (\\y -> y * x + real k) v)) (1, w) xs in sum (map (\\p -> sum (snd p) * real (fst p)) ss)",
        "(xs, w) = let (s, v, k) = fold (\\(s, v, k) x -> (s + x, map (\\y -> y * x) v, k + 1)) (1.0, w, 0) xs in s + sum v + real k",
    ];
    for main in with_ints {
        part_c_agrees(&format!("input ([1.0, 2.0, 3.0], [0.5, 0.25])\ndef main {main}\n"));
    }
    part_c_agrees("input ([[1.0, 2.0], [3.0, 0.5]], [0.5, 0.25])\ndef main (m, w) = sum (map (\\row -> let (v, k) = fold (\\(v, k) x -> (map (\\y -> y * x) v, if x > v ! 0 then k + 1 else k)) (w, 0) row in sum v * real k) m)\n");
    // one loop for the tuple: one scanl after bot, one ScanL Delta
    let text = format!("input {}\ndef main {}\n", progs[3].0, progs[3].1);
    let (p, _) = bot(&text);
    assert_eq!(p.matches("scanl").count(), 1, "{p}");
    let r = one(&text, "arrays/dual-arrays");
    assert_eq!(r.program.matches("ScanL").count(), 1, "{}", r.program);
    // a body that changes the array's length: a run-time error at the fold, on every stage
    for text in [
        "input ([1.0, 2.0, 3.0], [0.5, 0.25])\ndef main (xs, w) = let (s, v) = fold (\\(s, v) x -> (s + x, shift1L v)) (0.0, w) xs in s + sum v\n",
        "input ([1.0, 2.0, 3.0], [0.5, 0.25])\ndef main (xs, w) = let (v, s) = fold (\\(v, s) x -> (build (length v + 1) (\\i -> x), s + x)) (w, 0.0) xs in s + sum v\n",
        "input ([[1.0, 2.0], [3.0, 4.0]], [0.5, 0.25])\ndef main (m, w) = sum (map (\\row -> let (s, v) = fold (\\(s, v) x -> (s + x, map (\\y -> y * x) (shift1L v))) (0.0, w) row in s + sum v) m)\n",
        "input ([1.0, 2.0, 3.0], [0.5, 0.25])\ndef main (xs, w) = let (k, v) = fold (\\(k, v) x -> (k + 1, shift1L v)) (0, w) xs in real k + sum v\n",
    ] {
        let fold = text.find("fold").unwrap();
        for stage in PART_C {
            let r = one(text, stage);
            let e = r.error.as_deref().unwrap_or_else(|| panic!("{stage}: no error (agrees: {:?})", r.agrees));
            assert!(!r.refused && e.contains("array component of length 2 at the start") && e.contains("keeps its accumulator's shape"), "{stage}: {e}");
            let (start, _) = r.error_span.unwrap_or_else(|| panic!("{stage}: no span: {e}"));
            assert_eq!(start, fold, "{stage}: {:?}", &text[start..]);
        }
    }
    // an array of arrays beside the real: packed row-major (arrays_of_arrays_in_a_tuple_accumulator_reach_share_to_let)
    part_c_agrees("input ([1.0, 2.0, 3.0], [[0.5, 0.25]])\ndef main (xs, w) = let (s, v) = fold (\\(s, v) x -> (s + x, map (\\r -> map (\\y -> y * x) r) v)) (0.0, w) xs in s + sum (map (\\r -> sum r) v)\n");
    // a fold whose whole accumulator is an array of arrays is the core loop's own
    part_c_agrees("input ([1.0, 3.0], [[0.5, 1.0], [2.0, 0.25]])\ndef main (xs, m) = sum (map (\\r -> sum r) (fold (\\acc x -> map (\\r -> map (\\y -> y * x + acc ! 0 ! 1) r) acc) m xs))\n");
}

/// Boolean components of a fold or scan accumulator (pack.rs `encode_bools`): the core's loop runs
/// over one array of reals (or of integers), an array of one element type (Fig. 8), so a boolean rides in the loop as a number, 1
/// for true, a column of the packed row of reals (its Delta zero), or with the integers when its new
/// value reads one, and is read back as `> 0.5`. These were refused ("sequential fold or reduce with
/// this body on this component"; a lone boolean accumulator: "no sequential fold or scan with this
/// function"). A flag choosing the step, two flags, a flag beside an integer reading it or read by
/// it, scans both ways and in a map, a lone boolean accumulator, a tuple output with the flag, no
/// elements, and boolean elements (a column of the packed elements): every Part C stage agrees.
/// Beside elements that are arrays, refused, located, with the reason.
#[test]
fn boolean_components_of_a_tuple_accumulator_reach_share_to_let() {
    let xs = "[2.0, 1.5, 4.0]";
    let progs = [
        (xs, "xs = let (s, up) = fold (\\(s, up) x -> (if up then s + x else s * x, x > s)) (1.0, false) xs in if up then s else 0.5 * s"),
        (xs, "xs = fold (\\(s, up) x -> (if up then s + x else s * x, x > s)) (1.0, true) xs"),
        (xs, "xs = let (s, a, b) = fold (\\(s, a, b) x -> (if a && b then s * x else s + x, not b, x > 1.0 || a)) (1.0, true, false) xs in s"),
        (xs, "xs = let (s, n, up) = fold (\\(s, n, up) x -> (if up then s + x else s * x, if up then n + 1 else n, x > s)) (1.0, 0, false) xs in s + real n"),
        (xs, "xs = let (s, n, up) = fold (\\(s, n, up) x -> (if up then s * x else s + x, n + 1, n > 0)) (1.0, 0, false) xs in if up then s else 2.0 * s"),
        (xs, "xs = let (s, n, a, b) = fold (\\(s, n, a, b) x -> (if a then s * x else s + x, n + 1, b, n > 0)) (1.0, 0, true, false) xs in s"),
        (xs, "xs = sum (map (\\p -> if snd p then fst p else 0.0) (scanl (\\(s, up) x -> (s * x + 1.0, x > s || up)) (1.0, false) xs))"),
        (xs, "xs = sum (map (\\p -> if fst p then snd p else 0.0) (scanr (\\x (up, s) -> (x > s, s * x + 1.0)) (true, 0.5) xs))"),
        (xs, "xs = let ss = scanl (\\(s, n, up) x -> (if up then s * x else s + x, n + 1, n > 1 || up)) (1.0, 0, false) xs in sum (map (\\p -> let (s, n, up) = p in if up then s else s * real n) ss)"),
        (xs, "xs = if fold (\\b x -> b || x > 2.5) false xs then sum xs else 0.0"),
        (xs, "xs = sum (map2 (\\b x -> if b then x * x else x) (shift1L (scanr (\\x b -> x > 1.5 && b) true xs)) xs)"),
        ("([2.0, 1.5, 4.0], [0.5, 0.25])", "(xs, w) = let (v, up) = fold (\\(v, up) x -> (map (\\y -> if up then y * x else y + x) v, x > v ! 0)) (w, false) xs in sum v"),
        ("[[1.0, 3.0], [2.0, 0.5]]", "m = map (\\row -> let (s, up) = fold (\\(s, up) x -> (if up then s * x else s + x, x > 1.5)) (0.5, false) row in s) m"),
        ("[[1.0, 3.0], [2.0, 0.5]]", "m = sum (map (\\row -> let ss = scanl (\\(s, up) x -> (if up then s * x else s + x, x > 1.5)) (0.5, false) row in sum (map (\\p -> if snd p then fst p else 1.0) ss)) m)"),
        ("[]", "xs = let (s, up) = fold (\\(s, up) x -> (if up then s + x else s * x, x > s)) (1.0, true) xs in if up then s else 0.0 - s"),
    ];
    for (input, main) in progs {
        part_c_agrees(&format!("input {input}\ndef main {main}\n"));
    }
    // a flag read by the reals rides in their row: one loop, one ScanL Delta, its start `cond b 1.0 0.0`
    let text = format!("input {xs}\ndef main {}\n", progs[0].1);
    let (p, _) = bot(&text);
    assert_eq!(p.matches("scanl").count(), 1, "{p}");
    assert!(p.contains("[1.0, cond false 1.0 0.0]"), "{p}");
    let r = one(&text, "arrays/dual-arrays");
    assert_eq!(r.program.matches("ScanL").count(), 1, "{}", r.program);
    // a flag reading the integer rides with it: the integers' loop starts `[0, cond false 1 0]`
    let (p, _) = bot(&format!("input {xs}\ndef main {}\n", progs[4].1));
    assert!(p.contains("[0, cond false 1 0]"), "{p}");
    // the example's values by hand
    let r = one(&example("arrays-fold-boolean-accumulator"), "arrays/share-to-let");
    assert_eq!((r.primal.as_str(), r.gradient.as_slice()), ("15.0", [4.0, 4.0, 3.5].as_slice()), "{r:?}");
    // boolean elements ride as numbers too, a column of the packed elements
    for (input, main) in [
        (xs, "xs = fst (fold (\\(s, b) c -> (if c then s * 2.0 else s + 1.0, c)) (0.0, false) (map (\\x -> x > 1.5) xs))"),
        (xs, "xs = fold (\\s (x, b) -> if b then s * x else s + x) 1.0 (map (\\x -> (x, x > 1.5)) xs)"),
        ("([2.0, 1.5, 4.0], [1, 0, 1])", "(xs, ks) = fold (\\(s, n) (x, b) -> (if b then s * x else s + x, if b then n + 1 else n)) (1.0, 0) (map2 (\\x k -> (x, k > 0)) xs ks)"),
        (xs, "xs = sum (scanl (\\s (x, b) -> if b then s * x else s + x) 1.0 (map (\\x -> (x, x > 1.5)) xs))"),
    ] {
        part_c_agrees(&format!("input {input}\ndef main {main}\n"));
    }
    // beside elements that are arrays (a fold over a matrix's rows): arrays_as_elements_of_a_tuple_fold_reach_share_to_let
}

/// An empty gather's zero has the shape the gather would give: `gather 0 r (\i -> [1 + i])` of a
/// vector is an empty vector of scalars, not of rows (delta.rs, `b_gather`). Reading it as rows made
/// `sum v` of an accumulator's empty array component a row, and dual-arrays stopped with "cannot add
/// [0.0] and 1.0" (property-test seeds 415 and 1447 of `part_c_wide`, shrunk).
#[test]
fn an_empty_array_component_of_a_tuple_accumulator_sums_to_a_scalar() {
    let progs = [
        "def main (x0, x1) =\n  let (a, v) = fold (\\(p, w) y -> (p, w)) (x0, (map (\\q -> x1) [])) [x0] in\n  sum (map (\\d -> (sum v + x0) * d) [0.0, 1.0])\n",
        "def main (x0, x1) =\n  let (a, v) = fold (\\(p, w) y -> (p * 0.5 + sum w, map (\\t -> sum w * t) w)) (x0, (map (\\q -> x1) [])) [x0, x1] in\n  sum (map (\\(c, d) -> if d > 0.5 then sum v + a else 0.5 * c) (scanl (\\(c, d) e -> (if d > 0.5 then 1.9 else x0, 1.0 - d)) (sum v, 0.0) [sum v, sum v]))\n",
    ];
    for main in progs {
        part_c_agrees(&format!("input (0.505, -0.225)\n{main}"));
    }
    let r = one(&format!("input (0.505, -0.225)\n{}", progs[0]), "arrays/share-to-let");
    assert_eq!(r.gradient, vec![1.0, 0.0], "{}", r.program);
}

/// A scalar zero cotangent where an array is meant, scaled by an array, is the zero of that
/// array's shape: `shift1R` of a one-row matrix is empty, so its seed is `[]` and the scatter of it
/// back to one row has a scalar zero for the row, which the symbolic gradient program scales by
/// `real k` of a row (`·→`). The symbolic stages stopped with "·→: shapes differ (0.0 and [-1.0,
/// 0.0, 3.0, 8.0])" (property-test seed 618728855218914312 with PROPTEST_RNG_SEED=20261130, shrunk).
#[test]
fn a_scalar_zero_cotangent_scaled_by_a_row_is_a_zero_row() {
    let text = "input [1.0, 2.0]\ndef main a = shift1R (map (\\x -> map (\\k -> real k * x) (build 4 (\\i -> i * i - 1))) [sum a])\n";
    part_c_by_hand(text, "[]", &[0.0, 0.0]);
    // beside a row that does reach the output: its gradient is the sum of `real k` = -1 + 0 + 3 + 8
    let text = "input [1.0, 2.0]\ndef main a = (shift1R (map (\\x -> map (\\k -> real k * x) (build 4 (\\i -> i * i - 1))) [sum a]), sum (map (\\k -> real k * a ! 0) (build 4 (\\i -> i * i - 1))))\n";
    part_c_by_hand(text, "([], 10.0)", &[10.0, 0.0]);
}

/// Run on every Part C stage, `text` agrees with forward mode and share-to-let's primal and
/// gradient are `primal` and `grad` (computed by hand).
fn part_c_by_hand(text: &str, primal: &str, grad: &[f64]) {
    part_c_agrees(text);
    let r = one(text, "arrays/share-to-let");
    assert_eq!((r.primal.as_str(), r.gradient.as_slice()), (primal, grad), "{}", r.program);
}

/// An array of arrays (a matrix, regular as the paper's arrays are, §3.2; any rank) as a component
/// of a fold or scan's tuple accumulator (pack.rs): its k·w elements are more columns of the packed
/// row, row-major, read back by the body as `build k (\i -> build w (\j -> acc ! (off + (i * w + j))))`,
/// its dimensions those of its initial value, checked each step. Was refused ("component of type
/// Array (Array R) … an array of arrays is not packed"). Beside a real and a vector, in a scanl, a
/// scanr, a map, beside an integer, of rank 3, empty, of empty rows: every Part C stage agrees;
/// a body that changes a dimension stops at the fold, located.
#[test]
fn arrays_of_arrays_in_a_tuple_accumulator_reach_share_to_let() {
    // the brief's program: s = x1 + x2 = 5, m scaled by x1 x2 = 6 (sum 10): 65;
    // ∂/∂x1 = 1 + 10 x2 = 31, ∂/∂x2 = 1 + 10 x1 = 21
    part_c_by_hand("input [2.0, 3.0]\ndef main xs =\n  let (s, m) = fold (\\(s, m) x -> (s + x, map (\\r -> map (\\v -> v * x) r) m)) (0.0, [[1.0, 2.0], [3.0, 4.0]]) xs in\n  s + sum (map (\\r -> sum r) m)\n", "65.0", &[31.0, 21.0]);
    // the example (its comment computes it by hand)
    part_c_by_hand(&example("arrays-fold-matrix-accumulator"), "76.0", &[38.0, 24.0, 6.0, 14.0, 6.0, 6.0]);
    let progs = [
        ("([1.0, 2.0, 3.0], [[0.5, 1.0], [2.0, 0.25]], [0.5, 0.25, 2.0])", "(xs, m, w) = let ss = scanl (\\(s, m, w) x -> (s * x + m ! 1 ! 0, map (\\r -> map (\\v -> v * x + s) r) m, map (\\y -> y + m ! 0 ! 1) w)) (1.0, m, w) xs in sum (map (\\(s, m, w) -> s + sum (map (\\r -> sum r) m) * sum w) ss)"),
        ("([1.0, 2.0], [[0.5, 1.0, 3.0], [2.0, 0.25, 1.0]])", "(xs, m) = let ss = scanr (\\x (m, s) -> (map (\\r -> map (\\v -> sin (v * x) + s) r) m, s * x + m ! 1 ! 2)) (m, 1.0) xs in sum (map (\\(m, s) -> sum (map (\\r -> sum r) m) * s) ss)"),
        ("([[1.0, 2.0], [3.0, 0.5]], [[0.5, 1.0], [2.0, 0.25]])", "(a, m) = sum (map (\\row -> let (s, mm) = fold (\\(s, mm) x -> (s + x * mm ! 0 ! 0, map (\\r -> map (\\v -> v * x + s) r) mm)) (0.0, m) row in s * sum (map (\\r -> sum r) mm)) a)"),
        ("([1.0, 2.0, 3.0], [[0.5, 1.0], [2.0, 0.25]])", "(xs, m) = let (k, mm) = fold (\\(k, mm) x -> (k + 1, map (\\r -> map (\\v -> v * x + real k) r) mm)) (0, m) xs in real k + sum (map (\\r -> sum r) mm)"),
        ("([1.0, 2.0], [[[0.5, 1.0], [2.0, 0.25]], [[1.0, 1.5], [0.5, 3.0]], [[1.0, 2.0], [3.0, 4.0]]])", "(xs, t) = let (s, tt) = fold (\\(s, tt) x -> (s * x, map (\\m -> map (\\r -> map (\\v -> v * x + s) r) m) tt)) (1.0, t) xs in s + sum (map (\\m -> sum (map (\\r -> sum r) m)) tt)"),
        ("([1.0, 2.0], 0.5)", "(xs, y) = let (s, mm) = fold (\\(s, mm) x -> (s * x + y, map (\\r -> map (\\v -> v * x) r) mm)) (0.5, map (\\q -> [q]) []) xs in s + sum (map (\\r -> sum r) mm)"),
        ("([1.0, 2.0], 0.5)", "(xs, y) = let (s, mm) = fold (\\(s, mm) x -> (s * x + y, map (\\r -> map (\\v -> v * x) r) mm)) (0.5, [[], []]) xs in s + sum (map (\\r -> sum r) mm)"),
        // a matrix of no rows in a map: its states stacked (bot's B-scan) keep no inner shape, so the
        // transposes read the missing dimensions as 0 (delta.rs `sizes_value`; was "expected 3 sizes,
        // got (2, 0)" on dual-arrays, part_c_wide seeds 1222, 1367, 1528 and 1763, shrunk)
        ("([1.0, 2.0], 0.5)", "(xs, y) = sum (map (\\a -> let (s, mm) = fold (\\(s, mm) x -> (s * 0.5 + a, map (\\r -> map (\\v -> v) r) mm)) (y, []) xs in s + sum (map (\\r -> sum r) mm)) [y, 2.0])"),
    ];
    for (input, main) in progs {
        part_c_agrees(&format!("input {input}\ndef main {main}\n"));
    }
    // one loop for the tuple: one scanl after bot, one ScanL Delta
    let text = format!("input {}\ndef main {}\n", progs[0].0, progs[0].1);
    let (p, _) = bot(&text);
    assert_eq!(p.matches("scanl").count(), 1, "{p}");
    let r = one(&text, "arrays/dual-arrays");
    assert_eq!(r.program.matches("ScanL").count(), 1, "{}", r.program);
    // a body that changes the rows' length, or the number of rows: a run-time error at the fold
    for (text, lens) in [
        ("input ([1.0, 2.0], [[0.5, 1.0], [2.0, 0.25]])\ndef main (xs, m) = let (s, mm) = fold (\\(s, mm) x -> (s + x, map (\\r -> shift1L r) mm)) (0.0, m) xs in s + sum (map (\\r -> sum r) mm)\n", "length 2 at the start and of length 1"),
        ("input ([1.0, 2.0], [[0.5, 1.0, 3.0], [2.0, 0.25, 1.0]])\ndef main (xs, m) = let (s, mm) = fold (\\(s, mm) x -> (s + x, shift1L mm)) (0.0, m) xs in s + sum (map (\\r -> sum r) mm)\n", "length 2 at the start and of length 1"),
    ] {
        let fold = text.find("fold").unwrap();
        for stage in PART_C {
            let r = one(text, stage);
            let e = r.error.as_deref().unwrap_or_else(|| panic!("{stage}: no error (agrees: {:?})", r.agrees));
            assert!(!r.refused && e.contains(lens) && e.contains("keeps its accumulator's shape"), "{stage}: {e}");
            assert_eq!(r.error_span.map(|s| s.0), Some(fold), "{stage}");
        }
    }
}

/// Elements that are arrays of reals (a fold or scan over a matrix's rows, or over tuples holding a
/// row) beside a tuple accumulator that is no sum (pack.rs): each element's row is more columns of
/// the packed elements after its reals, read back by the body as an array (`build w (\j -> c ! (off + j))`),
/// so a boolean (1.0/0.0, §6.1: no cotangent) or an integer rides beside them as before. Was refused
/// ("a boolean rides in the one loop as a number … over elements that are reals"; without a
/// boolean, "sequential fold or reduce with this body on this component").
#[test]
fn arrays_as_elements_of_a_tuple_fold_reach_share_to_let() {
    // m = [[2, 3], [1, 0.5]] from (0.5, false): row 1 doubles s (1.0) and sets b (2 > 1.5); row 2
    // adds its sum (2.5): ∂/∂m = [[0, 0], [1, 1]]
    part_c_by_hand("input [[2.0, 3.0], [1.0, 0.5]]\ndef main m = fst (fold (\\(s, b) row -> (if b then s + sum row else s * 2.0, row ! 0 > 1.5)) (0.5, false) m)\n", "2.5", &[0.0, 0.0, 1.0, 1.0]);
    // the rows scale s: s = (2 + 3)(1 + 0.5) = 7.5 from (1, 0): ∂/∂m = [[1.5, 1.5], [5, 5]]
    part_c_by_hand("input [[2.0, 3.0], [1.0, 0.5]]\ndef main m = let (s, k) = fold (\\(s, k) row -> (s * sum row, k + 1)) (1.0, 0) m in s + real k\n", "9.5", &[1.5, 1.5, 5.0, 5.0]);
    let progs = [
        ("[[1.0, 3.0], [2.0, 0.5]]", "m = fst (fold (\\(s, b) row -> (if b then s + sum row else s * 2.0, row ! 0 > 1.5)) (0.5, false) m)"),
        ("([[1.0, 3.0], [2.0, 0.5], [0.5, 0.25]], [1.0, 2.0, 3.0])", "(m, xs) = let (s, v) = fold (\\(s, v) (row, x) -> (s * x + sum row, map2 (\\a b -> a * b + x) v row)) (1.0, [1.0, 1.0]) (map2 (\\r x -> (r, x)) m xs) in s + sum v"),
        ("[[1.0, 3.0], [2.0, 0.5], [0.5, 0.25]]", "m = let ss = scanl (\\(s, k) row -> (s * row ! 1 + real k, k + 1)) (1.0, 0) m in sum (map (\\(s, k) -> s) ss)"),
        ("[[[1.0, 3.0], [2.0, 0.5]], [[0.5, 0.25], [1.0, 2.0]]]", "t = let (s, mm) = fold (\\(s, mm) m -> (s + sum (map (\\r -> sum r) m), map2 (\\a b -> map2 (\\x y -> x * y) a b) mm m)) (0.0, [[1.0, 1.0], [1.0, 1.0]]) t in s * sum (map (\\r -> sum r) mm)"),
        ("[[1.0, 3.0], [2.0, 0.5]]", "m = sum (map (\\p -> if snd p then fst p else 0.0) (scanl (\\(s, b) row -> (s * row ! 0 + row ! 1, b || row ! 1 > 1.0)) (1.0, false) m))"),
        ("[[1.0, 3.0], [2.0, 0.5]]", "m = sum (map (\\p -> if fst p then snd p else 1.0) (scanr (\\row (b, s) -> (row ! 0 > s, s * row ! 1 + 1.0)) (true, 0.5) m))"),
        ("([], [1.0])", "(m, w) = fst (fold (\\(s, b) row -> (if b then s + sum row else s * 2.0, row ! 0 > 1.5)) (0.5 + w ! 0, false) (map (\\x -> [x]) m))"),
        ("([[1.0, 3.0], [2.0, 0.5]], [[0.5, 1.5], [1.0, 2.0]])", "(a, m) = sum (map (\\r -> fst (fold (\\(s, b) row -> (if b then s + sum row * r ! 0 else s * r ! 1, row ! 0 > 0.75)) (0.5, false) m)) a)"),
    ];
    for (input, main) in progs {
        part_c_agrees(&format!("input {input}\ndef main {main}\n"));
    }
}

/// A ragged array of arrays read by a packed fold (pack.rs) stops every Part C stage, located at
/// the fold, instead of being padded with zeros: ragged arrays are outside the paper's language
/// (§3.2, "there are no jagged arrays"), and the packed row reads `v ! (q / w) ! (q mod w)`, total
/// (§5.2), so a row shorter than the first was read as zeros. Only the first row's length was
/// checked (`sameLength`); now every row is (`sameShape`, lang.rs). On main each of these ran and
/// disagreed with forward mode (a body's new matrix whose second row is shorter: primal 10, not 9;
/// a ragged initial value; ragged elements, inside a map too), or stopped bot unlocated ("`map2` on
/// arrays of different lengths"). Each ragged array here is a literal, which now stops first, at
/// itself (lower.rs, `a_ragged_array_literal_stops_every_part_c_stage_at_the_literal`); the fold's
/// `sameShape` still checks every row of a computed array.
#[test]
fn a_ragged_array_of_arrays_in_a_packed_fold_stops_every_part_c_stage_at_the_fold() {
    let short = "fold (\\p v -> p * (v + 1.0)) 1.0";
    let progs = [
        // the body's new accumulator: its second row is shorter
        format!("input ([1.0, 2.0], [[0.5, 1.0], [2.0, 0.25]])\ndef main (xs, m) = let (s, mm) = fold (\\(s, mm) x -> (s + x, [mm ! 0, [mm ! 1 ! 0 * x]])) (0.0, m) xs in s + real (length (mm ! 1)) + {short} (mm ! 1)\n"),
        "input ([1.0, 2.0], [[0.5, 1.0], [2.0, 0.25]])\ndef main (xs, m) = let (s, mm) = fold (\\(s, mm) x -> (s + x, [mm ! 0, [mm ! 1 ! 0 * x]])) (0.0, m) xs in (s, mm)\n".to_string(),
        // a scan's, a row of rank 3
        "input ([1.0, 2.0], [[[0.5, 1.0], [2.0, 0.25]]])\ndef main (xs, t) = let ss = scanl (\\(s, tt) x -> (s + x, [[tt ! 0 ! 0, [tt ! 0 ! 1 ! 0 * x]]])) (0.0, t) xs in sum (map (\\(s, tt) -> s + real (length (tt ! 0 ! 1))) ss)\n".to_string(),
        // a ragged initial value
        format!("input [1.0, 2.0]\ndef main xs = let (s, m) = fold (\\(s, m) x -> (s + x, map (\\r -> map (\\v -> v * x) r) m)) (0.0, [[xs ! 0, 2.0], [xs ! 1]]) xs in s + real (length (m ! 1)) + {short} (m ! 1)\n"),
        // ragged elements (a fold over a matrix's rows), outside and inside a map
        format!("input [1.0, 2.0]\ndef main xs = let (s, k) = fold (\\(s, k) row -> (s * {short} row + real (length row), k + 1)) (1.0, 0) [[xs ! 0], [xs ! 1, 3.0]] in s + real k\n"),
        "input [1.0, 2.0]\ndef main xs = map (\\y -> let (s, k) = fold (\\(s, k) row -> (s * fold (\\p v -> p * (v + y)) 1.0 row + real (length row), k + 1)) (1.0, 0) [[xs ! 0], [xs ! 1, 3.0]] in s + real k) xs\n".to_string(),
    ];
    for text in &progs {
        // a ragged literal stops at itself (lower.rs), before the fold reads it
        let fold = ["[mm ! 0, [", "[tt ! 0 ! 0, [", "[[xs ! "].iter().find_map(|l| text.find(l)).or_else(|| text.find("fold")).or_else(|| text.find("scanl")).unwrap();
        for (stage, r) in PART_C.iter().zip(run(text, &PART_C)) {
            let e = r.error.as_deref().unwrap_or_else(|| panic!("{stage}: no error (agrees: {:?}, primal {})\n{text}", r.agrees, r.primal));
            assert!(!r.refused && e.contains("not regular") && e.contains("rows of lengths"), "{stage}: {e}\n{text}");
            assert_eq!(r.error_span.map(|s| s.0), Some(fold), "{stage}: {e}\n{text}");
        }
    }
    // the same programs with regular rows agree (every row checked, none refused)
    part_c_agrees("input ([1.0, 2.0], [[0.5, 1.0], [2.0, 0.25]])\ndef main (xs, m) = let (s, mm) = fold (\\(s, mm) x -> (s + x, [mm ! 0, [mm ! 1 ! 0 * x, mm ! 1 ! 1]])) (0.0, m) xs in s + real (length (mm ! 1)) + fold (\\p v -> p * (v + 1.0)) 1.0 (mm ! 1)\n");
    part_c_agrees("input [1.0, 2.0]\ndef main xs = map (\\y -> let (s, k) = fold (\\(s, k) row -> (s * fold (\\p v -> p * (v + y)) 1.0 row + real (length row), k + 1)) (1.0, 0) [[xs ! 0, 1.0], [xs ! 1, 3.0]] in s + real k) xs\n");
}

/// An array of booleans (any rank) as a fold or scan's accumulator component, or the whole
/// accumulator (pack.rs `encode_bools`, soa.rs): an array of numbers, 1.0 for true, elementwise,
/// packed with the reals as any array of reals (Fig. 8's arrays hold Bool; D[Array sh Bool] =
/// Array sh Bool, §6.1: its Delta is zero), read back as `> 0.5`. Was refused ("a component of type
/// Array Bool … none of them"; a lone `Array Bool` accumulator, "no sequential fold or scan with this
/// function"). Arrays of integers: `arrays_of_integers_in_a_fold_accumulator_reach_share_to_let`.
#[test]
fn arrays_of_booleans_in_a_fold_accumulator_reach_share_to_let() {
    // s: 1 + 2 = 3 (bs ! 0 false), 3 · 1.5 = 4.5, 4.5 + 4 = 8.5; bs ends [true, false]: 0.5 s = 4.25,
    // ∂/∂x = 0.5 (x1, 1 + x0, 1)
    part_c_by_hand("input [2.0, 1.5, 4.0]\ndef main xs = let (s, bs) = fold (\\(s, bs) x -> (if bs ! 0 then s * x else s + x, [x > 1.8, bs ! 0])) (1.0, [false, true]) xs in if bs ! 1 then s else 0.5 * s\n", "4.25", &[0.75, 1.5, 0.5]);
    // a lone array of booleans scanned: states [f,t], [t,f], [f,t], [t,f] pick sum xs, 1, sum xs, 1
    // (x0 / 2 each): 7.5 + 1 + 7.5 + 1 = 17, ∂/∂x = (2 + 2 · 0.5, 2, 2)
    part_c_by_hand("input [2.0, 1.5, 4.0]\ndef main xs = sum (map (\\bs -> if bs ! 1 then sum xs else 0.5 * xs ! 0) (scanl (\\bs x -> [x > 1.8, bs ! 0]) [false, true] xs))\n", "17.0", &[3.0, 2.0, 2.0]);
    let xs = "[2.0, 1.5, 4.0]";
    let progs = [
        (xs, "xs = let ss = scanl (\\(s, bs) x -> (if bs ! 1 then s * x else s + x, map (\\b -> not b) bs)) (1.0, [false, true]) xs in sum (map (\\(s, bs) -> if bs ! 0 then s else 2.0 * s) ss)"),
        (xs, "xs = let ss = scanr (\\x (bs, s) -> (map (\\b -> b || x > 3.0) bs, if bs ! 0 then s * x else s + x)) ([false, true], 1.0) xs in sum (map (\\(bs, s) -> if bs ! 1 then s else 2.0 * s) ss)"),
        (xs, "xs = let (s, m) = fold (\\(s, m) x -> (if m ! 1 ! 0 then s * x else s + x, map (\\r -> map (\\b -> b || x > 3.0) r) m)) (1.0, [[false, true], [true, false]]) xs in if m ! 0 ! 0 then s else 0.5 * s"),
        (xs, "xs = let (s, n, bs) = fold (\\(s, n, bs) x -> (if bs ! 0 then s * x else s + real n, n + 1, [x > 1.8, bs ! 0])) (1.0, 0, [false, true]) xs in if bs ! 1 then s else 0.5 * s"),
        (xs, "xs = let (s, v, bs) = fold (\\(s, v, bs) x -> (s * x + v ! 1, map (\\y -> if bs ! 0 then y * x else y) v, [x > s, bs ! 0])) (1.0, [0.5, 0.25], [true, false]) xs in s + sum v"),
        (xs, "xs = let bs = fold (\\bs x -> [x > 1.8, bs ! 0]) [false, true] xs in if bs ! 1 then sum xs else 0.5 * xs ! 2"),
        (xs, "xs = let (s, bs) = fold (\\(s, bs) x -> (s * x, map (\\b -> not b) bs)) (1.0, []) xs in s"),
        ("[[2.0, 1.5], [4.0, 0.5]]", "m = map (\\row -> let (s, bs) = fold (\\(s, bs) x -> (if bs ! 0 then s * x else s + x, [x > 1.8, bs ! 0])) (1.0, [false, true]) row in if bs ! 1 then s else 0.5 * s) m"),
    ];
    for (input, main) in progs {
        part_c_agrees(&format!("input {input}\ndef main {main}\n"));
    }
    // one loop: one scanl after bot, one ScanL Delta
    let text = format!("input {xs}\ndef main {}\n", progs[4].1);
    let (p, _) = bot(&text);
    assert_eq!(p.matches("scanl").count(), 1, "{p}");
    let r = one(&text, "arrays/dual-arrays");
    assert_eq!(r.program.matches("ScanL").count(), 1, "{}", r.program);
    // an array of integers (was refused): `arrays_of_integers_in_a_fold_accumulator_reach_share_to_let`
}

/// An array of integers (any rank) as a fold or scan's accumulator component (pack.rs `int_fold`):
/// more columns of the integers' loop row after its scalars, as the reals' loop packs arrays of
/// reals (`packed_row`, its shape fixed by its initial value and checked each step); primal only,
/// as an integer is (Fig. 8's arrays hold Int, D′ keeps them, §6.2), and the reals read it through
/// columns of the integers' states (`lift_int_reads`). Was refused ("an array of integers carries no
/// cotangent … cannot ride in the reals' row"). Every Part C stage agrees, and by hand:
#[test]
fn arrays_of_integers_in_a_fold_accumulator_reach_share_to_let() {
    let xs = "[2.0, 1.5, 4.0]";
    // s: 1·2 + 0 = 2 (ks [1, 1]), 2·1.5 + 1 = 4 (ks [1, 2]), 4·4 + 1 = 17 (ks [2, 2]):
    // s = x0 x1 x2 + x2 + 1, ∂/∂x = (x1 x2, x0 x2, x0 x1 + 1) = (6, 8, 4)
    let text = format!("input {xs}\ndef main xs = let (s, ks) = fold (\\(s, ks) x -> (s * x + real (ks ! 0), [ks ! 1, ks ! 0 + 1])) (1.0, [0, 1]) xs in s + real (ks ! 1)\n");
    part_c_by_hand(&text, "19.0", &[6.0, 8.0, 4.0]);
    // a matrix of integers doubled each step: s = ((x0 + 3) x1 + 6) x2 + 12 = 66, m ! 0 ! 1 = 16;
    // ∂/∂x = (x1 x2, (x0 + 3) x2, (x0 + 3) x1 + 6) = (6, 20, 13.5)
    part_c_by_hand(&format!("input {xs}\ndef main xs = let (s, m) = fold (\\(s, m) x -> (s * x + real (m ! 1 ! 0), map (\\r -> map (\\k -> k * 2) r) m)) (1.0, [[1, 2], [3, 4]]) xs in s + real (m ! 0 ! 1)\n"), "82.0", &[6.0, 20.0, 13.5]);
    let progs = [
        "let (s, n, ks) = fold (\\(s, n, ks) x -> (s * x + real n, n + 1, [ks ! 1, ks ! 0 + 1])) (1.0, 0, [0, 1]) xs in s",
        "let ss = scanl (\\(s, ks) x -> (if ks ! 0 > 0 then s * x else s + x, map (\\k -> k + 1) ks)) (1.0, [0, 2]) xs in sum (map (\\(s, ks) -> s * real (ks ! 1)) ss)",
        "let ss = scanr (\\x (ks, s) -> (map (\\k -> k + 1) ks, s * x + real (ks ! 1))) ([0, 2], 1.0) xs in sum (map (\\(ks, s) -> s) ss)",
        "let (s, ks) = fold (\\(s, ks) x -> (s * x, if x > s then map (\\k -> k + 1) ks else ks)) (1.0, [0, 2]) xs in s * real (ks ! 0)",
    ];
    for main in progs {
        part_c_agrees(&format!("input {xs}\ndef main xs = {main}\n"));
    }
    // a body that changes its length stops every Part C stage, located at the fold
    let text = format!("input {xs}\ndef main xs = let (s, ks) = fold (\\(s, ks) x -> (s * x, [ks ! 0])) (1.0, [0, 1]) xs in s + real (length ks)\n");
    for (stage, r) in PART_C.iter().zip(run(&text, &PART_C)) {
        let e = r.error.as_deref().unwrap_or_else(|| panic!("{stage}: no error (agrees: {:?})", r.agrees));
        assert!(!r.refused && e.contains("keeps its accumulator's shape"), "{stage}: {e}");
        assert_eq!(r.error_span.map(|s| s.0), text.find("fold"), "{stage}: {e}");
    }
}

/// A ragged array-of-arrays literal built in the program (not main's input) stops every Part C
/// stage with a located run-time error at the literal (lower.rs: `sameShape [] rows`, checked where
/// the rows are not all literals of one shape): the paper's arrays are regular (§3.2, "there are no
/// jagged arrays"). On main the mapped ones ran and agreed only by chance (bot's gathers read each
/// row at its own length here, but `tr` and the Delta's adds read the first row's), and a literal
/// read by index stopped the symbolic stages unlocated ("cannot add [1.0, 0.0] and [1.0]: shapes
/// differ"); bot and dual-arrays took it.
#[test]
fn a_ragged_array_literal_stops_every_part_c_stage_at_the_literal() {
    let progs = [
        // mapped, mapped twice, indexed in a map
        ("1.0", "x = sum (map (\\r -> sum (map (\\y -> y * x) r)) [[x, 2.0], [3.0]])", "[["),
        ("1.0", "x = sum (map (\\r -> sum r) (map (\\r -> map (\\y -> y * x) r) [[x, 2.0], [3.0]]))", "[["),
        ("1.0", "x = sum (map (\\r -> r ! 0 * x) [[x, 2.0], [3.0]])", "[["),
        // let-bound and read by index and by a map (its cotangents added: dual-arrays' add)
        ("1.0", "x = let m = [[x, 2.0], [3.0]] in sum (map (\\r -> r ! 0) m) + sum (m ! 1)", "[["),
        // a row from the input, its length known only at run time
        ("[1.0, 2.0]", "v = let m = [v, [3.0]] in sum (map (\\r -> r ! 0) m) + sum (m ! 1)", "[v"),
        // folded over (a fold over a matrix's rows) and of rank 3
        ("[1.0, 2.0]", "v = fold (\\acc r -> acc * (r ! 0) + sum r) 1.0 [v, [3.0]]", "[v"),
        ("1.0", "x = sum (map (\\m -> sum (map (\\r -> sum r) m)) [[[x, 1.0], [2.0, x]], [[x], [1.0, 2.0]]])", "[[x], "),
        ("[1.0, 2.0]", "v = sum (map (\\m -> sum (map (\\r -> sum r) m)) [[v, [2.0, 1.0]], [v]])", "[[v, ["),
    ];
    for (input, main, lit) in progs {
        let text = format!("input {input}\ndef main {main}\n");
        let at = text.find(lit).unwrap();
        for (stage, r) in PART_C.iter().zip(run(&text, &PART_C)) {
            let e = r.error.as_deref().unwrap_or_else(|| panic!("{stage}: no error (agrees: {:?}, primal {})\n{text}", r.agrees, r.primal));
            assert!(!r.refused && e.contains("array literal is not regular") && e.contains("rows of lengths"), "{stage}: {e}\n{text}");
            assert_eq!(r.error_span.map(|s| s.0), Some(at), "{stage}: {e}\n{text}");
        }
    }
    // inside a map, the literal's rows lifted by bot: stopped located at the map, by bot's `tr`
    let text = "input [1.0, 2.0]\ndef main v = sum (map (\\x -> sum (map (\\r -> r ! 0 * x) [map (\\y -> y * x) v, [x]])) v)\n";
    for (stage, r) in PART_C.iter().zip(run(text, &PART_C)) {
        let e = r.error.as_deref().unwrap_or_else(|| panic!("{stage}: no error (agrees: {:?})", r.agrees));
        assert!(e.contains("not regular"), "{stage}: {e}");
        assert!(r.error_span.is_some_and(|(s, e)| s < e && e <= text.len()), "{stage}: {e}");
    }
    // regular ones agree: literal rows of one shape, rows known only at run time
    part_c_agrees("input [1.0, 2.0]\ndef main v = sum (map (\\x -> sum (map (\\r -> r ! 1 * x) [map (\\y -> y * x) v, [x, 3.0]])) v)\n");
    part_c_agrees("input [1.0, 2.0]\ndef main v = fold (\\acc r -> acc * (r ! 0) + r ! 1) 1.0 [v, [3.0, 4.0], v]\n");
    part_c_agrees("input 1.0\ndef main x = let m = [[x, 2.0], [3.0, x]] in sum (map (\\r -> r ! 0) m) + sum (m ! 1)\n");
}

/// A real component of a fold or scan's tuple accumulator that reads an integer component other
/// than as `real m` (pack.rs `lift_int_reads`): each largest real or boolean term of the integers
/// alone (`xs ! k`, `k > 0`, `real (k * k)`, a let of them) is a column of its values per element,
/// computed from the integers' states before the reals' loop (the integers carry no cotangent: the
/// column is primal, its Delta zero), as `real m` was. Each was refused ("uses an integer component
/// other than as `real m`"). Every Part C stage agrees with forward mode, and by hand:
#[test]
fn integer_terms_read_by_the_reals_of_a_fold_are_columns_of_the_integers_states() {
    // p: 1·a0 + 1 = 2, 2·a1 + 2 = 6, 6·a2 + 3 = 21, k = 3: 24; p = 2 a0 a1 a2 + a1 a2 + a2:
    // ∂/∂a = (2 a1 a2, 2 a0 a2 + a2, 2 a0 a1 + a1 + 1) = (12, 9, 7)
    part_c_by_hand("input [1.0, 2.0, 3.0]\ndef main a = let (p, k) = fold (\\(p, k) x -> (p * a ! k + x, k + 1)) (1.0, 0) a in p + real k\n", "24.0", &[12.0, 9.0, 7.0]);
    // p: k = 0 keeps 0.5, then 0.5 · a1 = 1, 1 · a2 = 3; ∂/∂a = (0, 0.5 a2, 0.5 a1) = (0, 1.5, 1)
    part_c_by_hand("input [1.0, 2.0, 3.0]\ndef main a = fst (fold (\\(p, k) x -> (if k > 0 then p * x else p, k + 1)) (0.5, 0) a)\n", "3.0", &[0.0, 1.5, 1.0]);
    // p: 1·1 + 0 = 1, 1·2 + 1 = 3, 3·3 + 4 = 13; ∂/∂a = (a1 a2, a0 a2, a0 a1 + 1) = (6, 3, 3)
    part_c_by_hand("input [1.0, 2.0, 3.0]\ndef main a = let (p, k) = fold (\\(p, k) x -> (p * x + real (k * k), k + 1)) (1.0, 0) a in p\n", "13.0", &[6.0, 3.0, 3.0]);
    let progs = [
        // a scanr, a let of the integers' term, an index by the integer
        "sum (map (\\(p, k) -> p) (scanr (\\x (p, k) -> (let t = if k > 1 then x else 1.0 in p * t + a ! k, k + 1)) (0.5, 0) a))",
        // a scanl beside an array component, the integer stepping by a condition of the element
        "let ss = scanl (\\(p, v, k) x -> (p * x + a ! k, map (\\y -> if k > 0 then y * x else y) v, if x > 1.5 then k + 1 else k)) (1.0, [0.5, 2.0], 0) a in sum (map (\\(p, v, k) -> p + sum v) ss)",
        // inside a map
        "map (\\y -> fst (fold (\\(p, k) x -> (if k > 0 then p * x + y else p, k + 1)) (y, 0) a)) a",
    ];
    for main in progs {
        part_c_agrees(&format!("input [1.0, 2.0, 3.0]\ndef main a = {main}\n"));
    }
}

/// A fold with a masked size inside a map (int_reads.rs `masked_sizes`: `sum (build k f)` with k an
/// integer component, a build of the largest size over the fold's states, masked past k) had its
/// largest size per row, and bot refused `iota (top ! i ! 0)` (§5, Static shapes; Part C seeds 1606
/// and 1690). Rule P0 pads it to the largest over the whole map (`padSize`), a size free of the row:
/// here row 0's sizes are 0, 1 and row 1's 2, 3, so the build is 3 long in both rows (row 0's size 1
/// would drop row 1's terms). By hand, a = x + k0·x·y0 + (k0 + 1)·x·y1 per row: 2.5 + 13 = 15.5,
/// ∂/∂x = 1 + k0·y0 + (k0 + 1)·y1 = [2.5, 6.5], ∂/∂y = [Σ k0·x, Σ (k0 + 1)·x] = [4, 7].
#[test]
fn a_masked_size_in_a_map_is_padded_to_its_largest_over_the_rows() {
    let text = "input ([1.0, 2.0], [0, 2], [0.5, 1.5])\n\
                def main (xs, ks, ys) = sum (map2 (\\x k0 -> let (a, k) = fold (\\(a, k) y -> (a + sum (build k (\\b -> x * y)), k + 1)) (x, k0) ys in a) xs ks)\n\
                expect primal 15.5\n";
    let (p, trace) = bot(text);
    fired(&trace, &["P0 padded size"]);
    assert!(p.contains("padSize") && !p.contains("build"), "{p}");
    for (stage, r) in PART_C.iter().zip(run(text, &PART_C)) {
        assert_eq!(r.error, None, "{stage}");
        assert_eq!(r.agrees, Some(true), "{stage}");
        assert_eq!(r.primal, "15.5", "{stage}");
        assert_eq!(r.gradient, [2.5, 6.5, 4.0, 7.0], "{stage}");
    }
    // the seeds' form: the size a `mod` of the integer, in a map over a literal
    part_c_agrees(
        "input (0.935, 1.025)\n\
         def main (x0, x1) = sum (map (\\x3 -> let (a, k) = fold (\\(a, k) y -> (a * 0.5 + y + 0.25 * sum (build (k mod 3) (\\b -> a * y)), k + 1)) (x3, 0) [x1, x0, x1, x0] in a + real k) [x1, x0 * x1, 0.5])\n",
    );
}

/// An output that drops every row of an input (`shift1R` of a one-row build) sends back a cotangent
/// of no rows, from which the reverse pass's `scatter` and `sumOuter` cannot know a row's length:
/// the input's gradient came back as the scalar 0.0 on symbolic, symbolic-share and share-to-let
/// (DISAGREES: forward gives [0.0, 0.0, 0.0, 0.0]; wide-run seeds 3442, 3483 and 4874, shrunk). The
/// wrapper gives such an input the zeros of its shape, as it does an empty array's lost dimensions.
#[test]
fn an_input_no_cotangent_reaches_gets_zeros_of_its_shape() {
    let texts = [
        "input ([-0.565, -0.005, -0.545, 1.2], [1.48, 1.21, 0.775], -0.215)\ndef main (vec0, vec1, x2) = shift1R (build 1 (\\i2 -> vec0))\n",
        "input ([1.265, 1.205, 0.785, 0.145], [[0.305]])\ndef main (vec0, mat1) = shift1R (shift1R [vec0, vec0])\n",
    ];
    for text in texts {
        part_c_agrees(text);
        let r = one(text, "arrays/share-to-let");
        assert!(r.gradient.iter().all(|g| *g == 0.0), "{}", r.program);
    }
    let r = one(texts[0], "arrays/symbolic");
    assert_eq!(r.gradient.len(), 8, "{}", r.program);
}

/// A `replicate` of no rows whose cotangent lost its shape (the scalar zero of unknown shape,
/// runtime.rs): dual-arrays' reverse pass stopped with "Replicate's cotangent is not an array"
/// (wide-run seed 4597, shrunk: a fold whose accumulator is a map over no rows, `reduce`d from
/// `replicate 0 0.0`). There are no rows to sum: the cotangent is zero, and every stage agrees.
#[test]
fn a_replicate_of_no_rows_takes_the_zero_of_unknown_shape_as_its_cotangent() {
    let text = "input 0.5\ndef main x0 = x0 + sum (fold (\\acc x -> reduce (\\u w -> map2 (\\p q -> p + q) u w) (replicate 0 0.0) (shift1L [acc])) (map (\\r -> x0) []) [x0, x0, x0])\n";
    part_c_agrees(text);
    assert_eq!(one(text, "arrays/dual-arrays").gradient, vec![1.0]);
}

/// The two reading each other where an integer's step has no real term (`i / 2`, `i mod 3`, an
/// index at `i / 2 + 1`, a test `sin (real i) + x > s`, a let `j = i / 2` read by both): the integer
/// rides in the reals' row as a real copy, and the step is computed on integers, the copy brought
/// back by §2's `round : R → Z` (int_reads.rs `rounded`: `real (exactInt (round i′) / 2)`), exact
/// within 2^53. Each was refused on the base (`cot-s30base`: "an integer's step with no form in
/// reals … the language has no conversion from a real back to an integer"). Negative operands
/// truncate as the source's `/` and `mod` do (a floor would give other states and primals). Every
/// Part C stage agrees with forward mode, and by hand:
#[test]
fn div_and_mod_in_a_step_read_by_the_reals_are_made_on_the_rounded_copies() {
    // x = (a, b, c) = (0.5, 3, 2), i0 = 1: i = 1 / 2 = 0 (a < s0), 3, 3 / 2 = 1;
    // s1 = a + 1, s2 = s1 b, s3 = s2 c + 3 = 12: ∂ = (bc, (a + 1)c, (a + 1)b) = (6, 3, 4.5)
    part_c_by_hand("input [0.5, 3.0, 2.0]\ndef main xs = fold (\\(s, i) x -> (s * x + real i, if x > s then i + 3 else i / 2)) (1.0, 1) xs\n", "(12.0, 1)", &[6.0, 3.0, 4.5]);
    // x = (2, 0.5, 3): i = -5, -5 mod 3 = -2 (truncating; a floor's would be 1), -7;
    // s3 = (ab - 5)c - 2 = -14: ∂ = (bc, ac, ab - 5) = (1.5, 6, -4)
    part_c_by_hand("input [2.0, 0.5, 3.0]\ndef main xs = fold (\\(s, i) x -> (s * x + real i, if x > s then i - 5 else i mod 3)) (1.0, 0) xs\n", "(-14.0, -7)", &[1.5, 6.0, -4.0]);
    // the same with -5 / 3 = -1 (a floor's would be -2): s3 = (ab - 5)c - 1 = -13, i3 = -6
    part_c_by_hand("input [2.0, 0.5, 3.0]\ndef main xs = fold (\\(s, i) x -> (s * x + real i, if x > s then i - 5 else i / 3)) (1.0, 0) xs\n", "(-13.0, -6)", &[1.5, 6.0, -4.0]);
    // an index at i / 2 + 1: i = ks ! 2 = 1 (a > s0), 1, 1; s3 = ((a + 2)b + 1)c + 1 = 7.5:
    // ∂ = (bc, (a + 2)c, (a + 2)b + 1) = (1.5, 2, 13)
    part_c_by_hand("input ([2.0, 3.0, 0.5], [2, 0, 1, 3])\ndef main (xs, ks) = fold (\\(s, i) x -> (s * x + real i, if x > s then ks ! (i / 2 + 1) else i)) (1.0, 2) xs\n", "(7.5, 1)", &[1.5, 2.0, 13.0]);
    // a let j = i / 2 read by the real and the step: j = 0, 0, 1; i = 1, 3, 4; s3 = abc + 1 = 4:
    // ∂ = (bc, ac, ab) = (6, 1, 1.5)
    part_c_by_hand("input [0.5, 3.0, 2.0]\ndef main xs = fold (\\(s, i) x -> let j = i / 2 in (s * x + real j, if x > s then j + 3 else i + 1)) (1.0, 0) xs\n", "(4.0, 4)", &[6.0, 1.0, 1.5]);
    // a test of sin (real i): i = 3, 4, 2; s3 = ((a + 2)b + 3)c + 4 = 25: ∂ = (6, 5, 10.5)
    part_c_by_hand("input [0.5, 3.0, 2.0]\ndef main xs = fold (\\(s, i) x -> (s * x + real i, if sin (real i) + x > s then i + 1 else i / 2)) (1.0, 2) xs\n", "(25.0, 2)", &[6.0, 5.0, 10.5]);
    let progs = [
        // a scanl, a scanr, inside a map, a mod read by the real
        "sum (map (\\(s, k) -> s) (scanl (\\(s, k) x -> (s * x + real k, if x > s then k + 3 else k / 2)) (1.0, 1) xs))",
        "sum (map (\\(k, s) -> s) (scanr (\\x (k, s) -> (if x > s then k - 2 else k mod 3, s * x + real (k mod 2))) (1, 1.0) xs))",
        "sum (map (\\y -> fst (fold (\\(s, k) x -> (s * x + real (k / 2) * y, if x * y > s then k + 3 else k mod 2)) (1.0, 1) xs)) xs)",
    ];
    for main in progs {
        part_c_agrees(&format!("input [1.5, 3.0, 0.5]\ndef main xs = {main}\n"));
    }
    // past 2^53 the copy may have rounded: stopped at run time, located at the fold (the source,
    // in i64, goes on: 1, 1000004, ≈10^12, ≈10^18, then ≈10^18 mod 7 read)
    let text = "input [5.0, 5.0, 5.0, 5.0, 0.0]\ndef main xs = fold (\\(s, i) x -> (s * 0.5 + real (i mod 7), if x > s then i * 1000003 + 1 else i / 2)) (1.0, 1) xs\n";
    for (stage, r) in PART_C.iter().zip(run(text, &PART_C)) {
        assert!(r.error.as_deref().unwrap_or("").contains("past 2^53"), "{stage}: {r:?}");
        let (start, end) = r.error_span.unwrap_or_else(|| panic!("no span: {r:?}"));
        assert!(text[start..end].starts_with("fold"), "{:?}", &text[start..end]);
    }
    // one step fewer: no copy past 2^53 is brought back, and every stage agrees
    part_c_agrees("input [5.0, 5.0, 5.0, 5.0]\ndef main xs = fold (\\(s, i) x -> (s * 0.5 + real (i mod 7), if x > s then i * 1000003 + 1 else i / 2)) (1.0, 1) xs\n");
}

/// A real component reading an integer one (which does not read the reals) inside a term that also
/// reads a real one or a binder, in a form with no column of the integers' states: `v ! ((j + k)
/// mod 3)` under a build of the array component's length (not a fixed size: no table), an inner
/// fold over `build k f` (its length changes from step to step: a loop's body, not a build1's, so
/// §5's static shapes do not exclude it). Each was refused on the base ("… in a form with no real
/// term here … no conversion from a real back to an integer"); now the integer rides in the reals'
/// row as a real copy, `round`ed back (pack.rs `shadowed`). The same fold inside a map is a build1
/// whose body's shape reads its index: refused by bot, citing §5's "Static shapes". By hand:
#[test]
fn integer_reads_with_no_column_ride_as_rounded_copies() {
    // v_i = v0 · x_0 .. x_(i-1), v0 = [0.5, 2, 1], reads at (j + k) mod 3 for j < 2: s1 = a + 2.5,
    // s2 = s1 b + 3a, s3 = s2 c + 1.5ab = 31.5: ∂ = (bc + 3c + 1.5b, (a + 2.5)c + 1.5a, (a + 2.5)b + 3a)
    part_c_by_hand("input [1.0, 3.0, 2.0]\ndef main xs = let (s, v, k) = fold (\\(s, v, k) x -> (s * x + sum (build (length v - 1) (\\j -> v ! ((j + k) mod 3))), map (\\y -> y * x) v, k + 1)) (1.0, [0.5, 2.0, 1.0], 0) xs in s\n", "31.5", &[16.5, 8.5, 13.5]);
    // an inner fold over build k: k = 1, 2, 3 sums 0, 1, 3 times s: s1 = a, s2 = s1 (b + 1),
    // s3 = s2 (c + 3) = 10: ∂ = ((b + 1)(c + 3), a (c + 3), a (b + 1)) = (20, 2.5, 2)
    let fold = "fst (fold (\\(s, k) x -> (s * x + fold (\\a y -> a + y * s) 0.0 (build k (\\j -> real j)), k + 1)) (1.0, 1) xs)";
    part_c_by_hand(&format!("input [0.5, 3.0, 2.0]\ndef main xs = {fold}\n"), "10.0", &[20.0, 2.5, 2.0]);
    let text = "input [0.5, 3.0, 2.0]\ndef main xs = sum (map (\\z -> fst (fold (\\(s, k) x -> (s * x + fold (\\a y -> a + y * s) 0.0 (build k (\\j -> real j)), k + 1)) (z, 1) xs)) xs)\n";
    let r = one(text, "arrays/bot");
    assert!(r.refused && r.error.as_deref().unwrap_or("").contains("Static shapes"), "{r:?}");
}

/// A fold with a masked size (`build (k mod 3) f`, pack.rs `masked_sizes`) inside two maps: bot's
/// P0 pads the inner build1's `padSize u` to its largest over that build1 (`let s = scanl (λm c. [max
/// (index m 0) c]) ..`), which reads the outer build1's index, and pads it again there; it did not,
/// the padded size's own binders (`s`, `m`, `c`) taken for variables of the body ("bot does not take
/// a build1 whose body builds an array of a size that depends on its index": wide-run seed 2202,
/// shrunk). Per row r: s = 0.5 y (0.5 + r1) for each y in r, sum 0.5 (r0 + r1)(0.5 + r1): 7 + 1.25;
/// ∂r0 = 0.5 (0.5 + r1), ∂r1 = ∂r0 + 0.5 (r0 + r1).
#[test]
fn a_padded_size_inside_two_maps_is_padded_again_in_the_outer_build1() {
    part_c_by_hand("input [[1.0, 3.0], [2.0, 0.5]]\ndef main m = sum (map (\\row -> sum (map (\\y -> fst (fold (\\(s, k) x -> (s * 0.5 + sum (build (k mod 3) (\\j -> s * x)), k + 1)) (y, 0) row)) row)) m)\n", "8.25", &[1.75, 3.75, 0.5, 1.75]);
}

/// Issue 14 item 4: dual-arrays' graph draws at most 2,000 nodes and counts the rest, as the other
/// stages' graphs do; it drew every reachable node, each with its label (~2.7 KB a line of a long
/// straight program, the larger part of a run's memory there).
#[test]
fn dual_arrays_draws_a_large_graph_cut_and_counts_the_rest() {
    let chain = |n: usize| {
        let mut t = String::from("input 1.5\ndef main x =\n  let v0 = x * 1.01 + 0.5 in\n");
        for i in 1..n {
            t.push_str(&format!("  let v{i} = v{} * 1.01 + 0.5 in\n", i - 1));
        }
        t + &format!("  v{}\n", n - 1)
    };
    let graph = |n: usize| {
        let text = chain(n);
        run_with_stack(move || {
            let a = analyse(&text, &Options { stages: vec!["arrays/dual-arrays".into()], ..Options::default() }).map_err(|d| format!("{d:?}"))?;
            let r = a.stages.into_iter().next().ok_or("no stage")?;
            assert_eq!(r.agrees, Some(true), "{:?}", r.error);
            r.graph.ok_or_else(|| "no graph".to_string())
        })
        .unwrap_or_else(|d| panic!("{d}"))
    };
    // per line: a Share of an Add of two Scales (one of a Zero), and a Share of an Add with a Zero
    let small = graph(10);
    assert_eq!((small.nodes.len(), small.omitted), (81, 0));
    let large = graph(600);
    assert_eq!((large.nodes.len(), large.omitted), (2000, 8 * 600 + 1 - 2000));
    let ids: std::collections::HashSet<u64> = large.nodes.iter().map(|n| n.id).collect();
    assert!(large.edges.iter().all(|e| ids.contains(&e.from) && ids.contains(&e.to)));
    assert!(large.edges.len() >= 1900, "{}", large.edges.len());
}
