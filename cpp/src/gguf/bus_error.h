// A SIGBUS inside a mapped model file (the file was truncated while mapped) reported as one line
// naming the file, instead of a bare "Bus error".
//
// The handler is installed on the first watch_mapping() and chains to whatever handler was there
// before for every signal that is not a fault inside a watched mapping. For a fault inside one it
// writes "quickdraft: bus error reading <path>: ..." to stderr and then lets the default action
// end the process: there is no way to go on with the model's bytes gone.
#pragma once
#include <cstdint>

namespace qd::gguf {

// Watches [base, base + size), mapped from `path` (which must outlive the watch). Returns a slot
// for unwatch_mapping, or -1 when every slot is taken (that mapping then gets no message).
int watch_mapping(const uint8_t* base, uint64_t size, const char* path);
void unwatch_mapping(int slot);

}  // namespace qd::gguf
