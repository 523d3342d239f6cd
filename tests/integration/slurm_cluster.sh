#!/usr/bin/env bash
# A 2-node Slurm on the emulated cluster (slurm/local-cluster.sh start
# --nodes 2: slurmctld in the controller namespace, one slurmd per node in the
# node's network + UTS namespaces, one munged). Checks:
#  1. both nodes idle; `srun -N 2 hostname` prints node1 and node2 (and the
#     host's own host name is unchanged);
#  2. slurm/train.sbatch with `sbatch -N 2 --ntasks=5 --distribution=plane=2`
#     (ranks 0,1 on node1, 2,3 on node2, the server rank 4 on node1): a hybrid
#     LeNet-5 run through srun (MpiDefault=pmix) for 20 steps that sees "4 workers in
#     2 nodes of 2" and equals the 1-process run (relative L2 ≤ 1e-5, the
#     settings of it_distributed), its traffic through both nodes' shaped
#     eth0 (tc's byte counters);
#  2b. slurm/sweep over 1 and 2 nodes, 2 repeats each, and its report job:
#     both points' jobs COMPLETED (sacct/jobcomp), each 1-node job on one
#     node, each 2-node job on both;
#  3. stop: no namespace of the cluster, none of the daemons it started, no
#     slurmstepd of its own, no state folder is left.
# Skipped (exit 77, the reason printed) where namespaces cannot be made (not
# root, no iproute2/util-linux, a kernel or container that refuses them) or
# Slurm and munge are not installed. About 1.5 minutes here.
# Usage: DTRAIN=build/dtrain COMPARE=… WORK=dir SRC=repo bash tests/integration/slurm_cluster.sh
source "$(dirname "$0")/lib.sh"
: "${SRC:?repository root}" "${COMPARE:?dtrain_compare_params}"
export OMP_NUM_THREADS=1 PATH="$PATH:/usr/sbin"
source "$IT_DIR/slurm_lib.sh"
slurm_test_start "slurm cluster test" "${DTRAIN_SLURM_TEST_BUDGET:-330}"
slurm_nodes_up 2 sl mpirun
echo "ok: 2-node Slurm up on emulated cluster $NAME ($SLURM_CONF)"

# 1. Nodes and host names.
st=$(sinfo -h -N -o '%N %t' | sort | tr '\n' ' ')
[ "$st" = "node1 idle node2 idle " ] || fail "nodes: $st"
hn=$(timeout 60 srun -N 2 --ntasks-per-node 1 hostname | sort | tr '\n' ' ') || fail "srun -N 2 hostname failed"
[ "$hn" = "node1 node2 " ] || fail "srun -N 2 hostname printed '$hn'"
[ "$(hostname)" != node1 ] && [ "$(hostname)" != ctl ] || fail "the host's own host name changed"
echo "ok: sinfo: $st; srun -N 2 hostname: $hn"

# 2. The 2-node hybrid job = the 1-process run.
D="$WORK/data"
if [ ! -s "$D/fashion-mnist-train.h5" ]; then
  "$DTRAIN" data fashion-mnist --out data > /dev/null || fail "dtrain data fashion-mnist"
  D=$PWD/data
fi
common=(--train-data "$D/fashion-mnist-train.h5" --test-data "" --max-steps 20 --log-interval 10 --threads 1
        --lr-schedule constant --warmup-epochs 0 --reference-kernels true)
mpirun -np 1 --bind-to none "$DTRAIN" train --job "$SRC/jobs/fashion_lenet.ini" "${common[@]}" --minibatch 64 \
  --save-params "$PWD/one.h5" --metrics "$PWD/one.jsonl" > one.log 2>&1 || fail_log one.log "1-process run"
sent_bytes() { nsenter --net="/run/netns/$NAME-n$1" tc -s qdisc show dev eth0 | awk '/Sent/ {print $2; exit}'; }
b1=$(sent_bytes 1) b2=$(sent_bytes 2)
export DTRAIN DTRAIN_CHECKPOINT_DIR=""  # no checkpoint folder under the submit folder
id=$(sbatch --parsable --job-name=it-2node -N 2 --ntasks=5 --distribution=plane=2 --overcommit --cpus-per-task=1 \
       --time=00:05:00 --output="$PWD/hybrid.out" "$SRC/slurm/train.sbatch" "$SRC/jobs/fashion_lenet.ini" \
       "${common[@]}" --minibatch 16 --mode hybrid --ps 1 --save-params "$PWD/hybrid.h5" \
       --metrics "$PWD/hybrid.jsonl") || fail "sbatch refused the 2-node job"
res=$(wait_job "$id")
cat hybrid.out
[ "$res" = "COMPLETED 0:0" ] || fail "2-node job $id ended $res"
grep -qF "nodes:    2 [node[1-2]], tasks per node 3,2" hybrid.out || fail "job $id: not 3+2 tasks on node1, node2"
grep -qF "4 workers in 2 nodes of 2, 1 server, mode hybrid" hybrid.out || fail "job $id: the engine did not see 2 nodes of 2 workers"
"$COMPARE" one.h5 hybrid.h5 1e-5 || fail "the 2-node Slurm job differs from the 1-process run"
d1=$(( $(sent_bytes 1) - b1 )) d2=$(( $(sent_bytes 2) - b2 ))
echo "bytes out of node1's eth0: $d1, of node2's: $d2"
# node2's leader pushes its node's gradient to the server on node1 and pulls the
# parameters: ≥ 61,706 floats (247 KB) each way per step, 20 steps.
[ "$d1" -gt $((20 * 246824)) ] && [ "$d2" -gt $((20 * 246824)) ] || fail "the job's traffic did not cross the links"
echo "ok: sbatch -N 2 hybrid job $id ($res) = the 1-process run"

# 2b. slurm/sweep over 1 and 2 nodes (2 allreduce workers per node), 2 repeats
# of 2 warm-up + 6 timed steps each, and its report: both points COMPLETED.
PY=${DTRAIN_PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3 /usr/bin/python3; do
    if "$c" -c 'import matplotlib' 2>/dev/null; then PY=$(command -v "$c"); break; fi
  done
fi
[ -n "$PY" ] || fail "no python3 with matplotlib for slurm/report (python3-matplotlib: scripts/setup-deps.sh)"
"$SRC/slurm/sweep" --out "$PWD/sweep" --nodes "1 2" --workers-per-node 2 --modes allreduce --repeats 2 --steps 6 \
  --warmup-steps 2 --log-interval 2 --shared --time 00:05:00 --python "$PY" --sbatch-arg=--cpus-per-task=1 \
  --report-sbatch-arg=--time=00:05:00 "$SRC/jobs/fashion_lenet.ini" -- --train-data "$D/fashion-mnist-train.h5" \
  --threads 1 --lr-schedule constant --warmup-epochs 0 --reference-kernels true --minibatch 16 ||
  fail "slurm/sweep on the 2-node cluster failed"
rid=$(cat sweep/report.jobid)
res=$(wait_job "$rid")
[ "$res" = "COMPLETED 0:0" ] || { cat sweep/report-*.out sweep/*/*.out >&2; fail "sweep report job $rid ended $res"; }
"$PY" - "$PWD/sweep" <<'PY' || { tail -n 40 sweep/*/*.out >&2; fail "the 2-node sweep's report is wrong"; }
import csv, sys
rows = sorted(csv.DictReader(open(f"{sys.argv[1]}/report.csv")), key=lambda r: int(r["workers"]))
assert [int(r["workers"]) for r in rows] == [2, 4], rows
def hosts(nodelist):  # node1,node2 or node[1-2] → {"node1", "node2"}
    out = set()
    for part in nodelist.replace("node[1-2]", "node1,node2").split(","):
        out.add(part.strip())
    return out
for r, nodes in zip(rows, (1, 2)):
    ids = r["job_ids"].split(";")
    assert len(ids) == 2 and r["repeats_kept"] == "2", r
    assert r["job_states"] == ";".join(f"{i}=COMPLETED" for i in ids), r
    lists = dict(e.strip().split("=", 1) for e in r["nodelists"].split(";"))
    assert sorted(lists) == sorted(ids), (ids, lists)
    for i in ids:  # a 1-node job on node1 or node2, a 2-node job on both
        h = hosts(lists[i])
        assert len(h) == nodes and h <= {"node1", "node2"}, (nodes, i, lists[i])
print("ok: report.csv:", "; ".join(f"{r['workers']} workers {r['job_states']} on {r['nodelists']}" for r in rows))
PY
echo "ok: slurm/sweep of 2 points × 2 repeats on the 2-node cluster, both COMPLETED"

# 3. Stop leaves nothing.
mapfile -t daemons < "$slurm_state/pids"
conf=$SLURM_CONF
bash "$SRC/slurm/local-cluster.sh" stop "$slurm_state" || fail "local-cluster.sh stop failed"
state=$slurm_state slurm_state=""
left=$(ip netns list | grep -E "^$NAME-" || true)
[ -z "$left" ] || fail "namespaces left: $left"
[ ! -e "/run/dtrain-cluster/$NAME" ] || fail "emulated cluster state left: /run/dtrain-cluster/$NAME"
[ ! -e "$state" ] || fail "state folder left: $state"
for line in "${daemons[@]}"; do
  read -r prog pid <<<"$line"
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != "$prog" ] || fail "$prog (pid $pid) still runs"
done
for p in $(pgrep -x slurmstepd || true); do
  ! { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$conf" || fail "slurmstepd $p of this cluster left"
done
echo "ok: stop left no namespace, daemon (${#daemons[@]} stopped), step daemon or state folder"
