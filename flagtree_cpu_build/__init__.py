"""flagtree-cpu: build FlagTree's Arm64 CPU backend from a pinned recipe."""

__version__ = "0.1.0"
