"""Loopback fixture worlds for the bundled sibling recipes (one module per recipe)."""
