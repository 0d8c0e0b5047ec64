// Reconcile (merge/src/reconcile.h): which candidate gives each rank, with what
// status and which problem lines, on hand-made candidates (no files, no
// processes). The expected values are what the merge has always reported; the
// merge tests check the same on real files, with one process and several.
#include "reconcile.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "merge_test_util.h"
#include "scan.h"

namespace aon::merge {
namespace {

const std::string kJob = "/job";
const std::string kIncomplete = "incomplete (rank still running or crashed before writing)";

std::string P(const std::string& name) { return kJob + "/" + name; }

// A file of the job directory as the scan names it, opened by process 0.
Candidate Named(const std::string& name, bool partial) {
  Candidate c;
  c.path = P(name);
  c.partial = partial;
  c.name_rank = RankFromFileName(name, partial);
  c.opened_by = 0;
  return c;
}

// A readable file: "rank-00003.h5" (or any name) whose metadata says `rank` of `world`.
Candidate Readable(const std::string& name, int32_t rank, int32_t world, bool partial = false) {
  Candidate c = Named(name, partial);
  c.found.meta_read = true;
  c.found.meta = testing::BasicMetadata(rank, world);
  c.found.meta.dropped[0] = 2;
  c.found.meta.dropped[3] = 5;
  return c;
}

// A file that could not be read (no metadata).
Candidate Unreadable(const std::string& name, RankStatus status, const std::string& reason,
                     bool partial = false) {
  Candidate c = Named(name, partial);
  c.found.status = status;
  c.found.reason = reason;
  return c;
}

// A .partial file not opened because a final file gives its rank.
Candidate NotOpened(const std::string& name) {
  Candidate c = Named(name, true);
  c.opened_by = -1;
  return c;
}

std::string Missing(uint32_t rank) {
  return "rank " + std::to_string(rank) + ": missing: no " + RankFileName(rank) + " in '" + kJob +
         "'";
}

void ExpectOk(const Reconciliation& r, uint32_t rank, size_t from, const std::string& path) {
  SCOPED_TRACE("rank " + std::to_string(rank));
  ASSERT_LT(rank, r.ranks.size());
  EXPECT_EQ(r.ranks[rank].rank, rank);
  EXPECT_EQ(r.ranks[rank].status, RankStatus::kOk);
  EXPECT_EQ(r.ranks[rank].path, path);
  EXPECT_EQ(r.ranks[rank].message, "");
  EXPECT_EQ(r.merged_from[rank], from);
}

TEST(Reconcile, AllRanksPresent) {
  const std::vector<Candidate> c = {Readable("rank-00000.h5", 0, 2),
                                    Readable("rank-00001.h5", 1, 2)};
  const Reconciliation r = Reconcile(kJob, c);
  EXPECT_EQ(r.world_size, 2u);
  EXPECT_FALSE(r.nothing_to_merge());
  ExpectOk(r, 0, 0, P("rank-00000.h5"));
  ExpectOk(r, 1, 1, P("rank-00001.h5"));
  EXPECT_EQ(r.ranks[1].host, "node0");
  EXPECT_EQ(r.ranks[1].source, "cupti");
  EXPECT_EQ(r.ranks[1].dropped, 7u) << "summed over kinds";
  EXPECT_EQ(r.ranks[1].records, 0u) << "counted while merging";
  EXPECT_TRUE(r.problems.empty());
}

TEST(Reconcile, MissingRank) {
  const std::vector<Candidate> c = {Readable("rank-00000.h5", 0, 4),
                                    Readable("rank-00001.h5", 1, 4),
                                    Readable("rank-00003.h5", 3, 4)};
  const Reconciliation r = Reconcile(kJob, c);
  ASSERT_EQ(r.world_size, 4u);
  EXPECT_EQ(r.ranks[2].status, RankStatus::kMissing);
  EXPECT_EQ(r.ranks[2].path, "");
  EXPECT_EQ(r.ranks[2].message, "no rank-00002.h5 in '/job'");
  EXPECT_FALSE(r.merged_from[2].has_value());
  ExpectOk(r, 3, 2, P("rank-00003.h5"));
  EXPECT_EQ(r.problems, std::vector<std::string>{Missing(2)});
}

TEST(Reconcile, DuplicateFinalFilesTheFirstByPathWins) {
  const std::vector<Candidate> c = {Readable("rank-00000.h5", 0, 2),
                                    Readable("rank-00001.h5", 1, 2), Readable("rank-1.h5", 1, 2)};
  const Reconciliation r = Reconcile(kJob, c);
  EXPECT_EQ(r.world_size, 2u);
  ExpectOk(r, 1, 1, P("rank-00001.h5"));
  EXPECT_EQ(r.problems, std::vector<std::string>{
                            P("rank-1.h5") + ": duplicate: claims rank 1, already merged from " +
                            P("rank-00001.h5") + "; skipped"});
}

TEST(Reconcile, PartialFileOfARankAFinalFileGivesIsSuperseded) {
  // Not opened at all (the open phase skips it: RanksOfReadableFiles) ...
  std::vector<Candidate> c = {Readable("rank-00000.h5", 0, 2), Readable("rank-00001.h5", 1, 2),
                              NotOpened("rank-00001.h5.partial")};
  EXPECT_EQ(RanksOfReadableFiles(std::span<const Candidate>(c).first(2)),
            (std::set<uint32_t>{0, 1}));
  Reconciliation r = Reconcile(kJob, c);
  ExpectOk(r, 1, 1, P("rank-00001.h5"));
  EXPECT_EQ(r.problems,
            std::vector<std::string>{P("rank-00001.h5.partial") + ": " + kIncomplete +
                                     " (rank 1 merged from " + P("rank-00001.h5") + ")"});
  // ... or opened, when its name does not say the rank its metadata does.
  c[2] = Readable("rank-00005.h5.partial", 1, 2, /*partial=*/true);
  r = Reconcile(kJob, c);
  EXPECT_EQ(r.world_size, 2u);
  ExpectOk(r, 1, 1, P("rank-00001.h5"));
  EXPECT_EQ(r.problems,
            (std::vector<std::string>{
                P("rank-00005.h5.partial") +
                    ": file name says rank 5 but its metadata says rank 1; merged as rank 1",
                P("rank-00005.h5.partial") + ": " + kIncomplete + " (rank 1 merged from " +
                    P("rank-00001.h5") + ")"}));
}

TEST(Reconcile, SalvagedPartialFileMakesItsRankTruncated) {
  const std::vector<Candidate> c = {Readable("rank-00000.h5", 0, 3),
                                    Readable("rank-00001.h5", 1, 3),
                                    Readable("rank-00002.h5.partial", 2, 3, /*partial=*/true)};
  const Reconciliation r = Reconcile(kJob, c);
  ASSERT_EQ(r.world_size, 3u);
  EXPECT_EQ(r.ranks[2].status, RankStatus::kTruncated);
  EXPECT_EQ(r.ranks[2].path, P("rank-00002.h5.partial"));
  EXPECT_EQ(r.ranks[2].message, "") << "said once its last record is known";
  EXPECT_EQ(r.merged_from[2], 2u);
  EXPECT_TRUE(r.problems.empty()) << "reported once merged";
}

TEST(Reconcile, UnsalvageablePartialFileLeavesItsRankMissing) {
  const std::vector<Candidate> c = {
      Readable("rank-00000.h5", 0, 2),
      Unreadable("rank-00001.h5.partial", RankStatus::kCorrupt, "unreadable rank metadata: x",
                 /*partial=*/true)};
  const Reconciliation r = Reconcile(kJob, c);
  ASSERT_EQ(r.world_size, 2u);
  EXPECT_EQ(r.ranks[1].status, RankStatus::kMissing);
  EXPECT_EQ(r.ranks[1].message,
            "no rank-00001.h5 in '/job'; rank-00001.h5.partial is " + kIncomplete);
  EXPECT_EQ(
      r.problems,
      (std::vector<std::string>{
          P("rank-00001.h5.partial") + ": " + kIncomplete +
              " (not salvageable: unreadable rank metadata: x)",
          "rank 1: missing: no rank-00001.h5 in '/job'; rank-00001.h5.partial is " + kIncomplete}));
}

TEST(Reconcile, CorruptUnsupportedAndTruncatedFilesDescribeTheirRank) {
  const std::string corrupt = "trace file '" + P("rank-00001.h5") + "' is not an HDF5 file";
  const std::string newer = P("rank-00002.h5") + ": format 2.4 is newer than 1.4; upgrade AON";
  const std::string cut = "cannot open trace file '" + P("rank-00003.h5") + "': truncated file";
  const std::vector<Candidate> c = {
      Readable("rank-00000.h5", 0, 5), Unreadable("rank-00001.h5", RankStatus::kCorrupt, corrupt),
      Unreadable("rank-00002.h5", RankStatus::kUnsupported, newer),
      Unreadable("rank-00003.h5", RankStatus::kTruncated, cut), Readable("rank-00004.h5", 4, 5)};
  const Reconciliation r = Reconcile(kJob, c);
  ASSERT_EQ(r.world_size, 5u);
  const RankStatus want[] = {RankStatus::kOk, RankStatus::kCorrupt, RankStatus::kUnsupported,
                             RankStatus::kTruncated, RankStatus::kOk};
  const std::string message[] = {"", corrupt, newer, cut, ""};
  for (uint32_t rank = 0; rank < 5; ++rank) {
    EXPECT_EQ(r.ranks[rank].status, want[rank]) << rank;
    EXPECT_EQ(r.ranks[rank].message, message[rank]) << rank;
    EXPECT_EQ(r.ranks[rank].path, c[rank].path) << rank;
    EXPECT_EQ(r.merged_from[rank].has_value(), rank == 0 || rank == 4) << rank;
  }
  EXPECT_EQ(r.problems, (std::vector<std::string>{corrupt, newer, cut}));
}

TEST(Reconcile, BadFileOfAMergedOrUnknownRankIsOnlyNamed) {
  Candidate merged_elsewhere = Unreadable("rank-00001.h5", RankStatus::kCorrupt, "bad 1");
  Candidate no_rank = Unreadable("rank-x.h5", RankStatus::kCorrupt, "bad x");
  Candidate beyond = Unreadable("rank-00009.h5", RankStatus::kUnsupported, "bad 9");
  const std::vector<Candidate> c = {Readable("rank-00000.h5", 0, 2),
                                    Readable("rank-00007.h5", 1, 2),  // gives rank 1
                                    merged_elsewhere, no_rank, beyond};
  const Reconciliation r = Reconcile(kJob, c);
  ASSERT_EQ(r.world_size, 2u);
  ExpectOk(r, 1, 1, P("rank-00007.h5"));
  EXPECT_EQ(r.problems,
            (std::vector<std::string>{P("rank-00007.h5") +
                                          ": file name says rank 7 but its metadata says rank 1; "
                                          "merged as rank 1",
                                      "bad 1 (rank 1 merged from " + P("rank-00007.h5") + ")",
                                      "bad x (rank unknown: the file name is not rank-<N>.h5)",
                                      "bad 9 (claims rank 9, beyond world size 2)"}));
}

TEST(Reconcile, RankInMetadataDiffersFromTheFileName) {
  const std::vector<Candidate> c = {Readable("rank-00000.h5", 0, 2),
                                    Readable("rank-00007.h5", 1, 2)};
  const Reconciliation r = Reconcile(kJob, c);
  EXPECT_EQ(r.world_size, 2u) << "the metadata decides the rank";
  ExpectOk(r, 1, 1, P("rank-00007.h5"));
  EXPECT_EQ(r.problems,
            std::vector<std::string>{P("rank-00007.h5") +
                                     ": file name says rank 7 but its metadata says rank 1; "
                                     "merged as rank 1"});
}

TEST(Reconcile, ProcessThatEndedWithoutFinishingMakesItsRankTruncated) {
  std::vector<Candidate> c = {Readable("rank-00000.h5", 0, 2), Readable("rank-00001.h5", 1, 2)};
  c[1].found.meta.truncated = true;
  c[1].found.meta.last_record_ns = 1'234'000;
  Reconciliation r = Reconcile(kJob, c);
  const std::string line =
      P("rank-00001.h5") + ": process ended without finishing (killed?); trace ends at 1234000 ns";
  EXPECT_EQ(r.ranks[1].status, RankStatus::kTruncated);
  EXPECT_EQ(r.ranks[1].message, line);
  EXPECT_EQ(r.merged_from[1], 1u);
  EXPECT_EQ(r.problems, std::vector<std::string>{line});
  c[1].found.meta.last_record_ns = 0;
  r = Reconcile(kJob, c);
  EXPECT_EQ(r.ranks[1].message, P("rank-00001.h5") +
                                    ": process ended without finishing (killed?); trace ends at "
                                    "an unknown time");
}

TEST(Reconcile, WorldSizeIsTheLargestAnyReadableFileImplies) {
  // Rank 0 says 4 ranks, rank 1 says 2, rank 5 says 2 but is rank 5.
  std::vector<Candidate> c = {Readable("rank-00000.h5", 0, 4), Readable("rank-00001.h5", 1, 2),
                              Readable("rank-00005.h5", 5, 2)};
  Reconciliation r = Reconcile(kJob, c);
  ASSERT_EQ(r.world_size, 6u);
  for (uint32_t rank : {2u, 3u, 4u}) EXPECT_EQ(r.ranks[rank].status, RankStatus::kMissing);
  EXPECT_EQ(r.problems, (std::vector<std::string>{Missing(2), Missing(3), Missing(4)}));

  // An implausible world_size is ignored (named); an implausible rank makes the
  // file corrupt.
  const auto max_world = static_cast<int32_t>(kMaxWorldSize);
  const std::string bound = std::to_string(kMaxWorldSize);
  c = {Readable("rank-00000.h5", 0, 2), Readable("rank-00001.h5", 1, 2),
       Readable("rank-00002.h5", max_world, 2)};
  c[1].found.meta.world_size = max_world + 1;
  r = Reconcile(kJob, c);
  ASSERT_EQ(r.world_size, 2u);
  EXPECT_FALSE(r.merged_from[0] == std::nullopt);
  EXPECT_EQ(r.problems,
            (std::vector<std::string>{
                P("rank-00001.h5") + ": world_size " + std::to_string(kMaxWorldSize + 1) +
                    " is implausible; ignored",
                P("rank-00002.h5") + ": rank " + bound + " is implausible (claims rank " + bound +
                    ", beyond world size 2)"}));
  // One valid file claiming 2^22 ranks (one integer changed) made the merge
  // take 105 s and 3.4 GB for the missing ranks' rows; it is not believed.
  c = {Readable("rank-00000.h5", 0, int32_t{1} << 22)};
  r = Reconcile(kJob, c);
  EXPECT_EQ(r.world_size, 1u);
  EXPECT_EQ(r.ranks.size(), 1u);
  // Up to the bound, a claim is believed: a row per rank, the missing named.
  c = {Readable("rank-00000.h5", 0, max_world)};
  r = Reconcile(kJob, c);
  ASSERT_EQ(r.world_size, static_cast<uint32_t>(kMaxWorldSize));
  EXPECT_EQ(r.ranks.back().status, RankStatus::kMissing);
  EXPECT_EQ(r.problems.back(), Missing(static_cast<uint32_t>(kMaxWorldSize - 1)));
}

TEST(Reconcile, NothingReadableSizesTheTableFromTheBadFiles) {
  const std::vector<Candidate> c = {
      Unreadable("rank-00000.h5", RankStatus::kCorrupt, "bad 0"),
      Unreadable("rank-00002.h5", RankStatus::kTruncated, "cut 2"),
      Unreadable("rank-00005.h5.partial", RankStatus::kCorrupt, "bad 5", /*partial=*/true)};
  const Reconciliation r = Reconcile(kJob, c);
  EXPECT_TRUE(r.nothing_to_merge());
  ASSERT_EQ(r.world_size, 3u) << ".partial files say nothing about the job";
  EXPECT_EQ(r.ranks[0].status, RankStatus::kCorrupt);
  EXPECT_EQ(r.ranks[1].status, RankStatus::kMissing);
  EXPECT_EQ(r.ranks[2].status, RankStatus::kTruncated);
  EXPECT_EQ(r.problems, (std::vector<std::string>{"bad 0", "cut 2",
                                                  P("rank-00005.h5.partial") + ": " + kIncomplete +
                                                      " (not salvageable: bad 5)",
                                                  Missing(1)}));
}

TEST(Reconcile, OpenProblemsComeFirstInCandidateOrder) {
  std::vector<Candidate> c = {Readable("rank-00000.h5", 0, 3), Readable("rank-00001.h5", 1, 3),
                              Readable("rank-00002.h5.partial", 2, 3, /*partial=*/true)};
  c[1].found.open_problems = {"one: no sync table"};
  c[2].found.open_problems = {"two: no string table yet"};
  c[0].found.meta.world_size = 4;
  const Reconciliation r = Reconcile(kJob, c);
  EXPECT_EQ(r.problems, (std::vector<std::string>{"one: no sync table", "two: no string table yet",
                                                  Missing(3)}));
}

}  // namespace
}  // namespace aon::merge
