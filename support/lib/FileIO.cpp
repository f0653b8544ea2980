//===- FileIO.cpp - Bounded input reads and all-or-nothing outputs --------===//
#include "zen/Support/FileIO.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace zen::io {
namespace {

using zen::ErrorKind;

std::string sizeText(uint64_t bytes) {
  if (bytes >= (uint64_t(1) << 30) && bytes % (uint64_t(1) << 30) == 0)
    return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (uint64_t(1) << 20) && bytes % (uint64_t(1) << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

/// Closes a descriptor when it goes out of scope.
struct Descriptor {
  explicit Descriptor(int fd) : fd(fd) {}
  ~Descriptor() {
    if (fd >= 0)
      ::close(fd);
  }
  Descriptor(const Descriptor &) = delete;
  Descriptor &operator=(const Descriptor &) = delete;
  int fd;
};

/// Writes all of `text` to `fd`; false with errno set on failure.
bool writeAll(int fd, const std::string &text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t written = ::write(fd, text.data() + done, text.size() - done);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      return false;
    done += size_t(written);
  }
  return true;
}

[[noreturn]] void cannotWrite(const std::string &path, const std::string &why) {
  throw FileError(ErrorKind::Unwritable, path + ": cannot write (" + why + ")");
}

/// The file a write through `path` must replace: symbolic links followed to their
/// final target, which need not exist yet.
std::string finalTarget(const std::string &path) {
  std::string current = path;
  for (int hops = 0; hops < 40; ++hops) {  // the kernel's own limit on nested links
    struct stat info;
    if (::lstat(current.c_str(), &info) != 0 || !S_ISLNK(info.st_mode))
      return current;
    // A link's st_size is not its length everywhere (procfs reports 64 for
    // /proc/self/fd/N): read until the buffer has room to spare.
    std::vector<char> link(size_t(std::max<off_t>(info.st_size, 64)) + 1);
    ssize_t length;
    while ((length = ::readlink(current.c_str(), link.data(), link.size())) >= 0 &&
           size_t(length) >= link.size() && link.size() <= PATH_MAX)
      link.resize(link.size() * 2);
    if (length < 0 || size_t(length) >= link.size())
      cannotWrite(path, "cannot read the symbolic link " + current);
    std::string next(link.data(), size_t(length));
    size_t slash = current.find_last_of('/');
    if (next.front() != '/' && slash != std::string::npos)
      next = current.substr(0, slash + 1) + next;
    current = next;
  }
  cannotWrite(path, "too many levels of symbolic links");
}

/// `path` absolute, its symbolic links resolved, even those to files still to be created.
std::string resolvedPath(const std::string &path) {
  std::error_code failed;
  const std::filesystem::path absolute = std::filesystem::absolute(finalTarget(path), failed);
  if (failed)
    return path;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(absolute, failed);
  return (failed ? absolute : resolved).string();
}

/// What tells two outputs apart: an existing regular file by its device and inode, a
/// file still to be created by its absolute path with every link resolved; nullopt for
/// an output written in place (a character device or FIFO), which may repeat.
std::optional<std::string> identityOf(const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    if (!S_ISREG(info.st_mode))
      return std::nullopt;
    return "inode " + std::to_string(info.st_dev) + ":" + std::to_string(info.st_ino);
  }
  return resolvedPath(path);
}

} // namespace

void requireDistinctOutputs(const std::vector<NamedOutput> &outputs) {
  std::vector<std::pair<const NamedOutput *, std::string>> seen;
  for (const NamedOutput &output : outputs) {
    if (output.path.empty())
      continue;
    std::optional<std::string> identity = identityOf(output.path);
    if (!identity)
      continue;
    for (const auto &[earlier, other] : seen)
      if (other == *identity) {
        throw FileError(ErrorKind::BadUsage,
                        earlier->name + " and " + output.name + " are the same file (" +
                            resolvedPath(output.path) +
                            "): the second would replace the first; give each its own file");
      }
    seen.emplace_back(&output, *identity);
  }
}

std::string readBounded(const std::string &path, uint64_t maxBytes, const std::string &what) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0)
    throw FileError(ErrorKind::Unreadable, path + ": cannot open " + what + " (" + std::strerror(errno) + ")");
  if (S_ISDIR(info.st_mode))
    throw FileError(ErrorKind::Unreadable, path + ": cannot read " + what + ": it is a directory");
  Descriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.fd < 0)
    throw FileError(ErrorKind::Unreadable, path + ": cannot open " + what + " (" + std::strerror(errno) + ")");
  auto tooLarge = [&] {
    return FileError(ErrorKind::BadInput, path + ": " + what + " larger than the limit of " +
                                   sizeText(maxBytes));
  };
  // The descriptor's own type, not the path's: the path may have changed in between.
  if (::fstat(file.fd, &info) != 0)
    throw FileError(ErrorKind::Unreadable, path + ": cannot read " + what + " (" + std::strerror(errno) + ")");
  if (S_ISDIR(info.st_mode))
    throw FileError(ErrorKind::Unreadable, path + ": cannot read " + what + ": it is a directory");
  bool regular = S_ISREG(info.st_mode);
  if (regular && uint64_t(info.st_size) > maxBytes)
    throw tooLarge();
  std::string bytes;
  // A regular file's size is known; anything else grows the buffer as it arrives.
  bytes.resize(regular ? size_t(info.st_size) + 1 : size_t(std::min<uint64_t>(maxBytes + 1, 1 << 16)));
  size_t filled = 0;
  for (;;) {
    if (filled == bytes.size()) {
      if (filled > maxBytes)
        throw tooLarge();
      bytes.resize(size_t(std::min<uint64_t>(maxBytes + 1, uint64_t(bytes.size()) * 2)));
    }
    ssize_t got = ::read(file.fd, &bytes[filled], bytes.size() - filled);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      throw FileError(ErrorKind::Unreadable, path + ": cannot read " + what + " (" + std::strerror(errno) + ")");
    if (got == 0)
      break;
    filled += size_t(got);
  }
  if (filled > maxBytes)
    throw tooLarge();
  bytes.resize(filled);
  return bytes;
}

OutputFiles::~OutputFiles() { discard(); }

void OutputFiles::discard() {
  for (Pending &output : pending) {
    if (!output.temporary.empty())
      ::unlink(output.temporary.c_str());
    if (output.inPlaceFd >= 0)
      ::close(output.inPlaceFd);
  }
  pending.clear();
}

void OutputFiles::add(const std::string &path, const std::string &contents) {
  if (path.empty())
    cannotWrite("''", "empty path");
  Pending output;
  output.path = path;
  struct stat info;
  bool exists = ::stat(path.c_str(), &info) == 0;  // follows links: the object written
  if (exists && !S_ISREG(info.st_mode)) {
    if (S_ISDIR(info.st_mode))
      cannotWrite(path, "it is a directory");
    if (S_ISBLK(info.st_mode))
      cannotWrite(path, "it is a block device; refusing to overwrite it");
    if (S_ISSOCK(info.st_mode))
      cannotWrite(path, "it is a socket");
    // A character device or FIFO is written in place (/dev/null, /dev/stdout, a pipe).
    // Non-blocking open: a FIFO nobody reads fails now instead of hanging.
    output.inPlaceFd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (output.inPlaceFd < 0)
      cannotWrite(path, errno == ENXIO ? std::string("a FIFO with no reader")
                                       : std::strerror(errno));
    int flags = ::fcntl(output.inPlaceFd, F_GETFL);
    ::fcntl(output.inPlaceFd, F_SETFL, flags & ~O_NONBLOCK);
    output.contents = contents;
    pending.push_back(std::move(output));
    return;
  }
  // The rename below would replace a read-only file whatever its mode: the user's mark
  // is kept (the superuser passes every access check, so a file without any write
  // permission bit is read-only for it too).
  if (exists && ((info.st_mode & 0222) == 0 ||
                 ::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) != 0))
    cannotWrite(path, "it is read-only; refusing to replace it");
  output.target = finalTarget(path);
  // Same directory as the target, so the final rename is atomic.
  output.temporary = output.target + ".tmp." + std::to_string(::getpid()) + "." +
                     std::to_string(pending.size());
  Descriptor file(::open(output.temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (file.fd < 0)
    cannotWrite(path, std::strerror(errno));
  // Recorded before writing, so that a failure below removes the temporary file.
  pending.push_back(output);
  // A replaced file keeps its permissions.
  if (exists)
    ::fchmod(file.fd, info.st_mode & 07777);
  if (!writeAll(file.fd, contents)) {
    int error = errno;
    cannotWrite(path, std::strerror(error));
  }
  int closed = ::close(file.fd);
  file.fd = -1;
  if (closed != 0)
    cannotWrite(path, std::strerror(errno));
}

void OutputFiles::commit() {
  // Outputs written in place cannot be taken back: they go first, so that a failure
  // among them still leaves no regular output behind.
  for (Pending &output : pending) {
    if (output.inPlaceFd < 0)
      continue;
    bool ok = writeAll(output.inPlaceFd, output.contents);
    int error = errno;
    ::close(output.inPlaceFd);
    output.inPlaceFd = -1;
    if (!ok)
      cannotWrite(output.path, std::strerror(error));
  }
  for (Pending &output : pending) {
    if (output.temporary.empty())
      continue;
    if (::rename(output.temporary.c_str(), output.target.c_str()) != 0)
      cannotWrite(output.path, std::strerror(errno));
    output.temporary.clear();
  }
  pending.clear();
}

void writeFile(const std::string &path, const std::string &contents) {
  OutputFiles outputs;
  outputs.add(path, contents);
  outputs.commit();
}

} // namespace zen::io
