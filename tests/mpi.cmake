set(DTRAIN_TESTS_MPI test_mpi_comm.cpp test_mpi_comm_modes.cpp)
