#include "collectives/algorithms/group.h"

#include <cctype>
#include <functional>
#include <optional>

namespace hoop::collectives {
namespace {

constexpr std::string_view kRank = "rank ";
constexpr std::string_view kJob = "job ";
constexpr std::string_view kMark = " [";

/// `text` with each unmarked "rank N" replaced by `rewrite(N)` (nullopt: left as it is).
std::string rewrite_ranks(std::string_view text,
                          const std::function<std::optional<std::string>(long)>& rewrite) {
  std::string out;
  out.reserve(text.size() + 32);
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t found = text.find(kRank, at);
    if (found == std::string_view::npos) break;
    std::size_t end = found + kRank.size();
    std::size_t digits = end;
    while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])) != 0)
      ++digits;
    const bool word_start =
        found == 0 || std::isalnum(static_cast<unsigned char>(text[found - 1])) == 0;
    const bool after_job = found >= kJob.size() && text.substr(found - kJob.size(), kJob.size()) == kJob;
    const bool number = digits > end && digits - end <= 9 &&
                        (digits == text.size() ||
                         std::isalnum(static_cast<unsigned char>(text[digits])) == 0);
    const bool marked = text.substr(digits, kMark.size()) == kMark;
    std::optional<std::string> replacement;
    if (word_start && !after_job && number && !marked)
      replacement = rewrite(std::stol(std::string(text.substr(end, digits - end))));
    if (replacement) {
      out.append(text.substr(at, found - at));
      out += *replacement;
      at = digits;
    } else {
      out.append(text.substr(at, end - at));
      at = end;
    }
  }
  out.append(text.substr(at));
  return out;
}

}  // namespace

std::string to_group_numbering(std::string_view text, const std::vector<int>& members) {
  return rewrite_ranks(text, [&](long job_rank) -> std::optional<std::string> {
    const auto it = std::find(members.begin(), members.end(), job_rank);
    if (it == members.end()) return "job rank " + std::to_string(job_rank);
    return "rank " + std::to_string(it - members.begin()) + " [job rank " +
           std::to_string(job_rank) + "]";
  });
}

std::string mark_group_numbering(std::string_view text, const std::vector<int>& members) {
  return rewrite_ranks(text, [&](long group_rank) -> std::optional<std::string> {
    if (group_rank < 0 || group_rank >= static_cast<long>(members.size())) return std::nullopt;
    return "rank " + std::to_string(group_rank) + " [job rank " +
           std::to_string(members[static_cast<std::size_t>(group_rank)]) + "]";
  });
}

}  // namespace hoop::collectives
