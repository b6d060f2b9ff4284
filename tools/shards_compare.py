#!/usr/bin/env python3
"""SHARDS-style curves: lachesis against libCacheSim's PyPI bindings, side by side.

libCacheSim's bindings (PyPI libcachesim 0.3.5) expose no SHARDS profiler: `SamplerType.
SHARDS_SAMPLER` exists but `Sampler(rate, SHARDS_SAMPLER)` raises "SHARDS_SAMPLER is not
added", and `TraceAnalyzer` computes reuse statistics, not curves. What they do expose is
the spatial sampler on the trace reader (`hash(obj_id) % (1/rate) == 0`: SHARDS-style key
sampling, no count correction); an LRU cache scaled by the rate on that sampled stream
gives the curve at each size (scaled-down simulation, one pass per size). We time that over
all sizes and compare its mean absolute error against `lachesis mrc --method exact` with
ours (`--method shards-rate` at the same rate, and fixed-size `shards-size`), and check our
exact curve against libCacheSim's own full LRU simulation at every size.

    python3 tools/shards_compare.py --lachesis target/release/lachesis --trace T.oracleGeneral.bin --rate 0.01
"""
import argparse
import json
import subprocess
import time

import libcachesim as lcs


def ours(exe, trace, method, sizes, rate=None):
    cmd = [exe, "mrc", "--trace", trace, "--ignore-obj-size", "--json", "--method", method,
           "--sizes", ",".join(map(str, sizes))]
    if rate is not None:
        cmd += ["--rate", str(rate)]
    t0 = time.perf_counter()
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    wall = time.perf_counter() - t0
    return {p["cache_size"]: p["miss_ratio"] for p in out["points"]}, out["seconds"], wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lachesis", default="target/release/lachesis")
    ap.add_argument("--trace", required=True)
    ap.add_argument("--rate", type=float, default=0.01)
    ap.add_argument("--points", type=int, default=20)
    a = ap.parse_args()
    info = json.loads(subprocess.run([a.lachesis, "trace", "info", a.trace, "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    footprint = info["unique_objects"]
    sizes = [max(1, footprint * i // a.points) for i in range(1, a.points + 1)]
    exact, _, _ = ours(a.lachesis, a.trace, "exact", sizes)
    rate_curve, rate_secs, _ = ours(a.lachesis, a.trace, "shards-rate", sizes, a.rate)
    size_curve, size_secs, _ = ours(a.lachesis, a.trace, "shards-size", sizes)
    sampler_type = lcs.SamplerType.SHARDS_SAMPLER
    try:
        lcs.libcachesim_python.Sampler(a.rate, sampler_type)
    except ValueError as e:
        print(f"libCacheSim: {e}; using SPATIAL_SAMPLER (hash-based key sampling)")
        sampler_type = lcs.SamplerType.SPATIAL_SAMPLER
    t0 = time.perf_counter()
    peer = {}
    keep = []  # the reader does not own its sampler: keep each alive (else a segfault)
    for s in sizes:
        sampler = lcs.libcachesim_python.Sampler(a.rate, sampler_type)
        keep.append(sampler)
        reader = lcs.TraceReader(a.trace, lcs.TraceType.ORACLE_GENERAL_TRACE,
                                 reader_init_params=lcs.ReaderInitParam(ignore_obj_size=True, sampler=sampler))
        keep.append(reader)
        cache = lcs.LRU(cache_size=max(1, round(s * a.rate)))
        peer[s], _ = cache.process_trace(reader)
    peer_secs = time.perf_counter() - t0
    t0 = time.perf_counter()
    full = {}
    for s in sizes:
        reader = lcs.TraceReader(a.trace, lcs.TraceType.ORACLE_GENERAL_TRACE,
                                 reader_init_params=lcs.ReaderInitParam(ignore_obj_size=True))
        full[s], _ = lcs.LRU(cache_size=s).process_trace(reader)
    full_secs = time.perf_counter() - t0

    def mae(c):
        return sum(abs(c[s] - exact[s]) for s in sizes) / len(sizes)

    print(f"trace {a.trace}: {info['requests']} requests, footprint {footprint} objects, rate {a.rate}, {len(sizes)} sizes")
    print(f"{'method':34} {'MAE':>8} {'seconds':>9}")
    print(f"{'lachesis shards-rate (one pass)':34} {mae(rate_curve):>8.4f} {rate_secs:>9.3f}")
    print(f"{'lachesis shards-size s_max=8192':34} {mae(size_curve):>8.4f} {size_secs:>9.3f}")
    print(f"{'libCacheSim sampler + scaled LRU':34} {mae(peer):>8.4f} {peer_secs:>9.3f}  (one pass per size)")
    print(f"{'libCacheSim full LRU (oracle)':34} {mae(full):>8.4f} {full_secs:>9.3f}  (one pass per size)")


if __name__ == "__main__":
    main()
