#!/usr/bin/env bash
# bench/tuned_vs_untuned.sh — does the tuner's job file beat the job it came from?
# `dtrain tune` profiles the untuned job (the README's main job: LeNet-5 on
# Fashion-MNIST, 2 virtual nodes × 2 workers + 1 server, minibatch 16 per worker)
# for a 2-node × 2-worker target (--base-batch 64: the job's lr is for its global
# batch, 4 × 16) and writes tuned.ini; then both jobs train the
# same number of epochs, REPEATS times, interleaved (untuned, tuned, untuned, …), on
# the same machine, and the script prints each run's images/s and test accuracy,
# the medians, and the ratio tuned / untuned.
# usage: bench/tuned_vs_untuned.sh OUTDIR [EPOCHS=1] [REPEATS=3]
set -eu
cd "$(dirname "$0")/.."
source bench/lib.sh
dt_root_env
export OMP_NUM_THREADS=1
B=${DTRAIN:-build/dtrain}
O=${1:?usage: $0 OUTDIR [EPOCHS] [REPEATS]}; E=${2:-1}; R=${3:-3}
mkdir -p "$O"
untuned=(--job jobs/fashion_lenet.ini --mode hybrid --ps 1 --ranks-per-node 2 --minibatch 16 --threads 1)
dt_mpirun 4 "$B" tune "${untuned[@]}" --nodes 2 --workers-per-node 2 \
  --base-batch 64 --candidates 16,32,64,128,256 --profile-steps 40 --out "$O/tuned.ini" > "$O/tune.log" 2>&1
tail -n 3 "$O/tune.log"
np_tuned=$(( 4 + $(job_value "$O/tuned.ini" ps 0) ))
run() { local name=$1 np=$2; shift 2
  dt_mpirun "$np" "$B" train "$@" --epochs "$E" --metrics "$O/$name.r$rep.jsonl" --save-params "" \
    > "$O/$name.r$rep.log" 2>&1
  local ips acc
  ips=$(json_field "$O/$name.r$rep.jsonl" run images_per_s)
  acc=$(json_field "$O/$name.r$rep.jsonl" epoch test_accuracy)
  printf '%-8s run %d: %8.0f images/s, test accuracy %s\n' "$name" "$rep" "$ips" "${acc:-?}"
  echo "$ips" >> "$O/$name.ips"; }
rm -f "$O"/*.ips
for rep in $(seq 1 "$R"); do
  run untuned 5 "${untuned[@]}"
  run tuned "$np_tuned" --job "$O/tuned.ini"
done
med() { sort -g "$1" | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
u=$(med "$O/untuned.ips"); t=$(med "$O/tuned.ips")
awk -v u="$u" -v t="$t" 'BEGIN {printf "median images/s: untuned %.0f, tuned %.0f, tuned / untuned = %.2f\n", u, t, t / u}'
