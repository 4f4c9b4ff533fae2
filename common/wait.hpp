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

// Who may wait on a word. `process` (the default) is for words only this
// process's threads touch: private futexes, and a per-process count of
// sleepers lets wake_all skip the system call when nobody sleeps. `shared` is
// for words in memory mapped by several processes (a ShmArena): shared futex
// operations keyed by the physical page, and wake_all always makes the call,
// since sleepers in other processes are not counted here.
enum class FutexScope : std::uint8_t { process, shared };

// Blocks until `word` != `old`. After a short spin it sleeps on the futex;
// past `deadline` it throws TimeoutError with `what()` as the message.
// Returns the new value.
std::uint32_t wait_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t old,
                               Deadline deadline, const std::function<std::string()>& what);
std::uint32_t wait_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t old,
                               Deadline deadline, const std::function<std::string()>& what, FutexScope scope);

// Wakes every thread blocked in wait_while_equal on `word` (with the same scope).
void wake_all(std::atomic<std::uint32_t>& word);
void wake_all(std::atomic<std::uint32_t>& word, FutexScope scope);

}  // namespace copse
