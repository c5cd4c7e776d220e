#!/usr/bin/env bash
# Every playground test, installing what is missing first (including Debian's chromium + chromium-driver):
#  1. the web crate's native unit tests;
#  2. wasm-bindgen tests of the web crate in Node and in headless Chromium;
#  3. a release `trunk build` (wasm-bindgen + wasm-opt 132, no network);
#  4. the browser end-to-end tests (playwright-core + Debian chromium) against dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --browser
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"

echo "== web crate: native tests"
cargo test -p cotangent-web

echo "== web crate: wasm-bindgen tests (Node, headless Chromium)"
cargo test --target wasm32-unknown-unknown -p cotangent-web
echo "== web crate: the wasm the page ships (profile wasm-release: fat LTO), at its nesting limit (Node)"
cargo test --profile wasm-release --target wasm32-unknown-unknown -p cotangent-web --test node

echo "== trunk build --release"
trunk build --release

echo "== browser end-to-end tests"
node e2e/e2e.mjs
