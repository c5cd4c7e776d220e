//! One scan of a typed program's language features, each with the span of its first use. A stage
//! declares the features its paper's method handles (`Stage::supports`); the pipeline refuses a program
//! using any other with a located message naming the construct and the restriction.

use crate::diag::{Diagnostic, Span};
use crate::ir::{each_child, Expr, ExprKind, Program, Type};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// A set of features (bit flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Features(u32);

/// One language feature, as the pipeline names it in refusals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feature {
    /// A function used as a value: passed, returned, stored, or partially applied.
    HigherOrder,
    /// A definition that calls itself (directly or through others), or a local `let f x = …`.
    Recursion,
    /// Sum types: `inl`, `inr`, `case`.
    Sums,
    /// Integer values anywhere in the program.
    Integers,
    /// Conditionals `if … then … else …`.
    Conditionals,
    /// The parallel pair `e1 ||| e2`.
    Par,
}

impl Feature {
    pub const EVERY: [Feature; 6] =
        [Feature::HigherOrder, Feature::Recursion, Feature::Sums, Feature::Integers, Feature::Conditionals, Feature::Par];

    fn bit(self) -> u32 {
        1 << (self as u32)
    }

    /// What the construct is called in a refusal.
    pub fn describe(self) -> &'static str {
        match self {
            Feature::HigherOrder => "a function used as a value (higher-order code)",
            Feature::Recursion => "recursion",
            Feature::Sums => "a sum type (inl/inr/case)",
            Feature::Integers => "an integer",
            Feature::Conditionals => "a conditional (if/then/else)",
            Feature::Par => "a parallel pair (|||)",
        }
    }
}

impl Features {
    pub const NONE: Features = Features(0);
    pub const ALL: Features = Features(u32::MAX);

    pub const fn of(fs: &[Feature]) -> Features {
        let mut bits = 0;
        let mut i = 0;
        while i < fs.len() {
            bits |= 1 << (fs[i] as u32);
            i += 1;
        }
        Features(bits)
    }
    pub fn has(self, f: Feature) -> bool {
        self.0 & f.bit() != 0
    }
    pub fn without(self, f: Feature) -> Features {
        Features(self.0 & !f.bit())
    }
}

/// The features a program uses, each with the span of its first use (in definition order).
#[derive(Clone, Debug, Default)]
pub struct Found(pub Vec<(Feature, Span)>);

impl Found {
    pub fn span(&self, f: Feature) -> Option<Span> {
        self.0.iter().find(|(g, _)| *g == f).map(|(_, s)| *s)
    }
    /// The first feature `supported` lacks, as a located refusal: `stage` names the method,
    /// `restriction` says what the paper restricts its source language to.
    pub fn refuse(&self, supported: Features, restriction: &str) -> Result<(), Diagnostic> {
        match self.0.iter().find(|(f, _)| !supported.has(*f)) {
            None => Ok(()),
            Some((f, span)) => Err(Diagnostic::error(
                *span,
                format!("this program uses {}, which this stage does not handle: {restriction}", f.describe()),
            )),
        }
    }
}

fn is_fun(t: &Type) -> bool {
    matches!(t, Type::Fun(..) | Type::Lin(..))
}

/// Scans a type-checked program. Walks with an explicit stack (programs may be deep).
pub fn scan(p: &Program) -> Found {
    let mut first: HashMap<Feature, Span> = HashMap::default();
    fn note(f: Feature, s: Span, first: &mut HashMap<Feature, Span>) {
        first.entry(f).or_insert(s);
    }
    let globals: HashSet<&str> = p.defs.iter().map(|d| &*d.name.text).collect();
    // calls between definitions, for recursion through several of them
    let mut calls: HashMap<&str, Vec<&str>> = HashMap::default();
    for d in &p.defs {
        // `ok_fun`: an expression of function type here is in a place where a first-order language has
        // functions too: a definition's body (under its lambdas) or the head of an application.
        let mut stack: Vec<(&Expr, bool)> = vec![(&d.body, true)];
        while let Some((e, ok_fun)) = stack.pop() {
            if is_fun(&e.ty) && !ok_fun {
                note(Feature::HigherOrder, e.span, &mut first);
            }
            if e.ty == Type::Int {
                note(Feature::Integers, e.span, &mut first);
            }
            match &e.kind {
                ExprKind::Var(n) if n.is_global() && globals.contains(&*n.text) => {
                    calls.entry(&d.name.text).or_default().push(&n.text);
                }
                ExprKind::Inl(_) | ExprKind::Inr(_) | ExprKind::Case(..) => note(Feature::Sums, e.span, &mut first),
                ExprKind::If(..) => note(Feature::Conditionals, e.span, &mut first),
                ExprKind::Par(..) => note(Feature::Par, e.span, &mut first),
                ExprKind::LetRec(fs_x) => { let (fs, _) = &**fs_x; note(Feature::Recursion, fs.first().map_or(e.span, |f| f.span), &mut first) },
                _ => {}
            }
            match &e.kind {
                // the body of a lambda in function position may itself be a lambda (currying)
                ExprKind::Lam(_, b_x) => { let (_, b) = &**b_x; stack.push((b, ok_fun)) },
                ExprKind::App(f_a) => {
                    let (f, a) = &**f_a;
                    stack.push((a, false));
                    stack.push((f, true));
                }
                ExprKind::LetRec(fs_b) => {
                    let (fs, b) = &**fs_b;
                    stack.push((b, false));
                    fs.iter().for_each(|f| stack.push((&f.body, true)));
                }
                ExprKind::Ann(x_x) => { let (x, _) = &**x_x; stack.push((x, ok_fun)) },
                _ => each_child(e, &mut |c| stack.push((c, false))),
            }
        }
    }
    // recursion between definitions: a definition that reaches itself through calls
    for d in &p.defs {
        let mut seen: HashSet<&str> = HashSet::default();
        let mut todo: Vec<&str> = calls.get(&*d.name.text).cloned().unwrap_or_default();
        while let Some(g) = todo.pop() {
            if g == &*d.name.text {
                note(Feature::Recursion, d.span, &mut first);
                break;
            }
            if seen.insert(g) {
                todo.extend(calls.get(g).cloned().unwrap_or_default());
            }
        }
    }
    // report in the order of the source
    let mut v: Vec<(Feature, Span)> = first.into_iter().collect();
    v.sort_by_key(|(f, s)| (s.start, *f));
    Found(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(src: &str) -> Vec<Feature> {
        let mut p = crate::syntax::parse_program(src).unwrap();
        crate::types::check_program(&mut p, &crate::interp::Builtins::new()).unwrap();
        let mut fs: Vec<Feature> = scan(&p).0.into_iter().map(|(f, _)| f).collect();
        fs.sort();
        fs
    }

    #[test]
    fn first_order_straight_line_uses_nothing() {
        assert_eq!(found("def sq x = x * x\ndef main (x, y) = sq x + sin y"), vec![]);
    }

    #[test]
    fn each_feature_is_found() {
        use Feature::*;
        assert_eq!(found("def twice f x = f (f x)\ndef main x = twice (\\y -> y * x) x"), vec![HigherOrder]);
        assert_eq!(found("def main x = let g = sin in g x"), vec![HigherOrder]);
        assert_eq!(found("def pow k x = if k == 0 then 1.0 else x * pow (k - 1) x\ndef main x = pow 3 x"), vec![Recursion, Integers, Conditionals]);
        assert_eq!(found("def main x = case (if x < 0.0 then inl x else inr x) of inl a -> a | inr b -> b"), vec![Sums, Conditionals]);
        assert_eq!(found("def main (x, y) = x * y ||| x + y"), vec![Par]);
        assert_eq!(found("def main x = let f y = if y < 1.0 then y else f (y / 2.0) in f x"), vec![Recursion, Conditionals]);
    }

    #[test]
    fn refusal_is_located_at_the_first_use() {
        let src = "def main x =\n  let g = sin in g x";
        let mut p = crate::syntax::parse_program(src).unwrap();
        crate::types::check_program(&mut p, &crate::interp::Builtins::new()).unwrap();
        let d = scan(&p).refuse(Features::ALL.without(Feature::HigherOrder), "first-order programs only (§3)").unwrap_err();
        assert_eq!(&src[d.span.start as usize..d.span.end as usize], "sin");
        assert!(d.message.contains("higher-order") && d.message.contains("§3"), "{}", d.message);
    }
}
