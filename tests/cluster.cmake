# The emulated multi-node cluster (scripts/emulated-cluster.sh): label
# `cluster`; skipped (77) where network namespaces cannot be made.
add_test(NAME it_cluster COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/cluster.sh)
set_tests_properties(it_cluster PROPERTIES ENVIRONMENT "${DTRAIN_IT_ENV}"
  LABELS cluster TIMEOUT 300 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
# A 2-node Slurm on the emulated cluster (slurm/local-cluster.sh --nodes 2):
# srun -N 2 hostname, an sbatch -N 2 hybrid job through srun (MpiDefault=pmix)
# equal to the 1-process run, a 2-point sweep with 2 repeats and its report
# (both points COMPLETED), stop leaves nothing (tests/integration/slurm_cluster.sh).
# Skipped (77) without namespaces or without Slurm and munge.
add_test(NAME it_slurm_cluster COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/slurm_cluster.sh)
set_tests_properties(it_slurm_cluster PROPERTIES ENVIRONMENT "${DTRAIN_IT_ENV}"
  LABELS cluster TIMEOUT 420 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
# Server placement and binding of slurm/train.sbatch on a 4-node Slurm of the
# emulated cluster: the fit check, sbatch -N 2 and -N 4 hybrid jobs with one
# server per node, each rank's CPU set the one srun gave its task (one core of
# its own in the cores-binding job), read from the engine's placement table;
# a dedicated job through mpirun; a no-server job kept 2 + 2
# (tests/integration/slurm_placement.sh). Skipped (77) as above.
add_test(NAME it_slurm_placement COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/slurm_placement.sh)
set_tests_properties(it_slurm_placement PROPERTIES ENVIRONMENT "${DTRAIN_IT_ENV}"
  LABELS cluster TIMEOUT 300 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
