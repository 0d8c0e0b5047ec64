// A GPU's PCIe link, read from the files the NVIDIA driver and Linux publish:
// /proc/driver/nvidia/gpus/<bus id>/information names each GPU's UUID, and
// /sys/bus/pci/devices/<bus id>/ holds its link's speed and width and, one
// directory up, those of the port it is plugged into. Read once per GPU by the
// agent (rank files' /meta/devices); the pageable-copies finding's reference
// rate when a run has no pinned copy of its own.
#pragma once

#include <cstdint>
#include <string>

namespace aon {

struct PcieLink {
  uint32_t gen = 0;    // 1..6; 0: not known
  uint32_t width = 0;  // lanes; 0: not known
};

// The most the link of GPU `uuid` ("GPU-xxxxxxxx-...") can run at: the lower of
// the GPU's and its upstream port's maximum speed and width (a link trains to
// what both ends support; the current speed may be lowered while the GPU idles).
// {} when the files are not there (no NVIDIA driver, a container without them,
// a GPU that is not on PCIe) or do not say. `proc` and `sys` are the roots
// ("/proc", "/sys"; tests plant their own).
PcieLink ReadPcieLink(const std::string& uuid, const std::string& proc = "/proc",
                      const std::string& sys = "/sys");

// "32.0 GT/s PCIe" (sysfs' max_link_speed) as a generation; 0 when not one.
uint32_t PcieGenOfSpeed(const std::string& text);

}  // namespace aon
