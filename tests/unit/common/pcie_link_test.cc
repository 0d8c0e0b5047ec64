// ReadPcieLink on planted /proc and /sys trees (real files and a real symlink,
// as sysfs lays them out): the link is the lower of the GPU's and its port's
// maximum, and anything missing or malformed reads as not known.
#include "aon/base/pcie_link.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "temp_dir.h"

namespace aon {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

constexpr char kUuid[] = "GPU-c5e76222-e7e7-19a0-2982-397721437edb";

// A GPU at 0000:1b:00.0 under root port 0000:00:01.0, as /sys/devices holds it,
// with /sys/bus/pci/devices/<id> the link to it.
struct Tree {
  test_support::TempDir dir;
  std::string proc = dir.File("proc"), sys = dir.File("sys");
  fs::path port = fs::path(sys) / "devices/pci0000:00/0000:00:01.0";
  fs::path gpu = port / "0000:1b:00.0";
  Tree(const std::string& gpu_speed, const std::string& gpu_width, const std::string& port_speed,
       const std::string& port_width) {
    Write(fs::path(proc) / "driver/nvidia/gpus/0000:1B:00.0/information",
          "Model: \t\t NVIDIA H200\nIRQ:   \t\t 17\nGPU UUID: \t " + std::string(kUuid) +
              "\nBus Location: \t 0000:1b:00.0\n");
    Write(fs::path(proc) / "driver/nvidia/gpus/0000:2a:00.0/information",
          "GPU UUID: \t GPU-00000000-0000-0000-0000-000000000000\n");
    if (!gpu_speed.empty()) Write(gpu / "max_link_speed", gpu_speed);
    if (!gpu_width.empty()) Write(gpu / "max_link_width", gpu_width);
    fs::create_directories(gpu);
    if (!port_speed.empty()) Write(port / "max_link_speed", port_speed);
    if (!port_width.empty()) Write(port / "max_link_width", port_width);
    fs::create_directories(fs::path(sys) / "bus/pci/devices");
    fs::create_symlink(gpu, fs::path(sys) / "bus/pci/devices/0000:1b:00.0");
  }
  PcieLink Read(const std::string& uuid = kUuid) const { return ReadPcieLink(uuid, proc, sys); }
};

TEST(PcieLink, TheLowerOfTheGpusAndItsPortsMaximum) {
  {
    Tree t("32.0 GT/s PCIe\n", "16\n", "32.0 GT/s PCIe\n", "16\n");
    EXPECT_EQ(t.Read().gen, 5u);
    EXPECT_EQ(t.Read().width, 16u);
  }
  {
    Tree t("32.0 GT/s PCIe\n", "16\n", "16.0 GT/s PCIe\n", "8\n");  // a gen4 x8 slot
    EXPECT_EQ(t.Read().gen, 4u);
    EXPECT_EQ(t.Read().width, 8u);
  }
  {
    Tree t("8.0 GT/s PCIe\n", "4\n", "", "");  // a root bus directory: no port files
    EXPECT_EQ(t.Read().gen, 3u);
    EXPECT_EQ(t.Read().width, 4u);
  }
}

TEST(PcieLink, MissingOrMalformedIsNotKnown) {
  Tree ok("32.0 GT/s PCIe\n", "16\n", "32.0 GT/s PCIe\n", "16\n");
  EXPECT_EQ(ok.Read("GPU-ffffffff-0000-0000-0000-000000000000").gen, 0u);  // no such GPU
  EXPECT_EQ(ReadPcieLink(kUuid, ok.dir.File("nothing"), ok.sys).gen, 0u);
  Tree no_width("32.0 GT/s PCIe\n", "", "", "");
  EXPECT_EQ(no_width.Read().gen, 0u);
  EXPECT_EQ(no_width.Read().width, 0u);
  Tree unknown("Unknown\n", "16\n", "", "");
  EXPECT_EQ(unknown.Read().gen, 0u);
  Tree wide("32.0 GT/s PCIe\n", "64\n", "", "");
  EXPECT_EQ(wide.Read().width, 0u);
}

TEST(PcieLink, SpeedsAreGenerations) {
  EXPECT_EQ(PcieGenOfSpeed("2.5 GT/s PCIe"), 1u);
  EXPECT_EQ(PcieGenOfSpeed("5.0 GT/s PCIe"), 2u);
  EXPECT_EQ(PcieGenOfSpeed("8.0 GT/s PCIe"), 3u);
  EXPECT_EQ(PcieGenOfSpeed("16.0 GT/s PCIe"), 4u);
  EXPECT_EQ(PcieGenOfSpeed("32.0 GT/s PCIe"), 5u);
  EXPECT_EQ(PcieGenOfSpeed("64.0 GT/s PCIe"), 6u);
  EXPECT_EQ(PcieGenOfSpeed("32.0"), 0u);
  EXPECT_EQ(PcieGenOfSpeed("12.0 GT/s PCIe"), 0u);
  EXPECT_EQ(PcieGenOfSpeed(""), 0u);
}

}  // namespace
}  // namespace aon
