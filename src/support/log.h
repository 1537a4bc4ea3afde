// Diagnostic lines on stderr for topics named in CUVIL_LOG (a comma list: `CUVIL_LOG=prepack,cache`, or `all`),
// the same switch Python's cache and weight updates read. Off by default: nothing is written unless asked.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace cuvil {

// Whether CUVIL_LOG names `topic` (or `all`); the variable is read once.
bool log_enabled(std::string_view topic);
// Whether the comma list `topics` (CUVIL_LOG's form: whole items, spaces around them allowed) names `topic` or
// `all`.
bool log_topic_in(std::string_view topics, std::string_view topic);

// Writes "cuvil[topic]: message" as one line on stderr when the topic is enabled; never throws.
void log_line(std::string_view topic, std::string_view message);

// For timing lines (topic `time`): the monotonic wall clock and the process's CPU time (all threads), in ms; and
// a duration as "12.3".
std::pair<double, double> wall_and_cpu_ms();
std::string fixed_ms(double ms);

}  // namespace cuvil
