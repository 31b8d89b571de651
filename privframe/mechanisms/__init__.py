"""Mechanisms: where noise is drawn, from a CSPRNG, exactly.

Random bits (:mod:`~privframe.mechanisms.randomness`), the exact discrete
Gaussian and discrete Laplace samplers (:mod:`~privframe.mechanisms.sampler`,
over the exact coins of :mod:`~privframe.mechanisms._coins`), the Gaussian
mechanism on a grid and clipped Gaussian sums (:mod:`~privframe.mechanisms.gaussian`),
the discrete Laplace and the pure ε-DP Laplace mechanism
(:mod:`~privframe.mechanisms.laplace`), one release's noise vectors
(:mod:`~privframe.mechanisms.draws`), the exponential
mechanism's exact choice (:mod:`~privframe.mechanisms.exponential`) and its use
for quantiles (:mod:`~privframe.mechanisms.quantiles`), the thresholds of
private key selection (:mod:`~privframe.mechanisms.selection`) and DP-SGD
(:mod:`~privframe.mechanisms.dpsgd`). :mod:`~privframe.mechanisms.noise`
(``privframe.noise``) re-exports the documented names. Mechanisms know budgets
(:mod:`privframe.accounting`), never data frames or queries.
"""
