"""Which packages the wheel and the sdist carry: every package under flagtree_cpu_build/, found, not listed
by hand (a hand list once shipped a wheel without bundle/), plus the two data packages that live at the top
of the repository (recipes/, patches/; pyproject.toml maps them into the package). Everything else about the
project is in pyproject.toml."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["flagtree_cpu_build", "flagtree_cpu_build.*"]),
                "flagtree_cpu_build.recipes", "flagtree_cpu_build.patches"])
