# The emulated multi-node cluster (scripts/emulated-cluster.sh): label
# `cluster`; skipped (77) where network namespaces cannot be made.
add_test(NAME it_cluster COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/cluster.sh)
set_tests_properties(it_cluster PROPERTIES ENVIRONMENT "${DTRAIN_IT_ENV}"
  LABELS cluster TIMEOUT 300 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
