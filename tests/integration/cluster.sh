#!/usr/bin/env bash
# The emulated cluster (scripts/emulated-cluster.sh): 2 nodes, each a network
# + UTS namespace, links shaped to the 1gbe preset (1 Gbit/s). Checks:
#  1. up: two host names, two addresses, the shaping in place;
#  2. ping-pong (dtrain bench comm --links, 2 ranks): between nodes
#     within 15% of the shaped rate; within a node (shared memory) at least 3×
#     faster than that;
#  3. a 2-node hybrid LeNet-5 run through mpirun (2 workers per real node, no
#     --ranks-per-node, 1 server) sees "2 nodes" and equals the 1-process run
#     (relative L2 difference ≤ 1e-5, as it_distributed), and its gradients
#     crossed the shaped links (tc's byte counters on the nodes' eth0); its
#     --timeline is valid Chrome-trace JSON with one track per rank (check_timeline.py);
#  0. bad arguments (--slots x, a missing value, --rate fast, an unknown preset):
#     exit 2 naming the argument, nothing made;
#  4. down: no namespace, link, mount or process of the cluster is left.
# Skipped (exit 77, the reason printed) where namespaces cannot be made (not
# root, no iproute2, a kernel or container that refuses them). ~40 s.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
C="$SRC/scripts/emulated-cluster.sh"
netns_or_skip

NAME=c$((RANDOM % 10000))
# 0. Bad arguments: exit 2 naming the argument, nothing made.
expect_exit 2 "--slots 'x'" -- "$C" up --name "$NAME" --slots x
expect_exit 2 "--nodes needs a value" -- "$C" up --name "$NAME" --nodes
expect_exit 2 "--rate 'fast'" -- "$C" up --name "$NAME" --rate fast
expect_exit 2 "--preset 'bogus'" -- "$C" up --name "$NAME" --preset bogus
[ ! -e "/run/dtrain-cluster/$NAME" ] && ! ip netns list | grep -qE "^$NAME-" || fail "a refused up made something"
cleanup() { "$C" down --name "$NAME" > /dev/null 2>&1 || true; }
trap cleanup EXIT
"$C" up --nodes 2 --preset 1gbe --name "$NAME" | tee up.log
grep -q "node1  host name node1 " up.log && grep -q "node2  host name node2 " up.log || fail "host names: $(cat up.log)"
grep -c "rate 1Gbit" up.log | grep -qx 2 || fail "shaping: $(cat up.log)"
[ "$(hostname)" != node1 ] || fail "the host's own host name changed"
mapfile -t IPS < <(awk '{print $2}' /run/dtrain-cluster/$NAME/nodes)
crun() { "$C" mpirun --name "$NAME" -- --bind-to none -x OMP_NUM_THREADS=1 "$@"; }

# 2. Links.
# Two ranks per measurement (idle ranks polling on 2 cores would take the CPU the TCP path needs).
crun -np 2 --host "${IPS[0]}:1,${IPS[1]}:1" "$DTRAIN" bench comm --links --max-mb 16 | tee inter.log
crun -np 2 --host "${IPS[0]}:2" "$DTRAIN" bench comm --links --max-mb 16 | tee intra.log
"$(dt_python)" - inter.log intra.log <<'PY' || fail "the links are not what the cluster was made with"
import json, sys
def rec(f): return [json.loads(l) for l in open(f) if l.startswith('{"kind":"links"')][0]
inter, intra = rec(sys.argv[1])["inter"], rec(sys.argv[2])["intra"]
print(f"inter-node {inter['gbps']:.3f} Gb/s (shaped: 1), intra-node {intra['gbps']:.3f} Gb/s")
ok = rec(sys.argv[1])["intra"] is None and rec(sys.argv[2])["inter"] is None
ok = ok and abs(inter["gbps"] - 1.0) <= 0.15 and intra["gbps"] >= 3 * inter["gbps"]
sys.exit(0 if ok else 1)
PY

# 3. Hybrid training over the two nodes = the 1-process run.
"$DTRAIN" data fashion-mnist --out data > /dev/null
common=(--job "$SRC/jobs/fashion_lenet.ini" --train-data "$PWD/data/fashion-mnist-train.h5" --test-data ""
        --max-steps 20 --log-interval 10 --threads 1 --lr-schedule constant --warmup-epochs 0
        --reference-kernels true)
mpirun -np 1 "$DTRAIN" train "${common[@]}" --minibatch 64 --save-params "$PWD/one.h5" --metrics "$PWD/one.jsonl" > one.log
sent_bytes() { nsenter --net=/run/netns/$NAME-n$1 tc -s qdisc show dev eth0 | awk '/Sent/ {print $2; exit}'; }
b1=$(sent_bytes 1) b2=$(sent_bytes 2)
crun -np 5 --host "${IPS[0]}:2,${IPS[1]}:3" "$DTRAIN" train "${common[@]}" --minibatch 16 --mode hybrid --ps 1 \
  --save-params "$PWD/hybrid.h5" --metrics "$PWD/hybrid.jsonl" --timeline "$PWD/hybrid-timeline.json" \
  --timeline-steps 4 2>&1 | tee hybrid.log
grep -qF "4 workers in 2 nodes of 2, 1 server, mode hybrid" hybrid.log || fail "not 2 real nodes: $(head -3 hybrid.log)"
"$COMPARE" one.h5 hybrid.h5 1e-5 || fail "the 2-node hybrid run differs from the 1-process run"
# Its timeline: valid Chrome-trace JSON, one track per rank, the hybrid events of 4 steps.
/usr/bin/python3 "$IT_DIR/check_timeline.py" hybrid-timeline.json --ranks 5 --servers 1 --steps 4 \
  --mode hybrid --ranks-per-node 2 || fail "the 2-node hybrid timeline"
grep -q '"rank 2 (worker, node 1, host node2)"' hybrid-timeline.json || fail "rank 2 is not on node 1 (host node2) in the timeline"
d1=$(( $(sent_bytes 1) - b1 )) d2=$(( $(sent_bytes 2) - b2 ))
# Node 1's leader pushes its node's reduced gradient to the server (node 2) and pulls
# the parameters back: at least 61,706 floats (247 KB) each way per step, 20 steps.
echo "bytes out of node1's eth0: $d1, of node2's: $d2"
[ "$d1" -gt $((20 * 246824)) ] && [ "$d2" -gt $((20 * 246824)) ] || fail "the gradients did not cross the links"

# 4. Down leaves nothing.
"$C" down --name "$NAME"
trap - EXIT
left=$(ip netns list | grep -E "^$NAME-" || true)
[ -z "$left" ] || fail "namespaces left: $left"
[ ! -e /run/dtrain-cluster/$NAME ] || fail "state left: /run/dtrain-cluster/$NAME"
findmnt -rn -o TARGET | grep -q "dtrain-cluster/$NAME/" && fail "mounts left: $(findmnt -rn -o TARGET | grep dtrain-cluster)"
pgrep -f "/run/dtrain-cluster/$NAME/" > /dev/null && fail "processes left: $(pgrep -af "/run/dtrain-cluster/$NAME/")"
st=$("$C" status --name "$NAME" || true); grep -q "not up" <<<"$st" || fail "status after down: $st"
echo "ok: emulated cluster up, links, 2-node hybrid = 1 process, down"
