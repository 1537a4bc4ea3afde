// Reading files that come from outside (models, external tensor data, .npy inputs, kernel-cache entries).
// Every such file is opened only as a regular file: O_NONBLOCK so a FIFO cannot block the open, then fstat, and
// anything but a regular file (a directory, a FIFO, a device such as /dev/zero, a socket) is a clear
// cuvil::Error; optionally O_NOFOLLOW, so a symbolic link in the last component is refused. Sizes come from that
// fstat and are checked against the caller's limit before anything is read or allocated.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>

namespace cuvil {

struct OpenOptions {
  bool follow_symlinks = true;  // false: a symbolic link as the last path component is an error (O_NOFOLLOW)
  int dir_fd = -1;              // >= 0: a relative path is opened relative to this directory (openat)
};

// An open, read-only regular file. Errors name the file as "<what> '<path>'" (what: "model", "external data
// file", ...).
class RegularFile {
 public:
  RegularFile() = default;
  RegularFile(RegularFile&& o) noexcept;
  RegularFile& operator=(RegularFile&& o) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  // Throws cuvil::Error when the file cannot be opened or is not a regular file.
  static RegularFile open(const std::string& path, const std::string& what, const OpenOptions& opts = {});
  // The same, but a path that does not exist (ENOENT) gives nullopt instead of an error.
  static std::optional<RegularFile> open_if_exists(const std::string& path, const std::string& what,
                                                   const OpenOptions& opts = {});

  int fd() const { return fd_; }
  uint64_t size() const { return uint64_t(st_.st_size); }
  const struct stat& stat() const { return st_; }
  const std::string& path() const { return path_; }
  const std::string& what() const { return what_; }

  // Reads exactly `n` bytes at `offset` (pread; the file position is not used). Throws when the file is shorter
  // (it changed after open) or the read fails.
  void read_at(uint64_t offset, void* dst, size_t n) const;
  // The whole file, after checking that it holds at most `max_bytes`.
  std::string read_all(uint64_t max_bytes) const;
  // The file's real path (every symbolic link resolved), taken from the open descriptor, so it names the file
  // actually read even if the path changed since. Throws if it cannot be found.
  std::string real_path() const;

 private:
  int fd_ = -1;
  struct stat st_ {};
  std::string path_, what_;
};

// Opens `path` as a regular file and reads it whole, refusing files larger than `max_bytes` before reading.
std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what,
                              const OpenOptions& opts = {});

// The real (canonical, symlink-free, absolute) path of an existing file or directory; throws naming `what`.
std::string real_path_of(const std::string& path, const std::string& what);
// Whether the real path `p` is the real directory `dir` or lies under it (component-wise: /a/bc is not in /a/b).
bool path_is_within(const std::string& p, const std::string& dir);

// "1.50 GiB"-style sizes for messages.
std::string byte_size_str(uint64_t bytes);

}  // namespace cuvil
