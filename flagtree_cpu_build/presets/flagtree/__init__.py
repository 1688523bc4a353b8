"""The flagtree preset library: the Arm64 FEP's validation kernels, standalone scripts run by the
*target* interpreter (the build's venv).

They import only triton, torch (and for decode-e2e transformers), never flagtree_cpu_build, so each can
also be run by hand: ``python <this folder>/vector_add.py``. Each prints what it does and ends with one
line ``FLAGTREE_CPU_RESULT {json}`` that `flagtree-cpu validate` reads; the script judges itself (its
expectations arrive as ``--expect JSON``). `flagtree-cpu validate --list` prints where this folder is.
"""
