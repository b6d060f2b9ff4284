#!/usr/bin/env python3
"""Reference miss ratios from libCacheSim's PyPI bindings (`pip install libcachesim`).

Object mode (every request one object of size 1, libCacheSim's ignore_obj_size), on an
oracleGeneral trace. Prints one JSON object per (policy, size) with the same field names
`lachesis sim --json` uses, so the two can be compared line by line.

    python3 tools/libcachesim_ref.py --trace T.oracleGeneral.bin --policy lru,arc --size 100,1000
"""
import argparse
import json
import time

import libcachesim as lcs

# Our policy names -> libCacheSim constructors.
PEERS = {
    "lru": lcs.LRU,
    "fifo": lcs.FIFO,
    "clock": lcs.Clock,
    "lfu": lcs.LFU,
    "arc": lcs.ARC,
    "lirs": lcs.LIRS,
    "2q": lcs.TwoQ,
    "mq": lcs.MQ,
    "s3fifo": lcs.S3FIFO,
    "sieve": lcs.Sieve,
    "lruk": lcs.LRUK,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", required=True)
    ap.add_argument("--policy", default="lru")
    ap.add_argument("--size", default="1000")
    a = ap.parse_args()
    reader = lcs.TraceReader(
        a.trace,
        lcs.TraceType.ORACLE_GENERAL_TRACE,
        reader_init_params=lcs.ReaderInitParam(ignore_obj_size=True),
    )
    for name in a.policy.split(","):
        if name not in PEERS:
            raise SystemExit(f"libcachesim_ref: no libCacheSim peer for policy `{name}` (have: {', '.join(PEERS)})")
        for size in (int(s) for s in a.size.split(",")):
            reader.reset()
            cache = PEERS[name](cache_size=size)
            t0 = time.perf_counter()
            miss_ratio, _ = cache.process_trace(reader)
            secs = time.perf_counter() - t0
            n = reader.get_num_of_req() if hasattr(reader, "get_num_of_req") else None
            print(json.dumps({
                "policy": name,
                "cache_size": size,
                "requests": n,
                "miss_ratio": miss_ratio,
                "seconds": secs,
                "requests_per_sec": (n / secs) if n and secs > 0 else None,
                "peer": "libcachesim-pypi",
            }))


if __name__ == "__main__":
    main()
