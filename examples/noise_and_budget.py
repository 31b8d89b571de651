"""privframe's privacy primitives in one page: budget, calibration, secure noise, ledger.

Run: python examples/noise_and_budget.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

import privframe as pf


def main() -> None:
    # The data owner allows rho = 1 of zCDP for this dataset.
    budget = pf.zCDP(1.0)
    print(
        f"budget: rho = {budget.rho}; as (eps, delta): eps = {budget.epsilon(1e-6):.3f} "
        f"at delta = 1e-6; mu-GDP (Gaussian-equivalent) = {budget.to_gdp().mu:.3f}"
    )

    # An exact histogram: each person contributes to at most 3 bins, at most once each,
    # so the L2 sensitivity of the count vector is sqrt(3).
    counts = np.array([1203, 884, 97, 12, 0])
    sensitivity = np.sqrt(3)
    rho = 0.25
    sigma = pf.accounting.gaussian_sigma(sensitivity, rho)
    print(f"\nrelease at rho = {rho}: sigma = sqrt(3)/sqrt(2*{rho}) = {sigma:.4f}")

    with tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp) / "spend.sqlite"
        acct = pf.accounting.Accountant(budget, ledger=ledger)
        # Budget before bytes: the spend is recorded before any noise exists.
        acct.spend(pf.zCDP(rho), label="histogram", description={"bins": len(counts)})
        noisy = pf.gaussian_mechanism(counts, l2_sensitivity=sensitivity, rho=rho)
        print("exact :", counts.tolist())
        print("noisy :", noisy.tolist())

        # A real-valued release is snapped to a power-of-two grid, never float noise.
        mean_income = np.array([41250.37, 38020.11])
        acct.spend(pf.zCDP(0.25), label="incomes")
        print("noisy incomes:", pf.gaussian_mechanism(mean_income, 500.0, 0.25).tolist())

        # Reopening the same ledger continues from what was spent.
        reopened = pf.accounting.Accountant(budget, ledger=ledger)
        print("\n" + str(reopened.report()))
        try:
            reopened.spend(pf.zCDP(0.75), label="too much")
        except pf.BudgetExceededError as err:
            print(f"\nrefused before any noise was drawn: {err}")


if __name__ == "__main__":
    main()
