// Errors: C++ never aborts on bad input; it throws one of these and the bindings map each to a
// Python exception (see cpp/bindings/module.cpp).
#pragma once
#include <stdexcept>
#include <string>

namespace qd {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A malformed, truncated or hostile GGUF file.            -> quickdraft.GGUFError (ValueError)
struct GGUFError : Error {
  using Error::Error;
};

// A bad argument from the caller (out-of-vocab id, n_ctx exceeded, ...).   -> ValueError
struct ArgError : Error {
  using Error::Error;
};

// A well-formed file whose content we cannot run (architecture, tensor type). -> quickdraft.UnsupportedError
struct UnsupportedError : Error {
  using Error::Error;
};

// Memory that could not be allocated, with what it was for.   -> MemoryError
struct OutOfMemoryError : Error {
  using Error::Error;
};

// A draft model that cannot draft for a target.             -> quickdraft.IncompatibleModelsError
struct IncompatibleModelsError : Error {
  using Error::Error;
};

}  // namespace qd
