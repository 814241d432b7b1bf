// Writing the files dtplan produces (reports, exports, plans, measurements, profiles) so that
// nothing is lost: a regular file is written to a temporary file beside its target, flushed,
// fsynced and renamed over it, so a failure (full disk, killed process) leaves the previous
// file as it was. A symbolic link is followed and its target is replaced, never the link; a
// FIFO or character device is written directly (there is nothing to rename over).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace dtplan {

// One file to be written: where, what, and how the user named it in errors ("--out").
struct OutputFile {
  std::filesystem::path path;
  std::string content;
  std::string what;  // e.g. "--export-deepspeed"; empty: the path alone names it
};

// Writes one file as described above. Throws dtplan::Error naming the file (and `what`) and
// the system's reason; on failure the previous file is untouched and no temporary is left.
void write_file_atomically(const std::filesystem::path& path, std::string_view content,
                           std::string_view what = {});

// Checks before long work that `path` can be written later: its directory exists and is
// writable, and it is not a directory. Throws dtplan::Error naming it (and `what`).
void check_output_path(const std::filesystem::path& path, std::string_view what = {});

// Writes several files together or not at all (as far as the file system allows): all are
// staged first; only when every one is on disk are they renamed into place.
void write_files_together(const std::vector<OutputFile>& files);

// The file a path finally names after following symbolic links (relative link targets are
// taken from the link's directory). A path that does not exist is returned as it is; a link
// chain longer than 40 or that loops is an error.
std::filesystem::path resolve_output_path(const std::filesystem::path& path);

// Flushes std::cout and C's stdout. Empty when everything written to them reached the file
// or pipe; otherwise the system's reason ("No space left on device"), so that a program's
// main() can turn an output nobody will ever see into an error instead of exit code 0.
std::string standard_output_error();

}  // namespace dtplan
