#include "xclbin.h"

#include "afpga_abi.h"  // generated from codegen/abi.py: AFPGA_CTYPES, AFPGA_KIND_*

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>

namespace aten_fpga::xclbin {
namespace {

// From xclbin.h's layout: struct axlf is 496 bytes, its section headers start at byte 456.
constexpr size_t kHeaderBytes = 456;
constexpr size_t kSectionHeaderBytes = 40;
constexpr size_t kNumSectionsAt = 304 + 144;  // m_header.m_numSections
constexpr size_t kVbnvAt = 304 + 48;          // m_header.m_platformVBNV[64]
constexpr uint32_t kEmbeddedMetadata = 2, kMemTopology = 6, kIpLayout = 8;
constexpr uint32_t kIpKernel = 1;

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
  for (uint32_t s = 0; s < count; ++s) {
    const size_t h = kHeaderBytes + s * kSectionHeaderBytes;
    const auto kind = load<uint32_t>(data, h, path);
    const auto offset = load<uint64_t>(data, h + 24, path), size = load<uint64_t>(data, h + 32, path);
    if (offset > data.size() || size > data.size() - offset) fail(path, "a section lies past its end");
    sections.emplace(kind, std::make_pair(offset, size));
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
