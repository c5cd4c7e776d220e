//! Tests of the parser and resolver.
use super::*;
