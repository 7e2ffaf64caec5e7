#!/usr/bin/env bash
# How the test-only certificates here were made (EC P-256, valid for 100 years, so the
# tests need no openssl at run time). Nothing secret: these keys guard nothing but tests.
#   ca.pem            a CA that signed the two below
#   server.pem/-key   for 127.0.0.1 and localhost
#   client.pem/-key   a client certificate (for client_auth_type RequireAndVerifyClientCert)
#   encrypted-key.pem server-key.pem under the passphrase "test"
set -euo pipefail
cd "$(dirname "$0")"
days=36500
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/ca-key.pem"
openssl req -x509 -new -key "$tmp/ca-key.pem" -sha256 -days $days -subj "/CN=gputui test CA" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.pem

leaf() {  # name, subject, extensions
  openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/$1.key"
  openssl pkcs8 -topk8 -nocrypt -in "$tmp/$1.key" -out "$1-key.pem"
  openssl req -new -key "$1-key.pem" -subj "$2" -out "$tmp/$1.csr"
  printf '%s\n' "$3" > "$tmp/$1.ext"
  openssl x509 -req -in "$tmp/$1.csr" -CA ca.pem -CAkey "$tmp/ca-key.pem" -CAcreateserial \
    -CAserial "$tmp/ca.srl" -sha256 -days $days -extfile "$tmp/$1.ext" -out "$1.pem"
}
leaf server "/CN=localhost" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost
authorityKeyIdentifier=keyid
subjectKeyIdentifier=hash"
leaf client "/CN=prometheus" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth
authorityKeyIdentifier=keyid
subjectKeyIdentifier=hash"
openssl pkcs8 -topk8 -in server-key.pem -passout pass:test -out encrypted-key.pem
