//! The shared transformation kit: what several chains' stages need and no one stage owns. A stage file
//! imports its chain's `common` and this kit, never another stage file.

pub mod passes;
pub mod arrays;
pub mod delta;
pub mod monad_laws;
pub mod monadic;
pub mod pmap;
pub mod polytypic;
pub mod rewrite;
pub mod translate;
