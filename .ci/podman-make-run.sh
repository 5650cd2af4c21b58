#!/usr/bin/env bash
# `BRIDGED_ENGINE=podman make run` as it is deployed, shown end to end: the
# daemon runs as the rootless Podman service's user (bridged-podman, set up
# by .ci/podman.sh), which is in no docker group, on the test image (whose
# claude is the scripted fake), and answers a local chat through that
# user's Podman service. Run as root from the repository (the user is
# switched to with setpriv); it exits 0 when the chat is answered and the
# daemon had no docker group. docs/service.md shows a run.
#
# The user builds a copy of the working tree (tracked and untracked files,
# not ignored ones) in a scratch directory, its modules vendored by root
# first: the user has no module cache and needs no network.
set -euo pipefail

user=bridged-podman
repo=$(git rev-parse --show-toplevel)
say() { echo "podman-make-run: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
  say "run as root: it switches to $user, the rootless Podman service's user"
  exit 1
fi
"$repo/.ci/podman.sh" >/dev/null
uid=$(id -u "$user")
uhome=$(getent passwd "$user" | cut -d: -f6)

work=$(mktemp -d /tmp/podman-make-run.XXXXXX)
chmod 0755 "$work"
src=$work/src home=$work/home
mkdir -p "$src" "$home"
run_pid=
cleanup() {
  if [ -n "$run_pid" ] && kill -0 "$run_pid" 2>/dev/null; then
    kill -TERM -- "-$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

git -C "$repo" ls-files -z --cached --others --exclude-standard |
  (cd "$repo" && tar --null -T - -cf - 2>/dev/null) | tar -xf - -C "$src"
(cd "$src" && go mod vendor)
chown -R "$user:" "$work"

# as_user runs its arguments as the service's user, with only its own
# groups and the environment `make run` needs.
as_user() {
  setpriv --reuid="$user" --regid="$user" --init-groups \
    env -i HOME="$uhome" XDG_RUNTIME_DIR="/run/user/$uid" PATH="$(dirname "$(command -v go)"):/usr/sbin:/usr/bin:/sbin:/bin" \
    GOFLAGS=-mod=vendor GOTOOLCHAIN=local BRIDGED_ENGINE=podman BRIDGED_HOME="$home" \
    ANTHROPIC_API_KEY=sk-ant-placeholder-the-fake-claude-calls-no-api "${limits[@]}" "$@"
}

# Rootless Podman applies no CPU, memory or pids limits without cgroup v2
# delegation, and the daemon refuses a start whose limits were dropped:
# here they are turned off, as the refusal says to.
limits=()
if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
  say "cgroup v1: rootless Podman applies no limits here; running with BRIDGED_CONTAINER_MEMORY, _CPUS and _PIDS at 0"
  limits=(BRIDGED_CONTAINER_MEMORY=0 BRIDGED_CONTAINER_CPUS=0 BRIDGED_CONTAINER_PIDS=0)
fi

say "$user: $(id "$user")"
say "building as $user"
(cd "$src" && as_user make --no-print-directory build >"$work/build.log" 2>&1) || { cat "$work/build.log" >&2; exit 1; }
(cd "$src" && as_user bin/bridged groups add --tools full --name main --main local:main >/dev/null)

say "BRIDGED_ENGINE=podman make run IMAGE=bridged-agent:test (as $user)"
(cd "$src" && exec setsid bash -c "$(declare -f as_user); $(declare -p limits user uhome uid home); as_user make --no-print-directory run IMAGE=bridged-agent:test" \
  >"$work/run.log" 2>&1) &
run_pid=$!

# The daemon is up once its status says it runs (a first run may build the
# test image first).
deadline=$((SECONDS + 600))
until status=$(cd "$src" && as_user bin/bridged status 2>/dev/null) && grep -q '^bridged is running' <<<"$status"; do
  if ! kill -0 "$run_pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
    say "the daemon did not come up; make run's output:"
    tail -n 40 "$work/run.log" >&2
    exit 1
  fi
  sleep 0.5
done
pid=$(sed -n 's/^bridged is running (pid \([0-9]*\).*/\1/p' <<<"$status" | head -n1)
say "daemon pid $pid: $(grep -E '^(Uid|Gid|Groups):' "/proc/$pid/status" | tr -s '\t' ' ' | paste -sd ';')"
docker_gid=$(getent group docker | cut -d: -f3 || true)
if [ -n "$docker_gid" ] && grep -E '^Groups:' "/proc/$pid/status" | grep -qw "$docker_gid"; then
  say "the daemon is in the docker group ($docker_gid)"
  exit 1
fi

say 'bridged chat -m "fake:reply hello from rootless Podman" main'
t0=$(date +%s%N)
reply=$(cd "$src" && as_user bin/bridged chat -m "fake:reply hello from rootless Podman" main)
took=$((($(date +%s%N) - t0) / 1000000))
echo "reply: $reply (${took} ms)"
say "the agent's container, on $user's rootless Podman (podman ps):"
as_user podman ps --format '  {{.Names}}  {{.Image}}  {{.Status}}' >&2
[ "$reply" = "hello from rootless Podman" ]
