#!/usr/bin/env bash
# Installs what the playground needs, skipping whatever is already there (idempotent; Debian 12, root,
# Rust via rustup, node >= 20; no GitHub access needed). See ../shared/notes/toolchain.md for why each pin.
#   --browser   also install Debian's chromium + chromium-driver (needed by the tests, not by serve.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
WANT_BROWSER=0
[ "${1:-}" = "--browser" ] && WANT_BROWSER=1

say() { printf '== %s\n' "$*"; }
# The wasm-bindgen CLI must equal the wasm-bindgen crate in Cargo.lock (pinned with `=` in web/Cargo.toml).
WB=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"/\1/p' | head -1)

rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown \
  || { say "rustup target add wasm32-unknown-unknown"; rustup target add wasm32-unknown-unknown; }

if ! { command -v wasm-bindgen >/dev/null && [ "$(wasm-bindgen --version)" = "wasm-bindgen $WB" ]; }; then
  # No --locked: the lockfile of wasm-bindgen-cli pins a crate the registry mirror lacks.
  say "cargo install wasm-bindgen-cli $WB (about 2.5 min)"
  cargo install wasm-bindgen-cli --version "$WB" --force
fi

if ! { command -v trunk >/dev/null && trunk --version | grep -q '0\.21\.'; }; then
  # trunk 0.22 needs rustc >= 1.96.1; 0.21.14 is the newest that builds on Rust 1.95.
  say "cargo install trunk 0.21.14 (about 8 min)"
  cargo install trunk --version 0.21.14 --locked
fi

if [ "$WANT_BROWSER" = 1 ] && ! { command -v chromium >/dev/null && command -v chromedriver >/dev/null; }; then
  say "apt-get install chromium chromium-driver"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update && $SUDO apt-get install -y chromium chromium-driver
fi

# playwright-core, binaryen (wasm-opt 132), esbuild and CodeMirror sources into ./node_modules.
if [ ! -x node_modules/.bin/wasm-opt ] || [ ! -d node_modules/playwright-core ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "npm ci"
  npm ci --no-audit --no-fund || npm install --no-audit --no-fund
fi
say "setup done"
