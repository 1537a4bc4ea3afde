// Helpers shared by the unit tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "support/error.h"

// Expects `stmt` to throw cuvil::Error whose message contains `needle`.
#define EXPECT_CUVIL_ERROR(stmt, needle)                                                       \
  do {                                                                                         \
    try {                                                                                      \
      stmt;                                                                                    \
      ADD_FAILURE() << "expected a cuvil::Error containing '" << (needle) << "'";              \
    } catch (const ::cuvil::Error& e) {                                                        \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what(); \
    }                                                                                          \
  } while (0)
