//! The benchmark's program families: source text at size n, and the peers' four programs.

use std::fmt::Write;

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

impl Family {
    /// The sizes run when `--sizes` is not given: modest, so that the default `bench` finishes in
    /// minutes (issue 13: at 10^5 every family on every stage was killed for memory).
    pub fn default_sizes(&self) -> Vec<usize> {
        match self.name {
            "particle" | "horner" => vec![100, 1_000, 10_000],
            "peer-doubling" => vec![40],
            "quaternion" => vec![1],
            "p1" => vec![5, 10, 15],
            "e11" => vec![5, 10],
            "ho" => vec![8, 16],
            // at 1,000 lines some array-chain transforms (untimed, so not under the run's limits)
            // take more than 6 GB on the let-chain families (issue 14)
            _ => vec![100],
        }
    }
    /// Primal operations at size n as the peers count them (bench/peers/README.md), for ns per op;
    /// `None` for the other families, whose count is the source's `real_ops`.
    pub fn peer_ops(&self, n: usize) -> Option<u64> {
        let n = n as u64;
        match self.name {
            "particle" => Some(7 * n + 2),
            "horner" => Some(2 * n),
            "peer-doubling" => Some(n + 1),
            "quaternion" => Some(22),
            _ => None,
        }
    }
    /// Whether n is meaningless for this family (it is run once, at n = 1).
    pub fn fixed(&self) -> bool {
        self.name == "quaternion"
    }
}

/// The families `--family peers` stands for: the peer AD tools' own scalar programs.
pub const PEERS: [&str; 4] = ["particle", "horner", "peer-doubling", "quaternion"];

const PARTICLE: &str = include_str!("../../../bench/peers/particle.cot");
const HORNER: &str = include_str!("../../../bench/peers/horner.cot");
const PEER_DOUBLING: &str = include_str!("../../../bench/peers/doubling.cot");
const QUATERNION: &str = include_str!("../../../bench/peers/quaternion.cot");

/// A peer program with its `param n` line set to n.
fn with_n(text: &str, n: usize) -> String {
    text.lines()
        .map(|l| if l.starts_with("param n =") { format!("param n = {n}") } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn particle(n: usize) -> String {
    with_n(PARTICLE, n)
}
fn horner(n: usize) -> String {
    with_n(HORNER, n)
}
fn peer_doubling(n: usize) -> String {
    with_n(PEER_DOUBLING, n)
}
fn quaternion(_: usize) -> String {
    QUATERNION.to_string()
}

pub fn families() -> Vec<Family> {
    vec![
        Family {
            name: "particle",
            what: "peers: n explicit-Euler steps of a particle, 7n + 2 ops (bench/peers/particle.cot)",
            make: particle,
            max: MAX_SIZE as usize,
        },
        Family {
            name: "horner",
            what: "peers: Horner's rule over n coefficients 1/(i+1), 2n ops as the peers count (bench/peers/horner.cot)",
            make: horner,
            max: MAX_SIZE as usize,
        },
        Family {
            name: "peer-doubling",
            what: "peers: c = x; c = c + c n times; c * x, n + 1 ops, recursive (bench/peers/doubling.cot; the peers ran n = 40)",
            make: peer_doubling,
            max: MAX_SIZE as usize,
        },
        Family {
            name: "quaternion",
            what: "peers: the x component of a vector rotated by a quaternion, 22 ops, no n (bench/peers/quaternion.cot)",
            make: quaternion,
            max: 1,
        },
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
            what: "t_dot of the array paper (§4.1), `sum (build (length a) (λi. a ! i * b ! i))` over two arrays of n reals: arrays/dual-numbers builds 5n+1 scalar Delta constructors (inner_nodes), arrays/onehot writes 4n² + 5n + 1 cotangent cells (ct_cells, §4.4's one-hot problem), arrays/dual-arrays builds 12 array-level Delta nodes at any n (delta_nodes)",
            make: t_dot,
            max: 100_000,
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
