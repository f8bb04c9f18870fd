"""Private estimators in scikit-learn's shape, and model selection through the reusable holdout."""

from bayesdp.models.base import PrivacyLeakWarning
from bayesdp.models.cluster import KMeans
from bayesdp.models.decomposition import PCA
from bayesdp.models.linear import LinearRegression
from bayesdp.models.logistic import LogisticRegression
from bayesdp.models.naive_bayes import CategoricalNB, GaussianNB
from bayesdp.models.pipeline import ClippingWarning, Pipeline, make_pipeline
from bayesdp.models.preprocessing import StandardScaler
from bayesdp.models.scoring import Score, accuracy
from bayesdp.models.selection import Labelled, Search, Selection, search, select

__all__ = [
    "PCA",
    "CategoricalNB",
    "ClippingWarning",
    "GaussianNB",
    "KMeans",
    "Labelled",
    "LinearRegression",
    "LogisticRegression",
    "Pipeline",
    "PrivacyLeakWarning",
    "Score",
    "Search",
    "Selection",
    "StandardScaler",
    "accuracy",
    "make_pipeline",
    "search",
    "select",
]
