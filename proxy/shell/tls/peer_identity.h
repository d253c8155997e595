// Who a TLS client is (docs/tls.md "Callers"): the identity read from the
// certificate it presented, once OpenSSL has verified that certificate
// against the listener's client_ca_file.
#pragma once

#include <openssl/ssl.h>

#include <string>

namespace onelayer {

// The first URI SAN (a SPIFFE ID such as spiffe://cluster/ns/orders/sa/web),
// else the first DNS SAN, else the subject's CN; "" when the peer sent no
// certificate, when it did not verify, or when none of these is a name of
// visible ASCII (an identity goes into headers and log lines as it is).
std::string verified_peer_identity(SSL* ssl);

// Whether `name` can stand as an identity: 1..1024 bytes of visible ASCII.
bool usable_identity(const std::string& name);

}  // namespace onelayer
