# The production agent image: agent-runner plus the Claude Code CLI.
# Building it needs Docker Hub (golang, node base images) and npm; the tests use
# bridged-agent:test instead (`make test-image`), which needs neither.
#
#   docker build -t bridged-agent:latest .

# ---- build the static agent-runner ----
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
# Only the agent-runner's packages: the context holds nothing else
# (.dockerignore), and dockerfile_test.go keeps both lists in step with the
# runner's imports.
COPY agent-runner ./agent-runner
COPY internal/claudecli ./internal/claudecli
COPY internal/ipc ./internal/ipc
COPY internal/schedule ./internal/schedule
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/agent-runner ./agent-runner

# ---- runtime: Debian + Node + the Claude Code CLI ----
FROM node:22-bookworm-slim
ARG CLAUDE_CODE_VERSION=2.1.330
RUN apt-get update \
 && apt-get install -y --no-install-recommends git curl ca-certificates ripgrep procps jq \
 && rm -rf /var/lib/apt/lists/* \
 && npm install -g "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}" \
 && npm cache clean --force \
 && claude --version

# The node image's uid 1000 is "node"; bridged expects a user "agent" with
# HOME /home/agent, where the group's .claude directory is mounted. The
# container runs as the daemon's uid, which need not be 1000: HOME is 1777 so
# claude can write ~/.claude.json whatever the uid.
RUN userdel -r node \
 && groupadd --gid 1000 agent \
 && useradd --uid 1000 --gid 1000 --create-home --home-dir /home/agent --shell /bin/bash agent \
 && mkdir -p /home/agent/.claude /workspace/group /workspace/global /workspace/ipc \
             /workspace/extra /workspace/groups \
 && chown -R agent:agent /home/agent /workspace \
 && chmod 1777 /home/agent

COPY --from=build /out/agent-runner /usr/local/bin/agent-runner

ENV HOME=/home/agent \
    DISABLE_AUTOUPDATER=1 \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
USER 1000:1000
WORKDIR /workspace/group
ENTRYPOINT ["/usr/local/bin/agent-runner"]
