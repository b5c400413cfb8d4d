#!/usr/bin/env bash
# npm test's first step: the type check and the formatting check side by side (a few seconds each
# on its own); it fails when either fails, each printing what it found.
set -uo pipefail
cd "$(dirname "$0")/.."

node_modules/.bin/tsc --noEmit &
types=$!
node_modules/.bin/prettier --check '*.ts' test &
format=$!

status=0
wait "$types" || status=1
wait "$format" || status=1
exit "$status"
