#!/bin/sh
# Regenerates www/vendor/codemirror.bundle.js (committed) from codemirror-entry.js.
# Run once after changing the entry or the @codemirror/* versions in package.json: `npm run bundle-codemirror`.
set -eu
cd "$(dirname "$0")/../.."
npx esbuild www/vendor/codemirror-entry.js --bundle --format=esm --minify --legal-comments=none \
  --outfile=www/vendor/codemirror.bundle.js
