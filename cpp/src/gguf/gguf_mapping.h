// A whole file in memory, read-only: mapped (mmap) or read into anonymous memory.
#pragma once
#include <cstdint>

namespace qd::gguf {

// mmap(2) of fd's first `size` bytes (size > 0); nullptr with errno set on failure.
void* map_file(int fd, uint64_t size);
void unmap_file(const uint8_t* base, uint64_t size);

// The file's first `size` bytes read into anonymous memory that is then made read-only, so that
// nothing done to the file later changes or takes them away; nullptr with errno set on failure
// (EIO when the file is shorter than `size`). Pages handed back with release_pages() read as zeros.
void* read_file(int fd, uint64_t size);
void free_file(const uint8_t* base, uint64_t size);  // for read_file's memory

}  // namespace qd::gguf
