set(DTRAIN_TESTS_IO test_io.cpp test_io_idx.cpp test_io_arrays.cpp
  test_prefetcher.cpp test_prefetcher_data.cpp
  test_checkpoint.cpp
  test_io_jpeg.cpp test_augment.cpp)
# The jpeg-layout fixture writer (tests/jpeg_store.hpp): the unit tests, and
# dtrain_make_jpeg_store for the integration test and bench/README.md's loader numbers.
add_library(dtrain_test_jpeg_store STATIC jpeg_store.cpp)
target_include_directories(dtrain_test_jpeg_store PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(dtrain_test_jpeg_store PUBLIC dtrain_io)
add_executable(dtrain_make_jpeg_store make_jpeg_store.cpp)
target_link_libraries(dtrain_make_jpeg_store PRIVATE dtrain_test_jpeg_store)
