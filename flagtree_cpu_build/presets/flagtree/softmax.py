"""A second ordinary kernel: row-wise softmax (loads with masks, reductions, exp), against torch.softmax.

Run by hand with the build's Python and FLAGTREE_BACKEND=cpu exported: python softmax.py
"""

from _common import MISCOMPILED, expectations, finish


def main() -> None:
    expect = expectations({"rows": 64, "cols": 781, "tolerance": 1e-5})
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        values = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
        shifted = values - tl.max(values, axis=0)
        numerator = tl.exp(shifted)
        result = numerator / tl.sum(numerator, axis=0)
        tl.store(out_ptr + row * out_row_stride + cols, result, mask=mask)

    torch.manual_seed(0)
    rows, cols = int(expect["rows"]), int(expect["cols"])
    x = torch.randn(rows, cols)
    out = torch.empty_like(x)
    softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK_SIZE=triton.next_power_of_2(cols))
    error = (out - torch.softmax(x, dim=1)).abs().max().item()
    limit = float(expect["tolerance"])
    finish("softmax", error <= limit, f"{rows}x{cols}, max error {error:.2e} (limit {limit:g})",
           "" if error <= limit else "the kernel's softmax differs from torch's",
           fix="" if error <= limit else MISCOMPILED, max_error=error)


if __name__ == "__main__":
    main()
