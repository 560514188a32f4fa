// The extension module quickdraft._core: exception mapping and one register_*() per file; the
// test hooks go in the submodule _core._testing (bind_testing.cpp).
#include <pybind11/pybind11.h>

#include "common/error.h"

namespace py = pybind11;

void register_gguf(py::module_& m);
void register_engine(py::module_& m);
void register_model(py::module_& m);
void register_tokenizer(py::module_& m);
void register_cpu(py::module_& m);
void register_testing(py::module_& m);
void register_kernels(py::module_& m);

PYBIND11_MODULE(_core, m) {
  m.doc() = "quickdraft native core";
  // pybind11 tries translators newest first: the base class goes first so it is tried last.
  static py::exception<qd::Error> error(m, "QuickdraftError", PyExc_RuntimeError);
  static py::exception<qd::GGUFError> gguf_error(m, "GGUFError", PyExc_ValueError);
  static py::exception<qd::UnsupportedError> unsupported(m, "UnsupportedError", PyExc_ValueError);
  static py::exception<qd::IncompatibleModelsError> incompatible(m, "IncompatibleModelsError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const qd::GGUFError& e) {
      py::set_error(gguf_error, e.what());
    } catch (const qd::UnsupportedError& e) {
      py::set_error(unsupported, e.what());
    } catch (const qd::IncompatibleModelsError& e) {
      py::set_error(incompatible, e.what());
    } catch (const qd::OutOfMemoryError& e) {
      py::set_error(PyExc_MemoryError, e.what());
    } catch (const qd::ArgError& e) {
      py::set_error(PyExc_ValueError, e.what());
    } catch (const qd::Error& e) {
      py::set_error(error, e.what());
    }
  });

  register_gguf(m);
  register_engine(m);
  register_model(m);
  register_tokenizer(m);
  register_cpu(m);
  register_kernels(m);
  register_testing(m);
}
