// comm/device_binding.hpp — the check that no two ranks of a node drive the
// same GPU, before NCCL starts (NCCL would fail later with a less clear
// "duplicate GPU" error, or hang).
//
// The binding itself (local rank → device index = local rank mod visible
// devices) is layers::cuda_device_for_local_rank(); comm/ knows no CUDA here:
// the caller passes the index it chose and a key naming the physical GPU
// (layers::cuda_device_key(): UUID and PCI bus id, equal for two processes
// that see one GPU under different CUDA_VISIBLE_DEVICES indices).
#pragma once

#include <mpi.h>

#include <string>

namespace dtrain::comm {

// Collective over node_comm (every rank of it must call). Throws UsageError on
// every rank when two ranks of node_comm have the same device_key, naming both
// (world ranks and local ranks), the device index and the key; the message is
// identical on all ranks, so every rank stops (no rank hangs in NCCL).
void check_device_binding(MPI_Comm node_comm, int device, const std::string& device_key);

}  // namespace dtrain::comm
