#!/usr/bin/env bash
# Runs every test: the native workspace tests (unit, golden, property, bad input, examples on every
# stage) and `cotangent check examples/*.cot`. Installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo is required (rustup)"; exit 2; }
cargo build --release -p cotangent
cargo test --release --workspace
./target/release/cotangent check examples/*.cot
