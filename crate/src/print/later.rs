//! Text made when it is read. A rewrite keeps hundreds of steps, each with its redex, its result and
//! the program after it; printing them all as they happen was three quarters of a traced rewrite's
//! time (unf/pe on the quaternion), for texts the page shows one step at a time. A step keeps a cut
//! copy of each term instead, and prints it when the stepper, a view or the CLI's JSON reads it.

use std::fmt;
use std::rc::Rc;

/// A text printed when read (each read prints it again: a step's text is read once, by the page or the
/// CLI, and keeping the printed copy too would double what a long trace holds).
#[derive(Clone)]
pub struct Later(Rc<dyn Fn() -> String>);

impl Later {
    /// The text `f` makes when read.
    pub fn new(f: impl Fn() -> String + 'static) -> Later {
        Later(Rc::new(f))
    }
    /// A text already made.
    pub fn ready(text: String) -> Later {
        let text: Rc<str> = text.into();
        Later::new(move || text.to_string())
    }
    /// `e` printed with `o` when read (`e` is kept as given: cut it first, `rewrite::cut_copy`).
    pub fn expr(e: crate::ir::Expr, o: super::PrintOptions) -> Later {
        Later::new(move || super::print_expr(&e, &o))
    }
    pub fn text(&self) -> String {
        (self.0)()
    }
}

impl fmt::Debug for Later {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Later({:?})", self.text())
    }
}

/// By text: two steps are equal when they read the same.
impl PartialEq for Later {
    fn eq(&self, other: &Later) -> bool {
        Rc::ptr_eq(&self.0, &other.0) || self.text() == other.text()
    }
}

impl serde::Serialize for Later {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text())
    }
}
