# comm/ sources.
set(DTRAIN_COMM_SOURCES
  comm/topology.cpp
  comm/discovery.cpp
  comm/shard.cpp
  comm/ring_allreduce.cpp
  comm/allreduce.cpp
  comm/exchange.cpp
  comm/step_channel.cpp
  comm/staging.cpp
  comm/ps_client.cpp
  comm/ps_server.cpp
  comm/device_binding.cpp
  comm/intra_node.cpp
  comm/wait.cpp
  comm/watchdog.cpp)
# The NCCL intra-node reducer: only when CUDA and NCCL are found (CMakeLists.txt
# sets DTRAIN_HAVE_NCCL and links NCCL into dtrain_comm).
if(DTRAIN_HAVE_NCCL)
  list(APPEND DTRAIN_COMM_SOURCES comm/nccl_reducer.cpp)
endif()
