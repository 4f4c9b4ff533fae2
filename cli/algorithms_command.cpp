// copse algorithms: every registered algorithm, as a table or JSON.

#include <iostream>

#include "cli/options.hpp"
#include "internode/registry.hpp"

namespace copse {
namespace {

int run_algorithms(bool json) {
  if (json) {
    Json list = Json::array();
    for (const auto& a : algorithms()) {
      list.push_back({{"collective", to_string(a.collective)},
                      {"name", a.name},
                      {"description", a.description},
                      {"needs_commutative", a.needs_commutative},
                      {"pipelined", a.pipelined}});
    }
    std::cout << list.dump(2) << "\n";
    return 0;
  }
  std::size_t name_width = 4;
  for (const auto& a : algorithms()) name_width = std::max(name_width, a.name.size());
  std::cout << pad("COLLECTIVE", 11) << pad("NAME", name_width + 2) << pad("PIPELINED", 11)
            << pad("COMMUTATIVE-ONLY", 18) << "DESCRIPTION\n";
  for (const auto& a : algorithms()) {
    std::cout << pad(std::string(to_string(a.collective)), 11) << pad(std::string(a.name), name_width + 2)
              << pad(a.pipelined ? "yes" : "no", 11) << pad(a.needs_commutative ? "yes" : "no", 18) << a.description
              << "\n";
  }
  return 0;
}

}  // namespace

void add_algorithms_command(CLI::App& app, const Config&, RunParsed& run_parsed) {
  auto json = std::make_shared<bool>(false);
  auto* command = app.add_subcommand("algorithms", "list every registered algorithm");
  add_config_file_option(command);
  command->add_flag("--json", *json, "print a JSON array instead of a table");
  command->callback([json, &run_parsed] { run_parsed = [json] { return run_algorithms(*json); }; });
}

}  // namespace copse
