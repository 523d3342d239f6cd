# The one backend test (every op of tests/backend_ops.cpp on every backend the
# build has, against the reference) and what the "cpu" backend promises beyond it.
set(DTRAIN_TESTS_ONEDNN backend_ops.cpp exec_backend.cpp test_backend_ops.cpp test_onednn.cpp)
