"""The doors: Session, the query builder, SQL, reports, the CLI and the HTML views.

Front ends build immutable plans and hand them to the release pipeline
(:mod:`privframe.plan`); they never draw noise or charge budget themselves.
"""
