#pragma once
// A minimal lazy generator for C++20 coroutines (std::generator arrives in
// C++23). Schedule builders are written as plain loops that `co_yield` steps;
// the simulator pulls one step at a time, so p = 2^20 ranks cost one small
// coroutine frame each instead of a materialised step list each.

#include <coroutine>
#include <exception>
#include <utility>

namespace copse {

template <class T>
class Generator {
 public:
  struct promise_type {
    const T* current = nullptr;
    std::exception_ptr error;

    Generator get_return_object() { return Generator{Handle::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    std::suspend_always yield_value(const T& value) noexcept {
      current = &value;
      return {};
    }
    void return_void() noexcept {}
    void unhandled_exception() { error = std::current_exception(); }
  };
  using Handle = std::coroutine_handle<promise_type>;

  Generator() = default;
  explicit Generator(Handle h) : handle_(h) {}
  Generator(Generator&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Generator& operator=(Generator&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  ~Generator() { reset(); }

  // Advances to the next value; false once the coroutine has finished.
  // The reference returned by value() stays valid until the next call.
  bool next() {
    if (!handle_ || handle_.done()) return false;
    handle_.resume();
    if (handle_.promise().error) std::rethrow_exception(handle_.promise().error);
    return !handle_.done();
  }
  const T& value() const { return *handle_.promise().current; }

 private:
  void reset() {
    if (handle_) handle_.destroy();
    handle_ = {};
  }
  Handle handle_{};
};

}  // namespace copse
