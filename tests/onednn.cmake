# Tests of the "cpu" backend (oneDNN + OpenBLAS) against the reference backend.
set(DTRAIN_TESTS_ONEDNN test_onednn.cpp)
