# Cross-compiling for aarch64 Linux (Jetson, Raspberry Pi, Graviton) with Debian's
# g++-aarch64-linux-gnu. The C++ library alone:
#
#   cmake -S . -B build/arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cpp/cmake/aarch64-linux-gnu.cmake
#
# The Python module `_core` (and the wheel) as well: point QD_AARCH64_SYSROOT at a folder
# holding an arm64 Python, its headers and its interpreter (.ci/aarch64.sh lays one out from
# Debian's packages and shows the full `pip wheel` command). CMake's FindPython runs that
# interpreter under qemu-aarch64 (Debian's qemu-user; no binfmt_misc needed) to learn its SOABI
# (cpython-311-aarch64-linux-gnu) and include folder. This needs CMake >= 4.1 and
# -DCMAKE_POLICY_DEFAULT_CMP0190=NEW on the command line.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# The toolchain file is read again inside every try_compile project: pass the sysroot through
# the environment so those inner projects see it too.
if(QD_AARCH64_SYSROOT)
  set(ENV{QD_AARCH64_SYSROOT} "${QD_AARCH64_SYSROOT}")
elseif(DEFINED ENV{QD_AARCH64_SYSROOT})
  set(QD_AARCH64_SYSROOT "$ENV{QD_AARCH64_SYSROOT}")
endif()

# Libraries and headers come from the cross compiler's own sysroot (/usr/aarch64-linux-gnu),
# plus the Python sysroot when given; programs (cmake, ninja, python for pybind11's scripts)
# come from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
if(QD_AARCH64_SYSROOT)
  list(APPEND CMAKE_FIND_ROOT_PATH "${QD_AARCH64_SYSROOT}")
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L "${QD_AARCH64_SYSROOT}")
  # FindPython runs the arm64 interpreter under that emulator only with policy CMP0190 NEW,
  # which only the command line can set for this project (a toolchain file is read too late).
  file(GLOB _qd_pythons "${QD_AARCH64_SYSROOT}/usr/bin/python3.[0-9]*")
  list(FILTER _qd_pythons INCLUDE REGEX "python3\\.[0-9]+$")
  list(GET _qd_pythons 0 _qd_python)
  set(Python_EXECUTABLE "${_qd_python}" CACHE FILEPATH "arm64 Python, run under qemu-aarch64")
  # Debian's python3.11/pyconfig.h includes <aarch64-linux-gnu/python3.11/pyconfig.h>.
  set(CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES "${QD_AARCH64_SYSROOT}/usr/include")
  # pybind11 would run that interpreter directly (not through the emulator): let it rely on
  # what FindPython found instead.
  set(PYBIND11_USE_CROSSCOMPILING ON CACHE BOOL "")
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# pybind11's CMake package lives in the host's site-packages: search packages everywhere.
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
