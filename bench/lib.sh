# bench/lib.sh — shell helpers shared by bench/, slurm/ and tests/integration/
# (sourced, never run). Public tools only: bash, python3 (json), sed.
#
#   dt_root_env                 export Open MPI's run-as-root variables when root
#   dt_mpirun NP ARGS...        mpirun -np NP on this machine (oversubscribed, unbound)
#   json_field FILE KIND FIELD  FIELD of the last JSON line {"kind": KIND, ...} of a
#                               metrics file (exit 1 naming the file when absent)
#   job_value FILE KEY [DEF]    the value of KEY in a job file (INI as dtrain reads
#                               it: "key = value", '#' comments, the last one wins),
#                               else DEF
#   dt_python                   the python3 that has json (DTRAIN_PYTHON, else python3)

dt_root_env() {
  if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
}

dt_python() { echo "${DTRAIN_PYTHON:-python3}"; }

dt_mpirun() {
  local np=$1; shift
  mpirun -np "$np" --oversubscribe --bind-to none "$@"
}

json_field() {
  "$(dt_python)" - "$@" <<'PY'
import json, sys
path, kind, field = sys.argv[1:4]
last = None
for line in open(path):
    line = line.strip()
    if not line:
        continue
    rec = json.loads(line)
    if rec.get("kind") == kind:
        last = rec
if last is None or field not in last:
    sys.exit(f"{path}: no '{kind}' record with '{field}'")
print(last[field])
PY
}

job_value() {
  local file=$1 key=$2 def=${3-} v=""
  [ -r "$file" ] && v=$(sed -nE "s/^[[:space:]]*${key}[[:space:]]*=[[:space:]]*([^#]*[^#[:space:]])?[[:space:]]*(#.*)?$/\1/p" "$file" | tail -1)
  echo "${v:-$def}"
}
