#!/usr/bin/env bash
# A rootless Podman API service for the tests: Debian's podman, uidmap and
# slirp4netns, a scratch user (bridged-podman) with a subordinate uid range,
# and `podman system service` running as that user on
# /run/user/<its uid>/podman/podman.sock. Idempotent and fast when all is there: it
# then only checks that the service answers. Run as root (.ci/run and
# `make test` run it); prints the engine's address on its last line, e.g.
#   BRIDGED_PODMAN_HOST=unix:///run/user/999/podman/podman.sock
# The tests look for the service there (or at $BRIDGED_PODMAN_HOST) and say
# why they skip when none answers. Docker's daemon is not touched.
set -euo pipefail

user=bridged-podman
home=/var/lib/$user

say() { echo "podman.sh: $*" >&2; }

# The runtime directory must be /run/user/<uid>: Podman's rootless network
# namespace (the Docker API's default bridge network) mounts it from there.
paths() {
  run=/run/user/$(id -u "$user" 2>/dev/null || echo none)
  sock=$run/podman/podman.sock
  host=unix://$sock
}
paths
answers() { curl -fsS --max-time 2 --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; }

if [ "$(id -u)" != 0 ]; then
  if answers; then echo "BRIDGED_PODMAN_HOST=$host"; exit 0; fi
  say "not root: cannot set up the rootless Podman service (run: sudo $0)"
  exit 1
fi

need=()
command -v podman >/dev/null || need+=(podman)
command -v newuidmap >/dev/null || need+=(uidmap)
command -v slirp4netns >/dev/null || need+=(slirp4netns)
command -v runc >/dev/null || need+=(runc)
command -v curl >/dev/null || need+=(curl)
# The init Podman runs as each container's pid 1 (HostConfig.Init): a
# Recommends of Debian's podman, so --no-install-recommends leaves it out.
[ -x /usr/libexec/podman/catatonit ] || need+=(catatonit)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! id "$user" >/dev/null 2>&1; then
  useradd --system --create-home --home-dir "$home" --shell /usr/sbin/nologin "$user"
fi
# A subordinate range of 65536 ids after every range already given out.
for f in /etc/subuid /etc/subgid; do
  touch "$f"
  if ! grep -q "^$user:" "$f"; then
    start=$(awk -F: 'BEGIN{m=100000} {e=$2+$3; if (e>m) m=e} END{print m}' "$f")
    echo "$user:$start:65536" >>"$f"
  fi
done

# The engine's configuration: cgroupfs and a file event log (no systemd
# session here), runc (crun refuses hybrid cgroup hierarchies), native
# overlay storage.
mkdir -p "$home/.config/containers"
cat >"$home/.config/containers/containers.conf.new" <<'EOF'
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
EOF
printf '[storage]\ndriver = "overlay"\n' >"$home/.config/containers/storage.conf.new"
changed=
for f in containers.conf storage.conf; do
  if ! cmp -s "$home/.config/containers/$f.new" "$home/.config/containers/$f"; then
    mv "$home/.config/containers/$f.new" "$home/.config/containers/$f"
    changed=1
  else
    rm "$home/.config/containers/$f.new"
  fi
done
chown -R "$user:" "$home"

# slirp4netns needs the tun device a rootless user may open (Debian's mode).
if [ -c /dev/net/tun ] && [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
  chmod 0666 /dev/net/tun
fi

paths
install -d -m 0755 /run/user
install -d -m 0700 -o "$user" -g "$user" "$run" "$run/podman"

# exec all the way down: the pid of the background job is the service's.
as_user() {
  cd / && exec setpriv --reuid="$user" --regid="$user" --init-groups \
    env -i HOME="$home" XDG_RUNTIME_DIR="$run" PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

pidfile=$run/podman/service.pid
if [ -n "$changed" ] && [ -s "$pidfile" ]; then
  kill "$(cat "$pidfile")" 2>/dev/null || true
  for _ in $(seq 1 50); do answers || break; sleep 0.1; done
fi
if ! answers; then
  say "starting podman system service as $user on $sock"
  rm -f "$sock"
  (as_user setsid podman system service --time=0 "$host") </dev/null >"$run/podman/service.log" 2>&1 &
  echo $! >"$pidfile"
  for _ in $(seq 1 100); do answers && break; sleep 0.1; done
  if ! answers; then
    say "the service does not answer; its log:"
    cat "$run/podman/service.log" >&2
    exit 1
  fi
fi
echo "BRIDGED_PODMAN_HOST=$host"
