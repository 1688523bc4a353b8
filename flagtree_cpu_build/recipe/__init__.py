"""The recipe: a pinned build as YAML, loaded into frozen dataclasses and resolved for one host.

    loader       bounded YAML -> plain data, with the file line of every key
    overrides    --set KEY=VALUE applied to that data
    schema       plain data -> dataclasses (every problem at once) and back; field specs
    checks       the rules fields obey, and the placeholder catalog
    inputs       sources, artifacts and links: what a recipe pins
    model        Recipe and the rest of the format (platform, env ops, build, steps, checks)
    upgrade      schema version 1 data -> version 2, and the comment-keeping file rewrite
    json_schema  the JSON Schema of the format, from the same classes
    files        where recipes live; load_recipe / parse_recipe
    resolve      artifact variants for this host, placeholders filled in

Importing the package gives the models and ``resolve`` only; ``files`` and ``loader`` bring
in PyYAML, so callers import them where they load a recipe.
"""

from __future__ import annotations

from .inputs import (
    AfterUnpack,
    Artifact,
    ArtifactRoot,
    ArtifactVariant,
    HostSelector,
    Link,
    Links,
    Probe,
    Selector,
    SelectorFacts,
    Source,
    SourcePin,
)
from .model import (
    SCHEMA_VERSION,
    BuildSpec,
    Check,
    CommandEnv,
    CompilerRequirement,
    DeviceRequirement,
    Diagnosis,
    DiskNeed,
    EnvHazard,
    EnvOps,
    Expect,
    HostPlatform,
    HostRequirements,
    ImportCheck,
    LibraryRequirement,
    Platform,
    PythonSpec,
    Recipe,
    Requirement,
    Resources,
    RuntimeSpec,
    SignatureSpec,
    SourceScript,
    Step,
    SystemPackages,
    TargetPlatform,
    Toolchain,
    Variant,
    WheelCheck,
)
from .resolve import expand, resolve, select_variants

__all__ = [
    "SCHEMA_VERSION", "AfterUnpack", "Artifact", "ArtifactRoot", "ArtifactVariant", "BuildSpec", "Check",
    "CommandEnv", "CompilerRequirement", "DeviceRequirement", "Diagnosis", "DiskNeed", "EnvHazard", "EnvOps",
    "Expect", "HostPlatform", "HostRequirements", "HostSelector", "ImportCheck", "LibraryRequirement", "Link",
    "Links", "Platform", "Probe", "PythonSpec", "Recipe", "Requirement", "Resources", "RuntimeSpec", "Selector",
    "SelectorFacts", "SignatureSpec", "Source", "SourcePin", "SourceScript", "Step", "SystemPackages",
    "TargetPlatform", "Toolchain", "Variant", "WheelCheck", "expand", "resolve", "select_variants",
]
