# The reference figures of the alternative annotator test (report/alt-test.ts, test/alt-test.test.ts)
# on alt-test-sets.json, by the procedure of Calderon, Reichart and Dror (ACL 2025) as their notebook
# (github.com/nitaytech/AltTest, alt_test_example.ipynb) runs it: leave one scorer out; on each
# instance it and another scored, neg_rmse of the judge and of the scorer against the others, ties
# count for both; ttest_1samp(excluded - llm indicators, epsilon, alternative='less'); the
# Benjamini-Yekutieli procedure at q = 0.05; winning rate and advantage probability over the
# scorers tested; a scorer under min_instances_per_human skipped. Here scores are positions on the
# scale, min_instances_per_human is 15, a skipped scorer is listed with p None, and a p-value SciPy
# leaves NaN (no spread, mean at epsilon) is 1.
#   /usr/bin/python3 test/reference/alt-test-reference.py
import json, math, os
import numpy as np
from scipy import stats

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = json.load(open(os.path.join(HERE, "alt-test-sets.json")))


def by_procedure(p_values, q):  # the notebook's, as written
    p_values = np.array(p_values, dtype=float)
    m = len(p_values)
    sorted_indices = np.argsort(p_values)
    sorted_pvals = p_values[sorted_indices]
    H_m = np.sum(1.0 / np.arange(1, m + 1))
    by_thresholds = (np.arange(1, m + 1) / m) * (q / H_m)
    max_i = -1
    for i in range(m):
        if sorted_pvals[i] <= by_thresholds[i]:
            max_i = i
    if max_i == -1:
        return []
    return list(sorted_indices[:max_i + 1])


def neg_rmse(pred, annotations):  # the notebook's
    return -1 * float(np.sqrt(np.mean([(pred - ann) ** 2 for ann in annotations])))


def alt_test(llm, humans, epsilon, q=0.05, min_instances_per_human=15):
    h_set = {}
    for h, anns in humans.items():
        for i in anns:
            h_set.setdefault(i, []).append(h)
    keep = {i for i in h_set if len(h_set[i]) >= 2 and i in llm}
    listed = [h for h in sorted(humans) if any(i in keep for i in humans[h])]
    p_values, per, tested = [], [], []
    for h in listed:
        llm_ind, exc_ind = [], []
        for i in [i for i in humans[h] if i in keep]:
            remaining = [humans[o][i] for o in h_set[i] if o != h]
            human_score = neg_rmse(humans[h][i], remaining)
            llm_score = neg_rmse(llm[i], remaining)
            llm_ind.append(1 if llm_score >= human_score else 0)
            exc_ind.append(1 if human_score >= llm_score else 0)
        entry = {"scorer": h, "n": len(llm_ind), "rho_judge": float(np.mean(llm_ind)), "rho_scorer": float(np.mean(exc_ind)), "p": None, "rejected": False}
        per.append(entry)
        if len(llm_ind) < min_instances_per_human:
            continue
        diff = [e - l for e, l in zip(exc_ind, llm_ind)]
        p = float(stats.ttest_1samp(diff, epsilon, alternative="less").pvalue)
        entry["p"] = 1.0 if math.isnan(p) else p
        p_values.append(entry["p"])
        tested.append(entry)
    if len(tested) < 3:
        return {"scorers": len(tested), "winning_rate": None, "passes": None, "advantage_probability": None, "per_scorer": per}
    rejected = by_procedure(p_values, q)
    for i, entry in enumerate(tested):
        entry["rejected"] = bool(i in rejected)
    winning_rate = len(rejected) / len(tested)
    return {
        "scorers": len(tested), "winning_rate": winning_rate, "passes": winning_rate >= 0.5,
        "advantage_probability": float(np.mean([entry["rho_judge"] for entry in tested])), "per_scorer": per,
    }


out = []
for data in DATA["sets"]:
    epsilon = data["epsilon"]
    position = {label: i for i, label in enumerate(data["labels"])}
    llm = {(m, t): position[s] for m, t, s in data["judge"]}
    humans = {}
    for m, t, scorer, s in data["humans"]:
        humans.setdefault(scorer, {})[(m, t)] = position[s]
    out.append(alt_test(llm, humans, epsilon))

# Every set tested together: Benjamini-Yekutieli over all their scorers' p-values.
pooled = [entry["p"] for result in out if result["winning_rate"] is not None for entry in result["per_scorer"] if entry["p"] is not None]
rejected = set(by_procedure(pooled, 0.05)) if pooled else set()
together, at = [], 0
for result in out:
    if result["winning_rate"] is None:
        together.append(None)
        continue
    count = result["scorers"]
    won = sum(1 for i in range(at, at + count) if i in rejected)
    together.append(won / count >= 0.5)
    at += count
print(json.dumps({"sets": out, "together": together}))
