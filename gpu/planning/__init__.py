"""Queries and their matching plans, shared by both executors.

    _query.py      Query: labelled pattern graphs, validated
    _symmetry.py   automorphisms and the symmetry-breaking conditions they allow
    _planner.py    one plan per (query, updated query edge): matching order, the
                   intersections of each level, label and degree filters; PlanSet packs
                   them into the flat table both executors read
"""

from ._planner import PlanSet, plan_query
from ._query import Query

__all__ = ["PlanSet", "Query", "plan_query"]
