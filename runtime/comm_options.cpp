#include "runtime/comm_options.hpp"

#include "common/error.hpp"

namespace copse {

void CommOptionsBase::check() const {
  PlanOptions::check();
  check_arrival_options(arrival);
  if (wait_timeout && wait_timeout->count() <= 0) throw UsageError("the wait timeout must be positive");
  if (wait_report.count() < 0) throw UsageError("the wait report interval must not be negative");
}

}  // namespace copse
