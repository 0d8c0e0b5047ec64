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
// Ties to GPU work. While a range is open, the GPU source's external
// correlation stack for CUSTOM0 holds its id on that thread (OpCorrelation:
// CUPTI's cuptiActivityPush/PopExternalCorrelationId, or the synthetic
// device's stack), so the source writes an ExternalCorrelationRecord {op id,
// the call's correlation id, kind 3} before each API record on that thread.
// A pop happens only in the attach whose push it undoes: popping after
// cuptiFinalize would start CUPTI again. Pushes whose pop was skipped (the
// range ended after the detach), and pushes of still-open ranges from an
// earlier attach, are popped by their thread at its first range of the next
// attach, before its own push (a stack CUPTI cleared answers "empty", which
// ends the clean-up), and its open ranges are pushed again: from then on the
// source's stack is the thread's stack of open ranges, whatever the source did
// with it at the detach. Until then (launches of a thread in a new window
// before its first range there) a launch may still carry a range of an
// earlier window if the source kept its stack; recorded ranges rarely outlive
// their window by the two steps after which the source detaches.
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

// The source's correlation functions (null: ranges are recorded untied). Set
// once, when the source starts, before any window opens.
void SetOpCorrelation(const OpCorrelation* correlation);

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
