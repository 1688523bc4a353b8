"""The links stage (link): the links the recipe asks for, and their plan."""

from .link import plan_links

__all__ = ["plan_links"]
