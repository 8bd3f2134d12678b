"""Fixed point does not hurt training: synchronous DDP through the aggregator vs gloo's float sum.

Same seed, same data, same minibatches: ``--sites`` processes train the digits MLP with DDP, once
with the wanreduce hook (gradient buckets all-reduced in int32 fixed point through a
LocalNetwork's SoftAggregator, train/ddp_hook.py) and once with gloo's exact float all-reduce.
Per seed: final training loss (full training set) and test accuracy of both, the largest
difference of a final parameter, the training time of each (clock from after set-up), and the
verdict of issue 15: accuracy within 0.5 percentage points and loss within 2 %.
Run: ``.venv/bin/python bench/bench_train_fixedpoint.py [--seeds 0,1,2] [--steps 300]``.
"""

from __future__ import annotations

import argparse
import os

from wanreduce.emulator.local_network import LocalNetwork
from wanreduce.planner import schedules as S
from wanreduce.planner.group_table import group_table
from wanreduce.train.digits import load_digits_split
from wanreduce.train.launcher import run_sites
from wanreduce.train.metrics import progress_rows
from wanreduce.train.site_worker import RunSpec

ACC_PP, LOSS_REL = 0.5, 0.02


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--sites", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"load average {os.getloadavg()[0]:.2f}; {args.sites} sites, {args.steps} steps, "
          f"lr {args.lr}, momentum 0.9, batch 32 per site")
    print(f"{'seed':>4} {'loss hook':>10} {'loss gloo':>10} {'rel':>9} {'acc hook':>9} "
          f"{'acc gloo':>9} {'d pp':>6} {'max|dθ|':>9} {'t hook s':>9} {'t gloo s':>9}")
    ok = True
    for seed in seeds:
        data = load_digits_split(seed)
        final = {}
        for mode in ("ddp", "ddp-gloo"):
            spec = RunSpec(mode=mode, steps=args.steps, lr=args.lr, seed=seed, timeout=30,
                           snapshot_every=args.steps)
            with LocalNetwork(args.sites) as net:
                net.configure(group_table(S.all_to_all(args.sites)), jobs=[0, 1])
                payloads = run_sites(spec, net, data)
            last = progress_rows(payloads, data, seed, 1)[-1]
            final[mode] = (last["loss"], last["accuracy"], last["time_s"],
                           payloads[0]["snapshots"][-1][2])
        (lh, ah, th, xh), (lg, ag, tg, xg) = final["ddp"], final["ddp-gloo"]
        rel, dpp = (lh - lg) / lg, 100 * (ah - ag)
        ok &= abs(rel) <= LOSS_REL and abs(dpp) <= ACC_PP
        print(f"{seed:>4} {lh:>10.5f} {lg:>10.5f} {rel:>+9.1e} {ah:>9.4f} {ag:>9.4f} "
              f"{dpp:>+6.2f} {abs(xh - xg).max():>9.1e} {th:>9.2f} {tg:>9.2f}")
    print(f"verdict: {'PASS' if ok else 'FAIL'} (|d acc| <= {ACC_PP} pp and |d loss| <= "
          f"{LOSS_REL:.0%} for every seed); load average now {os.getloadavg()[0]:.2f}")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
