"""Mechanisms: where noise is drawn, from a CSPRNG, exactly.

The discrete Gaussian sampler and the Gaussian mechanism
(:mod:`~privframe.mechanisms.noise`), the exponential mechanism for quantiles
(:mod:`~privframe.mechanisms.quantiles`), the thresholds of private key
selection (:mod:`~privframe.mechanisms.selection`) and clipped Gaussian sums
for DP-SGD (:mod:`~privframe.mechanisms.dpsgd`). Mechanisms know budgets
(:mod:`privframe.accounting`), never data frames or queries.
"""
