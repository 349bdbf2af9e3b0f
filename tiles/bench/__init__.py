"""python -m tiles.bench run | report — tiles against each vendor's own kernels, side by side."""
