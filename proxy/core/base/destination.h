// The address a redirected connection was going to (its original
// destination) and CIDR blocks to match it against. Pure: parsing and
// comparison of address bytes, no sockets.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace onelayer {

// An IPv4 or IPv6 address with a port. IPv4 uses the first 4 bytes.
struct Destination {
  uint8_t family = 0;  // 4 or 6; 0: none
  std::array<uint8_t, 16> addr{};
  uint16_t port = 0;

  bool empty() const { return family == 0; }
  // "10.0.0.1" / "fd00::1", without port or brackets.
  std::string ip() const;
  // "10.0.0.1:8080" / "[fd00::1]:8080".
  std::string to_string() const;
  bool operator==(const Destination&) const = default;
};

// An IP literal (no brackets) and a port; nullopt when `ip` is not one.
std::optional<Destination> parse_destination(std::string_view ip, uint16_t port);

// "10.0.0.0/8", "fd00::/8"; a bare address is a /32 (/128).
struct Cidr {
  uint8_t family = 0;
  std::array<uint8_t, 16> addr{};  // host bits cleared
  uint8_t prefix = 0;

  bool contains(const Destination& d) const;
  std::string to_string() const;
  bool operator==(const Cidr&) const = default;
};

// nullopt with `*why` set when `text` is not a CIDR block.
std::optional<Cidr> parse_cidr(std::string_view text, std::string* why);

}  // namespace onelayer
