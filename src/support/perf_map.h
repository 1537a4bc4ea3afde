// Announces machine code made at run time (generated kernels, loaded from the JIT or from an artifact's shared
// object) to Linux perf, so that `perf record` samples in it land on named kernels instead of "[unknown]".
// perf reads /tmp/perf-<pid>.map ("START SIZE NAME" per line, hex) for code it finds in no file on disk.
//
// Off unless CUVIL_PERF_MAP=1: the file is written only when asked. It is opened without following a symbolic
// link, must be a regular file of this user, and is only appended to. The same switch turns on oneDNN's perf-map
// mode for its JIT code (kernels/onednn/onednn_common.cpp), which appends to the same file. `cuvil profile
// --perf-data` does not need the map: it attributes samples to IR nodes by time (src/report/perf_fold.h); the
// map names the code they landed in.
#pragma once

#include <cstddef>
#include <string_view>

namespace cuvil {

// Whether CUVIL_PERF_MAP asks for the map (read once).
bool perf_map_enabled();

// Adds a line for [start, start + size) named `name` when enabled; never throws (a failure to write warns once on
// stderr and turns the map off).
void perf_map_announce(const void* start, size_t size, std::string_view name);

}  // namespace cuvil
