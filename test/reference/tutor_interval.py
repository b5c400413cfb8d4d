# Self-preference's interval with the tutor as the unit (report/self-preference.ts), computed the
# long way for the reference scripts: each side's mean by least squares on an intercept, its CR2
# variance from the sandwich with each cluster's residuals adjusted by (I - H_jj)^(-1/2) (Bell and
# McCaffrey), the Satterthwaite degrees of freedom of that variance as a quadratic form in the
# tutors' means taken as exchangeable, the two sides joined by Welch-Satterthwaite, SciPy's t.
import numpy as np
from scipy import linalg, stats

ONE_OWN = "one tutor of this family: its self-preference cannot be told from the judge's leniency toward that tutor"
ONE_OTHER = "one tutor of other families: the comparison cannot be told from the judge's leniency toward that tutor"
NO_SPREAD = "every tutor of a side has the same mean leniency: no spread between tutors to judge the difference by"


def side(values, tutors):
    """(mean, CR2 variance, degrees of freedom, tutor count) of one side's transcripts."""
    y = np.asarray(values, dtype=float)
    names = sorted(set(tutors))
    n = len(y)
    X = np.ones((n, 1))
    bread = np.linalg.inv(X.T @ X)
    mean = float(np.mean(y))  # the least-squares intercept
    if len(names) < 2:
        return mean, 0.0, 0.0, len(names)
    e = y - mean
    H = X @ bread @ X.T
    meat = np.zeros((1, 1))
    for name in names:
        rows = [i for i, t in enumerate(tutors) if t == name]
        A = linalg.sqrtm(np.linalg.inv(np.eye(len(rows)) - H[np.ix_(rows, rows)])).real
        u = X[rows].T @ A @ e[rows]
        meat += np.outer(u, u)
    variance = float((bread @ meat @ bread)[0, 0])

    # The variance as a quadratic form L'BL in the tutors' means, B read off by polarization.
    sizes = np.array([tutors.count(name) for name in names], dtype=float)

    def as_form(means):
        expanded = np.concatenate([np.full(int(size), m) for size, m in zip(sizes, means)])
        e = expanded - expanded.mean()
        total = 0.0
        at = 0
        for size in sizes:
            rows = list(range(at, at + int(size)))
            A = linalg.sqrtm(np.linalg.inv(np.eye(len(rows)) - H[np.ix_(rows, rows)])).real
            total += float((np.ones(len(rows)) @ A @ e[rows]) ** 2)
            at += int(size)
        return total / n ** 2

    g = len(names)
    unit = np.eye(g)
    B = np.array([[(as_form(unit[k] + unit[l]) - as_form(unit[k]) - as_form(unit[l])) / 2 for l in range(g)] for k in range(g)])
    df = float(np.trace(B) ** 2 / np.trace(B @ B))
    return mean, variance, df, g


def self_preference(units):
    """units: (tutor, own, leniency). The figures as the report's JSON gives them."""
    own = [(t, v) for t, o, v in units if o]
    other = [(t, v) for t, o, v in units if not o]
    m1, v1, d1, g1 = side([v for _, v in own], [t for t, _ in own])
    m2, v2, d2, g2 = side([v for _, v in other], [t for t, _ in other])
    reason = ONE_OWN if g1 < 2 else ONE_OTHER if g2 < 2 else NO_SPREAD if v1 + v2 == 0 else None
    ci = None
    if reason is None:
        df = (v1 + v2) ** 2 / (v1 ** 2 / d1 + v2 ** 2 / d2)
        half = float(stats.t.ppf(0.975, df)) * np.sqrt(v1 + v2)
        ci = [m1 - m2 - half, m1 - m2 + half]
    verdict = "undetermined" if ci is None else "favours_own" if ci[0] > 0 else "none_shown"
    return {
        "own_n": len(own), "other_n": len(other), "own_tutors": g1, "other_tutors": g2,
        "own_leniency": m1, "other_leniency": m2, "diff": m1 - m2, "ci95": ci, "verdict": verdict, "reason": reason,
    }
