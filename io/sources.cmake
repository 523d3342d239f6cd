# io/ sources.
set(DTRAIN_IO_SOURCES
  io/idx.cpp
  io/hdf5_dataset.cpp)
