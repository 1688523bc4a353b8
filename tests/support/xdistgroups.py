"""One worker per shared world: the grouping `make test` relies on (``--dist loadgroup``), as a pytest plugin.

``tests/conftest.py`` imports the hook, so the suite has it; ``tests/integration/test_suite_grouping.py`` loads this
module alone (``-p tests.support.xdistgroups``) into a real two-worker session to prove the grouping holds on the
pinned pytest and pytest-xdist, and on the newest ones (`make test-latest`).
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist's ``--dist loadgroup`` (what `make test` runs), the tests of a module that shares a
    module-scoped fixture (a world built once: a published wheelhouse, bundles, one setup) run on one worker, so
    the fixture is built once and not once per worker; every other test goes to whichever worker is free.

    xdist groups by a suffix on the node id (``path::test@group``), which its own hook writes to
    ``item._nodeid`` -- an attribute pytest 9.2 no longer reads (the id lives in ``item._id``), so on our pinned
    versions its grouping silently did nothing and every worker built every world again. This hook writes the
    suffix itself, wherever this pytest keeps the id, after every other hook has added its marks;
    ``tests/integration/test_suite_grouping.py`` runs a real two-worker session to prove the grouping holds."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        group = suite_group(item)
        if group is not None and "@" not in item.nodeid:
            _suffix_node_id(item, f"@{group}")


def suite_group(item: pytest.Item) -> str | None:
    """The xdist group of a test: its ``xdist_group`` mark, or its module when it uses a module-scoped fixture."""
    names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                    for mark in item.iter_markers("xdist_group")})
    if names:
        return "_".join(names)
    fixtures = getattr(item, "_fixtureinfo", None)
    shared = fixtures is not None and any(definition.scope == "module"
                                          for definitions in fixtures.name2fixturedefs.values()
                                          for definition in definitions)
    return item.nodeid.split("::", 1)[0] if shared else None


def _suffix_node_id(item: pytest.Item, suffix: str) -> None:
    if hasattr(item, "_id"):  # pytest >= 9.2: a structured NodeId, parsed again from the suffixed string
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(f"{item.nodeid}{suffix}")
    else:
        item._nodeid = f"{item.nodeid}{suffix}"
