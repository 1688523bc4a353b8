"""The stage kit, below every stage package: what a stage is given and returns (stage), and its plan items (plan)."""
