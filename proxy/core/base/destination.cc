#include "core/base/destination.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace onelayer {

std::string Destination::ip() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (family == 4) {
    inet_ntop(AF_INET, addr.data(), buf, sizeof buf);
  } else if (family == 6) {
    inet_ntop(AF_INET6, addr.data(), buf, sizeof buf);
  }
  return buf;
}

std::string Destination::to_string() const {
  std::string s = family == 6 ? "[" + ip() + "]" : ip();
  s += ':';
  s += std::to_string(port);
  return s;
}

std::optional<Destination> parse_destination(std::string_view ip, uint16_t port) {
  if (ip.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  char text[INET6_ADDRSTRLEN] = {0};
  std::memcpy(text, ip.data(), ip.size());
  Destination d;
  d.port = port;
  if (inet_pton(AF_INET, text, d.addr.data()) == 1) {
    d.family = 4;
  } else if (inet_pton(AF_INET6, text, d.addr.data()) == 1) {
    d.family = 6;
  } else {
    return std::nullopt;
  }
  return d;
}

bool Cidr::contains(const Destination& d) const {
  if (d.family != family) return false;
  for (unsigned bit = 0; bit < prefix; bit += 8) {
    unsigned i = bit / 8;
    unsigned bits = prefix - bit >= 8 ? 8 : prefix - bit;
    auto mask = static_cast<uint8_t>(0xff << (8 - bits));
    if ((d.addr[i] & mask) != addr[i]) return false;
  }
  return true;
}

std::string Cidr::to_string() const {
  Destination d;
  d.family = family;
  d.addr = addr;
  return d.ip() + "/" + std::to_string(prefix);
}

std::optional<Cidr> parse_cidr(std::string_view text, std::string* why) {
  size_t slash = text.find('/');
  std::optional<Destination> d = parse_destination(text.substr(0, slash), 0);
  if (!d) {
    *why = "must be an IPv4 or IPv6 address or CIDR block (10.0.0.0/8, fd00::/8)";
    return std::nullopt;
  }
  Cidr c;
  c.family = d->family;
  const unsigned max = d->family == 4 ? 32 : 128;
  unsigned prefix = max;
  if (slash != std::string_view::npos) {
    std::string_view p = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), prefix);
    if (p.empty() || ec != std::errc() || end != p.data() + p.size() || prefix > max) {
      *why = "prefix length must be 0.." + std::to_string(max);
      return std::nullopt;
    }
  }
  c.prefix = static_cast<uint8_t>(prefix);
  for (unsigned i = 0; i < 16; ++i) {
    unsigned bit = i * 8;
    if (bit >= prefix) {
      c.addr[i] = 0;
    } else {
      unsigned bits = prefix - bit >= 8 ? 8 : prefix - bit;
      c.addr[i] = static_cast<uint8_t>(d->addr[i] & (0xff << (8 - bits)));
    }
  }
  if (c.addr != d->addr) {
    *why = "has bits set past the prefix length (" + c.to_string() + "?)";
    return std::nullopt;
  }
  return c;
}

}  // namespace onelayer
