#!/usr/bin/env bash
# What `npm test` needs beyond node_modules, installed once from Debian's packages when missing:
# chromium (the page tests) and NLTK, SciPy, scikit-learn (test/analysis.test.ts's cross-check).
# npm runs it before `npm test` (the pretest script); .ci/run relies on the same step.
set -euo pipefail

missing=''
if [ ! -x /usr/bin/chromium ]; then
  missing="$missing chromium"
fi
# found, not imported: importing scikit-learn alone takes a second
found='import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ("nltk", "scipy", "sklearn")))'
if ! /usr/bin/python3 -c "$found" 2>/dev/null; then
  missing="$missing python3-nltk python3-scipy python3-sklearn"
fi
if [ -z "$missing" ]; then
  exit 0
fi

sudo=''
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "test-deps: the tests need$missing (Debian packages); install them as root: apt-get install$missing" >&2
    exit 1
  fi
  sudo='sudo'
fi
echo "test-deps: installing$missing from Debian's packages (once)" >&2
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
