"""The recipe: a pinned build as YAML, loaded into frozen dataclasses and resolved for one host.

    loader       bounded YAML -> plain data, with the file line of every key
    overrides    --set KEY=VALUE applied to that data
    schema       plain data -> dataclasses (every problem at once) and back; field specs
    checks       the rules fields obey, and the placeholder catalog
    inputs       sources, artifacts and links: what a recipe pins
    model        Recipe and the rest of the format (platform, python, build, validation)
    json_schema  the JSON Schema of the format, from the same classes
    files        where recipes live; load_recipe / parse_recipe
    resolve      artifact variants for this host, placeholders filled in

Importing the package gives the models and ``resolve`` only; ``files`` and ``loader`` bring
in PyYAML, so callers import them where they load a recipe.
"""

from __future__ import annotations

from .inputs import (
    Artifact,
    ArtifactVariant,
    HostSelector,
    Link,
    Links,
    Probe,
    Source,
    SourcePin,
)
from .model import (
    SCHEMA_VERSION,
    BackendKernel,
    BuildSpec,
    CommandEnv,
    DecodeKernel,
    KernelCheck,
    Platform,
    PythonSpec,
    Recipe,
    Requirement,
    Resources,
    RmsNormKernel,
    RuntimeSpec,
    SoftmaxKernel,
    SystemPackages,
    Validation,
    VectorAddKernel,
)
from .resolve import expand, resolve, select_variants

__all__ = [
    "SCHEMA_VERSION",
    "Artifact",
    "ArtifactVariant",
    "BackendKernel",
    "BuildSpec",
    "CommandEnv",
    "DecodeKernel",
    "HostSelector",
    "KernelCheck",
    "Link",
    "Links",
    "Platform",
    "Probe",
    "PythonSpec",
    "Recipe",
    "Requirement",
    "Resources",
    "RmsNormKernel",
    "RuntimeSpec",
    "SoftmaxKernel",
    "Source",
    "SourcePin",
    "SystemPackages",
    "Validation",
    "VectorAddKernel",
    "expand",
    "resolve",
    "select_variants",
]
