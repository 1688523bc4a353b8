"""`python -m flagtree_cpu_build` runs the CLI."""

from .cli import main

main()
