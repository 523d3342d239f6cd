add_executable(dtrain_compare_params compare_params.cpp)
target_include_directories(dtrain_compare_params PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(dtrain_compare_params PRIVATE dtrain_io)
add_executable(dtrain_compare_checkpoints compare_checkpoints.cpp)
target_include_directories(dtrain_compare_checkpoints PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(dtrain_compare_checkpoints PRIVATE dtrain_io)
# Integration tests: the dtrain binary on real Fashion-MNIST (Debian's
# dataset-fashion-mnist), sharing one converted copy through a fixture.
set(DTRAIN_IT_ENV "DTRAIN=$<TARGET_FILE:dtrain>;MAKE_STORE=$<TARGET_FILE:dtrain_make_jpeg_store>;COMPARE=$<TARGET_FILE:dtrain_compare_params>;COMPARE_CKPT=$<TARGET_FILE:dtrain_compare_checkpoints>;WORK=${CMAKE_BINARY_DIR}/it;SRC=${CMAKE_SOURCE_DIR};OMP_NUM_THREADS=2;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
foreach(t data_convert train_short precision determinism bad_input distributed failures rank_failures tune tune_prediction device_staged usage_and_outputs checkpoint checkpoint_faults recipes jpeg_train compute_stand_in timeline)
  add_test(NAME it_${t} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/${t}.sh)
  set_tests_properties(it_${t} PROPERTIES ENVIRONMENT "${DTRAIN_IT_ENV}" LABELS integration TIMEOUT 900)
endforeach()
set_tests_properties(it_data_convert PROPERTIES FIXTURES_SETUP fashion_data)
# it_precision exits 77 (skipped) after its refusals where the CPU cannot
# compute in bf16 (no AVX512-BF16 or AMX): its learning half needs one.
set_tests_properties(it_precision PROPERTIES SKIP_RETURN_CODE 77)
set_tests_properties(it_train_short it_precision it_determinism it_bad_input it_distributed it_failures it_rank_failures it_tune it_tune_prediction it_device_staged it_usage_and_outputs it_checkpoint it_checkpoint_faults it_compute_stand_in it_timeline PROPERTIES FIXTURES_REQUIRED fashion_data)
# it_failures and it_rank_failures check that no dtrain process is left behind
# (pgrep), so nothing else may run beside them under `ctest -j`.
# They take 1-2 min; a hung job ends by their own `bounded` time-outs sooner
# still, so a hang costs minutes, not the suite's 900 s.
set_tests_properties(it_failures it_rank_failures PROPERTIES RUN_SERIAL TRUE TIMEOUT 400)
# it_recipes makes its own synthetic data (no fixture); 4 workers + 1 server, twice.
set_tests_properties(it_recipes PROPERTIES TIMEOUT 300)
# it_compute_stand_in times its steps against the requested stand-in (within 5% median):
# alone, not beside a test that loads both cores.
set_tests_properties(it_compute_stand_in PROPERTIES RUN_SERIAL TRUE)
