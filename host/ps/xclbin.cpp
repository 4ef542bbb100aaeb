#include "xclbin.h"

#include "afpga_abi.h"  // generated from codegen/abi.py: AFPGA_CTYPES, AFPGA_KIND_*

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace aten_fpga::xclbin {
namespace {

// From xclbin.h's layout: struct axlf is 496 bytes, its section headers start at byte 456.
constexpr size_t kHeaderBytes = 456;
constexpr size_t kSectionHeaderBytes = 40;
constexpr size_t kNumSectionsAt = 304 + 144;  // m_header.m_numSections
constexpr size_t kVbnvAt = 304 + 48;          // m_header.m_platformVBNV[64]
constexpr uint32_t kEmbeddedMetadata = 2, kMemTopology = 6, kIpLayout = 8, kUserMetadata = 16;
constexpr uint32_t kIpKernel = 1;
// A member table's first line is this and its version; a USER_METADATA section of another tool is not one.
constexpr const char* kMembersMagic = "aten_fpga engines ";
constexpr const char* kMembersVersion = "1";

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("'" + path + "' is not a usable xclbin: " + what +
                           ". Rebuild it with `scons` (docs/building.md).");
}

template <typename T>
T load(const std::string& data, size_t at, const std::string& path) {
  if (at + sizeof(T) > data.size()) fail(path, "it is truncated");
  T v;
  std::memcpy(&v, data.data() + at, sizeof(T));
  return v;
}

std::string fixed_string(const std::string& data, size_t at, size_t n, const std::string& path) {
  if (at + n > data.size()) fail(path, "it is truncated");
  const char* p = data.data() + at;
  return std::string(p, strnlen(p, n));
}

// One XML start or empty-element tag and its attributes (end tags carry only the name).
struct Tag {
  std::string name;
  std::map<std::string, std::string> attrs;
  bool end = false;
};

std::string unescape(const std::string& s) {
  static const std::pair<const char*, char> entities[] = {
      {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}, {"&amp;", '&'}};
  std::string out;
  for (size_t i = 0; i < s.size();) {
    bool matched = false;
    for (const auto& [entity, c] : entities) {
      size_t n = std::strlen(entity);
      if (s.compare(i, n, entity) == 0) {
        out += c;
        i += n;
        matched = true;
        break;
      }
    }
    if (!matched) out += s[i++];
  }
  return out;
}

// The tags of a document in order. Enough XML for metadata: elements, attributes in single or
// double quotes, entities; the declaration, comments and text are skipped.
std::vector<Tag> tags(const std::string& xml, const std::string& path) {
  std::vector<Tag> out;
  size_t i = 0;
  while ((i = xml.find('<', i)) != std::string::npos) {
    if (xml.compare(i, 4, "<!--") == 0) {
      i = xml.find("-->", i);
      if (i == std::string::npos) fail(path, "its metadata has an unterminated comment");
      continue;
    }
    size_t close = xml.find('>', i);
    if (close == std::string::npos) fail(path, "its metadata has an unterminated tag");
    if (xml[i + 1] == '?' || xml[i + 1] == '!') {
      i = close + 1;
      continue;
    }
    Tag t;
    size_t p = i + 1;
    if (xml[p] == '/') {
      t.end = true;
      ++p;
    }
    auto is_name = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':' || c == '.'; };
    while (p < close && is_name(xml[p])) t.name += xml[p++];
    while (p < close) {
      while (p < close && std::isspace(static_cast<unsigned char>(xml[p]))) ++p;
      std::string key;
      while (p < close && is_name(xml[p])) key += xml[p++];
      if (key.empty()) break;  // "/" of an empty element
      while (p < close && std::isspace(static_cast<unsigned char>(xml[p]))) ++p;
      if (p >= close || xml[p] != '=') fail(path, "its metadata has attribute '" + key + "' without a value");
      ++p;
      while (p < close && std::isspace(static_cast<unsigned char>(xml[p]))) ++p;
      char quote = xml[p];
      size_t end = xml.find(quote, p + 1);  // a quoted value may contain '>': re-find the tag's end
      if ((quote != '"' && quote != '\'') || end == std::string::npos) fail(path, "its metadata has a malformed attribute");
      t.attrs[key] = unescape(xml.substr(p + 1, end - p - 1));
      p = end + 1;
      if (p > close) close = xml.find('>', p);
      if (close == std::string::npos) fail(path, "its metadata has an unterminated tag");
    }
    out.push_back(std::move(t));
    i = close + 1;
  }
  return out;
}

unsigned long long number(const std::map<std::string, std::string>& attrs, const char* key,
                          const std::string& path) {
  auto it = attrs.find(key);
  if (it == attrs.end() || it->second.empty()) return 0;
  try {
    return std::stoull(it->second, nullptr, 0);
  } catch (const std::exception&) {
    fail(path, std::string("its metadata attribute ") + key + "=\"" + it->second + "\" is not a number");
  }
}

std::string attr(const Tag& t, const char* key) {
  auto it = t.attrs.find(key);
  return it == t.attrs.end() ? std::string() : it->second;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

const Arg* find_arg(const Kernel& k, const std::string& name) {
  auto it = std::find_if(k.args.begin(), k.args.end(), [&](const Arg& a) { return a.name == name; });
  return it == k.args.end() ? nullptr : &*it;
}

std::string arg_list(const Kernel& k) {
  std::string out;
  for (const Arg& a : k.args) out += (out.empty() ? "" : ", ") + a.name;
  return out;
}

// The member table `text` (its first line starts with kMembersMagic) into image.engines and
// image.members, checked against the image's kernels.
void read_members(const std::string& text, Image& image, const std::string& path) {
  std::map<std::string, std::pair<const Kernel*, std::string>> engines;  // declared so far: kernel, opcode argument
  std::map<std::string, std::map<uint32_t, std::string>> opcodes;  // engine -> opcode -> member
  std::set<std::string> members;
  size_t number = 0;
  for (size_t at = 0; at <= text.size();) {
    size_t end = std::min(text.find('\n', at), text.size());
    std::string line = text.substr(at, end - at);
    at = end + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto bad = [&](const std::string& what) {
      fail(path, "its member table (USER_METADATA), line " + std::to_string(number) + ", has " + what);
    };
    const std::vector<std::string> w = words(line);
    if (number == 1) {
      if (w.size() != 3 || w[2] != kMembersVersion)
        bad("\"" + line + "\": this host reads version " + kMembersVersion + " (\"" + kMembersMagic + kMembersVersion +
            "\"); rebuild the host and the image from one checkout");
      continue;
    }
    if (w.empty()) continue;
    if (w[0] == "engine") {
      if (w.size() != 3) bad("\"" + line + "\", not `engine <engine kernel> <its opcode argument>`");
      auto k = std::find_if(image.kernels.begin(), image.kernels.end(), [&](const Kernel& k) { return k.name == w[1]; });
      if (k == image.kernels.end()) bad("engine " + w[1] + ", which is not a kernel of the image (its metadata lacks it)");
      if (engines.count(w[1])) bad("engine " + w[1] + " a second time");
      const Arg* op = find_arg(*k, w[2]);
      if (op == nullptr) bad("engine " + w[1] + " with opcode argument " + w[2] + ", which it lacks (it has " + arg_list(*k) + ")");
      if (op->is_pointer) bad("engine " + w[1] + " with opcode argument " + w[2] + ", a buffer: the opcode is a scalar");
      engines[w[1]] = {&*k, w[2]};
      image.engines.push_back({w[1], w[2]});
    } else if (w[0] == "member") {
      if (w.size() < 4) bad("\"" + line + "\", not `member <member> <engine> <opcode> <member arg>=<engine arg> ...`");
      Member m{w[1], w[2], 0, {}};
      const std::string who = "member " + m.name;
      if (members.count(m.name)) bad(who + " a second time");
      if (engines.count(m.name)) bad(who + ", which is an engine's name");
      auto e = engines.find(m.engine);
      if (e == engines.end()) bad(who + " of engine " + m.engine + ", which no engine line above declares");
      const Kernel& engine = *e->second.first;
      const std::string& opcode_arg = e->second.second;
      unsigned long long opcode = 0;
      size_t used = 0;
      try {
        opcode = std::stoull(w[3], &used, 10);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != w[3].size() || w[3][0] == '-' || opcode > UINT32_MAX)
        bad(who + " with opcode " + w[3] + ", not a number from 0 to " + std::to_string(UINT32_MAX));
      m.opcode = static_cast<uint32_t>(opcode);
      auto [taken, fresh] = opcodes[m.engine].emplace(m.opcode, m.name);
      if (!fresh) bad(who + " with opcode " + w[3] + " of engine " + m.engine + ", which is member " + taken->second + "'s");
      std::set<std::string> mapped, named;
      bool passes_buffer = false;
      for (size_t i = 4; i < w.size(); ++i) {
        const size_t eq = w[i].find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == w[i].size())
          bad(who + " with argument \"" + w[i] + "\", not <member arg>=<engine arg>");
        std::string arg = w[i].substr(0, eq), to = w[i].substr(eq + 1);
        const Arg* target = find_arg(engine, to);
        if (target == nullptr)
          bad(who + " with argument " + arg + " in " + to + ", which engine " + m.engine + " lacks (it has " + arg_list(engine) + ")");
        if (to == opcode_arg) bad(who + " with argument " + arg + " in " + to + ", the engine's opcode argument");
        if (!named.insert(arg).second) bad(who + " with argument " + arg + " twice");
        if (!mapped.insert(to).second) bad(who + " with two arguments in engine argument " + to);
        passes_buffer = passes_buffer || target->is_pointer;
        m.args.emplace_back(std::move(arg), std::move(to));
      }
      // An engine buffer the member does not use still needs a buffer (XRT refuses a run without
      // one): the device passes one of the member's.
      const bool engine_has_buffer = std::any_of(engine.args.begin(), engine.args.end(), [](const Arg& a) { return a.is_pointer; });
      if (engine_has_buffer && !passes_buffer)
        bad(who + ", which passes no buffer to engine " + m.engine + ": the device needs one for the engine's unused buffers");
      members.insert(m.name);
      image.members.push_back(std::move(m));
    } else {
      bad("\"" + w[0] + "\" where `engine` or `member` belongs");
    }
  }
}

}  // namespace

Image read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open xclbin '" + path + "'. Build it with `scons` (docs/building.md).");
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (data.size() < kHeaderBytes || data.compare(0, 8, std::string("xclbin2\0", 8)) != 0)
    fail(path, "it lacks the \"xclbin2\" magic");

  Image image;
  image.platform = fixed_string(data, kVbnvAt, 64, path);
  const uint32_t count = load<uint32_t>(data, kNumSectionsAt, path);
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> sections;  // first of each kind
  std::vector<std::string> member_tables;
  for (uint32_t s = 0; s < count; ++s) {
    const size_t h = kHeaderBytes + s * kSectionHeaderBytes;
    const auto kind = load<uint32_t>(data, h, path);
    const auto offset = load<uint64_t>(data, h + 24, path), size = load<uint64_t>(data, h + 32, path);
    if (offset > data.size() || size > data.size() - offset) fail(path, "a section lies past its end");
    sections.emplace(kind, std::make_pair(offset, size));
    if (kind == kUserMetadata && data.compare(offset, std::min<uint64_t>(size, std::strlen(kMembersMagic)), kMembersMagic) == 0)
      member_tables.push_back(data.substr(offset, size));
  }
  for (uint32_t kind : {kEmbeddedMetadata, kIpLayout})
    if (!sections.count(kind))
      fail(path, kind == kIpLayout ? "it has no IP_LAYOUT section" : "it has no EMBEDDED_METADATA section");

  // Kernels and their arguments, from the metadata v++ embeds.
  const auto [xml_at, xml_size] = sections[kEmbeddedMetadata];
  std::map<std::string, int> port_width;
  Kernel* kernel = nullptr;
  for (const Tag& t : tags(data.substr(xml_at, xml_size), path)) {
    if (t.name == "kernel" && !t.end) {
      image.kernels.push_back({attr(t, "name"), {}, {}});
      kernel = &image.kernels.back();
      port_width.clear();
    } else if (t.name == "kernel") {
      std::sort(kernel->args.begin(), kernel->args.end(), [](const Arg& a, const Arg& b) { return a.index < b.index; });
      for (Arg& a : kernel->args) a.port_width = port_width.count(a.port) ? port_width[a.port] : 0;
      kernel = nullptr;
    } else if (kernel && t.name == "port" && !t.end) {
      port_width[attr(t, "name")] = static_cast<int>(number(t.attrs, "dataWidth", path));
    } else if (kernel && t.name == "arg" && !t.end) {
      Arg a;
      a.name = attr(t, "name");
      a.index = static_cast<int>(number(t.attrs, "id", path));
      a.is_pointer = number(t.attrs, "addressQualifier", path) == 1;
      a.port = attr(t, "port");
      a.size = number(t.attrs, "size", path);
      a.type = attr(t, "type");
      kernel->args.push_back(std::move(a));
    } else if (t.name == "emulation" && !t.end) {
      image.emulation_image = attr(t, "image");
    }
  }
  if (kernel) fail(path, "its metadata leaves kernel '" + kernel->name + "' unclosed");

  // Compute units: IP_LAYOUT's kernel IPs, named "kernel:cu", as XRT finds them.
  const size_t ips = sections[kIpLayout].first;
  const auto n_ips = load<int32_t>(data, ips, path);
  for (int32_t i = 0; i < n_ips; ++i) {
    const size_t at = ips + 8 + static_cast<size_t>(i) * 80;
    if (load<uint32_t>(data, at, path) != kIpKernel) continue;
    const std::string name = fixed_string(data, at + 16, 64, path);
    const size_t colon = name.find(':');
    auto k = std::find_if(image.kernels.begin(), image.kernels.end(),
                          [&](const Kernel& k) { return k.name == name.substr(0, colon); });
    if (k == image.kernels.end()) fail(path, "IP_LAYOUT names compute unit '" + name + "' of a kernel its metadata lacks");
    k->cus.push_back(colon == std::string::npos ? name : name.substr(colon + 1));
  }

  if (sections.count(kMemTopology)) {
    const size_t mems = sections[kMemTopology].first;
    const auto n_mems = load<int32_t>(data, mems, path);
    for (int32_t i = 0; i < n_mems; ++i) {
      const size_t at = mems + 8 + static_cast<size_t>(i) * 40;
      image.memories.push_back({fixed_string(data, at + 24, 16, path), load<uint8_t>(data, at + 1, path) != 0});
    }
  }

  if (member_tables.size() > 1)
    fail(path, "it has " + std::to_string(member_tables.size()) + " member tables (USER_METADATA sections starting \"" +
                   kMembersMagic + "\")");
  if (!member_tables.empty()) read_members(member_tables[0], image, path);
  return image;
}

namespace {

// `type` without spaces, a pointer's `*` and `const`, and an hls::vector's lane count: the C type
// of one value ("hls::vector<float, 16>*" -> "float"). `pointer` says whether it was a port.
std::string element_type(const std::string& type, bool* pointer) {
  std::string t;
  for (char c : type)
    if (!std::isspace(static_cast<unsigned char>(c))) t += c;
  *pointer = !t.empty() && t.back() == '*';
  if (*pointer) t.pop_back();
  if (t.rfind("const", 0) == 0) t = t.substr(5);
  if (t.rfind("hls::vector<", 0) == 0) t = t.substr(12, t.rfind(',') - 12);
  return t;
}

struct CType {
  const char* name;
  char kind;
  int bytes;
};

// The ABI table's C types (codegen/abi.py, through the generated afpga_abi.h).
const CType* find_ctype(const std::string& t) {
#define AFPGA_CTYPE_ROW(name, kind, bytes) {name, kind, bytes},
  static const CType table[] = {AFPGA_CTYPES(AFPGA_CTYPE_ROW)};
#undef AFPGA_CTYPE_ROW
  for (const CType& c : table) {
    std::string name;
    for (const char* p = c.name; *p; ++p)
      if (*p != ' ') name += *p;
    if (name == t) return &c;
  }
  return nullptr;
}

}  // namespace

char encoding(const std::string& type) {
  bool pointer = false;
  const std::string t = element_type(type, &pointer);
  if (const CType* c = find_ctype(t)) return c->kind;
  if (t.rfind("ap_uint<", 0) == 0) return AFPGA_KIND_UNSIGNED;
  if (t.rfind("ap_int<", 0) == 0) return AFPGA_KIND_SIGNED;
  throw std::runtime_error("kernel argument type '" + type + "' has no known host encoding; "
                           "add it to CTYPES in codegen/abi.py");
}

int word_bytes(const Arg& a) {
  bool pointer = false;
  const CType* c = find_ctype(element_type(a.type, &pointer));
  if (c == nullptr) return a.port_width / 8;
  std::string t;
  for (char ch : a.type)
    if (!std::isspace(static_cast<unsigned char>(ch))) t += ch;
  const size_t comma = t.rfind(',');
  const int lanes = t.find("hls::vector<") != std::string::npos && comma != std::string::npos
                        ? std::stoi(t.substr(comma + 1)) : 1;
  return c->bytes * lanes;
}

int element_bytes(const std::string& type) {
  bool pointer = false;
  const CType* c = find_ctype(element_type(type, &pointer));
  if (c == nullptr) {
    throw std::runtime_error("kernel port type '" + type + "' has no known element size; "
                             "add it to CTYPES in codegen/abi.py");
  }
  return c->bytes;
}

}  // namespace aten_fpga::xclbin
