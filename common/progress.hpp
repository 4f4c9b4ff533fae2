#pragma once
// How a long computation says how far along it is, without knowing who
// listens: the CLI draws a progress line from it (cli/progress.hpp), the
// library's studies call it per point, and a simulator or emulator could call
// it per rank, event or repetition.

#include <cstdint>
#include <functional>
#include <string_view>

namespace copse {

// The environment variable that says after how long the CLI's progress line
// appears (cli/progress.hpp). The configuration (config/) leaves it alone:
// it is not a configuration key but the terminal user's preference.
inline constexpr std::string_view kProgressAfterEnv = "COPSE_PROGRESS_AFTER";

// Called with `done` of `total` units of work (points of a study, rows of a
// table, repetitions, ranks) each time more are done, and with 0 of `total`
// at the start where the total is known then; `done` never exceeds `total`.
// It may be called from several threads at once: the listener synchronises.
// An empty callback means nobody listens.
using ProgressCallback = std::function<void(std::uint64_t done, std::uint64_t total)>;

}  // namespace copse
