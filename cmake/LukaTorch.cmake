# Finds LibTorch's CPU libraries.
#
# Search order: Torch_DIR / CMAKE_PREFIX_PATH (any LibTorch >= 2.1), then the project's
# virtualenv (.venv, made by scripts/setup.sh) through torch.utils.cmake_prefix_path.
#
# Only torch_cpu and c10 are linked. Torch's own CMake package would also pull in its CUDA
# setup (it requires a CUDA toolkit for CUDA builds of LibTorch and rewrites the global
# CUDA flags), which the CPU build must not depend on.
find_file(LUKA_TORCH_CONFIG TorchConfig.cmake
  PATH_SUFFIXES share/cmake/Torch lib/cmake/Torch
  HINTS "${Torch_DIR}")
if(NOT LUKA_TORCH_CONFIG)
  set(_luka_venv_python "${PROJECT_SOURCE_DIR}/.venv/bin/python")
  if(EXISTS "${_luka_venv_python}")
    execute_process(
      COMMAND "${_luka_venv_python}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE _luka_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _luka_torch_rc ERROR_QUIET)
    if(_luka_torch_rc EQUAL 0 AND _luka_torch_prefix)
      find_file(LUKA_TORCH_CONFIG TorchConfig.cmake
        PATHS "${_luka_torch_prefix}/Torch" NO_DEFAULT_PATH)
    endif()
  endif()
endif()
if(NOT LUKA_TORCH_CONFIG)
  message(FATAL_ERROR
    "LibTorch not found. Run scripts/setup.sh (installs torch into .venv), "
    "or pass -DCMAKE_PREFIX_PATH=/path/to/libtorch.")
endif()

get_filename_component(_luka_torch_cmake_dir "${LUKA_TORCH_CONFIG}" DIRECTORY)
# <root>/share/cmake/Torch/TorchConfig.cmake → <root>
get_filename_component(LUKA_TORCH_ROOT "${_luka_torch_cmake_dir}/../../.." ABSOLUTE)

find_library(LUKA_TORCH_CPU_LIB torch_cpu PATHS "${LUKA_TORCH_ROOT}/lib" NO_DEFAULT_PATH)
find_library(LUKA_C10_LIB c10 PATHS "${LUKA_TORCH_ROOT}/lib" NO_DEFAULT_PATH)
if(NOT LUKA_TORCH_CPU_LIB OR NOT LUKA_C10_LIB)
  message(FATAL_ERROR "LibTorch at ${LUKA_TORCH_ROOT} lacks libtorch_cpu or libc10 in lib/")
endif()

set(LUKA_TORCH_VERSION "")
if(EXISTS "${_luka_torch_cmake_dir}/TorchConfigVersion.cmake")
  file(STRINGS "${_luka_torch_cmake_dir}/TorchConfigVersion.cmake" _luka_tv
       REGEX "set\\(PACKAGE_VERSION \"[0-9.]+")
  string(REGEX MATCH "[0-9]+\\.[0-9]+(\\.[0-9]+)?" LUKA_TORCH_VERSION "${_luka_tv}")
endif()
if(LUKA_TORCH_VERSION AND LUKA_TORCH_VERSION VERSION_LESS 2.1)
  message(FATAL_ERROR "LibTorch ${LUKA_TORCH_VERSION} at ${LUKA_TORCH_ROOT}; LuKA Studio needs 2.1 or newer")
endif()

# Pre-C++11-ABI builds of LibTorch say so in TorchConfig.cmake; everything linking them must agree.
file(STRINGS "${LUKA_TORCH_CONFIG}" _luka_abi REGEX "_GLIBCXX_USE_CXX11_ABI=[01]")
set(_luka_abi_flag "")
if(_luka_abi MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  set(_luka_abi_flag "_GLIBCXX_USE_CXX11_ABI=0")
endif()

add_library(luka_torch INTERFACE)
target_link_libraries(luka_torch INTERFACE "${LUKA_TORCH_CPU_LIB}" "${LUKA_C10_LIB}" Threads::Threads)
target_include_directories(luka_torch SYSTEM INTERFACE
  "${LUKA_TORCH_ROOT}/include" "${LUKA_TORCH_ROOT}/include/torch/csrc/api/include")
if(_luka_abi_flag)
  target_compile_definitions(luka_torch INTERFACE ${_luka_abi_flag})
endif()
# at::parallel_for is a header template: in an OpenMP build of LibTorch it parallelises through
# `#pragma omp parallel`, which without -fopenmp silently runs on one thread.
file(STRINGS "${LUKA_TORCH_ROOT}/include/ATen/Config.h" _luka_omp REGEX "define AT_PARALLEL_OPENMP 1")
if(_luka_omp)
  find_package(OpenMP REQUIRED COMPONENTS CXX)
  target_compile_options(luka_torch INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${OpenMP_CXX_FLAGS}>)
  # Link the OpenMP runtime LibTorch ships with, when it ships one, so that one runtime is loaded.
  find_library(LUKA_TORCH_GOMP NAMES libgomp.so.1 gomp PATHS "${LUKA_TORCH_ROOT}/lib" NO_DEFAULT_PATH)
  if(LUKA_TORCH_GOMP)
    target_link_libraries(luka_torch INTERFACE "${LUKA_TORCH_GOMP}")
  else()
    target_link_libraries(luka_torch INTERFACE OpenMP::OpenMP_CXX)
  endif()
endif()
set_target_properties(luka_torch PROPERTIES INTERFACE_LINK_OPTIONS "-Wl,-rpath,${LUKA_TORCH_ROOT}/lib")

# With LUKA_CUDA and a CUDA build of LibTorch (the GPU machines' python3 torch), the GPU model
# path also needs torch_cuda and c10_cuda: they register the CUDA backend from static
# initializers, so they are linked whole (--no-as-needed) although no symbol of theirs is used.
# Only the GPU targets link them (luka_torch_cuda); the CPU binaries stay on torch_cpu.
add_library(luka_torch_cuda INTERFACE)
target_link_libraries(luka_torch_cuda INTERFACE luka_torch)
set(LUKA_TORCH_HAS_CUDA OFF)
if(LUKA_CUDA)
  find_library(LUKA_TORCH_CUDA_LIB torch_cuda PATHS "${LUKA_TORCH_ROOT}/lib" NO_DEFAULT_PATH)
  find_library(LUKA_C10_CUDA_LIB c10_cuda PATHS "${LUKA_TORCH_ROOT}/lib" NO_DEFAULT_PATH)
  if(LUKA_TORCH_CUDA_LIB AND LUKA_C10_CUDA_LIB)
    set(LUKA_TORCH_HAS_CUDA ON)
    target_link_libraries(luka_torch_cuda INTERFACE
      "-Wl,--no-as-needed" "${LUKA_TORCH_CUDA_LIB}" "${LUKA_C10_CUDA_LIB}" "-Wl,--as-needed")
  endif()
endif()
if(LUKA_TORCH_HAS_CUDA)
  message(STATUS "LibTorch ${LUKA_TORCH_VERSION} (CPU libraries; CUDA libraries for the GPU model path): ${LUKA_TORCH_ROOT}")
else()
  message(STATUS "LibTorch ${LUKA_TORCH_VERSION} (CPU libraries): ${LUKA_TORCH_ROOT}")
endif()
