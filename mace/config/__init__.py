"""Deployment files (MACE's .yml schema): load, validate, fill defaults, fetch models."""
from mace.config.deployment import DeploymentConfig, ModelConfig, SubgraphConfig, load_deployment  # noqa: F401
