#!/usr/bin/env bash
# npm test's first step: the type check and the formatting check side by side (a few seconds each
# on its own); it fails when either fails, each printing what it found. Prettier keeps a cache of
# the files it found formatted (node_modules/.cache/prettier, by content): an unchanged file is not
# formatted again.
set -uo pipefail
cd "$(dirname "$0")/.."

# typescript 7 by its path: typescript5 (kept for its compiler API) also installs a `tsc`
node_modules/typescript/bin/tsc --noEmit &
types=$!
node_modules/.bin/prettier --check --cache --cache-strategy content '*.ts' report fakes calibrate test &
format=$!

status=0
wait "$types" || status=1
wait "$format" || status=1
exit "$status"
