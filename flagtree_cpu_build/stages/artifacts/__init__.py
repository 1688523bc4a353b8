"""The artifacts stage (fetch): its plan and the streamed download-and-unpack."""

from .plan import plan_artifacts

__all__ = ["plan_artifacts"]
