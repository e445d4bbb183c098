"""Nominal association: Cramér's V, Tschuprow's T, Pearson's contingency coefficient, Theil's U (and their
``*_matrix`` forms over the columns of a matrix), Fleiss' kappa. See docs/nominal.md."""
from fmetrics.nominal.association import (
    cramers_v,
    cramers_v_matrix,
    pearsons_contingency_coefficient,
    pearsons_contingency_coefficient_matrix,
    theils_u,
    theils_u_matrix,
    tschuprows_t,
    tschuprows_t_matrix,
)
from fmetrics.nominal.fleiss_kappa import fleiss_kappa

__all__ = [
    "cramers_v",
    "cramers_v_matrix",
    "tschuprows_t",
    "tschuprows_t_matrix",
    "pearsons_contingency_coefficient",
    "pearsons_contingency_coefficient_matrix",
    "theils_u",
    "theils_u_matrix",
    "fleiss_kappa",
]
