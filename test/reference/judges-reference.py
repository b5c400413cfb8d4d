# The reference figures of judges against each other, juries and self-preference
# (test/analysis.test.ts), on judge-sets.json: three judges of three families, tutors of the same
# three, two scorers a transcript, x scored 0..3:  /usr/bin/python3 test/reference/judges-reference.py
import json, os, sys
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bootstrap import interval, kappa, sklearn_kappa
from tutor_interval import self_preference

HERE = os.path.dirname(os.path.abspath(__file__))
SET = json.load(open(os.path.join(HERE, "judge-sets.json")))
K = 4
NAMES = list(SET["judges"])
# Units in the order the report meets them (each transcript's first human row): (tutor, judge
# scores by name, human scores by sorted scorer).
scores = {name: {(m, t): s for m, t, s in rows} for name, rows in SET["judges"].items()}
people = {}
for m, t, scorer, s in SET["humans"]:
    people.setdefault((m, t), []).append((scorer, s))
UNITS = [(key[0], {name: scores[name][key] for name in NAMES}, [s for _, s in sorted(rows)]) for key, rows in people.items()]


def with_people(units, name):
    return [(h, judges[name]) for _, judges, hs in units for h in hs]


def between(units, a, b):
    return [(judges[a], judges[b]) for _, judges, _ in units]


def diff(units, name):
    first, other = kappa(with_people(units, NAMES[0]), K), kappa(with_people(units, name), K)
    return None if first is None or other is None else other - first


out = {"against_first": {}}
for name in NAMES[1:]:
    pairs = between(UNITS, NAMES[0], name)
    out["against_first"][name] = {
        "kappa_diff": sklearn_kappa(with_people(UNITS, name), K) - sklearn_kappa(with_people(UNITS, NAMES[0]), K),
        "ci95": interval(UNITS, lambda units: diff(units, name))[0],
        "exact": float(np.mean([a == b for a, b in pairs])),
        "kappa": sklearn_kappa(pairs, K),
        "kappa_ci95": interval(UNITS, lambda units: kappa(between(units, NAMES[0], name), K))[0],
    }

# Juries: per transcript the median of the members' scores, of an even count the lower middle one.
def with_jury(units, members):
    jury = lambda judges: sorted(judges[name] for name in members)[(len(members) - 1) // 2]
    return [(tutor, dict(judges, jury=jury(judges)), hs) for tutor, judges, hs in units]


def leniency(units, name):
    return float(np.mean([judges[name] - np.mean(hs) for _, judges, hs in units]))


out["juries"] = {}
for members in (NAMES[:2], NAMES):
    units = with_jury(UNITS, members)
    out["juries"][",".join(members)] = {
        "kappa": sklearn_kappa(with_people(units, "jury"), K),
        "kappa_ci95": interval(units, lambda drawn: kappa(with_people(drawn, "jury"), K))[0],
        "leniency": leniency(units, "jury"),
        "leniency_ci95": interval(units, lambda drawn: leniency(drawn, "jury"))[0],
        "kappa_diff_from_first": sklearn_kappa(with_people(units, "jury"), K) - sklearn_kappa(with_people(units, NAMES[0]), K),
        "exact_with_first": float(np.mean([a == b for a, b in between(units, NAMES[0], "jury")])),
    }

# Self-preference: leniency over the judge's own family's tutors minus over the others', the tutor
# the unit of its interval (tutor_interval.py): one tutor a family here, so no interval.
out["self_preference"] = {}
for name in NAMES:
    family = SET["judge_families"][name]
    units = [(tutor, SET["tutor_families"][tutor] == family, judges[name] - float(np.mean(hs))) for tutor, judges, hs in UNITS]
    out["self_preference"][name] = dict(family=family, **self_preference(units))
print(json.dumps(out, indent=1))
