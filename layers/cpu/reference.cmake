# Plain-loop reference backend (owned by the reference kernels).
set(DTRAIN_REFERENCE_SOURCES
  layers/cpu/reference.cpp)
