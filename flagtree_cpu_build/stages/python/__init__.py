"""The python stage: the target environment's prerequisites, planned and installed."""
