"""Private data release: densities and histograms (Wasserman & Zhou 2010), local records, synthetic tables."""

from bayesdp.synth.density import PrivateDensity
from bayesdp.synth.exponential import SanitizedDatabase, sanitized_database
from bayesdp.synth.histogram import SmoothedHistogram, perturbed_histogram, smoothed_histogram
from bayesdp.synth.records import MeanEstimate, PerturbedRecords, perturb_records
from bayesdp.synth.series import series_density
from bayesdp.synth.tabular import Synthesizer, synthesize

__all__ = [
    "MeanEstimate",
    "PerturbedRecords",
    "PrivateDensity",
    "SanitizedDatabase",
    "SmoothedHistogram",
    "Synthesizer",
    "perturb_records",
    "perturbed_histogram",
    "sanitized_database",
    "series_density",
    "smoothed_histogram",
    "synthesize",
]
