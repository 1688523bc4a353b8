"""FEP phase 1: the cpu backend is registered and libtriton has exactly the expected TLE builder methods.

Run by hand with the build's Python: python backend.py
"""

from _common import expectations, finish

FEP_METHODS = [
    "create_cpu_flash_attn_decode", "create_cpu_fused_decode_step", "create_cpu_fused_mlp",
    "create_cpu_fused_transformer_layer", "create_cpu_neon_sdot", "create_cpu_rms_norm", "create_cpu_sdot_gemv",
    "create_cpu_sdot_gemv_fused_bf16", "create_cpu_sdot_pack_weights", "create_cpu_swiglu",
]


def main() -> None:
    expect = expectations({"backends": ["cpu"], "builder_prefix": "create_cpu_", "builder_methods": FEP_METHODS})
    import triton
    import triton._C.libtriton as libtriton
    from triton.backends import backends

    builder = libtriton.ir.builder(libtriton.ir.context())
    found = sorted(m for m in dir(builder) if m.startswith(expect["builder_prefix"]))
    missing = sorted(set(expect["builder_methods"]) - set(found))
    extra = sorted(set(found) - set(expect["builder_methods"]))
    absent = [b for b in expect["backends"] if b not in backends]
    print(f"triton {triton.__version__}; backends: {', '.join(sorted(backends))}; {len(found)} "
          f"{expect['builder_prefix']}* methods")
    problems = []
    if absent:
        problems.append(f"backend(s) not registered: {', '.join(absent)}")
    if missing:
        problems.append(f"missing builder methods: {', '.join(missing)}")
    if extra:
        problems.append(f"unexpected builder methods: {', '.join(extra)}")
    finish("backend", not problems, f"triton {triton.__version__}, {len(found)} TLE ops", "; ".join(problems),
           triton_version=triton.__version__, backends=sorted(backends), builder_methods=found,
           missing=missing, extra=extra)


if __name__ == "__main__":
    main()
