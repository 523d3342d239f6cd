// comm/device_binding.cpp — all-gather of (world rank, device index, device
// key) over the node communicator and the duplicate check (device_binding.hpp).
#include "comm/device_binding.hpp"

#include <cstring>
#include <vector>

#include "core/error.hpp"

namespace dtrain::comm {

namespace {
constexpr int kKeyBytes = 96;  // "GPU-<32 hex> pci dddd:bb:dd" fits with room to spare
}

void check_device_binding(MPI_Comm node_comm, int device, const std::string& device_key) {
  int local = 0, size = 1, world = 0;
  DT_CHECK_MPI(MPI_Comm_rank(node_comm, &local));
  DT_CHECK_MPI(MPI_Comm_size(node_comm, &size));
  DT_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world));
  char mine[kKeyBytes] = {};
  std::strncpy(mine, device_key.c_str(), kKeyBytes - 1);
  std::vector<char> keys(size_t(size) * kKeyBytes);
  DT_CHECK_MPI(MPI_Allgather(mine, kKeyBytes, MPI_CHAR, keys.data(), kKeyBytes, MPI_CHAR, node_comm));
  int ids[2] = {world, device};
  std::vector<int> all(size_t(size) * 2);
  DT_CHECK_MPI(MPI_Allgather(ids, 2, MPI_INT, all.data(), 2, MPI_INT, node_comm));
  for (int a = 0; a < size; ++a)
    for (int b = a + 1; b < size; ++b) {
      const char* ka = &keys[size_t(a) * kKeyBytes];
      if (std::strncmp(ka, &keys[size_t(b) * kKeyBytes], kKeyBytes) != 0) continue;
      DT_USAGE("ranks ", all[size_t(a) * 2], " (local rank ", a, ", device ", all[size_t(a) * 2 + 1],
               ") and ", all[size_t(b) * 2], " (local rank ", b, ", device ",
               all[size_t(b) * 2 + 1], ") of one node are bound to the same GPU (", ka,
               "): start at most one rank per GPU on a node (",
               size, " ranks on this node), e.g. srun --gpus-per-task=1 or fewer --ntasks-per-node");
    }
}

}  // namespace dtrain::comm
