"""Plans: what a release computes and how much noise and budget each part gets.

The plan IR, public key sets, aggregates (one module per family, each owning
its measurements and their sensitivity), the planner (contribution limits and
the ρ split) and the release pipeline. Nothing here reads private data except
through an engine's narrow interface (:mod:`privframe.engines.spec`).
"""
