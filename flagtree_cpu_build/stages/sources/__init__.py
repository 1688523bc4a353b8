"""The sources stage (sync): its plan, the lock's pins, checkouts, submodules and patches."""

from .plan import plan_sources

__all__ = ["plan_sources"]
