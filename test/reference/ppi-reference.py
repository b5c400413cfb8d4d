# The reference figures of the tutors compared through the people's sample (test/ppi.test.ts), on
# ppi-sets.json:  /usr/bin/python3 test/reference/ppi-reference.py
#
# 1. PPI++'s mean as ppi_py computes it, written again here from its source (ppi_py is not on this
#    machine): aangelopoulos/ppi_py, ppi_py/ppi.py, `ppi_mean_pointestimate`, `ppi_mean_ci` and
#    `_calc_lam_glm` (1-d, clip=True), with `construct_weight_vector` of ppi_py/utils; its normal
#    interval is statsmodels' `_zconfint_generic` (the estimate +/- z * std).
# 2. The report's interval on it (docs/analysis.md, "The tutors compared"), the long way: centred
#    variances over n - 1 and N - 1, the people's term shrunk toward (range / 3)^2 by one pseudo
#    degree of freedom, lambda's leave-one-out variance, Welch-Satterthwaite, SciPy's t; the
#    narrower of that and the people's alone; the differences between tutors and Holm over them.
import json, os
import numpy as np
from scipy import stats

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = json.load(open(os.path.join(HERE, "ppi-sets.json")))
ALPHA = 0.05


# ---- 1. ppi_py ------------------------------------------------------------------------------

def construct_weight_vector(n_obs, existing_weight, vectorized=False):
    res = np.ones(n_obs) if existing_weight is None else existing_weight / existing_weight.sum() * n_obs
    if vectorized and len(res.shape) == 1:
        res = res[:, None]
    return res


def reshape_to_2d(x):
    return x.reshape(-1, 1) if len(x.shape) == 1 else x.copy()


def calc_lam_glm(grads, grads_hat, grads_hat_unlabeled, inv_hessian, clip=False):
    grads = reshape_to_2d(grads)
    grads_hat = reshape_to_2d(grads_hat)
    grads_hat_unlabeled = reshape_to_2d(grads_hat_unlabeled)
    n = grads.shape[0]
    N = grads_hat_unlabeled.shape[0]
    d = inv_hessian.shape[0]
    grads_cent = grads - grads.mean(axis=0)
    grad_hat_cent = grads_hat - grads_hat.mean(axis=0)
    cov_grads = (1 / n) * (grads_cent.T @ grad_hat_cent + grad_hat_cent.T @ grads_cent)
    var_grads_hat = np.cov(np.concatenate([grads_hat, grads_hat_unlabeled], axis=0).T).reshape(d, d)
    vhat = inv_hessian
    num = np.trace(vhat @ cov_grads @ vhat)
    denom = 2 * (1 + (n / N)) * np.trace(vhat @ var_grads_hat @ vhat)
    lam = (num / denom).item()
    if clip:
        lam = np.clip(lam, 0, 1)
    return lam


def ppi_mean_pointestimate(Y, Yhat, Yhat_unlabeled, lam=None, w=None, w_unlabeled=None):
    Y, Yhat, Yhat_unlabeled = reshape_to_2d(Y), reshape_to_2d(Yhat), reshape_to_2d(Yhat_unlabeled)
    n, N, d = Y.shape[0], Yhat_unlabeled.shape[0], Yhat.shape[1]
    w = construct_weight_vector(n, w, vectorized=True)
    w_unlabeled = construct_weight_vector(N, w_unlabeled, vectorized=True)
    if lam is None:
        ppi_pointest = (w_unlabeled * Yhat_unlabeled).mean(0) + (w * (Y - Yhat)).mean(0)
        grads = w * (Y - ppi_pointest)
        grads_hat = w * (Yhat - ppi_pointest)
        grads_hat_unlabeled = w_unlabeled * (Yhat_unlabeled - ppi_pointest)
        lam = calc_lam_glm(grads, grads_hat, grads_hat_unlabeled, np.eye(d), clip=True)
        return ppi_mean_pointestimate(Y, Yhat, Yhat_unlabeled, lam=lam, w=w, w_unlabeled=w_unlabeled)
    return (w_unlabeled * lam * Yhat_unlabeled).mean(axis=0) + (w * (Y - lam * Yhat)).mean(axis=0).squeeze()


def ppi_mean_ci(Y, Yhat, Yhat_unlabeled, alpha=0.1, lam=None, w=None, w_unlabeled=None):
    n, N = Y.shape[0], Yhat_unlabeled.shape[0]
    d = Y.shape[1] if len(Y.shape) > 1 else 1
    Y, Yhat, Yhat_unlabeled = reshape_to_2d(Y), reshape_to_2d(Yhat), reshape_to_2d(Yhat_unlabeled)
    w = construct_weight_vector(n, w, vectorized=True)
    w_unlabeled = construct_weight_vector(N, w_unlabeled, vectorized=True)
    if lam is None:
        ppi_pointest = ppi_mean_pointestimate(Y, Yhat, Yhat_unlabeled, lam=1, w=w, w_unlabeled=w_unlabeled)
        grads = w * (Y - ppi_pointest)
        grads_hat = w * (Yhat - ppi_pointest)
        grads_hat_unlabeled = w_unlabeled * (Yhat_unlabeled - ppi_pointest)
        lam = calc_lam_glm(grads, grads_hat, grads_hat_unlabeled, np.eye(d), clip=True)
        return ppi_mean_ci(Y, Yhat, Yhat_unlabeled, alpha=alpha, lam=lam, w=w, w_unlabeled=w_unlabeled)
    ppi_pointest = ppi_mean_pointestimate(Y, Yhat, Yhat_unlabeled, lam=lam, w=w, w_unlabeled=w_unlabeled)
    imputed_std = (w_unlabeled * (lam * Yhat_unlabeled)).std(0) / np.sqrt(N)
    rectifier_std = (w * (Y - lam * Yhat)).std(0) / np.sqrt(n)
    std = np.sqrt(imputed_std**2 + rectifier_std**2)
    z = stats.norm.ppf(1 - alpha / 2)
    return ppi_pointest - z * std, ppi_pointest + z * std


def lam_of(Y, Yhat, Yhat_unlabeled, w=None, w_unlabeled=None):
    """The lambda ppi_mean_pointestimate tunes, taken out of it."""
    n, N = len(Y), len(Yhat_unlabeled)
    w = construct_weight_vector(n, w, vectorized=True)
    w_unlabeled = construct_weight_vector(N, w_unlabeled, vectorized=True)
    Y, Yhat, Yhat_unlabeled = reshape_to_2d(Y), reshape_to_2d(Yhat), reshape_to_2d(Yhat_unlabeled)
    ppi_pointest = (w_unlabeled * Yhat_unlabeled).mean(0) + (w * (Y - Yhat)).mean(0)
    return float(calc_lam_glm(w * (Y - ppi_pointest), w * (Yhat - ppi_pointest), w_unlabeled * (Yhat_unlabeled - ppi_pointest), np.eye(1), clip=True))


# ---- 2. The report's interval ---------------------------------------------------------------

def arrays(data):
    Y = np.array(data["human"], dtype=float)
    F = np.array(data["judge"], dtype=float)
    FU = np.array(data["judge_unlabeled"], dtype=float)
    w = np.array(data["weights"], dtype=float) if "weights" in data else None
    wu = np.array(data["weights_unlabeled"], dtype=float) if "weights_unlabeled" in data else None
    return Y, F, FU, w, wu


def report_interval(data, lam, tuned):
    Y, F, FU, w, wu = arrays(data)
    n, N = len(Y), len(FU)
    w = np.ones(n) if w is None else w / w.sum() * n
    wu = np.ones(N) if wu is None else wu / wu.sum() * N
    r = Y - lam * F
    r_mean = np.sum(w * r) / np.sum(w)
    f_mean = np.sum(wu * FU) / np.sum(wu) if N > 0 else 0.0
    estimate = lam * f_mean + r_mean
    low, high = data["scale"]
    prior = ((high - low) / 3) ** 2
    r_df = n - 1 + 1
    r_var = (np.sum((w * (r - r_mean)) ** 2) + prior) / r_df / n
    if tuned and lam > 0 and n >= 3:
        leave_out = []
        for i in range(n):
            keep = np.arange(n) != i
            leave_out.append(lam_of(Y[keep], F[keep], FU, w[keep], wu))
        leave_out = np.array(leave_out)
        lam_var = (n - 1) / n * np.sum((leave_out - leave_out.mean()) ** 2)
        r_var += lam_var * np.var(np.concatenate([F, FU]), ddof=1) * (1 / n + 1 / N)
    i_var = np.sum((wu * lam * (FU - f_mean)) ** 2) / (N - 1) / N if lam > 0 and N > 1 else 0.0
    i_df = max(1, N - 1)
    parts = [(i_var, i_df), (r_var, r_df)]
    df = satterthwaite(parts)
    half = stats.t.ppf(0.975, df) * np.sqrt(i_var + r_var)
    return {"estimate": estimate, "ci95": [estimate - half, estimate + half], "lambda": lam, "df": df, "parts": parts}


def satterthwaite(parts):
    used = [(v, df) for v, df in parts if v > 0]
    if not used:
        return max(1, min(df for _, df in parts))
    return sum(v for v, _ in used) ** 2 / sum(v * v / df for v, df in used)


def tutor_mean(data):
    Y, F, FU, w, wu = arrays(data)
    judge = np.concatenate([F, FU])
    judge_mean = judge.mean()
    judge_half = stats.t.ppf(0.975, len(judge) - 1) * np.sqrt(np.var(judge, ddof=1) / len(judge))
    tuned = lam_of(Y, F, FU, w, wu)
    people = report_interval(data, 0.0, False)
    corrected = report_interval(data, tuned, True)
    width = lambda ci: ci[1] - ci[0]
    chosen = corrected if width(corrected["ci95"]) < width(people["ci95"]) else people
    return {
        "estimate": chosen["estimate"],
        "ci95": chosen["ci95"],
        "lambda": chosen["lambda"],
        "lambda_tuned": tuned,
        "df": chosen["df"],
        "human_only_mean": people["estimate"],
        "human_only_ci95": people["ci95"],
        "judge_only_mean": judge_mean,
        "judge_only_ci95": [judge_mean - judge_half, judge_mean + judge_half],
        "width_ratio": width(chosen["ci95"]) / width(people["ci95"]),
        "judge_biased": bool(judge_mean < chosen["ci95"][0] or judge_mean > chosen["ci95"][1]),
    }, chosen


def holm(p, alpha=ALPHA):
    order = sorted(range(len(p)), key=lambda i: (p[i], i))
    rejected = [False] * len(p)
    for rank, i in enumerate(order):
        if p[i] > alpha / (len(p) - rank):
            break
        rejected[i] = True
    return rejected


def scalar(x):
    """ppi_py's 1-d results are arrays of one value."""
    return float(np.ravel(x)[0])


out = {"sets": [], "tutors": {}, "differences": []}
for data in DATA["sets"]:
    Y, F, FU, w, wu = arrays(data)
    fixed = 0.3
    out["sets"].append({
        "name": data["name"],
        "ppi_py": {
            "estimate": scalar(ppi_mean_pointestimate(Y, F, FU, w=w, w_unlabeled=wu)),
            "lambda": lam_of(Y, F, FU, w, wu),
            "ci95": [scalar(x) for x in ppi_mean_ci(Y, F, FU, alpha=ALPHA, w=w, w_unlabeled=wu)],
        },
        "ppi_py_fixed": {
            "estimate": scalar(ppi_mean_pointestimate(Y, F, FU, lam=fixed, w=w, w_unlabeled=wu)),
            "ci95": [scalar(x) for x in ppi_mean_ci(Y, F, FU, alpha=ALPHA, lam=fixed, w=w, w_unlabeled=wu)],
        },
        "report": tutor_mean(data)[0],
    })

chosen = {}
for model, data in DATA["tutors"].items():
    figures, interval = tutor_mean(data)
    out["tutors"][model] = figures
    chosen[model] = interval
models = list(DATA["tutors"])
pairs = []
for i in range(len(models)):
    for j in range(i + 1, len(models)):
        a, b = chosen[models[i]], chosen[models[j]]
        parts = a["parts"] + b["parts"]
        var = sum(v for v, _ in parts)
        df = satterthwaite(parts)
        diff = a["estimate"] - b["estimate"]
        half = stats.t.ppf(0.975, df) * np.sqrt(var)
        p = 2 * stats.t.cdf(-abs(diff) / np.sqrt(var), df)
        pairs.append({"a": models[i], "b": models[j], "diff": diff, "ci95": [diff - half, diff + half], "p": p})
for pair, rejected in zip(pairs, holm([pair["p"] for pair in pairs])):
    pair["established"] = rejected
out["differences"] = pairs
print(json.dumps(out, default=float))
