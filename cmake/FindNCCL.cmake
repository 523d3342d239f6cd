# cmake/FindNCCL.cmake — NCCL for comm/'s intra-node reducer (DTRAIN_HAVE_NCCL).
#
# Searched as cmake/DtrainFindCudaLibrary.cmake says: NCCL_ROOT, then
# CMAKE_PREFIX_PATH, then the CUDA toolkit's folders, then the system's
# default prefixes. A pip wheel: NCCL_ROOT=.../site-packages/nvidia/nccl.
#
# Defines NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY, NCCL_VERSION and the
# imported target NCCL::nccl.
include(${CMAKE_CURRENT_LIST_DIR}/DtrainFindCudaLibrary.cmake)
dtrain_find_cuda_library(NCCL NCCL::nccl HEADER nccl.h LIBRARIES nccl libnccl.so.2
                         VERSION_HEADERS nccl.h VERSION_MACROS NCCL_MAJOR NCCL_MINOR NCCL_PATCH)
