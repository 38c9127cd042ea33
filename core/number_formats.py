"""The largest finite value of each number format a model may run in, written out so that code
without torch (a history drawn before torch loads) reads them too; tests/core/test_watching.py
holds them to torch.finfo."""

FP16_MAX = 65504.0  # torch.finfo(torch.float16).max
BF16_MAX = 3.3895313892515355e38  # torch.finfo(torch.bfloat16).max: fp32's exponent range
FORMATS = {"fp16": FP16_MAX, "bf16": BF16_MAX}
