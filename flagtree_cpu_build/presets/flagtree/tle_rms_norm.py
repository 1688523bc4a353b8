"""FEP phase 2: a @triton.jit kernel calling tle_ops.rms_norm (bf16, D=128, eps=1e-6) against a float reference.

Run by hand with the build's Python and FLAGTREE_BACKEND=cpu exported: python tle_rms_norm.py
"""

from _common import MISCOMPILED, expectations, finish


def main() -> None:
    expect = expectations({"dtype": "bfloat16", "dim": 128, "eps": 1e-6, "max_error": 0.0625})
    import torch
    import triton
    import triton.language as tl
    from triton.language.extra.cpu import tle_ops as tle_cpu

    @triton.jit
    def rms_kernel(x_ptr, w_ptr, out_ptr, D: tl.constexpr, eps: tl.constexpr):
        tle_cpu.rms_norm(x_ptr, w_ptr, out_ptr, D, eps)

    torch.manual_seed(0)
    dtype, dim, eps = getattr(torch, expect["dtype"]), int(expect["dim"]), float(expect["eps"])
    x = torch.randn(dim, dtype=dtype)
    w = torch.randn(dim, dtype=dtype)
    out = torch.empty(dim, dtype=dtype)
    rms_kernel[(1,)](x, w, out, dim, eps)
    reference = (x.float() / torch.sqrt((x.float() ** 2).mean() + eps)) * w.float()
    error = (out.float() - reference).abs().max().item()
    limit = float(expect["max_error"])
    finish("tle-rms-norm", error <= limit, f"max error {error:.4f} (limit {limit:g})",
           "" if error <= limit else "tle_ops.rms_norm does not match the float reference",
           fix="" if error <= limit else MISCOMPILED, max_error=error)


if __name__ == "__main__":
    main()
