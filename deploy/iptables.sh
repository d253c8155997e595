#!/usr/bin/env bash
# Installs (or, with --undo, removes) the iptables rules that send a pod's
# outbound TCP to onelayer's transparent listener, as Istio's and Linkerd's
# init containers do. Everything it adds lives in its own nat chains,
# ONELAYER_OUTPUT (and ONELAYER_INBOUND with --inbound-port), reached by one
# jump each from OUTPUT (PREROUTING): running it again replaces the chains'
# rules and adds no second jump; --undo removes the jumps and the chains and
# nothing else. See docs/transparent.md.
#
#   deploy/iptables.sh --proxy-uid 1337 [--listener-port 15001]
#       [--exclude-ports 22,9901] [--include-ports 80,8080]
#       [--exclude-cidrs 169.254.169.254/32] [--include-cidrs 10.0.0.0/8]
#       [--inbound-port 15006 --inbound-ports 8080] [--ipv6]
#   deploy/iptables.sh --undo [--ipv6]
#
# Each flag can come from the environment instead: ONELAYER_PROXY_UID,
# ONELAYER_LISTENER_PORT, ONELAYER_EXCLUDE_PORTS, ONELAYER_INCLUDE_PORTS,
# ONELAYER_EXCLUDE_CIDRS, ONELAYER_INCLUDE_CIDRS, ONELAYER_INBOUND_PORT,
# ONELAYER_INBOUND_PORTS, ONELAYER_IPV6=1 (flags win). Lists are comma
# separated. Connections of the proxy's own user id and to loopback are
# never redirected (the proxy's own upstream calls would come back to it).
set -euo pipefail

me="deploy/iptables.sh"
die() {
  echo "$me: $*" >&2
  exit 2
}

proxy_uid="${ONELAYER_PROXY_UID:-}"
listener_port="${ONELAYER_LISTENER_PORT:-15001}"
exclude_ports="${ONELAYER_EXCLUDE_PORTS:-}"
include_ports="${ONELAYER_INCLUDE_PORTS:-}"
exclude_cidrs="${ONELAYER_EXCLUDE_CIDRS:-}"
include_cidrs="${ONELAYER_INCLUDE_CIDRS:-}"
inbound_port="${ONELAYER_INBOUND_PORT:-}"
inbound_ports="${ONELAYER_INBOUND_PORTS:-}"
ipv6="${ONELAYER_IPV6:-0}"
undo=0

while [[ $# -gt 0 ]]; do
  case "$1" in
    --proxy-uid) proxy_uid="${2:-}"; shift 2 ;;
    --listener-port) listener_port="${2:-}"; shift 2 ;;
    --exclude-ports) exclude_ports="${2:-}"; shift 2 ;;
    --include-ports) include_ports="${2:-}"; shift 2 ;;
    --exclude-cidrs) exclude_cidrs="${2:-}"; shift 2 ;;
    --include-cidrs) include_cidrs="${2:-}"; shift 2 ;;
    --inbound-port) inbound_port="${2:-}"; shift 2 ;;
    --inbound-ports) inbound_ports="${2:-}"; shift 2 ;;
    --ipv6) ipv6=1; shift ;;
    --undo) undo=1; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

is_port() { [[ $1 =~ ^[0-9]+$ ]] && ((10#$1 >= 1 && 10#$1 <= 65535)); }
split() { tr ',' ' ' <<<"$1"; }

tools=(iptables)
[[ $ipv6 == 1 ]] && tools+=(ip6tables)
for t in "${tools[@]}"; do
  command -v "$t" >/dev/null 2>&1 || die "$t not found: install the iptables package (Debian: apt-get install iptables)"
done
# Reading the nat table needs CAP_NET_ADMIN: say so instead of iptables' own words.
for t in "${tools[@]}"; do
  if ! err=$("$t" -w -t nat -S OUTPUT 2>&1 >/dev/null); then
    if grep -qiE 'permission denied|not permitted' <<<"$err"; then
      die "$t cannot change the nat table: this needs root with CAP_NET_ADMIN (Kubernetes: securityContext.capabilities.add: [NET_ADMIN] on the init container). $t said: $err"
    fi
    die "$t -t nat failed: $err"
  fi
done

# Chains and jumps, per tool: OUTPUT -> ONELAYER_OUTPUT, PREROUTING -> ONELAYER_INBOUND.
remove_jump() {  # tool, parent chain, our chain
  while "$1" -w -t nat -C "$2" -p tcp -j "$3" 2>/dev/null; do
    "$1" -w -t nat -D "$2" -p tcp -j "$3"
  done
}
remove_chain() {  # tool, chain
  if "$1" -w -t nat -S "$2" >/dev/null 2>&1; then
    "$1" -w -t nat -F "$2"
    "$1" -w -t nat -X "$2"
  fi
}
fresh_chain() {  # tool, chain: exists and is empty
  "$1" -w -t nat -N "$2" 2>/dev/null || "$1" -w -t nat -F "$2"
}

if [[ $undo == 1 ]]; then
  for t in "${tools[@]}"; do
    remove_jump "$t" OUTPUT ONELAYER_OUTPUT
    remove_jump "$t" PREROUTING ONELAYER_INBOUND
    remove_chain "$t" ONELAYER_OUTPUT
    remove_chain "$t" ONELAYER_INBOUND
  done
  echo "$me: removed onelayer's rules (${tools[*]})"
  exit 0
fi

[[ -n $proxy_uid ]] || die "--proxy-uid (or ONELAYER_PROXY_UID) is required: the user id onelayer runs as, whose connections are not redirected"
[[ $proxy_uid =~ ^[0-9]+$ ]] || die "--proxy-uid must be a numeric user id, not '$proxy_uid'"
is_port "$listener_port" || die "--listener-port must be 1..65535, not '$listener_port'"
for p in $(split "$exclude_ports") $(split "$include_ports") $(split "$inbound_ports"); do
  is_port "$p" || die "'$p' is not a port (1..65535)"
done
if [[ -n $inbound_port ]]; then
  is_port "$inbound_port" || die "--inbound-port must be 1..65535, not '$inbound_port'"
  [[ -n $inbound_ports ]] || die "--inbound-port needs --inbound-ports: the app's ports whose incoming connections go to it"
fi

for t in "${tools[@]}"; do
  if [[ $t == ip6tables ]]; then loopback="::1/128"; family=6; else loopback="127.0.0.0/8"; family=4; fi
  add() { "$t" -w -t nat -A "$@"; }
  fresh_chain "$t" ONELAYER_OUTPUT
  add ONELAYER_OUTPUT -m owner --uid-owner "$proxy_uid" -j RETURN
  add ONELAYER_OUTPUT -o lo -j RETURN
  add ONELAYER_OUTPUT -d "$loopback" -j RETURN
  for c in $(split "$exclude_cidrs"); do
    # A CIDR of the other family is skipped (one list serves both tools).
    if [[ $c == *:* && $family == 6 ]] || [[ $c != *:* && $family == 4 ]]; then add ONELAYER_OUTPUT -d "$c" -j RETURN; fi
  done
  for p in $(split "$exclude_ports"); do add ONELAYER_OUTPUT -p tcp --dport "$p" -j RETURN; done
  targets=()
  for c in $(split "$include_cidrs"); do
    if [[ $c == *:* && $family == 6 ]] || [[ $c != *:* && $family == 4 ]]; then targets+=(-d "$c"); fi
  done
  ports=($(split "$include_ports"))
  [[ ${#ports[@]} -gt 0 ]] || ports=(any)
  if [[ -n $include_cidrs && ${#targets[@]} -eq 0 ]]; then
    : # include CIDRs given, none of this family: nothing of this family is redirected
  else
    [[ ${#targets[@]} -gt 0 ]] || targets=(-d any)
    for ((i = 0; i < ${#targets[@]}; i += 2)); do
      dst=()
      [[ ${targets[i+1]} == any ]] || dst=(-d "${targets[i+1]}")
      for p in "${ports[@]}"; do
        port=()
        [[ $p == any ]] || port=(--dport "$p")
        add ONELAYER_OUTPUT -p tcp "${dst[@]}" "${port[@]}" -j REDIRECT --to-ports "$listener_port"
      done
    done
  fi
  "$t" -w -t nat -C OUTPUT -p tcp -j ONELAYER_OUTPUT 2>/dev/null || "$t" -w -t nat -A OUTPUT -p tcp -j ONELAYER_OUTPUT

  if [[ -n $inbound_port ]]; then
    fresh_chain "$t" ONELAYER_INBOUND
    for p in $(split "$inbound_ports"); do
      "$t" -w -t nat -A ONELAYER_INBOUND -p tcp --dport "$p" -j REDIRECT --to-ports "$inbound_port"
    done
    "$t" -w -t nat -C PREROUTING -p tcp -j ONELAYER_INBOUND 2>/dev/null ||
      "$t" -w -t nat -A PREROUTING -p tcp -j ONELAYER_INBOUND
  else
    remove_jump "$t" PREROUTING ONELAYER_INBOUND
    remove_chain "$t" ONELAYER_INBOUND
  fi
done
echo "$me: outbound TCP -> 127.0.0.1:$listener_port (uid $proxy_uid and loopback excluded; ${tools[*]})"
