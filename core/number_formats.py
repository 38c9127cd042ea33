"""The largest finite value of each number format a model may run in, written out so that code
without torch (a history drawn before torch loads) reads them too; tests/core/test_watching.py
holds them to torch.finfo."""

FP16_MAX = 65504.0  # torch.finfo(torch.float16).max
BF16_MAX = 3.3895313892515355e38  # torch.finfo(torch.bfloat16).max: fp32's exponent range
FORMATS = {"fp16": FP16_MAX, "bf16": BF16_MAX}


def headroom(largest: float, fmt: str = "fp16") -> float:
    """The format's largest value / a point's largest |activation|: below 1, it overflows there
    (inf where the activation is 0)."""
    return FORMATS[fmt] / largest if largest else float("inf")
