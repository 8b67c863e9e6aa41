#!/bin/sh
# Runs rtpengine in the foreground, userspace only (no kernel table).
#   RTPENGINE_PUBLIC_IP  the address phones and browsers reach the media ports at (put in the SDP);
#                        defaults to the container's own address
#   RTP_PORT_MIN/MAX     the media port range to publish (UDP), 30000-30199 by default (100 calls)
# The ng control port (2223/udp) is for Kamailio only: never publish it.
set -eu
LOCAL_IP="$(hostname -i | cut -d' ' -f1)"
INTERFACE="$LOCAL_IP"
if [ -n "${RTPENGINE_PUBLIC_IP:-}" ]; then INTERFACE="$LOCAL_IP!$RTPENGINE_PUBLIC_IP"; fi
exec rtpengine --config-file=none -f -E -t -1 \
  -i "$INTERFACE" \
  -n "$LOCAL_IP:2223" \
  -m "${RTP_PORT_MIN:-30000}" -M "${RTP_PORT_MAX:-30199}" \
  -L "${RTPENGINE_LOG_LEVEL:-5}" \
  "$@"
