# comm/ sources.
set(DTRAIN_COMM_SOURCES
  comm/topology.cpp
  comm/shard.cpp
  comm/ring_allreduce.cpp
  comm/exchange.cpp
  comm/ps_client.cpp
  comm/ps_server.cpp)
