# The reference figures of issue 23's verdicts (test/analysis.test.ts): on the data sets of
# verdict-sets.json, the gap to the human ceiling and its paired interval, its non-inferiority
# verdict at margin 0.1, the transcripts that would roughly decide an undetermined one, and
# leniency with its reading:  /usr/bin/python3 test/reference/verdicts-reference.py
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bootstrap import interval, kappa, sklearn_kappa

HERE = os.path.dirname(os.path.abspath(__file__))
SETS = json.load(open(os.path.join(HERE, "verdict-sets.json")))
LABELS = [0, 1, 2]
MARGIN = 0.1
k = len(LABELS)


def transcripts(data):
    """In the order the report meets them: each transcript's first human row; its scorers sorted."""
    judge = {(m, t): s for m, t, s in data["judge"]}
    units = {}
    for m, t, scorer, s in data["humans"]:
        units.setdefault((m, t), []).append((scorer, s))
    return [(judge[key], [s for _, s in sorted(rows)]) for key, rows in units.items() if key in judge]


def judge_pairs(units):
    return [(LABELS.index(h), LABELS.index(j)) for j, hs in units for h in hs]


def scorer_pairs(units):
    return [(LABELS.index(hs[a]), LABELS.index(hs[b])) for _, hs in units for a in range(len(hs)) for b in range(a + 1, len(hs))]


def gap(units):
    judge, human = kappa(judge_pairs(units), k), kappa(scorer_pairs(units), k)
    return None if judge is None or human is None else judge - human


def leniency(units):
    return sum(j - sum(hs) / len(hs) for j, hs in units) / len(units)


out = {}
for name, data in SETS.items():
    units = transcripts(data)
    multi = [unit for unit in units if len(unit[1]) >= 2]
    point = sklearn_kappa(judge_pairs(multi), k) - sklearn_kappa(scorer_pairs(multi), k)
    ci, _ = interval(multi, gap)
    if ci[0] >= -MARGIN:
        verdict, more = "as_good", None
    elif ci[1] < -MARGIN:
        verdict, more = "below", None
    else:
        verdict = "undetermined"
        half = point - ci[0] if point >= -MARGIN else ci[1] - point
        needed = len(multi) * (half / abs(point + MARGIN)) ** 2
        more = max(1, -int(-(needed - len(multi)) // 1))
    lenient_ci, _ = interval(units, leniency)
    reading = "lenient" if lenient_ci[0] > 0 else "harsh" if lenient_ci[1] < 0 else None
    out[name] = {
        "kappa_diff": point, "ci95": ci, "verdict": verdict, "more_transcripts_to_decide": more,
        "leniency": leniency(units), "leniency_ci95": lenient_ci, "leniency_reading": reading,
    }
print(json.dumps(out, indent=1))
