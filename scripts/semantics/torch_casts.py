"""Prints what PyTorch does on CUDA (and on the CPU) for float-to-integer and float-to-bool
casts of NaN, infinities and out-of-range values, for every float dtype. The CPU reference
evaluator and the generated kernels follow the CUDA column (see the evaluator's spec)."""
import torch

values = [float("nan"), float("inf"), float("-inf"), 3e9, -3e9, 1e19, -1e19, 1e30, 2.5, -2.5, -0.5, 65504.0]
for src in [torch.float16, torch.bfloat16, torch.float32, torch.float64]:
    for dst in [torch.int32, torch.int64, torch.bool, torch.int8, torch.uint8]:
        x = torch.tensor(values, dtype=torch.float64).to(src)
        cuda = x.cuda().to(dst).cpu().tolist()
        cpu = x.to(dst).tolist()
        print(f"{str(src)[6:]:>8} -> {str(dst)[6:]:<6} cuda {cuda}")
        if cpu != cuda:
            print(f"{'':>8}    {'':<6} cpu  {cpu}")
print("inputs:", values)
