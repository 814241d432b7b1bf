# The CUDA backend of dtplan_runtime_exec (CudaDevice, NcclCommunicator) when CMake finds the CUDA
# toolkit, a CUDA compiler and NCCL; otherwise the stub whose factories say why there is
# none. Included by runtime/exec/CMakeLists.txt after dtplan_runtime_exec is defined; sets
# DTPLAN_HAVE_CUDA (ON/OFF) for the including scope.
#
#   -DDTPLAN_WITH_CUDA=OFF           force the stub
#   -DNCCL_ROOT=/opt/nccl            where NCCL lives when it is not beside CUDA
#   -DCMAKE_CUDA_ARCHITECTURES=90    GPUs to compile for (default 80;90: A100, H100)

option(DTPLAN_WITH_CUDA "Build the CUDA/NCCL backend when the toolkit and NCCL are found" ON)
set(DTPLAN_HAVE_CUDA OFF)
set(_dtplan_cuda_off "")

# The oldest NCCL with everything used here (ncclGetLastError, ncclCommGetAsyncError).
set(_dtplan_nccl_min 2.13)

if(NOT DTPLAN_WITH_CUDA)
  set(_dtplan_cuda_off "DTPLAN_WITH_CUDA is OFF")
else()
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND)
    set(_dtplan_cuda_off "the CUDA toolkit was not found (set CUDAToolkit_ROOT)")
  endif()
endif()

if(NOT _dtplan_cuda_off)
  find_path(NCCL_INCLUDE_DIR nccl.h
    HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include
    PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl
    HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64
    PATH_SUFFIXES lib lib64)
  if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
    set(_dtplan_cuda_off "NCCL (nccl.h, libnccl) was not found (set NCCL_ROOT)")
  else()
    file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _dtplan_nccl_defs
         REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
    string(REGEX REPLACE ".*NCCL_MAJOR +([0-9]+).*NCCL_MINOR +([0-9]+).*NCCL_PATCH +([0-9]+).*"
           "\\1.\\2.\\3" DTPLAN_NCCL_VERSION "${_dtplan_nccl_defs}")
    if(DTPLAN_NCCL_VERSION VERSION_LESS _dtplan_nccl_min)
      set(_dtplan_cuda_off
          "NCCL ${DTPLAN_NCCL_VERSION} at ${NCCL_INCLUDE_DIR} is older than ${_dtplan_nccl_min}")
    endif()
  endif()
endif()

if(NOT _dtplan_cuda_off)
  # enable_language(CUDA) is fatal without a working nvcc; ask first.
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    set(_dtplan_cuda_off "no working CUDA compiler (nvcc) was found")
  endif()
endif()

if(_dtplan_cuda_off)
  target_sources(dtplan_runtime_exec PRIVATE ${CMAKE_CURRENT_LIST_DIR}/src/cuda_backend_stub.cpp)
  message(STATUS "dtplan: CUDA backend OFF: ${_dtplan_cuda_off}")
  return()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to compile for")
endif()
enable_language(CUDA)

# The kernels build as their own object library so that the C++ warning flags of
# dtplan_runtime_exec (which nvcc rejects) do not reach nvcc; host-side warnings go through
# -Xcompiler instead. C++17: CMake 3.25 knows no C++20 flag for nvcc.
add_library(dtplan_cuda_kernels OBJECT ${CMAKE_CURRENT_LIST_DIR}/src/cuda/kernels.cu)
set_target_properties(dtplan_cuda_kernels PROPERTIES
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON
  POSITION_INDEPENDENT_CODE ON)
target_compile_options(dtplan_cuda_kernels PRIVATE -Xcompiler=-Wall,-Wextra,-Wshadow)
# dtplan/runtime/dropout.hpp (header-only, shared with the CPU device).
target_include_directories(dtplan_cuda_kernels PRIVATE ${CMAKE_CURRENT_LIST_DIR}/include)
target_link_libraries(dtplan_cuda_kernels PRIVATE CUDA::cudart)

target_sources(dtplan_runtime_exec PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/src/cuda/cuda_backend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/cuda/cuda_device.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/cuda/nccl_communicator.cpp
  $<TARGET_OBJECTS:dtplan_cuda_kernels>)
target_include_directories(dtplan_runtime_exec SYSTEM PRIVATE ${NCCL_INCLUDE_DIR})
target_link_libraries(dtplan_runtime_exec PRIVATE CUDA::cudart CUDA::cublas ${NCCL_LIBRARY})
# dtplan_runtime_exec predates enable_language(CUDA), and the CUDA objects in it make CMake ask
# for its CUDA settings too (it compiles no CUDA source itself).
set_target_properties(dtplan_runtime_exec PROPERTIES
  CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}"
  CUDA_STANDARD 17)
target_compile_definitions(dtplan_runtime_exec PUBLIC DTPLAN_HAVE_CUDA=1)
set(DTPLAN_HAVE_CUDA ON)
message(STATUS "dtplan: CUDA backend ON (CUDA ${CUDAToolkit_VERSION}, "
               "NCCL ${DTPLAN_NCCL_VERSION} at ${NCCL_LIBRARY})")
