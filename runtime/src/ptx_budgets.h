// Register budgets per kernel in a pipeline's PTX, before the driver compiles it.
#pragma once

#include <string>

namespace fsattn {

// `ptx` with a `.maxnreg registers` directive on each entry whose name marks it wide
// (kWideKernel, schedules/register_budget.h), and `.maxnreg kLargeRegisters` on each whose
// name marks it large (kLargeKernel): the driver compiles those kernels with at most that
// many registers a thread and every other with its module-wide budget. PTX without such
// entries comes back unchanged.
std::string with_wide_budgets(const std::string &ptx, int registers);

}  // namespace fsattn
