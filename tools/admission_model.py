#!/usr/bin/env python3
"""Independent naive models of LRU behind threshold / MRFU admission on the cloudPhysics
trace; its output is pinned in crates/policy/tests/admission_trace.rs.

Usage: python3 tools/admission_model.py [path to cloudPhysicsIO.oracleGeneral.bin]"""
import struct, sys
from collections import OrderedDict
path = sys.argv[1] if len(sys.argv) > 1 else 'shared/traces/cloudPhysicsIO.oracleGeneral.bin'
data = open(path, 'rb').read()
keys = [struct.unpack_from('<Q', data, i*24+4)[0] for i in range(len(data)//24)]

def run(cap, admit):
    lru = OrderedDict(); hits = ins = 0
    for k in keys:
        if k in lru:
            lru.move_to_end(k); hits += 1; admit(k, True); continue
        if not admit(k, False): continue
        if len(lru) >= cap: lru.popitem(last=False)
        lru[k] = 1; ins += 1
    return hits, ins

def threshold(n):
    counts = {}
    def f(k, res):
        if res: return True
        c = counts.get(k, 0) + 1
        if c >= n: counts.pop(k, None); return True
        counts[k] = c; return False
    return f

def mrfu(n, period, seq):
    st = {'counts': {}, 'seen': 0, 'last': None}
    def f(k, res):
        st['seen'] += 1
        if st['seen'] % period == 0:
            st['counts'] = {a: c // 2 for a, c in st['counts'].items() if c // 2 > 0}
        last = st['last']; st['last'] = k
        s = seq and last is not None and (k == last or k == last + 1)
        if res: return True
        cnt = st['counts']
        c = cnt.get(k, 0) if s else cnt.get(k, 0) + 1
        if not s and c > 0: cnt[k] = c
        if c >= n: cnt.pop(k, None); return True
        return False
    return f

print("distinct", len(set(keys)))
for cap in (1000, 5000):
    print(cap, "demand", run(cap, lambda k, r: True))
    print(cap, "threshold2", run(cap, threshold(2)))
    print(cap, "threshold3", run(cap, threshold(3)))
    print(cap, "mrfu2_p10000", run(cap, mrfu(2, 10000, True)))
    print(cap, "mrfu2_p10000_noseq", run(cap, mrfu(2, 10000, False)))
