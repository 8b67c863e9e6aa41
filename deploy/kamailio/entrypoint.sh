#!/bin/sh
# Turns the environment into kamailio.cfg's defines and runs Kamailio in the foreground.
#   KAMAILIO_DB_URL  postgres://user:password@host:5432/db (the CRM's database; tables in schema kamailio)
#   SIP_DOMAIN       companies are c<id>.<SIP_DOMAIN> (same value as the API's)
#   SIP_TRUNK_URI    where external numbers go, e.g. sip:gw.carrier.example:5060;transport=tcp
#   RPC_IP           address of the JSON-RPC listener (port 5090); never publish it
#   TLS_CERT         PEM certificate chain for SIP over TLS (5061) and wss (8089), valid for *.SIP_DOMAIN
#   TLS_KEY          its private key; both default to /etc/kamailio/tls/{cert,key}.pem. Without the
#                    certificate file Kamailio starts without TLS (5060 and ws on 8080 only).
#   RTPENGINE_SOCK   the media relay's ng socket, e.g. udp:rtpengine:2223; unset: no relay (phones
#                    exchange media directly)
#   SIP_MEDIA_ENCRYPTION  "sdes": desk and mobile phones get SDES-SRTP from the relay (same value as the API's)
set -eu
if [ -n "${RTPENGINE_SOCK:-}" ]; then
  set -- -A WITH_RTPENGINE -A "RTPENGINE_SOCK=\"$RTPENGINE_SOCK\"" "$@"
  if [ "${SIP_MEDIA_ENCRYPTION:-none}" = "sdes" ]; then set -- -A WITH_SRTP "$@"; fi
fi
TLS_CERT="${TLS_CERT:-/etc/kamailio/tls/cert.pem}"
TLS_KEY="${TLS_KEY:-/etc/kamailio/tls/key.pem}"
if [ -r "$TLS_CERT" ] && [ -r "$TLS_KEY" ]; then
  set -- -A WITH_TLS -A "TLS_CERT=\"$TLS_CERT\"" -A "TLS_KEY=\"$TLS_KEY\"" "$@"
else
  echo "kamailio-crm: no TLS certificate at $TLS_CERT: SIP over TLS and wss are off" >&2
fi
: "${KAMAILIO_DB_URL:?set KAMAILIO_DB_URL}"
: "${SIP_DOMAIN:?set SIP_DOMAIN}"
exec kamailio -DD -E -f /etc/kamailio/crm.cfg \
  -A "SIP_DOMAIN=\"$SIP_DOMAIN\"" \
  -A "DBURL=\"$KAMAILIO_DB_URL\"" \
  -A "SQLCON=\"crm=>$KAMAILIO_DB_URL\"" \
  -A "SIP_TRUNK_URI=\"${SIP_TRUNK_URI:-sip:trunk.invalid:5060}\"" \
  -A "RPC_IP=${RPC_IP:-0.0.0.0}" \
  "$@"
