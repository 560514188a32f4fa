// Read-only memory mapping of a whole file.
#pragma once
#include <cstdint>

namespace qd::gguf {

// mmap(2) of fd's first `size` bytes (size > 0); nullptr with errno set on failure.
void* map_file(int fd, uint64_t size);
void unmap_file(const uint8_t* base, uint64_t size);

}  // namespace qd::gguf
