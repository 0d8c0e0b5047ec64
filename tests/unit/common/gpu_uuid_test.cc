#include "aon/base/gpu_uuid.h"

#include <gtest/gtest.h>

namespace aon {
namespace {

// NVML's and CUPTI's UUID text become the same 16 bytes, whatever the case of
// the hex digits and wherever the dashes are.
TEST(GpuUuid, TheGpuTextGivesItsSixteenBytes) {
  const GpuUuid u = GpuUuidFromText("GPU-0123abcd-4567-89ef-0011-223344556677");
  EXPECT_EQ(u.hi, 0x0123abcd456789efull);
  EXPECT_EQ(u.lo, 0x0011223344556677ull);
  EXPECT_EQ(GpuUuidFromText("GPU-0123ABCD456789EF-0011223344556677"), u);
}

// CUDA's 16 bytes (CUPTI's device records) are written as NVML writes them, so the
// text read back is the same UUID.
TEST(GpuUuid, SixteenBytesAreWrittenAsNvmlWritesThem) {
  const unsigned char bytes[16] = {0x01, 0x23, 0xab, 0xcd, 0x45, 0x67, 0x89, 0xef,
                                   0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77};
  EXPECT_EQ(GpuUuidText(bytes), "GPU-0123abcd-4567-89ef-0011-223344556677");
  const GpuUuid u = GpuUuidFromText(GpuUuidText(bytes));
  EXPECT_EQ(u.hi, 0x0123abcd456789efull);
  EXPECT_EQ(u.lo, 0x0011223344556677ull);
}

// Anything else (MIG instances, the synthetic GPU, a cut or bad text) is hashed
// whole: equal texts match, different ones do not, and none is taken for the
// bytes of a real GPU's UUID.
TEST(GpuUuid, OtherTextsAreHashedWhole) {
  const GpuUuid a = GpuUuidFromText("SYNTHETIC-n1-rank0");
  EXPECT_EQ(GpuUuidFromText("SYNTHETIC-n1-rank0"), a);
  EXPECT_NE(GpuUuidFromText("SYNTHETIC-n1-rank1"), a);
  const GpuUuid cut = GpuUuidFromText("GPU-0123abcd-4567");  // too short
  const GpuUuid bad = GpuUuidFromText("GPU-0123abcd-4567-89ef-0011-22334455667x");
  const GpuUuid real = GpuUuidFromText("GPU-0123abcd-4567-89ef-0011-223344556677");
  EXPECT_NE(cut, real);
  EXPECT_NE(bad, real);
  EXPECT_NE(cut.hi, 0x0123abcd4567ull);
}

}  // namespace
}  // namespace aon
