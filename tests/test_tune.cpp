// copse tune's rules (config/tune.hpp) on small inputs whose rows are worked
// out by hand; tests/cli_tune.sh checks them against the Python script's rows
// on a larger CSV.
#include <array>
#include <catch2/catch.hpp>
#include <sstream>

#include "common/error.hpp"
#include "config/tune.hpp"

using namespace copse;

namespace {

constexpr const char* kHeader =
    "config,np,collective,root,bytes,label,runs,repetitions,verified,min_s,median_s,tuned_over_min,tuned_over_median\n";

TuneRatios ratios_of(const std::string& body) {
  std::istringstream in(kHeader + body);
  return read_tune_csv(in, "m.csv");
}

std::string csv_row(const std::string& config, const std::string& collective, std::uint64_t bytes, double ratio,
                    const std::string& root = "", const std::string& label = "copse") {
  return config + ",2," + collective + "," + root + "," + std::to_string(bytes) + "," + label +
         ",1,10,true,1e-6,1e-6,1," + std::to_string(ratio) + "\n";
}

// The rows of one call form, in order.
std::vector<DecisionRow> rows_of(const DecisionTable& t, CallForm form) {
  std::vector<DecisionRow> out;
  for (const DecisionRow& row : t.rows)
    if (row.form == form) out.push_back(row);
  return out;
}

}  // namespace

TEST_CASE("tune: shape names") {
  CHECK(parse_tune_shape("np2").ranks == 2);
  CHECK_FALSE(parse_tune_shape("np2").multi_node());
  const TuneShape v = parse_tune_shape("np12-vn3");
  CHECK((v.ranks == 12 && v.ranks_per_node == 3 && v.hosts == 1 && v.multi_node()));
  const TuneShape h = parse_tune_shape("np8-h2");
  CHECK((h.ranks == 8 && h.ranks_per_node == 0 && h.hosts == 2 && h.multi_node()));
  CHECK_FALSE(parse_tune_shape("np8-h1").multi_node());
  for (const char* bad : {"", "np", "np0", "np02", "4", "np4-", "np4-vn", "np4-vn0", "np4-x2", "np4-h2x", "np-1"})
    CHECK_THROWS_AS(parse_tune_shape(bad), UsageError);
}

TEST_CASE("tune: size bands end at the integer geometric mean, alike bands merge, barrier by median") {
  const TuneRatios r = ratios_of(csv_row("np2", "bcast", 8, 0.5) + csv_row("np2", "bcast", 16, 0.6) +
                                 csv_row("np2", "bcast", 2048, 1.2) + csv_row("np2", "bcast", 4096, 0.9, "1") +
                                 csv_row("np2", "barrier", 0, 0.9) + csv_row("np2", "barrier", 8, 1.1) +
                                 csv_row("np2", "reduce_scatter", 64, 1.5));
  const DecisionTable table = tune_table(r, 1.0, 0.8, std::nullopt);
  const DecisionTable t{"", Provider::mpi, rows_of(table, CallForm::blocking)};
  REQUIRE(t.rows.size() == 4);
  // bcast: 8 and 16 both mpi (one row up to isqrt(16 * 2048) = 181), 2048 copse from 182; root 1 ignored.
  CHECK((t.rows[0].collective == MpiCollective::bcast && t.rows[0].min_bytes == 0 && t.rows[0].max_bytes == 181 &&
         t.rows[0].use == Provider::mpi));
  CHECK(t.rows[0].note == "np2: tuned/copse 0.50, 0.60 by median");
  CHECK((t.rows[1].min_bytes == 182 && t.rows[1].max_bytes == std::numeric_limits<std::uint64_t>::max() &&
         t.rows[1].use == Provider::copse));
  // Barrier: the median of 0.9 and 1.1 is 1.0, at the threshold: copse.
  CHECK((t.rows[2].collective == MpiCollective::barrier && t.rows[2].use == Provider::copse));
  CHECK(t.rows[2].note == "np2: tuned/copse 1.00 by median");
  // reduce_scatter measured itself: its own row, no copy of a block's.
  CHECK((t.rows[3].collective == MpiCollective::reduce_scatter && t.rows[3].note == "np2: tuned/copse 1.50 by median"));
  for (const DecisionRow& row : t.rows)
    CHECK((row.shape == "np2" && row.min_ranks == 2 && row.max_ranks == std::numeric_limits<int>::max() &&
           row.min_nodes == 1 && row.max_nodes == 1));
}

TEST_CASE("tune: a lone band within the noise follows its two neighbours when they agree") {
  // allreduce at 8 .. 8192 B: 1.04, 0.94 (lone, within [0.76, 1.1875)), 2.07, 0.54 (outside: stays), 2.0, 1.5,
  // 0.9 (between 1.5 and the last band, 0.5, which disagree: stays), 0.5 (last: stays).
  // bcast at 8, 32, 128: 0.5, 1.1 (lone serve within the noise between two deferrals: follows them), 0.6.
  // reduce at 8, 32: 0.9, 1.2 (no band has two neighbours: as measured).
  std::string csv;
  std::uint64_t bytes = 8;
  for (double x : {1.04, 0.94, 2.07, 0.54, 2.0, 1.5, 0.9, 0.5})
    csv += csv_row("np2", "allreduce", bytes, x), bytes *= 4;
  csv += csv_row("np2", "bcast", 8, 0.5) + csv_row("np2", "bcast", 32, 1.1) + csv_row("np2", "bcast", 128, 0.6);
  csv += csv_row("np2", "reduce", 8, 0.9) + csv_row("np2", "reduce", 32, 1.2);
  const TuneRatios r = ratios_of(csv);
  const auto uses = [](const DecisionTable& t, MpiCollective c) {
    std::string out;
    for (const DecisionRow& row : t.rows)
      if (row.collective == c && row.form == CallForm::blocking)
        out += (out.empty() ? "" : " ") + std::to_string(row.min_bytes) + (row.use == Provider::copse ? "c" : "m");
    return out;
  };
  const DecisionTable t = tune_table(r, 0.95, 0.8, std::nullopt);
  // Bands start after the geometric mean of two sizes: 17, 65, 257, 1025, 4097, 16385, 65537.
  CHECK(uses(t, MpiCollective::allreduce) == "0c 257m 1025c 16385m");
  CHECK(t.rows[0].note == "np2: tuned/copse 1.04, 0.94, 2.07 by median");
  CHECK(uses(t, MpiCollective::bcast) == "0m");
  CHECK(uses(t, MpiCollective::reduce) == "0m 17c");
  // noise 1: every band as measured.
  const DecisionTable raw = tune_table(r, 0.95, 1.0, std::nullopt);
  CHECK(uses(raw, MpiCollective::allreduce) == "0c 17m 65c 257m 1025c 16385m");
  CHECK(uses(raw, MpiCollective::bcast) == "0m 17c 65m");
}

TEST_CASE("tune: shapes cover ranks up to the next measured one of their kind: one node, virtual nodes, hosts") {
  const TuneRatios r = ratios_of(csv_row("np4", "allreduce", 8, 2) + csv_row("np2", "allreduce", 8, 2) +
                                 csv_row("np8-h2", "allreduce", 8, 2) + csv_row("np4-vn2", "allreduce", 8, 2) +
                                 csv_row("np4-h2", "allreduce", 8, 2));
  const DecisionTable all = tune_table(r, 0.95, 0.8, std::nullopt);
  const DecisionTable t{"", Provider::mpi, rows_of(all, CallForm::blocking)};
  constexpr int none = std::numeric_limits<int>::max();
  REQUIRE(t.rows.size() == 5);
  // Rows by shape name: np2, np4, np4-h2, np4-vn2, np8-h2.
  CHECK((t.rows[0].shape == "np2" && t.rows[0].min_ranks == 2 && t.rows[0].max_ranks == 3));
  CHECK((t.rows[1].shape == "np4" && t.rows[1].min_ranks == 4 && t.rows[1].max_nodes == 1 && t.rows[1].min_hosts == 0 &&
         t.rows[1].max_hosts == none));
  CHECK((t.rows[2].shape == "np4-h2" && t.rows[2].min_ranks == 2 && t.rows[2].max_ranks == 7 &&
         t.rows[2].min_nodes == 2 && t.rows[2].min_hosts == 2 && t.rows[2].max_hosts == none));
  // The only virtual-node shape covers every rank count, on one host only.
  CHECK((t.rows[3].shape == "np4-vn2" && t.rows[3].min_ranks == 2 && t.rows[3].max_ranks == none &&
         t.rows[3].min_nodes == 2 && t.rows[3].max_nodes == none && t.rows[3].min_hosts == 0 &&
         t.rows[3].max_hosts == 1));
  CHECK((t.rows[4].shape == "np8-h2" && t.rows[4].min_ranks == 8 && t.rows[4].max_ranks == none &&
         t.rows[4].min_hosts == 2));
  // So two virtual nodes of one host and two hosts of 4 ranks each find their own row.
  CHECK(t.find({MpiCollective::allreduce, 8, 4, 2, 1}) == 3);
  CHECK(t.find({MpiCollective::allreduce, 8, 4, 2, 2}) == 2);
  // Every form's rows cover alike.
  for (CallForm form : {CallForm::nonblocking, CallForm::persistent}) {
    const auto rows = rows_of(all, form);
    REQUIRE(rows.size() == 5);
    for (std::size_t i = 0; i < rows.size(); ++i)
      CHECK((rows[i].shape == t.rows[i].shape && rows[i].min_ranks == t.rows[i].min_ranks &&
             rows[i].max_ranks == t.rows[i].max_ranks && rows[i].max_hosts == t.rows[i].max_hosts));
  }
}

TEST_CASE("tune: malformed measurements name the line") {
  const auto error = [](const std::string& body) {
    try {
      ratios_of(body);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error("np2,2,bcast,,8,copse\n") == "measurements m.csv, line 2: 6 fields, the header has 13");
  CHECK(error(csv_row("np2", "bcast", 8, 1) + "np2,2,bcast,,x8,copse,1,10,true,1,1,1,1\n") ==
        "measurements m.csv, line 3: bytes 'x8' is not a whole number");
  CHECK(error("np2,2,bcast,,8,tuned,1,10,true,1,1,1,1\n") == "measurements m.csv: no copse rows with ratios");
  CHECK_THROWS_AS(ratios_of("np2,2,bcast,,8,copse,1,10,false,1,1,1,1\n"), RunFailure);
}

TEST_CASE("tune: refinement asks for the size between two neighbours that decide differently") {
  // allreduce: 8 serves, 32 defers (edge at 16), 128 defers, 512 KiB serves (edge at
  // isqrt(128 * 524288) = 8192), 2 MiB defers (edge at 1 MiB). bcast: 8 and 12 decide
  // differently, but their edge (9, 8 as whole floats) is no size between them.
  // Barrier's ratios never ask. np4 decides alike everywhere: no refinement.
  const TuneRatios r = ratios_of(csv_row("np2", "allreduce", 8, 1.2) + csv_row("np2", "allreduce", 32, 0.5) +
                                 csv_row("np2", "allreduce", 128, 0.7) + csv_row("np2", "allreduce", 524288, 1.19) +
                                 csv_row("np2", "allreduce", 2097152, 0.36) + csv_row("np2", "bcast", 8, 0.9) +
                                 csv_row("np2", "bcast", 12, 1.1) + csv_row("np2", "barrier", 0, 0.5) +
                                 csv_row("np2", "barrier", 8, 1.5) + csv_row("np4", "allreduce", 8, 2.0) +
                                 csv_row("np4", "allreduce", 32, 1.5));
  const auto wanted = tune_refinements(r, 0.95);
  REQUIRE(wanted.size() == 1);
  const TuneRefinement& np2 = wanted.at("np2");
  CHECK(np2.collectives == std::set<MpiCollective>{MpiCollective::allreduce});
  CHECK(np2.sizes == std::set<std::uint64_t>{16, 8192, 1048576});
  // The measurement merged in moves the edge: 1 MiB defers, so copse serves up to isqrt(512 KiB * 1 MiB) only.
  TuneRatios more = r;
  merge_tune_ratios(more, ratios_of(csv_row("np2", "allreduce", 1048576, 0.49) + csv_row("np2", "allreduce", 8, 1.3)));
  CHECK(more.at("np2").at(MpiCollective::allreduce).at(CallForm::blocking).size() == 6);
  CHECK(more.at("np2").at(MpiCollective::allreduce).at(CallForm::blocking).at(8).configured ==
        Approx(1.3));  // the newer
  const DecisionTable t = tune_table(more, 0.95, 1.0, std::nullopt);
  std::uint64_t served_up_to = 0;
  for (const DecisionRow& row : t.rows)
    if (row.shape == "np2" && row.collective == MpiCollective::allreduce && row.form == CallForm::blocking &&
        row.use == Provider::copse)
      served_up_to = row.max_bytes;
  CHECK(served_up_to == 741455);  // isqrt(524288 * 1048576)
  // The next pass asks again where nothing was measured (16, 8192) and between 512 KiB and 1 MiB.
  const auto next = tune_refinements(more, 0.95);
  CHECK(next.at("np2").sizes == std::set<std::uint64_t>{16, 8192, 741452});  // 741452: isqrt(2^39), whole floats
}

TEST_CASE("tune: rows by call form, an unmeasured one from nonblocking's or from the blocking call's lowered") {
  // allreduce measured blocking (defers at 8 B: 0.75) and nonblocking (serves: 1.6); persistent not measured.
  // bcast measured blocking only: 0.75 at 8 B (within threshold * 0.7 = 0.665), 0.3 at 32 B (far below), 2.0 at 128 B.
  const std::string header = std::string(kHeader).replace(std::string(kHeader).size() - 1, 1, ",form\n");
  const auto row = [](const char* collective, std::uint64_t bytes, double ratio, const char* form) {
    std::string line = csv_row("np2", collective, bytes, ratio);
    return line.replace(line.size() - 1, 1, std::string(",") + form + "\n");
  };
  std::istringstream in(header + row("allreduce", 8, 0.75, "blocking") + row("allreduce", 8, 1.6, "nonblocking") +
                        row("bcast", 8, 0.75, "blocking") + row("bcast", 32, 0.3, "blocking") +
                        row("bcast", 128, 2.0, "blocking"));
  const TuneRatios r = read_tune_csv(in, "f.csv");
  CHECK(r.at("np2").at(MpiCollective::allreduce).size() == 2);
  const DecisionTable t = tune_table(r, 0.95, 1.0, std::nullopt);
  const auto decides = [&](MpiCollective c, CallForm form, std::uint64_t bytes) {
    const std::size_t i = t.find(CallShape{c, bytes, 2, 1, 1, form});
    REQUIRE(i < t.rows.size());
    CHECK(t.rows[i].form == form);
    return t.rows[i];
  };
  CHECK(decides(MpiCollective::allreduce, CallForm::blocking, 8).use == Provider::mpi);
  CHECK(decides(MpiCollective::allreduce, CallForm::nonblocking, 8).use == Provider::copse);
  // Persistent: nonblocking's rows, said so.
  const DecisionRow persistent = decides(MpiCollective::allreduce, CallForm::persistent, 8);
  CHECK(persistent.use == Provider::copse);
  CHECK(persistent.note == "np2: tuned/copse 1.60 by median; persistent not measured: nonblocking's");
  // bcast: blocking as measured; nonblocking and persistent from the blocking ratios, copse from 0.665.
  CHECK(decides(MpiCollective::bcast, CallForm::blocking, 8).use == Provider::mpi);
  for (CallForm form : {CallForm::nonblocking, CallForm::persistent}) {
    const DecisionRow small = decides(MpiCollective::bcast, form, 8);
    CHECK(small.use == Provider::copse);
    CHECK(small.note == "np2: tuned/copse 0.75 by median; " + std::string(to_string(form)) +
                            " not measured: the blocking call's, copse from 0.665");
    CHECK(decides(MpiCollective::bcast, form, 32).use == Provider::mpi);  // far slower: copse's own slow path
    CHECK(decides(MpiCollective::bcast, form, 128).use == Provider::copse);
  }
  // A lower factor gives the unmeasured forms fewer bands; 1 the blocking call's decisions.
  const DecisionTable same = tune_table(r, 0.95, 1.0, std::nullopt, 1.0);
  CHECK(same.decide(CallShape{MpiCollective::bcast, 8, 2, 1, 1, CallForm::nonblocking}) == Provider::mpi);
  // A form that is none: the line says so; a CSV without a form column is the blocking calls'.
  std::istringstream bad(header + row("bcast", 8, 1.0, "immediate"));
  CHECK_THROWS_WITH(read_tune_csv(bad, "f.csv"),
                    "measurements f.csv, line 2: unknown form 'immediate' (blocking, nonblocking or persistent)");
  CHECK(ratios_of(csv_row("np2", "bcast", 8, 1.0)).at("np2").at(MpiCollective::bcast).contains(CallForm::blocking));
}

TEST_CASE("tune: a size takes the hierarchy form that beats the configured one by more than the noise") {
  // bcast at np4-h2, tuned/copse by median, configured form (leader) / lanes / auto:
  //   8 B      1.00 / 0.50 / 1.10   auto within the noise of leader (1.10 < 1.00 / 0.8): leader
  //   64 KiB   0.57 / 1.69 / 1.60   lanes, far ahead of leader: copse in lanes
  //   256 KiB  0.60 / 1.30 / 1.50   lanes: auto is faster, but within the noise of lanes (1.50 < 1.30 / 0.8)
  //   1 MiB    0.62 / 0.90 / 1.40   auto, beyond the noise of lanes: copse in auto
  //   16 MiB   0.60 / 0.90 / 0.70   lanes is faster but below the threshold: the library
  std::string csv;
  const std::pair<std::uint64_t, std::array<double, 3>> sizes[] = {{8, {1.0, 0.5, 1.1}},
                                                                   {65536, {0.57, 1.69, 1.6}},
                                                                   {262144, {0.6, 1.3, 1.5}},
                                                                   {1048576, {0.62, 0.9, 1.4}},
                                                                   {16777216, {0.6, 0.9, 0.7}}};
  for (const auto& [bytes, x] : sizes)
    csv += csv_row("np4-h2", "bcast", bytes, x[0]) + csv_row("np4-h2", "bcast", bytes, x[1], "", "copse-lanes") +
           csv_row("np4-h2", "bcast", bytes, x[2], "", "copse-auto");
  // A barrier's one band: each form's median over its sizes (leader 0.9, lanes 2.0).
  csv += csv_row("np4-h2", "barrier", 0, 0.9) + csv_row("np4-h2", "barrier", 0, 2.0, "", "copse-lanes");
  const TuneRatios r = ratios_of(csv);
  const TuneRatio& at64k = r.at("np4-h2").at(MpiCollective::bcast).at(CallForm::blocking).at(65536);
  CHECK(at64k.configured == Approx(0.57));
  CHECK(at64k.variants.at(TuneVariant{Form::lanes, 0}) == Approx(1.69));
  CHECK(at64k.best() == Approx(1.69));
  const DecisionTable t = tune_table(r, 0.95, 0.8, std::nullopt);
  std::string got;
  for (const DecisionRow& row : rows_of(t, CallForm::blocking))
    if (row.collective == MpiCollective::bcast)
      got += std::to_string(row.min_bytes) + (row.use == Provider::copse ? "c" : "m") +
             (row.hierarchy ? std::string(to_string(*row.hierarchy)) : "") + " ";
  CHECK(got == "0c 725clanes 524289cauto 4194305m ");  // 725: isqrt(8 * 64 KiB) + 1
  for (const DecisionRow& row : rows_of(t, CallForm::blocking)) {
    if (row.collective == MpiCollective::bcast && row.hierarchy == Form::lanes)
      CHECK(row.note == "np4-h2: tuned/copse 1.69, 1.30 by median in lanes (the configured form: 0.57, 0.60)");
    if (row.collective == MpiCollective::barrier) CHECK((row.use == Provider::copse && row.hierarchy == Form::lanes));
  }
  // Written and read back, the forms stay.
  const DecisionTable back = parse_decision_table(write_decision_table(t, "h"), "w.toml");
  REQUIRE(back.rows.size() == t.rows.size());
  for (std::size_t i = 0; i < t.rows.size(); ++i) CHECK(back.rows[i].hierarchy == t.rows[i].hierarchy);
  // A label naming no form is refused, with its line.
  CHECK_THROWS_WITH(ratios_of(csv_row("np4-h2", "bcast", 8, 1.0, "", "copse-tree")),
                    Catch::Contains("line 2: label 'copse-tree': unknown hierarchy form"));
}

TEST_CASE("tune: variant labels name a form, a block count, or both") {
  CHECK_FALSE(tune_variant_of("copse"));
  CHECK(tune_variant_of("copse-lanes") == TuneVariant{Form::lanes, 0});
  CHECK(tune_variant_of("copse-b16") == TuneVariant{std::nullopt, 16});
  CHECK(tune_variant_of("copse-multi-leader") == TuneVariant{Form::multi_leader, 0});
  CHECK(tune_variant_of("copse-multi-leader-b4") == TuneVariant{Form::multi_leader, 4});
  for (const TuneVariant& v :
       {TuneVariant{Form::automatic, 0}, TuneVariant{std::nullopt, 64}, TuneVariant{Form::lanes, 2}})
    CHECK(tune_variant_of(v.label()) == v);
  CHECK(TuneVariant{Form::lanes, 4}.text() == "in lanes with 4 blocks");
  CHECK(TuneVariant{std::nullopt, 1}.text() == "with 1 block");
  for (const char* bad : {"copse-b0", "copse-b", "copse-lanes-x", "copse-", "tuned"})
    CHECK_THROWS_AS(tune_variant_of(bad), UsageError);
  // The rule's order: every form before any block count, fewer blocks first.
  CHECK(TuneVariant{Form::automatic, 0} < TuneVariant{std::nullopt, 4});
  CHECK(TuneVariant{std::nullopt, 4} < TuneVariant{Form::flat, 4});
  CHECK(TuneVariant{Form::lanes, 4} < TuneVariant{std::nullopt, 16});
}

TEST_CASE("tune: a size takes the block count that beats the configured plan by more than the noise") {
  // reduce at np4-h2, tuned/copse by median, as configured / 4 blocks / 16 blocks / 64 blocks (the block
  // sides measured from 256 KiB only):
  //   64 KiB   1.10 /  -   /  -   /  -     as configured
  //   256 KiB  1.00 / 1.10 / 1.20 / 0.90   16 blocks within the noise of the configured plan: as configured
  //   1 MiB    0.50 / 1.05 / 0.60 / 1.20   4 blocks, far ahead; 64 within the noise of 4 (1.20 < 1.05 / 0.8)
  //   4 MiB    0.50 / 0.60 / 0.70 / 1.00   64 blocks, beyond the noise of every earlier one
  //   16 MiB   0.50 / 0.60 / 0.65 / 1.02   likewise: one row with 4 MiB
  std::string csv = csv_row("np4-h2", "reduce", 65536, 1.1);
  const std::pair<std::uint64_t, std::array<double, 4>> sizes[] = {{262144, {1.0, 1.1, 1.2, 0.9}},
                                                                   {1048576, {0.5, 1.05, 0.6, 1.2}},
                                                                   {4194304, {0.5, 0.6, 0.7, 1.0}},
                                                                   {16777216, {0.5, 0.6, 0.65, 1.02}}};
  for (const auto& [bytes, x] : sizes)
    csv += csv_row("np4-h2", "reduce", bytes, x[0]) + csv_row("np4-h2", "reduce", bytes, x[1], "", "copse-b4") +
           csv_row("np4-h2", "reduce", bytes, x[2], "", "copse-b16") +
           csv_row("np4-h2", "reduce", bytes, x[3], "", "copse-b64");
  const DecisionTable t = tune_table(ratios_of(csv), 0.95, 0.8, std::nullopt);
  std::string got;
  for (const DecisionRow& row : rows_of(t, CallForm::blocking))
    if (row.collective == MpiCollective::reduce) {
      got += std::to_string(row.min_bytes) + (row.use == Provider::copse ? "c" : "m") +
             (row.blocks ? "b" + std::to_string(row.blocks) : "") + " ";
      CHECK_FALSE(row.hierarchy);
      if (row.blocks == 4) CHECK(row.note == "np4-h2: tuned/copse 1.05 by median with 4 blocks (as configured: 0.50)");
    }
  CHECK(got == "0c 524289cb4 2097153cb64 ");  // isqrt(256 KiB * 1 MiB) + 1, isqrt(1 MiB * 4 MiB) + 1
  // Written and read back, the counts stay; `copse config` shows them.
  const DecisionTable back = parse_decision_table(write_decision_table(t, "h"), "w.toml");
  REQUIRE(back.rows.size() == t.rows.size());
  for (std::size_t i = 0; i < t.rows.size(); ++i) CHECK(back.rows[i].blocks == t.rows[i].blocks);
  CHECK_THAT(back.describe(), Catch::Contains("-> copse (64 blocks)"));
}
