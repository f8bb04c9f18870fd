"""Privacy for correlated records: Markov chains and Bayesian networks as dependence models,
max-influence and Markov quilts, the Markov Quilt Mechanism, and DP ↔ Bayesian DP."""

from bayesdp.correlated.baselines import GK16, gk16_gamma, gk16_scale, gmrf_sum_scale, group_dp_scale
from bayesdp.correlated.calibration import QuiltCalibration, max_influence, quilt_calibration
from bayesdp.correlated.chain import ChainClass, MarkovChain
from bayesdp.correlated.conversion import bdp_to_dp, dp_to_bdp
from bayesdp.correlated.dependence import describe_model
from bayesdp.correlated.mechanism import MarkovQuiltMechanism
from bayesdp.correlated.network import BayesianNetwork, Quilt

__all__ = [
    "GK16",
    "BayesianNetwork",
    "ChainClass",
    "MarkovChain",
    "MarkovQuiltMechanism",
    "Quilt",
    "QuiltCalibration",
    "bdp_to_dp",
    "describe_model",
    "dp_to_bdp",
    "gk16_gamma",
    "gk16_scale",
    "gmrf_sum_scale",
    "group_dp_scale",
    "max_influence",
    "quilt_calibration",
]
