# oneDNN + OpenBLAS CPU backend.
set(DTRAIN_ONEDNN_SOURCES
  layers/cpu/onednn.cpp
  layers/cpu/threads.cpp)
