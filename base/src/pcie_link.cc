#include "aon/base/pcie_link.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>

namespace aon {

namespace {

// A small text file's content (the first 4 KiB), "" when it cannot be read.
std::string ReadSmall(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// The bus id of GPU `uuid` from the driver's per-GPU information files.
std::string BusIdOf(const std::string& uuid, const std::string& proc) {
  const std::string dir = proc + "/driver/nvidia/gpus";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return "";
  std::string found;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    std::istringstream info(ReadSmall(dir + "/" + name + "/information"));
    for (std::string line; std::getline(info, line);) {
      // "GPU UUID: 	 GPU-5c6f..."
      if (line.rfind("GPU UUID:", 0) != 0) continue;
      std::string_view v(line);
      v.remove_prefix(9);
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\t' || v.back() == '\r'))
        v.remove_suffix(1);
      if (v == uuid) found = name;
    }
    if (!found.empty()) break;
  }
  closedir(d);
  return found;
}

uint32_t ReadWidth(const std::string& path) {
  const std::string text = ReadSmall(path);
  char* end = nullptr;
  const unsigned long w = std::strtoul(text.c_str(), &end, 10);
  return end != text.c_str() && w > 0 && w <= 32 ? static_cast<uint32_t>(w) : 0;
}

// The lower of two known values; a side that does not say leaves the other.
uint32_t Lower(uint32_t a, uint32_t b) { return a == 0 ? b : b == 0 ? a : std::min(a, b); }

}  // namespace

uint32_t PcieGenOfSpeed(const std::string& text) {
  char* end = nullptr;
  const double gts = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || std::string_view(end).find("GT/s") == std::string_view::npos) return 0;
  static constexpr double kGts[] = {2.5, 5, 8, 16, 32, 64};
  for (uint32_t g = 0; g < 6; ++g) {
    if (gts > kGts[g] * 0.99 && gts < kGts[g] * 1.01) return g + 1;
  }
  return 0;
}

PcieLink ReadPcieLink(const std::string& uuid, const std::string& proc, const std::string& sys) {
  const std::string bus = BusIdOf(uuid, proc);
  if (bus.empty()) return {};
  // sysfs names the device in lower case ("0000:1b:00.0"); the driver may not.
  std::string id = bus;
  std::transform(id.begin(), id.end(), id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string dev = sys + "/bus/pci/devices/" + id;
  PcieLink link;
  link.gen = PcieGenOfSpeed(ReadSmall(dev + "/max_link_speed"));
  link.width = ReadWidth(dev + "/max_link_width");
  if (link.gen == 0 || link.width == 0) return {};
  // The port above: the device's directory's parent, once links are resolved.
  char real[PATH_MAX];
  if (realpath(dev.c_str(), real) != nullptr) {
    std::string up(real);
    up.resize(up.rfind('/'));
    link.gen = Lower(link.gen, PcieGenOfSpeed(ReadSmall(up + "/max_link_speed")));
    link.width = Lower(link.width, ReadWidth(up + "/max_link_width"));
  }
  return link;
}

}  // namespace aon
