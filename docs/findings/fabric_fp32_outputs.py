"""Fabric's bf16-mixed returns a forward's outputs in fp32 (a full copy of a language model's
logits each step): one model through fabric.setup and one under torch.autocast, timed in turns.
Run: python docs/findings/fabric_fp32_outputs.py (one GPU; on a CPU, a smaller model)"""

import time

import lightning as L
import torch
from torch import nn

GPU = torch.cuda.is_available()
VOCAB, WIDTH, SEQ, BATCH = (50_304, 768, 1024, 8) if GPU else (8_192, 64, 128, 4)


def model() -> nn.Module:
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), mlp, nn.Linear(WIDTH, VOCAB, bias=False))


def ms_per_step(step, steps: int = 20) -> float:
    sync = torch.cuda.synchronize if GPU else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - start) / steps * 1e3


fabric = L.Fabric(accelerator="cuda" if GPU else "cpu", devices=1, precision="bf16-mixed")
x, y = torch.randint(VOCAB, (2, BATCH, SEQ), device=fabric.device)
ours, plain = model(), model().to(fabric.device)
wrapped, opt_f = fabric.setup(ours, torch.optim.SGD(ours.parameters(), lr=0.1))
opt_t = torch.optim.SGD(plain.parameters(), lr=0.1)
autocast = torch.autocast(fabric.device.type, torch.bfloat16, cache_enabled=False)


def step(module, optimizer, backward) -> None:  # forward and loss under autocast, as Fabric's
    with autocast:
        loss = nn.functional.cross_entropy(module(x).flatten(0, 1), y.flatten())
    optimizer.zero_grad(set_to_none=True)
    backward(loss)
    optimizer.step()


with autocast:
    print(f"output dtype: Fabric {wrapped(x).dtype}, torch.autocast {plain(x).dtype}")
steps = {
    "fabric": lambda: step(wrapped, opt_f, fabric.backward),
    "autocast": lambda: step(plain, opt_t, torch.Tensor.backward),
}
times = {name: [] for name in steps}
for _ in range(5):  # alternating rounds, each after a short warm-up of its own
    for name, run in steps.items():
        ms_per_step(run, 3)
        times[name].append(ms_per_step(run))
best = {name: round(min(ms), 2) for name, ms in times.items()}
print(f"ms/step: {best}; Fabric / autocast {best['fabric'] / best['autocast']:.3f}")
