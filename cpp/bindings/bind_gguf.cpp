// quickdraft._core.GGUFFile: metadata, tensor table and dequantized tensors.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "py_text.h"
#include "quant/quant_types.h"

namespace py = pybind11;
using qd::gguf::File;
using qd::gguf::TensorInfo;
using qd::gguf::Value;
using qd::gguf::ValueType;

namespace {

py::object scalar_to_py(const Value& v) {
  switch (v.type) {
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: return py::float_(v.f64);
    case ValueType::BOOL: return py::bool_(v.u64 != 0);
    case ValueType::UINT64: return py::int_(v.u64);
    case ValueType::STRING: return qd::py_text(v.str);
    default: return py::int_(v.i64);
  }
}

py::object value_to_py(const Value& v) {
  if (v.type != ValueType::ARRAY) return scalar_to_py(v);
  py::list out;
  if (v.elem_type == ValueType::STRING) {
    for (std::string_view s : v.strings) out.append(qd::py_text(s));
  } else if (v.elem_type == ValueType::ARRAY) {
    for (const Value& item : v.items) out.append(value_to_py(item));
  } else {
    for (uint64_t i = 0; i < v.count; i++) out.append(scalar_to_py(v.element(i)));
  }
  return std::move(out);
}

class PyGGUFFile {
 public:
  explicit PyGGUFFile(const std::string& path) {
    py::gil_scoped_release release;
    file_ = std::make_shared<File>(path);
  }
  const File& f() const {
    if (!file_) throw qd::ArgError("GGUFFile is closed");
    return *file_;
  }
  void close() { file_.reset(); }
  std::shared_ptr<File> shared() const {
    f();
    return file_;
  }

  py::array_t<float> tensor(const std::string& name) const {
    const TensorInfo* t = f().find_tensor(name);
    if (!t) throw py::key_error("no tensor named '" + name + "' in " + f().path());
    const qd::quant::TypeTraits* tt = qd::quant::type_traits(t->type);
    if (!tt->to_float) {
      throw qd::UnsupportedError(f().path() + ": tensor '" + name + "' has type " + tt->name +
                                 ", which quickdraft cannot dequantize");
    }
    std::vector<py::ssize_t> shape;
    for (int d = (int)t->n_dims - 1; d >= 0; d--) shape.push_back(t->ne[d]);
    py::array_t<float> out(shape);
    float* dst = out.mutable_data();
    const int64_t n = t->n_elements();
    {
      py::gil_scoped_release release;
      tt->to_float(t->data, dst, n);
    }
    return out;
  }

 private:
  std::shared_ptr<File> file_;
};

}  // namespace

void register_gguf(py::module_& m) {
  py::class_<PyGGUFFile>(m, "GGUFFile")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("path", [](const PyGGUFFile& s) { return s.f().path(); })
      .def_property_readonly("version", [](const PyGGUFFile& s) { return s.f().version(); })
      .def_property_readonly("alignment", [](const PyGGUFFile& s) { return s.f().alignment(); })
      .def_property_readonly("data_offset", [](const PyGGUFFile& s) { return s.f().data_offset(); })
      .def_property_readonly("size", [](const PyGGUFFile& s) { return s.f().size(); })
      .def_property_readonly("metadata",
                             [](const PyGGUFFile& s) {
                               py::dict d;
                               for (const auto& [k, v] : s.f().metadata()) d[qd::py_text(k)] = value_to_py(v);
                               return d;
                             })
      .def_property_readonly("tensors",
                             [](const PyGGUFFile& s) {
                               py::list out;
                               for (const TensorInfo& t : s.f().tensors()) {
                                 py::tuple shape(t.n_dims), ne(t.n_dims);
                                 for (uint32_t d = 0; d < t.n_dims; d++) {
                                   shape[d] = py::int_(t.ne[t.n_dims - 1 - d]);
                                   ne[d] = py::int_(t.ne[d]);
                                 }
                                 out.append(py::make_tuple(qd::py_text(t.name), shape, ne, t.type_name(), t.type, t.offset,
                                                           t.nbytes));
                               }
                               return out;
                             })
      .def("tensor", &PyGGUFFile::tensor, py::arg("name"))
      .def("close", &PyGGUFFile::close);

  m.def("type_info", [](uint32_t id) -> py::object {
    const qd::quant::TypeTraits* t = qd::quant::type_traits(id);
    if (!t) return py::none();
    return py::make_tuple(t->name, t->block_size, t->type_size, t->to_float != nullptr);
  });

  m.def(
      "dequantize",
      [](py::buffer data, uint32_t type_id, int64_t n) {
        const qd::quant::TypeTraits* t = qd::quant::type_traits(type_id);
        if (!t) throw qd::ArgError("unknown GGML type id " + std::to_string(type_id));
        if (!t->to_float) throw qd::UnsupportedError(std::string("cannot dequantize type ") + t->name);
        if (n < 0 || n % t->block_size != 0) {
          throw qd::ArgError("element count " + std::to_string(n) + " is not a multiple of the block size");
        }
        py::buffer_info info = data.request();
        const int64_t need = n / t->block_size * t->type_size;
        if (info.size * info.itemsize < need) throw qd::ArgError("buffer too small for " + std::to_string(n) + " elements");
        py::array_t<float> out(n);
        float* dst = out.mutable_data();
        {
          py::gil_scoped_release release;
          t->to_float(info.ptr, dst, n);
        }
        return out;
      },
      py::arg("data"), py::arg("type_id"), py::arg("n"), "Dequantize n elements of raw GGML data with the scalar reference.");

  m.def(
      "quantize",
      [](py::array_t<float, py::array::c_style | py::array::forcecast> x, uint32_t type_id) {
        const qd::quant::TypeTraits* t = qd::quant::type_traits(type_id);
        if (!t) throw qd::ArgError("unknown GGML type id " + std::to_string(type_id));
        if (!t->from_float) throw qd::UnsupportedError(std::string("cannot quantize to type ") + t->name);
        const int64_t n = (int64_t)x.size();
        if (n % t->block_size != 0) {
          throw qd::ArgError("element count " + std::to_string(n) + " is not a multiple of the block size");
        }
        py::array_t<uint8_t> out(n / t->block_size * t->type_size);
        uint8_t* dst = out.mutable_data();
        const float* src = x.data();
        {
          py::gil_scoped_release release;
          t->from_float(src, dst, n);
        }
        return out;
      },
      py::arg("x"), py::arg("type_id"), "Quantize float32 values to raw GGML data with the scalar reference.");
}
