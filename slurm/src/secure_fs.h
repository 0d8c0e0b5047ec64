// File-system and process helpers of the SPANK plugin. Everything that touches a
// user-controlled path runs as the job's user: in srun (which is the user) or in
// a forked child of slurmstepd that dropped its privileges first. Directories are
// walked with O_NOFOLLOW from "/", so no symlink is ever followed.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "aon/status.h"

namespace aon::spank {

struct JobUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups
};

// mkdir -p <path> with mode 0700, every component opened with O_NOFOLLOW; the last
// one must be a directory owned by the caller's euid (its mode is set to 0700).
// Runs as the caller: call it only as the job's user.
Status MakePrivateDirectories(const std::string& path);

// The same, in a forked child that first becomes `user` (setgroups, setresgid,
// setresuid) and checks it cannot get root back. For slurmstepd (root).
Status MakePrivateDirectoriesAs(const JobUser& user, const std::string& path);

// chmod 0600 of every regular file and 0700 of every directory directly in `dir`
// that the caller owns (no symlink followed). Run as the user.
Status MakeFilesPrivate(const std::string& dir);

// Runs argv[0] (absolute path) with stdout sent to stderr, umask 077; returns its
// exit status (128 + signal if killed).
StatusOr<int> RunProgram(const std::vector<std::string>& argv);

// The directory this plugin (aon.so) was loaded from (dladdr).
std::string PluginDirectory();

// Where libaon_agent.so and the aon-merge directory are, relative to the plugin
// (<lib>/aon.so or <lib>/aon/aon.so; aon/session/tool_paths.h): the first
// usable candidate, resolved, else "".
std::string FindAgent(const std::string& plugin_dir);
std::string FindBinDir(const std::string& plugin_dir);

}  // namespace aon::spank
