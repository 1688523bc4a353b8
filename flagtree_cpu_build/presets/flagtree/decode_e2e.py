"""FEP phase 3 (optional): greedy decoding of a model given with --model, reporting tokens per second.

It measures transformers' generate() on the model as given, in the dtypes the model declares, and
counts its INT8 layers (the FEP used MiniCPM5-0.9B with 169 INT8 Linears: preparing such a model is
up to you); FlagGems is enabled when it is installed (it needs FLAGGEMS_VENDOR=arm on Arm). Without
--model the kernel is skipped, not failed.

Run by hand: python decode_e2e.py --model /path/to/model
"""

from _common import expectations, finish


def main() -> None:
    expect = expectations({"max_new_tokens": 32, "min_tokens_per_s": None, "model": None})
    if not expect.get("model"):
        finish("decode-e2e", None, "no model given (--model PATH)")
    import time

    import torch

    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:  # not one of the recipe's prerequisites: only this optional kernel needs it
        finish("decode-e2e", False, "transformers missing", str(exc), fix="install it into this interpreter: "
               "python -m pip install transformers")

    try:
        import flag_gems

        flag_gems.enable()
        with_gems = True
    except ImportError:
        with_gems = False
    tokenizer = AutoTokenizer.from_pretrained(expect["model"])
    # "auto": the dtypes the model folder declares — an INT8-quantized model stays INT8
    model = AutoModelForCausalLM.from_pretrained(expect["model"], torch_dtype="auto")
    int8_layers = sum(1 for m in model.modules() if getattr(getattr(m, "weight", None), "dtype", None) == torch.int8)
    prompt = tokenizer("The Arm CPU backend of Triton", return_tensors="pt")
    new = int(expect["max_new_tokens"])
    with torch.no_grad():
        model.generate(**prompt, max_new_tokens=2, do_sample=False)  # warm-up: kernels JIT-compile here
        start = time.monotonic()
        output = model.generate(**prompt, max_new_tokens=new, min_new_tokens=new, do_sample=False)
        elapsed = time.monotonic() - start
    tokens = output.shape[1] - prompt["input_ids"].shape[1]
    rate = tokens / elapsed
    floor = expect.get("min_tokens_per_s")
    passed = floor is None or rate >= float(floor)
    finish("decode-e2e", passed, f"{rate:.2f} tokens/s, {int8_layers} INT8 layers{', FlagGems' if with_gems else ''}",
           "" if passed else f"below the floor of {floor} tokens/s",
           fix="" if passed else "on big.LITTLE boards run on the big cores (taskset -c <big cores>) with the "
           "performance governor; flagtree-cpu doctor --only cpu.topology --only cpu.governor says how",
           tokens_per_s=rate, tokens=tokens, int8_layers=int8_layers, flag_gems=with_gems)


if __name__ == "__main__":
    main()
