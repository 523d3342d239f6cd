# Plain-loop reference backend (owned by the reference kernels).
set(DTRAIN_REFERENCE_SOURCES
  layers/cpu/reference.cpp
  layers/cpu/reference_conv.cpp
  layers/cpu/reference_pool.cpp
  layers/cpu/reference_norm.cpp
  # "cpu-staged": host kernels behind a device memory model (the device-path test double)
  layers/cpu/staged.cpp)
