// examples/cli/text.hpp - how the treesync tool writes names: for a terminal or a log (display),
// and inside JSON strings (json_string).  Part of the treesync example CLI (examples/treesync.cpp).
#ifndef TREESYNC_CLI_TEXT_HPP
#define TREESYNC_CLI_TEXT_HPP

#include <treesync/treesync.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace treesync_cli {

/// Length of the well-formed UTF-8 sequence starting at s[i] (Unicode 15, table 3-7: no overlong
/// forms, no surrogates, nothing above U+10FFFF), or 0 when the byte there does not start one.
inline std::size_t utf8_sequence(std::string_view s, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) -> unsigned { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0x100u; };
  const auto in = [](unsigned b, unsigned lo, unsigned hi) { return b >= lo && b <= hi; };
  const unsigned b0 = byte(i);
  if (b0 < 0x80) return 1;
  if (in(b0, 0xc2, 0xdf)) return in(byte(i + 1), 0x80, 0xbf) ? 2 : 0;
  if (in(b0, 0xe0, 0xef)) {
    const unsigned lo = b0 == 0xe0 ? 0xa0 : 0x80;
    const unsigned hi = b0 == 0xed ? 0x9f : 0xbf;
    return in(byte(i + 1), lo, hi) && in(byte(i + 2), 0x80, 0xbf) ? 3 : 0;
  }
  if (in(b0, 0xf0, 0xf4)) {
    const unsigned lo = b0 == 0xf0 ? 0x90 : 0x80;
    const unsigned hi = b0 == 0xf4 ? 0x8f : 0xbf;
    return in(byte(i + 1), lo, hi) && in(byte(i + 2), 0x80, 0xbf) && in(byte(i + 3), 0x80, 0xbf) ? 4 : 0;
  }
  return 0;
}

/// The code point of a well-formed sequence of length n at s[i].
inline std::uint32_t utf8_decode(std::string_view s, std::size_t i, std::size_t n) noexcept {
  const auto b = [&](std::size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(s[i + k])); };
  switch (n) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1f) << 6) | (b(1) & 0x3f);
    case 3: return ((b(0) & 0x0f) << 12) | ((b(1) & 0x3f) << 6) | (b(2) & 0x3f);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3f) << 12) | ((b(2) & 0x3f) << 6) | (b(3) & 0x3f);
  }
}

inline bool valid_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

/// Characters that are valid UTF-8 but must not reach a terminal raw: C1 controls (U+0080-U+009F;
/// U+009B is a CSI on some terminals), line/paragraph separators and the bidirectional overrides
/// that can make a name display as another ("Trojan Source").
inline bool unsafe_code_point(std::uint32_t cp) noexcept {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

/// A name for a terminal or a log: treesync::escape() (ASCII controls, DEL and '\' as \n, \t, \r,
/// \xNN, \\), then every byte of invalid UTF-8 and of the unsafe_code_point() characters as \xNN.
/// The result is one line of printable text, and distinct names give distinct results.
inline std::string display(std::string_view name) {
  static constexpr char hex[] = "0123456789abcdef";
  const std::string escaped = treesync::escape(name);
  std::string out;
  out.reserve(escaped.size());
  const std::string_view s(escaped);
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (n == 1) {
      out += s[i++];
      continue;
    }
    const bool raw = n != 0 && !unsafe_code_point(utf8_decode(s, i, n));
    const std::size_t len = n == 0 ? 1 : n;
    for (std::size_t k = 0; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if (raw) {
        out += static_cast<char>(c);
      } else {
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 0xf];
      }
    }
    i += len;
  }
  return out;
}

/// `s` as a JSON string literal, quotes included (RFC 8259).  '"' and '\' are escaped; control
/// characters as \b \f \n \r \t or \u00XX; DEL, C1 controls, U+2028 and U+2029 as \uXXXX (legal
/// either way, but safe to paste into a terminal or JavaScript).  Well-formed UTF-8 is copied.
/// A byte that is not part of well-formed UTF-8 is written as \u00XX, its Latin-1 reading: every
/// JSON parser accepts that, but it is ambiguous (the byte 0xE9 and the character U+00E9 both read
/// back as "é"), so json_path() adds the exact bytes in hex next to any such string.
inline std::string json_string(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  const auto u = [&](std::uint32_t cp) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += hex[(cp >> shift) & 0xf];
  };
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) {
      u(static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    const std::uint32_t cp = utf8_decode(s, i, n);
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029)
          u(cp);
        else
          out.append(s.data() + i, n);
    }
    i += n;
  }
  out += '"';
  return out;
}

/// `"key":"value"` and, when value is not well-formed UTF-8, `,"key_hex":"<its bytes in hex>"`:
/// the lossless form for names that are not text.
inline std::string json_path(std::string_view key, std::string_view value) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = json_string(key) + ':' + json_string(value);
  if (!valid_utf8(value)) {
    out += ',';
    out += json_string(std::string(key) + "_hex");
    out += ":\"";
    for (char ch : value) {
      const auto c = static_cast<unsigned char>(ch);
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
    out += '"';
  }
  return out;
}

/// 1234567 -> "1.2 MiB"
inline std::string human_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  std::size_t u = 0;
  while (bytes >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", bytes, units[u]);
  return buf;
}

}  // namespace treesync_cli

#endif  // TREESYNC_CLI_TEXT_HPP
