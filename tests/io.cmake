set(DTRAIN_TESTS_IO test_io.cpp test_io_idx.cpp test_io_arrays.cpp)
