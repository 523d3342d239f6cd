# The Slurm scripts (slurm/) against a real one-node Slurm that the test starts
# and stops itself (slurm/local-cluster.sh; needs Debian's slurm-wlm, munge and
# python3-matplotlib from scripts/setup-deps.sh — missing ones fail the test).
# Label `slurm`; uses the Fashion-MNIST fixture of the integration tests.
add_test(NAME it_slurm COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/slurm.sh)
set_tests_properties(it_slurm PROPERTIES
  ENVIRONMENT "${DTRAIN_IT_ENV}"
  LABELS slurm
  TIMEOUT 900
  FIXTURES_REQUIRED fashion_data
  RUN_SERIAL TRUE)
# Preemption and requeue under the same local Slurm: train.sbatch signalled
# mid-run (USR1, TERM then USR1, TERM to the steps), requeued, resumed, and
# bitwise equal to an uninterrupted run (tests/integration/slurm_requeue.sh).
add_test(NAME it_slurm_requeue COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/slurm_requeue.sh)
set_tests_properties(it_slurm_requeue PROPERTIES
  ENVIRONMENT "${DTRAIN_IT_ENV}"
  LABELS slurm
  TIMEOUT 900
  FIXTURES_REQUIRED fashion_data
  RUN_SERIAL TRUE)
