"""binning: equal-width histograms."""
from .edges import bin_edges
from .histogram import bin_index, histogram
from .labels import labelled, render
