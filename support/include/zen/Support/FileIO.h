//===- zen/Support/FileIO.h - Bounded input reads, all-or-nothing outputs -===//
//
// Every file zenopt reads or writes goes through here, so that the exit-code
// contract of docs/design.md holds for each of them alike: an input larger than its
// limit is bad data (65) found before it is read into memory, a missing,
// unreadable or directory input is 66, and the outputs of one run appear
// together or not at all (73 when one cannot be written). Part of the ground-floor
// support library (support/): free of LLVM/MLIR and of MPI, so the runtime, the cost
// model and the importer share it without any of them depending on another.
//
//===----------------------------------------------------------------------===//
#ifndef ZEN_SUPPORT_FILEIO_H
#define ZEN_SUPPORT_FILEIO_H

#include "zen/Errors.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace zen::io {

/// A file that cannot be read (Unreadable), is too large (BadInput) or cannot
/// be written (Unwritable); the message names the file.
class FileError : public zen::Error {
public:
  using Error::Error;
};

/// Reads all of `path`, a regular file, pipe or character device, holding at most
/// `maxBytes`: a regular file is refused by its size before any byte is read, and
/// anything else is read only up to the limit. `what` names the input in messages
/// ("plan file"). Throws FileError: 66 when the path is missing, unreadable or a
/// directory; 65 when the input is larger than `maxBytes`.
std::string readBounded(const std::string &path, uint64_t maxBytes, const std::string &what);

/// One output of a run and what names it in messages: its flag ("--trace"), or
/// "standard output" for what the run prints.
struct NamedOutput {
  std::string name;
  std::string path;  // empty: not asked for
};

/// Throws FileError(BadUsage), naming both outputs and the file, when two of `outputs`
/// are one file: the same path after symbolic links for a file that does not exist yet,
/// the same file (device and inode, hard links too) for one that does. Outputs written
/// in place (character devices and FIFOs: /dev/null, a terminal, a pipe) may repeat:
/// each output is written to them in turn. Standard output belongs in `outputs` as
/// {"standard output", "/dev/stdout"}: redirected to a file, it is that file.
void requireDistinctOutputs(const std::vector<NamedOutput> &outputs);

/// The output files of one run, written all together or not at all. add() checks
/// a path and writes its contents aside (a temporary file next to the target);
/// commit() then puts every file in place. A path that is a symbolic link updates
/// the link's target (the link stays); a character device or FIFO with a reader is
/// written in place, never replaced; a directory, block device or socket is refused,
/// and so is an existing file that is read-only (no write permission for this user,
/// or none for anyone, which the superuser would otherwise override): it is kept as
/// it is, as vi and cp -i keep one, not silently replaced by the rename.
/// Until commit() succeeds nothing the run wrote is visible, and the destructor
/// removes what was written aside, so a failure anywhere leaves no output behind.
class OutputFiles {
public:
  OutputFiles() = default;
  ~OutputFiles();
  OutputFiles(const OutputFiles &) = delete;
  OutputFiles &operator=(const OutputFiles &) = delete;

  /// Throws FileError(Unwritable) when `path` cannot be written.
  void add(const std::string &path, const std::string &contents);
  /// Throws FileError(Unwritable); on failure no file written aside is left.
  void commit();

private:
  struct Pending {
    std::string path;        // as given, for messages
    std::string target;      // the file a regular output replaces (links followed)
    std::string temporary;   // written aside; empty for an output written in place
    int inPlaceFd = -1;      // a character device or FIFO, opened at add()
    std::string contents;    // for an output written in place
  };
  void discard();
  std::vector<Pending> pending;
};

/// Writes one file as an OutputFiles of one entry. Throws FileError(Unwritable).
void writeFile(const std::string &path, const std::string &contents);

} // namespace zen::io

#endif // ZEN_SUPPORT_FILEIO_H
