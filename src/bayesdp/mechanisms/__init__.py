"""DP mechanisms: each knows its noise scale, its guarantee and its accuracy."""

from bayesdp.mechanisms.base import Mechanism
from bayesdp.mechanisms.gaussian import DiscreteGaussian, Gaussian
from bayesdp.mechanisms.laplace import DiscreteLaplace, Laplace, dlap_quantile
from bayesdp.mechanisms.randomized_response import CountEstimate, RandomizedResponse
from bayesdp.mechanisms.selection import Exponential, ReportNoisyMax
from bayesdp.mechanisms.sparse_vector import SparseVector

__all__ = [
    "CountEstimate",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Exponential",
    "Gaussian",
    "Laplace",
    "Mechanism",
    "RandomizedResponse",
    "ReportNoisyMax",
    "SparseVector",
    "dlap_quantile",
]
