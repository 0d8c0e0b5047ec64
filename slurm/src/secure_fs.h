// File-system and process helpers of the SPANK plugin. Everything that touches a
// user-controlled path runs as the job's user: in srun (which is the user) or in
// a forked child of slurmstepd that dropped its privileges first. Directories are
// walked with O_NOFOLLOW from "/" by the common walker (aon/base/secure_fs.h), so no
// symlink is ever followed.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "aon/base/secure_fs.h"
#include "aon/base/status.h"

namespace aon::spank {

struct JobUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups
};

// The job directory as aon/base/secure_fs.h makes it (WalkPrivateDirectory): mode
// 0700, the caller's, no symbolic link followed at all (PathPolicy::kNoSymlinks).
// Runs as the caller: call it only as the job's user. Warnings (a directory on
// the way its group may write, ...) are appended to *warnings.
Status MakePrivateDirectories(const std::string& path,
                              std::vector<std::string>* warnings = nullptr);

// What slurmstepd learns from making a step's directory as the user.
struct PreparedJobDir {
  std::vector<std::string> warnings;
  std::string collector_key;  // the step's collector key (aon/ipc/collector_protocol.h)
};

// The same, in a forked child that first becomes `user` (setgroups, setresgid,
// setresuid) and checks it cannot get root back. For slurmstepd (root). With
// `prepared`, the child also makes the directory's collector key if there is
// none (KeyMode::kCreate: every node of a step sharing the directory ends with
// the same key) and hands it back, so root never reads a file of the user's.
Status MakePrivateDirectoriesAs(const JobUser& user, const std::string& path,
                                PreparedJobDir* prepared = nullptr);

using aon::MakeFilesPrivate;

// Runs argv[0] (absolute path) with stdout sent to stderr, umask 077; returns its
// exit status (128 + signal if killed), or an error naming it when it could not
// be started (aon/base/spawn.h).
StatusOr<int> RunProgram(const std::vector<std::string>& argv);

// The directory this plugin (aon.so) was loaded from (dladdr).
std::string PluginDirectory();

// Where libaon_agent.so and the aon-merge directory are, relative to the plugin
// (<lib>/aon.so or <lib>/aon/aon.so; aon/config/tool_paths.h): the first
// usable candidate, resolved, else "".
std::string FindAgent(const std::string& plugin_dir);
std::string FindBinDir(const std::string& plugin_dir);

}  // namespace aon::spank
