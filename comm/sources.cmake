# comm/ sources.
set(DTRAIN_COMM_SOURCES
  comm/topology.cpp
  comm/shard.cpp
  comm/exchange.cpp)
