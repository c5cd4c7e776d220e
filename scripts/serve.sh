#!/usr/bin/env bash
# Serves the playground on http://127.0.0.1:8080/ with rebuild and reload on change, installing what is
# missing first. Extra arguments go to `trunk serve` (e.g. --release for an optimised build).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"   # wasm-opt 132 from npm binaryen (release builds)
echo "== http://127.0.0.1:8080/"
exec trunk serve "$@"
