# The layer kinds, one source a kind (layers/kinds/<kind>.hpp holds its options).
set(DTRAIN_LAYER_KIND_SOURCES
  layers/kinds/add.cpp
  layers/kinds/batch_norm.cpp
  layers/kinds/conv.cpp
  layers/kinds/dropout.cpp
  layers/kinds/flatten.cpp
  layers/kinds/linear.cpp
  layers/kinds/lrn.cpp
  layers/kinds/pool.cpp
  layers/kinds/relu.cpp)
