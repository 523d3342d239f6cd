# [cuda] tests: their own binary (only when the CUDA backend is built), whose main
# exits 77 without a GPU; SKIP_RETURN_CODE 77 makes ctest list it as skipped.
add_executable(dtrain_cuda_tests cuda_main.cpp test_cuda.cpp test_cuda_net.cpp test_cuda_train.cpp)
target_include_directories(dtrain_cuda_tests PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(dtrain_cuda_tests PRIVATE dtrain_engine Catch2::Catch2 MPI::MPI_CXX)
target_compile_options(dtrain_cuda_tests PRIVATE ${DTRAIN_WARNINGS})
add_test(NAME cuda COMMAND dtrain_cuda_tests)
set_tests_properties(cuda PROPERTIES SKIP_RETURN_CODE 77 LABELS cuda TIMEOUT 600
  ENVIRONMENT "${DTRAIN_MPI_ENV}")
