"""An ordinary @triton.jit kernel through the cpu backend: a vector add, which must be exact.

Run by hand with the build's Python and FLAGTREE_BACKEND=cpu exported: python vector_add.py
"""

from _common import MISCOMPILED, expectations, finish


def main() -> None:
    expect = expectations({"size": 98432})
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        pid = tl.program_id(axis=0)
        offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)

    torch.manual_seed(0)
    size = int(expect["size"])
    x, y = torch.rand(size), torch.rand(size)
    out = torch.empty(size)
    add_kernel[(triton.cdiv(size, 1024),)](x, y, out, size, BLOCK_SIZE=1024)
    mismatches = int((out != x + y).sum())
    finish("vector-add", mismatches == 0, f"{size} elements, {mismatches} wrong",
           "" if mismatches == 0 else "the kernel's sums differ from torch's",
           fix="" if mismatches == 0 else MISCOMPILED, mismatches=mismatches)


if __name__ == "__main__":
    main()
