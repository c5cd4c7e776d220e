//! Part A, the scalar background of the array paper (Smeding et al. §2): the naive transform D of
//! Figs. 1–2 (dual numbers with a Delta *tree*), its four evaluators (§2.3–2.4), and D with IdGen and
//! Share (§2.5, Fig. 3) with the sharing-aware reverse pass (§2.6, Fig. 5) and the wrapper (§2.7,
//! Fig. 6).
//!
//! The Delta terms, their graph and both translations are the Krawiec chain's, from the kit
//! (`kit::delta`): Fig. 2 is `kit::delta::dual` with the Delta companion (Fig. 2's rules are Krawiec
//! Fig. 7's), and Fig. 3 is `kit::delta::drev` with `Naming::Share` (Krawiec Fig. 9 names a Delta by
//! `deltaLet` and `Var`, Fig. 3 by `genID` and `Share`). What is this paper's own is here:
//! - `program`: the wrappers of §2.3 (Eq. 2) and §2.7 (Fig. 6) around the translated program, with
//!   `named_S` and `reconstruct_S` generated per input type, and the refusals (arrays, t : R);
//! - `runtime`: Input, genID, Share, runIdGen and the state the graph reads;
//! - `evals`: eval0 … eval3 on the Delta tree (§2.3–2.4), with their visit counts;
//! - `backprop`: eval4/backprop4/reversePass4 (§2.6, Fig. 5), with its steps (the accum, dfrag and grad
//!   maps).
//!
//! Decisions (note §8): inputs are named 0, 1, … left to right (E3's `Input 0`); IDs start at 1
//! (`runIdGen 0`, genID increments first, as Fig. 4 numbers them); an input that no Input reaches gets
//! 0 (note 13); an integer input leaf is handed back unchanged ("the input", §2.7); the gradient vector
//! (`Array R`, one entry per real input) stands for the paper's `Map DVarName R`; eval2's Scale rule is
//! the intended one, `eval2 d tg = tg + eval1 d` (erratum §2.4).

pub mod backprop;
pub mod evals;
pub mod program;
pub mod runtime;
