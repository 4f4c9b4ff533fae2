#include "common/link.hpp"

#include <cstring>

namespace copse {

WaitSettings wait_settings(std::optional<std::chrono::milliseconds> timeout, const char* round_name,
                           std::chrono::milliseconds report_every, std::function<void(const std::string&)> on_report) {
  WaitSettings waits;
  waits.timeout = timeout;
  waits.report_every = report_every;
  waits.on_report = std::move(on_report);
  waits.round_name = round_name;
  return waits;
}

ExecutorConfig executor_config(RankMap layout, std::optional<CostModel> clock, WaitSettings waits,
                               std::function<void(std::exception_ptr)> on_failure,
                               std::function<std::string(int)> peer_gone) {
  ExecutorConfig config;
  config.layout = std::move(layout);
  config.virtual_clock = clock.has_value();
  if (clock) config.model = std::move(*clock);
  config.waits = std::move(waits);
  config.on_failure = std::move(on_failure);
  config.peer_gone = std::move(peer_gone);
  return config;
}

void apply_received(const LinkRank& c, std::byte* dst, const std::byte* src, std::uint64_t count, Combine side) {
  if (count == 0 || c.eb == 0) return;
  if (side == Combine::replace)
    std::memcpy(dst, src, static_cast<std::size_t>(count * c.eb));
  else
    c.op->combine(dst, src, static_cast<std::size_t>(count), side);
}

}  // namespace copse
