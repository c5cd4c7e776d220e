//! Tests of the parser and resolver: constructs and precedence (against a compact s-expression
//! rendering), whole programs (insta snapshots), broken programs (exact rendered diagnostics),
//! nesting limits, and a no-panic property test.

use super::*;
use crate::diag::render;
use crate::ir::{ExpectKind, LamKind, Pat};
use crate::value::show_real;

// ---- a compact rendering of the IR for tests ----

fn name(n: &crate::ir::Name) -> String {
    if n.is_global() {
        n.text.to_string()
    } else {
        format!("{}#{}", n.text, n.id)
    }
}

fn pat(p: &Pat) -> String {
    match p {
        Pat::Var(n, _) => name(n),
        Pat::Wild(_) => "_".into(),
        Pat::Unit(_) => "()".into(),
        Pat::Tuple(ps, _) => format!("({})", ps.iter().map(pat).collect::<Vec<_>>().join(", ")),
    }
}

pub(super) fn sx(e: &Expr) -> String {
    use ExprKind::*;
    let all = |es: &[Expr]| es.iter().map(sx).collect::<Vec<_>>().join(" ");
    match &e.kind {
        Var(n) => name(n),
        Real(r) => show_real(*r),
        Int(i) => i.to_string(),
        Bool(b) => b.to_string(),
        Unit => "()".into(),
        Lam(LamKind::Plain, p_b) => format!("(\\{} {})", pat(&p_b.0), sx(&p_b.1)),
        Lam(LamKind::Linear, p_b) => format!("(lin\\{} {})", pat(&p_b.0), sx(&p_b.1)),
        App(f_a) => { let (f, a) = &**f_a; format!("({} {})", sx(f), sx(a)) },
        ExprKind::Let(p_a_b) => {
            let (p, a_b) = &**p_a_b;
            let (a, b) = a_b;
            format!("(let {} {} {})", pat(p), sx(a), sx(b))
        }
        LetRec(fds_b) => { let (fds, b) = &**fds_b; format!(
            "(letrec ({}) {})",
            fds.iter().map(|f| format!("{} {}", name(&f.name), sx(&f.body))).collect::<Vec<_>>().join("; "),
            sx(b)
        ) },
        Tuple(es) => format!("(tuple {})", all(es)),
        Array(es) => format!("(array {})", all(es)),
        Fst(b) => format!("(fst {})", sx(b)),
        Snd(b) => format!("(snd {})", sx(b)),
        Inl(b) => format!("(inl {})", sx(b)),
        Inr(b) => format!("(inr {})", sx(b)),
        Case(c) => {
            let (s, p1, e1, p2, e2) = &**c;
            format!("(case {} (inl {} {}) (inr {} {}))", sx(s), pat(p1), sx(e1), pat(p2), sx(e2))
        }
        ExprKind::If(c_a_b) => {
            let (c, a_b) = &**c_a_b;
            let (a, b) = a_b;
            format!("(if {} {} {})", sx(c), sx(a), sx(b))
        }
        Prim(crate::ir::Prim::Neg, es) => format!("(neg {})", all(es)),
        Prim(p, es) => format!("({} {})", p.symbol(), all(es)),
        Ann(b_t) => { let (b, t) = &**b_t; format!("(: {} {:?})", sx(b), t) },
        Builtin(n) => format!("${n}"),
        ExprKind::Bind(p_m_k) => {
            let (p, m_k) = &**p_m_k;
            let (m, k) = m_k;
            format!("(bind {} {} {})", pat(p), sx(m), sx(k))
        }
        Pure(b) => format!("(pure {})", sx(b)),
        Par(a_b) => { let (a, b) = &**a_b; format!("(||| {} {})", sx(a), sx(b)) },
    }
}

fn program_sx(p: &Program) -> String {
    let mut out = String::new();
    for x in &p.params {
        out += &format!("param {} = {}\n", name(&x.name), x.value);
    }
    if let Some(i) = &p.input {
        out += &format!("input {}\n", sx(i));
    }
    if let Some(i) = &p.seed {
        out += &format!("seed {}\n", sx(i));
    }
    for d in &p.defs {
        out += &format!("def {} = {}\n", name(&d.name), sx(&d.body));
    }
    for e in &p.expects {
        let k = if e.what == ExpectKind::Grad { "grad" } else { "primal" };
        out += &format!("expect {k} {}\n", sx(&e.value));
    }
    out += &format!("next_id {}\n", p.next_id);
    out
}

/// The body of `def main = SRC`, with every free name a builtin (rendered `$name`).
fn e(src: &str) -> String {
    let p = parse_program_with(&format!("def main = {src}"), &|_| true)
        .unwrap_or_else(|ds| panic!("{src}: {}", ds.iter().map(|d| d.message.clone()).collect::<Vec<_>>().join("; ")));
    sx(&p.defs[0].body).replace('$', "")
}

fn errs(src: &str) -> String {
    match parse_program(src) {
        Ok(p) => panic!("expected an error, got {}", program_sx(&p)),
        Err(ds) => ds.iter().map(|d| render("t.cot", src, d)).collect(),
    }
}

// ---- constructs and precedence ----

#[test]
fn arithmetic_precedence() {
    assert_eq!(e("a + b * c"), "(+ a (* b c))");
    assert_eq!(e("a - b - c"), "(- (- a b) c)");
    assert_eq!(e("a / b / c"), "(/ (/ a b) c)");
    assert_eq!(e("a mod b * c"), "(* (mod a b) c)");
    assert_eq!(e("(a + b) * c"), "(* (+ a b) c)");
    assert_eq!(e("-x * y"), "(* (neg x) y)");
    assert_eq!(e("- f x"), "(neg (f x))");
    assert_eq!(e("- - x"), "(neg (neg x))");
    assert_eq!(e("a * -b"), "(* a (neg b))");
    assert_eq!(e("a - -1"), "(- a (neg 1))");
    assert_eq!(e("f a b + g c"), "(+ ((f a) b) (g c))");
}

#[test]
fn power_binds_tighter_than_minus_and_times_and_associates_right() {
    // as in Haskell and Python: -x ** 2 = -(x ** 2)
    assert_eq!(e("-x ** 2.0"), "(neg (** x 2.0))");
    assert_eq!(e("(-x) ** 2.0"), "(** (neg x) 2.0)");
    assert_eq!(e("a ** b ** c"), "(** a (** b c))");
    assert_eq!(e("2.0 * x ** 3.0"), "(* 2.0 (** x 3.0))");
    assert_eq!(e("x ** 2.0 * y"), "(* (** x 2.0) y)");
    assert_eq!(e("x ** -y"), "(** x (neg y))");
    assert_eq!(e("x ** -y * z"), "(* (** x (neg y)) z)");
    assert_eq!(e("a * -b ** c"), "(* a (neg (** b c)))");
    assert_eq!(e("f x ** g y"), "(** (f x) (g y))");
    assert_eq!(e("x**2.0"), "(** x 2.0)");
    assert!(errs("def main x = x * * x").contains("1:18: error: expected an expression after `*`, found `*`"));
}

#[test]
fn new_named_primitives_are_saturated_or_eta_expanded() {
    assert_eq!(e("min a b + max c d"), "(+ (min a b) (max c d))");
    assert_eq!(e("floor (atan x)"), "(floor (atan x))");
    assert_eq!(e("sigmoid (log1p x) - expm1 (erf (sinh (cosh x)))"), "(- (sigmoid (log1p x)) (expm1 (erf (sinh (cosh x)))))");
    assert_eq!(e("min a"), "(\\x#1 (min a x#1))");
}

#[test]
fn logic_and_comparison_precedence() {
    assert_eq!(e("a || b || c"), "(|| a (|| b c))");
    assert_eq!(e("a && b && c"), "(&& a (&& b c))");
    assert_eq!(e("a && b || c"), "(|| (&& a b) c)");
    assert_eq!(e("a || b && c"), "(|| a (&& b c))");
    assert_eq!(e("a < b + 1 && c >= d"), "(&& (< a (+ b 1)) (>= c d))");
    assert_eq!(e("a == b || a != c"), "(|| (== a b) (!= a c))");
    assert_eq!(e("x <= 1 && x > 0"), "(&& (<= x 1) (> x 0))");
    assert_eq!(e("not a && b"), "(&& (not a) b)");
    assert_eq!(e("not (a && b)"), "(not (&& a b))");
    assert_eq!(e("(a < b) == c"), "(== (< a b) c)");
}

#[test]
fn literals() {
    assert_eq!(e("(1.5, 2.0, 1e-3, 2.5e+10, 3, true, false, ())"), "(tuple 1.5 2.0 0.001 25000000000.0 3 true false ())");
    assert_eq!(e("-9223372036854775808"), "-9223372036854775808");
    assert_eq!(e("9223372036854775807"), "9223372036854775807");
    assert_eq!(e("(inf, -inf, nan)"), "(tuple inf (neg inf) nan)");
}

#[test]
fn binders() {
    assert_eq!(e("\\x -> x + 1"), "(\\x#1 (+ x#1 1))");
    assert_eq!(e("\\x (a, b) -> a * x"), "(\\x#1 (\\(a#2, b#3) (* a#2 x#1)))");
    assert_eq!(e("\\x -> \\y -> x"), "(\\x#1 (\\y#2 x#1))");
    assert_eq!(e("λx → x"), "(\\x#1 x#1)");
    assert_eq!(e("λx. x"), "(\\x#1 x#1)");
    assert_eq!(e("lin\\x -> x"), "(lin\\x#1 x#1)");
    assert_eq!(e("linλ x → x"), "(lin\\x#1 x#1)");
    assert_eq!(e("\\_ () -> 1"), "(\\_ (\\() 1))");
    assert_eq!(e("let (a, b) = p in a"), "(let (a#1, b#2) p a#1)");
    assert_eq!(e("let x = x in x"), "(let x#1 x x#1)");
    assert_eq!(e("let f = \\y -> f y in f"), "(let f#2 (\\y#1 (f y#1)) f#2)");
    assert_eq!(e("let f x = f x in f 1"), "(letrec (f#1 (\\x#2 (f#1 x#2))) (f#1 1))");
    assert_eq!(e("let g (a, b) c = a in g"), "(letrec (g#1 (\\(a#2, b#3) (\\c#4 a#2))) g#1)");
    assert_eq!(e("let sin = 3.0 in sin"), "(let sin#1 3.0 sin#1)");
    assert_eq!(e("let x = 1 in let x = x in x"), "(let x#1 1 (let x#2 x#1 x#2))");
    assert_eq!(e("a + \\x -> x + a"), "(+ a (\\x#1 (+ x#1 a)))");
    assert_eq!(e("a + let y = 1 in y * 2"), "(+ a (let y#1 1 (* y#1 2)))");
}

#[test]
fn let_and_groups_see_every_member() {
    // each member sees the whole group (ids 1 and 2 bound before either body), and so does the body
    assert_eq!(
        e("let ev n = if n == 0 then true else od (n - 1) and od n = if n == 0 then false else ev (n - 1) in ev 4"),
        "(letrec (ev#1 (\\n#3 (if (== n#3 0) true (od#2 (- n#3 1)))); od#2 (\\n#4 (if (== n#4 0) false (ev#1 (- n#4 1))))) (ev#1 4))"
    );
    assert_eq!(e("let f x = g x and g = \\y -> f y and h = 1 in h"), "(letrec (f#1 (\\x#4 (g#2 x#4)); g#2 (\\y#5 (f#1 y#5)); h#3 1) h#3)");
    // a first member without parameters makes a group too when `and` follows
    assert_eq!(e("let f = \\x -> g x and g y = f y in f"), "(letrec (f#1 (\\x#3 (g#2 x#3)); g#2 (\\y#4 (f#1 y#4))) f#1)");
    // `and` ends an application: it is a keyword
    assert_eq!(e("let f x = a x and g y = y in g"), "(letrec (f#1 (\\x#3 (a x#3)); g#2 (\\y#4 y#4)) g#2)");
}

#[test]
fn let_and_groups_and_seeds_print_and_read_back() {
    let src = "input 1.5\nseed -2.0\n\
               def main x = let ev n y = if n == 0 then y else od (n - 1) (y * x) \
               and od n y = if n == 0 then -y else ev (n - 1) (y + x) in ev 3 x\n";
    let p = parse_program(src).unwrap();
    assert_eq!(value_of(p.seed.as_ref().unwrap()).unwrap().to_string(), "-2.0");
    let o = crate::print::PrintOptions { width: 60, ..crate::print::PrintOptions::ascii() };
    let printed = crate::print::print_program(&p, &o);
    assert!(printed.starts_with("input 1.5\nseed -2.0\n"), "{printed}");
    assert!(printed.contains("\n  and od n y ="), "one member per line:\n{printed}");
    let again = parse_program(&printed).unwrap_or_else(|ds| panic!("{printed}\n{ds:?}"));
    assert_eq!(program_sx(&again), program_sx(&p));
    assert_eq!(crate::print::print_program(&again, &o), printed);
    assert_eq!(again.seed.as_ref().map(sx), p.seed.as_ref().map(sx));
}

#[test]
fn conditionals_and_sums() {
    assert_eq!(e("if c then a else b + 1"), "(if c a (+ b 1))");
    assert_eq!(e("if c then a else if d then b else e"), "(if c a (if d b e))");
    assert_eq!(e("1 + if c then 2 else 3"), "(+ 1 (if c 2 3))");
    assert_eq!(e("case s of inl x -> x | inr (a, b) -> a"), "(case s (inl x#1 x#1) (inr (a#2, b#3) a#2))");
    assert_eq!(e("case s of inr y -> y | inl x -> 2"), "(case s (inl x#1 2) (inr y#2 y#2))");
    assert_eq!(e("case s of | inl x -> 1 | inr y -> 2"), "(case s (inl x#1 1) (inr y#2 2))");
    assert_eq!(
        e("case a of inl x -> case b of inl y -> 1 | inr z -> 2 | inr w -> 3"),
        "(case a (inl x#1 (case b (inl y#2 1) (inr z#3 2))) (inr w#4 3))"
    );
    assert_eq!(e("inl (f x)"), "(inl (f x))");
    assert_eq!(e("inl f x"), "((inl f) x)");
    assert_eq!(e("(inr 1.0, fst p, snd p)"), "(tuple (inr 1.0) (fst p) (snd p))");
}

#[test]
fn primitives_are_saturated_or_eta_expanded() {
    assert_eq!(e("sin x + cos (tan x)"), "(+ (sin x) (cos (tan x)))");
    assert_eq!(e("atan2 y x"), "(atan2 y x)");
    assert_eq!(e("atan2 y x z"), "((atan2 y x) z)");
    assert_eq!(e("map sin xs"), "(map (\\x#1 (sin x#1)) xs)");
    assert_eq!(e("atan2 y"), "(\\x#1 (atan2 y x#1))");
    assert_eq!(e("atan2 (f y)"), "(let a#1 (f y) (\\x#2 (atan2 a#1 x#2)))");
    assert_eq!(e("atan2"), "(\\x#1 (\\x#2 (atan2 x#1 x#2)))");
    assert_eq!(e("map fst ps"), "(map (\\x#1 (fst x#1)) ps)");
    assert_eq!(e("xs ! 2 + 1.0"), "(+ (! xs 2) 1.0)");
    assert_eq!(e("f a ! i ** 2.0"), "(** (! (f a) i) 2.0)");
    assert_eq!(e("[1.0, x ! 0]"), "(array 1.0 (! x 0))");
    assert_eq!(e("[]"), "(array )");
    assert_eq!(e("(inl, not)"), "(tuple (\\x#1 (inl x#1)) (\\x#2 (not x#2)))");
    assert_eq!(e("real n + exp (log (sqrt (abs (tanh x))))"), "(+ (real n) (exp (log (sqrt (abs (tanh x))))))");
    assert_eq!(e("let fst = 1 in fst"), "(let fst#1 1 fst#1)");
}

#[test]
fn tuples_annotations_monads() {
    assert_eq!(e("(a)"), "a");
    assert_eq!(e("((a, b), c)"), "(tuple (tuple a b) c)");
    assert_eq!(e("(a : R)"), "(: a Real)");
    assert_eq!(e("(a : R, b)"), "(tuple (: a Real) b)");
    assert_eq!(e("do { x <- m; y ← k x; pure (x, y) }"), "(bind x#1 m (bind y#2 (k x#1) (pure (tuple x#1 y#2))))");
    assert_eq!(e("do { m; (a, b) <- k; pure a; }"), "(bind _ m (bind (a#1, b#2) k (pure a#1)))");
    assert_eq!(e("do { pure 1 }"), "(pure 1)");
    assert_eq!(e("Add (Var 1) d"), "((Add (Var 1)) d)");
}

#[test]
fn builtins_only_when_unbound() {
    let p = parse_program_with("def Add x = x\ndef main y = Add (eval y)", &|n| n == "Add" || n == "eval").unwrap();
    assert_eq!(sx(&p.defs[1].body), "(\\y#2 (Add ($eval y#2)))");
}

#[test]
fn types() {
    let t = |s: &str| format!("{:?}", parse_type(s).unwrap());
    assert_eq!(t("R"), "Real");
    assert_eq!(t("(R, Z, Bool)"), "Tuple([Real, Int, Bool])");
    assert_eq!(t("()"), "Unit");
    assert_eq!(t("(R)"), "Real");
    assert_eq!(t("R -> R -> R"), "Fun(Real, Fun(Real, Real))");
    assert_eq!(t("(R -> R) -> R"), "Fun(Fun(Real, Real), Real)");
    assert_eq!(t("R + Z -> Bool"), "Fun(Sum(Real, Int), Bool)");
    assert_eq!(t("R + Z + ()"), "Sum(Real, Sum(Int, Unit))");
    assert_eq!(t("R → R"), "Fun(Real, Real)");
    assert_eq!(t("R ⊸ R"), "Lin(Real, Real)");
    assert_eq!(t("M (R, Delta)"), "Con(\"M\", [Tuple([Real, Con(\"Delta\", [])])])");
    assert_eq!(t("Map Z R"), "Con(\"Map\", [Int, Real])");
    assert_eq!(t("Delta -> M Delta"), "Fun(Con(\"Delta\", []), Con(\"M\", [Con(\"Delta\", [])]))");
    for bad in ["", "R ->", "(R", "r", "R R", "R + ", "(R,)", "->"] {
        assert!(parse_type(bad).is_err(), "{bad}");
    }
}

#[test]
fn closed_expressions_and_values() {
    let v = |s: &str| value_of(&parse_expr(s).unwrap()).map(|v| v.to_string()).map_err(|d| render("cli", s, &d));
    assert_eq!(v("1.5").unwrap(), "1.5");
    assert_eq!(v("(1.0, 2.0)").unwrap(), "(1.0, 2.0)");
    assert_eq!(v("((1.1, -2.2), 3)").unwrap(), "((1.1, -2.2), 3)");
    assert_eq!(v("inl (inr ())").unwrap(), "inl (inr ())");
    assert_eq!(v("(-1 : Z)").unwrap(), "-1");
    assert_eq!(v("(true, false)").unwrap(), "(true, false)");
    assert_eq!(v("-inf").unwrap(), "-inf");
    assert_eq!(v("-9223372036854775808").unwrap(), "-9223372036854775808");
    assert_eq!(
        v("(1.0, 2.0 + 1.0)").unwrap_err(),
        "cli:1:7: error: not a constant value: expected a number, `true`, `false`, `()`, a tuple, an array `[...]`, or `inl`/`inr` of a constant\n    1 | (1.0, 2.0 + 1.0)\n      |       ^^^^^^^^^\n"
    );
    assert!(v("\\x -> x").is_err());
    let d = parse_expr("(1.0, y)").unwrap_err();
    assert_eq!(render("cli", "(1.0, y)", &d[0]), "cli:1:7: error: unknown name `y`\n    1 | (1.0, y)\n      |       ^\n");
    assert_eq!(sx(&parse_expr("sin 1.0").unwrap()), "(sin 1.0)");
}

#[test]
fn spans() {
    let src = "def f x = let y = x + 1 in (y, y)";
    let p = parse_program(src).unwrap();
    let d = &p.defs[0];
    let text = |s: crate::diag::Span| &src[s.start as usize..s.end as usize];
    assert_eq!(text(d.span), src);
    assert_eq!(text(d.body.span), "x = let y = x + 1 in (y, y)");
    let ExprKind::Lam(_, body_x) = &d.body.kind else { panic!() };
    let (_, body) = &**body_x;
    assert_eq!(text(body.span), "let y = x + 1 in (y, y)");
    let ExprKind::Let(p_rhs_b) = &body.kind else { panic!() };
    let (p, rhs_b) = &**p_rhs_b;
    let (rhs, b) = rhs_b;
    assert_eq!(text(p.span()), "y");
    assert_eq!(text(rhs.span), "x + 1");
    assert_eq!(text(b.span), "(y, y)");
    let ExprKind::Prim(_, args) = &rhs.kind else { panic!() };
    assert_eq!(text(args[1].span), "1");
    let app = parse_program("def g h = h (1) 2").unwrap();
    let ExprKind::Lam(_, body_x) = &app.defs[0].body.kind else { panic!() };
    let (_, body) = &**body_x;
    assert_eq!(text2("def g h = h (1) 2", body.span), "h (1) 2");
    fn text2(s: &str, sp: crate::diag::Span) -> &str {
        &s[sp.start as usize..sp.end as usize]
    }
}

// ---- whole programs ----

const EXAMPLE: &str = "-- line comment
param n = 10                                   -- integer size parameter
input ((1.1, 2.2), 3.0)                        -- default input point of main
def dot (a1, a2) (b1, b2) = a1 * b1 + a2 * b2
def pow k x = if k == 0 then 1.0 else x * pow (k - 1) x
def main (p, y) = let (a, b) = p in pow n (dot (a, b) (y, y))
expect grad ((2.0, 3.0), 4.0)
expect primal 300.0
";

#[test]
fn example_program() {
    let p = parse_program(EXAMPLE).unwrap();
    insta::assert_snapshot!("example_program", program_sx(&p));
    assert_eq!(p.params[0].value, 10);
    assert_eq!(value_of(p.input.as_ref().unwrap()).unwrap().to_string(), "((1.1, 2.2), 3.0)");
    assert_eq!(p.expects[0].what, ExpectKind::Grad);
}

#[test]
fn mutual_recursion_and_params() {
    let src = "param k = -3\n\
               def even n = if n == 0 then true else odd (n - 1)\n\
               def odd n = if n == 0 then false else even (n - 1)\n\
               def main x = let go i acc = if i <= 0 then acc else go (i - 1) (acc * x) in go k 1.0";
    let p = parse_program(src).unwrap();
    insta::assert_snapshot!("mutual_recursion", program_sx(&p));
}

#[test]
fn monadic_stage_output_reads_back() {
    let src = "def main x = do { (d, i) <- fresh x; _ ← emit (Add d i); pure (linλ c → scale c d) }";
    let p = parse_program_with(src, &|n| ["fresh", "emit", "Add", "scale"].contains(&n)).unwrap();
    insta::assert_snapshot!("monadic", program_sx(&p));
}

#[test]
fn debug_form_of_a_small_program() {
    let p = parse_program("def main x = (sin x : R)").unwrap();
    insta::assert_debug_snapshot!("small_debug", p);
}

// ---- broken programs ----

#[test]
fn broken_programs() {
    let table: &[(&str, &str)] = &[
        ("def main x = (x + 1",
         "t.cot:1:20: error: unexpected end of input: expected `)` to close the `(` opened at line 1\n    1 | def main x = (x + 1\n      |                    ^\n"),
        ("def main x =\n  (x +\n   1 ]",
         "t.cot:3:6: error: expected `)` to close the `(` opened at line 2, found `]`\n    3 |    1 ]\n      |      ^\n"),
        ("def main x =\n  [x,\n   1.0 )",
         "t.cot:3:8: error: expected `]` to close the `[` opened at line 2, found `)`\n    3 |    1.0 )\n      |        ^\n"),
        ("def main x =\n  f (x, (1, 2)\ndef g = 1",
         "t.cot:3:1: error: expected `)` to close the `(` opened at line 2, found `def`\n    3 | def g = 1\n      | ^^^\n"),
        ("def main x = x + y",
         "t.cot:1:18: error: unknown name `y`\n    1 | def main x = x + y\n      |                  ^\n"),
        ("def main x = let foo = 1 in fooo + x",
         "t.cot:1:29: error: unknown name `fooo`; did you mean `foo`?\n    1 | def main x = let foo = 1 in fooo + x\n      |                             ^^^^\n"),
        ("def main x = x)",
         "t.cot:1:15: error: unmatched `)`: no `(` is open here\n    1 | def main x = x)\n      |               ^\n"),
        ("def main x = 1.",
         "t.cot:1:14: error: a real literal needs digits after the `.`: write `1.0`\n    1 | def main x = 1.\n      |              ^^\n"),
        ("def main x = 99999999999999999999",
         "t.cot:1:14: error: integer literal `99999999999999999999` is out of range (the largest integer is 9223372036854775807)\n    1 | def main x = 99999999999999999999\n      |              ^^^^^^^^^^^^^^^^^^^^\n"),
        ("def main x = 3x",
         "t.cot:1:14: error: malformed number `3x`\n    1 | def main x = 3x\n      |              ^^\n"),
        ("def main x = let y = x y + 1",
         "t.cot:1:29: error: unexpected end of input: expected `in` to finish the `let` at line 1\n    1 | def main x = let y = x y + 1\n      |                             ^\n"),
        ("def main x = let y = x",
         "t.cot:1:23: error: unexpected end of input: expected `in` to finish the `let` at line 1\n    1 | def main x = let y = x\n      |                       ^\n"),
        ("def main x = a < b < c",
         "t.cot:1:20: error: comparisons cannot be chained: `a < b < c` needs parentheses, or write `a < b && b < c`\n    1 | def main x = a < b < c\n      |                    ^\n"),
        ("def main x = x == 1 != 2",
         "t.cot:1:21: error: comparisons cannot be chained: `a == b != c` needs parentheses, or write `a == b && b != c`\n    1 | def main x = x == 1 != 2\n      |                     ^^\n"),
        ("",
         "t.cot:1:1: error: the program is empty: expected a definition such as `def main x = ...`\n    1 | \n      | ^\n"),
        ("-- only a comment\n",
         "t.cot:2:1: error: the program is empty: expected a definition such as `def main x = ...`\n    2 | \n      | ^\n"),
        ("def main x = \\y ->",
         "t.cot:1:19: error: unexpected end of input: expected an expression after `->`\n    1 | def main x = \\y ->\n      |                   ^\n"),
        ("def main x = \\y",
         "t.cot:1:16: error: unexpected end of input: expected `->` after the parameters of the lambda\n    1 | def main x = \\y\n      |                ^\n"),
        ("def main x = \\ -> 1",
         "t.cot:1:16: error: expected a pattern after `\\` (a name, `_`, `()` or a tuple of patterns), found `->`\n    1 | def main x = \\ -> 1\n      |                ^^\n"),
        ("def main x = if x then 1",
         "t.cot:1:25: error: unexpected end of input: expected `else` to go with the `if` at line 1\n    1 | def main x = if x then 1\n      |                         ^\n"),
        ("def main x = if x 1 else 2",
         "t.cot:1:21: error: expected `then` after the condition of the `if` at line 1, found `else`\n    1 | def main x = if x 1 else 2\n      |                     ^^^^\n"),
        ("def main x = case x of inl a -> 1",
         "t.cot:1:34: error: unexpected end of input: expected `|` and the `inr` arm of the `case` at line 1\n    1 | def main x = case x of inl a -> 1\n      |                                  ^\n"),
        ("def main x = case x of inl a -> 1 | inl b -> 2",
         "t.cot:1:37: error: expected `inr` to start the second `case` arm, found name `inl`\n    1 | def main x = case x of inl a -> 1 | inl b -> 2\n      |                                     ^^^\n"),
        ("def main x = case x of a -> 1",
         "t.cot:1:24: error: expected `inl` or `inr` to start a `case` arm, found name `a`\n    1 | def main x = case x of a -> 1\n      |                        ^\n"),
        ("def main x = x\ndef main y = y",
         "t.cot:2:5: error: `main` is defined twice (first at line 1)\n    2 | def main y = y\n      |     ^^^^\n"),
        ("param n = 1\ndef n = 2",
         "t.cot:2:5: error: `n` is defined twice (first at line 1)\n    2 | def n = 2\n      |     ^\n"),
        ("param n = x",
         "t.cot:1:11: error: expected an integer literal after `param n =`, found name `x`\n    1 | param n = x\n      |           ^\n"),
        ("def sin x = x",
         "t.cot:1:5: error: `sin` is built in and cannot be redefined\n    1 | def sin x = x\n      |     ^^^\n"),
        ("def main x = x @ 1",
         "t.cot:1:16: error: unexpected character `@`\n    1 | def main x = x @ 1\n      |                ^\n"),
        ("def main x = x & y",
         "t.cot:1:16: error: unexpected character `&`: logical and is written `&&`\n    1 | def main x = x & y\n      |                ^\n"),
        ("def main x = !x",
         "t.cot:1:14: error: `!` indexes an array (`a ! i`): write `not e` for negation and `!=` for inequality\n    1 | def main x = !x\n      |              ^\n"),
        ("main x = x",
         "t.cot:1:1: error: expected a top-level item (`def`, `param`, `input`, `seed` or `expect`), found name `main`\n    1 | main x = x\n      | ^^^^\n"),
        ("def main x = x in 1",
         "t.cot:1:16: error: unexpected `in` without a matching `let`\n    1 | def main x = x in 1\n      |                ^^\n"),
        ("def main x = (x : r)",
         "t.cot:1:19: error: unknown type `r`: types are `R`, `Z`, `Bool`, `()`, tuples, `A + B`, `A -> B` and capitalised type names\n    1 | def main x = (x : r)\n      |                   ^\n"),
        ("def main x = (x : )",
         "t.cot:1:19: error: expected a type after `:`, found `)`\n    1 | def main x = (x : )\n      |                   ^\n"),
        ("def main (x, x) = 1",
         "t.cot:1:14: error: `x` is bound twice in this pattern\n    1 | def main (x, x) = 1\n      |              ^\n"),
        ("def main x = do { y <- x }",
         "t.cot:1:19: error: the last statement of a `do` block must be an expression, not a binding `y <- ...`\n    1 | def main x = do { y <- x }\n      |                   ^^^^^^\n"),
        ("def main x = do { y <- x; x",
         "t.cot:1:28: error: unexpected end of input: expected `;` or `}` in the `do` block opened at line 1\n    1 | def main x = do { y <- x; x\n      |                            ^\n"),
        ("def main x = x +",
         "t.cot:1:17: error: unexpected end of input: expected an expression after `+`\n    1 | def main x = x +\n      |                 ^\n"),
        ("def main x = x * * 2",
         "t.cot:1:18: error: expected an expression after `*`, found `*`\n    1 | def main x = x * * 2\n      |                  ^\n"),
        ("input (1.0, 2.0\ndef main x = x",
         "t.cot:2:1: error: expected `)` to close the `(` opened at line 1, found `def`\n    2 | def main x = x\n      | ^^^\n"),
        ("input 1.0\ninput 2.0\ndef main x = x",
         "t.cot:2:1: error: `input` is given twice\n    2 | input 2.0\n      | ^^^^^\n"),
        ("expect gradient 1.0",
         "t.cot:1:8: error: expected `grad` or `primal` after `expect`, found name `gradient`\n    1 | expect gradient 1.0\n      |        ^^^^^^^^\n"),
        ("def main x = (1, 2,)",
         "t.cot:1:20: error: expected an expression after `,`, found `)`\n    1 | def main x = (1, 2,)\n      |                    ^\n"),
        ("def f = 1 def g = h",
         "t.cot:1:19: error: unknown name `h`\n    1 | def f = 1 def g = h\n      |                   ^\n"),
        ("def main x = let f x y = x in",
         "t.cot:1:30: error: unexpected end of input: expected an expression after `in`\n    1 | def main x = let f x y = x in\n      |                              ^\n"),
        ("def main x = let (a, b) = x in",
         "t.cot:1:31: error: unexpected end of input: expected an expression after `in`\n    1 | def main x = let (a, b) = x in\n      |                               ^\n"),
        ("def main x = let f y = y and in f x",
         "t.cot:1:30: error: expected the name of a local function, found `in`\n    1 | def main x = let f y = y and in f x\n      |                              ^^\n"),
        ("def main x = let f y = y and g y in f x",
         "t.cot:1:34: error: expected `=` after the parameters of `g`, found `in`\n    1 | def main x = let f y = y and g y in f x\n      |                                  ^^\n"),
        ("def main x = x and x",
         "t.cot:1:16: error: unexpected `and` without a matching `let f x = ...`\n    1 | def main x = x and x\n      |                ^^^\n"),
        ("def main x = let (a, b) = x and f y = y in a",
         "t.cot:1:29: error: expected `in` to finish the `let` at line 1, found `and`\n    1 | def main x = let (a, b) = x and f y = y in a\n      |                             ^^^\n"),
        ("def main x = let f y = y and f z = z in f x",
         "t.cot:1:30: error: `f` is defined twice in this `let … and …` group\n    1 | def main x = let f y = y and f z = z in f x\n      |                              ^\n"),
        ("seed 1.0\nseed 2.0\ndef main x = x",
         "t.cot:2:1: error: `seed` is given twice\n    2 | seed 2.0\n      | ^^^^\n"),
        ("seed\ndef main x = x",
         "t.cot:2:1: error: expected an expression after `seed`, found `def`\n    2 | def main x = x\n      | ^^^\n"),
    ];
    for (src, want) in table {
        assert_eq!(&errs(src), want, "for {src:?}");
    }
}


// ---- nesting limits ----

fn let_chain(n: usize) -> String {
    let mut s = String::from("def main x0 = ");
    for i in 1..=n {
        s += &format!("let x{i} = x{} + x{} in ", i - 1, i - 1);
    }
    s += &format!("x{n}");
    s
}

#[test]
fn deep_let_chain_parses_on_the_big_stack() {
    let ok = crate::limits::run_with_stack(|| {
        let src = let_chain(100_000);
        let p = parse_program(&src).map_err(|ds| ds[0].message.clone())?;
        let next = p.next_id;
        drop(p);
        Ok::<u32, String>(next)
    });
    assert_eq!(ok, Ok(100_002));
}

#[test]
fn deep_right_nested_chains_parse_on_the_big_stack() {
    let ok = crate::limits::run_with_stack(|| {
        let n = 50_000;
        let lams: String = (0..n).map(|i| format!("\\y{i} -> ")).collect::<String>() + "1.0";
        let ifs: String = (0..n).map(|i| format!("if x == {i} then {i}.0 else ")).collect::<String>() + "0.0";
        let ors: String = (0..n).map(|_| "x || ").collect::<String>() + "x";
        let sums: String = (0..n).map(|_| "x + ").collect::<String>() + "x";
        let apps: String = "f".to_string() + &" x".repeat(n);
        let negs: String = "- ".repeat(n) + "x";
        let mut out = vec![];
        for body in [lams, ifs, ors, sums, apps, negs] {
            out.push(parse_program_with(&format!("def main x = {body}"), &|n| n == "f").is_ok());
        }
        out
    });
    assert_eq!(ok, vec![true; 6]);
}

fn nesting_message() -> String {
    format!("program nested too deeply (more than {} levels; the `nesting` budget)", crate::limits::max_nesting())
}

#[test]
fn too_deep_parentheses_are_refused_without_recursing() {
    // On the ordinary (small) test-thread stack: the bracket check runs before any recursion.
    let n = 300_000;
    let src = format!("def main x = {}x{}", "(".repeat(n), ")".repeat(n));
    let ds = parse_program(&src).unwrap_err();
    assert_eq!(ds[0].message, nesting_message());
    assert_eq!(ds[0].span.start as usize, 13 + crate::limits::max_nesting());
    let ds = parse_expr(&format!("{}1", "(".repeat(n))).unwrap_err();
    assert_eq!(ds[0].message, nesting_message());
    let ds = parse_type(&format!("{}R", "(".repeat(n))).unwrap_err();
    assert_eq!(ds[0].message, nesting_message());
}

#[test]
fn too_deep_chains_are_refused() {
    let msgs = crate::limits::run_with_stack(|| {
        let n = 300_000;
        let srcs = [
            let_chain(n),
            format!("def main x = {}1.0", "\\y -> ".repeat(n)),
            format!("def main x = {}x", "- ".repeat(n)),
            format!("def main x = {}x", "x + ".repeat(n)),
            format!("def main x = x{}", " x".repeat(n)),
            format!("def main x = {}x", "if x then x else ".repeat(n)),
            format!("def main x = {}x", "x + let y = x in ".repeat(n)),
        ];
        srcs.iter().map(|s| parse_program(s).map(|_| ()).map_err(|ds| ds[0].message.clone())).collect::<Vec<_>>()
    });
    for m in msgs {
        assert_eq!(m, Err(nesting_message()));
    }
}

// ---- no panics on any input ----

mod fuzz {
    use super::super::*;
    use proptest::prelude::*;

    const WORDS: &[&str] = &[
        "def", "param", "input", "seed", "expect", "grad", "primal", "let", "in", "and", "if", "then", "else", "case", "of",
        "inl", "inr", "fst", "snd", "not", "pure", "do", "{", "}", ";", "<-", "←", "lin", "\\", "λ", "->", "→",
        ".", "(", ")", ",", ":", "|", "=", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "mod", "&&",
        "||", "_", "x", "y", "f", "main", "sin", "atan2", "real", "1", "2.5", "1e-3", "9223372036854775808",
        "true", "false", "()", "R", "Z", "Bool", "M", "⊸", "inf", "nan", "--", "\n",
    ];

    fn check(src: &str) {
        for r in [parse_program(src).err(), parse_expr(src).err(), parse_type(src).err()] {
            for d in r.unwrap_or_default() {
                let _ = crate::diag::render("f", src, &d);
                assert!(d.span.start <= d.span.end && d.span.end as usize <= src.len(), "{d:?}");
            }
        }
        if let Ok(e) = parse_expr(src) {
            let _ = value_of(&e);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
        #[test]
        fn random_strings_do_not_panic(s in "[ -~λ→←⊸\\n\\t]{0,60}") {
            check(&s);
        }

        #[test]
        fn token_soups_do_not_panic(ws in prop::collection::vec(0..WORDS.len(), 0..40)) {
            let src = ws.iter().map(|&i| WORDS[i]).collect::<Vec<_>>().join(" ");
            check(&src);
            check(&format!("def main x = {src}"));
        }
    }
}
