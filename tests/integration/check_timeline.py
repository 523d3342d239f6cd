#!/usr/bin/python3
"""Checks a `dtrain train --timeline` file (Trace Event Format JSON).

usage: check_timeline.py FILE --ranks N --servers S --steps K [--mode M]
                         [--ranks-per-node R] [--checkpoints STEP,STEP]

Valid JSON with traceEvents and displayTimeUnit; one track (pid) per rank,
named "rank R (worker|server, node N|-, host H)" by process_name metadata; workers have
step, loader wait, forward and backward events on the main thread and
send/receive events (push/pull or allreduce buckets, bytes > 0) on the
exchange thread; servers have receive, aggregate, update and send events;
every event has dur >= 0 and lies inside its rank's step (main thread),
exchange step (exchange thread) or server step of the same step number;
exactly steps 0..K-1 are recorded, once each, in order and without overlap; a
server's update of a step starts after that step's first push (within the
file's clock-alignment error). Only the json module (Debian's python3).
"""
import argparse
import json
import re
import sys
from collections import defaultdict


def fail(msg):
    print("FAIL: timeline: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--servers", type=int, default=0)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--mode", default="hybrid")
    ap.add_argument("--ranks-per-node", type=int, default=0)
    ap.add_argument("--checkpoints", default="")
    a = ap.parse_args()

    with open(a.file) as f:
        doc = json.load(f)
    if doc.get("displayTimeUnit") != "ms":
        fail("displayTimeUnit is not ms")
    evs = doc.get("traceEvents")
    if not isinstance(evs, list) or not evs:
        fail("no traceEvents")
    other = doc.get("otherData", {})
    err = float(other.get("clock_alignment_error_us", -1))
    if err < 0:
        fail("otherData lacks clock_alignment_error_us")
    if other.get("dropped_events", 0) != 0:
        fail("events were dropped: %s" % other.get("dropped_events"))

    names = {}
    threads = defaultdict(dict)
    by = defaultdict(list)  # (pid, tid) -> X events
    for e in evs:
        ph = e.get("ph")
        if ph == "M":
            if e["name"] == "process_name":
                names[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                threads[e["pid"]][e["tid"]] = e["args"]["name"]
            continue
        if ph != "X":
            fail("unexpected phase %r" % ph)
        for k in ("name", "cat", "ts", "dur", "pid", "tid", "args"):
            if k not in e:
                fail("event lacks %r: %s" % (k, e))
        if e["dur"] < 0:
            fail("negative duration: %s" % e)
        by[(e["pid"], e["tid"])].append(e)

    workers = a.ranks - a.servers
    if sorted(names) != list(range(a.ranks)):
        fail("tracks %s, wanted one per rank 0..%d" % (sorted(names), a.ranks - 1))
    pat = re.compile(r"^rank (\d+) \((worker|server), node (\d+|-), host ([^ ()]+)\)$")
    for pid, name in names.items():
        m = pat.match(name)
        if not m or int(m.group(1)) != pid:
            fail("track %d is named %r" % (pid, name))
        role = "server" if pid >= workers else "worker"
        if m.group(2) != role:
            fail("track %d is a %s, wanted a %s" % (pid, m.group(2), role))
        if role == "worker" and a.ranks_per_node and int(m.group(3)) != pid // a.ranks_per_node:
            fail("track %d names node %s" % (pid, m.group(3)))
    pids_with_events = {p for (p, _) in by}
    if pids_with_events != set(range(a.ranks)):
        fail("ranks with events: %s" % sorted(pids_with_events))

    want_steps = list(range(a.steps))
    span_name = {}

    def check_nested(pid, tid, outer):
        es = by[(pid, tid)]
        spans = sorted((e for e in es if e["name"] == outer), key=lambda e: e["ts"])
        steps = [e["args"]["step"] for e in spans]
        if steps != want_steps:
            fail("rank %d thread %d: %r events of steps %s, wanted %s" % (pid, tid, outer, steps, want_steps))
        for x, y in zip(spans, spans[1:]):
            if x["ts"] + x["dur"] > y["ts"] + 0.01:
                fail("rank %d: %r of steps %d and %d overlap" % (pid, outer, x["args"]["step"], y["args"]["step"]))
        of = {e["args"]["step"]: e for e in spans}
        for e in es:
            if e["name"] in (outer, "checkpoint"):
                continue
            s = of.get(e["args"]["step"])
            if s is None:
                fail("rank %d: %s of step %s outside the recorded steps" % (pid, e["name"], e["args"]["step"]))
            if e["ts"] < s["ts"] - 0.01 or e["ts"] + e["dur"] > s["ts"] + s["dur"] + 0.01:
                fail("rank %d: %s of step %d [%.3f, +%.3f] is not inside its %s [%.3f, +%.3f]"
                     % (pid, e["name"], e["args"]["step"], e["ts"], e["dur"], outer, s["ts"], s["dur"]))
        return of

    kinds = lambda pid, tid: {e["name"] for e in by[(pid, tid)]}
    first_push = {}
    for pid in range(workers):
        check_nested(pid, 0, "step")
        need = {"step", "loader wait", "forward", "backward"} | ({"exchange wait"} if a.ranks > 1 else set())
        if not need <= kinds(pid, 0):
            fail("worker %d main thread lacks %s" % (pid, sorted(need - kinds(pid, 0))))
        if a.ranks == 1:
            continue
        check_nested(pid, 1, "exchange step")
        comm = [e for e in by[(pid, 1)] if e["cat"] == "comm" and e["name"] != "exchange step"]
        if a.mode == "allreduce":
            need = {"allreduce bucket"}
        else:
            need = {"push", "pull"}
            leader = a.mode == "ps" or not a.ranks_per_node or pid % a.ranks_per_node == 0
            if a.mode == "hybrid" and leader and a.ranks_per_node > 1:
                need |= {"member recv", "member send", "node sum"}
        if not need <= kinds(pid, 1):
            fail("worker %d exchange thread lacks %s (has %s)" % (pid, sorted(need - kinds(pid, 1)), sorted(kinds(pid, 1))))
        for e in comm:
            if e["args"].get("bytes", 0) <= 0:
                fail("worker %d: %s without bytes: %s" % (pid, e["name"], e))
            if e["name"] == "push" and e["args"].get("peer", -1) >= workers:
                s = e["args"]["step"]
                first_push[s] = min(first_push.get(s, e["ts"]), e["ts"])
    if a.checkpoints:
        want = sorted(int(s) for s in a.checkpoints.split(","))
        got = sorted(e["args"]["step"] for e in by[(0, 0)] if e["name"] == "checkpoint")
        if got != want:
            fail("rank 0 checkpoints after steps %s, wanted %s" % (got, want))
    for pid in range(workers, a.ranks):
        check_nested(pid, 0, "server step")
        need = {"server step", "server recv", "aggregate", "server update", "server send"}
        if not need <= kinds(pid, 0):
            fail("server %d lacks %s" % (pid, sorted(need - kinds(pid, 0))))
        for e in by[(pid, 0)]:
            if e["name"] in ("server recv", "server send") and (e["args"]["bytes"] <= 0 or e["args"]["peer"] >= workers):
                fail("server %d: %s with bytes %s from peer %s" % (pid, e["name"], e["args"]["bytes"], e["args"]["peer"]))
            if e["name"] == "server update":
                s = e["args"]["step"]
                if s in first_push and e["ts"] < first_push[s] - err - 1.0:
                    fail("server %d updates step %d at %.3f µs, before its first push at %.3f (alignment ±%.3f µs)"
                         % (pid, s, e["ts"], first_push[s], err))
    n = sum(len(v) for v in by.values())
    print("ok: timeline %s: %d events on %d tracks, steps %s, clock alignment ±%.1f µs"
          % (a.file, n, len(names), want_steps, err))


main()
