#pragma once
// Waiting that survives oversubscription: spin briefly, then block on a
// futex, with a deadline. Hundreds of emulated ranks share two cores, so a
// pure spin loop would starve the very thread being waited for.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace copse {

using Deadline = std::chrono::steady_clock::time_point;

// Blocks until `word` != `old`. After a short spin it sleeps on the futex;
// past `deadline` it throws TimeoutError with `what()` as the message.
// Returns the new value.
std::uint32_t wait_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t old,
                               Deadline deadline, const std::function<std::string()>& what);

// Wakes every thread blocked in wait_while_equal on `word`.
void wake_all(std::atomic<std::uint32_t>& word);

}  // namespace copse
