"""The recipe: a pinned build as YAML, loaded into frozen dataclasses and resolved for one host.

    loader       bounded YAML -> plain data, with the file line of every key
    overrides    --set KEY=VALUE applied to that data
    schema       plain data -> dataclasses (every problem at once) and back; field specs
    checks       the rules fields obey, and the placeholder catalog
    inputs       sources, artifacts and links: what a recipe pins
    model        Recipe and the rest of the format (python, build, steps, toolchains, run time)
    platform     the build host, what it must have, and the target
    environment  env operations and hazards
    validation   checks and known-failure signatures
    upgrade      schema version 1 data -> version 2, and the comment-keeping file rewrite
    json_schema  the JSON Schema of the format, from the same classes
    files        where recipes live; load_recipe / parse_recipe
    resolve      artifact variants for this host, placeholders filled in

Importing the package gives the models and ``resolve`` only; ``files`` and ``loader`` bring
in PyYAML, so callers import them where they load a recipe.
"""

from __future__ import annotations

from .cmake import CMakeSpec, FetchContentDep
from .environment import CommandEnv, EnvHazard, EnvOps, SourceScript
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
    DiskNeed,
    Recipe,
    Resources,
    RuntimeSpec,
    Step,
    StepVerify,
    SystemPackages,
    Toolchain,
    Variant,
)
from .platform import (
    CompilerRequirement,
    DeviceRequirement,
    HostPlatform,
    HostRequirements,
    LibraryRequirement,
    Platform,
    TargetPlatform,
)
from .python_model import Constraint, PythonSpec, Requirement, RequirementsFile
from .resolve import expand, resolve, select_variants
from .validation import Check, Diagnosis, Expect, ImportCheck, SignatureSpec, WheelCheck

__all__ = [
    "SCHEMA_VERSION", "AfterUnpack", "Artifact", "ArtifactRoot", "ArtifactVariant", "BuildSpec", "Check", "CMakeSpec",
    "FetchContentDep",
    "CommandEnv", "Constraint", "CompilerRequirement", "DeviceRequirement", "Diagnosis", "DiskNeed", "EnvHazard",
    "EnvOps", "Expect", "HostPlatform", "HostRequirements", "HostSelector", "ImportCheck", "LibraryRequirement", "Link",
    "Links", "Platform", "Probe", "PythonSpec", "Recipe", "Requirement", "RequirementsFile", "Resources", "RuntimeSpec",
    "Selector",
    "SelectorFacts", "SignatureSpec", "Source", "SourcePin", "SourceScript", "Step", "StepVerify", "SystemPackages",
    "TargetPlatform", "Toolchain", "Variant", "WheelCheck", "expand", "resolve", "select_variants",
]
