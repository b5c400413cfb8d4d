# The reference figures of the report's verdicts (test/verdicts.test.ts), written again from
# docs/analysis.md ("Verdicts") with numpy, SciPy and scikit-learn: on the data sets of
# verdict-sets.json, per dimension the gap to the human ceiling, its 95% interval (the jackknife
# test on Fisher's z scale with Hall's correction and kurtosis-adjusted degrees of freedom,
# inverted), its verdict at margin 0.1 read with every dimension's by Holm's procedure, the
# reason, the transcripts that would decide it, and leniency with its bootstrap interval and its
# reading (a t-test, Holm over the dimensions):
#   /usr/bin/python3 test/reference/verdicts-reference.py
import json, os, sys
import numpy as np
from scipy import stats
from scipy.optimize import brentq
from sklearn.metrics import cohen_kappa_score

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bootstrap import interval

HERE = os.path.dirname(os.path.abspath(__file__))
SETS = json.load(open(os.path.join(HERE, "verdict-sets.json")))
LABELS = [0, 1, 2]
MARGIN = 0.1
MIN_TRANSCRIPTS = 30
ALPHA = 0.05
Z80 = stats.norm.ppf(0.8)
k = len(LABELS)


def transcripts(data):
    """In the order the report meets them: each transcript's first human row; its scorers sorted."""
    judge = {(m, t): s for m, t, *s in data["judge"]}
    units = {}
    for m, t, scorer, *s in data["humans"]:
        units.setdefault((m, t), []).append((scorer, s))
    return [(judge[key], [s for _, s in sorted(rows)]) for key, rows in units.items() if key in judge]


def sk_kappa(pairs):
    """scikit-learn's quadratic-weighted kappa on positions; None when undefined."""
    if not pairs:
        return None
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = cohen_kappa_score(a, b, labels=list(range(k)), weights="quadratic")
    return None if not np.isfinite(value) else float(value)


def kappas(units, d):
    judge = [(LABELS.index(h[d]), LABELS.index(j[d])) for j, hs in units for h in hs]
    scorers = [(LABELS.index(hs[a][d]), LABELS.index(hs[b][d]))
               for _, hs in units for a in range(len(hs)) for b in range(a + 1, len(hs))]
    return sk_kappa(judge), sk_kappa(scorers)


def jackknife(units, d):
    """Both kappas on every transcript and with each transcript left out in turn."""
    judge, ceiling = kappas(units, d)
    if judge is None or ceiling is None:
        return None
    out = [kappas(units[:i] + units[i + 1:], d) for i in range(len(units))]
    return {"n": len(units), "judge": judge, "ceiling": ceiling,
            "out": out, "defined": all(a is not None and b is not None for a, b in out)}


def z(value):
    return np.inf if value >= 1 else -np.inf if value <= -1 else np.arctanh(value)


def linearised(jack, delta):
    """psi = atanh(judge) - atanh(ceiling + delta) and the linearised pseudo-values of it."""
    n = jack["n"]
    judge, ceiling = jack["judge"], jack["ceiling"] + delta
    if abs(judge) >= 1 or abs(ceiling) >= 1:
        a, b = z(judge), z(ceiling)
        return (0.0 if a == b else a - b), None
    pj = np.array([n * jack["judge"] - (n - 1) * a for a, _ in jack["out"]])
    pc = np.array([n * jack["ceiling"] - (n - 1) * b for _, b in jack["out"]])
    return np.arctanh(judge) - np.arctanh(ceiling), pj / (1 - judge ** 2) - pc / (1 - ceiling ** 2)


def test_at(jack, delta):
    """(statistic, df, two-sided p): sqrt(n) g(psi / sd), g Hall's transformation with the
    pseudo-values' skewness; df 2 / (2 / (n - 1) + max(0, excess kurtosis) / n)."""
    n = jack["n"]
    psi, q = linearised(jack, delta)
    df = n - 1.0
    t = 0.0 if psi == 0 else np.sign(psi) * np.inf
    if q is not None and np.std(q) > 0:
        df = 2 / (2 / (n - 1) + max(0.0, stats.kurtosis(q)) / n)
        if np.isfinite(psi):
            s = psi / np.std(q, ddof=1)
            gamma = stats.skew(q)
            g = s if gamma == 0 else ((1 + gamma * s / 3) ** 3 - 1) / gamma + gamma / (6 * n)
            t = np.sqrt(n) * g
    return t, df, min(1.0, 2 * stats.t.cdf(-abs(t), df))


def gap_interval(jack):
    """The hypothesised gaps the test keeps (p > 0.05), from the estimate outwards: in steps of 0.01
    to the first rejected, then the root of p = 0.05 between the two."""
    estimate = jack["judge"] - jack["ceiling"]
    kept = lambda d: test_at(jack, d)[2] > 0.05

    def end(limit, direction):
        inside, delta = estimate, estimate + 0.01 * direction
        outside = limit
        while direction * (limit - delta) > 0:
            if not kept(delta):
                outside = delta
                break
            inside, delta = delta, delta + 0.01 * direction
        if kept(outside):
            return outside
        f = lambda d: test_at(jack, d)[2] - 0.05
        if f(outside) == -0.05:  # p is 0 there: the jump at a kappa of +-1, bisected
            lo, hi = inside, outside
            for _ in range(200):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if kept(mid) else (lo, mid)
            return lo
        return brentq(f, inside, outside, xtol=1e-15, rtol=4 * np.finfo(float).eps)

    return [end(-1 - jack["ceiling"], -1), end(1 - jack["ceiling"], 1)]


def gap_test(jack):
    if jack is None:
        return {"reason": "no_ceiling", "p": 1.0, "side": "as_good"}
    if jack["n"] < MIN_TRANSCRIPTS or not jack["defined"]:
        return {"reason": "too_few", "p": 1.0, "side": "as_good"}
    t, _, p = test_at(jack, -MARGIN)
    return {"reason": None, "p": p, "side": "as_good" if t >= 0 else "below"}


def holm(ps, alpha=ALPHA):
    """Holm's step-down procedure."""
    order = sorted(range(len(ps)), key=lambda i: (ps[i], i))
    rejected = [False] * len(ps)
    for step, i in enumerate(order):
        if ps[i] > alpha / (len(ps) - step):
            break
        rejected[i] = True
    return rejected


def to_decide(jack, alpha):
    """The least N (>= 30, > n) whose statistic sqrt(N) |g(psi / sd)| (g Hall's, at N) reaches
    t(df_N, 1 - alpha/2) + z(0.8) at -margin, df_N = 2 / (2 / (N - 1) + max(0, kurtosis) / N)."""
    n = jack["n"]
    psi, q = linearised(jack, -MARGIN)
    if not jack["defined"] or abs(psi) < 1e-9:
        return None
    N = max(MIN_TRANSCRIPTS, n + 1)
    if q is None or np.std(q) == 0 or not np.isfinite(psi):
        return N
    s, gamma, kurtosis = psi / np.std(q, ddof=1), stats.skew(q), max(0.0, stats.kurtosis(q))
    g = lambda N: s if gamma == 0 else ((1 + gamma * s / 3) ** 3 - 1) / gamma + gamma / (6 * N)
    df = lambda N: 2 / (2 / (N - 1) + kurtosis / N)
    while np.sqrt(N) * abs(g(N)) < stats.t.ppf(1 - alpha / 2, df(N)) + Z80:
        N += 1
    return N


def leniency_test(diffs):
    n = len(diffs)
    mean = float(np.mean(diffs)) if n else 0.0
    side = "lenient" if mean >= 0 else "harsh"
    if n < 2:
        return 1.0, side
    sd = np.std(diffs, ddof=1)
    if sd <= 1e-12 * max(1, abs(mean)):
        return (0.0 if abs(mean) > 1e-12 and n >= MIN_TRANSCRIPTS else 1.0), side
    return float(stats.ttest_1samp(diffs, 0).pvalue), side


out = {}
for name, data in SETS.items():
    dims = len(data["judge"][0]) - 2
    units = transcripts(data)
    multi = [unit for unit in units if len(unit[1]) >= 2]
    jacks = [jackknife(multi, d) for d in range(dims)]
    tests = [gap_test(jack) for jack in jacks]
    rejected = holm([test["p"] for test in tests])
    level = ALPHA / max(1, dims - sum(rejected))
    leniencies = [leniency_test([(len(hs) * j[d] - sum(h[d] for h in hs)) / len(hs) for j, hs in units])
                  for d in range(dims)]
    readings = holm([p for p, _ in leniencies])
    figures = []
    for d, (jack, test) in enumerate(zip(jacks, tests)):
        verdict = None if test["reason"] == "no_ceiling" else test["side"] if rejected[d] else "undetermined"
        lenient_ci, _ = interval(units, lambda drawn: sum(j[d] - sum(h[d] for h in hs) / len(hs)
                                                          for j, hs in drawn) / len(drawn))
        figures.append({
            "kappa_diff": None if jack is None else jack["judge"] - jack["ceiling"],
            "ci95": gap_interval(jack) if jack is not None and jack["defined"] else None,
            "verdict": verdict,
            "reason": test["reason"],
            "transcripts_to_decide": to_decide(jack, level) if verdict == "undetermined" else None,
            "leniency": sum(j[d] - sum(h[d] for h in hs) / len(hs) for j, hs in units) / len(units),
            "leniency_ci95": lenient_ci,
            "leniency_reading": leniencies[d][1] if readings[d] else None,
        })
    out[name] = figures
print(json.dumps(out, indent=1))
