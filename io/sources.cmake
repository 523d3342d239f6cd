# io/ sources.
set(DTRAIN_IO_SOURCES
  io/h5_util.cpp
  io/idx.cpp
  io/hdf5_dataset.cpp
  io/float_arrays.cpp
  io/sampler.cpp
  io/batch.cpp
  io/synth.cpp
  io/image_codec.cpp
  io/image_list.cpp
  io/image_store.cpp
  io/imagefolder.cpp
  io/augment.cpp
  io/prefetcher.cpp
  io/checkpoint_file.cpp
  io/checkpoint.cpp)
