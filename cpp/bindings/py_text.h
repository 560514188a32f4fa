// Text from C++ as a Python str; invalid UTF-8 becomes U+FFFD.
#pragma once
#include <pybind11/pybind11.h>

#include <string_view>

namespace qd {

inline pybind11::str py_text(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), (Py_ssize_t)s.size(), "replace");
  if (!o) throw pybind11::error_already_set();
  return pybind11::reinterpret_steal<pybind11::str>(o);
}

}  // namespace qd
