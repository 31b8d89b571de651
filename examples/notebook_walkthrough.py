# %% [markdown]
# # privframe in a notebook
#
# A walkthrough in notebook cells (`# %%`, the "percent" format that Jupyter,
# VS Code and jupytext open as a notebook). Run as a script it prints the text
# views; in a notebook the Session, queries, explanations and `pf.show(result)`
# display as HTML tables. `tests/api/test_examples.py` runs it on every CI build.
#
# Run: python examples/notebook_walkthrough.py

# %%
from __future__ import annotations

import polars as pl

import privframe as pf


def display(value: object) -> None:
    """IPython's display in a notebook; the text view plus an HTML check in a script."""
    try:
        from IPython.display import display as ipython_display  # type: ignore[import-not-found]

        ipython_display(value)
    except ImportError:
        print(value)
        html = value._repr_html_()  # type: ignore[attr-defined]
        assert html.startswith("<"), "every notebook view renders as HTML"


# %% [markdown]
# ## 1. A session: the data, the privacy unit, the budget
# Metadata gives SQL the public facts it cannot say itself: bounds and keys.

# %%
data = pf.datasets.synthetic_transactions(n_rows=50_000, seed=7)
regions = ["north", "south", "east", "west"]
sess = pf.Session(
    data,
    privacy_unit="user_id",
    budget=pf.zCDP(rho=1.0, delta=1e-6),
    metadata={
        "amount": pf.Column(bounds=(0, 1000)),
        "age": pf.Column(bounds=(18, 90), candidates=73),
        "region": pf.Column(keys=regions),
    },
    contributions=pf.Bound(max_groups=2, max_rows_per_group=5),
)
display(sess)  # a budget gauge and an empty ledger

# %% [markdown]
# ## 2. The query builder, and accuracy before spending

# %%
query = (
    sess.query()
    .filter(pl.col("age") >= 18)
    .bound(max_groups=2, max_rows_per_group=5)
    .group_by("region", keys=regions)
    .agg(pf.count(), pf.mean("amount", bounds=(0, 1000)), pf.median("age", bounds=(18, 90)))
)
display(query)  # the plan
display(query.explain(rho=0.3))  # sensitivities, the rho split, sigma and 95% errors

# %%
result = query.release(rho=0.3, with_error=True)
display(pf.show(result))  # values with their 95% intervals

# %% [markdown]
# ## 3. The same kind of question in SQL
# HAVING and ORDER BY apply to the noisy result: post-processing, free of charge.

# %%
sql = sess.sql(
    "SELECT region, COUNT(*) AS n, AVG(amount) AS avg_amount FROM data "
    "WHERE age >= 18 GROUP BY region HAVING n > 100 ORDER BY n DESC"
)
display(sql.explain(rho=0.3))
display(pf.show(sql.release(rho=0.3, with_error=True)))

# %% [markdown]
# ## 4. Groups nobody listed: chosen privately, spending delta

# %%
months = (
    sess.query()
    .bound(max_groups=3, max_rows_per_group=3)
    .group_by("month")
    .agg(pf.count_distinct())
)
display(months.explain(rho=0.2, delta=5e-7))
display(pf.show(months.release(rho=0.2, delta=5e-7)))

# %% [markdown]
# ## 5. What was spent
# Every release is in the ledger; the guarantee is stated in rho, (epsilon, delta) and mu.

# %%
display(sess)
print(sess.report())
