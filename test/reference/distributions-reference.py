# The reference values of report/distributions.ts (test/distributions.test.ts): Student's t CDF and
# quantile, ln Gamma and the regularized incomplete beta, by SciPy:
#   /usr/bin/python3 test/reference/distributions-reference.py
import json
from scipy import special, stats

CDF = [[-2.1, 29], [0.3, 4], [-0.7, 2.37], [5, 1], [-12, 30], [1.96, 1000], [-3.3, 7.5], [0, 3]]
QUANTILE = [[0.975, 4], [0.975, 29], [0.025, 12], [0.999, 29], [0.95, 60], [0.975, 1e4]]
LOG_GAMMA = [0.5, 1, 10.3, 171.2, 0.01]
BETA = [[0.3, 2.5, 0.5], [0.9, 14.5, 0.5], [0.05, 1, 1], [0.5, 30, 40]]

print(json.dumps({
    "cdf": [[t, df, float(stats.t.cdf(t, df))] for t, df in CDF],
    "quantile": [[p, df, float(stats.t.ppf(p, df))] for p, df in QUANTILE],
    "log_gamma": [[x, float(special.gammaln(x))] for x in LOG_GAMMA],
    "beta": [[x, a, b, float(special.betainc(a, b, x))] for x, a, b in BETA],
}))
