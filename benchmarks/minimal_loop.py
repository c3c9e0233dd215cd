"""The smallest hand-written loop doing the runners' work, to check the harness costs nothing.

    python -m benchmarks.minimal_loop --batch 256 --precision bf16 --channels-last --output m.json

Same model (torchvision, weights=None), same GPU-resident batch, same SGD, same autocast
region and step order as both runners, optionally inside a one-rank DDP wrapper; no config
object, no hooks, no checks. Step times come from CUDA events on step boundaries like the
runners' timer. Deliberately standalone: it imports nothing from this suite.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision


def main() -> None:
    """Run warm-up + timed steps for each variant and print/write the median step times."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--precision", choices=["fp32", "tf32", "bf16", "fp16"], default="bf16")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument(
        "--variants",
        default="plain,ddp",
        help="comma list of plain, ddp, ddp-side-stream"
        " (DDP built on a side stream, as Lightning does)",
    )
    p.add_argument("--output", default=None)
    args = p.parse_args()

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = (
        args.precision == "tf32"
    )
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=device)

    results = {}
    for variant in args.variants.split(","):
        torch.manual_seed(1234)
        model = torchvision.models.resnet50(weights=None).to(memory_format=fmt)
        if args.compile:
            model = torch.compile(model)
        model = model.to(device)
        if variant.startswith("ddp"):
            # Lightning's DDPStrategy constructs the wrapper under
            # torch.cuda.stream(torch.cuda.Stream())
            side = (
                torch.cuda.stream(torch.cuda.Stream())
                if variant == "ddp-side-stream"
                else contextlib.nullcontext()
            )
            with side:
                model = torch.nn.parallel.DistributedDataParallel(
                    model, device_ids=[0], gradient_as_bucket_view=True
                )
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        scaler = torch.amp.GradScaler("cuda") if args.precision == "fp16" else None
        g = torch.Generator(device=device).manual_seed(1234)
        x = torch.randn(args.batch, 3, 224, 224, generator=g, device=device).contiguous(
            memory_format=fmt
        )
        y = torch.randint(0, 1000, (args.batch,), generator=g, device=device)
        ac = (
            (lambda: torch.autocast("cuda", dtype=dtype, cache_enabled=False))
            if dtype
            else contextlib.nullcontext
        )

        marks = []
        for step in range(args.warmup_steps + args.steps):
            if step == args.warmup_steps:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
            if step >= args.warmup_steps:
                e = torch.cuda.Event(enable_timing=True)
                e.record()
                marks.append(e)
            with ac():
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            if scaler is None:
                loss.backward()
                opt.step()
            else:
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                scaler.step(opt)
                scaler.update()
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        marks.append(e)
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        times = [a.elapsed_time(b) for a, b in zip(marks, marks[1:])]
        median = statistics.median(times)
        results[variant] = {
            "median_ms": median,
            "images_per_second": args.batch / median * 1e3,
            "wall_images_per_second": args.batch * args.steps / wall,
            "step_times_ms": times,
        }
        print(
            f"minimal loop [{variant}]: median {median:.2f} ms/step,"
            f" {args.batch / median * 1e3:,.1f} images/s"
        )
        del model, opt
        torch.cuda.empty_cache()
    dist.destroy_process_group()
    if args.output:
        with open(args.output, "w") as f:
            json.dump(
                {
                    "args": vars(args),
                    "torch": torch.__version__,
                    "gpu": torch.cuda.get_device_name(0),
                    "variants": results,
                },
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
