# Tests of the plain-loop reference backend (paths relative to tests/).
set(DTRAIN_TESTS_REFERENCE
  test_reference_grad.cpp
  test_reference_norm_grad.cpp
  test_reference_forward.cpp)
