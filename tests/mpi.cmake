set(DTRAIN_TESTS_MPI test_mpi_allreduce.cpp test_mpi_comm.cpp test_mpi_comm_modes.cpp test_mpi_device_binding.cpp
  test_mpi_device_exchange.cpp test_mpi_watchdog.cpp)
