#include "shell/tls/openssl_library.h"

#include <dlfcn.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace onelayer {
namespace {

// Every OpenSSL function the shell calls (the contexts, tls_channel.cc, tls/,
// and the functions OpenSSL's macros there expand to): its return type,
// name, parameters and the arguments passed on. A function used without
// an entry here fails to link, as libssl is not on the link line.
#define ONELAYER_OPENSSL_FUNCTIONS(F)                                                                             \
  F(const unsigned char*, ASN1_STRING_get0_data, (const ASN1_STRING* x), (x))                                     \
  F(int, ASN1_STRING_length, (const ASN1_STRING* x), (x))                                                         \
  F(void, BIO_clear_flags, (BIO * b, int flags), (b, flags))                                                      \
  F(void*, BIO_get_data, (BIO * b), (b))                                                                          \
  F(int, BIO_get_new_index, (void), ())                                                                           \
  F(BIO_METHOD*, BIO_meth_new, (int type, const char* name), (type, name))                                        \
  F(int, BIO_meth_set_create, (BIO_METHOD * m, int (*create)(BIO*)), (m, create))                                 \
  F(int, BIO_meth_set_ctrl, (BIO_METHOD * m, long (*ctrl)(BIO*, int, long, void*)), (m, ctrl))                    \
  F(int, BIO_meth_set_read_ex, (BIO_METHOD * m, int (*bread)(BIO*, char*, size_t, size_t*)), (m, bread))          \
  F(int, BIO_meth_set_write_ex, (BIO_METHOD * m, int (*bwrite)(BIO*, const char*, size_t, size_t*)), (m, bwrite)) \
  F(BIO*, BIO_new, (const BIO_METHOD* type), (type))                                                              \
  F(void, BIO_set_data, (BIO * b, void* ptr), (b, ptr))                                                           \
  F(void, BIO_set_flags, (BIO * b, int flags), (b, flags))                                                        \
  F(void, BIO_set_init, (BIO * b, int init), (b, init))                                                           \
  F(void, ERR_clear_error, (void), ())                                                                            \
  F(void, ERR_error_string_n, (unsigned long e, char* buf, size_t len), (e, buf, len))                            \
  F(unsigned long, ERR_get_error, (void), ())                                                                     \
  F(unsigned long, ERR_peek_last_error, (void), ())                                                               \
  F(const char*, ERR_reason_error_string, (unsigned long e), (e))                                                 \
  F(void, GENERAL_NAMES_free, (GENERAL_NAMES * a), (a))                                                           \
  F(int, OPENSSL_sk_num, (const OPENSSL_STACK* st), (st))                                                         \
  F(void*, OPENSSL_sk_value, (const OPENSSL_STACK* st, int i), (st, i))                                           \
  F(int, SSL_CTX_check_private_key, (const SSL_CTX* ctx), (ctx))                                                 \
  F(long, SSL_CTX_ctrl, (SSL_CTX * ctx, int cmd, long larg, void* parg), (ctx, cmd, larg, parg))                  \
  F(void, SSL_CTX_free, (SSL_CTX * ctx), (ctx))                                                                   \
  F(void*, SSL_CTX_get_ex_data, (const SSL_CTX* ctx, int idx), (ctx, idx))                                        \
  F(int, SSL_CTX_load_verify_locations, (SSL_CTX * ctx, const char* file, const char* path), (ctx, file, path))  \
  F(SSL_CTX*, SSL_CTX_new, (const SSL_METHOD* meth), (meth))                                                      \
  F(void, SSL_CTX_sess_set_new_cb, (SSL_CTX * ctx, int (*cb)(SSL*, SSL_SESSION*)), (ctx, cb))                     \
  F(int, SSL_CTX_set_alpn_protos, (SSL_CTX * ctx, const unsigned char* protos, unsigned int len),                 \
    (ctx, protos, len))                                                                                           \
  F(void, SSL_CTX_set_alpn_select_cb, (SSL_CTX * ctx, SSL_CTX_alpn_select_cb_func cb, void* arg), (ctx, cb, arg)) \
  F(int, SSL_CTX_set_default_verify_paths, (SSL_CTX * ctx), (ctx))                                               \
  F(int, SSL_CTX_set_ex_data, (SSL_CTX * ctx, int idx, void* data), (ctx, idx, data))                             \
  F(int, SSL_CTX_set_session_id_context, (SSL_CTX * ctx, const unsigned char* sid, unsigned int len),             \
    (ctx, sid, len))                                                                                              \
  F(void, SSL_CTX_set_verify, (SSL_CTX * ctx, int mode, SSL_verify_cb cb), (ctx, mode, cb))                       \
  F(int, SSL_CTX_use_PrivateKey_file, (SSL_CTX * ctx, const char* file, int type), (ctx, file, type))            \
  F(int, SSL_CTX_use_certificate_chain_file, (SSL_CTX * ctx, const char* file), (ctx, file))                     \
  F(SSL_SESSION*, SSL_SESSION_dup, (const SSL_SESSION* src), (src))                                               \
  F(void, SSL_SESSION_free, (SSL_SESSION * s), (s))                                                               \
  F(long, SSL_ctrl, (SSL * s, int cmd, long larg, void* parg), (s, cmd, larg, parg))                              \
  F(int, SSL_do_handshake, (SSL * s), (s))                                                                        \
  F(void, SSL_free, (SSL * s), (s))                                                                               \
  F(void, SSL_get0_alpn_selected, (const SSL* s, const unsigned char** data, unsigned int* len), (s, data, len))  \
  F(X509_VERIFY_PARAM*, SSL_get0_param, (SSL * s), (s))                                                           \
  F(X509*, SSL_get0_peer_certificate, (const SSL* s), (s))                                                        \
  F(SSL_CTX*, SSL_get_SSL_CTX, (const SSL* s), (s))                                                               \
  F(int, SSL_get_error, (const SSL* s, int ret), (s, ret))                                                        \
  F(void*, SSL_get_ex_data, (const SSL* s, int idx), (s, idx))                                                    \
  F(int, SSL_get_verify_mode, (const SSL* s), (s))                                                                \
  F(long, SSL_get_verify_result, (const SSL* s), (s))                                                             \
  F(const char*, SSL_get_version, (const SSL* s), (s))                                                            \
  F(SSL*, SSL_new, (SSL_CTX * ctx), (ctx))                                                                        \
  F(int, SSL_read_ex, (SSL * s, void* buf, size_t num, size_t* got), (s, buf, num, got))                          \
  F(int, SSL_select_next_proto,                                                                                   \
    (unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned int inlen,                     \
     const unsigned char* client, unsigned int client_len),                                                       \
    (out, outlen, in, inlen, client, client_len))                                                                 \
  F(int, SSL_session_reused, (const SSL* s), (s))                                                                 \
  F(int, SSL_set1_host, (SSL * s, const char* host), (s, host))                                                   \
  F(void, SSL_set_accept_state, (SSL * s), (s))                                                                   \
  F(int, SSL_set_alpn_protos, (SSL * s, const unsigned char* protos, unsigned int len), (s, protos, len))        \
  F(void, SSL_set_bio, (SSL * s, BIO * rbio, BIO * wbio), (s, rbio, wbio))                                        \
  F(void, SSL_set_connect_state, (SSL * s), (s))                                                                  \
  F(int, SSL_set_ex_data, (SSL * s, int idx, void* data), (s, idx, data))                                         \
  F(int, SSL_set_session, (SSL * s, SSL_SESSION * session), (s, session))                                         \
  F(int, SSL_shutdown, (SSL * s), (s))                                                                            \
  F(int, SSL_write_ex, (SSL * s, const void* buf, size_t num, size_t* written), (s, buf, num, written))           \
  F(const SSL_METHOD*, TLS_client_method, (void), ())                                                             \
  F(const SSL_METHOD*, TLS_server_method, (void), ())                                                             \
  F(ASN1_STRING*, X509_NAME_ENTRY_get_data, (const X509_NAME_ENTRY* e), (e))                                     \
  F(X509_NAME_ENTRY*, X509_NAME_get_entry, (const X509_NAME* n, int loc), (n, loc))                               \
  F(int, X509_NAME_get_index_by_NID, (const X509_NAME* n, int nid, int last), (n, nid, last))                     \
  F(int, X509_VERIFY_PARAM_set1_ip_asc, (X509_VERIFY_PARAM * p, const char* ip), (p, ip))                         \
  F(void, X509_VERIFY_PARAM_set_hostflags, (X509_VERIFY_PARAM * p, unsigned int flags), (p, flags))               \
  F(void*, X509_get_ext_d2i, (const X509* x, int nid, int* crit, int* idx), (x, nid, crit, idx))                  \
  F(X509_NAME*, X509_get_subject_name, (const X509* x), (x))                                                      \
  F(const char*, X509_verify_cert_error_string, (long n), (n))

// The library's functions, found by load().
struct Functions {
#define ONELAYER_OPENSSL_POINTER(ret, name, params, args) decltype(&::name) name = nullptr;
  ONELAYER_OPENSSL_FUNCTIONS(ONELAYER_OPENSSL_POINTER)
#undef ONELAYER_OPENSSL_POINTER
};

Functions functions;
std::atomic<bool> functions_ready{false};
std::mutex load_mutex;

// Finds every function in `library` (libssl, searched with the libcrypto
// it needs); "" or the first name missing.
std::string find_all(void* library, Functions& f) {
#define ONELAYER_OPENSSL_FIND(ret, name, params, args)                 \
  f.name = reinterpret_cast<decltype(&::name)>(dlsym(library, #name)); \
  if (!f.name) return #name;
  ONELAYER_OPENSSL_FUNCTIONS(ONELAYER_OPENSSL_FIND)
#undef ONELAYER_OPENSSL_FIND
  return "";
}

// The functions, loading the library on first use. Config loading loads it
// before any TLS context is made, with a config error when it cannot; a
// call that gets here first and fails ends the process, as there is no
// OpenSSL to answer it.
[[gnu::always_inline]] inline const Functions& loaded_functions() {
  if (functions_ready.load(std::memory_order_acquire)) [[likely]]
    return functions;
  std::string error;
  if (!OpenSslLibrary::load(&error)) {
    std::fprintf(stderr, "onelayer: OpenSSL is needed here but cannot be loaded: %s\n", error.c_str());
    std::abort();
  }
  return functions;
}

}  // namespace

std::string OpenSslLibrary::file_name() {
  const char* chosen = std::getenv("ONELAYER_OPENSSL_LIBRARY");
  return chosen && *chosen ? chosen : "libssl.so.3";
}

bool OpenSslLibrary::load(std::string* error) {
  std::lock_guard<std::mutex> lock(load_mutex);
  if (functions_ready.load(std::memory_order_acquire)) return true;
  const std::string file = file_name();
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    *error = "cannot open " + file + " (OpenSSL 3): " + (why ? why : "unknown error");
    return false;
  }
  using VersionFn = unsigned long (*)();
  auto version = reinterpret_cast<VersionFn>(dlsym(library, "OpenSSL_version_num"));
  if (!version || version() < 0x30000000UL) {
    *error = file + " is not OpenSSL 3.0 or later";
    dlclose(library);
    return false;
  }
  Functions found;
  if (std::string missing = find_all(library, found); !missing.empty()) {
    *error = file + " has no " + missing;
    dlclose(library);
    return false;
  }
  // Kept open for the life of the process.
  functions = found;
  functions_ready.store(true, std::memory_order_release);
  return true;
}

}  // namespace onelayer

// OpenSSL's functions under their own names, each passing its call on.
extern "C" {
#define ONELAYER_OPENSSL_PASS_ON(ret, name, params, args) \
  ret name params { return onelayer::loaded_functions().name args; }
ONELAYER_OPENSSL_FUNCTIONS(ONELAYER_OPENSSL_PASS_ON)
#undef ONELAYER_OPENSSL_PASS_ON
}
