#include "support/file_io.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "support/error.h"

namespace cuvil {

namespace {

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a plain file";
}

// Opens without blocking and checks the kind; returns -1 with errno set when open itself fails.
int open_checked(const std::string& path, const std::string& what, const OpenOptions& opts, struct stat& st) {
  CUVIL_CHECK(path.find('\0') == std::string::npos, what, " path '", path, "' holds a NUL byte");
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (opts.follow_symlinks ? 0 : O_NOFOLLOW);
  int fd = opts.dir_fd >= 0 ? ::openat(opts.dir_fd, path.c_str(), flags) : ::open(path.c_str(), flags);
  if (fd < 0) return -1;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail("cannot read ", what, " '", path, "': ", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(what, " '", path, "' is ", kind_of(st.st_mode), ", not a regular file");
  }
  // Regular files ignore O_NONBLOCK; clear it anyway so reads behave as plain blocking reads.
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

[[noreturn]] void open_failed(const std::string& path, const std::string& what, const OpenOptions& opts, int e) {
  if (e == ELOOP && !opts.follow_symlinks)
    fail(what, " '", path, "' is a symbolic link, which is not followed here");
  fail("cannot open ", what, " '", path, "': ", std::strerror(e));
}

}  // namespace

RegularFile::RegularFile(RegularFile&& o) noexcept
    : fd_(o.fd_), st_(o.st_), path_(std::move(o.path_)), what_(std::move(o.what_)) {
  o.fd_ = -1;
}

RegularFile& RegularFile::operator=(RegularFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_, st_ = o.st_, path_ = std::move(o.path_), what_ = std::move(o.what_);
    o.fd_ = -1;
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

RegularFile RegularFile::open(const std::string& path, const std::string& what, const OpenOptions& opts) {
  RegularFile f;
  f.fd_ = open_checked(path, what, opts, f.st_);
  if (f.fd_ < 0) open_failed(path, what, opts, errno);
  f.path_ = path;
  f.what_ = what;
  return f;
}

std::optional<RegularFile> RegularFile::open_if_exists(const std::string& path, const std::string& what,
                                                       const OpenOptions& opts) {
  RegularFile f;
  f.fd_ = open_checked(path, what, opts, f.st_);
  if (f.fd_ < 0) {
    if (errno == ENOENT) return std::nullopt;
    open_failed(path, what, opts, errno);
  }
  f.path_ = path;
  f.what_ = what;
  return f;
}

void RegularFile::read_at(uint64_t offset, void* dst, size_t n) const {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    size_t chunk = std::min<size_t>(n, size_t(1) << 30);
    ssize_t got = ::pread(fd_, p, chunk, off_t(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail("cannot read ", what_, " '", path_, "': ", std::strerror(errno));
    if (got == 0) fail(what_, " '", path_, "' ended early (did it change while being read?)");
    p += got, n -= size_t(got), offset += uint64_t(got);
  }
}

std::string RegularFile::read_all(uint64_t max_bytes) const {
  CUVIL_CHECK(size() <= max_bytes, what_, " '", path_, "' is ", byte_size_str(size()), " (", size(),
              " bytes), more than the limit of ", byte_size_str(max_bytes));
  std::string data(size_t(size()), '\0');
  read_at(0, data.data(), data.size());
  // A file that grew since fstat is read only as far as it was then; say so rather than parse a prefix silently.
  char extra;
  ssize_t more = ::pread(fd_, &extra, 1, off_t(size()));
  CUVIL_CHECK(more <= 0, what_, " '", path_, "' grew while being read");
  return data;
}

std::string RegularFile::real_path() const {
  char buf[PATH_MAX + 1];
  std::string link = "/proc/self/fd/" + std::to_string(fd_);
  ssize_t n = ::readlink(link.c_str(), buf, PATH_MAX);
  if (n > 0 && buf[0] == '/') {
    std::string p(buf, size_t(n));
    // The kernel appends " (deleted)" to a file removed since open; such a path is no real path.
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && st.st_dev == st_.st_dev && st.st_ino == st_.st_ino) return p;
  }
  // No /proc: resolve the name, and accept it only if it still names the open file.
  std::string p = real_path_of(path_, what_);
  struct stat st {};
  CUVIL_CHECK(::stat(p.c_str(), &st) == 0 && st.st_dev == st_.st_dev && st.st_ino == st_.st_ino, what_, " '",
              path_, "' changed while being opened");
  return p;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what,
                              const OpenOptions& opts) {
  return RegularFile::open(path, what, opts).read_all(max_bytes);
}

std::string real_path_of(const std::string& path, const std::string& what) {
  CUVIL_CHECK(path.find('\0') == std::string::npos, what, " path '", path, "' holds a NUL byte");
  char* r = ::realpath(path.c_str(), nullptr);
  CUVIL_CHECK(r, "cannot resolve ", what, " '", path, "': ", std::strerror(errno));
  std::string s(r);
  ::free(r);
  return s;
}

bool path_is_within(const std::string& p, const std::string& dir) {
  if (dir.empty() || p.size() < dir.size() || p.compare(0, dir.size(), dir) != 0) return false;
  if (p.size() == dir.size()) return true;
  return dir.back() == '/' || p[dir.size()] == '/';
}

std::string byte_size_str(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(uint64_t(1) << 30));
  else if (b >= (uint64_t(1) << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", double(b) / double(1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.2f KiB", double(b) / 1024);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

}  // namespace cuvil
