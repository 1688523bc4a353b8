#!/usr/bin/env bash
# The installed-wheel tier (`make test-installed`): what users install is what is tested.
#
# Builds the wheel and the sdist of this checkout, installs each non-editable into a fresh venv outside the
# checkout (pip resolves the dependencies from the package index, under constraints.txt, with no pip
# configuration of this machine), then runs tests/installed against each install's console script.
#   PYTHON    the dev venv's python (pytest and the harness); default .venv/bin/python
#   TIER_KEEP set to keep the temporary folder
set -euo pipefail
cd "$(dirname "$0")/../.."
PROJECT=$PWD
PYTHON=${PYTHON:-$PROJECT/.venv/bin/python}
root=$(mktemp -d "${TMPDIR:-/tmp}/flagtree-cpu-installed.XXXXXX")
[ -n "${TIER_KEEP:-}" ] || trap 'rm -rf "$root"' EXIT
say() { echo "[installed] $*" >&2; }

# the wheel by pip, the sdist by the build backend's own hook (what `python -m build --sdist` calls), both from a
# copy of what git tracks (plus untracked, not ignored files): no stray build/ or egg-info from this checkout
mkdir -p "$root/src"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -c | tar -x -C "$root/src"
"$PYTHON" -m pip wheel --quiet --no-deps --no-build-isolation --no-index -w "$root/dist" "$root/src" >&2
(cd "$root/src" && "$PYTHON" -c 'import sys; from setuptools import build_meta; build_meta.build_sdist(sys.argv[1])' \
    "$root/dist" >/dev/null)
wheel=$(ls "$root"/dist/flagtree_cpu-*.whl)
sdist=$(ls "$root"/dist/flagtree_cpu-*.tar.gz)
say "built $(basename "$wheel") and $(basename "$sdist")"

status=0
for artifact in "$wheel" "$sdist"; do
    kind=$([ "$artifact" = "$wheel" ] && echo wheel || echo sdist)
    venv="$root/venv-$kind"
    python3 -m venv "$venv"
    start=$SECONDS
    # as a user installs it: the index's dependencies (the sdist also builds in an isolated environment from
    # it), but at the versions the suite passed with; this machine's pip configuration plays no part
    PIP_CONFIG_FILE=/dev/null "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        -c "$PROJECT/constraints.txt" "$artifact" >&2
    say "$kind installed into $venv in $((SECONDS - start)) s"
    start=$SECONDS
    if FLAGTREE_CPU_INSTALLED="$venv/bin/flagtree-cpu" "$PYTHON" -m pytest -q tests/installed; then
        say "$kind: passed in $((SECONDS - start)) s"
    else
        say "$kind: FAILED"; status=1
    fi
done
exit $status
