#!/usr/bin/env python3
"""What a process's resident pages of the stillmoment binary are: reads /proc/PID/pagemap
(root) for each mapping of the binary and attributes every present page to the Swift
module (or C library) whose symbols it holds, from `nm`. Usage: bench/pages.py PID [BIN]."""
import bisect
import collections
import os
import re
import struct
import subprocess
import sys

pid = int(sys.argv[1])
binary = os.path.realpath(sys.argv[2] if len(sys.argv) > 2 else f"/proc/{pid}/exe")
PAGE = os.sysconf("SC_PAGE_SIZE")

# Symbols by address: the module from a Swift mangled name ($s<len><Module>…), else the name's prefix.
syms = []
for line in subprocess.run(["nm", "-n", "--defined-only", binary], capture_output=True, text=True).stdout.splitlines():
    parts = line.split()
    if len(parts) < 3:
        continue
    addr, name = int(parts[0], 16), parts[2]
    m = re.match(r"^\$s(\d+)", name)
    if m:
        n = int(m.group(1))
        module = name[2 + len(m.group(1)):2 + len(m.group(1)) + n]
    elif name.startswith("_ZN") or name.startswith("_ZNK"):
        m = re.match(r"_ZN?K?(\d+)", name)
        module = "C++ " + (name[len(m.group(0)):len(m.group(0)) + int(m.group(1))] if m else "?")
    else:
        module = "C " + re.split(r"[_.]", name.lstrip("_"))[0][:12]
    syms.append((addr, module))
addrs = [a for a, _ in syms]

maps = []
with open(f"/proc/{pid}/maps") as f:
    for line in f:
        p = line.split()
        if len(p) >= 6 and os.path.realpath(p[5]) == binary:
            lo, hi = (int(x, 16) for x in p[0].split("-"))
            maps.append((lo, hi, int(p[2], 16), p[1]))
base = min(lo - off for lo, _, off, _ in maps)  # the load bias (PIE)

counts = collections.Counter()
total = collections.Counter()
with open(f"/proc/{pid}/pagemap", "rb") as pm:
    for lo, hi, off, perms in maps:
        pm.seek(lo // PAGE * 8)
        data = pm.read((hi - lo) // PAGE * 8)
        for i in range((hi - lo) // PAGE):
            (entry,) = struct.unpack_from("<Q", data, i * 8)
            if entry >> 63 & 1:
                vaddr = lo + i * PAGE - base
                k = bisect.bisect_right(addrs, vaddr) - 1
                module = syms[k][1] if k >= 0 else "?"
                counts[(perms, module)] += 1
                total[perms] += 1
for perms, n in total.items():
    print(f"{perms}: {n * PAGE // 1024} KB resident")
for (perms, module), n in counts.most_common(25):
    print(f"  {n * PAGE // 1024:6d} KB  {perms}  {module}")
