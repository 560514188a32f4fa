// quickdraft._core.Tokenizer and StreamDecoder.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "py_text.h"
#include "tokenizer/tokenizer.h"

namespace py = pybind11;
using qd::StreamDecoder;
using qd::Tokenizer;

namespace {

py::object id_or_none(int32_t id) { return id < 0 ? py::object(py::none()) : py::object(py::int_(id)); }

}  // namespace

void register_tokenizer(py::module_& m) {
  py::class_<Tokenizer, std::shared_ptr<Tokenizer>>(m, "Tokenizer", "Tokenizer from a GGUF file's metadata.")
      .def(py::init([](const std::string& path) {
             py::gil_scoped_release release;
             return Tokenizer::from_file(path);
           }),
           py::arg("path"))
      .def(
          "encode",
          [](const Tokenizer& t, const std::string& text, bool add_special, bool parse_special) {
            py::gil_scoped_release release;
            return t.encode(text, add_special, parse_special);
          },
          py::arg("text"), py::arg("add_special") = false, py::arg("parse_special") = false,
          "Token ids of text.")
      .def(
          "decode",
          [](const Tokenizer& t, const std::vector<int32_t>& ids, bool special) {
            std::string s;
            {
              py::gil_scoped_release release;
              s = t.decode(ids, special);
            }
            return qd::py_text(s);
          },
          py::arg("ids"), py::arg("special") = false, "Text of ids (ill-formed UTF-8 as U+FFFD).")
      .def(
          "token_to_piece",
          [](const Tokenizer& t, int32_t id, bool special) { return py::bytes(t.token_to_piece(id, special)); },
          py::arg("id"), py::arg("special") = true, "Raw bytes of one token.")
      .def("token_type", [](const Tokenizer& t, int32_t id) { return static_cast<int>(t.token_type(id)); },
           py::arg("id"), "GGUF token type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.")
      .def("token_text", [](const Tokenizer& t, int32_t id) { return py::bytes(std::string(t.token_text(id))); },
           py::arg("id"), "The token's text as stored in the GGUF file.")
      .def("is_eog", &Tokenizer::is_eog, py::arg("id"))
      .def_property_readonly("n_vocab", &Tokenizer::n_vocab)
      .def_property_readonly("bos_id", [](const Tokenizer& t) { return id_or_none(t.bos_id()); })
      .def_property_readonly("eos_id", [](const Tokenizer& t) { return id_or_none(t.eos_id()); })
      .def_property_readonly("eot_id", [](const Tokenizer& t) { return id_or_none(t.eot_id()); })
      .def_property_readonly("unk_id", [](const Tokenizer& t) { return id_or_none(t.unk_id()); })
      .def_property_readonly("pad_id", [](const Tokenizer& t) { return id_or_none(t.pad_id()); })
      .def_property_readonly("eog_ids", &Tokenizer::eog_ids)
      .def_property_readonly("add_bos", &Tokenizer::add_bos)
      .def_property_readonly("add_eos", &Tokenizer::add_eos)
      .def_property_readonly("model", &Tokenizer::model_name)
      .def_property_readonly("pre", &Tokenizer::pre_name)
      .def_property_readonly("chat_template", [](const Tokenizer& t) -> py::object {
        const auto& tmpl = t.chat_template();
        return tmpl ? py::object(qd::py_text(*tmpl)) : py::object(py::none());
      });

  py::class_<StreamDecoder>(m, "StreamDecoder", "Incremental detokenizer: feed ids, get whole characters.")
      .def(py::init<const Tokenizer&, bool>(), py::arg("tokenizer"), py::arg("special") = false,
           py::keep_alive<1, 2>())
      .def("feed", [](StreamDecoder& d, int32_t id) { return qd::py_text(d.feed(id)); }, py::arg("id"))
      .def("flush", [](StreamDecoder& d) { return qd::py_text(d.flush()); })
      .def("reset", &StreamDecoder::reset);
}
