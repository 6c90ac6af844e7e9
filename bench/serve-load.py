#!/usr/bin/python3
"""Clients at once against `commprof serve`, for docs/benchmarks.md.

    bench/serve-load.py RUNS_DIR RUN [CLIENTS] [REQUESTS]

Starts bin/commprof serve on RUNS_DIR, then CLIENTS threads (default 20)
each make REQUESTS requests (default 5): half the clients fetch RUN's
report page, half timeline.json windows at random places in the run. A
503 is retried after its Retry-After. Prints the answers by status, the
requests that never got a 200, the slowest answer, and the server's peak
memory (VmHWM).
"""
import json, os, random, re, subprocess, sys, threading, time, urllib.error, urllib.request

runs, run = sys.argv[1], sys.argv[2]
clients = int(sys.argv[3]) if len(sys.argv) > 3 else 20
reqs = int(sys.argv[4]) if len(sys.argv) > 4 else 5
srv = subprocess.Popen(["bin/commprof", "serve", runs, "--addr", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
base = None
for line in srv.stdout:
    m = re.search(r"http://[0-9.:]+", line)
    if m:
        base = m.group(0)
        break
threading.Thread(target=lambda: [None for _ in srv.stdout], daemon=True).start()

def get(path):
    while True:
        try:
            with urllib.request.urlopen(base + path, timeout=600) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            if e.code != 503:
                return e.code, b""
            statuses.append(503)
            time.sleep(int(e.headers.get("Retry-After", "1")))

statuses, slow, failed = [], [0.0], []
span = [0]
def client(i):
    rng = random.Random(i)
    for _ in range(reqs):
        t = time.time()
        if i % 2 == 0:
            code, _ = get(f"/runs/{run}/")
        else:
            if not span[0]:
                code, body = get(f"/runs/{run}/stats.json")
                span[0] = json.loads(body)["run"]["span_ns"]
            a = rng.randrange(span[0])
            code, _ = get(f"/runs/{run}/timeline.json?from={a}&to={a + rng.choice([10**6, 10**8, 10**9])}")
        statuses.append(code)
        if code != 200:
            failed.append(code)
        slow[0] = max(slow[0], time.time() - t)

t0 = time.time()
ts = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
for t in ts: t.start()
for t in ts: t.join()
hwm = re.search(r"VmHWM:\s+(\d+) kB", open(f"/proc/{srv.pid}/status").read()).group(1)
srv.terminate()
srv.wait()
counts = {c: statuses.count(c) for c in sorted(set(statuses))}
print(f"{clients} clients x {reqs} requests in {time.time() - t0:.1f} s: answers {counts}, never answered 200: {len(failed)}, "
      f"slowest {slow[0]:.1f} s, server peak {int(hwm) / 1024:.0f} MiB")
