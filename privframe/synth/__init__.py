"""Synthetic data from noisy marginals: pure post-processing, it never reads data.

Modules:

* :mod:`privframe.synth.model`: the graphical-model estimator (Private-PGM,
  McKenna, Sheldon & Miklau 2019): from noisy marginal measurements to a
  distribution on a junction tree, its marginals and synthetic rows.
"""
