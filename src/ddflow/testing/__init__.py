"""Testing support: a from-scratch oracle and hypothesis strategies."""
