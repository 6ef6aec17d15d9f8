# Finds NCCL: nccl.h and libnccl. Looks first where NCCL_INCLUDE_DIR /
# NCCL_LIBRARY (cache or environment: the GPU kit points them at the copy a
# CUDA torch loads, one libnccl.so.2 per process) or NCCL_HOME say, then in
# the CUDA toolkit and the system. Defines NCCL_FOUND, NCCL_VERSION and the
# imported target NCCL::nccl.
if(NOT NCCL_INCLUDE_DIR AND DEFINED ENV{NCCL_INCLUDE_DIR})
  set(NCCL_INCLUDE_DIR $ENV{NCCL_INCLUDE_DIR} CACHE PATH "Directory of nccl.h")
endif()
if(NOT NCCL_LIBRARY AND DEFINED ENV{NCCL_LIBRARY})
  set(NCCL_LIBRARY $ENV{NCCL_LIBRARY} CACHE FILEPATH "libnccl")
endif()
set(nccl_hints $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_ROOT} /usr/local/cuda)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
# pip's nvidia-nccl ships libnccl.so.2 without the unversioned link.
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${nccl_hints}
             PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)

if(NCCL_INCLUDE_DIR AND EXISTS ${NCCL_INCLUDE_DIR}/nccl.h)
  file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h nccl_version_lines
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define NCCL_${part} +([0-9]+).*" "\\1" NCCL_${part}
           "${nccl_version_lines}")
  endforeach()
  set(NCCL_VERSION ${NCCL_MAJOR}.${NCCL_MINOR}.${NCCL_PATCH})
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
                                  VERSION_VAR NCCL_VERSION)
if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
                        INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
endif()
