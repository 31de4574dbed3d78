#!/usr/bin/env bash
# Make a local CA and certificates for trying Brook's (or Kafka's) TLS listeners:
#   scripts/certs.sh OUT_DIR [PASSWORD [SAN...]]
# SAN...: more subject alternative names for the broker certificates, in OpenSSL's form
# (`DNS:brook-1 IP:10.0.0.5`), e.g. the host names brokers reach each other by in
# docker-compose.secured.yml (`scripts/certs.sh certs brook-secret DNS:brook-1 DNS:brook-2 DNS:brook-3`).
# OUT_DIR gets, each in PEM and PKCS12 (password PASSWORD, default "brook-secret"):
#   ca.pem                     the CA certificate (a client's and the broker's trust store)
#   ca.p12                     the same as a PKCS12 trust store
#   broker.pem / broker.key    the broker's certificate (SANs: DNS localhost, IP 127.0.0.1, SAN...; also a
#                              client certificate, for mutual TLS between brokers and controllers)
#                              and unencrypted PKCS#8 key; broker-keystore.pem holds both
#   broker.p12                 the broker's key and chain as a PKCS12 key store
#   broker-encrypted.key       the broker's key as encrypted PKCS#8 under PASSWORD, for
#                              ssl.key.password: `-v1 PBE-SHA1-3DES` (PKCS#12 PBE), the scheme Kafka
#                              on Java 17 decrypts too (not OpenSSL 3's default PBES2);
#                              broker-encrypted-keystore.pem holds it and broker.pem
#   broker-renewed.*           the broker's certificate renewed (same subject and SANs, new key),
#                              to swap in with a dynamic update
#   broker-renamed.*           a broker certificate with another subject (CN=renamed), which a
#                              dynamic update may not swap in
#   client.pem / client.key    a client certificate (CN=brook-client,OU=clients,O=Brook)
#   client-keystore.pem, client.p12
#   other-ca.pem, other-client.pem/.key   a second CA and a client it signed (refused)
#   expired-client.pem/.key    a client certificate of the first CA that has expired
# Broker settings (Kafka's names):
#   listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093
#   ssl.keystore.type=PEM  ssl.keystore.location=OUT_DIR/broker-keystore.pem
#   ssl.truststore.type=PEM  ssl.truststore.location=OUT_DIR/ca.pem  ssl.client.auth=required
set -euo pipefail
out=${1:?usage: certs.sh OUT_DIR [PASSWORD [SAN...]]}
pass=${2:-brook-secret}
shift $(( $# < 2 ? $# : 2 ))
sans="DNS:localhost,IP:127.0.0.1"
for san in "$@"; do
  case $san in
    DNS:?*|IP:?*) sans="$sans,$san" ;;
    *) echo "certs.sh: a SAN is DNS:name or IP:address, not '$san'" >&2; exit 1 ;;
  esac
done
command -v openssl >/dev/null || { echo "certs.sh: openssl is needed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$out"
cd "$out"
days=825

ca() {  # ca NAME SUBJECT
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.pem" -days 3650 \
    -subj "$2" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

leaf() {  # leaf NAME CA SUBJECT EXTENSIONS [openssl x509 date options...]
  local name=$1 ca=$2 subject=$3 ext=$4; shift 4
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$name.key" 2>/dev/null
  openssl req -new -key "$name.key" -subj "$subject" -out "$name.csr" 2>/dev/null
  printf '%s\n' "$ext" > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA "$ca.pem" -CAkey "$ca.key" -CAcreateserial \
    -out "$name.pem" -extfile "$name.ext" "$@" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
  cat "$name.key" "$name.pem" > "$name-keystore.pem"
  openssl pkcs12 -export -in "$name.pem" -inkey "$name.key" -certfile "$ca.pem" -name "$name" \
    -out "$name.p12" -passout "pass:$pass" 2>/dev/null
}

ca ca "/CN=Brook Test CA/O=Brook"
ca other-ca "/CN=Another CA/O=Elsewhere"
server_ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$sans"
client_ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
leaf broker ca "/CN=localhost/O=Brook" "$server_ext" -days $days
openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES -in broker.key -out broker-encrypted.key -passout "pass:$pass"
cat broker-encrypted.key broker.pem > broker-encrypted-keystore.pem
leaf client ca "/O=Brook/OU=clients/CN=brook-client" "$client_ext" -days $days
leaf broker-renewed ca "/CN=localhost/O=Brook" "$server_ext" -days $days
leaf broker-renamed ca "/CN=renamed/O=Brook" "$server_ext" -days $days
leaf other-client other-ca "/O=Elsewhere/CN=intruder" "$client_ext" -days $days
# Valid from 2000-01-01 to 2000-01-02, long expired: `openssl x509` of OpenSSL 3.0 cannot
# back-date, `openssl ca` can.
mkdir -p expired-ca.d && : > expired-ca.d/index.txt
cat > expired-ca.d/ca.cnf <<CNF
[ca]
default_ca = expired
[expired]
database = expired-ca.d/index.txt
new_certs_dir = expired-ca.d
serial = expired-ca.d/serial
default_md = sha256
policy = any
copy_extensions = none
[any]
commonName = supplied
organizationName = optional
[ext]
$client_ext
CNF
echo 01 > expired-ca.d/serial
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out expired-client.key 2>/dev/null
openssl req -new -key expired-client.key -subj "/O=Brook/CN=expired" -out expired-client.csr 2>/dev/null
openssl ca -batch -config expired-ca.d/ca.cnf -cert ca.pem -keyfile ca.key -in expired-client.csr \
  -out expired-client.pem -startdate 20000101000000Z -enddate 20000102000000Z -extensions ext -notext 2>/dev/null
cat expired-client.key expired-client.pem > expired-client-keystore.pem
rm -rf expired-ca.d expired-client.csr
openssl pkcs12 -export -nokeys -in ca.pem -name ca -out ca.p12 -passout "pass:$pass" 2>/dev/null
echo "certs.sh: CA, broker and client certificates in $out (PKCS12 password: $pass)" >&2
