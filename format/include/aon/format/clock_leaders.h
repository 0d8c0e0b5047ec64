// Node leaders: giving each follower rank its clock leader's correction.
//
// Ranks that read the same CLOCK_MONOTONIC (same kernel boot, same time
// namespace: RankMetadata::clock_id) need only one clock measurement between
// them. The agent elects one rank per node (the lowest rank of the node's
// PMIx local peers, rank 0 on the root's node); only that node leader runs
// ping-pong against rank 0, and each other rank of the node whose clock_id
// matches the leader's writes clock_leader_rank = the leader and measures
// nothing (clocksync/include/aon/clocksync/rank_sync.h). Followers of rank 0 are on the
// reference clock itself and say so in their own file (offset 0, bound 0);
// followers of any other leader leave their clock unsynchronized in their
// file, because the leader's model is only known when the leader exits.
//
// ApplyClockLeaders is where a reader of all rank files (the merge) closes
// that loop: it copies each follower's leader's offset, drift, reference time,
// bound and synchronized flag into the follower's metadata, but only when the
// leader's metadata is there, the leader measured for itself, and both files
// name the same clock. Anything else leaves the follower unsynchronized
// (offset 0, bound -1) and says why in one line per rank. One exception: a
// follower of rank 0 that wrote itself synchronized (it checked at run time
// that it reads the reference clock) keeps that when rank 0's file is lost.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "aon/format/trace_format.h"

namespace aon {

// `ranks`: the metadata of every rank file read (any order; null entries and
// absent ranks allowed; a rank listed twice: the copy that measured for itself,
// else the first, serves as leader). Edits followers in place, leaves every
// other rank (clock_leader_rank < 0 or == its own rank, i.e. files before 1.3)
// as it is, and returns one problem line per follower left unsynchronized, e.g.
//   "rank 5: clock leader rank 4 missing; not clock-synchronized".
std::vector<std::string> ApplyClockLeaders(std::span<RankMetadata* const> ranks);

}  // namespace aon
