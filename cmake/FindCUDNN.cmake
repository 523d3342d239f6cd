# cmake/FindCUDNN.cmake — cuDNN 9 for the CUDA backend (layers/cuda/).
#
# Searched as cmake/DtrainFindCudaLibrary.cmake says: CUDNN_ROOT, then
# CMAKE_PREFIX_PATH, then the CUDA toolkit's folders, then the system's
# default prefixes. A pip wheel: CUDNN_ROOT=.../site-packages/nvidia/cudnn.
#
# Defines CUDNN_FOUND, CUDNN_INCLUDE_DIR, CUDNN_LIBRARY, CUDNN_VERSION and the
# imported target CUDNN::cudnn.
include(${CMAKE_CURRENT_LIST_DIR}/DtrainFindCudaLibrary.cmake)
dtrain_find_cuda_library(CUDNN CUDNN::cudnn HEADER cudnn.h LIBRARIES cudnn libcudnn.so.9
                         VERSION_HEADERS cudnn_version.h cudnn.h
                         VERSION_MACROS CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL)
