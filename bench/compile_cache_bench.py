"""The compiled-model cache's payoff: the first cuvil.compile of a model (cold caches), a second one in the same
process, and one in a fresh process (a hit), with the time of the first call after each (a hit defers
preparation to it).

    PYTHONPATH=python python bench/compile_cache_bench.py [--models resnet18,mlp] [--warm-jit]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(name):
    import torch
    torch.manual_seed(0)
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18().eval(), torch.randn(1, 3, 224, 224)
    if name == "mlp":  # bench/python_bench.py's
        model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
        return model, torch.randn(1, 784)
    raise SystemExit(f"unknown model {name}")


def child(name: str, runs: int) -> None:
    import warnings
    warnings.simplefilter("ignore")
    import cuvil
    model, x = build(name)
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        c = cuvil.compile(model, (x,))
        t1 = time.perf_counter()
        c(x)
        t2 = time.perf_counter()
        out.append({"compile_s": t1 - t0, "first_call_s": t2 - t1, "hit": hasattr(c, "_cache_key")})
    print(json.dumps(out))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="resnet18,mlp")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--runs", type=int, default=2, help=argparse.SUPPRESS)
    p.add_argument("--warm-jit", action="store_true",
                   help="fill the per-kernel JIT cache first (model cache off), so the first compile generates no code")
    a = p.parse_args()
    if a.child:
        child(a.child, a.runs)
        return
    for name in a.models.split(","):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, CUVIL_CACHE_DIR=d, CUVIL_MODEL_CACHE="on",
                       PYTHONPATH=os.path.join(ROOT, "python"))
            env.setdefault("GOMP_SPINCOUNT", "10000")

            def run(runs):
                r = subprocess.run([sys.executable, __file__, "--child", name, "--runs", str(runs)], env=env,
                                   capture_output=True, text=True, check=True)
                return json.loads(r.stdout.strip().splitlines()[-1])

            if a.warm_jit:
                subprocess.run([sys.executable, __file__, "--child", name, "--runs", "1"], check=True,
                               env=dict(env, CUVIL_MODEL_CACHE="off"), capture_output=True)
            first, same = run(2)
            fresh = run(1)[0]
            tag = " (warm JIT cache)" if a.warm_jit else ""
            pct = lambda r: 100 * r["compile_s"] / first["compile_s"]  # noqa: E731
            print(f"{name}{tag}: first compile {first['compile_s']:.3f} s (+ first call "
                  f"{first['first_call_s']:.3f} s); second, same process {same['compile_s']:.3f} s = "
                  f"{pct(same):.1f} % (+ first call {same['first_call_s']:.3f} s, hit={same['hit']}); "
                  f"fresh process {fresh['compile_s']:.3f} s = {pct(fresh):.1f} % "
                  f"(+ first call {fresh['first_call_s']:.3f} s, hit={fresh['hit']})", flush=True)


if __name__ == "__main__":
    main()
