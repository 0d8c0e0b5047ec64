// Status / StatusOr and the helper macros.
#include "aon/base/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>

namespace aon {
namespace {

Status FailsWith(StatusCode code) { return Status(code, "inner"); }

Status UsesReturnIfError(StatusCode code, bool* reached_end) {
  AON_RETURN_IF_ERROR(FailsWith(code));
  *reached_end = true;
  return Status::Ok();
}

StatusOr<std::unique_ptr<int>> MakeInt(bool ok) {
  if (!ok) return NotFound("no int");
  return std::make_unique<int>(7);
}

StatusOr<int> UsesAssignOrReturn(bool ok) {
  AON_ASSIGN_OR_RETURN(std::unique_ptr<int> p, MakeInt(ok));
  return *p + 1;
}

TEST(CommonStatus, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok().ToString(), "OK");
  Status s = DataLoss("file 'x' is cut");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.ToString(), "data loss: file 'x' is cut");
  Status c = s.WithContext("while merging rank 3");
  EXPECT_EQ(c.code(), StatusCode::kDataLoss);
  EXPECT_EQ(c.message(), "while merging rank 3: file 'x' is cut");
  EXPECT_TRUE(Status::Ok().WithContext("ignored").ok());
  EXPECT_EQ(Status::Ok().WithContext("ignored").message(), "");
}

TEST(CommonStatus, ErrnoCodes) {
  EXPECT_EQ(ErrnoStatus("open 'a'", ENOENT).code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus("open 'a'", ENOTDIR).code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus("open 'a'", EACCES).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus("open 'a'", EROFS).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus("open 'a'", EINVAL).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrnoStatus("open 'a'", ENOSPC).code(), StatusCode::kIoError);
  const Status s = ErrnoStatus("open 'a'", ENOENT);
  EXPECT_EQ(s.message().rfind("open 'a': ", 0), 0u) << s.message();
  EXPECT_GT(s.message().size(), std::string("open 'a': ").size());
}

TEST(CommonStatus, Macros) {
  bool reached = false;
  EXPECT_EQ(UsesReturnIfError(StatusCode::kIoError, &reached).code(), StatusCode::kIoError);
  EXPECT_FALSE(reached);
  EXPECT_TRUE(UsesReturnIfError(StatusCode::kOk, &reached).ok());
  EXPECT_TRUE(reached);
  auto v = UsesAssignOrReturn(true);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 8);
  auto e = UsesAssignOrReturn(false);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
}

TEST(CommonStatus, StatusOrFromOkStatusIsAnError) {
  StatusOr<int> v{Status::Ok()};
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInternal);
}

TEST(CommonStatus, CodeNames) {
  EXPECT_STREQ(StatusCodeName(StatusCode::kUnimplemented), "unsupported");
  EXPECT_STREQ(StatusCodeName(StatusCode::kNotFound), "not found");
  EXPECT_STREQ(StatusCodeName(static_cast<StatusCode>(99)), "unknown");
}

}  // namespace
}  // namespace aon
