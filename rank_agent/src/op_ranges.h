// Framework operator ranges: the agent's side of aon_op_begin / aon_op_end
// (rank_agent/include/aon/capture_api.h; the records are OpRecord, the `ops`
// kind, format 1.8).
//
// When ranges are recorded. While the GPU activity source records (a capture
// window is open, or CUPTI traces all the time in full / flight mode) and the
// `ops` kind is on: CaptureControl switches this with SetOpsRecording at the
// same transitions where it opens and quiesces the source. Outside, Begin is
// one atomic load and returns 0. A range that began while recording is
// recorded whole, whenever it ends.
//
// Per thread. Ranges nest per thread: each thread keeps the stack of its open
// recorded ranges (thread-local, no lock; ends must come on the thread of the
// begin). A record is pushed to the sink once, at the end, with both times.
// parent_id is the range below on the stack. An end that names a range deeper
// than the top ends the ranges above it too (their own ends were lost to an
// exception in the framework's hooks); an end that names no open range of its
// thread is ignored and counted (NoteOpRangeLosses).
//
// Ties to GPU work. Each launch, copy or memset made while a range is open on
// its thread is tied to the innermost one by an ExternalCorrelationRecord {op
// id, the call's correlation id, kind CUSTOM0}. CUPTI (cupti_source.cc) writes
// it from a callback at the call's entry (InnermostOpRange): nothing per range.
// A source may instead keep a correlation stack that the ranges push and pop
// (OpCorrelation; the synthetic device's, CUPTI's external correlation ids
// before: a push and a pop per range cost more than the launches' callbacks).
// With a stack, a pop happens only in the attach whose push it undoes: popping
// after a detach would start the source again. Pushes whose pop was skipped
// (the range ended after the detach), and pushes of still-open ranges from an
// earlier attach, are popped by their thread at its first range of the next
// attach, before its own push (a stack the source cleared answers "empty",
// which ends the clean-up), and its open ranges are pushed again.
//
// Fork. A child forked while ranges are recorded (DataLoader workers) records
// none and ends none it inherited: pthread_atfork switches it off.
//
// Epochs. NoteCaptureDetach bumps an epoch before the source detaches (on the
// thread that detaches, under CaptureControl's lock); a thread pops only when
// the epoch is the one of its push. The remaining race: a thread that read the
// epoch just before the bump and is descheduled for the whole flush before its
// pop (milliseconds); nccl_plugin.cc's launch bracket takes the same one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aon::agent {

// How the GPU activity source ties launches to the innermost open range on
// the calling thread. Both run on the range's thread.
struct OpCorrelation {
  // Pushes `op_id` (CUSTOM0); true when pushed, so that a pop is owed.
  bool (*push)(uint64_t op_id);
  // Pops the innermost id; false when the stack was empty (or the pop failed).
  bool (*pop)();
};

// The source's correlation functions (null: the source ties launches itself,
// through InnermostOpRange, or not at all). Set once, when the source starts,
// before any window opens.
void SetOpCorrelation(const OpCorrelation* correlation);

// The id of the innermost recorded range open on the calling thread, 0 when
// none: for a source that ties each launch as it is made (CUPTI's launch
// callbacks, cupti_source.cc) instead of keeping a correlation stack.
uint64_t InnermostOpRange();

// Whether ranges are recorded now: an atomic load (aon_ops_active).
bool OpsRecording();
// Whether this process is a child forked from a recording one (it records nothing of its own).
bool ForkedChild();
// CaptureControl, at its transitions: on after the source opened, off before it
// quiesces. `on` is ignored when the `ops` kind is off. `tell` = false: the
// listener (aon_ops_listen) is not told (the agent's exit).
void SetOpsRecording(bool on, bool tell = true);
// aon_ops_listen: the framework's switch, told every change of SetOpsRecording
// (and the state now, at once), serialized with the changes.
void SetOpsListener(void (*listener)(int on));
// CaptureControl, just before the source detaches (Close).
void NoteCaptureDetach();

// aon_op_begin / aon_op_end (capture_api.h says what the arguments mean).
uint64_t BeginOpRange(const char* name, uint8_t kind, int64_t sequence_nr,
                      uint32_t framework_thread, uint32_t forward_thread);
void EndOpRange(uint64_t id);

// CUDA graphs (GraphOpRecord): a kernel node created on this thread (during
// stream capture, inside the capturing launch) while a recorded range is open
// here is tied to the innermost one; a clone of a tied node (graph
// instantiation) to the same range. Both run in the GPU source's callbacks; a
// node with no range, or a clone of one, records nothing. At most
// kMaxGraphNodes nodes are remembered (more are counted in the notes).
inline constexpr size_t kMaxGraphNodes = size_t{1} << 20;
void NoteGraphNodeCreated(uint64_t node_id);
void NoteGraphNodeCloned(uint64_t original_node_id, uint64_t clone_node_id);

// When the agent is made, before any range is recorded: where ranges go; what
// could not be recorded is said in the notes at the agent's Finish.
class AgentNotes;
class RecordSink;
void BindOpRanges(RecordSink& sink, AgentNotes& notes);

}  // namespace aon::agent
