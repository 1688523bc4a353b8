"""The compile farm's check: which distcc helpers would compile for this board, asked as the build asks them."""

from __future__ import annotations

from .facts import final_build_spec
from .kit import DoctorContext, Outcome, check, ok, skip, warn


@check("toolchain.compile-farm", "toolchain", "The compile farm (distcc helpers through ccache)", live_only=True)
def tool_compile_farm(c: DoctorContext) -> Outcome:
    """Each host gets the build's one-line probe compile (nothing is written here; the helper compiles in its own
    temporary folder), all under one deadline, so a helper that accepts and never answers costs 3 s, not minutes."""
    from .. import compile_farm as cf
    from ..compile_cache import lookup_env
    from ..errors import UsageError
    from ..farm_probe import DEADLINE_S, probe_all

    final = final_build_spec(c)
    chosen = cf.configured(None, c.environ, final.compile_farm if final else None)
    if chosen is None:
        return skip(f"no compile farm configured (build --compile-farm HOSTS, ${cf.ENV_VAR} or build.compile_farm)")
    try:
        hosts = cf.parse_hosts(chosen[0], chosen[1])
    except UsageError as err:
        return warn(err.message, err.fix or "")
    env = lookup_env(c.options.python, c.environ)
    missing = cf.missing_programs(env)
    compiler = cf.build_compiler(env, c.host.arch) if missing is None else None
    if missing is not None or compiler is None:
        why = missing or "no C++ compiler on the build's PATH ($CXX, c++ or g++)"
        return warn(f"compile farm (from {chosen[1]}): {why}; builds compile locally",
                    c.as_root("apt-get install -y ccache distcc"))
    answers = probe_all(hosts, compiler, DEADLINE_S)
    used = [a.host for a in answers if a.problem is None]
    refused = "; ".join(f"{a.host.address} {a.problem}" for a in answers if a.problem)
    fix = ("check that distccd runs on each host, --allow's this machine and has the compiler this board uses "
           "(README: compile farm)")
    if not used:
        return warn(f"compile farm (from {chosen[1]}): no host answered: {refused}; builds compile locally", fix)
    said = (f"compile farm (from {chosen[1]}): {len(used)} of {len(hosts)} hosts compile {compiler.path} for "
            f"{c.host.arch} ({sum(h.limit for h in used)} slots added to {{jobs}})")
    return warn(f"{said}; {refused}", fix) if refused else ok(said)
