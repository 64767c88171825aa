#include "ptx_budgets.h"

#include "schedules/register_budget.h"

namespace fsattn {

// An entry is `.entry NAME(PARAMS)` followed by its body in braces; a performance directive
// such as .maxnreg goes between the two (PTX ISA, "Performance-Tuning Directives").
std::string with_wide_budgets(const std::string &ptx, int registers) {
  const std::string entry = ".entry ";
  std::string out;
  out.reserve(ptx.size() + 256);
  size_t done = 0;
  for (size_t at = ptx.find(entry); at != std::string::npos; at = ptx.find(entry, at + entry.size())) {
    const size_t name_end = ptx.find('(', at);
    if (name_end == std::string::npos) break;
    const std::string name = ptx.substr(at + entry.size(), name_end - at - entry.size());
    const int budget = name.find(kLargeKernel) != std::string::npos  ? kLargeRegisters
                       : name.find(kWideKernel) != std::string::npos ? registers
                                                                     : 0;
    if (budget == 0) continue;
    const size_t body = ptx.find("\n{", name_end);
    if (body == std::string::npos) break;
    out.append(ptx, done, body - done).append("\n.maxnreg " + std::to_string(budget));
    done = body;
  }
  return out.append(ptx, done, std::string::npos);
}

}  // namespace fsattn
