# Checks report.ts --format json on a large set against scikit-learn, SciPy and NLTK: kappa, the
# ceiling, alpha (both), leniency, model means and Spearman per dimension. The set is one that
# `npm run bench -- report` writes (/tmp/run-judge-bench-report-*), or any folder with scores.csv,
# human_scores.csv and rubric.json:  /usr/bin/python3 test/reference/check-report-json.py DIR
import csv, json, os, subprocess, sys
from nltk.metrics.agreement import AnnotationTask
from nltk.metrics.distance import interval_distance
from sklearn.metrics import cohen_kappa_score
from scipy.stats import spearmanr
D = sys.argv[1]
rubric = json.load(open(f"{D}/rubric.json"))
scales = {d["name"]: sorted(int(k) for k in d["scores"]) for d in rubric["dimensions"]}
judge = {(r["task_id"], r["model"]): r for r in csv.DictReader(open(f"{D}/scores.csv"))}
humans = {}
for r in csv.DictReader(open(f"{D}/human_scores.csv")):
    humans.setdefault((r["task_id"], r["model"]), []).append(r)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
args = ["--scores", f"{D}/scores.csv", "--human-scores", f"{D}/human_scores.csv", "--rubric", f"{D}/rubric.json"]
printed = subprocess.run(["node", "--import", "tsx", "report.ts", *args, "--log", f"{D}/no-log.jsonl", "--format", "json"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
ours = json.loads(printed)
worst = 0
for dim in ours["dimensions"]:
    name = dim["name"]; sc = scales[name]; k = len(sc); p = lambda v: sc.index(int(v))
    a = []; b = []; ha = []; hb = []; data = []; dataj = []; len_ = []
    for key, rows in humans.items():
        j = judge[key]
        rows = sorted(rows, key=lambda r: r["scorer"])
        for r in rows:
            a.append(p(r[name])); b.append(p(j[name]))
            data.append((r["scorer"], str(key), p(r[name])))
        dataj += data[-len(rows):] + [("judge", str(key), p(j[name]))]
        for x in range(len(rows)):
            for y in range(x + 1, len(rows)):
                ha.append(p(rows[x][name])); hb.append(p(rows[y][name]))
        len_.append(int(j[name]) - sum(int(r[name]) for r in rows) / len(rows))
    ref = {
        "kappa": cohen_kappa_score(a, b, labels=list(range(k)), weights="quadratic"),
        "ceiling": cohen_kappa_score(ha, hb, labels=list(range(k)), weights="quadratic"),
        "alpha_h": AnnotationTask(data=data, distance=interval_distance).alpha(),
        "alpha_hj": AnnotationTask(data=dataj, distance=interval_distance).alpha(),
        "leniency": sum(len_) / len(len_),
    }
    mine = {
        "kappa": dim["judge_vs_human"]["kappa"], "ceiling": dim["human_vs_human"]["kappa"],
        "alpha_h": dim["alpha"]["humans"], "alpha_hj": dim["alpha"]["humans_and_judge"],
        "leniency": dim["leniency"]["mean_diff"],
    }
    for f in ref:
        worst = max(worst, abs(ref[f] - mine[f]))
        print(name, f, round(ref[f], 6), round(mine[f], 6))
    jm = [m["judge_mean"][name] for m in ours["models"]]; hm = [m["human_mean"][name] for m in ours["models"]]
    models = [m["model"] for m in ours["models"]]
    rj = [sum(int(judge[key][name]) for key in humans if key[1] == mo) / sum(1 for key in humans if key[1] == mo) for mo in models]
    rh = [sum(sum(int(r[name]) for r in rows) / len(rows) for key, rows in humans.items() if key[1] == mo) / sum(1 for key in humans if key[1] == mo) for mo in models]
    sp = spearmanr(rj, rh).correlation
    worst = max(worst, abs(sp - ours["ranking"][name]), max(abs(x - y) for x, y in zip(rj + rh, jm + hm)))
    print(name, "spearman", round(sp, 6), round(ours["ranking"][name], 6))
print("largest difference", worst)
