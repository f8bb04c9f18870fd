"""Private estimators in scikit-learn's shape, and model selection through the reusable holdout."""

from bayesdp.models.base import PrivacyLeakWarning
from bayesdp.models.linear import LinearRegression
from bayesdp.models.logistic import LogisticRegression
from bayesdp.models.naive_bayes import CategoricalNB, GaussianNB
from bayesdp.models.preprocessing import StandardScaler

__all__ = [
    "CategoricalNB",
    "GaussianNB",
    "LinearRegression",
    "LogisticRegression",
    "PrivacyLeakWarning",
    "StandardScaler",
]
