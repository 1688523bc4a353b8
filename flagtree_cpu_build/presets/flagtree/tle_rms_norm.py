"""FEP phase 2: a @triton.jit kernel calling tle_ops.rms_norm (bf16, D=128, eps=1e-6) against a float reference.

Run by hand with the build's Python and FLAGTREE_BACKEND=cpu exported: python tle_rms_norm.py
"""

from _common import MISCOMPILED, NOT_FLAGTREE, expectations, finish


def main() -> None:
    expect = expectations({"dtype": "bfloat16", "dim": 128, "eps": 1e-6, "max_error": 0.0625})
    import torch
    import triton
    import triton.language as tl
    try:
        from triton.language.extra.cpu import tle_ops as tle_cpu
    except ImportError:
        import importlib.util

        if importlib.util.find_spec("triton.backends.cpu") is None:  # PyPI's triton, say: not a missing link
            finish("tle-rms-norm", False, f"triton {triton.__version__}, no cpu backend",
                   "no TLE builtins (triton.language.extra.cpu) and no cpu backend in this triton", fix=NOT_FLAGTREE)
        raise  # FlagTree's triton without the TLE link: the recipe's diagnosis names `flagtree-cpu link`

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
