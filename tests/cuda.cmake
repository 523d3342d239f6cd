# [cuda] tests: their own binary (only when the CUDA backend is built), whose main
# exits 77 without a GPU; SKIP_RETURN_CODE 77 makes ctest list it as skipped.
# The CUDA kernels against the reference are the backend table of dtrain_tests
# ("backend ops: cuda …", skipped there without a GPU).
add_executable(dtrain_cuda_tests cuda_main.cpp test_cuda.cpp test_cuda_bf16.cpp test_cuda_net.cpp test_cuda_train.cpp)
target_include_directories(dtrain_cuda_tests PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(dtrain_cuda_tests PRIVATE dtrain_engine Catch2::Catch2 MPI::MPI_CXX)
target_compile_options(dtrain_cuda_tests PRIVATE ${DTRAIN_WARNINGS})
add_test(NAME cuda COMMAND dtrain_cuda_tests)
set_tests_properties(cuda PROPERTIES SKIP_RETURN_CODE 77 LABELS cuda TIMEOUT 600
  ENVIRONMENT "${DTRAIN_MPI_ENV}")
# The same binary on two ranks, so the NCCL reducer and the device-arena exchange
# really reduce across processes (in one process a reducer that does nothing passes).
# Without a GPU every rank exits 77 before MPI starts: skipped. With fewer GPUs
# than ranks the main says which cases it cannot run; those that need one GPU
# per rank (2 GPUs here): "nccl: reduce to leader, broadcast, …", "cuda: the
# intra-node reducer list picks nccl …", and the allreduce layout of "cuda: the
# exchange with a CUDA arena …" (its hybrid layout, one GPU worker + one CPU
# server, runs on 1 GPU); "cuda: device binding …" then checks that two ranks
# on one GPU are refused, naming both ranks.
add_test(NAME cuda_np2
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe $<TARGET_FILE:dtrain_cuda_tests>)
set_tests_properties(cuda_np2 PROPERTIES SKIP_RETURN_CODE 77 LABELS "cuda;mpi" TIMEOUT 600
  ENVIRONMENT "${DTRAIN_MPI_ENV}")
