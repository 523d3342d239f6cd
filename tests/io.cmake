set(DTRAIN_TESTS_IO test_io.cpp test_io_idx.cpp test_io_arrays.cpp
  test_prefetcher.cpp test_prefetcher_data.cpp
  test_checkpoint.cpp)
