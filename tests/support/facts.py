"""Facts copied from FLAGTREE-FACTS.md and FlagTree's own link_flagtree_cpu.sh, independently of
the bundled recipe, so tests catch a typo in it."""

from __future__ import annotations

FACTS_LINKS = [
    ("include/triton/Dialect/TritonCPU", "../../../third_party/triton-cpu/include/triton/Dialect/TritonCPU"),
    ("lib/Dialect/TritonCPU", "../../third_party/triton-cpu/lib/Dialect/TritonCPU"),
    ("third_party/cpu/CMakeLists.txt", "../triton-cpu/third_party/cpu/CMakeLists.txt"),
    ("third_party/cpu/include", "../triton-cpu/third_party/cpu/include"),
    ("third_party/cpu/lib", "../triton-cpu/third_party/cpu/lib"),
    ("third_party/cpu/runtime", "../triton-cpu/third_party/cpu/runtime"),
    ("third_party/cpu/triton_cpu.cc", "../triton-cpu/third_party/cpu/triton_cpu.cc"),
    ("third_party/sleef", "triton-cpu/third_party/sleef"),
    ("third_party/cpu/language/cpu/neon.py",
     "../../../../third_party/triton-cpu/third_party/cpu/language/cpu/neon.py"),
    ("third_party/cpu/language/cpu/runtime.py",
     "../../../../third_party/triton-cpu/third_party/cpu/language/cpu/runtime.py"),
    ("third_party/cpu/language/cpu/tle_ops.py",
     "../../../../third_party/triton-cpu/third_party/cpu/language/cpu/tle_ops.py"),
    ("python/triton/language/extra/cpu", "../../../../third_party/cpu/language/cpu"),
]

FACTS_BUILDER_METHODS = {
    "create_cpu_flash_attn_decode", "create_cpu_fused_decode_step", "create_cpu_fused_mlp",
    "create_cpu_fused_transformer_layer", "create_cpu_neon_sdot", "create_cpu_rms_norm",
    "create_cpu_sdot_gemv", "create_cpu_sdot_gemv_fused_bf16", "create_cpu_sdot_pack_weights",
    "create_cpu_swiglu",
}
