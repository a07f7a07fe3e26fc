// A Reshape as the frontend lowers it, for the lowering tests of both schedules: r[10, 12] reads
// x[2, 5, 4, 3] at its own flat position unravelled over x's axes (floordiv / floormod by 60, 12, 3).
#pragma once
#include "scheduler/te/compute.h"

namespace kiln::testing {

inline te::TensorRef unravelled_reshape() {
  te::TensorRef x = te::placeholder("x", DType::Float32, {2, 5, 4, 3});
  return te::compute("r", "injective", DType::Float32, {10, 12}, [&](const std::vector<te::Expr>& i) {
    const te::Expr flat = i[0] * te::int_imm(12) + i[1];
    return te::at(x, {te::floordiv(flat, te::int_imm(60)), te::floormod(te::floordiv(flat, te::int_imm(12)), te::int_imm(5)),
                      te::floormod(te::floordiv(flat, te::int_imm(3)), te::int_imm(4)), te::floormod(flat, te::int_imm(3))});
  });
}

}  // namespace kiln::testing
