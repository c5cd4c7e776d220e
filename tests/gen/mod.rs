//! A generator of random well-typed Cotangent programs, as source text, for property tests.
//! `program`: `main` takes a tuple of reals and returns a real; its body mixes lets (sharing),
//! closures, local recursion, tuples, sums with case, conditionals, integers and every real
//! primitive, with arguments kept in the primitives' smooth domains. `array_program` (arrays.rs)
//! adds arrays in the input, the output and the body.

mod arrays;

/// What an expression may mention: real and integer variables and, when `arrays` is on, array
/// variables with their (statically known) lengths and integer variables with a known bound, which
/// index arrays in range.
#[derive(Clone, Default)]
pub struct Scope {
    pub reals: Vec<String>,
    pub ints: Vec<String>,
    pub arrays: bool,
    /// `Array R` variables and their lengths.
    pub vecs: Vec<(String, usize)>,
    /// Rectangular `Array (Array R)` variables: rows, columns.
    pub mats: Vec<(String, usize, usize)>,
    /// Integer variables `i` with 0 <= i < bound (a `build` index).
    pub idx: Vec<(String, usize)>,
    /// A top-level `ahelper : Array R -> R` over arrays of this length, when there is one.
    pub ahelper: Option<usize>,
    /// Also the forms the array paper's core takes by a documented lowering (array_core_real):
    /// `max`/`min` folds, additive scans, arrays of pairs, folds over pairs and rows.
    pub core_forms: bool,
}

impl Scope {
    fn with_real(&self, x: &str) -> Scope {
        let mut s = self.clone();
        s.reals.push(x.to_string());
        s
    }
    fn with_int(&self, k: &str) -> Scope {
        let mut s = self.clone();
        s.ints.push(k.to_string());
        s
    }
}

pub struct Gen {
    state: u64,
    next_var: usize,
}

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen { state: seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) | 1, next_var: 0 }
    }
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    fn fresh(&mut self, prefix: &str) -> String {
        self.next_var += 1;
        format!("{prefix}{}", self.next_var)
    }
    fn literal(&mut self) -> String {
        let v = (self.below(400) as f64 - 200.0) / 100.0;
        if v < 0.0 {
            format!("({v:?})")
        } else {
            format!("{v:?}")
        }
    }

    /// A real-valued expression over the real variables `env` and integer variables `ienv`.
    pub fn real(&mut self, env: &[String], ienv: &[String], depth: usize) -> String {
        let s = Scope { reals: env.to_vec(), ints: ienv.to_vec(), ..Scope::default() };
        self.real_in(&s, depth)
    }

    /// A real-valued expression over `s`.
    pub fn real_in(&mut self, s: &Scope, depth: usize) -> String {
        let (env, ienv) = (&s.reals, &s.ints);
        if depth == 0 || self.below(10) < 2 {
            // Drawn only with arrays on, so scalar programs stay what they were for every seed.
            if s.arrays && self.below(2) == 0 {
                if let Some(e) = self.array_leaf(s) {
                    return e;
                }
            }
            return if self.below(4) == 0 || env.is_empty() { self.literal() } else { self.pick(env).clone() };
        }
        let d = depth - 1;
        if s.arrays && self.below(3) == 0 {
            return self.array_real(s, d);
        }
        if self.below(12) == 0 {
            // a type annotation (issue 14: annotations once broke the dualrev translations)
            return format!("({} : R)", self.real_in(s, d));
        }
        match self.below(18) {
            0 | 1 => format!("({} + {})", self.real_in(s, d), self.real_in(s, d)),
            2 => format!("({} - {})", self.real_in(s, d), self.real_in(s, d)),
            3 | 4 => format!("({} * {})", self.real_in(s, d), self.real_in(s, d)),
            5 => format!("({} / (2.0 + sin {}))", self.real_in(s, d), self.real_in(s, d)),
            6 => {
                let f = *self.pick(&["sin", "cos", "tanh", "-"]);
                format!("({f} {})", self.real_in(s, d))
            }
            7 => {
                let e = self.real_in(s, d);
                match self.below(4) {
                    0 => format!("(exp (sin {e}))"),
                    1 => format!("(log (1.0 + {e} * {e}))"),
                    2 => format!("(sqrt (1.0 + {e} * {e}))"),
                    _ => format!("(atan2 {e} (3.0 + cos {e}))"),
                }
            }
            8 | 9 => {
                // let: sharing
                let x = self.fresh("x");
                let rhs = self.real_in(s, d);
                format!("(let {x} = {rhs} in {})", self.real_in(&s.with_real(&x), d))
            }
            10 => {
                let c = self.cond(s, d);
                format!("(if {c} then {} else {})", self.real_in(s, d), self.real_in(s, d))
            }
            11 => {
                // a closure capturing the environment, applied twice
                let (f, x) = (self.fresh("f"), self.fresh("x"));
                let body = self.real_in(&s.with_real(&x), d);
                format!("(let {f} = \\{x} -> {body} in {f} ({}) + {f} ({}))", self.real_in(s, d), self.real_in(s, d))
            }
            12 => {
                // sums and case
                let (a, b) = (self.fresh("a"), self.fresh("b"));
                let c = self.cond(s, d);
                let k = self.fresh("k");
                // an integer negated inside the sum, whose annotation makes it an integer (issue 14)
                let neg = if ienv.is_empty() { "-2".to_string() } else { format!("-{}", self.pick(ienv)) };
                format!(
                    "(case (if {c} then inl {} else inr ({}, {neg}) : R + (R, Z)) of inl {a} -> {} | inr ({b}, {k}) -> {b} * real {k} + {})",
                    self.real_in(s, d),
                    self.real_in(s, d),
                    self.real_in(&s.with_real(&a), d),
                    self.real_in(&s.with_int(&k), d)
                )
            }
            13 => {
                // tuples and projections
                let (p, q) = (self.fresh("p"), self.fresh("q"));
                let env2 = s.with_real(&p).with_real(&q);
                format!(
                    "(let ({p}, {q}) = ({}, {}) in {} + fst ({p}, {q}) * snd ({q}, {p}))",
                    self.real_in(s, d),
                    self.real_in(s, d),
                    self.real_in(&env2, d)
                )
            }
            14 => {
                // local recursion over an integer counter
                let (f, k, acc) = (self.fresh("loop"), self.fresh("k"), self.fresh("acc"));
                let step = self.real_in(&s.with_real(&acc), d.min(2));
                let n = self.below(4);
                format!(
                    "(let {f} {k} {acc} = if {k} == 0 then {acc} else {f} ({k} - 1) (0.5 * {acc} + 0.25 * tanh ({step})) in {f} {n} ({}))",
                    self.real_in(s, d)
                )
            }
            15 if !ienv.is_empty() => format!("(real {} * {})", self.pick(ienv).clone(), self.real_in(s, d)),
            16 => {
                // the primitives of the table's later rows, each in a domain where it is smooth
                // and finite (** with a base in [0.5, 2.5], or an integer exponent on any base)
                let e = self.real_in(s, d);
                match self.below(10) {
                    0 => format!("((1.5 + sin {e}) ** cos {})", self.real_in(s, d)),
                    1 => format!("({e} ** 2.0)"),
                    2 => format!("(atan {e})"),
                    3 => format!("(min {e} {})", self.real_in(s, d)),
                    4 => format!("(max {e} {})", self.real_in(s, d)),
                    // floor, or round (R -> Z) back to a real: chosen by the operand's text, not
                    // by a draw, so every seed's program is otherwise what it was before round
                    5 if e.len() % 2 == 0 => format!("(floor {e} * {})", self.real_in(s, d)),
                    5 => format!("(real (round {e}) * {})", self.real_in(s, d)),
                    6 => format!("(sinh (sin {e}) + cosh (cos {e}))"),
                    7 => format!("(erf {e} - expm1 (sin {e}))"),
                    8 => format!("(log1p ({e} * {e}))"),
                    _ => format!("(sigmoid {e})"),
                }
            }
            _ => format!("(abs (3.0 + sin {}) * {})", self.real_in(s, d), self.real_in(s, d)),
        }
    }

    fn cond(&mut self, s: &Scope, depth: usize) -> String {
        let op = *self.pick(&["<", "<=", ">", ">="]);
        let c = format!("{} {op} {}", self.real_in(s, depth), self.real_in(s, depth));
        match self.below(4) {
            0 => format!("({c} && not ({} == 0.123))", self.real_in(s, depth)),
            1 => format!("({c} || 1 > 2)"),
            _ => c,
        }
    }

    /// A whole program: `main` over `arity` real inputs, an input point, and a helper definition.
    pub fn program(&mut self, arity: usize, depth: usize) -> String {
        let xs: Vec<String> = (0..arity).map(|i| format!("x{i}")).collect();
        let helper_arg = vec!["u".to_string()];
        let helper = self.real(&helper_arg, &[], 2);
        let mut env = xs.clone();
        env.push("h".into());
        let body = self.real(&env, &[], depth);
        let input: Vec<String> = (0..arity).map(|_| format!("{:?}", (self.below(300) as f64 - 150.0) / 100.0 + 0.005)).collect();
        let tuple = |v: &[String]| if v.len() == 1 { v[0].clone() } else { format!("({})", v.join(", ")) };
        format!(
            "input {}\n\ndef helper u = {helper}\n\ndef main {} =\n  let h = helper {} in\n  {body}\n",
            tuple(&input),
            tuple(&xs),
            xs[0]
        )
    }
}
