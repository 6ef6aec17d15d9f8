# prometheus-cpp's package looks civetweb up (pull serves through it), and
# civetweb's own CMake package (Debian libcivetweb-dev) also imports the
# civetweb executable, which lives in a separate package and fails the
# configure when absent; only the C library is needed, so find it directly.
find_path(civetweb_INCLUDE_DIR civetweb.h)
find_library(civetweb_LIBRARY NAMES civetweb)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(civetweb REQUIRED_VARS civetweb_LIBRARY civetweb_INCLUDE_DIR)
if(civetweb_FOUND AND NOT TARGET civetweb::civetweb)
  add_library(civetweb::civetweb SHARED IMPORTED)
  set_target_properties(civetweb::civetweb PROPERTIES
    IMPORTED_LOCATION "${civetweb_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${civetweb_INCLUDE_DIR}")
endif()
