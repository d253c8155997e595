// OpenSSL, loaded only when a config asks for TLS.
//
// onelayer is not linked against libssl or libcrypto. Mapping them costs
// every process about 1.5 MiB of resident memory at start (libcrypto's
// symbol and relocation tables, and its relocated data), whether or not a
// listener or an upstream has a `tls` block, and most sidecars have none.
// So the shell defines, under OpenSSL's own names, the few dozen OpenSSL
// functions it calls; each passes its arguments on to the function of the
// same name in the library this class opens with dlopen(3) (libssl.so.3,
// which brings libcrypto.so.3), the first time a config with TLS is loaded
// or checked. The code that uses TLS is written against OpenSSL's headers
// as usual; the compiler checks each passing function against the
// header's declaration.
//
// The environment variable ONELAYER_OPENSSL_LIBRARY names another libssl
// to open (a path, or a name for the dynamic loader's search), for an
// OpenSSL 3 built apart from the system's.
#pragma once

#include <string>

namespace onelayer {

class OpenSslLibrary {
 public:
  // Opens the library and finds every function the shell calls, once per
  // process: true when it has (now or before). False, with *error saying
  // why, when the library cannot be opened, lacks a function or is older
  // than OpenSSL 3.0; a later call tries again.
  static bool load(std::string* error);
  // The library load() opens: ONELAYER_OPENSSL_LIBRARY, else libssl.so.3.
  static std::string file_name();
};

}  // namespace onelayer
