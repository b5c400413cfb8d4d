# The reference figures of test/analysis.test.ts, computed by scikit-learn, SciPy and NLTK
# (Debian's python3-sklearn, python3-scipy, python3-nltk): /usr/bin/python3 test/reference/analysis-reference.py
# Scores are used by their position on the dimension's scale, as report-analysis.ts does.
import json
from nltk.metrics.agreement import AnnotationTask
from nltk.metrics.distance import interval_distance
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score

SCALES = {"x": [0, 1, 2, 3], "y": [0, 2, 4]}
# (model, task_id, x, y): the judge CSV; a/t4 has no human row.
JUDGE = [
    ("a", "t1", 0, 0), ("a", "t2", 1, 2), ("a", "t3", 3, 4), ("a", "t4", 2, 2),
    ("b", "t1", 2, 2), ("b", "t2", 2, 4), ("b", "t3", 1, 0),
    ("c", "t1", 3, 4), ("c", "t2", 0, 2), ("c", "t3", 2, 2),
]
# (model, task_id, scorer, x, y); c/t9 has no judge row.
HUMANS = [
    ("a", "t1", "al", 0, 0), ("a", "t1", "bo", 1, 0), ("a", "t1", "cy", 0, 4),
    ("a", "t2", "al", 1, 2), ("a", "t2", "bo", 2, 2),
    ("a", "t3", "bo", 3, 4),
    ("b", "t1", "al", 1, 2), ("b", "t1", "cy", 2, 0),
    ("b", "t2", "al", 3, 4), ("b", "t2", "bo", 2, 4), ("b", "t2", "cy", 3, 2),
    ("b", "t3", "cy", 3, 0),
    ("c", "t1", "al", 3, 2), ("c", "t1", "bo", 2, 4),
    ("c", "t2", "al", 1, 0), ("c", "t2", "bo", 0, 0),
    ("c", "t3", "al", 2, 4), ("c", "t3", "bo", 3, 2), ("c", "t3", "cy", 2, 2),
    ("c", "t9", "al", 1, 2),
]


def pos(d, score):
    return SCALES[d].index(score)


def kappa(pairs, k):
    if not pairs:
        return None
    return cohen_kappa_score([a for a, _ in pairs], [b for _, b in pairs], labels=list(range(k)), weights="quadratic")


def shares(pairs):
    n = len(pairs)
    return n, sum(a == b for a, b in pairs) / n, sum(abs(a - b) <= 1 for a, b in pairs) / n


def alpha(units):
    data = [(coder, item, value) for item, ratings in units.items() for coder, value in ratings]
    return AnnotationTask(data=data, distance=interval_distance).alpha()


judge = {(m, t): {"x": x, "y": y} for m, t, x, y in JUDGE}
humans = {}
for m, t, s, x, y in HUMANS:
    humans.setdefault((m, t), []).append((s, {"x": x, "y": y}))
matched = [key for key in humans if key in judge]
out = {"dimensions": {}, "models": {}}
for d, scale in SCALES.items():
    k = len(scale)
    jp = [(pos(d, h[d]), pos(d, judge[key][d])) for key in matched for _, h in humans[key]]
    multi = [key for key in matched if len(humans[key]) >= 2]
    hp = []
    for key in multi:
        rows = sorted(humans[key], key=lambda r: r[0])
        for i in range(len(rows)):
            for j in range(i + 1, len(rows)):
                hp.append((pos(d, rows[i][1][d]), pos(d, rows[j][1][d])))
    jp_multi = [(pos(d, h[d]), pos(d, judge[key][d])) for key in multi for _, h in humans[key]]
    lenient = [judge[key][d] - sum(h[d] for _, h in humans[key]) / len(humans[key]) for key in matched]
    human_units = {str(key): [(s, pos(d, h[d])) for s, h in humans[key]] for key in matched}
    with_judge = {key: ratings + [("judge", pos(d, judge[eval(key)][d]))] for key, ratings in human_units.items()}
    n, exact, within = shares(jp)
    per_model = []
    for model in sorted({m for m, _ in matched}):
        pairs = [(pos(d, h[d]), pos(d, judge[key][d])) for key in matched if key[0] == model for _, h in humans[key]]
        pn, pe, pw = shares(pairs)
        per_model.append({"model": model, "n": pn, "exact": pe, "within_one": pw, "kappa": kappa(pairs, k)})
    out["dimensions"][d] = {
        "n": n, "exact": exact, "within_one": within, "kappa": kappa(jp, k),
        "ceiling_n": len(hp), "ceiling_kappa": kappa(hp, k),
        "kappa_diff": kappa(jp_multi, k) - kappa(hp, k),
        "leniency": sum(lenient) / len(lenient),
        "alpha_humans": alpha(human_units), "alpha_humans_and_judge": alpha(with_judge),
        "per_model": per_model,
    }
    jm, hm = [], []
    for model in sorted({m for m, _ in judge} | {m for m, _ in humans}):
        keys = [key for key in matched if key[0] == model]
        entry = out["models"].setdefault(model, {"n_matched": len(keys), "judge_mean": {}, "human_mean": {}, "judge_mean_all": {}})
        entry["judge_mean"][d] = sum(judge[key][d] for key in keys) / len(keys)
        entry["human_mean"][d] = sum(sum(h[d] for _, h in humans[key]) / len(humans[key]) for key in keys) / len(keys)
        alls = [v[d] for key, v in judge.items() if key[0] == model]
        entry["judge_mean_all"][d] = sum(alls) / len(alls)
        jm.append(entry["judge_mean"][d])
        hm.append(entry["human_mean"][d])
    out["dimensions"][d]["spearman"] = spearmanr(jm, hm).correlation

# Alpha on its own: NLTK's on four small cases (positions), for intervalAlpha.
cases = {
    "three raters, one unit with one value": [[0, 1, 2], [1, 1], [2, 2, 1], [0], [2, 0]],
    "one step off everywhere": [[0, 1], [1, 2], [2, 1], [1, 0]],
    "perfect": [[0, 0], [1, 1, 1], [2, 2]],
}
out["alpha"] = {}
for name, units in cases.items():
    data = [(f"r{i}", f"u{u}", v) for u, unit in enumerate(units) for i, v in enumerate(unit)]
    out["alpha"][name] = AnnotationTask(data=data, distance=interval_distance).alpha()
print(json.dumps(out, indent=1))
