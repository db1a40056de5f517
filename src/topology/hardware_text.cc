// The text form of HostHardware that ranks exchange through the store. One field per line, in
// a fixed order, closed by "end" so that a truncated value is refused rather than read short:
//
//   hoop-hardware 1
//   hostname node7
//   packages 2
//   numa_nodes 2
//   cores 64
//   pus 128
//   usable_pus 16
//   device nic 0000:3b:00.0 0 ens1f0/mlx5_0      (kind, bus id or "-", NUMA node, name)
//   rdma 1                                       (only where an RDMA device is present)
//   end
//
// The text comes from other ranks, so decode checks everything and never trusts a count.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>

#include "topology/topology.h"

namespace hoop::topology {
namespace {

constexpr std::string_view kHeader = "hoop-hardware 1";
// Far above any real machine; bounds what a corrupted value can make decode allocate.
constexpr int kMaxCount = 1 << 24;
constexpr std::size_t kMaxDevices = 4096;

// Names come from the OS; a newline in one must not split a record.
std::string one_line(std::string_view s) {
  std::string out(s);
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c == '\n' || c == '\r'; }, '?');
  return out;
}

class Decoder {
 public:
  explicit Decoder(std::string_view text) : rest_(text) {}

  Status error(std::string_view what) const {
    return invalid_argument(fmt::format("hardware description, line {}: {}", line_no_, what));
  }

  // The next line; an error at the end of the text.
  Result<std::string_view> line() {
    if (rest_.empty()) return error("ends early (truncated?)");
    ++line_no_;
    const std::size_t nl = rest_.find('\n');
    std::string_view l = rest_.substr(0, nl);
    rest_ = nl == std::string_view::npos ? std::string_view() : rest_.substr(nl + 1);
    return l;
  }

  // A line "<key> <value>"; returns the value (possibly empty).
  Result<std::string_view> field(std::string_view key) {
    HOOP_ASSIGN_OR_RETURN(std::string_view l, line());
    if (!l.starts_with(key) || l.size() <= key.size() || l[key.size()] != ' ')
      return error(fmt::format("expected '{} ...'", key));
    return l.substr(key.size() + 1);
  }

  Result<int> integer(std::string_view text, std::string_view what, int min) const {
    int v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < min ||
        v > kMaxCount)
      return error(
          fmt::format("{} '{}' is not an integer in [{}, {}]", what, text, min, kMaxCount));
    return v;
  }

  Result<int> count(std::string_view key) {
    HOOP_ASSIGN_OR_RETURN(std::string_view v, field(key));
    return integer(v, key, 0);
  }

  Result<PciDevice> device(std::string_view rest) {
    PciDevice dev;
    std::string_view parts[3];
    for (auto& part : parts) {
      const std::size_t sp = rest.find(' ');
      if (sp == std::string_view::npos) return error("device: expected kind, bus id, NUMA, name");
      part = rest.substr(0, sp);
      rest.remove_prefix(sp + 1);
    }
    if (parts[0] != "gpu" && parts[0] != "nic")
      return error(fmt::format("device kind '{}' is neither gpu nor nic", parts[0]));
    if (parts[1].empty()) return error("device: empty bus id");
    if (rest.empty()) return error("device: empty name");
    dev.kind = std::string(parts[0]);
    dev.bus_id = parts[1] == "-" ? "" : std::string(parts[1]);
    HOOP_ASSIGN_OR_RETURN(dev.numa_node, integer(parts[2], "device NUMA node", -1));
    dev.name = std::string(rest);
    return dev;
  }

  bool at_end() const { return rest_.empty(); }

 private:
  std::string_view rest_;
  int line_no_ = 0;
};

}  // namespace

std::string encode_hardware(const HostHardware& hw) {
  std::string out = fmt::format(
      "{}\nhostname {}\npackages {}\nnuma_nodes {}\ncores {}\npus {}\nusable_pus {}\n", kHeader,
      one_line(hw.hostname), hw.packages, hw.numa_nodes, hw.cores, hw.pus, hw.usable_pus);
  for (const PciDevice& d : hw.devices) {
    // A space would shift the fields after it; bus ids never hold one, but be sure.
    std::string bus = d.bus_id.empty() ? "-" : one_line(d.bus_id);
    std::replace(bus.begin(), bus.end(), ' ', '_');
    out += fmt::format("device {} {} {} {}\n", d.kind, bus, d.numa_node,
                       d.name.empty() ? "?" : one_line(d.name));
  }
  if (hw.rdma) out += "rdma 1\n";
  out += "end\n";
  return out;
}

Result<HostHardware> decode_hardware(std::string_view text) {
  Decoder in(text);
  HOOP_ASSIGN_OR_RETURN(std::string_view header, in.line());
  if (header != kHeader)
    return in.error(fmt::format("expected '{}' (a hoop of another version?)", kHeader));
  HostHardware hw;
  HOOP_ASSIGN_OR_RETURN(std::string_view hostname, in.field("hostname"));
  hw.hostname = std::string(hostname);
  HOOP_ASSIGN_OR_RETURN(hw.packages, in.count("packages"));
  HOOP_ASSIGN_OR_RETURN(hw.numa_nodes, in.count("numa_nodes"));
  HOOP_ASSIGN_OR_RETURN(hw.cores, in.count("cores"));
  HOOP_ASSIGN_OR_RETURN(hw.pus, in.count("pus"));
  HOOP_ASSIGN_OR_RETURN(hw.usable_pus, in.count("usable_pus"));
  if (hw.usable_pus > hw.pus)
    return in.error(fmt::format("usable_pus {} exceeds pus {}", hw.usable_pus, hw.pus));
  for (;;) {
    HOOP_ASSIGN_OR_RETURN(std::string_view l, in.line());
    if (l == "end") break;
    if (l == "rdma 1") {
      hw.rdma = true;
      continue;
    }
    if (!l.starts_with("device ")) return in.error("expected 'device ...', 'rdma 1' or 'end'");
    if (hw.devices.size() == kMaxDevices)
      return in.error(fmt::format("more than {} devices", kMaxDevices));
    HOOP_ASSIGN_OR_RETURN(PciDevice dev, in.device(l.substr(7)));
    hw.devices.push_back(std::move(dev));
  }
  if (!in.at_end()) return in.error("text after 'end'");
  return hw;
}

}  // namespace hoop::topology
