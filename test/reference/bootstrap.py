# The report's bootstrap, written again from docs/analysis.md ("Intervals"): mulberry32 seeded 1,
# 2,000 resamples of the units (transcripts) with replacement, the 2.5th and 97.5th percentiles of
# the resamples where the statistic is defined, null when over half are not. Shared by the
# reference scripts beside it; the statistics themselves are numpy's, scikit-learn's.
import numpy as np
from sklearn.metrics import cohen_kappa_score


def mulberry32(seed):
    state = seed & 0xFFFFFFFF

    def random():
        nonlocal state
        state = (state + 0x6D2B79F5) & 0xFFFFFFFF
        t = state
        t = ((t ^ (t >> 15)) * (t | 1)) & 0xFFFFFFFF
        t = (t ^ ((t + (((t ^ (t >> 7)) * (t | 61)) & 0xFFFFFFFF)) & 0xFFFFFFFF)) & 0xFFFFFFFF
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296

    return random


def interval(units, statistic, resamples=2000, level=0.95):
    """units: a list, one entry per transcript; statistic: a list of drawn units -> float or None."""
    random = mulberry32(1)
    values = []
    for _ in range(resamples):
        drawn = [units[int(random() * len(units))] for _ in range(len(units))]
        value = statistic(drawn)
        if value is not None and np.isfinite(value):
            values.append(value)
    undefined = resamples - len(values)
    if undefined > resamples / 2:
        return None, undefined
    values.sort()
    at = lambda q: values[min(len(values) - 1, max(0, int(np.floor(q * len(values)))))]
    return [at((1 - level) / 2), at(1 - (1 - level) / 2)], undefined


def kappa(pairs, k):
    """Quadratic-weighted kappa of (first, second) positions: numpy's matrices, None when undefined."""
    if not pairs:
        return None
    observed = np.zeros((k, k))
    for a, b in pairs:
        observed[a, b] += 1
    weights = np.array([[(i - j) ** 2 for j in range(k)] for i in range(k)], dtype=float)
    expected = np.outer(observed.sum(1), observed.sum(0)) / observed.sum()
    if (weights * expected).sum() == 0:
        return None
    return 1 - (weights * observed).sum() / (weights * expected).sum()


def sklearn_kappa(pairs, k):
    return cohen_kappa_score([a for a, _ in pairs], [b for _, b in pairs], labels=list(range(k)), weights="quadratic")
