"""The build stage: the build, its plan, and the wheelhouse half (prebuilt: take or publish a build)."""
