# oneDNN + OpenBLAS CPU backend ("cpu"): backend and elementwise loops, one
# file per kernel family, CPU thread control.
set(DTRAIN_ONEDNN_SOURCES
  layers/cpu/onednn.cpp
  layers/cpu/onednn_conv.cpp
  layers/cpu/onednn_formats.cpp
  layers/cpu/onednn_pool_lrn.cpp
  layers/cpu/onednn_bn.cpp
  layers/cpu/onednn_linear.cpp
  layers/cpu/gemm_peak.cpp
  layers/cpu/threads.cpp)
